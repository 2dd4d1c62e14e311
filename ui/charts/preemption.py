"""Figures for the Preemption lesson: KV occupancy stacked per request (or per state) with preemption markers and
CPU swap use, the Gantt chart with resume markers, the recompute-vs-swap cost bars, the prefix-cache hits of each
re-prefill, and the sizing-sweep heatmaps. (The block map, step by step, is the step player's: ui/player.js.)

Pure builders: each takes a trace (or plain numbers) and a ``ChartStyle`` and returns a ``go.Figure``; none calls
Streamlit or mutates its inputs; ``layout.styled_layout`` sets the look, and the figure is made once from trace and
layout dicts (``layout.trusted_figure``). A request keeps one colour (its row's series colour) in the per-request
KV chart and the player's block map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim.config import cdiv
from sim.preemption_metrics import PreemptionCost
from sim.trace import Trace
from ui import theme
from ui.charts.gantt import arrival_order, gantt
from ui.charts.layout import NO_FILL, downsample, step_axis, styled_layout, time_title, trusted_figure
from ui.charts.timeseries import KV_UNITS, kv_occupancy_parts, pool_line
from ui.theme import ChartStyle
from ui.wording import chart_text


def fixed_margins(*, left: int, right: int, top: int, bottom: int) -> dict[str, Any]:
    """Layout settings for a heatmap figure with its margins set outright (give its axes automargin=False too).
    NOTE: when plotly.js pushes a margin after the first draw (auto margins for a legend, a colour bar or tick
    labels), it keeps the heatmap at its first size: the cells no longer line up with the axes and a band of
    background shows. Fixed margins avoid the second draw. ``pad`` is pinned to 0 because Streamlit's chart theme
    sets one, which frames the cells with a band of the plot background."""
    return {"margin": {"l": left, "r": right, "t": top, "b": bottom, "pad": 0, "autoexpand": False},
            "title": {"automargin": False}}


# ---- KV occupancy over time ------------------------------------------------------------------------------------------
def kv_over_time(trace: Trace, style: ChartStyle, *, by: str = "request", x_unit: str = "steps",
                 unit: str = "blocks", parts: Sequence[tuple[str, int, np.ndarray]] = (),
                 title: str = "KV cache over time") -> go.Figure:
    """Stacked KV blocks in use over time: per request (``parts``: (name, request row or -1 for "the rest",
    blocks per step), e.g. from ``lessons.preemption.lesson.kv_parts``) or per state (held vs free-but-cached, the
    shared ``kv_occupancy``). Both mark each preemption with a triangle above the pool line and draw the CPU swap
    space in use as a dotted line."""
    if by == "state":
        data, layout = kv_occupancy_parts(trace, style, by="state", x_unit=x_unit, unit=unit, title=title)
    elif by == "request":
        data, layout = _kv_by_request(trace, style, parts, x_unit=x_unit, unit=unit, title=title)
    else:
        raise ValueError(f"by: must be 'request' or 'state', got {by!r}")
    data += _cpu_swap_line(trace, style, x_unit, unit) + _preemption_marks(trace, style, x_unit, unit)
    pool = trace.config.num_blocks * KV_UNITS[unit][1](trace)
    layout["yaxis"]["range"] = [0, pool * 1.2]  # headroom: the preemption marks ride above the pool's label
    return trusted_figure(data, layout)


def _kv_by_request(trace: Trace, style: ChartStyle, parts: Sequence[tuple[str, int, np.ndarray]], *, x_unit: str,
                   unit: str, title: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if unit not in KV_UNITS:
        raise ValueError(f"unit: must be one of {', '.join(KV_UNITS)}, got {unit!r}")
    y_title, per_block = KV_UNITS[unit]
    scale = per_block(trace)
    x, _ = step_axis(trace, x_unit)
    # A request keeps its block-map colour while there are few enough requests for one colour each; beyond that
    # the colours go by rank, so no two stacked requests share one.
    by_row = trace.num_requests <= len(theme.REQUEST_COLORS)
    series = [(name, values, theme.GREY if row < 0 else theme.request_color(row if by_row else i))
              for i, (name, row, values) in enumerate(parts)]
    cached = np.minimum(trace.steps["cached_free_blocks"], trace.config.num_blocks - trace.steps["used_blocks"])
    if cached.any():
        series.append((theme.CACHED_FREE_LABEL, cached, theme.LIGHT_GREY))
    xs, *ys = downsample(x, *(v for _, v, _ in series), how="mean")
    decimals = 0 if unit == "blocks" else 2
    data = [{
        "type": "scatter", "x": xs, "y": np.asarray(y) * scale, "name": name, "mode": "lines", "stackgroup": "kv",
        "fillcolor": color, "line": {"color": color, "width": 0.5, "shape": "hv"},
        "hovertemplate": f"{name}: %{{y:,.{decimals}f}} {unit}<extra></extra>",
    } for (name, _, color), y in zip(series, ys, strict=True)]
    pool = trace.config.num_blocks * scale
    shape, note = pool_line(pool, unit, style)
    # Legend entries in two even columns (one per request would otherwise wrap into a tall single column in a
    # half-width chart and squeeze the plot); the chart grows by a row of legend beyond three.
    legend_rows = cdiv(len(series) + 2, 2)
    return data, styled_layout(style, title=title, x_title=time_title(x_unit), y_title=y_title,
                               height=420 + 22 * max(legend_rows - 3, 0), hovermode="x unified",
                               xaxis={"rangemode": "tozero"}, yaxis={"range": [0, pool * 1.12]},
                               layout={"legend": {"entrywidth": 0.5, "entrywidthmode": "fraction"},
                                       "shapes": [shape], "annotations": [note]})


def _cpu_swap_line(trace: Trace, style: ChartStyle, x_unit: str, unit: str) -> list[dict[str, Any]]:
    cpu = trace.steps["cpu_blocks_used"]
    if not cpu.any():
        return []
    scale = KV_UNITS[unit][1](trace)
    x, _ = step_axis(trace, x_unit)
    x, y = downsample(x, cpu, how="max")
    return [{
        "type": "scatter", "x": x, "y": y * scale, "mode": "lines",
        # (short: the legend's two columns are half a chart wide, and in presentation mode "CPU swap (host RAM)"
        # still ran into the entry beside it; the hover says where the blocks are)
        "name": "CPU swap",
        "line": {"color": theme.STATE_COLORS["swapped"], "width": style.line_width, "dash": "dot", "shape": "hv"},
        "hovertemplate": f"in CPU swap space (host RAM, not the pool): %{{y:,.{0 if unit == 'blocks' else 2}f}} "
                         f"{unit}<extra></extra>"}]


def _preemption_marks(trace: Trace, style: ChartStyle, x_unit: str, unit: str) -> list[dict[str, Any]]:
    victims: dict[int, list[str]] = {}
    for row, per_request in enumerate(trace.preempted_at_steps):
        for step in per_request:
            victims.setdefault(step, []).append(chart_text(trace.request_ids[row]))
    if not victims:
        return []
    s = np.array(sorted(victims))
    pool = trace.config.num_blocks * KV_UNITS[unit][1](trace)
    return [{
        "type": "scatter", "x": s if x_unit == "steps" else trace.start_ms(s), "y": np.full(len(s), pool * 1.14),
        "mode": "markers", "name": "preemption", "cliponaxis": False,
        "marker": {"symbol": "triangle-down", "size": style.marker_size + 2, "color": theme.STATE_COLORS["preempted"],
                   "line": {"color": theme.BLACK, "width": 1}},
        "customdata": np.array([[int(v), ", ".join(victims[int(v)])] for v in s], dtype=object),
        "hovertemplate": "step %{customdata[0]:,}: preempted %{customdata[1]}<extra></extra>"}]


# ---- Gantt with resume markers ---------------------------------------------------------------------------------------
def gantt_with_resumes(trace: Trace, style: ChartStyle, *, notes: Mapping[tuple[int, int], str] | None = None,
                       **gantt_kwargs: Any) -> go.Figure:
    """The shared Gantt chart (preempted and swapped segments, a triangle at each preemption) plus a triangle
    pointing up where each evicted request came back: re-prefilled (recompute) or copied back (swap).
    ``notes`` maps (row, step) to an extra hover line, e.g. the prefix-cache hits of that re-prefill."""
    fig = gantt(trace, style, **gantt_kwargs)
    rows = arrival_order(trace)[:gantt_kwargs.get("max_requests")]
    pos = np.full(trace.num_requests, -1)
    pos[rows] = np.arange(len(rows))
    many = len(rows) > 40
    x_unit = gantt_kwargs.get("x_unit", "steps")
    marks_traces = []
    for name, symbol_color, swapped in (("came back (re-prefill)", theme.GREEN, False),
                                        ("came back (copied in from CPU)", theme.STATE_COLORS["swapped"], True)):
        marks = [(r, s) for r in range(trace.num_requests) if pos[r] >= 0 for s in trace.resumed_at_steps[r]
                 if (s in trace.swapped_in_at_steps[r]) == swapped]
        if not marks:
            continue
        r_, s_ = np.array([m[0] for m in marks]), np.array([m[1] for m in marks])
        hover = [f"<b>{chart_text(trace.request_ids[r])}</b>: {name} at step {s:,}"
                 + (f"<br>{notes[(r, s)]}" if notes and (r, s) in notes else "") for r, s in marks]
        marks_traces.append(go.Scatter(
            x=s_ if x_unit == "steps" else trace.start_ms(s_), y=pos[r_] + 0.45, mode="markers", name=name,
            cliponaxis=False, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
            marker={"symbol": "triangle-up", "color": symbol_color,
                    "size": style.marker_size if many else style.marker_size + 4,
                    "line": {"color": theme.BLACK, "width": 1.5}}))
    fig.add_traces(marks_traces)
    if len(rows) <= 6:
        # A short chart: the shared axis title would run past its rows, and in a half-width column the legend
        # wraps to one entry a line; give the bars their room under it.
        fig.layout.yaxis.title.text = "requests"
        fig.layout.height = max(fig.layout.height or 0, style.height(200 + 40 * len(rows) + 22 * len(fig.data)))
    return fig


# ---- recompute vs swap -----------------------------------------------------------------------------------------------
def cost_bars(cost: PreemptionCost, style: ChartStyle, *, bandwidth_gb_s: float, title: str | None = None) -> go.Figure:
    """Bringing one victim back, both ways, side by side: time added to engine steps (ms: the re-prefill, or the
    copies out and in at peak bandwidth plus the per-block overhead) and CPU RAM held while evicted (MB).

    ``cost``: a ``sim.preemption_metrics.PreemptionCost`` (num_tokens, num_blocks, swap_bytes, recompute_ms,
    swap_transfer_ms, swap_overhead_ms, swap_ms)."""
    ys = ["recompute", "swap"]
    rec, swp = theme.STATE_COLORS["preempted"], theme.STATE_COLORS["swapped"]
    segments = (
        ("re-prefill on the GPU", [cost.recompute_ms, 0.0], rec, ""),
        (f"copy out at {bandwidth_gb_s:g} GB/s", [0.0, cost.swap_transfer_ms], swp, ""),
        (f"copy back in at {bandwidth_gb_s:g} GB/s", [0.0, cost.swap_transfer_ms], theme.SKY_BLUE, ""),
        (f"per-block overhead ({2 * cost.num_blocks:,} copies)", [0.0, 2 * cost.swap_overhead_ms], theme.GREY, "/"),
    )
    mb = cost.swap_bytes / 1e6
    traces = [{"type": "bar", "y": ys, "x": x, "orientation": "h", "name": name,
               "marker": {"color": color, "pattern": {"shape": pattern}},
               "hovertemplate": f"{name}: %{{x:,.2f}} ms<extra></extra>"} for name, x, color, pattern in segments
              if any(x)]
    traces.append({"type": "bar", "y": ys, "x": [0.0, mb], "orientation": "h", "name": "KV parked in CPU RAM",
                   "showlegend": False, "xaxis": "x2", "yaxis": "y2", "marker": {"color": swp},
                   "hovertemplate": "%{x:,.0f} MB<extra></extra>"})
    totals = [cost.recompute_ms, 2 * cost.swap_ms]
    notes = [{"x": t, "y": y, "text": f" {t:,.1f} ms", "showarrow": False, "xanchor": "left", "xref": "x",
              "yref": "y"} for y, t in zip(ys, totals, strict=True)]
    notes += [{"x": v, "y": y, "text": f" {v:,.0f} MB", "showarrow": False, "xanchor": "left", "xref": "x2",
               "yref": "y2"} for y, v in zip(ys, (0.0, mb), strict=True)]
    # Two panels side by side without make_subplots (slow): the second pair of axes shares the bars' rows.
    axes = {"xaxis": {"domain": [0, 0.56]}, "xaxis2": {"domain": [0.68, 1], "anchor": "y2"}, "yaxis": {},
            "yaxis2": {"anchor": "x2", "matches": "y", "showticklabels": False}}  # both y axes get the shared look
    return trusted_figure(traces, styled_layout(
        style, title=title or f"Bringing back a {cost.num_tokens:,}-token victim ({cost.num_blocks:,} blocks, "
        f"{mb:,.0f} MB of KV)", x_title=None, y_title=None, height=300, base=axes,
        yaxis={"autorange": "reversed", "showgrid": False},
        layout={"barmode": "stack", "annotations": notes,
                "margin": {"l": int(0.62 * style.font_size * len("recompute")) + 24, "r": 24},
                "xaxis": {"range": [0, max(totals) * 1.3 or 1], "title": {"text": "time added to engine steps (ms)"}},
                "xaxis2": {"range": [0, mb * 1.45 or 1], "title": {"text": "CPU RAM held (MB)"}}}))


# ---- prefix-cache hits on re-prefill ---------------------------------------------------------------------------------
def reprefill_hits(readmissions: Sequence[tuple[str, int, int]], style: ChartStyle, *,
                   title: str = "Re-prefills") -> go.Figure:
    """One stacked bar per re-admission after a recompute preemption: ``(label, hit tokens, recomputed
    tokens)``, e.g. ("C @ step 200", 96, 65)."""
    labels = [r[0] for r in readmissions]
    hits = np.array([r[1] for r in readmissions], dtype=np.float64)
    again = np.array([r[2] for r in readmissions], dtype=np.float64)
    bars = [{"type": "bar", "x": labels, "y": y, "name": name, "marker": {"color": color},
             "hovertemplate": f"%{{x}}: %{{y:,.0f}} tokens {name}<extra></extra>"}
            for name, y, color in (("found in the prefix cache", hits, theme.GREEN),
                                   ("prefilled again (GPU)", again, theme.STATE_COLORS["prefill"]))]
    total = hits.sum() + again.sum()
    share = f": {hits.sum() / total:.0%} cache hits" if total else ""
    return trusted_figure(bars, styled_layout(
        style, title=title + share, x_title="re-admission (request @ step)", y_title="tokens", height=380,
        layout={"barmode": "stack"}, xaxis={"showticklabels": len(labels) <= 30}))


# ---- sizing sweep ----------------------------------------------------------------------------------------------------
def sweep_heatmap(pools_gib: Sequence[float], pools_blocks: Sequence[int], seqs: Sequence[int], z: np.ndarray,
                  style: ChartStyle, *, title: str, colorbar_title: str, color: str, value_format: str = ",.0f",
                  current: tuple[int, int] | None = None, from_zero: bool = True,
                  pending: np.ndarray | None = None) -> go.Figure:
    """A heatmap over the sweep grid (rows = max_num_seqs, columns = pool size in GiB), the value in each cell,
    white for zero (``from_zero``) or for the smallest value, "—" where no request was served, "…" in a cell still
    running (``pending``, a bool mask). ``current`` = (row, column) of the knobs' setting, outlined. The pool's
    block counts are in the hover text."""
    x = [f"{g:.2g}" for g in pools_gib]
    y = [str(s) for s in seqs]
    z = np.asarray(z, dtype=np.float64)
    if pending is not None:
        z = np.where(pending, np.nan, z)
    text = np.where(np.isfinite(z), np.vectorize(lambda v: format(v, value_format), otypes=[object])(
        np.nan_to_num(z)), "\u2014")
    if pending is not None:
        text = np.where(pending, "\u2026", text)
    blocks = np.broadcast_to(np.asarray([f"{b:,}" for b in pools_blocks], dtype=object), z.shape)
    finite = z[np.isfinite(z)]
    top = float(finite.max()) if len(finite) and finite.max() > 0 else 1.0
    low = 0.0 if from_zero or not len(finite) else float(finite.min())  # white = zero, or the best cell
    cells = {
        "type": "heatmap", "x": x, "y": y, "z": z, "text": text, "customdata": blocks, "texttemplate": "%{text}",
        "zmin": low, "zmax": max(top, low + 1e-9),
        # (a print figure's ten columns of cells are ~45 px wide: its numbers need smaller text to stay apart)
        "textfont": {"size": min(style.font_size - 2, 13) if style.printed else style.font_size - 2},
        "colorscale": [[0, "#FFFFFF"], [1, color]], "xgap": 1, "ygap": 1, "hoverongaps": False,
        "colorbar": {"title": {"text": colorbar_title, "side": "right"}, "thickness": 14, "x": 1.0, "xanchor": "left",
                     "xpad": 8},
        "hovertemplate": (f"pool %{{x}} GiB (%{{customdata}} blocks)<br>max_num_seqs %{{y}}<br>{colorbar_title}: "
                          "%{text}<extra></extra>"),
    }
    shapes = []
    if current is not None:
        i, j = current
        shapes.append({"type": "rect", "x0": j - 0.5, "x1": j + 0.5, "y0": i - 0.5, "y1": i + 0.5, "xref": "x",
                       "yref": "y", "line": {"color": theme.BLACK, "width": style.outline_width + 0.5},
                       "fillcolor": NO_FILL,
                       "layer": "above"})
    f = style.font_size
    axis = {"showgrid": False, "type": "category", "showline": False, "automargin": False}
    return trusted_figure([cells], styled_layout(
        style, title=title, x_title="KV pool size (GiB)", y_title="max_num_seqs (batch slots)", height=460,
        # (the pool sizes turned on their side: ten of them side by side ran together in a half-width chart)
        legend=False, xaxis={**axis, "tickangle": -45}, yaxis=axis,
        layout={"shapes": shapes, **fixed_margins(left=int(3.6 * f) + 24, right=int(4.5 * f) + 40,
                                                  top=style.title_size + 34 + style.subtitle_px,
                                                  bottom=int(4.4 * f) + 16)}))
