"""Overload: the load sweep (throughput and goodput against offered load, one colour per admission setting) and
each request's time to first token by when it arrived, against the TTFT target.

Times are seconds of the run's clock (the cost model's ms / 1000); rates are requests per second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim import metrics
from sim.request import RequestStatus
from sim.trace import Trace
from ui import theme
from ui.charts.layout import hline, styled_layout, trusted_figure
from ui.theme import ChartStyle
from ui.wording import chart_ids

Points = Sequence[tuple[float, float, float, float]]  # (load asked, offered, throughput, goodput) requests/s


def load_sweep(sweep: Mapping[str, Points], colors: Mapping[str, str], style: ChartStyle, *,
               current_load: float | None = None, title: str = "Throughput and goodput against offered load"
               ) -> go.Figure:
    """Per setting: its goodput (solid, filled markers) and its throughput (dashed, open markers) at each offered
    load (x: the arrivals per second the run measured); the slider's load as a dotted vertical line."""
    data: list[dict[str, Any]] = []
    for label, points in sweep.items():
        good = [p for p in points if np.isfinite(p[1])]
        if not good:
            continue
        offered = [p[1] for p in good]
        for what, i, dash, symbol in (("goodput", 3, "solid", "circle"), ("throughput", 2, "dash", "circle-open")):
            data.append({
                "type": "scatter", "x": offered, "y": [p[i] for p in good], "mode": "lines+markers",
                "name": f"{label}: {what}", "legendgroup": label,
                "line": {"color": colors.get(label, theme.GREY), "width": style.line_width, "dash": dash},
                "marker": {"size": style.marker_size, "color": colors.get(label, theme.GREY), "symbol": symbol},
                "hovertemplate": f"{label}<br>offered %{{x:,.1f}} requests/s<br>{what} %{{y:,.1f}} requests/s"
                                 "<extra></extra>",
            })
    top = max([y for d in data for y in d["y"]] + [x for d in data for x in d["x"]] + [1.0])
    layout = styled_layout(style, title=title, x_title="offered load (requests/s)",
                           y_title="served (requests/s)", height=460,
                           xaxis={"rangemode": "tozero"}, yaxis={"rangemode": "tozero"})
    shapes = [{"type": "line", "x0": 0, "y0": 0, "x1": top, "y1": top, "layer": "below",
               "line": {"color": theme.GREY, "width": 1, "dash": "dot"}}]  # served = offered: every request
    annotations = [{"x": top * 0.92, "y": top * 0.92, "text": "served = offered", "showarrow": False,
                    "xanchor": "right", "yanchor": "bottom", "font": {"size": style.font_size * 0.8,
                                                                      "color": theme.GREY}}]
    if current_load is not None:
        shapes.append({"type": "line", "x0": current_load, "x1": current_load, "y0": 0, "y1": 1, "yref": "paper",
                       "line": {"color": theme.BLACK, "width": 1, "dash": "dot"}})
        annotations.append({"x": current_load, "y": 1, "yref": "paper", "text": "the runs above",
                            "showarrow": False, "xanchor": "left", "yanchor": "top",
                            "font": {"size": style.font_size * 0.8}})
    layout["shapes"], layout["annotations"] = shapes, [*layout.get("annotations", []), *annotations]
    return trusted_figure(data, layout)


def ttft_by_arrival(trace: Trace, style: ChartStyle, *, title: str, color: str, x_max_s: float | None = None
                    ) -> go.Figure:
    """One marker per request: when it arrived (x, s) and its time to first token (y, s); a request refused at the
    door or shed is a cross on the x axis; the TTFT target as a dashed line. A request without targets (batch) is
    an open marker."""
    r = trace.requests
    start_ms = trace.steps["time_ms"] - trace.steps["step_ms"]
    arrived_s = start_ms[r["arrival_step"]] / 1000.0
    ttft_s = metrics.request_latencies(trace)["ttft_ms"] / 1000.0
    served = metrics.served_mask(trace)
    has_slo = np.ones(trace.num_requests, dtype=bool) if trace.slo is None else trace.slo
    turned = ~served & ((r["status"] == RequestStatus.REJECTED) | (r["status"] == RequestStatus.FINISHED_ABORTED))
    ids = np.asarray(chart_ids(trace.request_ids), dtype=object)  # (ids from a file: text, never plotly's HTML)
    data: list[dict[str, Any]] = []
    for name, mask, symbol in (("with targets", served & has_slo, "circle"),
                               ("without targets (batch)", served & ~has_slo, "circle-open")):
        if mask.any():
            data.append({
                "type": "scattergl", "x": arrived_s[mask], "y": ttft_s[mask], "mode": "markers", "name": name,
                "marker": {"size": style.marker_size * 0.8, "color": color, "symbol": symbol, "opacity": 0.7},
                "customdata": ids[mask],
                "hovertemplate": "%{customdata}: arrived at %{x:,.2f} s, first token %{y:,.2f} s later"
                                 "<extra></extra>",
            })
    if turned.any():
        data.append({
            "type": "scattergl", "x": arrived_s[turned], "y": np.zeros(int(turned.sum())), "mode": "markers",
            "name": "refused or shed", "marker": {"size": style.marker_size, "color": theme.GREY, "symbol": "x"},
            "customdata": ids[turned], "hovertemplate": "%{customdata}: arrived at %{x:,.2f} s, turned away"
                                                         "<extra></extra>",
        })
    layout = styled_layout(style, title=title, x_title="arrived at (s)", y_title="time to first token (s)",
                           height=380, xaxis={"rangemode": "tozero", **({"range": [0, x_max_s]} if x_max_s else {})},
                           yaxis={"rangemode": "tozero"})
    target_ms = trace.config.ttft_slo_ms
    if target_ms:
        shape, note = hline(target_ms / 1000.0, {"color": theme.BLACK, "width": 1, "dash": "dash"},
                            text=f"TTFT target {target_ms / 1000:,.1f} s")
        layout["shapes"] = [*layout.get("shapes", []), shape]
        layout["annotations"] = [*layout.get("annotations", []), note]
    return trusted_figure(data, layout)
