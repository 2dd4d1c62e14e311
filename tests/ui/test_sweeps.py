"""ui.sweeps without a browser: which points a pass runs (in sweep order, within its time budget, at least the
polls' minimum), which it only reads, and that ``measure`` never runs a point itself."""

from __future__ import annotations

import pytest

from sim.config import EngineConfig
from sim.request import RequestSpec
from sim.scenario import Scenario
from ui import runner, sweeps


def _scenarios(n: int) -> list[Scenario]:
    requests = (RequestSpec("r0", 0, 4, 3),)
    return [Scenario(f"point {i}", EngineConfig(num_blocks=8 + i, block_size=4, max_num_seqs=2), requests)
            for i in range(n)]


@pytest.fixture
def fake_runner(monkeypatch):
    """runner.is_ready / measure over a set of 'cached' keys; records the runs made (a run takes no time)."""
    made: list[str] = []
    ready: set[str] = set()

    def measure(scenario, fn, *args):
        key = runner.scenario_key(scenario)
        if key not in ready:
            made.append(scenario.name)
            ready.add(key)
        return fn(scenario, *args)

    monkeypatch.setattr(runner, "is_ready", lambda key: key in ready)
    monkeypatch.setattr(runner, "measure", measure)
    return made, ready


def _name(scenario: Scenario) -> str:
    return scenario.name


def test_the_page_pass_runs_points_in_order_while_its_budget_lasts(fake_runner):
    made, _ = fake_runner
    sweep = sweeps.Sweep(_scenarios(3), _name, started_s=float("-inf"), budget_s=float("inf"))
    assert made == ["point 0", "point 1", "point 2"] and sweep.is_complete


def test_a_page_pass_out_of_time_runs_nothing_and_reads_only_what_is_ready(fake_runner):
    made, ready = fake_runner
    points = _scenarios(3)
    ready.add(runner.scenario_key(points[1]))  # cached from an earlier rerun, or done by the worker
    sweep = sweeps.Sweep(points, _name, started_s=0.0, budget_s=0.0)  # the budget ran out long ago
    assert made == [] and sweep.num_ready == 1 and not sweep.is_complete
    assert [sweep.measure(sc, _name) for sc in points] == [None, "point 1", None]  # measure never runs one
    assert made == []


def test_a_poll_makes_at_least_one_run_and_skips_the_ready_ones(fake_runner):
    made, ready = fake_runner
    points = _scenarios(4)
    sweep = sweeps.Sweep(points, _name, started_s=0.0, budget_s=0.0)
    ready.add(runner.scenario_key(points[0]))
    assert sweep.advance(deadline_s=0.0, min_runs=1) == 1  # out of time, but a poll always makes progress
    assert made == ["point 1"]
    assert sweep.advance(deadline_s=float("inf")) == 2 and made == ["point 1", "point 2", "point 3"]
    assert sweep.is_complete


def test_is_ready_knows_runs_made_and_runs_a_worker_finished(monkeypatch):
    scenario = _scenarios(1)[0]
    key = runner.scenario_key(scenario)

    class Prefetcher:
        def status(self, k):
            return "done" if k == "worker-key" else None

        def take(self, k, patience_s=0.0):
            return None  # nothing prefetched: the caller runs it

    monkeypatch.setattr(runner, "_prefetcher", lambda: Prefetcher())
    assert runner.is_ready("worker-key")
    runner.run(scenario)
    assert runner.is_ready(key)
    assert not runner.is_ready("never-run")


def test_a_run_that_cannot_finish_is_remembered_not_run_again(monkeypatch):
    # A sweep's fragment polls until every point is in: a failing point must count as done, and asking for it
    # again must give the same error at once instead of running it again on every poll.
    from sim import SimulationError

    scenario = _scenarios(1)[0].with_config(max_steps=2)  # 3 output tokens need 4 steps: cannot finish
    key = runner.scenario_key(scenario)
    calls = []
    real_simulate = runner.simulate

    def counting_simulate(*args, **kwargs):
        calls.append(1)
        return real_simulate(*args, **kwargs)

    monkeypatch.setattr(runner, "simulate", counting_simulate)
    for _ in range(3):
        with pytest.raises(SimulationError, match="max_steps"):
            runner.measure(scenario, _name)
    assert len(calls) == 1 and runner.is_ready(key)


class _Rerun(Exception):
    pass


def _no_rerun():
    raise AssertionError("st.rerun called")


def test_a_sweep_finished_after_the_page_read_it_incomplete_reruns_the_page(fake_runner, monkeypatch):
    # The page built its notices while a point was missing; a prefetch worker then finished it before the chart
    # was drawn. No fragment would poll (nothing is missing), so without a rerun the notices would never speak of
    # the sweep (tests/app/test_budget_page.py::test_worked_example_on_screen failed ~1 run in 8 so).
    _, ready = fake_runner
    points = _scenarios(2)
    sweep = sweeps.Sweep(points, _name, started_s=0.0, budget_s=0.0)
    assert not sweep.is_complete  # the page's notices leave the sweep out
    ready.update(runner.scenario_key(sc) for sc in points)  # the worker's points land

    def rerun():
        raise _Rerun

    monkeypatch.setattr(sweeps.st, "rerun", rerun)
    drawn = []
    with pytest.raises(_Rerun):
        sweeps.show(sweep, drawn.append)
    assert drawn == []


def test_a_sweep_complete_when_the_page_read_it_draws_without_a_rerun(fake_runner, monkeypatch):
    _, ready = fake_runner
    points = _scenarios(2)
    ready.update(runner.scenario_key(sc) for sc in points)
    sweep = sweeps.Sweep(points, _name, started_s=0.0, budget_s=0.0)
    assert sweep.is_complete
    monkeypatch.setattr(sweeps.st, "rerun", _no_rerun)
    drawn = []
    sweeps.show(sweep, drawn.append)
    assert drawn == [sweep.measure]
