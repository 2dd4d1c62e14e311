"""The run's clock as the run goes (sim/clock.py): the steps ahead of the record are summed as the record sums them,
and the first step whose start reaches a time is the one the clock, read step by step, reaches."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.clock import Clock


@settings(max_examples=200, deadline=None)
@given(now=st.floats(0, 1e4), step_ms=st.floats(0.5, 200), offset=st.floats(0, 2e3), recorded=st.integers(0, 5),
       before=st.one_of(st.none(), st.integers(0, 3000)))
def test_first_step_at_is_the_first_start_reached_step_by_step(now, step_ms, offset, recorded, before):
    clock = Clock()
    if recorded:
        clock.record(now / recorded, recorded)
    target = clock.now + offset
    found = clock.first_step_at(target, step_ms, before)
    # The plain way: add one step at a time, as the record would
    t, k = clock.now, clock.num_steps
    while t < target:
        t, k = t + step_ms, k + 1
    if before is None or k < before:
        assert found == k
    else:
        assert found >= before


def test_the_clock_ahead_is_what_the_record_sums():
    clock = Clock()
    clock.record(np.array([1.1, 2.2, 3.3]), 3)
    short = clock.ahead(0.7, 10).copy()
    ahead = clock.ahead(0.7, 500).copy()  # (the sums so far, extended)
    assert np.array_equal(short, ahead[:10]) and ahead[0] == clock.now
    clock.record(0.7, 499)
    assert np.array_equal(ahead, np.concatenate([[clock.start_ms(3)], clock._ends[3:3 + 499]]))


def test_a_time_past_the_runs_limit_is_estimated_not_summed():
    clock = Clock()
    assert clock.first_step_at(1e12, 0.001, limit=10_000_000) >= 10_000_000  # (a billion billion steps: not summed)
