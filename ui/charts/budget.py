"""Token budget: each stream's tokens over time (a stall is a gap), the time between tokens per run, and the
trade-off curve of the budget sweep (p99 TTFT against p99 time between tokens, one point per budget).

Times are ms from the cost model (sim.metrics: a token's time is the end of the step that produced it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim import metrics
from sim.trace import SCHED_DECODE, SCHED_PREFILL_DONE, Trace
from ui import theme
from ui.charts.gantt import arrival_order
from ui.charts.layout import fmt_num, label_colors, label_dash, styled_layout, trusted_figure
from ui.theme import ChartStyle

MAX_STREAMS = 24  # rows of the token-times chart: more would make each row too thin to see a gap in
MAX_ECDF_POINTS = 1000  # per line: gaps sampled at evenly spaced ranks (a busy run has ~45,000)
ROW_PX, MIN_HEIGHT = 22, 320


def token_times(trace: Trace, style: ChartStyle, *, title: str = "Each stream's tokens",
                max_streams: int = MAX_STREAMS, x_max: float | None = None) -> go.Figure:
    """One row per request (arrival order, first at the top), one tick per token read, at the end of the step
    that produced it (ms): a steady stream is an even comb, a stall a gap. With more than ``max_streams``
    requests, the ones with the longest gap between two tokens are shown."""
    rows = shown_streams(trace, max_streams)
    steps, who, _, kinds = trace.schedule_entries()
    emits = np.isin(kinds, (SCHED_PREFILL_DONE, SCHED_DECODE)) & np.isin(who, rows)  # the tokens read
    t = trace.steps["time_ms"][steps[emits]]
    ids = np.asarray(trace.request_ids, dtype=object)
    gaps = metrics.request_tbt(trace)["max_ms"]
    data = [{
        "type": "scatter", "x": t, "y": ids[who[emits]], "mode": "markers", "name": "a token",
        "marker": {"symbol": "line-ns", "size": style.marker_size * 1.4,
                   "line": {"width": style.line_width * 0.6, "color": theme.STATE_COLORS["decode"]}},
        "showlegend": False, "hovertemplate": "%{y}: a token at %{x:,.1f} ms<extra></extra>",
    }]
    order = [trace.request_ids[r] for r in rows]
    ticks = [f"{rid} (max gap {fmt_num(gaps[r])} ms)" if np.isfinite(gaps[r]) else rid
             for rid, r in zip(order, rows, strict=True)]
    shown = f" ({len(rows)} of {trace.num_requests} with the longest gaps)" if len(rows) < trace.num_requests else ""
    end = float(trace.steps["time_ms"][-1]) if trace.num_steps else 1.0
    layout = styled_layout(style, title=title + shown, x_title="time (ms)", y_title=None, legend=False,
                           height=max(MIN_HEIGHT, 120 + ROW_PX * len(rows)),
                           xaxis={"range": [0, x_max or end]},
                           yaxis={"categoryorder": "array", "categoryarray": order[::-1], "tickvals": order,
                                  "ticktext": ticks, "showgrid": False, "type": "category"})
    return trusted_figure(data, layout)


def shown_streams(trace: Trace, max_streams: int = MAX_STREAMS) -> list[int]:
    """The rows token_times shows, in arrival order: all, or the ``max_streams`` with the longest gap."""
    order = arrival_order(trace)
    if len(order) <= max_streams:
        return order.tolist()
    gaps = np.nan_to_num(metrics.request_tbt(trace)["max_ms"], nan=-1.0)
    keep = set(np.argsort(-gaps, kind="stable")[:max_streams].tolist())
    return [int(r) for r in order if r in keep]


def tbt_distribution(traces: Mapping[str, Trace], style: ChartStyle, *, colors: Mapping[str, str] | None = None,
                     title: str = "Time between tokens, every gap") -> go.Figure:
    """One ECDF per run of every gap between two tokens of a served request (ms, log scale), p99 in the legend."""
    colors = dict(colors or label_colors(traces))
    data = []
    for i, (label, trace) in enumerate(traces.items()):
        g = metrics.token_gaps(trace)
        v = np.sort(g.ms[metrics.served_mask(trace)[g.rows]])
        if not len(v):
            continue
        share = np.arange(1, len(v) + 1) / len(v) * 100.0
        pick = np.unique(np.linspace(0, len(v) - 1, min(len(v), MAX_ECDF_POINTS)).astype(int))
        p99 = metrics.percentiles(v, (99,))[0]
        data.append({
            "type": "scatter", "x": v[pick], "y": share[pick], "mode": "lines",
            "name": f"{label} (p99 {fmt_num(p99)} ms)",
            "line": {"color": colors[label], "width": style.line_width, "shape": "hv", "dash": label_dash(i)},
            "hovertemplate": f"{label}: %{{y:.1f}}% of gaps within %{{x:,.1f}} ms<extra></extra>",
        })
    layout = styled_layout(style, title=title, x_title="time between two tokens of a stream (ms, log scale)",
                           y_title="gaps (%)", height=400, xaxis={"type": "log"}, yaxis={"range": [0, 102]})
    return trusted_figure(data, layout)


SERIES = {"chunked": ("chunked prefill", theme.BLUE, "circle"),
          "unchunked": ("no chunking", theme.VERMILLION, "square")}


def tradeoff(sweep: Mapping[str, Any], style: ChartStyle, *, current: Sequence[tuple[str, float, float]] = (),
             title: str = "The budget's trade-off: one point per budget") -> go.Figure:
    """p99 TTFT (y) against p99 time between tokens (x), one point per budget, labelled with it, a line per
    series (``sweep["chunked"]``, ``sweep["unchunked"]``: lists of (budget, p99 TTFT ms, p99 TBT ms)); both axes
    log. ``current``: (label, p99 TTFT, p99 TBT) of the runs above, drawn as open diamonds."""
    data: list[dict[str, Any]] = []
    for key, (name, color, symbol) in SERIES.items():
        points = [p for p in sweep.get(key, []) if np.isfinite(p[1]) and np.isfinite(p[2])]
        if not points:
            continue
        budgets, ttft, tbt = (list(x) for x in zip(*points, strict=True))
        data.append({
            "type": "scatter", "x": tbt, "y": ttft, "mode": "lines+markers+text", "name": name,
            "text": [f"{b:,}" for b in budgets], "textposition": "top right",
            "textfont": {"size": style.font_size * 0.85, "color": color},
            "line": {"color": color, "width": style.line_width, "dash": "solid" if key == "chunked" else "dash"},
            "marker": {"size": style.marker_size, "color": color, "symbol": symbol},
            "customdata": budgets,
            "hovertemplate": f"{name}, budget %{{customdata:,}}<br>p99 TTFT %{{y:,.1f}} ms<br>"
                             "p99 time between tokens %{x:,.1f} ms<extra></extra>",
        })
    for label, ttft, tbt in current:
        if np.isfinite(ttft) and np.isfinite(tbt):
            data.append({
                "type": "scatter", "x": [tbt], "y": [ttft], "mode": "markers", "name": label,
                "marker": {"size": style.marker_size * 2, "symbol": "diamond-open", "color": theme.BLACK,
                           "line": {"width": style.line_width}},
                "hovertemplate": f"{label}<br>p99 TTFT %{{y:,.1f}} ms<br>p99 time between tokens %{{x:,.1f}} ms"
                                 "<extra></extra>",
            })
    layout = styled_layout(style, title=title, x_title="p99 time between tokens (ms, log scale)",
                           y_title="p99 time to first token (ms, log scale)", height=460,
                           xaxis={"type": "log"}, yaxis={"type": "log"})
    return trusted_figure(data, layout)
