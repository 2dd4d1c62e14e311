"""Sweeps that fill in while the reader looks: a sweep never holds up a slider change.

A sweep (one setting over a range of values) costs several simulations on top of the policy runs a page compares,
and on a slider change every one of them is new. So a page's rerun draws the sweep's points that are ready -
cached, finished by a prefetch worker (ui.background), or run while the rerun is still young (RERUN_BUDGET_S) -
and a fragment then polls: each poll runs more of the sweep (for about POLL_BUDGET_S) and redraws the chart with
the points so far, under a line saying how many are still running. When the last point is in, the page reruns
once more, from cache, so its "what to notice" box can speak of the whole sweep; so does a page that read the
sweep incomplete when a prefetch worker finished it before the chart was drawn (no poll would follow).

A page uses it in two steps:

    sweep = sweeps.Sweep(scenarios, point_fn, lp.started_s)  # runs what the rerun has time for
    values = lesson.some_sweep(..., sweep.measure)           # None for a point not ready yet
    ... notices(values if sweep.is_complete else None) ...
    sweeps.show(sweep, lambda measure: draw the chart from lesson.some_sweep(..., measure))
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import streamlit as st

from sim import SimulationError
from sim.scenario import Scenario

from . import runner

RERUN_BUDGET_S = 0.1  # a page's rerun starts no sweep run once it has been running this long
POLL_BUDGET_S = 0.25  # a poll starts no further run once it has been running this long (it always makes one)
POLL_EVERY_S = 0.3  # how often the browser asks for the next poll while points are missing

RUNNING_TEXT = "Running the sweep"  # opens the line under a sweep still filling in (tests look for it)

MeasureFn = Callable[..., Any]  # runner.measure's signature: (scenario, fn, *args) -> fn(trace, *args)


class Sweep:
    """The runs of one sweep, each measured with ``fn`` (a pure module-level function of a trace, as for
    runner.measure). Creating it is the page's pass: it runs the missing points, in order, for as long as the
    page's rerun is young (until ``started_s + budget_s``)."""

    def __init__(self, scenarios: Sequence[Scenario], fn: Callable[..., Any], started_s: float,
                 budget_s: float | None = None):
        self.scenarios = list(scenarios)
        self.fn = fn
        self._keys = [runner.scenario_key(sc) for sc in self.scenarios]
        # The page read ``is_complete`` as False (its notices then left the sweep out): ``show`` must rerun it.
        self.has_read_incomplete = False
        self.advance(started_s + (RERUN_BUDGET_S if budget_s is None else budget_s))

    def advance(self, deadline_s: float, min_runs: int = 0) -> int:
        """Run missing points in sweep order until ``time.perf_counter()`` passes ``deadline_s``, but at least
        ``min_runs`` of them (a prefetch worker may be running the others meanwhile). Returns the runs made."""
        made = 0
        for scenario, key in zip(self.scenarios, self._keys, strict=True):
            if runner.is_ready(key):
                continue
            if made >= min_runs and time.perf_counter() >= deadline_s:
                break
            runner.measure(scenario, self.fn)
            made += 1
        return made

    @property
    def num_ready(self) -> int:
        return sum(runner.is_ready(key) for key in self._keys)

    @property
    def is_complete(self) -> bool:
        complete = self.num_ready == len(self._keys)
        self.has_read_incomplete |= not complete
        return complete

    def measure(self, scenario: Scenario, fn: Callable[..., Any], *args: Any) -> Any | None:
        """``runner.measure(scenario, fn, *args)`` if that run is ready (never runs it here); None if not."""
        return runner.measure(scenario, fn, *args) if runner.is_ready(runner.scenario_key(scenario)) else None


def show(sweep: Sweep, draw: Callable[[MeasureFn], None]) -> None:
    """Draw a sweep's section with ``draw(measure)`` (``measure`` gives None for a point not run yet). With points
    missing it is a fragment the browser polls every POLL_EVERY_S: each poll runs more of the sweep and redraws;
    the poll that finds it complete reruns the whole page (all cached), which draws it once more, whole. A sweep
    the page read incomplete that is complete by now (a worker's last point landed meanwhile) reruns the page at
    once: with nothing left to poll, its notices would otherwise never see the sweep."""
    if sweep.is_complete:
        if sweep.has_read_incomplete:
            st.rerun()  # (every point is ready, so the rerun reads the sweep complete: this happens once)
        draw(sweep.measure)
        return
    is_page_run = [True]

    def section() -> None:
        if not is_page_run[0]:
            # A run that cannot finish: the runner keeps it as done (with its error), so the polls go on to the
            # rest, and the page's rerun at the end shows the error where it asks for that point.
            with contextlib.suppress(SimulationError, ValueError):
                sweep.advance(time.perf_counter() + POLL_BUDGET_S, min_runs=1)  # (the worker may have the rest)
        num_ready, total = sweep.num_ready, len(sweep.scenarios)  # a point landing later: the next poll's
        if num_ready == total and not is_page_run[0]:
            st.rerun()  # the page's notices and the rest of it now see the whole sweep (from cache)
        is_page_run[0] = False
        if num_ready < total:
            st.progress(num_ready / total)  # (how far: the line under it says it in words)
            st.caption(f":material/hourglass_top: {RUNNING_TEXT}: {num_ready} of {total} simulations done; "
                       f"the chart fills in as they finish (a slider moved meanwhile does not wait for them).")
        draw(sweep.measure)

    st.fragment(section, run_every=POLL_EVERY_S)()


@contextlib.contextmanager
def without_time_limit() -> Iterator[None]:
    """While inside, a page's rerun runs every missing sweep point itself. For AppTest, which runs no fragment (so
    no polls): one rerun in here completes a sweep, with or without a prefetch worker."""
    global RERUN_BUDGET_S
    budget, RERUN_BUDGET_S = RERUN_BUDGET_S, float("inf")
    try:
        yield
    finally:
        RERUN_BUDGET_S = budget
