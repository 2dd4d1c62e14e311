"""The figure builders in ui.charts, without Streamlit: segment derivation checked by hand on the article's
examples, then every builder's traces, axis titles (with units), colours (theme only, as strings), purity and
payload size."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from sim import fairness_metrics, metrics, presets
from sim.config import EngineConfig
from sim.engine import Engine, queues_after_step, simulate
from sim.request import RequestStatus
from sim.scenario import load
from sim.trace import SCHED_DECODE, SCHED_PREFILL_DONE, Trace
from tests.conftest import BENCH_SCENARIOS_DIR
from tests.trace_checks import assert_trace_unchanged
from ui import charts, theme
from ui.charts import cancellation, preemption
from ui.charts import fairness as fc
from ui.charts.gantt import MAX_HEIGHT
from ui.charts.layout import NO_FILL, downsample, envelope, label_colors, styled_layout, trusted_figure
from ui.charts.segments import SEGMENT_COLUMNS, life_spans, request_segments
from ui.theme import ChartStyle

STYLE = ChartStyle()
THEME_COLORS = {v for k, v in vars(theme).items() if k.isupper() and isinstance(v, str) and v.startswith("#")}


def run(key: str, **overrides) -> Trace:
    p = presets.get(key)
    return simulate(p.scenario.config.replace(**overrides), p.scenario.requests)


def variants(key: str) -> dict[str, Trace]:
    p = presets.get(key)
    return {label: simulate(p.scenario.config.replace(**ov), p.scenario.requests) for label, ov in p.variants}


@pytest.fixture(scope="module")
def hol() -> dict[str, Trace]:
    return variants("article_hol")  # FCFS, SJF


@pytest.fixture(scope="module")
def toy() -> Trace:
    return run("toy_pool")


@pytest.fixture(scope="module")
def toy_swap() -> Trace:
    # recompute_vs_swap's own workload never fills its pool, so swap the toy pool's victims instead.
    return run("toy_pool", preemption_mode="swap", num_cpu_blocks=64)


@pytest.fixture(scope="module")
def abandoned() -> Trace:
    return run("article_abandon", abort_on_disconnect=False)


@pytest.fixture(scope="module")
def fairness() -> dict[str, Trace]:
    return variants("article_fairness")  # FCFS, Rate limit (233 rejected), VTC; two clients


@pytest.fixture(scope="module")
def busy() -> dict[str, Trace]:
    return variants("busy_server")  # 300 requests


@pytest.fixture(scope="module")
def bench() -> Trace:
    """20,000 requests over ~13,000 steps (~2 s to simulate): the long-trace payload checks."""
    scenario = load(BENCH_SCENARIOS_DIR / "load_20k_tight.json")
    return simulate(scenario.config, scenario.requests)


def segments_of(trace: Trace, request_id: str) -> list[tuple[str, int, int]]:
    seg = request_segments(trace)
    mine = seg[seg["request_id"] == request_id]
    return list(zip(mine["state"], mine["start_step"], mine["end_step"], strict=True))


# ---- segments -----------------------------------------------------------------------------------------------------
def test_hol_segments_by_hand(hol):
    # One slot: long runs steps 0-999 (prefill+first token at 0), short1 waits until 1000 and decodes 100 tokens
    # (the first with its 4-token prompt at step 1000), short2 waits until 1100.
    fcfs = hol["FCFS"]
    assert segments_of(fcfs, "long") == [("prefill", 0, 1), ("decode", 1, 1000)]
    assert segments_of(fcfs, "short1") == [("waiting", 0, 1000), ("prefill", 1000, 1001), ("decode", 1001, 1100)]
    assert segments_of(fcfs, "short2") == [("waiting", 0, 1100), ("prefill", 1100, 1101), ("decode", 1101, 1200)]


def test_segment_times_in_ms_follow_the_clock(hol):
    fcfs = hol["FCFS"]
    seg = request_segments(fcfs)
    row = seg[(seg["request_id"] == "short1") & (seg["state"] == "waiting")].iloc[0]
    assert row["start_ms"] == 0.0
    assert row["end_ms"] == pytest.approx(fcfs.steps["time_ms"][999])  # end of long's last step


def test_recompute_preemption_segment(toy):
    # 32 blocks: C is preempted at step 145 and re-admitted (re-prefill) at 200; D at 113; E waits from 5 to 200.
    c = segments_of(toy, "C")
    assert ("preempted", 145, 200) in c
    assert c[c.index(("preempted", 145, 200)) + 1] == ("prefill", 200, 201)
    assert ("preempted", 113, 200) in segments_of(toy, "D")
    assert segments_of(toy, "E")[0] == ("waiting", 5, 200)


def test_swap_segments(toy_swap):
    # Swapped out at 113 and 161, back in at 146 and 200; a swapped-in request decodes at once, no re-prefill.
    d = segments_of(toy_swap, "D")
    assert ("swapped", 113, 146) in d and ("swapped", 161, 200) in d
    assert d[d.index(("swapped", 113, 146)) + 1] == ("decode", 146, 161)
    assert ("swapped", 145, 200) in segments_of(toy_swap, "C")
    assert "preempted" not in set(request_segments(toy_swap)["state"])


def test_wasted_segments_without_abort(abandoned):
    # The user leaves at token 300 of 1,000: without an abort, steps 300-999 generate for nobody. Each 1-token
    # prompt is a prefill in the request's first step (which generates its first token), then it decodes.
    assert segments_of(abandoned, "long") == [("prefill", 0, 1), ("decode", 1, 300), ("wasted", 300, 1000)]
    assert segments_of(abandoned, "waiting") == [("waiting", 1, 1000), ("prefill", 1000, 1001),
                                                 ("decode", 1001, 1100)]


def test_aborted_request_ends_at_the_abort_step():
    trace = run("article_abandon")  # abort on disconnect: dropped at the start of step 300
    assert segments_of(trace, "long") == [("prefill", 0, 1), ("decode", 1, 300)]
    assert segments_of(trace, "waiting")[0] == ("waiting", 1, 300)


def tiny_trace(num_steps: int, reqs: list[dict], entries: list[tuple[int, int, int]]) -> Trace:
    """A hand-made trace: ``reqs`` give arrival/first/finish/status, ``entries`` (step, row, kind); 10 ms steps."""
    n = len(reqs)
    by_step = [[(r, k) for s, r, k in entries if s == t] for t in range(num_steps)]
    counts = np.array([len(x) for x in by_step])
    col = {name: np.array([r[name] for r in reqs], dtype=np.int64)
           for name in ("arrival_step", "first_scheduled_step", "finish_step", "status")}
    step_ms = np.full(num_steps, 10.0)
    return Trace(
        name="tiny", config=EngineConfig(), request_ids=[f"r{i}" for i in range(n)], client_ids=["default"],
        steps={"step_ms": step_ms, "time_ms": np.cumsum(step_ms)}, clients={},
        requests={**col, "client": np.zeros(n, np.int32), "prompt_len": np.ones(n, np.int64),
                  "num_output_tokens": np.ones(n, np.int64), "num_preemptions": np.zeros(n, np.int32)},
        preempted_at_steps=[[] for _ in reqs], resumed_at_steps=[[] for _ in reqs],
        swapped_out_at_steps=[[] for _ in reqs], swapped_in_at_steps=[[] for _ in reqs],
        finish_reason=["" for _ in reqs], raw_events=[],
        sched_rows=np.array([r for x in by_step for r, _ in x], np.int64),
        sched_tokens=np.ones(len(entries), np.int64),
        sched_kind=np.array([k for x in by_step for _, k in x], np.int8),
        sched_offsets=np.concatenate([[0], np.cumsum(counts)]),
    )


def test_stalled_segments_on_a_hand_made_trace():
    # r0 runs at steps 0,1 and 4,5 (finishes at 5): steps 2-3 it held its slot with no tokens -> stalled [2, 4).
    # r1 runs at 1,2 and is aborted at the start of step 5: stalled [3, 5) at the end of its life.
    d, p = SCHED_DECODE, SCHED_PREFILL_DONE
    trace = tiny_trace(6, [
        {"arrival_step": 0, "first_scheduled_step": 0, "finish_step": 5, "status": RequestStatus.FINISHED_STOPPED},
        {"arrival_step": 0, "first_scheduled_step": 1, "finish_step": 5, "status": RequestStatus.FINISHED_ABORTED},
    ], [(0, 0, p), (1, 0, d), (4, 0, d), (5, 0, d), (1, 1, p), (2, 1, d)])
    assert segments_of(trace, "r0") == [("prefill", 0, 1), ("decode", 1, 2), ("stalled", 2, 4), ("decode", 4, 6)]
    assert segments_of(trace, "r1") == [("waiting", 0, 1), ("prefill", 1, 2), ("decode", 2, 3), ("stalled", 3, 5)]


def test_a_run_where_nothing_ran_has_no_segments():
    trace = tiny_trace(1, [{"arrival_step": 0, "first_scheduled_step": -1, "finish_step": 0,
                            "status": RequestStatus.REJECTED}], [])
    seg = request_segments(trace)
    assert len(seg) == 0 and tuple(seg.columns) == SEGMENT_COLUMNS
    fig = charts.gantt(trace, STYLE)
    assert [t.name for t in fig.data] == ["rejected on arrival"]


COVERAGE_RUNS = (
    ("toy_pool", {}), ("toy_pool", {"preemption_mode": "swap", "num_cpu_blocks": 64}), ("sizing", {}),
    ("article_abandon", {"abort_on_disconnect": False}), ("impatient_users", {}),
    ("impatient_users", {"abort_on_disconnect": True, "disconnect_detect_delay_steps": 50}),
    ("article_fairness", {"policy": "fcfs"}), ("stops", {"stop_check": "at_max_tokens"}), ("prefix_cache", {}),
)


@pytest.mark.parametrize(("key", "overrides"), COVERAGE_RUNS)
def test_segments_tile_each_life_exactly(key, overrides):
    """Each request's segments cover [arrival, end of life) with no gap and no overlap, and the scheduled states
    (prefill, decode, wasted) cover exactly the steps the schedule lists for it."""
    trace = run(key, **overrides)
    seg = request_segments(trace)
    start, end = life_spans(trace)
    assert set(seg["state"]) <= set(theme.STATE_COLORS)
    assert (seg["end_step"] > seg["start_step"]).all()
    for row, mine in seg.groupby("row"):
        s, e = mine["start_step"].to_numpy(), mine["end_step"].to_numpy()
        assert s[0] == start[row] and e[-1] == end[row], trace.request_ids[row]
        assert (s[1:] == e[:-1]).all(), trace.request_ids[row]
    steps, rows, _, _ = trace.schedule_entries()
    ran = seg[seg["state"].isin(["prefill", "decode", "wasted"])]
    assert (ran["end_step"] - ran["start_step"]).sum() == len(steps)
    rejected = np.flatnonzero(trace.requests["status"] == RequestStatus.REJECTED)
    assert not seg["row"].isin(rejected).any()


def test_segments_for_a_large_run_cover_every_request():
    # Speed is measured by benchmarks/page_rerun.py, not here: this checks the vectorised path on a big run.
    trace = run("busy_server")  # 300 requests, thousands of steps, tens of thousands of schedule entries
    seg = request_segments(trace)
    assert set(seg["row"]) == set(range(trace.num_requests))
    r = trace.requests
    spans = seg.groupby("row").agg(start=("start_step", "min"), end=("end_step", "max"))
    assert (spans["start"].to_numpy() == r["arrival_step"]).all()
    assert (spans["end"].to_numpy() == r["finish_step"] + 1).all()


# ---- gantt --------------------------------------------------------------------------------------------------------
def bars(fig: go.Figure) -> list[go.Bar]:
    return [t for t in fig.data if t.type == "bar"]


def test_gantt_one_bar_trace_per_state(toy):
    fig = charts.gantt(toy, STYLE)
    names = [t.name for t in bars(fig)]
    assert names == [theme.STATE_LEGEND[s] for s in ("waiting", "prefill", "decode", "preempted")]
    preempted = bars(fig)[-1]
    assert preempted.marker.color == theme.STATE_COLORS["preempted"]
    assert preempted.marker.pattern.shape == theme.STATE_PATTERNS["preempted"]
    assert all(t.orientation == "h" for t in bars(fig))
    assert fig.layout.barmode == "overlay"  # states of one row must not be pushed side by side


def test_gantt_rows_in_arrival_order_first_at_top(toy):
    fig = charts.gantt(toy, STYLE)
    y = fig.layout.yaxis
    assert list(y.ticktext) == ["A", "B", "C", "D", "E"]
    assert y.range[0] > y.range[1]  # reversed: position 0 (first arrival) at the top


def test_gantt_bars_use_base_and_length(hol):
    fig = charts.gantt(hol["FCFS"], STYLE)
    waiting = bars(fig)[0]
    assert sorted(zip(waiting.base, waiting.x, strict=True)) == [(0, 1000), (0, 1100)]
    fig_ms = charts.gantt(hol["FCFS"], STYLE, x_unit="ms")
    waiting_ms = bars(fig_ms)[0]
    assert max(waiting_ms.x) == pytest.approx(hol["FCFS"].steps["time_ms"][1099])
    assert fig_ms.layout.xaxis.title.text == "time (ms)"


def test_gantt_preemption_markers(toy):
    fig = charts.gantt(toy, STYLE)
    (marker,) = [t for t in fig.data if t.name == "preempted here"]
    assert sorted(marker.x) == [113, 145]
    assert marker.marker.color == theme.VERMILLION


def test_gantt_rejected_markers_and_client_colours(fairness):
    trace = fairness["Rate limit"]
    fig = charts.gantt(trace, STYLE, color_by="client")
    (rejected,) = [t for t in fig.data if t.name == "rejected on arrival"]
    assert len(rejected.x) == int((trace.requests["status"] == RequestStatus.REJECTED).sum())
    by_name = {t.name: t for t in bars(fig)}
    assert by_name["client A (running)"].marker.color == theme.client_color(0)
    assert by_name["client B (running)"].marker.color == theme.client_color(1)
    fcfs = charts.gantt(fairness["FCFS"], STYLE, color_by="client")
    assert {t.name: t.marker.color for t in bars(fcfs)}[theme.STATE_LABELS["waiting"]] == theme.LIGHT_GREY


def test_gantt_highlight_outline_and_note(hol):
    fig = charts.gantt(hol["FCFS"], STYLE, highlight_ids={"long": "head-of-line blocker"})
    (box,) = [s for s in fig.layout.shapes if s.type == "rect"]
    assert (box.x0, box.x1, box.y0, box.y1) == (0, 1000, -0.5, 0.5)
    assert any("head-of-line blocker" in a.text for a in fig.layout.annotations)
    assert fig.layout.yaxis.ticktext[0] == "<b>long</b>"


def test_gantt_hover_shows_the_numbers(hol):
    fig = charts.gantt(hol["FCFS"], STYLE)
    decode = bars(fig)[2]
    texts = [" ".join(map(str, row)) for row in decode.customdata]
    short1 = next(t for t in texts if t.startswith("short1"))
    assert "steps 1,001 to 1,099" in short1 and "prompt 4 tokens, output 100 tokens" in short1
    assert "finished at step 1,099: 1,100 steps" in short1 and "preemptions: 0" in short1
    # A one-step segment (long's prefill, step 0, 5.75 ms) names its step, in the singular.
    prefill = [" ".join(map(str, row)) for row in bars(fig)[1].customdata]
    assert any(t.startswith("long") and "prefill step 0 (0.0 to 5.8 ms)" in t for t in prefill)


def test_gantt_of_a_partial_trace_and_its_hover_times_in_ms():
    # A run stopped early (as the step inspector's are): later requests have not arrived, finished ones show the
    # time from arrival to their last token in ms.
    sc = presets.get("busy_server").scenario
    trace = Engine(sc.config, sc.requests).run(until_step=200)
    r = trace.requests
    assert (r["arrival_step"] > trace.num_steps).any()
    fig = charts.gantt(trace, STYLE)
    texts = [" ".join(map(str, row)) for b in bars(fig) for row in b.customdata]
    i = int(np.flatnonzero(r["finish_step"] >= 0)[0])
    took = float(trace.end_ms(r["finish_step"][i]) - trace.start_ms(r["arrival_step"][i]))
    rid = trace.request_ids[i]
    assert any(t.startswith(f"{rid} ") and f"{took:,.1f} ms after arrival" in t for t in texts)
    # A highlighted request that has not arrived yet when the run stops is outlined at the end of its clock.
    late = trace.request_ids[int(np.flatnonzero(r["arrival_step"] > trace.num_steps)[0])]
    ms = charts.gantt(trace, STYLE, x_unit="ms", highlight_ids={late: "not here yet"})
    box = ms.layout.shapes[0]
    assert box.x0 == box.x1 == pytest.approx(float(trace.steps["time_ms"][-1]))


def test_gantt_many_rows_hide_ids_and_cap_height(busy):
    fig = charts.gantt(busy["FCFS"], STYLE)
    assert fig.layout.yaxis.showticklabels is False
    assert fig.layout.height <= MAX_HEIGHT
    small = charts.gantt(busy["FCFS"], STYLE, max_requests=10)
    assert len(small.layout.yaxis.ticktext) == 10
    assert "first 10 of 300" in small.layout.title.text
    assert set(np.concatenate([t.y for t in bars(small)])) == set(range(10))


def test_gantt_for_hundreds_of_requests_keeps_a_bounded_payload():
    # What the browser receives stays well under a megabyte; build time is measured by benchmarks/page_rerun.py.
    trace = run("busy_server")
    fig = charts.gantt(trace, STYLE)
    assert len(fig.to_json()) < 1_000_000
    assert fig.layout.height <= MAX_HEIGHT


def test_gantt_rejects_bad_arguments(toy):
    with pytest.raises(ValueError, match="x_unit"):
        charts.gantt(toy, STYLE, x_unit="s")
    with pytest.raises(ValueError, match="color_by"):
        charts.gantt(toy, STYLE, color_by="policy")


def test_gantt_sends_what_a_validated_figure_would(toy, fairness):
    # gantt skips plotly's validation of its own values (trusted_figure): rebuilding the same figure with validation
    # must not change what the browser receives (e.g. a bar's base goes out as a list, not as a binary array).
    for fig in (charts.gantt(toy, STYLE, highlight_ids={"A": "note"}),
                charts.gantt(fairness["Rate limit"], STYLE, color_by="client", x_unit="ms")):
        validated = go.Figure([t.to_plotly_json() for t in fig.data], fig.layout.to_plotly_json())
        assert json.loads(validated.to_json()) == json.loads(fig.to_json())


def lesson_figures(toy, toy_swap, abandoned, fairness) -> dict[str, go.Figure]:
    """One figure from each builder not in all_figures: the lessons' own charts, the home page's engine step and
    the sweep lines, on small inputs (sweep points and costs written out by hand)."""
    point = {"throughput": 900.0, "num_rejected": 3, "client_ids": ["A", "B"], "rejected": [2, 1],
             "mean_finish_ms": [50.0, 70.0], "mean_batch": 1.5}
    limits = {"x": [2, 10], "points": [point, point], "window_steps": 200}
    weights = {"x": [0.5, 2.0], "points": [point, point], "input_weight": 1.0}
    aborting = run("article_abandon")
    servers = {"abort": aborting, "no abort": abandoned}
    summaries = {label: metrics.summary(t) for label, t in servers.items()}
    styles = cancellation.server_styles({label: t.config for label, t in servers.items()})
    toy_p = presets.get("toy_pool").scenario
    snapped = Engine(toy_p.config, toy_p.requests, snapshot_every_steps=1).run(until_step=113)
    cost = SimpleNamespace(num_tokens=2000, num_blocks=125, swap_bytes=262_144_000, recompute_ms=40.0,
                           swap_transfer_ms=10.0, swap_overhead_ms=1.0, swap_ms=11.0)
    return {
        "counters_by_policy": fc.counters_by_policy(fairness, STYLE),
        "client_rates_by_policy": fc.client_rates_by_policy(fairness, STYLE, x_unit="ms"),
        "total_throughput": fc.total_throughput(fairness, STYLE),
        "service_gap": fc.service_gap_chart(fairness, STYLE),
        "limit_sweep": fc.limit_sweep_chart(limits, {"FCFS": point}, STYLE, light_client=1, chosen=10),
        "weight_sweep": fc.weight_sweep_chart(weights, {"FCFS": point}, STYLE, chosen=2.0),
        "kv_for_nobody": cancellation.kv_for_nobody(servers, STYLE),
        "waste_bars": cancellation.waste_bars(summaries, STYLE, styles=styles),
        "waiting_others_lose": cancellation.waiting_others_lose(summaries, STYLE, styles=styles),
        "kv_by_request": preemption.kv_over_time(toy_swap, STYLE, parts=[("A", 0, toy_swap.steps["used_blocks"])]),
        "kv_by_state": preemption.kv_over_time(toy, STYLE, by="state", unit="%"),
        "gantt_with_resumes": preemption.gantt_with_resumes(toy_swap, STYLE),
        "cost_bars": preemption.cost_bars(cost, STYLE, bandwidth_gb_s=25),
        "reprefill_hits": preemption.reprefill_hits([("C @ 200", 64, 97)], STYLE),
        "sweep_heatmap": preemption.sweep_heatmap((1.0, 2.0), (512, 1024), (8, 16), np.array([[3.0, 0.0],
                                                                                              [np.nan, 1.0]]),
                                                  STYLE, title="t", colorbar_title="c", color=theme.BLUE,
                                                  current=(0, 1)),
        "engine_step": charts.engine_step(snapped, 113, queues_after_step(toy_p.config, toy_p.requests, 113), STYLE),
        "sweep_lines": charts.sweep_lines([0.0, 1.0], {"s": [1.0, 2.0]}, STYLE, references={"r": 1.5}, title="t",
                                          x_title="x", y_title="y (steps)"),
    }


def test_every_builder_sends_what_a_validated_figure_would(figures, toy, toy_swap, abandoned, fairness):
    # The builders skip plotly's validation of their own trace and layout dicts (trusted_figure): plotly must
    # accept every value (a misspelt property or a bad value raises here), and rebuilding the figure with
    # validation must not change what the browser receives.
    for name, fig in {**figures, **lesson_figures(toy, toy_swap, abandoned, fairness)}.items():
        validated = go.Figure([t.to_plotly_json() for t in fig.data], fig.layout.to_plotly_json())
        assert json.loads(validated.to_json()) == json.loads(fig.to_json()), name


def test_gantt_figure_validates_later_edits(toy):
    # Pages and gantt_with_resumes edit the figure; a mistake there must still raise.
    fig = charts.gantt(toy, STYLE)
    fig.update_xaxes(range=[0, 10])
    assert fig.layout.xaxis.range == (0, 10)
    with pytest.raises(ValueError):
        fig.update_xaxes(rnage=[0, 10])
    with pytest.raises(ValueError):
        fig.update_traces(marker_color="not a colour")


# ---- every builder: units, colours, purity ------------------------------------------------------------------------
def all_figures(hol, toy, fairness, busy) -> dict[str, go.Figure]:
    vtc = fairness["VTC"]
    return {
        "gantt": charts.gantt(toy, STYLE),
        "gantt_client": charts.gantt(fairness["Rate limit"], STYLE, color_by="client", x_unit="ms"),
        "queue_and_batch": charts.queue_and_batch(busy, STYLE),
        "kv_state": charts.kv_occupancy(run("impatient_users", abort_on_disconnect=False), STYLE, unit="GiB"),
        "kv_client": charts.kv_occupancy(vtc, STYLE, by="client", unit="%"),
        "kv_cached": charts.kv_occupancy(run("prefix_cache", enable_prefix_caching=True), STYLE, unit="MB"),
        "counters": charts.client_counters(vtc, STYLE),
        "throughput": fc.client_rates_by_policy({"VTC": vtc}, STYLE, window_steps=100, x_unit="ms"),
        "ecdf": charts.finish_time_ecdf(hol, STYLE),
        "ecdf_arrays": charts.finish_time_ecdf({"a": np.array([1.0, 2.0, np.nan]), "b": np.array([3.0])}, STYLE),
        "latency_by_client": charts.latency_by_client(fairness, STYLE),
        "queue_by_client": charts.latency_by_client(fairness, STYLE, measure="queue", unit="steps"),
    }


@pytest.fixture(scope="module")
def figures(hol, toy, fairness, busy) -> dict[str, go.Figure]:
    return all_figures(hol, toy, fairness, busy)


UNITS = ("(engine steps)", "(ms)", "(steps)", "(requests)", "(blocks)", "(GiB)", "(MB)", "(% of pool)", "(tokens/s",
         "(weighted tokens)", "(%)", "(in arrival order)")


def test_every_numeric_axis_title_has_a_unit(figures):
    for name, fig in figures.items():
        layout = fig.layout.to_plotly_json()
        titled = 0
        for key, axis in layout.items():
            if not key.startswith(("xaxis", "yaxis")) or axis.get("type") == "category":
                continue
            text = axis.get("title", {}).get("text")
            if text is None:
                # (an axis without a title shares another's scale, or shows no numbers a reader must decode)
                assert "matches" in axis or axis.get("showticklabels") is False, (name, key)
                continue
            titled += 1
            is_category = name in ("latency_by_client", "queue_by_client") and key == "xaxis"
            assert is_category or any(unit in text for unit in UNITS), (name, key, text)
        assert titled >= 2, name
        assert fig.layout.title.text, name


def test_axis_units_are_the_expected_ones(figures):
    assert figures["kv_state"].layout.yaxis.title.text == "KV cache (GiB)"
    assert figures["kv_client"].layout.yaxis.title.text == "KV cache (% of pool)"
    assert figures["queue_and_batch"].layout.yaxis.title.text == "waiting (requests)"
    assert figures["queue_and_batch"].layout.yaxis2.title.text == "running (requests)"
    assert figures["queue_and_batch"].layout.xaxis2.title.text == "time (engine steps)"
    assert figures["throughput"].layout.yaxis.title.text == "output (tokens/s, last 100 steps)"
    assert figures["ecdf"].layout.xaxis.title.text == "finish time (steps)"


def _colors(node, path=""):
    """Every (path, value) whose key names a colour, outside the template."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "template":
                continue
            if "color" in key.lower() and not isinstance(value, dict):
                yield f"{path}.{key}", value
            else:
                yield from _colors(value, f"{path}.{key}")
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from _colors(value, f"{path}[{i}]")


def test_colours_come_from_the_theme_as_strings(figures):
    for name, fig in figures.items():
        found = list(_colors(fig.to_plotly_json()))
        assert found, name
        for path, value in found:
            assert isinstance(value, str), (name, path, value)  # never numeric colour arrays
            assert value in THEME_COLORS or value == NO_FILL, (name, path, value)


def test_legends_are_horizontal_and_readable(figures):
    for name, fig in figures.items():
        legend = fig.layout.legend
        assert legend.orientation == "h", name
        assert legend.font.size == STYLE.font_size, name
        names = [t.name for t in fig.data if t.showlegend is not False]
        assert len(names) == len(set(names)), (name, names)  # one entry per state/label/client


def test_queue_and_batch_one_colour_and_entry_per_label(busy):
    fig = charts.queue_and_batch(busy, STYLE)
    assert [t.name for t in fig.data if t.showlegend] == list(busy)
    colors = label_colors(busy)
    for t in fig.data:
        assert t.line.color == colors[t.name]
    assert colors["FCFS"] == theme.POLICY_COLORS["fcfs"]  # distinct policies keep their page-wide colour


def test_label_colours_fall_back_to_series_order_when_policies_repeat():
    p = presets.get("article_abandon")  # both variants run fcfs
    traces = {label: simulate(p.scenario.config.replace(**ov), p.scenario.requests) for label, ov in p.variants}
    assert list(label_colors(traces).values()) == [theme.series_color(0), theme.series_color(1)]


def test_a_policy_run_once_keeps_its_colour_beside_two_runs_of_another():
    p = presets.get("starvation")  # SJF without and with the guard, and FCFS
    traces = {label: simulate(p.scenario.config.replace(**ov), p.scenario.requests) for label, ov in p.variants}
    assert label_colors(traces) == {"SJF, no guard": theme.BLUE, "SJF + guard": theme.ORANGE,
                                    "FCFS": theme.POLICY_COLORS["fcfs"]}  # not FCFS in a series colour


def test_the_first_four_clients_are_never_the_preempted_colour():
    assert theme.STATE_COLORS["preempted"] not in [theme.client_color(i) for i in range(4)]
    assert theme.POLICY_COLORS["rate_limit"] not in [theme.client_color(i) for i in range(4)]


def test_sweep_lines_take_the_pages_policy_colours_and_say_the_unit():
    fig = charts.sweep_lines([0.0, 1.0], {"SJF on predicted lengths": [500.0, 900.0]}, STYLE, title="t",
                             x_title="sigma", y_title="average finish (engine steps)",
                             references={"SJF, true lengths": 480.0, "FCFS": 1482.0}, unit="steps",
                             colors={"SJF on predicted lengths": theme.SKY_BLUE, "SJF, true lengths": theme.BLUE,
                                     "FCFS": theme.GREY})
    assert [(t.name, t.line.color) for t in fig.data] == [
        ("SJF on predicted lengths", theme.SKY_BLUE), ("SJF, true lengths (480 steps)", theme.BLUE),
        ("FCFS (1,482 steps)", theme.GREY)]
    assert fig.data[2].hovertemplate == "FCFS: 1,482.0 steps<extra></extra>"


def test_fairness_labels_get_mechanism_colours(fairness):
    assert label_colors(fairness) == {"FCFS": theme.POLICY_COLORS["fcfs"],
                                      "Rate limit": theme.POLICY_COLORS["rate_limit"],
                                      "VTC": theme.POLICY_COLORS["vtc"]}


def test_kv_occupancy_stacks_and_pool_line(abandoned):
    fig = charts.kv_occupancy(abandoned, STYLE)
    names = [t.name for t in fig.data]
    assert names == ["held by live requests", "held for clients that are gone"]
    assert all(t.stackgroup == "kv" for t in fig.data)
    live, orphan = (np.asarray(t.y) for t in fig.data)
    used = abandoned.steps["used_blocks"]
    np.testing.assert_allclose(live + orphan, used)  # 1,100 steps: not downsampled
    assert orphan[299] == 0 and orphan[300] > 0  # the client left at step 300
    (pool,) = fig.layout.shapes
    assert pool.y0 == pool.y1 == abandoned.config.num_blocks


def test_kv_by_client_never_exceeds_blocks_in_use():
    trace = run("prefix_cache", enable_prefix_caching=True)  # shared prefix blocks have several holders
    used = trace.steps["used_blocks"]
    assert (trace.clients["client_blocks"].sum(axis=1) > used).any()  # counted per holder, the sum overshoots
    fig = charts.kv_occupancy(trace, STYLE, by="client")
    clients = [t for t in fig.data if t.name.startswith("client ")]
    assert len(clients) == len(trace.client_ids)
    stack = np.sum([np.asarray(t.y) for t in clients], axis=0)
    _, used_shown = downsample(np.arange(len(used)), used, how="mean")  # the chart's own bucketing
    np.testing.assert_allclose(stack, used_shown)  # scaled per step to the blocks in use, not beyond


def test_throughput_matches_a_hand_computed_window(fairness):
    trace = fairness["VTC"]
    fig = fc.client_rates_by_policy({"VTC": trace}, STYLE, window_steps=50)  # client A's line first
    tokens, ms = trace.clients["client_output_tokens"][:, 0], trace.steps["step_ms"]
    t = 1000  # x is downsampled with the mean; at 4,859 steps the buckets hold 4 steps, check at a bucket edge
    x = np.asarray(fig.data[0].x)
    i = int(np.flatnonzero(x == x[x <= t].max())[0])
    bucket = [tokens[s - 49 : s + 1].sum() / ms[s - 49 : s + 1].sum() * 1000 for s in range(x[i], x[i + 1])]
    assert fig.data[0].y[i] == pytest.approx(np.mean(bucket))


def test_ecdf_marks_the_mean(hol):
    fig = charts.finish_time_ecdf(hol, STYLE)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["FCFS (mean 1,100 steps)", "SJF (true lengths) (mean 500 steps)"]  # the article's numbers
    mean_line = fig.data[1]
    assert list(mean_line.x) == [1100.0, 1100.0]
    assert fig.data[0].y[-1] == pytest.approx(100.0)


def test_latency_by_client_one_box_per_label(fairness):
    fig = charts.latency_by_client(fairness, STYLE)
    assert [t.name for t in fig.data] == list(fairness)
    assert set(fig.data[0].x) == {"client A", "client B"}
    assert fig.layout.boxmode == "group"
    assert fig.layout.title.text == "Finish time per client"
    assert fig.layout.yaxis.title.text == "finish time (ms)"


def test_latency_by_client_shows_the_queueing_delay(fairness):
    fig = charts.latency_by_client(fairness, STYLE, measure="queue")
    assert fig.layout.title.text == "Queueing delay per client"
    assert fig.layout.yaxis.title.text == "queueing delay (ms)"
    for box, (label, trace) in zip(fig.data, fairness.items(), strict=True):
        lat = metrics.request_latencies(trace)
        served = metrics.served_mask(trace)
        assert box.name == label and "queueing delay" in box.hovertemplate
        np.testing.assert_array_equal(box.y, lat["queue_ms"][served])
        # (not the finish times: every served request decodes at least one step after its first)
        assert (np.asarray(box.y) < lat["finish_ms"][served]).all()
    steps = charts.latency_by_client(fairness, STYLE, measure="queue", unit="steps", title="T")
    assert steps.layout.title.text == "T" and steps.layout.yaxis.title.text == "queueing delay (steps)"
    np.testing.assert_array_equal(steps.data[0].y, metrics.request_latencies(fairness["FCFS"])["queue_steps"][
        metrics.served_mask(fairness["FCFS"])])
    with pytest.raises(ValueError, match="'finish', 'queue'"):
        charts.latency_by_client(fairness, STYLE, measure="ttft")


def test_builders_do_not_mutate_their_inputs():
    # Fresh runs, copied before any builder sees them (the module's fixtures have been drawn by other tests: a
    # builder that changed them the same way every time would go unnoticed there).
    inputs = (variants("article_hol"), run("toy_pool"), variants("article_fairness"), variants("busy_server"))
    before = copy.deepcopy(inputs)
    all_figures(*inputs)
    for a, b in zip(inputs, before, strict=True):
        for old, new in zip(_flat_traces(b), _flat_traces(a), strict=True):
            assert_trace_unchanged(old, new)
    values = {"x": np.array([3.0, 1.0, np.nan])}
    charts.finish_time_ecdf(values, STYLE)
    np.testing.assert_array_equal(values["x"], [3.0, 1.0, np.nan])


def _flat_traces(x) -> list[Trace]:
    return list(x.values()) if isinstance(x, dict) else [x]


# ---- downsample and long traces ------------------------------------------------------------------------------------
def test_downsample_bounds_points_and_keeps_peaks():
    x = np.arange(20_000)
    y = np.zeros(20_000)
    y[12_345] = 7  # a one-step spike
    xs, ys = downsample(x, y, max_points=1500)
    assert len(xs) == len(ys) <= 1500
    assert ys.max() == 7
    assert xs[0] == 0 and (np.diff(xs) > 0).all()
    assert y[12_345] == 7 and len(y) == 20_000  # input untouched


def test_downsample_mean_keeps_stacks_adding_up():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 10, 5000), rng.integers(0, 10, 5000)
    _, ma, mb, mt = downsample(np.arange(5000), a, b, a + b, max_points=1000, how="mean")
    np.testing.assert_allclose(ma + mb, mt)
    assert ma.mean() == pytest.approx(a.mean())  # 5 steps a bucket, all buckets full


def test_downsample_leaves_short_series_and_handles_columns():
    x, y = np.arange(10), np.arange(10) * 2
    xs, ys = downsample(x, y)
    np.testing.assert_array_equal(ys, y)
    assert ys is not y
    _, cols = downsample(np.arange(4000), np.ones((4000, 3)), max_points=100)
    assert cols.shape == (100, 3)


def test_long_trace_payload_is_bounded(bench):
    assert bench.num_steps > 10_000
    figs = {
        "queue_and_batch": charts.queue_and_batch({"bench": bench}, STYLE, x_unit="ms"),
        "kv": charts.kv_occupancy(bench, STYLE),
        "throughput": fc.client_rates_by_policy({"bench": bench}, STYLE),
        "counters": charts.client_counters(bench, STYLE),
        "gantt": charts.gantt(bench, STYLE, max_requests=300),
    }
    for name, fig in figs.items():
        for t in fig.data:
            assert t.x is None or len(t.x) <= 1500 or t.type == "bar", (name, t.name)
        assert len(fig.to_json()) < 400_000, name


# ---- layout and tables ----------------------------------------------------------------------------------------------
def test_styled_layout_sets_fonts_margins_and_presentation_size():
    layout = styled_layout(ChartStyle(presentation=True), title="t", x_title="time (ms)",
                           y_title="requests (requests)", height=400)
    fig = trusted_figure([{"type": "scatter", "x": [0, 1], "y": [0, 1]}], layout)
    assert fig.layout.font.size == 20 and fig.layout.title.font.size == 24
    assert fig.layout.height == 500
    assert fig.layout.title.automargin and fig.layout.xaxis.automargin and fig.layout.yaxis.automargin
    assert fig.layout.paper_bgcolor == fig.layout.plot_bgcolor == theme.WHITE  # print-friendly white
    assert fig.layout.hoverlabel.font.size == 20


def test_metrics_table_units_and_article_numbers(hol):
    table = charts.metrics_table({label: metrics.summary(t) for label, t in hol.items()})
    assert list(table["policy"]) == ["FCFS", "SJF (true lengths)"]
    assert list(table["mean finish time (steps)"]) == [1100.0, 500.0]
    for column in table.columns[1:]:
        assert column.endswith(")"), column
    assert str(table["preemptions (count)"].dtype) == "Int64"
    ms = charts.metrics_table({label: metrics.summary(t) for label, t in hol.items()}, unit="ms",
                              columns=["finish_mean", "throughput"])
    assert list(ms.columns) == ["policy", "mean finish time (ms)", "throughput (tokens/s)"]
    assert (ms["mean finish time (ms)"] == ms["mean finish time (ms)"].round(1)).all()
    with pytest.raises(ValueError, match="columns"):
        charts.metrics_table({}, columns=["nope"])


def test_metrics_table_is_a_plain_frame_of_numbers(fairness):
    table = charts.metrics_table({label: metrics.summary(t) for label, t in fairness.items()}, unit="ms")
    assert isinstance(table, pd.DataFrame) and len(table) == 3
    assert table.loc[table["policy"] == "Rate limit", "rejected (requests)"].item() == 233


def test_charts_never_import_streamlit(repo_root):
    code = "import sys, ui.charts; assert 'streamlit' not in sys.modules, 'streamlit imported'"
    subprocess.run([sys.executable, "-c", code], cwd=repo_root, check=True)
    for path in (repo_root / "ui" / "charts").glob("*.py"):
        assert "import streamlit" not in path.read_text(), path


def test_gantts_side_by_side_share_the_x_axis_they_are_given(busy):
    fcfs = busy["FCFS"]
    longest = 2 * fcfs.num_steps
    assert list(charts.gantt(fcfs, STYLE).layout.xaxis.range) == [0, fcfs.num_steps]
    assert list(charts.gantt(fcfs, STYLE, x_max=longest).layout.xaxis.range) == [0, longest]
    ms = charts.gantt(fcfs, STYLE, x_unit="ms", x_max=123.5)
    assert list(ms.layout.xaxis.range) == [0, 123.5]


def test_per_step_series_in_ms_hold_each_step_over_its_own_span():
    # A step's value is drawn from the start of that step (the "hv" shape holds it to the next start), as in the
    # Gantt chart: toy_pool's step 145 (the second preemption, 22 blocks in use) sits over 838.04..843.80 ms.
    trace = run("toy_pool")
    starts = trace.start_ms(np.arange(trace.num_steps))
    kv = charts.kv_occupancy(trace, STYLE, x_unit="ms")
    np.testing.assert_allclose(kv.data[0].x, starts)
    i = int(np.searchsorted(kv.data[0].x, 840.0, side="right")) - 1  # a moment inside step 145
    assert i == 145 and np.sum([t.y[i] for t in kv.data]) == trace.steps["used_blocks"][145] == 22
    queue = charts.queue_and_batch({"FCFS": trace}, STYLE, x_unit="ms")
    assert queue.data[0].x[0] == 0.0  # step 0 is drawn from time 0
    victims = preemption.kv_over_time(trace, STYLE, x_unit="ms", parts=[("all", -1, trace.steps["used_blocks"])])
    np.testing.assert_allclose(victims.data[0].x, starts)


def test_envelope_keeps_both_extremes_and_every_stretch():
    # A signed curve (who is ahead) with gaps: each bucket keeps its lowest and highest value in time order, and a
    # bucket is empty only when all of it is (a max per bucket lost the negative side and most short stretches).
    y = np.sin(np.arange(6000) / 37.0) * 100
    y[::50] = np.nan  # a 1-step gap every 50 steps
    y[3000] = -500.0  # a narrow dip
    x, shown = envelope(np.arange(6000), y, max_points=1500)
    assert len(shown) <= 1500
    assert np.nanmin(shown) == -500.0 and np.nanmax(shown) == np.nanmax(y)
    assert np.all(np.diff(x) >= 0)  # still in time order
    all_gap = np.full(6000, np.nan)
    assert np.isnan(envelope(np.arange(6000), all_gap)[1]).all()


def test_service_gap_chart_keeps_the_negative_side_of_a_long_run():
    traces = variants("prefill_vs_decode")
    fcfs = traces["FCFS"]
    assert fcfs.num_steps > 1500  # long enough to be bucketed
    diff = fairness_metrics.service_difference(fcfs, 0, 1)
    fig = fc.service_gap_chart({"FCFS": fcfs}, STYLE)
    line = next(t for t in fig.data if t.name.startswith("FCFS"))
    assert np.nanmin(np.asarray(line.y, dtype=float)) == np.nanmin(diff)  # -266, drawn as -250 before


def test_request_colours_never_mean_preempted_or_swapped():
    assert not {theme.STATE_COLORS["preempted"], theme.STATE_COLORS["swapped"]} & set(theme.REQUEST_COLORS)


def test_time_extent_is_the_longest_run_in_the_axis_unit(hol):
    # FCFS and SJF both end with step 1,199: 1,200 steps; in ms, the clock when it ends (the page's max finish time).
    assert charts.time_extent(hol.values(), "steps") == 1200
    assert charts.time_extent(hol.values(), "ms") == pytest.approx(6907.4, abs=0.05)
    assert charts.time_extent([hol["SJF (true lengths)"]], "steps") == 1200
