"""Teaching policies: SJF (true and predicted lengths), the starvation guard, VTC / LCF counters and the lift, the
per-client rate limit. One batch slot unless a test says otherwise, so the admission order is the finish order."""

from __future__ import annotations

import numpy as np
import pytest

from sim import EngineConfig, metrics
from sim.engine import queues_after_step
from sim.request_queue import KeyedQueue
from sim.workload import WorkloadSpec, generate
from tests.sim.factories import assert_same_trace, config, rec, req, run


def _one_slot(**changes):
    return config(**{"max_num_seqs": 1, "num_blocks": 64, **changes})


# ---- SJF ----------------------------------------------------------------------------------------------------------
def test_sjf_runs_the_shortest_answer_first():
    # Outputs 5, 2, 3 arriving together: B (2) at steps 0-1, C (3) at 2-4, A (5) at 5-9.
    t = run(_one_slot(policy="sjf"), req("A", 0, 4, 5), req("B", 0, 4, 2), req("C", 0, 4, 3))
    assert [rec(t, x)["first_scheduled_step"] for x in "BCA"] == [0, 2, 5]
    assert [rec(t, x)["finish_step"] for x in "BCA"] == [1, 4, 9]


def test_sjf_breaks_ties_by_arrival():
    t = run(_one_slot(policy="sjf"), req("A", 1, 4, 2), req("B", 0, 4, 2), req("C", 0, 4, 2))
    # B and C arrive at 0 (B first in the file): B 0-1, C 2-3, A (arrived at 1) 4-5.
    assert [rec(t, x)["first_scheduled_step"] for x in "BCA"] == [0, 2, 4]


def _workload(n=40, seed=1):
    spec = WorkloadSpec(num_requests=n, rate_per_step=0.5, prompt_median=12, prompt_sigma=0.5, output_median=10,
                        output_sigma=0.8, output_max=60, seed=seed)
    return generate(spec)


def test_sjf_predicted_orders_by_the_seeded_predicted_length():
    # Predicted length = round(true length x lognormal(0, sigma)) from default_rng(seed), at least 1.
    outputs = (10, 20, 30, 40, 50)
    sigma, seed = 1.0, 3
    error = np.random.default_rng(seed).lognormal(0.0, sigma, size=len(outputs))
    predicted = np.maximum(np.rint(np.array(outputs) * error), 1).astype(int)
    reqs = [req(f"r{i}", 0, 4, n) for i, n in enumerate(outputs)]
    t = run(_one_slot(policy="sjf_predicted", prediction_error_sigma=sigma, seed=seed), *reqs)
    assert t.requests["predicted_len"].tolist() == predicted.tolist()
    expected_order = sorted(range(len(outputs)), key=lambda i: (predicted[i], i))
    started = t.requests["first_scheduled_step"]
    assert sorted(range(len(outputs)), key=lambda i: started[i]) == expected_order
    # The oracle order would be r0..r4; the noise must have changed it for this seed or the test shows nothing.
    assert expected_order != list(range(len(outputs)))


def test_sjf_predicted_same_seed_same_trace_other_seed_other_predictions():
    reqs = _workload()
    cfg = config(num_blocks=400, max_num_seqs=2, policy="sjf_predicted", prediction_error_sigma=1.0, seed=5)
    assert_same_trace(run(cfg, *reqs), run(cfg, *reqs))
    other = run(cfg.replace(seed=6), *reqs)
    assert other.requests["predicted_len"].tolist() != run(cfg, *reqs).requests["predicted_len"].tolist()


def test_sjf_predicted_with_no_error_is_sjf():
    reqs = _workload()
    cfg = config(num_blocks=400, max_num_seqs=2)
    assert_same_trace(run(cfg.replace(policy="sjf_predicted", prediction_error_sigma=0.0), *reqs),
                      run(cfg.replace(policy="sjf"), *reqs))


# ---- starvation guard -------------------------------------------------------------------------------------------
def _starving():
    # One slot. "long" (100 tokens) and s0 arrive at step 0, then a short (10 tokens) every 5 steps: s_i at 5i,
    # i < 60. Shorts keep arriving faster than they are served (one per 5 steps, 10 steps each), so under SJF the
    # long request waits for all 60 x 10 = 600 steps of short work.
    return [req("long", 0, 4, 100)] + [req(f"s{i}", 5 * i, 4, 10) for i in range(60)]


def test_without_a_guard_sjf_starves_the_long_request():
    t = run(_one_slot(policy="sjf", num_blocks=64), *_starving())
    assert rec(t, "long")["first_scheduled_step"] == 600


@pytest.mark.parametrize(("threshold", "started"), [(30, 30), (31, 40), (50, 50)])
def test_starvation_guard_promotes_after_the_threshold(threshold, started):
    # Shorts run s0 0-9, s1 10-19, s2 20-29, s3 30-39, s4 40-49. "long" has waited since step 0 and is promoted at
    # step `threshold` ahead of every other request; it starts at the first step >= threshold with a free slot:
    # 30 -> 30 (s2 just finished), 31 -> 40 (s3 took the slot at 30), 50 -> 50.
    cfg = _one_slot(policy="sjf", starvation_threshold_steps=threshold, priority_quantum_steps=200)
    t = run(cfg, *_starving())
    assert rec(t, "long")["first_scheduled_step"] == started
    assert rec(t, "long")["finish_step"] == started + 99


def test_starvation_guard_cuts_the_long_requests_wait_under_predicted_sjf_too():
    cfg = _one_slot(policy="sjf_predicted", prediction_error_sigma=0.0)
    no_guard = run(cfg, *_starving())
    guard = run(cfg.replace(starvation_threshold_steps=50), *_starving())
    assert rec(no_guard, "long")["first_scheduled_step"] == 600
    assert rec(guard, "long")["first_scheduled_step"] == 50


def test_promoted_request_is_demoted_after_its_quantum():
    # Rows: 0 long (key 10, waiting since 0), 1 and 2 short (keys 1, 2, waiting since 3). Threshold 5, quantum 2.
    wait_start = np.array([0, 3, 3], dtype=np.int64)
    keys = [10, 1, 2]
    q = KeyedQueue(lambda r: (keys[r],), 3, wait_start, starvation_threshold_steps=5, priority_quantum_steps=2)
    for row in range(3):
        q.add(row)
    q.on_step(4)  # 4 - 5 < 0: nobody has waited 5 steps
    assert q.order() == [1, 2, 0]
    q.on_step(5)  # row 0 waited 5 steps: promoted ahead of all
    assert q.order() == [0, 1, 2]
    assert q.pop() == 0
    q.on_scheduled(np.array([0]))  # one step of running: 1 of its 2 quantum steps left
    q.add(0)  # preempted back into the queue while still promoted: front again
    assert q.order() == [0, 1, 2]
    assert q.pop() == 0
    q.on_scheduled(np.array([0]))  # quantum used up
    assert q.quantum_left[0] == 0
    wait_start[0] = 6  # back in the queue at step 6 (the scheduler sets this at preemption)
    q.add(0)  # demoted: back to its key's place
    assert q.order() == [1, 2, 0]
    q.on_step(10)  # rows 1, 2 (waiting since 3 <= 10 - 5) are promoted; row 0 (since 6) is not
    assert list(q._promoted) == [1, 2]
    q.on_step(11)  # row 0 has now waited 5 steps again: promoted behind the older promotions
    assert list(q._promoted) == [1, 2, 0]
    assert q.order() == [1, 2, 0]


# ---- VTC ----------------------------------------------------------------------------------------------------------
def _counters(t, client):
    return t.clients["client_counters"][:, t.client_ids.index(client)].tolist()


def test_vtc_charges_prompt_at_admission_and_each_output_token():
    # Prompt 10 x input_weight 1 at admission, then 2 per token (the first included): 12, 14, 16.
    t = run(_one_slot(policy="vtc"), req("A", 0, 10, 3, client_id="a"))
    assert _counters(t, "a") == [12.0, 14.0, 16.0]
    assert t.clients["client_service"][:, 0].tolist() == [12.0, 14.0, 16.0]  # no lift: service is the same


def test_vtc_weights_change_the_charges():
    # input_weight 0.5, output_weight 3: 10 x 0.5 + 3 = 8, then 11, 14.
    t = run(_one_slot(policy="vtc", input_weight=0.5, output_weight=3.0), req("A", 0, 10, 3, client_id="a"))
    assert _counters(t, "a") == [8.0, 11.0, 14.0]


def test_vtc_client_weight_divides_the_charge():
    # Client a has weight 2: (10 + 2) / 2 = 6, then +1 a token: 7, 8. Client b (weight 1 by default) pays full.
    t = run(config(policy="vtc", num_blocks=64, client_weights={"a": 2.0}),
            req("A", 0, 10, 3, client_id="a"), req("B", 0, 10, 3, client_id="b"))
    assert _counters(t, "a") == [6.0, 7.0, 8.0]
    assert _counters(t, "b") == [12.0, 14.0, 16.0]


def test_vtc_does_not_charge_recomputed_tokens_again():
    # The FCFS self-preemption of test_engine_steps (4 blocks, two slots): B preempts itself at step 5 and
    # re-prefills 9 tokens at step 8. Charges: a = 3 (prompt) + 8 x 2 = 19; b = 4 + 8 x 2 = 20, as without a
    # preemption: neither the prompt nor the recomputed tokens are charged twice.
    t = run(config(num_blocks=4, max_num_seqs=2, policy="vtc"), req("A", 0, 3, 8, client_id="a"),
            req("B", 0, 4, 8, client_id="b"))
    assert rec(t, "B")["preempted_at_steps"] == [5]
    assert _counters(t, "a")[-1] == 19.0
    assert _counters(t, "b")[-1] == 20.0
    assert _counters(t, "b")[8] - _counters(t, "b")[7] == 2.0  # the resume step: only its new token


def test_vtc_admits_the_head_of_the_client_with_the_lowest_counter():
    # One slot. a1 (prompt 4, 10 out) runs steps 0-9: a's counter 4 + 10 x 2 = 24. b1 arrives at step 1 and is
    # lifted to a's counter then (6, a has a2 waiting). Step 10: b (6) < a (24): b1 before a2, unlike FCFS.
    reqs = (req("a1", 0, 4, 10, client_id="a"), req("a2", 0, 4, 2, client_id="a"), req("b1", 1, 4, 2, client_id="b"))
    t = run(_one_slot(policy="vtc"), *reqs)
    assert rec(t, "b1")["first_scheduled_step"] == 10
    assert rec(t, "a2")["first_scheduled_step"] == 12
    assert rec(run(_one_slot(), *reqs), "a2")["first_scheduled_step"] == 10  # FCFS


def _admissions(t) -> list[str]:
    return [t.request_ids[e.row] for e in t.events if e.kind in ("admit", "resume")]


@pytest.mark.parametrize("policy", ["vtc", "lcf"])
def test_vtc_queue_order_is_the_order_admissions_would_take(policy):
    # X (client c) fills the budget of step 0; a1, a2, b1, b2 wait with counters at 0. Each admission charges its
    # 3-token prompt, so the clients take turns: a1, b1, a2, b2 (not a's requests, then b's). The queue's order
    # says so beforehand, and step 1 admits them in that order.
    cfg = config(num_blocks=99, max_num_seqs=8, max_num_batched_tokens=16, policy=policy)
    reqs = (req("X", 0, 16, 20, client_id="c"), req("a1", 0, 3, 3, client_id="a"),
            req("a2", 0, 3, 3, client_id="a"), req("b1", 0, 3, 3, client_id="b"), req("b2", 0, 3, 3, client_id="b"))
    assert queues_after_step(cfg, reqs, 0)["waiting"] == ["a1", "b1", "a2", "b2"]
    assert _admissions(run(cfg, *reqs)) == ["X", "a1", "b1", "a2", "b2"]


def test_vtc_queue_order_breaks_a_counter_tie_by_the_earlier_head():
    # One slot. After step 60 clients a and b tie at 110 (b0 and a0 ran; b was lifted); a1 (row 3) arrived
    # before b1 (row 4), so a1 goes first, whatever the clients' order of appearance.
    reqs = (req("b0", 0, 1, 1, client_id="b"), req("a0", 0, 100, 5, client_id="a"),
            req("c0", 0, 1, 100, client_id="c"), req("a1", 50, 1, 1, client_id="a"), req("b1", 60, 1, 1, client_id="b"))
    cfg = _one_slot(policy="vtc", num_blocks=999)
    t = run(cfg, *reqs)
    assert _counters(t, "a")[60] == _counters(t, "b")[60] == 110.0
    assert queues_after_step(cfg, reqs, 60)["waiting"] == ["a1", "b1"]
    assert _admissions(t)[-2:] == ["a1", "b1"]


def test_lift_raises_a_returning_client_to_the_lowest_other_backlogged_counter():
    # One slot, clients a, c backlogged from step 0, b arrives at step 6.
    # Step 0: a1 (prompt 10, 5 out) admitted (counters tie at 0, a's head arrived first); a1 runs 0-4: a = 10 + 10 = 20.
    # Step 5: c (0) < a (20): c1 (prompt 2, 1 out) -> c = 2 + 2 = 4.
    # Step 6: b1 arrives to an empty queue; the other backlogged clients are a (a2 waits) at 20 and c (c2 waits)
    # at 4: b is lifted to min(20, 4) = 4. VTC then admits c2 (tie at 4, c's head arrived earlier), b1 at step 7.
    # LCF (no lift) leaves b at 0 and admits b1 at step 6.
    reqs = (req("a1", 0, 10, 5, client_id="a"), req("a2", 0, 1, 1, client_id="a"),
            req("c1", 0, 2, 1, client_id="c"), req("c2", 0, 1, 1, client_id="c"), req("b1", 6, 1, 1, client_id="b"))
    vtc = run(_one_slot(policy="vtc"), *reqs)
    assert _counters(vtc, "a")[4] == 20.0 and _counters(vtc, "c")[5] == 4.0
    assert _counters(vtc, "b")[6] == 4.0
    assert rec(vtc, "c2")["first_scheduled_step"] == 6
    assert rec(vtc, "b1")["first_scheduled_step"] == 7
    lcf = run(_one_slot(policy="lcf"), *reqs)
    assert _counters(lcf, "b")[6] == 1.0 + 2.0  # never lifted: only b1's own prompt 1 + its token
    assert rec(lcf, "b1")["first_scheduled_step"] == 6


def test_with_nobody_waiting_a_joining_client_is_lifted_to_the_last_client_that_left():
    # The VTC paper's Algorithm 2, when the queue is empty: a1 (admitted at step 0, a's counter 4 + 2 = 6 after
    # it) runs and nothing waits when b1 arrives at step 1. a was the last client to leave the queue: b rises to
    # a's 6 (with nobody to compare, it would keep 0 and later be served alone until it caught up). LCF: no lift.
    reqs = (req("a1", 0, 4, 10, client_id="a"), req("b1", 1, 4, 2, client_id="b"))
    t = run(_one_slot(policy="vtc"), *reqs)
    assert _counters(t, "b")[1:10] == [6.0] * 9
    assert _counters(t, "b")[10] == 6.0 + 4.0 + 2.0  # b1 admitted at step 10: prompt 4 and its first token
    assert _counters(run(_one_slot(policy="lcf"), *reqs), "b")[1:10] == [0.0] * 9


def test_service_is_the_counter_without_lifts():
    reqs = (req("a1", 0, 4, 10, client_id="a"), req("a2", 0, 4, 2, client_id="a"), req("b1", 1, 4, 2, client_id="b"))
    t = run(_one_slot(policy="vtc"), *reqs)
    b = t.client_ids.index("b")
    # b: lifted to 6 at step 1, then charged 4 + 2 + 2 = 8 -> counter 14, service 8.
    assert t.clients["client_counters"][-1, b] == 14.0
    assert t.clients["client_service"][-1, b] == 8.0
    assert metrics.per_client(t)[b]["weighted_service"] == 8.0


# ---- rate limit ---------------------------------------------------------------------------------------------------
def test_rate_limit_rejects_over_the_limit_with_a_sliding_window():
    # At most 2 per client per 10 steps. Client a sends at steps 0, 0, 0, 5, 10, 12, 19, 20:
    #   0, 0 accepted; 0 (3rd) and 5 rejected; 10: the two from step 0 have left the window (0 <= 10 - 10) ->
    #   accepted; 12 accepted; 19: window {10, 12} is full -> rejected; 20: 10 left -> accepted.
    # Client b's request at step 0 counts in its own window.
    arrivals = [0, 0, 0, 5, 10, 12, 19, 20]
    reqs = [req(f"a{i}", s, 1, 1, client_id="a") for i, s in enumerate(arrivals)] + [req("b0", 0, 1, 1, client_id="b")]
    t = run(config(rate_limit_max_requests=2, rate_limit_window_steps=10), *reqs)
    status = [rec(t, f"a{i}")["final_status"] for i in range(len(arrivals))]
    ok, no = "FINISHED_LENGTH_CAPPED", "REJECTED"
    assert status == [ok, ok, no, no, ok, ok, no, ok]
    assert rec(t, "b0")["final_status"] == ok
    for i in (2, 3, 6):
        r = rec(t, f"a{i}")
        assert (r["finish_reason"], r["finish_step"], r["first_scheduled_step"]) == ("rate_limited", arrivals[i], None)
    assert metrics.summary(t)["rejected_by_reason"] == {"rate_limited": 3}
    assert metrics.per_client(t)[0]["num_rejected"] == 3


def test_client_weights_for_thousands_of_clients():
    # Each client's weight is looked up by id (the scheduler does it once per client and run); a weight given twice
    # is named, however far apart the two are.
    weights = {f"c{i}": 1.0 + i % 7 for i in range(20_000)}
    cfg = EngineConfig(client_weights=weights)
    assert [cfg.client_weight(f"c{i}") for i in (0, 6, 7, 19_999)] == [1.0, 7.0, 1.0, 1.0 + 19_999 % 7]
    assert cfg.client_weight("nobody") == 1.0
    assert cfg.replace(num_blocks=9).client_weight("c6") == 7.0
    with pytest.raises(ValueError, match="client 'c3' is given two weights"):
        EngineConfig(client_weights=[*weights.items(), ("c3", 2.0)])
