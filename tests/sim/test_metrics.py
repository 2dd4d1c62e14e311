"""Metrics conventions on hand examples: finish, queueing delay and TTFT in steps and ms; wasted GPU
time; goodput. Step durations: 5.75 ms + 16 us x prefill tokens + 6 us x decoding requests."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim import metrics, presets
from sim.trace import SCHED_DECODE, SCHED_PREFILL, SCHED_PREFILL_DONE
from tests.sim.factories import config, req, run, schedule

PREFILL_4 = 5.75 + 4 * 0.016  # a step computing a 4-token prompt: 5.814 ms
DECODE_1 = 5.75 + 0.006  # a step decoding one request: 5.756 ms


def _hand_run():
    # One slot. X (prompt 4, 5 tokens) runs steps 0-4. A arrives at step 2 (prompt 4, 3 tokens): queued until the slot
    # frees, first scheduled at step 5 (prefill + token 1), tokens 2, 3 at steps 6, 7.
    return run(config(max_num_seqs=1), req("X", 0, 4, 5), req("A", 2, 4, 3))


def test_step_durations_follow_the_cost_model():
    t = _hand_run()
    assert t.steps["step_ms"].tolist() == pytest.approx([PREFILL_4] + [DECODE_1] * 4 + [PREFILL_4] + [DECODE_1] * 2)
    assert t.steps["time_ms"][-1] == pytest.approx(2 * PREFILL_4 + 6 * DECODE_1)


def test_a_one_token_prefill_costs_as_prefill_not_as_a_decode():
    # A 1-token prompt, and the last 1-token chunk of a 9-token prompt under an 8-token budget, are prompt tokens:
    # 16 us each (and counted as prefill), not the 6 us of a decode; the decodes start after them.
    one = run(config(), req("A", 0, 1, 3))
    assert one.steps["step_ms"].tolist() == pytest.approx([5.75 + 0.016, DECODE_1, DECODE_1])
    chunked = run(config(max_num_batched_tokens=8), req("A", 0, 9, 2))
    assert chunked.steps["num_prefill_tokens"].tolist() == [8, 1, 0]
    assert chunked.steps["num_decode_reqs"].tolist() == [0, 0, 1]
    assert chunked.steps["step_ms"].tolist() == pytest.approx([5.75 + 8 * 0.016, 5.75 + 0.016, DECODE_1])


def test_a_recomputed_request_re_prefills_before_it_decodes_again():
    # 4 blocks of 4, two slots: B (prompt 4, 8 out) is preempted at step 5 and re-prefills its 4 + 5 = 9 tokens
    # from step 8. Under an 8-token budget that takes two steps, 8 tokens and then 1: the last one is prefill
    # too, and generates B's 6th token; B decodes from step 10.
    t = run(config(num_blocks=4, max_num_seqs=2, max_num_batched_tokens=8), req("A", 0, 4, 8), req("B", 0, 4, 8))
    b = t.request_ids.index("B")
    kinds = {int(s): int(k) for s, r, _, k in zip(*t.schedule_entries(), strict=True) if r == b}
    assert [kinds[s] for s in (8, 9, 10)] == [SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_DECODE]
    assert t.steps["num_prefill_tokens"][8:10].tolist() == [8, 1]


def test_latency_conventions_in_steps():
    lat = metrics.request_latencies(_hand_run())
    # A: finish = from the start of its arrival step 2 to the end of step 7 = 6 steps; queue = 5 - 2 = 3 steps;
    # TTFT = to the end of step 5 = 4 steps. X: 5 steps, no queueing, TTFT 1 step.
    assert lat["finish_steps"].tolist() == [5, 6]
    assert lat["queue_steps"].tolist() == [0, 3]
    assert lat["ttft_steps"].tolist() == [1, 4]


def test_latency_conventions_in_ms():
    lat = metrics.request_latencies(_hand_run())
    # A waits through steps 2, 3, 4 (decodes of X): 3 x 5.756 = 17.268 ms; its first token comes at the end of its
    # prefill step: + 5.814 = 23.082 ms; it finishes after two more decode steps: + 2 x 5.756 = 34.594 ms.
    assert lat["queue_ms"][1] == pytest.approx(3 * DECODE_1)
    assert lat["ttft_ms"][1] == pytest.approx(3 * DECODE_1 + PREFILL_4)
    assert lat["finish_ms"][1] == pytest.approx(5 * DECODE_1 + PREFILL_4)
    assert lat["finish_ms"][0] == pytest.approx(PREFILL_4 + 4 * DECODE_1)


def test_summary_statistics():
    s = metrics.summary(_hand_run())
    assert s["finish_steps"] == {"count": 2, "mean": 5.5, "p50": 5.5, "p99": pytest.approx(5.99), "max": 6.0}
    assert s["queue_steps"]["mean"] == 1.5 and s["ttft_steps"]["mean"] == 2.5
    assert (s["num_requests"], s["num_served"], s["num_steps"], s["output_tokens"]) == (2, 2, 8, 8)
    makespan_s = (2 * PREFILL_4 + 6 * DECODE_1) / 1000
    assert s["throughput_tok_s"] == pytest.approx(8 / makespan_s)
    assert s["peak_used_blocks"] == 2  # X after step 4: 4 + 4 = 8 tokens = 2 blocks


def test_aborted_and_rejected_requests_are_not_in_latency_statistics():
    t = run(config(max_num_seqs=1), req("A", 0, 4, 3), req("B", 0, 4, 9, abort_step=5), req("C", 0, 99, 1))
    s = metrics.summary(t)
    assert (s["num_served"], s["num_aborted"], s["num_rejected"]) == (1, 1, 1)
    assert s["finish_steps"]["count"] == 1 and s["finish_steps"]["mean"] == 3.0
    assert math.isnan(metrics.request_latencies(t)["finish_steps"][1])
    assert s["rejected_by_reason"] == {"exceeds_kv_pool": 1}


def test_stats_of_nothing_are_nan():
    s = metrics.stats(np.array([np.nan]))
    assert s["count"] == 0 and math.isnan(s["mean"])


def test_percentiles_are_numpys_to_the_last_bit():
    # metrics.percentiles follows np.percentile's default method step by step: the same floats, not just close ones
    # (p50 and p99 are written to result files), on sizes around the interpolation's edges and on ties.
    rng = np.random.default_rng(7)
    samples = [np.array([3.5]), np.array([1.0, 2.0]), np.full(9, 0.1)]
    for n in (3, 7, 100, 101, 999, 2000):
        samples += [rng.random(n) * 1000, rng.integers(0, 20, n) * 0.1, np.round(rng.lognormal(5, 2, n), 3)]
    for v in samples:
        for percents in ((50, 99), (0, 100), (25, 50, 75), (99.9,)):
            assert metrics.percentiles(v, percents) == np.percentile(v, percents).tolist()
    # 2,000 values: p99 sits at position 1,979.01, between the 1,980th and 1,981st smallest.
    assert metrics.percentiles(np.arange(2000.0), (50, 99)) == [999.5, 1979.01]


def test_mean_batch_and_idle_slots_by_hand():
    # A and B (prompt 4, 4 tokens) on 2 blocks of 4 with 4 slots: both start at step 0 (a block each); at step 1
    # each needs a 2nd block, B is preempted and waits with 3 slots free (steps 1-3) until A finishes at step 3,
    # then runs steps 4-6. Running: 2, then 1 in each of the 6 other steps.
    t = run(config(num_blocks=2), req("A", 0, 4, 4), req("B", 0, 4, 4))
    assert t.steps["num_running"].tolist() == [2, 1, 1, 1, 1, 1, 1]
    assert metrics.mean_num_running(t) == pytest.approx(8 / 7)
    assert metrics.idle_slot_share(t) == pytest.approx(3 / 7)
    assert metrics.idle_slot_share(_hand_run()) == 0.0  # X's slot is the only one: A waits with none free


def _abandon(label):
    p = presets.get("article_abandon")
    return run(p.scenario.config.replace(**dict(p.variants)[label]), *p.scenario.requests)


def test_wasted_gpu_ms_and_goodput_without_abort():
    t = _abandon("no abort")
    # Steps 300..999 each decode only the orphaned request: 700 wasted steps of 5.756 ms.
    assert metrics.wasted_gpu_ms(t) == pytest.approx(700 * DECODE_1)
    s = metrics.summary(t)
    # 1,000 + 100 tokens in 1,100 steps, 700 wasted: goodput is 400 of the 1,100 tokens per second of makespan.
    assert (s["num_steps"], s["output_tokens"], s["wasted_tokens"], s["useful_tokens"]) == (1100, 1100, 700, 400)
    assert s["read_tok_s"] == pytest.approx(400 / (s["makespan_ms"] / 1000))
    assert s["read_tok_s"] / s["throughput_tok_s"] == pytest.approx(400 / 1100)
    assert s["num_served"] == 1  # only "waiting": nobody read the long answer


def test_wasted_gpu_ms_shares_a_step_between_its_tokens():
    # Two requests decode together; one's client is gone but nobody aborts: half of each shared step is wasted.
    # A (prompt 4, 4 tokens, gone at step 1) and B (prompt 4, 4 tokens): step 0 prefills 8 tokens (nothing wasted),
    # steps 1..3 decode both (2 requests: 5.75 + 0.012 ms), A's tokens there are wasted: 3 x 5.762 / 2.
    t = run(config(abort_on_disconnect=False), req("A", 0, 4, 4, abort_step=1), req("B", 0, 4, 4))
    assert t.steps["num_wasted_tokens"].tolist() == [0, 1, 1, 1]
    assert metrics.wasted_gpu_ms(t) == pytest.approx(3 * (5.75 + 0.012) / 2)
    assert metrics.summary(t)["num_served"] == 1


def test_wasted_gpu_ms_counts_a_prefill_for_a_client_who_left():
    # One slot, no abort: B (prompt 40, 2 tokens) waits behind A (4 steps) and its client leaves at step 1, before
    # B ever runs. The server still prefills B's 40 tokens (step 4) and decodes its last token (step 5), all of it
    # for nobody: both steps are wasted whole, the prefill's time with them.
    t = run(config(max_num_seqs=1, num_blocks=16, abort_on_disconnect=False), req("A", 0, 4, 4),
            req("B", 0, 40, 2, abort_step=1))
    assert schedule(t)[4:] == [[("B", 40)], [("B", 1)]]
    assert metrics.wasted_gpu_ms(t) == pytest.approx((5.75 + 40 * 0.016) + DECODE_1)


def test_per_client_rows():
    t = run(config(max_num_seqs=1), req("A", 0, 4, 2, client_id="x"), req("B", 0, 4, 3, client_id="y"),
            req("C", 0, 4, 2, client_id="x"))
    rows = {r["client"]: r for r in metrics.per_client(t)}
    assert (rows["x"]["num_requests"], rows["x"]["output_tokens"], rows["y"]["output_tokens"]) == (2, 4, 3)
    assert rows["x"]["prompt_tokens_served"] == 8
