"""sim.fairness_metrics: Jain's index and max-min shares by hand, the service still waiting, the fair-share index, the
service difference behind the gap chart. (The service gap and VTC's bound as properties: tests/sim/test_properties.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim import fairness_metrics, presets, simulate
from tests.sim.factories import RETURNING, one_slot


@pytest.mark.parametrize(("values", "index"), [
    ([1, 1, 1, 1], 1.0),  # all equal
    ([1, 0, 0, 0], 0.25),  # one gets everything: 1 / n
    ([1, 2, 3], 36 / 42),  # (1 + 2 + 3)^2 / (3 x (1 + 4 + 9))
    ([5], 1.0),
])
def test_jain_index(values, index):
    assert fairness_metrics.jain_index(np.array(values)) == pytest.approx(index)


def test_jain_index_of_nothing_is_nan():
    assert math.isnan(fairness_metrics.jain_index(np.array([])))
    assert math.isnan(fairness_metrics.jain_index(np.array([0, 0])))


def test_max_min_shares_by_hand():
    assert fairness_metrics.max_min_shares(12, np.array([2.0, 100.0, 100.0])).tolist() == [2, 5, 5]
    # Nobody is owed more than it asked for.
    assert fairness_metrics.max_min_shares(12, np.array([3.0, 3.0])).tolist() == [3, 3]
    assert fairness_metrics.max_min_shares(10, np.array([8.0, 8.0])).tolist() == [5, 5]


def test_pending_service_counts_waiting_requests_at_their_full_charge():
    t = simulate(one_slot(), RETURNING)
    pending = fairness_metrics.pending_service(t)
    # a2 (4 + 2 x 2 = 8) waits steps 0-7; b1, b2 (8 each) wait from step 3 to 6 and 10.
    assert pending[0].tolist() == [8, 0] and pending[3].tolist() == [8, 16]
    assert pending[6].tolist() == [8, 8] and pending[8].tolist() == [0, 8] and pending[10].tolist() == [0, 0]


def test_fair_share_index_is_one_when_shares_are_met_and_low_when_not():
    vtc = simulate(one_slot(), RETURNING)
    # One window: a got 24 weighted tokens, b 16, and both got all they asked for.
    one = fairness_metrics.fair_share_index(vtc, window_steps=100)
    assert one["num_windows"] == 1 and one["index"] == pytest.approx(1.0)
    p = presets.get("article_fairness")
    fcfs = simulate(p.scenario.config.replace(rate_limit_max_requests=0), p.scenario.requests)
    assert fairness_metrics.fair_share_index(fcfs)["index"] < 0.8


def test_service_difference_matches_the_service_gap():
    p = presets.get("returning_idle")
    for policy in ("lcf", "vtc"):
        t = simulate(p.scenario.config.replace(policy=policy), p.scenario.requests)
        diff = fairness_metrics.service_difference(t)
        gap = fairness_metrics.service_gap(t)
        both = (fairness_metrics.client_backlog(t) > 0).all(axis=1)
        assert (np.isfinite(diff) == both).all()
        # The gap is the largest range of the curve (with its starting 0) within one stretch; the curve never
        # strays further than the gap from 0.
        assert np.nanmax(np.abs(diff)) <= gap["gap"] + 1e-6
        assert gap["gap"] <= 2 * np.nanmax(np.abs(diff)) + 1e-6


# ---- who waited, who was starved, who was lifted (RETURNING on one slot: a1 steps 0-5, b1 and b2 arrive at 3) ------
def test_the_lift_by_hand():
    # VTC: a's counter is 4 + 2 x 3 = 10 after step 2 (a1's prompt, 3 tokens); b arrives at step 3 with a2 waiting
    # and is lifted from 0 to a's 10. At the end of step 2 a had a2 waiting and a1 running, b nothing.
    lift = fairness_metrics.lifts(simulate(one_slot(), RETURNING))
    assert (lift["count"], lift["step"], lift["client"], lift["amount"], lift["before"], lift["after"]) == (
        1, 3, 1, 10.0, 0.0, 10.0)
    assert (lift["others"], lift["waiting"], lift["running"]) == ([10.0, 0.0], [True, False], [True, False])
    # LCF and FCFS keep counters without lifting them.
    assert fairness_metrics.lifts(simulate(one_slot(policy="lcf"), RETURNING)) == {"count": 0}
    assert fairness_metrics.lifts(simulate(one_slot(policy="fcfs"), RETURNING)) == {"count": 0}


def test_longest_starvation_by_hand():
    # a2 waits from step 0; a1's admission at step 0 ends the first stretch there, so a starves from step 1 until
    # a2 is admitted: step 8 under VTC (7 steps), 10 under LCF (9). b waits from step 3: b1 goes at 6 (3 steps).
    # Under FCFS a2 goes at step 6 (5 steps), and b waits from 3 to b1's admission at 8 (5 steps).
    steps = {policy: fairness_metrics.longest_starvation_steps(simulate(one_slot(policy=policy), RETURNING))
             for policy in ("vtc", "lcf", "fcfs")}
    assert steps == {"vtc": [7, 3], "lcf": [9, 3], "fcfs": [5, 5]}


def test_served_while_all_waiting_by_hand():
    # VTC: a waits steps 0-7 (a2), b steps 3-9: both in steps 3-7, 5 of 12 steps. Then a was served a1's tokens 4-6
    # (steps 3-5) and b b1's prompt and its 2 tokens (4 + 1 at step 6, 1 at step 7).
    t = simulate(one_slot(), RETURNING)
    waiting = fairness_metrics.client_waiting(t)
    assert waiting[:, 0].tolist() == [True] * 8 + [False] * 4 and waiting[:, 1].tolist() == [False] * 3 + [True] * 7 \
        + [False] * 2
    both = fairness_metrics.served_while_all_waiting(t, waiting)
    assert both["step_share"] == pytest.approx(5 / 12) and both["tokens"] == [3.0, 6.0]
    assert fairness_metrics.served_while_all_waiting(t) == both  # (waiting computed when not given)


def test_charges_and_output_share_per_client_by_hand():
    t = simulate(one_slot(), RETURNING)
    # a1 4 + 2 x 6 = 16, a2 4 + 2 x 2 = 8: a's mean 12; b1, b2 8 each. (Client weights are not applied.)
    assert fairness_metrics.request_charges(t).tolist() == [16, 8, 8, 8]
    assert fairness_metrics.mean_request_charge(t) == {"a": 12.0, "b": 8.0}
    # a asks for 8 prompt + 8 answer tokens (half answer), b for 8 + 4 (a third).
    assert fairness_metrics.output_token_share(t) == pytest.approx({"a": 0.5, "b": 1 / 3})
