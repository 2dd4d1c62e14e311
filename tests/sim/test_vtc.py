"""``sim.vtc.VirtualCounters`` on its own: the charges, the bulk charge against step-by-step charges, the lift.
Two clients, a (weight 1) and b (weight 2); input_weight 1, output_weight 2 (the defaults)."""

from __future__ import annotations

import numpy as np

from sim.request import RequestTable
from sim.vtc import VirtualCounters
from tests.sim.factories import config, req

A, B = 0, 1


def _counters(policy: str = "vtc", **changes) -> VirtualCounters:
    cfg = config(**{"policy": policy, "client_weights": {"a": 1.0, "b": 2.0}, **changes})
    specs = [req("a1", 0, 4, 3, client_id="a"), req("b1", 0, 6, 3, client_id="b"), req("b2", 0, 8, 3, client_id="b")]
    return VirtualCounters(cfg, RequestTable(specs, cfg, ["a", "b"]))


def test_prompt_is_charged_by_input_weight_over_client_weight():
    vtc = _counters()
    vtc.charge_prompt(0)  # a1: 1 x 4 / 1
    vtc.charge_prompt(2)  # b2: 1 x 8 / 2
    assert vtc.counters.tolist() == vtc.service.tolist() == [4.0, 4.0]


def test_each_output_token_is_charged_by_output_weight_over_client_weight():
    vtc = _counters()
    per_client = vtc.charge_output(np.array([0, 1, 2]))  # a: 2 / 1; b: two tokens x 2 / 2
    assert per_client.tolist() == [1, 2]
    assert vtc.counters.tolist() == vtc.service.tolist() == [2.0, 2.0]


def test_one_client_charges_plain_floats_and_counts_no_tokens_per_client():
    cfg = config()
    vtc = VirtualCounters(cfg, RequestTable([req("x"), req("y")], cfg, ["default"]))
    assert vtc.charge_output(np.array([0, 1])) is None  # the engine counts one client's tokens itself
    assert vtc.counters.tolist() == [4.0]  # two tokens x 2


def test_bulk_charges_are_the_step_by_step_floats_bit_for_bit():
    # Weight 3 makes 2/3 per token, a charge that rounds: the bulk sum must round exactly as step-by-step does.
    step_by_step, bulk = _counters(client_weights={"a": 3.0, "b": 0.7}), _counters(client_weights={"a": 3.0, "b": 0.7})
    rows = np.array([0, 1, 2])
    step_by_step.counters[:] = bulk.counters[:] = [0.1, 0.3]  # lifted earlier: counters differ from service
    seen = []
    for _ in range(50):
        step_by_step.charge_output(rows)
        seen.append(step_by_step.counters.copy())
    counters, service = bulk.charge_steps(bulk.output_charge(rows), 50)
    assert counters.tobytes() == np.array(seen).tobytes()
    assert bulk.counters.tobytes() == step_by_step.counters.tobytes()
    assert bulk.service.tobytes() == service[-1].tobytes() == step_by_step.service.tobytes()


def test_lift_to_the_lowest_counter_of_the_other_waiting_clients():
    vtc = _counters(client_weights={})
    vtc.counters[:] = [0.0, 10.0]
    vtc.lift(A, waiting_clients=[B], last_left=None)  # a returns while b waits: max(0, 10)
    assert vtc.counters.tolist() == [10.0, 10.0]
    assert vtc.service.tolist() == [0.0, 0.0]  # a lift is no service


def test_lift_with_nobody_waiting_goes_to_the_last_client_that_left():
    vtc = _counters(client_weights={})
    vtc.counters[:] = [3.0, 7.0]
    vtc.lift(A, waiting_clients=[], last_left=B)
    assert vtc.counters.tolist() == [7.0, 7.0]
    vtc.lift(B, waiting_clients=[], last_left=None)  # nobody ever left: no lift
    assert vtc.counters.tolist() == [7.0, 7.0]


def test_lift_never_lowers_a_counter_and_lcf_never_lifts():
    vtc = _counters(client_weights={})
    vtc.counters[:] = [12.0, 5.0]
    vtc.lift(A, waiting_clients=[B], last_left=None)
    assert vtc.counters.tolist() == [12.0, 5.0]
    lcf = _counters("lcf", client_weights={})
    lcf.counters[:] = [0.0, 10.0]
    lcf.lift(A, waiting_clients=[B], last_left=None)
    assert lcf.counters.tolist() == [0.0, 10.0]
