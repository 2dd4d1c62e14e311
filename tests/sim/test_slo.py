"""SLO targets and goodput (docs/ENGINE.md#slo-targets-and-goodput), on runs small enough to follow by hand.

The cost models here make every step's length a round number: 10 ms a step, plus (where said) 1 ms a prefill
token. The clock at the start of step t is then the sum of the steps before it.
"""

from __future__ import annotations

import json

import pytest

from sim import EngineConfig, metrics
from sim.__main__ import main as cli_main
from sim.config import CostModel, FieldError
from sim.workload import generate, workload_from_dict
from tests.sim.factories import req, run
from tests.sim.test_fast_forward import assert_identical, both_ways

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
    assert s["num_rejected"] == 1 and s["rejected_by_reason"] == {"max_num_queued_reqs": 1}
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


# ---- the fast-forward with the door ------------------------------------------------------------------------------
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
                                       "max_num_queued_reqs": 3,
                                       "cost": {"step_base_ms": 10, "prefill_token_us": 0, "decode_request_us": 0}},
            "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 40},
                         {"id": "b", "arrival_step": 0, "prompt_len": 4, "output_len": 2},
                         {"id": "c", "arrival_step": 0, "prompt_len": 4, "output_len": 2, "slo": False},
                         {"id": "d", "arrival_step": 0, "prompt_len": 4, "output_len": 2}]}
    path, out = tmp_path / "door.json", tmp_path / "out.json"
    path.write_text(json.dumps(data))
    assert cli_main(["run", str(path), "--out", str(out)]) == 0
    # d refused at the door (a, b, c unfinished: 3 + 1 > 3). One slot: a runs steps 0-39 (TTFT 10 ms: met), b 40-41
    # (TTFT 410 ms: missed), c 42-43 (no target: met). 44 steps of 10 ms: 2 / 0.44 s = 4.55 requests/s.
    assert capsys.readouterr().out.strip() == (
        f"door: 4 requests, 44 steps, 0 preemptions, mean finish 42.0 steps, 2 met the SLOs (goodput 4.55 requests/s), "
        f"1 turned away at the door (HTTP 503) -> {out}")
    result = json.loads(out.read_text())
    assert result["requests"][3]["finish_reason"] == "max_num_queued_reqs"
    assert result["summary"]["num_slo_met"] == 2 and result["summary"]["num_ttft_slo_met"] == 2


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
