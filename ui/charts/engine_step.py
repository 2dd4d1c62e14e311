"""The home page's picture of one engine step: waiting queue -> running batch -> KV blocks, drawn from a real
trace (block ownership snapshots and the queues after the step)."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim.config import cdiv
from sim.events import EventKind
from sim.trace import SCHED_DECODE, SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_WASTED, Trace

from ..theme import LIGHT_GREY, ChartStyle, request_color
from ..wording import chart_ids, count, join_and
from .layout import styled_layout, trusted_figure

# x positions (data units): the waiting queue, the running batch (its labels run to the right), the block grid.
_WAITING_X, _RUNNING_X, _BLOCKS_X = 0.0, 2.0, 5.6

_DOING = {SCHED_PREFILL: "prefill chunk", SCHED_PREFILL_DONE: "prefill → token", SCHED_DECODE: "+1 token",
          SCHED_WASTED: "+1 token (wasted)"}


def engine_step(trace: Trace, step: int, queues: dict[str, list[str]], style: ChartStyle,
                block_columns: int = 8) -> go.Figure:
    """Three columns: the waiting queue after ``step`` (head at the top), the requests that ran in ``step`` with
    what they computed, and the KV pool's blocks coloured by the request holding them (needs a trace recorded
    with ``snapshot_every_steps=1``)."""
    ids = chart_ids(trace.request_ids)  # (shown in labels and hovers: a file's ids as typed, never as markup)
    color = {rid: request_color(i) for i, rid in enumerate(ids)}  # as the Preemption page colours the same requests
    data: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []  # the slider redraws this on every move: one figure, built once
    size = 34 if style.presentation else 28
    if style.presentation:  # bigger squares and text: a narrower block grid leaves the columns their room
        block_columns = min(block_columns, 4)
    _column(data, notes, _WAITING_X, queues["waiting"], [color[r] for r in queues["waiting"]],
            [f"{r}" for r in queues["waiting"]], size, "waiting")
    lo, hi = trace.sched_offsets[step], trace.sched_offsets[step + 1]
    ran = [ids[r] for r in trace.sched_rows[lo:hi]]
    doing = [f"{ids[r]}: {_DOING[int(k)]}" + (f" ({n} tok)" if int(k) in (SCHED_PREFILL, SCHED_PREFILL_DONE) else "")
             for r, n, k in zip(trace.sched_rows[lo:hi], trace.sched_tokens[lo:hi], trace.sched_kind[lo:hi],
                                strict=True)]
    _column(data, notes, _RUNNING_X, ran, [color[r] for r in ran], doing, size, "running")
    _blocks(data, notes, trace, step, color, block_columns, size)
    rows = max(len(queues["waiting"]), len(ran), cdiv(trace.config.num_blocks, block_columns), 1)
    top = 1.2
    # Short header lines: the chart is often half a projector wide. The queue's header starts at its squares' left
    # edge (centred on them it ran off a narrow chart's left side).
    header_px = min(style.font_size, 16)
    used, free = int(trace.steps["used_blocks"][step]), int(trace.steps["free_blocks_after"][step])
    kv_header = (f"KV cache: {used} of {trace.config.num_blocks}<br>blocks in use, {free} free<br>after the step "
                 f"({trace.config.block_size} tokens each)")
    for x, text, anchor in ((_WAITING_X - 0.35, "Waiting<br>queue,<br>head first", "left"),
                            (_RUNNING_X - 0.35, "Running<br>batch,<br>this step", "left"),
                            (_BLOCKS_X - 0.5 + block_columns / 2, kv_header, "center")):
        notes.append({"x": x, "y": top, "text": f"<b>{text}</b>", "showarrow": False, "yanchor": "bottom",
                      "xanchor": anchor, "align": anchor, "font": {"size": header_px}})
    for x in (_WAITING_X + 1.0, _BLOCKS_X - 0.9):
        notes.append({"x": x + 0.25, "y": -rows / 2 + 0.5, "ax": x - 0.25, "ay": -rows / 2 + 0.5, "xref": "x",
                      "yref": "y", "axref": "x", "ayref": "y", "showarrow": True, "arrowhead": 3, "arrowwidth": 2,
                      "text": ""})
    # (short: the chart is often narrow; the block counts are in the KV header) plus what the step is known for
    happened = {what: [ids[e.row] for e in trace.events_at(step) if e.kind in kinds]
                for what, kinds in (("preempted", (EventKind.PREEMPT, EventKind.SWAP_OUT)),
                                    ("re-admitted", (EventKind.RESUME, EventKind.SWAP_IN)))}
    title = f"Step {step}: {count(hi - lo, 'request')} ran" + "".join(
        f", {join_and(names)} {kind}" for kind, names in happened.items() if names)
    layout = styled_layout(style, title=title, x_title="", y_title="", height=150 + 46 * rows, legend=False,
                           xaxis={"visible": False, "range": [-0.8, _BLOCKS_X + block_columns]},
                           yaxis={"visible": False, "range": [-rows - 0.2, top + 1.5]},
                           layout={"annotations": notes})
    return trusted_figure(data, layout)


def _column(data: list[dict[str, Any]], notes: list[dict[str, Any]], x: float, names: list[str], colors: list[str],
            texts: list[str], size: int, name: str) -> None:
    if not names:
        notes.append({"x": x, "y": 0, "text": "(empty)", "showarrow": False})
        return
    y = -np.arange(len(names), dtype=float)
    data.append({"type": "scatter", "x": [x] * len(names), "y": y, "mode": "markers+text", "name": name,
                 "marker": {"symbol": "square", "size": size, "color": colors,
                            "line": {"color": "#333333", "width": 1}},
                 "text": texts, "textposition": "middle right", "hoverinfo": "text", "showlegend": False})


def _blocks(data: list[dict[str, Any]], notes: list[dict[str, Any]], trace: Trace, step: int, color: dict[str, str],
            columns: int, size: int) -> None:
    if step not in trace.snapshots:
        notes.append({"x": _BLOCKS_X + columns / 2, "y": 0, "text": "(block map not recorded)", "showarrow": False})
        return
    owner, cached = trace.snapshots[step]
    n = len(owner)
    idx = np.arange(n)
    xs = _BLOCKS_X + idx % columns
    ys = -(idx // columns).astype(float)
    ids = list(color)  # (the escaped ids, in row order)
    names = [ids[o] if o >= 0 else ("cached" if cached[i] else "free") for i, o in enumerate(owner)]
    fills = [color[nm] if o >= 0 else LIGHT_GREY if cached[i] else "#FFFFFF"
             for i, (nm, o) in enumerate(zip(names, owner, strict=True))]
    data.append({
        "type": "scatter", "x": xs, "y": ys, "mode": "markers+text",
        "marker": {"symbol": "square", "size": size, "color": fills, "line": {"color": "#555555", "width": 1}},
        "text": [nm if o >= 0 else "" for nm, o in zip(names, owner, strict=True)],
        "textfont": {"size": 13 if size > 30 else 10},  # (presentation mode's bigger squares: bigger names)
        "hovertext": [f"block {i}: {nm}" for i, nm in enumerate(names)], "hoverinfo": "text", "showlegend": False})
