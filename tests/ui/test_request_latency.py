"""The Workbench's per-request latency view (ui/charts/request_latency.py), by hand: each request's TTFT and time
between tokens (mean, max) in steps and ms, in the table's order; the chart of them by row; the table of every
request's latencies, one row per request and run.

Step durations (llama-3.1-8b): 5.75 ms + 16 us x prefill tokens + 6 us x decoding requests.
"""

from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest

from sim import presets
from sim.engine import simulate
from sim.request import RequestSpec
from ui import workbench_runs as wr
from ui.charts import request_latency as rl
from ui.theme import ChartStyle

STYLE = ChartStyle()
ARTICLE = presets.get("article_hol").scenario


@pytest.fixture(scope="module")
def article():
    return {label: simulate(sc.config, sc.requests)
            for label, sc in wr.scenarios(ARTICLE.requests, wr.engine_of(ARTICLE.config),
                                          [wr.RunChoice("fcfs"), wr.RunChoice("sjf")])}


@pytest.fixture(scope="module")
def preempted():
    # 4 blocks of 4 tokens, two slots, budget 8: A and B (prompt 4, 8 tokens each) outgrow the pool; B is preempted
    # at step 5 and re-prefills, so its 5th token (step 4) and 6th (step 9) are 5 steps apart (tests/sim/test_budget).
    # C answers one token: it has no time between tokens.
    engine = wr.engine_config(4, 4, 2, 8, True, 0.0, "llama-3.1-8b")
    specs = (RequestSpec("A", 0, 4, 8), RequestSpec("B", 0, 4, 8), RequestSpec("C", 20, 4, 1))
    return simulate(wr.RunChoice("fcfs").config(engine), specs)


def test_ttft_per_request_in_the_tables_order(article):
    # One slot, 1,000 + 100 + 100 tokens. FCFS: long's first token at the end of step 0 (1 step), short1's at the
    # end of step 1,000 (1,001 steps), short2's at 1,100 (1,101). SJF: short1 1, short2 101, long 201.
    fcfs, sjf = (rl.per_request(article[k]) for k in ("FCFS", "SJF (true lengths)"))
    assert fcfs["ttft_steps"].tolist() == [1, 1001, 1101]
    assert sjf["ttft_steps"].tolist() == [201, 1, 101]
    # Step 0 prefills 4 tokens alone: 5.75 + 4 x 0.016 = 5.814 ms.
    assert fcfs["ttft_ms"][0] == pytest.approx(5.814)
    # One decoding request a step: every gap is one step of 5.75 + 0.006 = 5.756 ms.
    assert fcfs["tbt_mean_steps"].tolist() == fcfs["tbt_max_steps"].tolist() == [1, 1, 1]
    assert fcfs["tbt_max_ms"].tolist() == pytest.approx([5.756] * 3)


def test_a_preemption_is_a_long_gap_and_a_one_token_answer_has_none(preempted):
    v = rl.per_request(preempted)
    # B's gaps: 1, 1, 1, 1, 5, 1, 1 steps: mean 11 / 7, max 5.
    assert v["tbt_max_steps"][1] == 5
    assert v["tbt_mean_steps"][1] == pytest.approx(11 / 7)
    assert v["tbt_max_ms"][1] > 5 * 5.75  # five steps of at least 5.75 ms
    assert v["tbt_max_steps"][0] == 1
    assert math.isnan(v["tbt_mean_steps"][2]) and math.isnan(v["tbt_max_ms"][2])
    assert v["ttft_steps"][2] == 1


def test_the_latency_table_has_a_row_per_request_and_run(article, preempted):
    frame = rl.latency_frame({**article, "tiny": preempted})
    assert list(frame.columns) == ["request", "client", "run", "TTFT (steps)", "TTFT (ms)", "TBT mean (steps)",
                                   "TBT max (steps)", "TBT mean (ms)", "TBT max (ms)", "finish (steps)",
                                   "finish (ms)"]
    assert frame["run"].tolist() == ["FCFS"] * 3 + ["SJF (true lengths)"] * 3 + ["tiny"] * 3
    assert frame["request"].tolist() == ["long", "short1", "short2"] * 2 + ["A", "B", "C"]
    sjf = frame[frame["run"] == "SJF (true lengths)"]
    assert sjf["TTFT (steps)"].tolist() == [201, 1, 101] and sjf["finish (steps)"].tolist() == [1200, 100, 200]
    assert frame["TTFT (ms)"].iloc[0] == 5.81  # (ms rounded to 2 places)
    tiny = frame[frame["run"] == "tiny"]
    assert tiny["TBT mean (steps)"].iloc[1] == round(11 / 7, 2) and np.isnan(tiny["TBT max (ms)"].iloc[2])


def test_the_chart_puts_each_request_at_its_row_one_line_per_run(article):
    fig = rl.by_request(article, STYLE, metric="ttft", unit="steps")
    assert [t.name for t in fig.data] == ["FCFS", "SJF (true lengths)"]
    assert [list(t.x) for t in fig.data] == [[1, 2, 3]] * 2
    assert [list(t.y) for t in fig.data] == [[1, 1001, 1101], [201, 1, 101]]
    assert list(fig.data[1].customdata) == ["long", "short1", "short2"]  # the id in the hover
    assert fig.layout.title.text == "TTFT, request by request"
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == ("request (row of the table)", "TTFT (steps)")
    assert list(fig.layout.xaxis.range) == [0.5, 3.5]
    ms = rl.by_request(article, STYLE, metric="tbt_max", unit="ms")
    assert ms.layout.yaxis.title.text == "time between tokens, max (ms)"
    assert list(ms.data[0].y) == pytest.approx([5.756] * 3)
    validated = go.Figure([t.to_plotly_json() for t in ms.data], ms.layout.to_plotly_json())
    assert json.loads(validated.to_json()) == json.loads(ms.to_json())  # (a trusted figure plotly accepts)


def test_the_chart_leaves_a_gap_where_a_request_has_no_value(preempted):
    fig = rl.by_request({"tiny": preempted}, STYLE, metric="tbt_mean", unit="steps")
    assert fig.data[0].connectgaps is False and math.isnan(fig.data[0].y[2])


@pytest.mark.parametrize(("kwargs", "message"), [({"metric": "p99"}, "metric: must be one of ttft, tbt_mean, tbt_max"),
                                                 ({"unit": "s"}, "unit: must be 'steps' or 'ms'")])
def test_the_chart_refuses_an_unknown_metric_or_unit(article, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rl.by_request(article, STYLE, **kwargs)
