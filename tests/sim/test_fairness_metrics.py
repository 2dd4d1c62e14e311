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
