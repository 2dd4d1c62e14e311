"""Per-request latency (the Workbench): each request's TTFT or time between tokens, by its row in the table, one
line of markers per run; and the frame of every request's latencies for the table under it."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim import metrics
from sim.trace import Trace

from ..theme import ChartStyle
from ..wording import sentence_case
from .layout import integer_ticks, label_colors, label_dash, styled_layout, trusted_figure

# metric key -> (what it is, for axes and hover; the per_request column it reads without the unit)
METRICS: dict[str, tuple[str, str]] = {
    "ttft": ("TTFT", "ttft"),
    "tbt_mean": ("time between tokens, mean", "tbt_mean"),
    "tbt_max": ("time between tokens, max", "tbt_max"),
}


def per_request(trace: Trace) -> dict[str, np.ndarray]:
    """[requests] float64 per key, in the scenario's request order, NaN where it never happened (a rejected
    request's TTFT; the time between tokens of an answer of one token): ``ttft_steps``, ``ttft_ms``,
    ``tbt_mean_steps``, ``tbt_max_steps``, ``tbt_mean_ms``, ``tbt_max_ms``, ``finish_steps``, ``finish_ms``."""
    lat = metrics.request_latencies(trace)
    tbt = metrics.request_tbt(trace)
    out = {f"{key}_{unit}": lat[f"{key}_{unit}"] for key in ("ttft", "finish") for unit in ("steps", "ms")}
    for stat in ("mean", "max"):
        for unit in ("steps", "ms"):
            out[f"tbt_{stat}_{unit}"] = tbt[f"{stat}_{unit}"]
    return out


def latency_frame(traces: Mapping[str, Trace],
                  values_by_label: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> pd.DataFrame:
    """One row per request and run: id, client, run, then TTFT, time between tokens (mean, max) and finish time in
    steps and ms (blank where it never happened). ``values_by_label``: each run's ``per_request`` if computed."""
    frames = []
    for label, trace in traces.items():
        values = per_request(trace) if values_by_label is None else values_by_label[label]
        frame = pd.DataFrame({
            "request": trace.request_ids, "client": [trace.client_ids[c] for c in trace.requests["client"]],
            "run": label,
            "TTFT (steps)": values["ttft_steps"], "TTFT (ms)": values["ttft_ms"],
            "TBT mean (steps)": values["tbt_mean_steps"], "TBT max (steps)": values["tbt_max_steps"],
            "TBT mean (ms)": values["tbt_mean_ms"], "TBT max (ms)": values["tbt_max_ms"],
            "finish (steps)": values["finish_steps"], "finish (ms)": values["finish_ms"],
        })
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    return out.round({c: 2 for c in out.columns if c.endswith("(ms)") or c.startswith("TBT mean")})


def by_request(traces: Mapping[str, Trace], style: ChartStyle, *, metric: str = "ttft", unit: str = "steps",
               title: str | None = None, values: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> go.Figure:
    """Each request's ``metric`` (a key of METRICS) in ``unit`` against its row in the table (1 = the first), one
    line of markers per run, so a request that pays for a policy stands out; the request's id in the hover.
    ``values``: each run's ``per_request`` if computed."""
    if metric not in METRICS:
        raise ValueError(f"metric: must be one of {', '.join(METRICS)}, got {metric!r}")
    if unit not in ("steps", "ms"):
        raise ValueError(f"unit: must be 'steps' or 'ms', got {unit!r}")
    what, key = METRICS[metric]
    colors = label_colors(traces)
    data = []
    num_rows = 0
    for i, (label, trace) in enumerate(traces.items()):
        y = (per_request(trace) if values is None else values[label])[f"{key}_{unit}"]
        num_rows = max(num_rows, len(y))
        data.append({
            "type": "scatter", "x": np.arange(1, len(y) + 1), "y": y, "mode": "lines+markers", "name": label,
            "line": {"color": colors[label], "width": style.line_width * 0.6, "dash": label_dash(i)},
            "marker": {"color": colors[label], "size": style.marker_size}, "connectgaps": False,
            "customdata": np.asarray(trace.request_ids, dtype=object),
            "hovertemplate": f"{label}, %{{customdata}} (row %{{x}}): {what} %{{y:,.{0 if unit == 'steps' else 1}f}} "
                             f"{unit}<extra></extra>",
        })
    layout = styled_layout(style, title=title or f"{sentence_case(what)}, request by request",
                           x_title="request (row of the table)", y_title=f"{what} ({unit})", height=380,
                           xaxis={"range": [0.5, num_rows + 0.5], **integer_ticks(num_rows)},
                           yaxis={"rangemode": "tozero"}, hovermode="closest")
    return trusted_figure(data, layout)
