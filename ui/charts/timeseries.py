"""Per-step time series: queue and batch per policy, KV occupancy, per-client counters and throughput.

Every series goes through ``downsample`` (counts keep each bucket's peak; stacked areas and rates keep the mean,
so stacks still add up), so a long trace sends at most ~1,500 points per line. Traces and layout are built as plain
dicts and the figure made once (``layout.trusted_figure``): plotly's ``add_*``/``update_*`` calls each validate and
copy the whole figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim.trace import Trace
from ui import theme
from ui.charts.layout import (
    downsample,
    fmt_num,
    hline,
    integer_ticks,
    label_colors,
    label_dash,
    layout_key,
    step_axis,
    styled_layout,
    subplot_grid,
    time_title,
    trusted_figure,
)
from ui.theme import ChartStyle
from ui.wording import chart_ids

KV_UNITS = {  # unit -> (axis title, converter from blocks given the trace)
    "blocks": ("KV cache (blocks)", lambda tr: 1.0),
    "GiB": ("KV cache (GiB)", lambda tr: tr.config.block_bytes / 2**30),
    "MB": ("KV cache (MB)", lambda tr: tr.config.block_bytes / 1e6),
    "%": ("KV cache (% of pool)", lambda tr: 100.0 / tr.config.num_blocks),
}


def queue_and_batch(
    traces: Mapping[str, Trace],
    style: ChartStyle,
    *,
    x_unit: str = "steps",
    colors: Mapping[str, str] | None = None,
    title: str = "Waiting queue and running batch",
) -> go.Figure:
    """Two stacked panels sharing x: requests waiting (top) and running (bottom), one colour per policy label."""
    colors = dict(colors or label_colors(traces))
    x_title = time_title(x_unit)
    grid, axes = subplot_grid(2, shared_xaxes=True, vertical_spacing=0.08)
    peaks = [0.0, 0.0]
    data = []
    for i, (label, trace) in enumerate(traces.items()):
        x, _ = step_axis(trace, x_unit)
        x, waiting, running = downsample(x, trace.steps["num_waiting"], trace.steps["num_running"], how="max")
        for row, (y, what) in enumerate(((waiting, "waiting"), (running, "running")), start=1):
            peaks[row - 1] = max(peaks[row - 1], float(y.max(initial=0)))
            data.append({
                "type": "scatter", "x": x, "y": y, "mode": "lines", "name": label, "legendgroup": label,
                "showlegend": row == 1,
                "line": {"color": colors[label], "width": style.line_width, "shape": "hv", "dash": label_dash(i)},
                "hovertemplate": f"{label}: %{{y:,.0f}} requests {what}<extra></extra>", **axes[row, 1, False],
            })
    layout = styled_layout(style, title=title, x_title=x_title, y_title=("waiting (requests)", "running (requests)"),
                           height=520, hovermode="x unified", base=grid, xaxis={"rangemode": "tozero"},
                           yaxis={"rangemode": "tozero"})
    for row, peak in enumerate(peaks, start=1):
        layout[layout_key(axes[row, 1, False]["yaxis"])].update(integer_ticks(peak))
    return trusted_figure(data, layout)


def kv_occupancy(
    trace: Trace,
    style: ChartStyle,
    *,
    by: str = "state",
    x_unit: str = "steps",
    unit: str = "blocks",
    title: str = "KV cache occupancy",
) -> go.Figure:
    """Stacked area of the KV pool in use, by client or split into live vs orphaned (client gone), with the
    free blocks still holding cached prefixes on top and a dashed line at the pool size."""
    return trusted_figure(*kv_occupancy_parts(trace, style, by=by, x_unit=x_unit, unit=unit, title=title))


def kv_occupancy_parts(trace: Trace, style: ChartStyle, *, by: str, x_unit: str, unit: str,
                       title: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """kv_occupancy's trace dicts and layout, for a builder that adds to them before making the figure."""
    if unit not in KV_UNITS:
        raise ValueError(f"unit: must be one of {', '.join(KV_UNITS)}, got {unit!r}")
    parts = _kv_by_client(trace) if by == "client" else _kv_by_state(trace) if by == "state" else None
    if parts is None:
        raise ValueError(f"by: must be 'state' or 'client', got {by!r}")
    y_title, per_block = KV_UNITS[unit]
    scale = per_block(trace)
    x, x_title = step_axis(trace, x_unit)
    x, *ys = downsample(x, *(values for _, values, _, _ in parts), how="mean")
    data = [{
        "type": "scatter", "x": x, "y": y * scale, "name": name, "mode": "lines", "stackgroup": "kv",
        "line": {"color": color, "width": 0.5, "shape": "hv"},
        "fillcolor": color, "fillpattern": {"shape": pattern, "fgcolor": theme.LIGHT_GREY, "solidity": 0.3},
        "hovertemplate": f"{name}: %{{y:,.{0 if unit == 'blocks' else 2}f}} {unit}<extra></extra>",
    } for (name, _, color, pattern), y in zip(parts, ys, strict=True)]
    pool = trace.config.num_blocks * scale
    shape, note = pool_line(pool, unit, style)
    layout = styled_layout(style, title=title, x_title=x_title, y_title=y_title, height=420, hovermode="x unified",
                           xaxis={"rangemode": "tozero"}, yaxis={"range": [0, pool * 1.12]},
                           layout={"shapes": [shape], "annotations": [note]})
    return data, layout


def pool_line(pool: float, unit: str, style: ChartStyle) -> tuple[dict[str, Any], dict[str, Any]]:
    """(shape, annotation): the dashed line at the pool size ``pool`` (in ``unit``), labelled at its left."""
    return hline(pool, {"color": theme.BLACK, "dash": "dash", "width": style.line_width * 0.8}, opacity=1,
                 text=f"pool: {fmt_num(pool, 0 if unit in ('blocks', '%') else 2)} {unit}")


def _kv_by_state(trace: Trace) -> list[tuple[str, np.ndarray, str, str]]:
    """(name, blocks per step, colour, pattern): live, orphaned, cached-free (clipped so the stack fits the pool:
    used blocks are measured during the step, cached-free ones after it)."""
    s = trace.steps
    orphan = s["orphan_blocks"].astype(np.float64)
    used = s["used_blocks"].astype(np.float64)
    cached = np.minimum(s["cached_free_blocks"], trace.config.num_blocks - used)
    parts = [("held by live requests", used - orphan, theme.STATE_COLORS["decode"], "")]
    if orphan.any():
        parts.append(("held for clients that are gone", orphan, theme.STATE_COLORS["wasted"],
                      theme.STATE_PATTERNS.get("wasted", "")))
    if cached.any():
        parts.append((theme.CACHED_FREE_LABEL, cached, theme.LIGHT_GREY, ""))
    return parts


def _kv_by_client(trace: Trace) -> list[tuple[str, np.ndarray, str, str]]:
    """Per-client blocks. A shared prefix block counts once per holder in the trace; when that makes the sum
    exceed the blocks in use, each step's shares are scaled down so the stack equals the blocks in use."""
    held = trace.clients["client_blocks"].astype(np.float64)
    used = trace.steps["used_blocks"].astype(np.float64)
    total = held.sum(axis=1)
    factor = np.divide(used, total, out=np.ones_like(used), where=total > used)
    held = held * factor[:, None]
    parts = [(f"client {c}", held[:, i], theme.client_color(i), "") for i, c in
             enumerate(chart_ids(trace.client_ids))]
    cached = np.minimum(trace.steps["cached_free_blocks"], trace.config.num_blocks - used)
    if cached.any():
        parts.append((theme.CACHED_FREE_LABEL, cached, theme.LIGHT_GREY, ""))
    return parts


def client_counters(
    trace: Trace, style: ChartStyle, *, x_unit: str = "steps", title: str = "Virtual token counter per client"
) -> go.Figure:
    """Each client's virtual counter (VTC: weighted tokens served, plus any lift) over time."""
    x, x_title = step_axis(trace, x_unit)
    x, counters = downsample(x, trace.clients["client_counters"], how="max")
    data = [{
        "type": "scatter", "x": x, "y": counters[:, i], "mode": "lines", "name": f"client {client_id}",
        "line": {"color": theme.client_color(i), "width": style.line_width},
        "hovertemplate": f"client {client_id}: %{{y:,.0f}} weighted tokens<extra></extra>",
    } for i, client_id in enumerate(chart_ids(trace.client_ids))]
    layout = styled_layout(style, title=title, x_title=x_title, y_title="virtual counter (weighted tokens)",
                           hovermode="x unified", xaxis={"rangemode": "tozero"})
    return trusted_figure(data, layout)


def _window_rate(tokens: np.ndarray, step_ms: np.ndarray, window: int) -> np.ndarray:
    """[steps, k] tokens/s over the last ``window`` steps (fewer at the start), from cumulative sums."""
    cum_tokens = np.vstack([np.zeros((1, tokens.shape[1])), np.cumsum(tokens, axis=0)])
    cum_ms = np.concatenate([[0.0], np.cumsum(step_ms)])
    hi = np.arange(1, len(step_ms) + 1)
    lo = np.maximum(hi - window, 0)
    ms = cum_ms[hi] - cum_ms[lo]
    return (cum_tokens[hi] - cum_tokens[lo]) / np.where(ms > 0, ms, np.nan)[:, None] * 1000.0
