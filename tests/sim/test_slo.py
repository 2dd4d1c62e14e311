"""SLO targets, goodput and deadline-aware shedding (docs/ENGINE.md#slo-targets-and-goodput,
docs/ENGINE.md#deadline-aware-shedding), on runs small enough to follow by hand.

The cost models here make every step's length a round number: 10 ms a step, plus (where said) 1 ms a prefill
token. The clock at the start of step t is then the sum of the steps before it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import Engine, EngineConfig, fast_forward, metrics
from sim.__main__ import main as cli_main
from sim.config import CostModel, FieldError
from sim.events import EventKind, FinishReason
from sim.workload import generate, workload_from_dict
from tests.sim.factories import rec, req, run
from tests.sim.test_fast_forward import assert_identical, both_ways, long_answers

FLAT = CostModel(step_base_ms=10.0, prefill_token_us=0.0, decode_request_us=0.0)  # every step 10 ms
PREFILL_1MS = CostModel(step_base_ms=10.0, prefill_token_us=1000.0, decode_request_us=0.0)  # + 1 ms a prompt token


# ---- goodput on a hand-computed run -----------------------------------------------------------------------------
def goodput_run():
    # Targets: TTFT 25 ms, TBT 15 ms (largest gap). 2 slots, cap of 4 unfinished requests. Steps cost 10 ms + 1 ms a
    # prefill token.
    #   step 0: a (prompt 4, answer 4) prefills 4: 14 ms, ends at 14. a's first token.
    #   step 1: b, c, d, e arrive. The door: a, b, c, d make 4 unfinished; e: 4 + 1 > 4, refused. a decodes, b
    #           prefills 8 (its first token): 18 ms, ends at 32. c and d wait (2 slots).
    #   step 2: a, b decode: 10 ms, ends at 42; b (answer 2) finishes.
    #   step 3: a decodes (its 4th, finishes), c prefills 4: 14 ms, ends at 56.
    #   step 4: c decodes (finishes), d prefills 4: 14 ms, ends at 70.
    #   step 5: d decodes (finishes): 10 ms, ends at 80.
    # a: TTFT 14 <= 25 met; gaps 32-14 = 18 (b's prefill made step 1 long), 10, 10: largest 18 > 15, missed.
    # b: TTFT 32 - 14 = 18 <= 25 met (from the start of its arrival step); gap 42 - 32 = 10 met: both.
    # c: TTFT 56 - 14 = 42 > 25 missed; gap 70 - 56 = 14 <= 15 met.
    # d: slo false (batch): served, so it meets both, though its TTFT is 70 - 14 = 56.
    # e: rejected at the door: meets none.
    cfg = EngineConfig(num_blocks=64, block_size=4, max_num_seqs=2, max_num_batched_tokens=64, cost=PREFILL_1MS,
                       ttft_slo_ms=25, tbt_slo_ms=15, max_num_queued_reqs=4)
    return run(cfg, req("a", 0, 4, 4), req("b", 1, 8, 2), req("c", 1, 4, 2), req("d", 1, 4, 2, slo=False),
               req("e", 1, 4, 2))


def test_which_request_meets_which_slo_by_hand():
    t = goodput_run()
    assert t.steps["time_ms"].tolist() == [14.0, 32.0, 42.0, 56.0, 70.0, 80.0]
    met = metrics.request_slo(t)
    assert met["slo"].tolist() == [True, True, True, False, True]
    assert met["ttft_slo_met"].tolist() == [True, True, False, True, False]
    assert met["tbt_max_slo_met"].tolist() == [False, True, True, True, False]
    assert met["slo_met"].tolist() == [False, True, False, True, False]


def test_goodput_and_the_shares_by_hand():
    s = metrics.summary(goodput_run())
    # 80 ms of run = 0.08 s. Met both: b and d (2 tokens read each). Served: a, b, c, d.
    assert s["num_rejected"] == 1 and s["rejected_by_reason"] == {"max_num_queued_reqs": 1} and s["num_shed"] == 0
    assert (s["num_slo_requests"], s["num_ttft_slo_met"], s["num_tbt_max_slo_met"], s["num_slo_met"]) == (4, 3, 3, 2)
    assert (s["ttft_slo_share"], s["tbt_max_slo_share"], s["slo_share"]) == (0.6, 0.6, 0.4)  # of 5, e included
    assert s["slo_goodput_req_s"] == pytest.approx(2 / 0.08)  # 25 requests/s
    assert s["slo_goodput_tok_s"] == pytest.approx(4 / 0.08)  # 50 tokens/s
    assert s["throughput_req_s"] == pytest.approx(4 / 0.08)  # 50 served requests/s
    assert s["throughput_tok_s"] == pytest.approx(10 / 0.08)  # a 4 + b 2 + c 2 + d 2 tokens


def test_without_targets_every_served_request_meets_them():
    t = run(EngineConfig(num_blocks=64, block_size=4, max_num_seqs=1), req("a", 0, 4, 4), req("b", 0, 4, 4))
    met = metrics.request_slo(t)
    assert met["slo_met"].all()
    s = metrics.summary(t)
    assert s["slo_goodput_req_s"] == s["throughput_req_s"] and s["slo_share"] == 1.0


# ---- shedding -----------------------------------------------------------------------------------------------------
def shed_config(**changes) -> EngineConfig:
    return EngineConfig(num_blocks=64, block_size=4, max_num_seqs=1, max_num_batched_tokens=64, cost=FLAT,
                        ttft_slo_ms=25, shed_past_ttft_slo=True).replace(**changes)


SHED_REQUESTS = (req("a", 0, 4, 40), req("b", 0, 4, 2), req("c", 0, 4, 2, slo=False), req("d", 12, 4, 2))


def test_a_waiting_request_is_shed_once_its_ttft_target_has_passed():
    # One slot: a decodes steps 0-39; b, c and d wait. 10 ms steps: the clock at the start of step t is 10 t.
    # b (arrived at 0): 10 t - 0 >= 25 first at t = 3: shed at the start of step 3 (at step 2, 20 < 25: a token at
    # the end of step 2 would have made TTFT 30, over the target, but the target had not passed yet).
    # c: slo false, never shed; it runs after a.  d (arrived at 12): 10 t - 120 >= 25 first at t = 15.
    t = run(shed_config(), *SHED_REQUESTS)
    assert (rec(t, "b")["final_status"], rec(t, "b")["finish_reason"], rec(t, "b")["finish_step"]) == \
        ("FINISHED_ABORTED", FinishReason.DEADLINE_PASSED, 3)
    assert rec(t, "d")["finish_step"] == 15 and rec(t, "d")["finish_reason"] == FinishReason.DEADLINE_PASSED
    assert rec(t, "c")["final_status"] == "FINISHED_LENGTH_CAPPED"
    [shed] = [e for e in t.events_at(3) if e.kind is EventKind.ABORT]
    assert t.describe(shed) == ("shed: its time-to-first-token target (ttft_slo_ms: 25 ms) passed while it waited, "
                                "so it left the waiting queue")
    assert t.steps["num_finished"][3] == 1 and t.steps["num_waiting"][3] == 1  # (b gone; c waits)
    s = metrics.summary(t)
    assert (s["num_shed"], s["num_aborted"], s["num_slo_met"]) == (2, 2, 2)  # a (TTFT 10 ms) and c (no target)


@pytest.mark.parametrize(("target", "shed_at"), [(30.0, 3), (30.5, 4), (29.5, 3)])
def test_the_target_passes_when_the_wait_reaches_it(target, shed_at):
    # 10 t >= 30 at t = 3 (equal: a first token now would end at 40, over 30); 10 t >= 30.5 first at t = 4
    t = run(shed_config(ttft_slo_ms=target), *SHED_REQUESTS[:2])
    assert rec(t, "b")["finish_step"] == shed_at


def test_without_a_ttft_target_or_with_slo_false_nothing_is_shed():
    t = run(shed_config(ttft_slo_ms=0), *SHED_REQUESTS)
    assert metrics.summary(t)["num_shed"] == 0
    t = run(shed_config(), req("a", 0, 4, 40), req("b", 0, 4, 2, slo=False))
    assert rec(t, "b")["final_status"] == "FINISHED_LENGTH_CAPPED"


def test_a_request_past_its_target_mid_prefill_is_shed_when_a_preemption_sends_it_back():
    # 6 blocks of 4 tokens, 2 slots, a budget of 4 tokens a step, 10 ms steps, TTFT target 25 ms.
    # step 0: a (prompt 4, answer 12) prefills (the budget is used): b (prompt 16) waits.
    # steps 1-4: a decodes, b is given 3 tokens a step (12 computed; blocks: a 2, b 3: 1 free).
    # step 3: b's target passes (30 >= 25) while it runs: not shed (it is not waiting).
    # step 5: a's 9th token takes the free block; b needs its 4th, none free: b, last in the list, is preempted,
    #         back to the waiting queue, with no token yet.
    # step 6: b waits and its target has passed: shed.
    cfg = EngineConfig(num_blocks=6, block_size=4, max_num_seqs=2, max_num_batched_tokens=4, cost=FLAT,
                       ttft_slo_ms=25, shed_past_ttft_slo=True)
    t = run(cfg, req("a", 0, 4, 12), req("b", 0, 16, 2))
    b = rec(t, "b")
    assert (b["first_scheduled_step"], b["preempted_at_steps"], b["first_token_step"]) == (1, [5], None)
    assert (b["finish_step"], b["finish_reason"]) == (6, FinishReason.DEADLINE_PASSED)


def test_the_shedding_clock_is_the_traces_clock():
    # Idle stretches, busy steps and quiet stretches: the clock shedding reads mid-run is summed as the trace's is
    cfg = shed_config(cost=CostModel(), max_num_seqs=2)
    reqs = [req("a", 0, 40, 60), req("b", 3, 10, 50), req("c", 3, 7, 5), req("d", 200, 30, 30), req("e", 201, 4, 4)]
    engine = Engine(cfg, reqs, check_invariants=True)
    t = engine.run()
    clock = engine.shedder.clock
    assert clock.num_steps == t.num_steps
    assert np.array_equal(clock._ends[:clock.num_steps], t.steps["time_ms"])


# ---- the fast-forward with the door and shedding ------------------------------------------------------------------
def test_a_quiet_stretch_stops_before_a_shed_and_matches_the_step_loop(monkeypatch):
    stretches = []
    advance = fast_forward.advance

    def spy(engine, step, d):
        done = advance(engine, step, d)
        stretches.append((step, done))
        return done

    monkeypatch.setattr(fast_forward, "advance", spy)
    fast, plain = both_ways(shed_config(), list(SHED_REQUESTS))
    assert_identical(fast, plain)
    taken = [(s, n) for s, n in stretches if n]
    assert taken, "no quiet stretch was taken"
    # No stretch covers a step that sheds (3 and 15): each ends before it
    for first, n in taken:
        assert not any(first <= shed < first + n for shed in (3, 15)), (first, n)


@pytest.mark.parametrize(("caps", "reason"), [({"max_num_queued_reqs": 3}, "max_num_queued_reqs"),
                                              ({"max_num_queued_tokens": 8}, "max_num_queued_tokens")])
def test_the_door_alike_both_ways_through_quiet_stretches(caps, reason):
    # A cap on while a long answer decodes in quiet stretches and requests arrive through them.
    cfg = EngineConfig(num_blocks=64, block_size=4, max_num_seqs=1, **caps)
    reqs = [req("a", 0, 4, 60), *(req(f"r{i}", 5 + 7 * i, 4 + i, 3) for i in range(10))]
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)
    assert reason in {r["finish_reason"] for r in fast.request_records()}


# ---- the CLI and the CSV ------------------------------------------------------------------------------------------
def test_the_cli_carries_the_slo_figures(tmp_path, capsys):
    data = {"name": "door", "config": {"num_blocks": 64, "block_size": 4, "max_num_seqs": 1, "ttft_slo_ms": 25,
                                       "shed_past_ttft_slo": True, "max_num_queued_reqs": 3,
                                       "cost": {"step_base_ms": 10, "prefill_token_us": 0, "decode_request_us": 0}},
            "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 40},
                         {"id": "b", "arrival_step": 0, "prompt_len": 4, "output_len": 2},
                         {"id": "c", "arrival_step": 0, "prompt_len": 4, "output_len": 2, "slo": False},
                         {"id": "d", "arrival_step": 0, "prompt_len": 4, "output_len": 2}]}
    path, out = tmp_path / "door.json", tmp_path / "out.json"
    path.write_text(json.dumps(data))
    assert cli_main(["run", str(path), "--out", str(out)]) == 0
    # a runs steps 0-39, c 40-41; b shed at step 3; d refused at the door (a, b, c unfinished: 3 + 1 > 3)
    assert capsys.readouterr().out.strip() == (
        f"door: 4 requests, 42 steps, 0 preemptions, mean finish 41.0 steps, 2 met the SLOs (goodput 4.76 requests/s), "
        f"1 turned away at the door (HTTP 503), 1 shed -> {out}")
    result = json.loads(out.read_text())
    records = {r["id"]: r for r in result["requests"]}
    assert records["b"]["finish_reason"] == "deadline_passed" and records["d"]["finish_reason"] == "max_num_queued_reqs"
    assert result["summary"]["num_shed"] == 1 and result["summary"]["num_slo_met"] == 2


@pytest.mark.parametrize("seed", range(4))
def test_an_overloaded_generated_workload_sheds_alike_both_ways(seed, monkeypatch):
    # Arrivals faster than two slots serve them: queues grow, long decodes go in quiet stretches, and requests are
    # shed within what would have been a stretch (a third of them without SLO; a cap on the door in odd seeds).
    stretches = []
    advance = fast_forward.advance
    monkeypatch.setattr(fast_forward, "advance", lambda e, s, d: stretches.append(advance(e, s, d)) or stretches[-1])
    spec = workload_from_dict({"num_requests": 80, "rate_per_step": 0.08, "output_median": 60, "prompt_median": 100,
                               "seed": seed, "clients": [{"client_id": "chat", "share": 2},
                                                         {"client_id": "batch", "slo": False, "priority": 1}]})
    caps = {"max_num_queued_reqs": 12} if seed % 2 else {}
    cfg = EngineConfig(num_blocks=400, max_num_seqs=2, ttft_slo_ms=150.0, shed_past_ttft_slo=True,
                       policy="priority" if seed >= 2 else "fcfs", **caps)
    fast, plain = both_ways(cfg, generate(spec))
    assert_identical(fast, plain)
    assert metrics.summary(fast)["num_shed"] >= 5 and sum(n > 0 for n in stretches) >= 5


@st.composite
def shedding_cases(draw):
    """The fast-forward's long answers, with shedding on, a target of a few steps (a step is ~6 ms) and few slots, so
    that requests wait while others decode in quiet stretches."""
    cfg, reqs = draw(long_answers())
    return cfg.replace(shed_past_ttft_slo=True, ttft_slo_ms=draw(st.sampled_from([10.0, 25.0, 60.0, 150.0])),
                       max_num_seqs=draw(st.sampled_from([1, 1, 2, 3]))), reqs


@settings(max_examples=80, deadline=None)
@given(case=shedding_cases())
def test_shedding_both_ways_and_each_shed_when_its_target_had_just_passed(case):
    cfg, reqs = case
    fast, plain = both_ways(cfg, reqs)  # (the fast run checks the invariants after every step)
    assert_identical(fast, plain)
    start = np.concatenate([[0.0], fast.steps["time_ms"]])  # the clock at the start of each step
    for i, r in enumerate(fast.request_records()):
        if r["finish_reason"] != FinishReason.DEADLINE_PASSED:
            continue
        t, waited_from = r["finish_step"], start[r["arrival_step"]]
        assert reqs[i].slo and r["first_token_step"] is None
        assert start[t] - waited_from >= cfg.ttft_slo_ms  # passed at the start of t
        # ... and not at the start of t - 1, unless it was not waiting then (a preemption sent it back in t - 1)
        assert start[t - 1] - waited_from < cfg.ttft_slo_ms or t - 1 in r["preempted_at_steps"], r


# ---- two classes of traffic -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("policy", "i1_admitted", "num_met"), [("fcfs", 6, 4), ("priority", 3, 5)])
def test_interactive_traffic_with_slos_beside_batch_traffic_without(policy, i1_admitted, num_met):
    # Two slots, 10 ms steps, TTFT target 35 ms. Batch b1-b4 (slo false, priority 1, 3 tokens each) arrive at step 0;
    # interactive i1 (priority 0, 2 tokens) at step 1, when b1 and b2 hold both slots (steps 0-2).
    # fcfs: b3, b4 take the slots at step 3 (steps 3-5), i1 starts at 6: TTFT 70 - 10 = 60 ms, missed.
    # priority: at step 3 i1 goes first (with b3): TTFT 40 - 10 = 30 ms, met. (No preemption for a priority: slots
    # are not taken back.) The batch requests meet their (no) targets by being served either way.
    cost = CostModel(step_base_ms=10.0, prefill_token_us=0.0, decode_request_us=0.0)
    cfg = EngineConfig(num_blocks=64, block_size=4, max_num_seqs=2, cost=cost, ttft_slo_ms=35, policy=policy)
    batch = [req(f"b{i}", 0, 4, 3, priority=1, slo=False) for i in range(1, 5)]
    t = run(cfg, *batch, req("i1", 1, 4, 2))
    assert t.request_records()[4]["first_scheduled_step"] == i1_admitted
    met = metrics.request_slo(t)
    assert met["slo_met"].tolist() == [True] * 4 + [policy == "priority"]
    s = metrics.summary(t)
    assert t.num_steps == 8 and s["num_slo_met"] == num_met
    assert s["slo_goodput_req_s"] == pytest.approx(num_met / 0.08)


def test_a_generated_client_without_slos_sends_batch_requests():
    spec = workload_from_dict({"num_requests": 20, "clients": [{"client_id": "chat"},
                                                               {"client_id": "batch", "slo": False, "priority": 1}]})
    requests = generate(spec)
    assert {(r.client_id, r.slo, r.priority) for r in requests} == {("chat", True, 0), ("batch", False, 1)}
    with pytest.raises(FieldError) as e:
        workload_from_dict({"clients": [{"client_id": "batch", "slo": "no"}]})
    assert str(e.value) == "workload.clients[batch].slo: must be true or false, got 'no'"
