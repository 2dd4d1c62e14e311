"""Property tests on random small workloads x every policy x preemption mode x chunked prefill x prefix caching x
abort settings. ``run`` checks the engine's invariants after every step (it raises on a violation)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import EngineConfig, RequestSpec, RequestStatus, fairness_metrics, presets, simulate
from sim.admission import rejection_reason, rejection_reasons
from sim.engine import Engine, client_ids_of
from sim.request import RequestTable
from tests.sim.factories import assert_same_trace, run
from tests.sim.strategies import scenarios

pytestmark = pytest.mark.slow  # (seconds each: CI runs them, the fast loop leaves them out)

_ENDED = {RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED, RequestStatus.FINISHED_ABORTED,
          RequestStatus.REJECTED}


@settings(max_examples=300, deadline=None)
@given(case=scenarios())
def test_invariants_hold_and_every_request_ends_with_a_reason(case):
    cfg, reqs = case
    t = run(cfg, *reqs)  # raises on an invariant violation after any step
    for r in t.request_records():
        assert RequestStatus[r["final_status"]] in _ENDED, r
        assert r["finish_reason"], r
        assert r["finish_step"] is not None and r["finish_step"] >= r["arrival_step"], r
        # Never more tokens than the length limit; the last step ran exactly the steps recorded.
        assert r["num_output_tokens"] <= max(s.limit_tokens for s in reqs if s.request_id == r["id"])
    assert t.num_steps == max(r["finish_step"] for r in t.request_records()) + 1
    assert (t.steps["used_blocks"] <= cfg.num_blocks).all()
    assert (t.steps["num_running"] <= cfg.max_num_seqs).all()
    assert (t.steps["cpu_blocks_used"] <= cfg.num_cpu_blocks).all()


@settings(max_examples=200, deadline=None)
@given(case=scenarios())
def test_request_table_follows_the_request_specs_length_rules(case):
    # The table computes every request's lengths on arrays; RequestSpec states the rules one request at a time.
    cfg, reqs = case
    t = RequestTable(reqs, cfg, client_ids_of(reqs))
    assert t.useful_len.tolist() == [r.useful_len for r in reqs]
    assert t.target_len.tolist() == [r.generated_len(cfg.stop_check, cfg.effective_max_model_len) for r in reqs]
    assert t.ends_on_stop.tolist() == [r.ends_on_stop for r in reqs]
    assert t.stops_on_stop.tolist() == [r.stops_on_stop(cfg) for r in reqs]
    assert t.max_blocks.tolist() == [r.max_blocks(cfg) for r in reqs]
    assert rejection_reasons(t, cfg) == [rejection_reason(r, cfg) for r in reqs]
    assert t.arrival_step.tolist() == [r.arrival_step for r in reqs]
    assert t.prefix_len.tolist() == [r.prefix_len for r in reqs] and t.priority.tolist() == [r.priority for r in reqs]


@settings(max_examples=40, deadline=None)
@given(case=scenarios())
def test_same_inputs_give_the_same_trace(case):
    cfg, reqs = case
    a, b = run(cfg, *reqs), run(cfg, *reqs)
    assert_same_trace(a, b)
    assert a.events == b.events


@settings(max_examples=40, deadline=None)
@given(case=scenarios(policies=("vtc", "lcf")))
def test_per_client_counters_never_decrease(case):
    cfg, reqs = case
    t = run(cfg, *reqs)
    for name in ("client_counters", "client_service"):
        assert (np.diff(t.clients[name], axis=0) >= 0).all(), name
    # Service (no lifts) never exceeds the counter (charges + lifts).
    assert (t.clients["client_service"] <= t.clients["client_counters"] + 1e-9).all()


# ---- the VTC fairness bound -----------------------------------------------------------------------------------------
@st.composite
def _two_backlogged_clients(draw):
    """Two clients with all their requests queued at step 0 (continuously backlogged until one runs dry), a pool big
    enough that nothing is ever preempted, and the paper's weighting (input_weight <= output_weight)."""
    reqs = []
    for client in "ab":
        for i in range(draw(st.integers(2, 12))):
            reqs.append(RequestSpec(f"{client}{i}", 0, draw(st.integers(1, 60)), draw(st.integers(1, 60)),
                                    client_id=client))
    seqs = draw(st.integers(1, 4))
    block_size = draw(st.sampled_from([1, 4, 16]))
    probe = EngineConfig(num_blocks=10_000, block_size=block_size)
    num_blocks = seqs * max(r.max_blocks(probe) for r in reqs)  # every running request can grow to its end
    out_w = draw(st.sampled_from([1.0, 2.0, 4.0]))
    weights = {c: draw(st.sampled_from([0.25, 1.0, 3.0])) for c in "ab"}  # VTC share weights per client
    cfg = EngineConfig(num_blocks=num_blocks, block_size=block_size, max_num_seqs=seqs, policy="vtc",
                       max_num_batched_tokens=draw(st.integers(8, 200)), chunked_prefill=draw(st.booleans()),
                       input_weight=draw(st.sampled_from([0.5, 1.0])), output_weight=out_w, client_weights=weights)
    return cfg, reqs


@settings(max_examples=60, deadline=None)
@given(case=_two_backlogged_clients())
def test_vtc_service_gap_stays_within_the_bound(case):
    cfg, reqs = case
    t = run(cfg, *reqs)
    assert t.requests["num_preemptions"].sum() == 0
    gap = fairness_metrics.service_gap(t)
    # Bound: 2 x max(input_weight x longest prompt, output_weight x pool tokens), in weighted tokens: / w_min.
    longest = max(r.prompt_len for r in reqs)
    w_min = min(w for _, w in cfg.client_weights)
    assert gap["bound"] == pytest.approx(
        2 * max(cfg.input_weight * longest, cfg.output_weight * cfg.num_blocks * cfg.block_size) / w_min)
    assert gap["gap"] <= gap["bound"]


def test_the_bound_scales_with_the_weights_as_the_service_does():
    # The hand example below with both clients at weight 0.25: the same schedule, every charge x 4, so the gap
    # and its bound are both 4 x larger (the gap stays inside the bound, as with weight 1).
    reqs = [RequestSpec(f"{c}{i}", 0, 2, 2, client_id=c) for i in range(2) for c in "ab"]
    cfg = EngineConfig(num_blocks=8, block_size=4, max_num_seqs=1, policy="vtc")
    plain = simulate(cfg, reqs)
    quarter = simulate(cfg.replace(client_weights={"a": 0.25, "b": 0.25}), reqs)
    assert quarter.request_records() == plain.request_records()
    assert fairness_metrics.service_gap(quarter)["gap"] == 4 * fairness_metrics.service_gap(plain)["gap"] == 24
    assert fairness_metrics.vtc_bound(quarter) == 4 * fairness_metrics.vtc_bound(plain)
    # The longest prompt counts only among requests that ran: a rejected one (too big for the pool) does not.
    big = RequestSpec("huge", 0, 100, 2, client_id="a")
    assert fairness_metrics.vtc_bound(simulate(cfg, [*reqs, big])) == fairness_metrics.vtc_bound(plain)


def test_service_gap_on_a_hand_example():
    # One slot, clients a and b queued at step 0, prompt 2 / 2 tokens each (charge 2 + 2 x 2 = 6 a request).
    # a0 steps 0-1 (a: 4 after step 0, 6 after 1), b0 steps 2-3, a1 4-5, b1 6-7. service_a - service_b per step:
    # 4, 6, 2, 0, 4, 6, 2, 0; both backlogged during steps 0..5 (b1 waits until 6): max 6 - min 0 (the base before
    # step 0) = 6.
    reqs = [RequestSpec(f"{c}{i}", 0, 2, 2, client_id=c) for i in range(2) for c in "ab"]
    t = simulate(EngineConfig(num_blocks=8, block_size=4, max_num_seqs=1, policy="vtc"), reqs)
    diff = t.clients["client_service"][:, 0] - t.clients["client_service"][:, 1]
    assert diff.tolist() == [4, 6, 2, 0, 4, 6, 2, 0]
    assert fairness_metrics.client_backlog(t)[:, 1].tolist() == [2, 2, 1, 1, 1, 1, 0, 0]
    assert fairness_metrics.service_gap(t)["gap"] == 6.0
    assert fairness_metrics.vtc_bound(t) == 2 * max(1 * 2, 2 * 32)


# Two known limitations, pinned with exact numbers (reported; when fixed, these should assert gap <= bound).
def test_known_limitation_vtc_bound_assumes_input_weight_at_most_output_weight():
    # vtc_bound = 2 x max(w_in x L_input, w_out x M) holds when one request's charge w_in x prompt + w_out x output
    # (prompt + output <= M) is at most w_out x M, i.e. when w_in <= w_out (the paper's 1:2). With w_in 2, w_out 1:
    # one slot, 4 blocks of 4 = 16 tokens; bound = 2 x max(2 x 8, 1 x 16) = 32. All queued at step 0.
    # a0 (8, 8) runs steps 0-7: a +2 x 8 + 8 = 24. b0 (7, 8) 8-15: b +22. b (22) < a (24): b1 (8, 8) 16-23: b +24.
    # service_a - service_b: 24 after step 7, then 24 - 46 = -22 after step 23: gap 46 > 32.
    reqs = [RequestSpec(f"a{i}", 0, 8, 8, client_id="a") for i in range(3)]
    reqs += [RequestSpec("b0", 0, 7, 8, client_id="b")] + [RequestSpec(f"b{i}", 0, 8, 8, client_id="b") for i in (1, 2)]
    cfg = EngineConfig(num_blocks=4, block_size=4, max_num_seqs=1, policy="vtc", input_weight=2.0, output_weight=1.0)
    t = run(cfg, *reqs)
    assert [r["first_scheduled_step"] for r in t.request_records()] == [0, 24, 40, 8, 16, 32]
    gap = fairness_metrics.service_gap(t)
    assert (gap["gap"], gap["bound"]) == (46.0, 32.0)


def test_a_client_returning_while_nobody_waits_is_lifted_and_the_bound_holds():
    # A client returning while the others' requests all run (nobody waiting) is lifted to the counter of the last
    # client to leave the queue (the VTC paper's Algorithm 2, when the queue is empty); without that it kept its old
    # low counter and was then served alone until it caught up, past the bound (LCF below).
    # One slot, 4 blocks of 4 tokens: bound = 2 x max(1 x 4, 2 x 16) = 64. Every request: prompt 4, 12 tokens,
    # charge 4 + 24 = 28. a sends a0, a1, a2 at steps 0, 12, 24, each admitted on arrival (a's queue stays empty):
    # a = 64 after step 25. b's four requests arrive at step 26 while a2 runs: nobody waits, a left the queue last,
    # so b rises to 64. a3, a4 arrive at 30; from then on the two take turns.
    reqs = [RequestSpec(f"a{i}", s, 4, 12, client_id="a") for i, s in enumerate((0, 12, 24, 30, 30))]
    reqs += [RequestSpec(f"b{i}", 26, 4, 12, client_id="b") for i in range(4)]
    t = run(EngineConfig(num_blocks=4, block_size=4, max_num_seqs=1, policy="vtc"), *reqs)
    assert t.clients["client_counters"][26].tolist() == [66.0, 64.0]  # b lifted to a's 64 at step 26
    assert [t.request_records()[i]["first_scheduled_step"] for i in (3, 5, 6, 7)] == [48, 36, 60, 84]  # turns
    gap = fairness_metrics.service_gap(t)
    assert (gap["gap"], gap["bound"]) == (28.0, 64.0)
    lcf = run(EngineConfig(num_blocks=4, block_size=4, max_num_seqs=1, policy="lcf"), *reqs)
    assert fairness_metrics.service_gap(lcf)["gap"] > 64.0  # b kept 0 and was served alone for 84 weighted tokens


@pytest.mark.parametrize("corrupt, message", [
    (lambda e: setattr(e.kv.pool, "num_free", e.kv.pool.num_free - 1), "num_free="),  # a block leaked
    (lambda e: e.table.num_computed_tokens.__iadd__(e.kv.block_size), "block count other than"),
    (lambda e: setattr(e.scheduler, "running", e.scheduler.running[1:]), "queue lengths"),  # dropped from the batch
    (lambda e: setattr(e, "num_done", e.num_done - 1), "a request was lost"),
    (lambda e: e.scheduler.vtc.counters.__isub__(1.0), "a virtual counter decreased"),
])
def test_the_invariant_check_catches_a_broken_state(corrupt, message):
    # The property tests above rely on this check raising: it must see each kind of breakage.
    p = presets.get("toy_pool")
    engine = Engine(p.scenario.config, p.scenario.requests, check_invariants=True)
    engine.advance(until_step=120)  # four requests running, one finished, counters > 0
    engine._check_invariants()  # the real state passes
    corrupt(engine)
    with pytest.raises(AssertionError, match=message):
        engine._check_invariants()
