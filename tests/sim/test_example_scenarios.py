"""The example scenario files in scenarios/ (the ones the README points users to) load, run and keep their point:
each file's number is checked against the same workload under the setting it is meant to be compared with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sim import fairness_metrics, metrics, scenario
from sim.config import Policy, PreemptionMode
from sim.engine import simulate
from sim.trace import Trace

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.json"))


def run(sc: scenario.Scenario, **config) -> Trace:
    sc = sc.with_config(**config) if config else sc
    return simulate(sc.config, sc.requests, check_invariants=len(sc.requests) < 50)


def mean_finish_steps(trace: Trace) -> float:
    return metrics.summary(trace)["finish_steps"]["mean"]


def _article_hol(sc: scenario.Scenario) -> None:
    assert mean_finish_steps(run(sc)) == 1100  # FCFS; SJF gives 500
    assert mean_finish_steps(run(sc, policy=Policy.SJF)) == 500


def _article_abandon(sc: scenario.Scenario) -> None:
    trace = run(sc)  # the tab closes at token 300: the abort frees its 19 blocks (300 tokens) at once
    used = trace.steps["used_blocks"]
    assert (used[299], used[300]) == (19, 1)  # step 300: only the next request's first block
    assert 19 * trace.config.block_bytes / 1e6 == pytest.approx(39.8, abs=0.05)  # "the abort frees 39 MB"
    assert metrics.summary(trace)["wasted_tokens"] == 0
    assert metrics.summary(run(sc, abort_on_disconnect=False))["wasted_tokens"] == 700


def _busy_server_sjf(sc: scenario.Scenario) -> None:
    sjf, fcfs = mean_finish_steps(run(sc)), mean_finish_steps(run(sc, policy=Policy.FCFS))
    assert sjf == pytest.approx(676.34) and fcfs == pytest.approx(1482.21, abs=0.01)


def _fairness_90_10_vtc(sc: scenario.Scenario) -> None:
    vtc, fcfs = run(sc), run(sc, policy=Policy.FCFS)
    gap = fairness_metrics.service_gap
    assert gap(vtc)["gap"] <= fairness_metrics.vtc_bound(vtc) < gap(fcfs)["gap"]


def _recompute_vs_swap(sc: scenario.Scenario) -> None:
    swap = metrics.summary(run(sc))  # the file's mode: the 2,000-token victim is copied out and back
    assert (swap["num_swaps"], swap["recomputed_tokens"]) == (1, 0)
    assert metrics.summary(run(sc, preemption_mode=PreemptionMode.RECOMPUTE))["recomputed_tokens"] == 2000


def _toy_pool_fcfs(sc: scenario.Scenario) -> None:
    trace = run(sc)
    preempted = [(e.step, trace.request_ids[e.row]) for e in trace.events if e.kind == "preempt"]
    assert preempted == [(113, "D"), (145, "C")]
    assert metrics.summary(trace)["recomputed_tokens"] == 288


POINTS: dict[str, Callable[[scenario.Scenario], None]] = {
    "article_hol": _article_hol, "article_abandon": _article_abandon, "busy_server_sjf": _busy_server_sjf,
    "fairness_90_10_vtc": _fairness_90_10_vtc, "recompute_vs_swap": _recompute_vs_swap,
    "toy_pool_fcfs": _toy_pool_fcfs,
}


def test_every_example_has_its_point_checked():
    assert sorted(p.stem for p in SCENARIOS) == sorted(POINTS)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_example_loads_runs_and_round_trips(path):
    sc = scenario.load(path)
    assert metrics.summary(run(sc))["num_requests"] == len(sc.requests)
    assert scenario.scenario_from_dict(scenario.scenario_to_dict(sc)) == sc


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_example_keeps_its_point(path):
    POINTS[path.stem](scenario.load(path))
