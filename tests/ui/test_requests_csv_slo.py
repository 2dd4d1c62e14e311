"""The requests CSV carries each request's SLO columns (sim.metrics.request_slo), on tests/sim/test_slo.py's
hand-computed run."""

from __future__ import annotations

import io

import pandas as pd

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
