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
WINDOW_MS = 1500.0  # a longer run's token chart shows this much around its longest gap


def token_times(trace: Trace, style: ChartStyle, *, title: str = "Each stream's tokens",
                max_streams: int = MAX_STREAMS, window_ms: float | None = WINDOW_MS) -> go.Figure:
    """One row per request (arrival order, first at the top), one tick per token read, at the end of the step
    that produced it (ms): a steady stream is an even comb, a stall a gap. A run longer than ``window_ms`` is shown
    around its longest gap only (ticks would merge on a long axis), and of more than ``max_streams`` streams those
    with the longest gaps there."""
    steps, who, _, kinds = trace.schedule_entries()
    emits = np.isin(kinds, (SCHED_PREFILL_DONE, SCHED_DECODE))  # the tokens read
    t_all, who_all = trace.steps["time_ms"][steps[emits]], who[emits]
    g = metrics.token_gaps(trace)  # (once: the window, the streams picked and the tick labels all read it)
    gaps = metrics.request_tbt(trace, g)["max_ms"]
    lo, hi = worst_gap_window(trace, window_ms, g)
    inside = (t_all >= lo) & (t_all <= hi)
    rows = shown_streams(trace, max_streams, np.unique(who_all[inside]), gaps)
    keep = inside & np.isin(who_all, rows)
    ids = np.asarray(trace.request_ids, dtype=object)
    data = [{
        "type": "scatter", "x": t_all[keep], "y": ids[who_all[keep]], "mode": "markers", "name": "a token",
        "marker": {"symbol": "line-ns", "size": style.marker_size * 1.4,
                   "line": {"width": style.line_width * 0.6, "color": theme.STATE_COLORS["decode"]}},
        "showlegend": False, "hovertemplate": "%{y}: a token at %{x:,.1f} ms<extra></extra>",
    }]
    order = [trace.request_ids[r] for r in rows]
    ticks = [f"{rid} ({fmt_num(gaps[r])} ms)" if np.isfinite(gaps[r]) else rid
             for rid, r in zip(order, rows, strict=True)]
    whole = lo <= 0 and hi >= (float(trace.steps["time_ms"][-1]) if trace.num_steps else 0.0)
    where = "" if whole else " around its longest gap"
    shown = f", {len(rows)} of {trace.num_requests} streams" if len(rows) < trace.num_requests else ""
    layout = styled_layout(style, title=title + where + shown, x_title="time (ms)",
                           y_title="stream (its longest gap)", legend=False,
                           height=max(MIN_HEIGHT, 120 + ROW_PX * len(rows)),
                           xaxis={"range": [lo, hi]},
                           yaxis={"categoryorder": "array", "categoryarray": order[::-1], "tickvals": order,
                                  "ticktext": ticks, "showgrid": False, "type": "category"})
    return trusted_figure(data, layout)


def worst_gap_window(trace: Trace, window_ms: float | None = WINDOW_MS,
                     gaps: metrics.TokenGaps | None = None) -> tuple[float, float]:
    """(start, end) ms to show: the whole run, or ``window_ms`` centred on the run's longest gap between tokens.
    ``gaps``: the trace's ``metrics.token_gaps`` if computed."""
    end = float(trace.steps["time_ms"][-1]) if trace.num_steps else 1.0
    g = metrics.token_gaps(trace) if gaps is None else gaps
    if window_ms is None or end <= window_ms or not len(g.ms):
        return 0.0, end
    i = int(np.argmax(g.ms))
    mid = float(trace.steps["time_ms"][g.after[i]]) - g.ms[i] / 2
    lo = min(max(mid - window_ms / 2, 0.0), end - window_ms)
    return lo, lo + window_ms


def shown_streams(trace: Trace, max_streams: int = MAX_STREAMS, candidates: np.ndarray | None = None,
                  max_gap_ms: np.ndarray | None = None) -> list[int]:
    """The rows token_times shows, in arrival order: the ``candidates`` (default all), or of more than
    ``max_streams`` those with the longest gap. ``max_gap_ms``: ``metrics.request_tbt(trace)["max_ms"]`` if
    computed."""
    order = arrival_order(trace)
    if candidates is not None:
        order = order[np.isin(order, candidates)]
    if len(order) <= max_streams:
        return order.tolist()
    longest = metrics.request_tbt(trace)["max_ms"] if max_gap_ms is None else max_gap_ms
    gaps = np.nan_to_num(longest, nan=-1.0)
    keep = set(order[np.argsort(-gaps[order], kind="stable")[:max_streams]].tolist())
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
    xs = [x for d in data for x in (d["x"][0], d["x"][-1])]
    # (room past the largest gap: plotly's autorange ends a line at its last value, so a stall's step up to 100%
    # would sit on the border, half cut off)
    layout = styled_layout(style, title=title, x_title="time between two tokens of a stream (ms, log scale)",
                           y_title="gaps (%)", height=400, xaxis=log_axis(xs, headroom=TBT_HEADROOM),
                           yaxis={"range": [0, 102]})
    return trusted_figure(data, layout)


def log_axis(values: Sequence[float], *, headroom: float = 0.0) -> dict[str, Any]:
    """A log axis ticked at 1, 2, 5, 10, 20, 50... within ``values``' span (plotly's own log ticks label 20 as
    "2" beside the 10 they follow, which reads as 2 ms); a span of less than a decade, where that leaves two or three
    labels, at 1, 1.5, 2, 3, 4, 5, 7, 10, 15... ``headroom`` > 0 fixes the range: the values' span in decades (at
    least ``MIN_HEADROOM_DECADES``) times ``headroom`` left blank at either end; 0 leaves it to plotly's autorange."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=np.float64)
    if not len(v):
        return {"type": "log"}
    lo, hi = float(v.min()) / 1.3, float(v.max()) * 1.3
    seen_lo, seen_hi = float(v.min()) / 1.05, float(v.max()) * 1.05  # about what plotly's autorange shows
    axis: dict[str, Any] = {"type": "log"}
    if headroom > 0:
        first, last = np.log10(float(v.min())), np.log10(float(v.max()))
        pad = headroom * max(last - first, MIN_HEADROOM_DECADES)
        axis["range"] = [float(first - pad), float(last + pad)]  # (a log axis's range is in decades)
        seen_lo, seen_hi = 10.0 ** axis["range"][0], 10.0 ** axis["range"][1]
        lo, hi = min(lo, seen_lo), max(hi, seen_hi)
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 4, 5, 7)):
        ticks = [m * 10.0**e for e in range(-1, 8) for m in mantissas if lo <= m * 10.0**e <= hi]
        if sum(seen_lo <= t <= seen_hi for t in ticks) >= MIN_LOG_TICKS:
            break
    return {**axis, "tickvals": ticks,
            "ticktext": [f"{t:,.0f}" if abs(t - round(t)) < 1e-9 else f"{t:g}" for t in ticks]}


MIN_LOG_TICKS = 4  # labels a log axis shows at least, where its span allows
MIN_HEADROOM_DECADES = 0.5  # the span log_axis's headroom is a share of, at least (all values alike: still room)
TBT_HEADROOM = 0.08  # share of the span left past the largest (and smallest) gap of tbt_distribution's axis


SERIES = {"chunked": ("chunked prefill", theme.BLUE, "circle"),
          "unchunked": ("no chunking", theme.VERMILLION, "square")}
CURRENT_SYMBOLS = ("diamond-open", "triangle-up-open", "star-open", "hexagon-open", "x-open", "pentagon-open",
                   "hourglass-open", "cross-open")  # the current runs' markers: open, none a series' own


def tradeoff(sweep: Mapping[str, Any], style: ChartStyle, *, current: Sequence[tuple[str, float, float]] = (),
             title: str = "The budget's trade-off: one point per budget") -> go.Figure:
    """p99 TTFT (y) against p99 time between tokens (x), one point per budget, labelled with it, a line per
    series (``sweep["chunked"]``, ``sweep["unchunked"]``: lists of (budget, p99 TTFT ms, p99 TBT ms)); both axes
    log. ``current``: (label, p99 TTFT, p99 TBT) of the runs above, each its own open symbol (``CURRENT_SYMBOLS``,
    by position), its label below it and its name in the legend."""
    data: list[dict[str, Any]] = []
    for key, (name, color, symbol) in SERIES.items():
        points = [p for p in sweep.get(key, []) if np.isfinite(p[1]) and np.isfinite(p[2])]
        if not points:
            continue
        budgets, ttft, tbt = (list(x) for x in zip(*points, strict=True))
        data.append({
            "type": "scatter", "x": tbt, "y": ttft, "mode": "lines+markers+text", "name": name,
            "text": [f"{b:,}" for b in budgets], "textposition": "top right", "cliponaxis": False,
            "textfont": {"size": style.font_size * 0.85, "color": color},
            "line": {"color": color, "width": style.line_width, "dash": "solid" if key == "chunked" else "dash"},
            "marker": {"size": style.marker_size, "color": color, "symbol": symbol},
            "customdata": budgets,
            "hovertemplate": f"{name}, budget %{{customdata:,}}<br>p99 TTFT %{{y:,.1f}} ms<br>"
                             "p99 time between tokens %{x:,.1f} ms<extra></extra>",
        })
    shown = [(i, label, ttft, tbt) for i, (label, ttft, tbt) in enumerate(current)
             if np.isfinite(ttft) and np.isfinite(tbt) and tbt > 0]
    xs = np.log10([x for d in data for x in d["x"] if x > 0] + [tbt for *_, tbt in shown] or [1.0])
    middle = (xs.min() + xs.max()) / 2  # a label goes below its marker, on the side with more room (decades)
    for i, label, ttft, tbt in shown:  # (i: a run keeps its symbol whether or not the others are drawn)
        data.append({
            "type": "scatter", "x": [tbt], "y": [ttft], "mode": "markers+text", "name": label,
            "text": [label], "textposition": "bottom left" if np.log10(tbt) > middle else "bottom right",
            "textfont": {"size": style.font_size * 0.85, "color": theme.BLACK}, "cliponaxis": False,
            "marker": {"size": style.marker_size * 2, "symbol": CURRENT_SYMBOLS[i % len(CURRENT_SYMBOLS)],
                       "color": theme.BLACK, "line": {"width": style.line_width}},
            "hovertemplate": f"{label}<br>p99 TTFT %{{y:,.1f}} ms<br>p99 time between tokens %{{x:,.1f}} ms"
                             "<extra></extra>",
        })
    layout = styled_layout(style, title=title, x_title="p99 time between tokens (ms, log scale)",
                           y_title="p99 time to first token (ms, log scale)", height=460,
                           xaxis=log_axis([x for d in data for x in d["x"]]),
                           yaxis=log_axis([y for d in data for y in d["y"]]))
    return trusted_figure(data, layout)
