"""The requests CSV carries each request's SLO columns (sim.metrics.request_slo), on tests/sim/test_slo.py's
hand-computed run, and the time a request was given (arrival_ms) when it arrives by the clock."""

from __future__ import annotations

import io

import pandas as pd

from sim import EngineConfig, RequestSpec
from sim.engine import simulate
from sim.scenario import Scenario
from tests.sim.factories import req
from tests.sim.test_slo import goodput_run
from ui import sections


def test_the_requests_csv_has_each_requests_slo_columns():
    t = goodput_run()
    specs = (req("a", 0, 4, 4), req("b", 1, 8, 2), req("c", 1, 4, 2), req("d", 1, 4, 2, slo=False), req("e", 1, 4, 2))
    frame = pd.read_csv(io.StringIO(sections.requests_csv(Scenario("goodput", t.config, specs), t))).set_index("id")
    assert frame["slo"].tolist() == [True, True, True, False, True]
    assert frame["ttft_slo_met"].tolist() == [True, True, False, True, False]
    assert frame["tbt_max_slo_met"].tolist() == [False, True, True, True, False]
    assert frame["slo_met"].tolist() == [False, True, False, True, False]
    assert frame.loc["a", "tbt_max_ms"] == 18.0  # the largest gap, which the TBT column is about


def test_the_requests_csv_carries_the_time_a_request_was_given_beside_its_arrival_step():
    specs = (RequestSpec("a", 0, 4, 4), RequestSpec("b", None, 4, 4, arrival_ms=12.5))
    t = simulate(EngineConfig(num_blocks=100), specs)
    frame = pd.read_csv(io.StringIO(sections.requests_csv(Scenario("timed", t.config, specs), t)))
    assert list(frame.columns[:4]) == ["id", "client", "arrival_step", "arrival_ms"]
    assert frame["arrival_step"].tolist() == [0, 3] and frame["arrival_ms"].isna().tolist() == [True, False]
    assert frame["arrival_ms"][1] == 12.5
    untimed = simulate(EngineConfig(num_blocks=100), specs[:1])
    assert "arrival_ms" not in sections.requests_csv(Scenario("steps", untimed.config, specs[:1]), untimed)
