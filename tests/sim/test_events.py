"""Events are data: their figures agree with the rest of the trace, and ``describe`` words each kind.

The sentences are what the CLI, the CSV export and the step explanations show a reader, so their wording is
pinned here once, on the tiny pool (8 blocks of 4 tokens), with the figures worked out by hand.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sim import presets
from sim.engine import simulate
from sim.events import Event, EventKind, FinishReason, PreemptReason, RejectReason, WaitReason, describe, refusal
from tests.sim.factories import config, events_of, req, run


def _preset_traces():
    for key in ("toy_pool", "recompute_vs_swap", "prefix_cache", "impatient_users", "starvation", "rate_limits"):
        preset = presets.get(key)
        for label, overrides in preset.variants:
            sc = preset.scenario.with_config(**overrides)
            yield f"{key}/{label}", simulate(sc.config, sc.requests)


@pytest.mark.parametrize(("name", "trace"), list(_preset_traces()), ids=lambda v: v if isinstance(v, str) else "")
def test_event_figures_agree_with_the_request_records(name, trace):
    r = trace.requests
    cached, preemptions, finished_tokens = Counter(), Counter(), {}
    for e in trace.events:
        assert isinstance(e.kind, EventKind)
        if e.kind in (EventKind.ADMIT, EventKind.RESUME):
            cached[e.row] += e.num_cached_tokens
            assert 0 < e.num_scheduled_tokens <= e.num_tokens - e.num_cached_tokens
        elif e.kind in (EventKind.PREEMPT, EventKind.SWAP_OUT):
            preemptions[e.row] += 1
            assert e.other_row >= 0 and isinstance(e.reason, PreemptReason)
        elif e.kind is EventKind.FINISH:
            finished_tokens[e.row] = e.num_tokens
        elif e.kind is EventKind.REJECT:
            assert trace.finish_reason[e.row] == e.reason
        elif e.kind is EventKind.BLOCKED:
            assert isinstance(e.reason, WaitReason)
    for row in range(trace.num_requests):
        assert cached[row] == r["num_cached_tokens"][row], name
        assert preemptions[row] == r["num_preemptions"][row], name
    for row, tokens in finished_tokens.items():
        assert tokens == r["num_output_tokens"][row]
    steps = [e.step for e in trace.events]
    assert steps == sorted(steps)  # events_at relies on it


def test_events_at_finds_exactly_the_events_of_a_step():
    trace = next(t for name, t in _preset_traces() if name.startswith("toy_pool"))
    for step in (0, 1, 113, trace.num_steps - 1, trace.num_steps + 5):
        assert trace.events_at(step) == [e for e in trace.events if e.step == step]


def test_events_between_finds_exactly_the_events_of_those_steps():
    trace = next(t for name, t in _preset_traces() if name.startswith("toy_pool"))
    last = trace.num_steps - 1
    for first, end in ((0, 1), (0, trace.num_steps), (1, 114), (113, 113), (last, last + 9), (5, 2)):
        assert trace.events_between(first, end) == [e for e in trace.events if first <= e.step < end]
    assert trace.events_between(1, 114)  # (the window has events: not a vacuous check)


def test_events_of_gives_exactly_the_events_of_those_kinds_in_order():
    trace = next(t for name, t in _preset_traces() if name.startswith("recompute_vs_swap"))
    for kinds in ({EventKind.PREEMPT, EventKind.SWAP_OUT}, {EventKind.ADMIT}, set(EventKind), set()):
        assert trace.events_of(kinds) == [e for e in trace.events if e.kind in kinds]
    assert trace.events_of({EventKind.SWAP_OUT, EventKind.PREEMPT})  # (the preset preempts: not a vacuous check)


def test_reasons_keep_the_strings_of_the_result_file():
    assert FinishReason.LENGTH == "length" and RejectReason.RATE_LIMITED == "rate_limited"
    t = run(config(), req("A", 0, 4, 3))
    assert t.request_records()[0]["finish_reason"] == "length"


# ---- the words, one per kind -------------------------------------------------------------------------------------
def test_admission_and_refusal_words():
    # 8 blocks of 4 tokens. A: 28-token prompt = 7 blocks; B: 8 tokens = 2 blocks, only 1 left.
    t = run(config(), req("A", 0, 28, 1), req("B", 0, 8, 1))
    [admit] = events_of(t, 0, "admit")
    assert t.describe(admit) == "admitted with its whole prompt of 28 tokens"
    [blocked] = events_of(t, 0, "blocked")
    assert (blocked.reason, blocked.num_blocks, blocked.num_free_blocks) == (WaitReason.NO_KV_BLOCKS, 2, 1)
    assert t.describe(blocked) == "needs 2 KV blocks for its whole sequence, only 1 free"
    [finish] = events_of(t, 0, "finish")
    assert t.describe(finish) == "finished (length) after 1 token"


def test_preemption_words_name_who_needed_the_block():
    # A and B each hold 4 blocks after their 13-token prompts... the pool of 8 is full when A needs a 5th block.
    t = run(config(), req("A", 0, 16, 8), req("B", 0, 16, 8))
    [preempt] = [e for e in t.events if e.kind is EventKind.PREEMPT][:1]
    words = t.describe(preempt)
    assert words.startswith("KV pool full: ")
    assert words.endswith(f"; {preempt.num_blocks} blocks freed, KV will be recomputed")
    who = "itself" if preempt.other_row == preempt.row else t.request_ids[preempt.other_row]
    assert f"{who} needed a new block" in words


@pytest.mark.parametrize(("event", "words"), [
    (Event(3, EventKind.BLOCKED, 0, WaitReason.NO_SLOT), "all 2 batch slots (max_num_seqs) are taken"),
    (Event(3, EventKind.BLOCKED, 0, WaitReason.WATERMARK, num_blocks=3, num_free_blocks=4),
     "would leave 1 free block, below the watermark of 2"),
    (Event(3, EventKind.BLOCKED, 0, WaitReason.PREFILL_OVER_BUDGET, num_tokens=3000, num_budget_tokens=1024),
     "its prefill of 3,000 tokens exceeds the 1,024 tokens left (chunked prefill is off)"),
    (Event(3, EventKind.RESUME, 0, num_tokens=2048, num_scheduled_tokens=512, num_cached_tokens=1536),
     "re-prefill of 2,048 tokens, 1,536 tokens from the prefix cache, all in this step"),
    (Event(3, EventKind.RESUME, 0, num_tokens=4096, num_scheduled_tokens=512, num_cached_tokens=1536),
     "re-prefill of 4,096 tokens, 1,536 tokens from the prefix cache; first chunk 512"),
    (Event(3, EventKind.ADMIT, 0, num_tokens=8000, num_scheduled_tokens=504),
     "admitted with a first chunk of 504 tokens"),
    (Event(3, EventKind.ADMIT, 0, num_tokens=8000, num_scheduled_tokens=8000),
     "admitted with its whole prompt of 8,000 tokens"),
    (Event(3, EventKind.SWAP_OUT, 0, PreemptReason.KV_POOL_FULL, num_cpu_blocks=4, other_row=1),
     "KV pool full: B needed a new block and none was free; victim = last request in the running list; "
     "4 blocks copied to CPU memory"),
    (Event(3, EventKind.PREEMPT, 0, PreemptReason.SWAP_SPACE_FULL, num_blocks=5, num_cpu_blocks=5,
           num_free_cpu_blocks=2, other_row=0),
     "KV pool full: itself needed a new block and none was free; victim = last request in the running list; "
     "CPU swap space full (2 of 5 blocks free), fell back to recompute; 5 blocks freed, KV will be recomputed"),
    (Event(3, EventKind.SWAP_IN, 0, num_cpu_blocks=1), "1 block copied back from CPU memory"),
    (Event(3, EventKind.REJECT, 0, RejectReason.RATE_LIMITED), "rejected: the client is over its rate limit"),
    (Event(3, EventKind.DISCONNECT, 0, FinishReason.TIMEOUT), "client timed out; the server notices in 5 steps"),
    (Event(3, EventKind.PROMOTE, 0, num_waited_steps=1200),
     "waited 1,200 steps (starvation guard threshold: 1,000): moved ahead of every request not promoted, "
     "for 50 steps of running"),
    (Event(3, EventKind.ABORT, 0, FinishReason.CLIENT_DISCONNECTED, num_blocks=3),
     "aborted: slot and KV blocks freed now"),
    (Event(3, EventKind.ABORT, 0, FinishReason.DEADLINE_PASSED),
     "shed: its time-to-first-token target (ttft_slo_ms: 2,000 ms) passed while it waited, so it left the waiting "
     "queue"),
    (Event(3, EventKind.ARRIVE, 0), "joined the waiting queue"),
])
def test_describe_words_each_kind(event, words):
    cfg = config(max_num_seqs=2, watermark=0.25, disconnect_detect_delay_steps=5, starvation_threshold_steps=1000,
                 ttft_slo_ms=2000)
    assert describe(event, ["A", "B"], cfg) == words


def test_every_kind_and_reason_has_words():
    cfg = config(max_num_seqs=2)
    a_reason = {EventKind.REJECT: RejectReason.RATE_LIMITED, EventKind.BLOCKED: WaitReason.NO_SLOT,
                EventKind.FINISH: FinishReason.STOP, EventKind.DISCONNECT: FinishReason.TIMEOUT,
                EventKind.ABORT: FinishReason.TIMEOUT, EventKind.PREEMPT: PreemptReason.KV_POOL_FULL,
                EventKind.SWAP_OUT: PreemptReason.KV_POOL_FULL}
    for kind in EventKind:
        assert describe(Event(0, kind, 0, a_reason.get(kind), other_row=0), ["A"], cfg)
    for reason in WaitReason:
        assert describe(Event(0, EventKind.BLOCKED, 0, reason), ["A"], cfg)
    for reason in RejectReason:
        assert describe(Event(0, EventKind.REJECT, 0, reason), ["A"], cfg)


def test_first_step_of_is_the_step_of_the_first_event_of_those_kinds():
    for name, trace in _preset_traces():
        for kinds in ({EventKind.PREEMPT, EventKind.SWAP_OUT}, {EventKind.BLOCKED}, {EventKind.ADMIT}, set()):
            expected = next((e.step for e in trace.events if e.kind in kinds), None)
            assert trace.first_step_of(kinds) == expected, (name, kinds)
    toy = next(t for name, t in _preset_traces() if name.startswith("toy_pool"))
    assert toy.first_step_of({EventKind.PREEMPT}) == 113  # (a preemption late in the run: not the first event)


def test_a_cached_trace_is_left_out_of_the_garbage_collectors_passes():
    # A server keeps hundreds of traces cached: a raw event holding an enum member, or a request's list of
    # preemption steps, stays tracked by the collector, and every full collection walks them all while holding the
    # interpreter lock (0.2-0.4 s with ~1 M events). Raw events hold plain values and the step lists are tuples,
    # so one collection untracks them; the Event records still hold the members.
    import gc

    p = presets.get("recompute_vs_swap")
    sc = p.scenario.with_config(**dict(p.variants)["swap"])
    trace = simulate(sc.config, sc.requests)
    kinds = {raw[1] for raw in trace.raw_events}
    assert {"arrive", "admit", "finish", "swap_out"} <= kinds and all(type(k) is str for k in kinds)
    assert any(trace.preempted_at_steps) and any(trace.swapped_out_at_steps)
    gc.collect()
    assert not any(gc.is_tracked(raw) for raw in trace.raw_events)
    for lists in (trace.preempted_at_steps, trace.resumed_at_steps, trace.swapped_out_at_steps,
                  trace.swapped_in_at_steps):
        assert not any(gc.is_tracked(steps) for steps in lists)
    records = trace.events
    assert {type(e.kind) for e in records} == {EventKind}
    reasons = {type(e.reason) for e in records if e.reason is not None}
    assert reasons and reasons <= {RejectReason, FinishReason, WaitReason, PreemptReason}


# ---- refusals: one sentence per reason (sim.events.refusal), pinned here once --------------------------------------
# The other surfaces (a scenario file's error, the workbench, the lesson pages' warning) read theirs from the home;
# tests/ui/test_refusal_words.py checks that they all say it.
@pytest.mark.parametrize(("reason", "figures", "words"), [
    # 8 blocks of 4 tokens: prompt 30 + answer 10 at its longest = ceil(39 / 4) = 10 blocks.
    (RejectReason.EXCEEDS_KV_POOL, {"num_blocks": 10, "prompt_len": 30, "output_len": 10},
     "it needs 10 KV blocks at its longest (prompt 30 + answer 10 tokens), more than the whole KV pool "
     "(num_blocks: 8 blocks of 4 tokens = 32 tokens)"),
    (RejectReason.EXCEEDS_KV_POOL, {"num_blocks": 1200, "who": "they", "many": True},
     "they need up to 1,200 KV blocks at their longest (prompt + answer), more than the whole KV pool "
     "(num_blocks: 8 blocks of 4 tokens = 32 tokens)"),
    (RejectReason.EXCEEDS_KV_POOL, {},
     "it needs more KV blocks at its longest (prompt + answer) than the whole KV pool (num_blocks: 8 blocks of 4 "
     "tokens = 32 tokens)"),
    (RejectReason.EXCEEDS_TOKEN_BUDGET, {"prompt_len": 3000},
     "it has a prompt of 3,000 tokens, longer than one step's token budget (max_num_batched_tokens: 64 tokens), and "
     "chunked prefill is off"),
    (RejectReason.EXCEEDS_TOKEN_BUDGET, {"prompt_len": 3000, "who": "2 requests", "many": True},
     "2 requests have prompts of up to 3,000 tokens, longer than one step's token budget (max_num_batched_tokens: "
     "64 tokens), and chunked prefill is off"),
    (RejectReason.EXCEEDS_MAX_MODEL_LEN, {"prompt_len": 120},
     "it has a prompt of 120 tokens, longer than the longest sequence the engine accepts (max_model_len: 100 "
     "tokens)"),
    (RejectReason.EXCEEDS_MAX_MODEL_LEN, {},
     "it has a prompt longer than the longest sequence the engine accepts (max_model_len: 100 tokens)"),
    (RejectReason.RATE_LIMITED, {}, "the client is over its rate limit"),
    (RejectReason.MAX_NUM_QUEUED_REQS, {},
     "the server's unfinished requests (waiting or running) are at its cap (max_num_queued_reqs: 3 requests): HTTP "
     "503, for a load balancer to retry it elsewhere"),
    (RejectReason.MAX_NUM_QUEUED_TOKENS, {},
     "the prompts of the requests still in prefill add up to its cap or more (max_num_queued_tokens: 1,000 tokens): "
     "HTTP 503, for a load balancer to retry it elsewhere"),
])
def test_refusal_words_each_reason_with_its_figures(reason, figures, words):
    cfg = config(max_model_len=100, max_num_queued_reqs=3, max_num_queued_tokens=1000)
    assert refusal(reason, cfg, **figures) == words


@pytest.mark.parametrize("reason", list(RejectReason))
def test_a_reject_event_says_its_reasons_sentence(reason):
    # The event carries no figures of the request: the sentence says the rule with the engine's figures.
    cfg = config(max_model_len=100)
    assert describe(Event(3, EventKind.REJECT, 0, reason), ["A"], cfg) == "rejected: " + refusal(reason, cfg)
