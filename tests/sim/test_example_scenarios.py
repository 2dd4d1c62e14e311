"""The example scenario files in scenarios/ (the ones the README points users to) load, run and keep their point."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim import metrics, scenario
from sim.engine import simulate

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.json"))


def test_there_are_example_scenarios():
    assert len(SCENARIOS) >= 5


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_example_loads_runs_and_round_trips(path):
    sc = scenario.load(path)
    trace = simulate(sc.config, sc.requests, check_invariants=len(sc.requests) < 50)
    assert metrics.summary(trace)["num_requests"] == len(sc.requests)
    assert scenario.scenario_from_dict(scenario.scenario_to_dict(sc)) == sc


def test_article_file_gives_the_article_number():
    sc = scenario.load(next(p for p in SCENARIOS if p.stem == "article_hol"))
    assert metrics.summary(simulate(sc.config, sc.requests))["finish_steps"]["mean"] == 1100
