"""Sweeps: one line per series over a swept setting, with flat reference lines (policies that do not depend on
the swept knob)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..theme import GREY, ChartStyle, series_color
from .layout import styled_layout, trusted_figure


def sweep_lines(x: Sequence[float], series: dict[str, Sequence[float]], style: ChartStyle, *, title: str,
                x_title: str, y_title: str, references: dict[str, float] | None = None,
                colors: dict[str, str] | None = None, height: int = 420,
                x_all: Sequence[float] | None = None, unit: str = "") -> go.Figure:
    """``x_all``: every swept value when ``x`` has only the points run so far (ui.sweeps): the x axis and the
    reference lines span it from the start, so the curve fills in without the chart rescaling. ``colors``: by
    series or reference label (a policy keeps the colour it has on the page's other charts). ``unit``: of the y
    values, for the legend and hover ("steps")."""
    colors = colors or {}
    span = list(x_all if x_all is not None else x)
    unit = f" {unit}" if unit else ""
    data = [{"type": "scatter", "x": list(x), "y": list(ys), "mode": "lines+markers", "name": label,
             "line": {"color": colors.get(label, series_color(i)), "width": style.line_width},
             "marker": {"size": style.marker_size},
             "hovertemplate": f"{label}<br>{x_title}: %{{x}}<br>{y_title}: %{{y:,.1f}}<extra></extra>"}
            for i, (label, ys) in enumerate(series.items())]
    dashes = ("dash", "dot", "dashdot", "longdash")
    for j, (label, value) in enumerate((references or {}).items()):
        color = colors.get(label, GREY if j == 0 else series_color(len(series) + j))
        data.append({"type": "scatter", "x": [min(span), max(span)], "y": [value, value], "mode": "lines",
                     "name": f"{label} ({value:,.0f}{unit})",
                     "line": {"color": color, "width": style.line_width, "dash": dashes[j % len(dashes)]},
                     "hovertemplate": f"{label}: {value:,.1f}{unit}<extra></extra>"})
    pad = 0.04 * (max(span) - min(span) or 1.0)
    layout = styled_layout(style, title=title, x_title=x_title, y_title=y_title, height=height,
                           xaxis={"range": [min(span) - pad, max(span) + pad]} if x_all is not None else None)
    return trusted_figure(data, layout)
