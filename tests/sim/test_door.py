"""Admission at the door (sim/door.py, docs/ENGINE.md#admission-at-the-door): vLLM 0.32's caps, checked by hand.

vLLM's rules (vllm/v1/engine/async_llm.py, ``AsyncLLM.check_admission``):
- ``max_num_queued_reqs``: refused when ``current_requests + n > max_num_reqs``, current_requests the unfinished
  requests (waiting + running: the output processor's ``request_states``);
- ``max_num_queued_tokens``: refused when ``current_tokens >= max_queued_tokens``, current_tokens the whole
  ``prompt_len`` of every unfinished request still prefilling (no output yet).
An accepted request is registered at once, so the next arrival sees it; outputs of a step reach the door before the
next step's arrivals; aborts of a step come after its arrivals (the step loop's order).

Every run goes through ``tests.sim.factories.run``: the engine's invariants, the door's counts against a recount
included, are checked after every step. Pool: 8 blocks of 4 tokens, 4 slots, 64-token budget unless changed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from sim import Engine, EngineConfig, RequestSpec, scenario
from sim.admission import rejection_reason
from sim.config import FieldError
from sim.door import over_request_cap, over_token_cap
from sim.events import EventKind, RejectReason
from sim.request import NO_STEP, RequestStatus
from tests.sim.factories import config, events_of, rec, req, run
from tests.sim.strategies import scenarios

QUEUED_REQS, QUEUED_TOKENS = RejectReason.MAX_NUM_QUEUED_REQS, RejectReason.MAX_NUM_QUEUED_TOKENS


def status(trace, request_id: str) -> tuple[str, str]:
    r = rec(trace, request_id)
    return r["final_status"], r["finish_reason"]


# ---- the rules as vLLM writes them --------------------------------------------------------------------------------
def test_the_request_cap_counts_n_and_refuses_only_past_the_cap():
    # current + n > cap: with 3 unfinished and a cap of 4, one more sequence fits (3 + 1 = 4), two do not (3 + 2 = 5)
    assert not over_request_cap(3, 1, 4)
    assert over_request_cap(3, 2, 4)
    assert over_request_cap(4, 1, 4)
    assert over_request_cap(0, 1, 0)  # a cap of 0 refuses every request


def test_the_token_cap_refuses_at_the_cap_whatever_the_new_prompt():
    # current >= cap: a backlog of 99 under a cap of 100 lets any prompt in (even 10,000 tokens); 100 refuses
    assert not over_token_cap(99, 100)
    assert over_token_cap(100, 100)
    assert over_token_cap(0, 0)


# ---- max_num_queued_reqs -------------------------------------------------------------------------------------------
def test_the_request_cap_counts_waiting_and_running_until_they_finish():
    # One slot, cap 2. Each request: prompt 4, answer 4 (first token at the step it is admitted, then 3 decodes).
    # step 0: a arrives (0 unfinished: 0 + 1 <= 2, in), b arrives (1 + 1 <= 2, in), c arrives (2 + 1 > 2: refused);
    #         a runs (steps 0-3), b waits. So the cap lets exactly 2 in: '>' (with '>=' only one would get in).
    # step 3: d arrives while a (running) and b (waiting) are unfinished: 2 + 1 > 2, refused. a finishes at the end
    #         of step 3, after the arrivals.
    # step 4: e arrives: a is gone, b (admitted now) is the one unfinished: 1 + 1 <= 2, in.
    cfg = config(max_num_seqs=1, max_num_queued_reqs=2)
    t = run(cfg, req("a"), req("b"), req("c"), req("d", 3), req("e", 4))
    assert rec(t, "a")["finish_step"] == 3 and rec(t, "b")["first_scheduled_step"] == 4
    assert status(t, "c") == ("REJECTED", "max_num_queued_reqs")
    assert status(t, "d") == ("REJECTED", "max_num_queued_reqs")
    assert status(t, "e")[0] == "FINISHED_LENGTH_CAPPED"
    assert [e.reason for e in events_of(t, 0, "reject")] == [QUEUED_REQS]


def test_a_refused_request_never_enters_the_queue():
    cfg = config(max_num_seqs=1, max_num_queued_reqs=1)
    t = run(cfg, req("a"), req("b"))
    b = rec(t, "b")
    assert (b["final_status"], b["finish_step"], b["first_scheduled_step"], b["num_output_tokens"]) == \
        ("REJECTED", 0, None, 0)
    kinds = [e.kind for e in t.events if t.request_ids[e.row] == "b"]
    assert kinds == [EventKind.REJECT]  # no arrive, no blocked: it was never in the waiting queue
    assert t.steps["num_waiting"][0] == 0  # a runs alone; nobody waits
    assert t.describe(next(e for e in t.events if e.kind is EventKind.REJECT)) == (
        "rejected: the server's unfinished requests (waiting or running) are at its cap (max_num_queued_reqs: 1 "
        "request): HTTP 503, for a load balancer to retry it elsewhere")


def test_arrivals_of_one_step_see_each_other():
    # cap 1: a is registered as it is accepted, so b, in the same step, finds 1 unfinished: 1 + 1 > 1
    t = run(config(max_num_queued_reqs=1), req("a"), req("b"))
    assert status(t, "a")[0] == "FINISHED_LENGTH_CAPPED" and status(t, "b") == ("REJECTED", "max_num_queued_reqs")


def test_a_cap_of_zero_refuses_everybody():
    t = run(config(max_num_queued_reqs=0), req("a"), req("b", 2))
    assert {status(t, i) for i in "ab"} == {("REJECTED", "max_num_queued_reqs")}


def test_an_abort_due_in_a_step_comes_after_that_steps_arrivals():
    # cap 1; a (prompt 4, answer 8) runs from step 0, its client leaves at step 2: the abort is carried out at the
    # start of step 2, after step 2's arrivals. b arriving at step 2 still finds a unfinished (1 + 1 > 1): refused;
    # c at step 3 finds nobody: in.
    t = run(config(max_num_queued_reqs=1), req("a", 0, 4, 8, abort_step=2), req("b", 2), req("c", 3))
    assert status(t, "a") == ("FINISHED_ABORTED", "client_disconnected") and rec(t, "a")["finish_step"] == 2
    assert status(t, "b") == ("REJECTED", "max_num_queued_reqs")
    assert status(t, "c")[0] == "FINISHED_LENGTH_CAPPED"


def test_the_rate_limit_comes_first_and_a_request_refused_at_the_door_takes_no_place_in_its_window():
    # Rate limit 2 a window of 100 steps, cap 1. a (step 0): in (window [0]). b (step 0): the rate limit lets it
    # through (1 of 2), the cap refuses it (1 + 1 > 1): it is not put in the window. a finishes at step 3. c (step
    # 10): 1 in the window, under 2, and 0 unfinished: in. Had b counted, c would be rate limited. d (step 11):
    # the window holds a and c: rate limited, though the cap (c unfinished: 1 + 1 > 1) would refuse it too.
    cfg = config(rate_limit_max_requests=2, rate_limit_window_steps=100, max_num_queued_reqs=1)
    t = run(cfg, req("a"), req("b"), req("c", 10), req("d", 11))
    assert status(t, "b") == ("REJECTED", "max_num_queued_reqs")
    assert status(t, "c")[0] == "FINISHED_LENGTH_CAPPED"
    assert status(t, "d") == ("REJECTED", "rate_limited")


# ---- max_num_queued_tokens -----------------------------------------------------------------------------------------
def long_prefill(cap: int, *later: RequestSpec):
    # A budget of 8 tokens a step: a's 24-token prompt is computed in chunks of 8 at steps 0, 1 and 2; its first
    # token comes at the end of step 2 (7 blocks at its longest: cdiv(24 + 2 - 1, 4), within the 8 of the pool).
    return run(config(max_num_batched_tokens=8, max_num_queued_tokens=cap), req("a", 0, 24, 2), *later)


def test_the_token_cap_counts_the_whole_prompt_of_a_request_partly_prefilled():
    # cap 20. At step 1, a has computed 8 of its 24 prompt tokens (16 left), but the door counts its whole prompt:
    # 24 >= 20, b is refused. At step 2 a has computed 16, still no token: c refused too. At step 3, a's first token
    # (end of step 2) has reached the door: 0 tokens in prefill, d gets in.
    t = long_prefill(20, req("b", 1), req("c", 2), req("d", 3))
    assert t.scheduled_at(0) == [("a", 8)] and t.scheduled_at(1) == [("a", 8)] and rec(t, "a")["first_token_step"] == 2
    assert status(t, "b") == ("REJECTED", "max_num_queued_tokens")
    assert status(t, "c") == ("REJECTED", "max_num_queued_tokens")
    assert status(t, "d")[0] == "FINISHED_LENGTH_CAPPED"


@pytest.mark.parametrize(("cap", "b_gets_in"), [(24, False), (25, True)])
def test_the_token_cap_refuses_at_its_value_and_not_below(cap, b_gets_in):
    # a's 24 prompt tokens are in prefill at step 1: 24 >= 24 refuses b; 24 >= 25 does not, and b's own 4 tokens
    # (24 + 4 = 28, past 25) are not counted: it gets in.
    t = long_prefill(cap, req("b", 1))
    assert (status(t, "b")[0] != "REJECTED") is b_gets_in


def test_a_request_that_prefills_in_one_step_counts_only_in_its_arrival_step():
    # cap 1 (any prompt in prefill fills it). a (prompt 4) arrives at step 0 and b at step 0 after it: 4 >= 1,
    # refused. a's first token comes at the end of step 0, so c at step 1 finds no prompt in prefill: in.
    t = run(config(max_num_queued_tokens=1), req("a"), req("b"), req("c", 1))
    assert status(t, "b") == ("REJECTED", "max_num_queued_tokens") and status(t, "c")[0] != "REJECTED"


def test_a_preempted_request_recomputing_its_prompt_is_not_in_prefill_again():
    # 4 blocks of 4 tokens, 2 slots, cap 1 token (any prompt in prefill fills it). a and b: prompt 4, answer 8.
    # step 0: a in (nothing in prefill), first token at once (1 block).
    # step 1: b in (a has its token: 0 in prefill); a grows to 2 blocks, b takes 1: 1 free. step 2: b's second: 0.
    # step 5: a's 9th token needs a third block, none free: b (last in the running list) is preempted, to recompute
    #         its 8 tokens; it keeps its first token (step 1), so it is not in prefill again.
    # step 6: c (prompt 4) finds 0 tokens in prefill: in. It waits behind b (b needs 2 blocks, 1 is free).
    # step 7: d finds c's 4 prompt tokens in prefill (no token yet): 4 >= 1, refused.
    cfg = EngineConfig(num_blocks=4, block_size=4, max_num_seqs=2, max_num_batched_tokens=64, max_num_queued_tokens=1)
    t = run(cfg, req("a", 0, 4, 8), req("b", 1, 4, 8), req("c", 6), req("d", 7))
    assert rec(t, "b")["preempted_at_steps"] == [5] and rec(t, "b")["first_token_step"] == 1
    assert rec(t, "b")["resumed_at_steps"] == [8] and rec(t, "c")["first_token_step"] == 8
    assert status(t, "c")[0] != "REJECTED"
    assert status(t, "d") == ("REJECTED", "max_num_queued_tokens")


# ---- every decision, recounted from the trace ----------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(case=scenarios())
def test_every_door_decision_follows_vllms_rules_recounted_from_the_trace(case):
    # An oracle apart from sim/door.py: at the arrival of request i at step s (arrivals in step order, file order
    # within a step), the unfinished requests are those accepted before it that end at s or later (a finish or an
    # abort of step s comes after its arrivals), and those in prefill the ones among them whose first token comes at
    # s or later. (The rate limit is off: its windows are not recounted here.)
    cfg, reqs = case
    cfg = cfg.replace(rate_limit_max_requests=0)
    t = run(cfg, *reqs)
    r = t.requests
    accepted: list[int] = []
    for i in sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_step, i)):
        step = reqs[i].arrival_step
        got = t.finish_reason[i] if r["status"][i] == RequestStatus.REJECTED else None
        never = rejection_reason(reqs[i], cfg)
        if never is not None:
            assert got == never
            continue
        unfinished = [j for j in accepted if r["finish_step"][j] >= step]
        in_prefill = sum(reqs[j].prompt_len for j in unfinished
                         if r["first_token_step"][j] == NO_STEP or r["first_token_step"][j] >= step)
        expected = None
        if cfg.max_num_queued_reqs is not None and len(unfinished) + 1 > cfg.max_num_queued_reqs:
            expected = QUEUED_REQS
        elif cfg.max_num_queued_tokens is not None and in_prefill >= cfg.max_num_queued_tokens:
            expected = QUEUED_TOKENS
        assert got == expected, (reqs[i].request_id, step, len(unfinished), in_prefill)
        if expected is None:
            accepted.append(i)


def test_the_invariant_check_catches_door_counts_gone_wrong():
    engine = Engine(config(max_num_queued_tokens=100), [req("a", 0, 4, 8), req("b", 0, 4, 8)], check_invariants=True)
    engine.advance(until_step=2)
    engine._check_invariants()
    engine.door.num_prefill_tokens += 4
    with pytest.raises(AssertionError, match="door's counts"):
        engine._check_invariants()


# ---- bad settings --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"max_num_queued_reqs": -1}, "max_num_queued_reqs", "must be a whole number >= 0, or null for no cap, got -1"),
    ({"max_num_queued_reqs": "8"}, "max_num_queued_reqs", "must be a whole number >= 0, or null for no cap, got '8'"),
    ({"max_num_queued_tokens": 2.5}, "max_num_queued_tokens",
     "must be a whole number >= 0, or null for no cap, got 2.5"),
    ({"max_num_queued_tokens": True}, "max_num_queued_tokens",
     "must be a whole number >= 0, or null for no cap, got True"),
    ({"ttft_slo_ms": -5}, "ttft_slo_ms", "must be >= 0.0 and <= 3600000.0, got -5"),
    ({"tbt_slo_ms": "100"}, "tbt_slo_ms", "must be a finite number, got '100'"),
    ({"tbt_slo_ms": float("inf")}, "tbt_slo_ms", "must be a finite number, got inf"),
    ({"shed_past_ttft_slo": "yes"}, "shed_past_ttft_slo", "must be true or false, got 'yes'"),
])
def test_a_bad_setting_is_named_with_what_is_allowed(changes, field, words):
    with pytest.raises(FieldError) as e:
        EngineConfig(**changes)
    assert (e.value.field, e.value.problem) == (field, words)
    # a scenario file says it from the file's top
    with pytest.raises(scenario.ScenarioError) as e:
        scenario.config_from_dict({"num_blocks": 100, **changes})
    assert str(e.value) == f"config.{field}: {words}"


def test_a_requests_slo_must_be_true_or_false():
    data = {"config": {"num_blocks": 100}, "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4,
                                                          "output_len": 4, "slo": 1}]}
    with pytest.raises(scenario.ScenarioError) as e:
        scenario.scenario_from_dict(data)
    assert str(e.value) == "requests[0]: request 'a': slo must be true or false, got 1"


def test_the_new_keys_load_and_dump_back():
    data = {"name": "door", "config": {"num_blocks": 100, "max_num_queued_reqs": 8, "max_num_queued_tokens": 0,
                                       "ttft_slo_ms": 2000, "tbt_slo_ms": 100.5, "shed_past_ttft_slo": True},
            "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 4, "slo": False},
                         {"id": "b", "arrival_step": 0, "prompt_len": 4, "output_len": 4}]}
    sc = scenario.scenario_from_dict(data)
    assert (sc.config.max_num_queued_reqs, sc.config.max_num_queued_tokens) == (8, 0)
    assert [r.slo for r in sc.requests] == [False, True]
    assert scenario.loads(scenario.dumps(sc)) == sc
    assert "max_num_queued_reqs" not in scenario.scenario_to_dict(sc.with_config(max_num_queued_reqs=None))["config"]
    assert scenario.scenario_to_dict(sc)["requests"][0]["slo"] is False
    assert "slo" not in scenario.scenario_to_dict(sc)["requests"][1]
