"""Latency distributions: finish-time ECDFs per policy and per-client box plots (finish time or queueing delay).

Latencies follow sim.metrics: finish time from the start of the arrival step to the end of the finish step,
queueing delay from the start of the arrival step to the start of the first step that schedules the request, over
*served* requests (finished normally, client still there). NaN values (never finished) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from sim.metrics import request_latencies, served_mask
from sim.trace import Trace
from ui import theme
from ui.charts.layout import fmt_num, label_colors, label_dash, styled_layout, trusted_figure
from ui.theme import ChartStyle
from ui.wording import chart_ids

UNITS = {"steps": ("steps", 0), "ms": ("ms", 1)}  # unit -> (label, decimals shown)


def finish_time_ecdf(
    values_by_label: Mapping[str, np.ndarray | Trace],
    style: ChartStyle,
    *,
    unit: str = "steps",
    colors: Mapping[str, str] | None = None,
    title: str = "Finish time distribution",
    what: str = "finish time",
) -> go.Figure:
    """One ECDF step line per label (share of requests finished within x); the mean in the legend entry and as a
    dotted vertical line in the same colour. A value may be a Trace (its served requests' finish times, coloured
    by policy like every other comparison chart) or an array of finish times in ``unit``; with arrays of another
    latency (TTFT, say), ``what`` names it on the axis and in the hover text."""
    name, decimals = _unit(unit)
    colors = dict(colors) if colors else _default_colors(values_by_label)
    data = []
    x_max = 0.0
    for i, (label, values) in enumerate(values_by_label.items()):
        v = _finish_values(values, unit)
        if not len(v):
            continue
        mean, x_max = float(v.mean()), max(x_max, float(v[-1]))
        share = np.arange(1, len(v) + 1) / len(v) * 100.0
        line = {"color": colors[label], "width": style.line_width}
        data.append({
            "type": "scatter", "x": np.concatenate([[0.0], v]), "y": np.concatenate([[0.0], share]), "mode": "lines",
            "line": {**line, "shape": "hv", "dash": label_dash(i)}, "name": f"{label} (mean {fmt_num(mean)} {name})",
            "legendgroup": label,
            "hovertemplate": (f"{label}: %{{y:.1f}}% of requests finished within %{{x:,.{decimals}f}} {name}"
                              if what == "finish time" else
                              f"{label}: {what} of %{{y:.1f}}% of requests within %{{x:,.{decimals}f}} {name}")
                             + "<extra></extra>",
        })
        data.append({
            "type": "scatter", "x": [mean, mean], "y": [0, 100], "mode": "lines", "legendgroup": label,
            "line": {**line, "dash": "dot", "width": style.line_width * 0.7},
            "showlegend": False, "hovertemplate": f"{label}: mean {fmt_num(mean)} {name}<extra></extra>",
        })
    layout = styled_layout(style, title=title, x_title=f"{what} ({name})",
                           y_title="requests finished (%)" if what == "finish time" else "requests (%)",
                           height=400, yaxis={"range": [0, 102]},
                           xaxis={"range": [0, (x_max or 1.0) * 1.04]})  # room for the last step up to 100%
    return trusted_figure(data, layout)


def _finish_values(values: np.ndarray | Trace, unit: str) -> np.ndarray:
    """Sorted finite finish times: the given array, or a trace's served requests."""
    if isinstance(values, Trace):
        values = request_latencies(values)[f"finish_{unit}"][served_mask(values)]
    v = np.asarray(values, dtype=np.float64)
    return np.sort(v[np.isfinite(v)])


def _default_colors(values_by_label: Mapping[str, np.ndarray | Trace]) -> dict[str, str]:
    traces = {k: v for k, v in values_by_label.items() if isinstance(v, Trace)}
    if len(traces) == len(values_by_label):
        return label_colors(traces)
    return {k: theme.series_color(i) for i, k in enumerate(values_by_label)}


MEASURES = {"finish": ("finish time", "Finish time per client"),
            "queue": ("queueing delay", "Queueing delay per client")}  # measure -> (axis words, default title)


def latency_by_client(
    trace_by_label: Mapping[str, Trace],
    style: ChartStyle,
    *,
    unit: str = "ms",
    colors: Mapping[str, str] | None = None,
    title: str | None = None,
    measure: str = "finish",
) -> go.Figure:
    """Box plots of served requests' finish time (``measure="finish"``: arrival to the end of the last step) or
    queueing delay (``"queue"``: arrival to the first step that schedules it), in ``unit``: clients along x, one box
    per policy label beside each other. ``title`` defaults to the measure's ("Queueing delay per client")."""
    if measure not in MEASURES:
        raise ValueError(f"measure: must be one of {', '.join(map(repr, MEASURES))}, got {measure!r}")
    what, default_title = MEASURES[measure]
    name, decimals = _unit(unit)
    colors = dict(colors or label_colors(trace_by_label))
    data = []
    for label, trace in trace_by_label.items():
        values = request_latencies(trace)[f"{measure}_{unit}"]
        served = served_mask(trace) & np.isfinite(values)
        clients = np.asarray([f"client {c}" for c in chart_ids(trace.client_ids)], dtype=object)
        data.append({
            "type": "box", "x": clients[trace.requests["client"][served]], "y": values[served], "name": label,
            "boxmean": True, "marker": {"color": colors[label], "size": style.marker_size * 0.6},
            "line": {"width": style.line_width * 0.6}, "boxpoints": "outliers", "offsetgroup": label,
            "hovertemplate": f"{label}, %{{x}}: {what} %{{y:,.{decimals}f}} {name}<extra></extra>",
        })
    layout = styled_layout(style, title=default_title if title is None else title, x_title="client",
                           y_title=f"{what} ({name})", height=420, xaxis={"showgrid": False},
                           yaxis={"rangemode": "tozero"}, layout={"boxmode": "group"})
    return trusted_figure(data, layout)


def _unit(unit: str) -> tuple[str, int]:
    if unit not in UNITS:
        raise ValueError(f"unit: must be 'steps' or 'ms', got {unit!r}")
    return UNITS[unit]
