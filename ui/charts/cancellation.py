"""The Cancellation lesson's charts: KV memory wanted vs held for nobody, the work done for nobody per server, and
the waiting time the users who stay lose. Pure builders: traces or summaries in, a ``go.Figure`` out.

A server's colour says what it does with work nobody reads, the same in every chart of the lesson: it stops at
once (blue), notices late (orange) or never stops (vermillion, with a hatch so it stays apart in grayscale).
KV memory is in decimal MB of the model's KV bytes per token (1,000 Llama 3.1 8B tokens = 131 MB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim import metrics
from sim.config import EngineConfig, StopCheck
from sim.request import RequestStatus
from sim.trace import Trace
from ui import theme
from ui.charts.layout import (
    downsample,
    fmt_num,
    layout_key,
    step_axis,
    styled_layout,
    subplot_grid,
    time_title,
    trusted_figure,
)
from ui.theme import ChartStyle
from ui.wording import count

MB = 1e6
KV_PARTS = {  # name -> (colour, fill pattern); "wanted" matches the Gantt's decode, "abandoned" its wasted segments
    "wanted": (theme.STATE_COLORS["decode"], ""),
    "held by abandoned requests": (theme.STATE_COLORS["wasted"], theme.STATE_PATTERNS["wasted"]),
    "held past the answer's end": (theme.GREY, "/"),
}
SERVER_STYLES = {  # kind -> (colour, bar pattern)
    "prompt": (theme.BLUE, ""),
    "late": (theme.ORANGE, "."),
    "never": (theme.VERMILLION, "/"),
}


def server_kind(config: EngineConfig) -> str:
    """"never": generates for nobody until the answer ends (no abort, or stops only at max_tokens); "late": aborts
    after a detection delay; "prompt": stops the moment it knows."""
    if not config.abort_on_disconnect or config.stop_check is StopCheck.AT_MAX_TOKENS:
        return "never"
    return "late" if config.disconnect_detect_delay_steps else "prompt"


def server_styles(configs: Mapping[str, EngineConfig]) -> dict[str, tuple[str, str]]:
    """label -> (colour, pattern) by what each server does; series colours when two servers share a kind."""
    kinds = {label: server_kind(c) for label, c in configs.items()}
    if len(set(kinds.values())) == len(kinds):
        return {label: SERVER_STYLES[k] for label, k in kinds.items()}
    return {label: (theme.series_color(i), "") for i, label in enumerate(configs)}


def kv_parts(trace: Trace) -> dict[str, np.ndarray]:
    """[steps] KV tokens per part: wanted, held by requests whose user left, held by requests past their end.
    Parts that are zero throughout are left out (wanted is always there)."""
    abandoned = trace.steps["orphan_kv_tokens"].astype(np.float64)
    past_end = metrics.past_end_kv_tokens(trace).astype(np.float64)
    wanted = trace.steps["kv_tokens"] - abandoned - past_end
    parts = {"wanted": wanted, "held by abandoned requests": abandoned, "held past the answer's end": past_end}
    return {name: values for name, values in parts.items() if name == "wanted" or values.any()}


def kv_for_nobody(
    traces: Mapping[str, Trace],
    style: ChartStyle,
    *,
    x_unit: str = "steps",
    title: str = "KV memory: wanted vs held for nobody",
) -> go.Figure:
    """One panel per server (shared axes): stacked KV in MB (left axis) and % of the pool (right axis). Each
    panel's title carries its number, marked on the plot with a triangle: the most KV held for nobody, or (for a
    server that holds none) the most one abort freed. The pool line is drawn when the data come near it."""
    labels = list(traces)
    first = traces[labels[0]]
    pool_mb = first.config.num_blocks * first.config.block_bytes / MB
    panels = [_kv_panel(trace, x_unit, pool_mb) for trace in traces.values()]
    # Larger text (a projector's, a print's): each panel's note on a line of its own (and the space for it), the
    # pool's size out of the figure's title (the KV pool line and the sidebar give it), or both ran off the chart.
    joint = "<br>" if style.large_text else ": "
    titles = [f"<b>{label}</b>" + (f"{joint}{panel['note']}" if panel["note"] else "")
              for label, panel in zip(labels, panels, strict=True)]
    grid, axes = subplot_grid(len(labels), secondary_y=True, shared_xaxes=True,
                              vertical_spacing=0.12 / len(labels) + (0.1 if style.large_text else 0.04))
    data: list[dict[str, Any]] = []
    shown: set[str] = set()
    for row, (label, panel) in enumerate(zip(labels, panels, strict=True), start=1):
        x = panel["x"]
        left = axes[row, 1, False]
        for name, y_mb in panel["series"].items():
            color, pattern = KV_PARTS[name]
            data.append({
                "type": "scatter", "x": x, "y": y_mb, "name": name, "legendgroup": name,
                "showlegend": name not in shown, "mode": "lines", "stackgroup": f"kv{row}",
                "line": {"color": color, "width": 0.5, "shape": "hv"}, "fillcolor": color,
                "fillpattern": {"shape": pattern, "fillmode": "overlay", "fgcolor": theme.LIGHT_GREY, "solidity": 0.3},
                "customdata": y_mb / pool_mb * 100,
                "hovertemplate": f"{label}, {name}: %{{y:,.1f}} MB (%{{customdata:.1f}}% of the pool)<extra></extra>",
                **left,
            })
            shown.add(name)
        # The right axis (% of the pool) is drawn only for an axis with data: an invisible trace of the total.
        data.append({"type": "scatter", "x": x, "y": panel["total"] / pool_mb * 100, "mode": "lines",
                     "showlegend": False, "line": {"width": 0, "color": theme.BLACK}, "hoverinfo": "skip",
                     **axes[row, 1, True]})
        if panel["mark"] is not None:
            mark_x, mark_y = panel["mark"]
            data.append({"type": "scatter", "x": [mark_x], "y": [mark_y], "mode": "markers", "showlegend": False,
                         "cliponaxis": False,
                         "marker": {"symbol": "triangle-down", "size": style.marker_size + 4, "color": theme.BLACK},
                         "hovertemplate": f"{label}: {panel['note']}<extra></extra>", **left})
    peak_mb = max(float(panel["total"].max(initial=0.0)) for panel in panels)
    top_mb = max(peak_mb, 1e-9) * 1.15
    if peak_mb > 0.6 * pool_mb:  # the pool line only where it is near the data; else it squashes the stack
        top_mb = pool_mb * 1.08
        x_end = max(float(panel["x"][-1]) for panel in panels)
        data += [{  # a trace, not a shape: a legend entry
            "type": "scatter", "x": [0, x_end], "y": [pool_mb, pool_mb], "mode": "lines", "name": "KV pool",
            "legendgroup": "pool", "showlegend": row == 1, "hoverinfo": "skip",
            "line": {"color": theme.BLACK, "dash": "dash", "width": style.line_width * 0.6},
            **axes[row, 1, False],
        } for row in range(1, len(labels) + 1)]
    # Subplot titles where make_subplots puts them (on top of each panel), but left-aligned like the figure title.
    title_px = style.font_size - 4 if style.large_text else style.font_size  # (two lines with larger text)
    grid["annotations"] = [{"font": {"size": title_px}, "showarrow": False, "text": text, "x": 0, "align": "left",
                            "xanchor": "left", "xref": "paper", "yanchor": "bottom", "yref": "paper",
                            "y": grid[layout_key(axes[row, 1, False]["yaxis"])]["domain"][1]}
                           for row, text in enumerate(titles, start=1)]
    pool_text = f"pool {fmt_num(pool_mb, 0)} MB = {first.config.num_blocks:,} blocks"
    height = 110 + 190 * len(labels)
    # The legend gets its own line above the first panel's title: lift it by about one line of text (the plot
    # area is the figure less roughly 140 px of title, legend and x axis).
    lift = (3.2 if style.large_text else 1.9) * style.font_size / max(style.height(height) - 140, 100)
    layout = styled_layout(style, title=title if style.large_text else f"{title} ({pool_text})",
                           x_title=time_title(x_unit),
                           y_title=["KV (MB)", "KV (% of pool)"] * len(labels), height=height,
                           hovermode="x unified", base=grid, xaxis={"rangemode": "tozero"},
                           layout={"legend": {"y": 1 + lift}})
    percent = {"range": [0, top_mb / pool_mb * 100], "showgrid": False, "ticksuffix": "%", "tickmode": "auto",
               "nticks": 5}
    for row in range(1, len(labels) + 1):
        layout[layout_key(axes[row, 1, False]["yaxis"])]["range"] = [0, top_mb]
        layout[layout_key(axes[row, 1, True]["yaxis"])].update(percent)
    return trusted_figure(data, layout)


def _kv_panel(trace: Trace, x_unit: str, pool_mb: float) -> dict[str, Any]:
    """One server's plotted series (MB, downsampled), their total, and its note with the point it marks."""
    bytes_per_token = trace.config.model.kv_bytes_per_token
    parts = kv_parts(trace)
    x, _ = step_axis(trace, x_unit)
    x, *ys = downsample(x, *parts.values(), how="mean")
    series = {name: y * bytes_per_token / MB for name, y in zip(parts, ys, strict=True)}
    total = np.sum(list(series.values()), axis=0)
    nobody = np.sum([v for name, v in parts.items() if name != "wanted"], axis=0)  # full resolution
    note, mark = "", None
    if np.any(nobody):
        step = int(np.argmax(nobody))
        peak = float(nobody[step]) * bytes_per_token / MB
        note = f"{fmt_num(peak, 0)} MB ({peak / pool_mb:.0%} of the pool) held for nobody at step {step:,}"
        mark = _point(trace, x, total, step, x_unit)
    else:
        freed = _biggest_abort(trace)
        if freed is not None:
            step, tokens = freed
            note = f"an abort freed {fmt_num(tokens * bytes_per_token / MB, 0)} MB at step {step:,}"
            mark = _point(trace, x, total, step - 1, x_unit)  # the KV it held, on the step before
    return {"x": x, "series": series, "total": total, "note": note, "mark": mark}


def _point(trace: Trace, x: np.ndarray, total_mb: np.ndarray, step: int, x_unit: str) -> tuple[float, float]:
    """(x, y) on top of the plotted stack at ``step`` (the bucket holding it, when downsampled)."""
    at = float(step if x_unit == "steps" else trace.start_ms(step))
    i = min(max(int(np.searchsorted(x, at, side="right")) - 1, 0), len(x) - 1)
    return at, float(total_mb[i])


def _biggest_abort(trace: Trace) -> tuple[int, int] | None:
    """(abort step, KV tokens freed) of the abort that freed the most KV; None when no abort freed any."""
    r = trace.requests
    aborted = np.flatnonzero((r["status"] == RequestStatus.FINISHED_ABORTED) & (r["num_computed_tokens"] > 0))
    if not len(aborted):
        return None
    row = aborted[np.argmax(r["num_computed_tokens"][aborted])]
    return int(r["finish_step"][row]), int(r["num_computed_tokens"][row])


WASTE_PANELS = (  # (summary key, axis title with the unit): one panel each, left to right
    ("wasted_tokens", "generated for<br>nobody (tokens)"),
    ("wasted_gpu_ms", "GPU time for<br>nobody (ms)"),
    ("read_tok_s", "useful throughput<br>(tokens read/s)"),
)


def waste_bars(
    summaries: Mapping[str, Mapping[str, Any]],
    style: ChartStyle,
    *,
    styles: Mapping[str, tuple[str, str]],
    title: str = "Work done for nobody, and the useful throughput left",
) -> go.Figure:
    """Three panels of horizontal bars, one bar per server: wasted tokens, wasted GPU ms, useful throughput; side
    by side, or under each other in the print theme, whose fixed width and larger text would run three across into
    each other."""
    labels = list(summaries)
    stacked = style.printed
    if stacked:
        grid, axes = subplot_grid(len(WASTE_PANELS), 1, vertical_spacing=0.5 / len(WASTE_PANELS))
    else:
        grid, axes = subplot_grid(1, len(WASTE_PANELS), shared_yaxes=True, horizontal_spacing=0.06)
    data = []
    for col, (key, axis_title) in enumerate(WASTE_PANELS, start=1):
        values = np.array([float(summaries[label][key]) for label in labels])
        cell = axes[(col, 1, False) if stacked else (1, col, False)]
        data.append({
            "type": "bar", "orientation": "h", "y": labels, "x": values, "name": axis_title, "showlegend": False,
            "cliponaxis": False,
            "marker": {"color": [styles[label][0] for label in labels], "line": {"color": theme.BLACK, "width": 1},
                       "pattern": {"shape": [styles[label][1] for label in labels], "fillmode": "overlay",
                                   "fgcolor": theme.BLACK, "solidity": 0.25}},
            "text": [fmt_num(v, 0) for v in values], "textposition": "outside", "constraintext": "none",
            "textfont": {"size": style.font_size},
            "hovertemplate": f"%{{y}}: %{{x:,.0f}} {axis_title.replace('<br>', ' ')}<extra></extra>",
            **cell,
        })
        top = float(np.nanmax(values)) if np.isfinite(values).any() else 0.0
        grid[layout_key(cell["xaxis"])].update(title={"text": axis_title.replace("<br>", " ") if stacked
                                                       else axis_title}, range=[0, max(top, 1.0) * 1.35])
    height = (len(WASTE_PANELS) * (100 + 40 * len(labels)) + 60) if stacked else 130 + 55 * len(labels)
    layout = styled_layout(style, title=title, x_title=None, y_title=None, height=height, legend=False,
                           base=grid, xaxis={"nticks": 3},  # three narrow panels: few ticks, big numbers never collide
                           yaxis={"autorange": "reversed", "showgrid": False})
    return trusted_figure(data, layout)


def waiting_others_lose(
    summaries: Mapping[str, Mapping[str, Any]],
    style: ChartStyle,
    *,
    styles: Mapping[str, tuple[str, str]],
    unit: str = "steps",
    title: str = "The waiting time others lose",
) -> go.Figure:
    """Queueing delay (arrival to first scheduled step) of the users who stayed to the end (the same users under
    every server: lesson.waiting_of_the_same_users): average and p99, one horizontal bar per server in each group,
    labelled with its difference from the first server."""
    x_title = f"queueing delay ({unit})"
    time_title(unit)  # validates the unit
    labels = list(summaries)
    ref = summaries[labels[0]][f"queue_{unit}"]
    stats = (("average", "mean"), ("p99", "p99"))
    data = []
    top = 0.0
    for i, label in enumerate(labels):
        q = summaries[label][f"queue_{unit}"]
        values = [float(q[key]) for _, key in stats]
        text = [fmt_num(v, 0) + (f" ({v - float(ref[key]):+,.0f})" if i and np.isfinite(v - float(ref[key])) else "")
                for v, (_, key) in zip(values, stats, strict=True)]
        top = max([top, *[v for v in values if np.isfinite(v)]])
        color, pattern = styles[label]
        data.append({
            "type": "bar", "orientation": "h", "y": [name for name, _ in stats], "x": values, "name": label,
            "text": text, "textposition": "outside", "cliponaxis": False, "constraintext": "none",
            "textfont": {"size": style.font_size},
            "marker": {"color": color, "line": {"color": theme.BLACK, "width": 1},
                       "pattern": {"shape": pattern, "fillmode": "overlay", "fgcolor": theme.BLACK, "solidity": 0.25}},
            "customdata": [summaries[label]["num_served"]] * len(stats),
            "hovertemplate": f"{label}: %{{y}} %{{x:,.0f}} {unit} (%{{customdata:,}} users stayed)<extra></extra>",
        })
    extra: dict[str, Any] = {"barmode": "group", "bargap": 0.25, "bargroupgap": 0.05,
                             "title": {"subtitle": {"text": f"{count(summaries[labels[0]]['num_served'], 'user')} "
                                                            "who stayed under every server; arrival to first step run",
                                                    "font": {"size": style.font_size}}}}
    if top == 0.0 and not any(np.isfinite(float(summaries[label][f"queue_{unit}"]["mean"])) for label in labels):
        extra["annotations"] = [{"x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper", "showarrow": False,
                                 "text": "No user stayed to the end under every server:<br>no waiting to compare.",
                                 "font": {"size": style.font_size}}]
    layout = styled_layout(style, title=title, x_title=x_title, y_title=None, height=200 + 60 * len(labels),
                           yaxis={"autorange": "reversed", "showgrid": False},  # average on top, servers in order
                           xaxis={"range": [0, max(top, 1.0) * 1.5]},  # room for "2,400 (+1,677)" beside a bar
                           layout=extra)
    return trusted_figure(data, layout)
