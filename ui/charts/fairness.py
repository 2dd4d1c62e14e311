"""The Fairness lesson's charts: per-client counters and tokens/s side by side per policy, total throughput, the
rate-limit and output-weight sweeps, and the service gap against VTC's bound.

Pure builders like the rest of ``ui.charts``: traces (or sweep dicts of plain numbers) in, a ``go.Figure`` out,
``layout.styled_layout`` for the look, client colours from ``theme.client_color`` and policy colours from
``policy_colors`` (the theme's, kept clear of the client colours) so a client or a policy looks the same on every
chart of the page. The page rebuilds all of them on every rerun, so each builds its traces and layout as plain dicts
and makes the figure once (``layout.trusted_figure``): no plotly ``add_*``/``update_*`` calls, each of which
validates and copies the whole figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from sim import fairness_metrics
from sim.config import cdiv
from sim.trace import Trace
from ui import theme
from ui.charts.layout import (
    downsample,
    envelope,
    fmt_num,
    hline,
    label_dash,
    step_axis,
    styled_layout,
    subplot_grid,
    time_title,
    trusted_figure,
)
from ui.charts.timeseries import _window_rate
from ui.theme import ChartStyle
from ui.wording import chart_ids

PANEL_HEIGHT = 400  # px (base style) of a row of side-by-side panels
# The policies' colours (theme.POLICY_COLORS: FCFS grey, rate limit vermillion, VTC green, LCF purple) stay clear of
# the first clients' (A blue, B orange); a second run of the same policy (VTC 1:2 and VTC 1:1) takes a spare colour.
_POLICY = {key: theme.POLICY_COLORS[key] for key in ("fcfs", "rate_limit", "vtc", "lcf")}
_SPARE = (theme.SKY_BLUE, theme.BLACK, theme.PURPLE, theme.GREEN, theme.GREY)


def policy_colors(traces: Mapping[str, Trace]) -> dict[str, str]:
    """One colour per run label: its policy's (FCFS grey, rate limit vermillion, VTC green, LCF purple), or a
    spare colour when an earlier label already took it."""
    out: dict[str, str] = {}
    for label, trace in traces.items():
        key = "rate_limit" if trace.config.rate_limit_max_requests else str(trace.config.policy)
        color = _POLICY.get(key, theme.GREY)
        if color in out.values():
            color = next((c for c in _SPARE if c not in out.values()), color)
        out[label] = color
    return out


def _side_by_side(labels: Sequence[str], style: ChartStyle, *, title: str, x_title: str, y_title: str,
                  height: int = PANEL_HEIGHT) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """One panel per label (up to three in a row) sharing both axes (from zero), each titled with its label.
    Returns the styled layout and each panel's ``(xaxis, yaxis)`` ids ("x2", "y2") for its traces.

    The axes are laid out directly rather than with ``make_subplots``, which costs ~15 ms a figure."""
    n = max(len(labels), 1)
    cols = min(n, 3)
    rows = cdiv(n, cols)
    gap_x, gap_y = 0.035, 0.16 if rows > 1 else 0.0
    width, tall = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    layout: dict[str, Any] = {"annotations": []}
    ids = []
    for i, label in enumerate(labels or [""]):
        row, col = divmod(i, cols)
        x0, y1 = col * (width + gap_x), 1 - row * (tall + gap_y)
        k = "" if i == 0 else str(i + 1)
        # One x title, under the middle panel of the bottom row (one under each ran together in a narrow chart),
        # and few ticks, so a projector's larger numbers are not turned on their side.
        titled = row == rows - 1 and col == (cols - 1) // 2
        layout[f"xaxis{k}"] = {"domain": [x0, x0 + width], "anchor": f"y{k}", "title": {"text": x_title if titled
                                                                                         else ""},
                               "showticklabels": True, **({"nticks": 4} if cols > 1 else {})}
        layout[f"yaxis{k}"] = {"domain": [y1 - tall, y1], "anchor": f"x{k}",
                               "title": {"text": y_title if col == 0 else ""}, "showticklabels": col == 0}
        if i:
            layout[f"xaxis{k}"]["matches"], layout[f"yaxis{k}"]["matches"] = "x", "y"
        layout["annotations"].append({"text": label, "x": x0 + width / 2, "y": y1, "xref": "paper", "yref": "paper",
                                      "xanchor": "center", "yanchor": "bottom", "showarrow": False,
                                      "font": {"size": style.font_size}})
        ids.append((f"x{k}", f"y{k}"))
    # The legend sits above the panel titles (they take the space right above each panel).
    legend = {"y": 1.0 + 34 / (style.height(height) * rows), "yanchor": "bottom"}
    return styled_layout(style, title=title, x_title=None, y_title=None, height=height * rows, base=layout,
                         xaxis={"rangemode": "tozero"}, yaxis={"rangemode": "tozero"},
                         layout={"legend": legend}), ids


def counters_by_policy(traces: Mapping[str, Trace], style: ChartStyle, *, x_unit: str = "steps",
                       title: str = "Virtual token counter per client") -> go.Figure:
    """Each policy's per-client virtual counters (weighted tokens served plus lifts), side by side on one scale.
    Triangles mark lifts: a returning client's counter raised to the lowest counter of those waiting (or, with
    nobody waiting, to the last one's to leave the queue)."""
    x_title = time_title(x_unit)
    layout, axes = _side_by_side(list(traces), style, title=title, x_title=x_title,
                                 y_title="virtual counter (weighted tokens)")
    shown: set[str] = set()
    lines = []
    for (label, trace), (xa, ya) in zip(traces.items(), axes, strict=True):
        x, _ = step_axis(trace, x_unit)
        counters = trace.clients["client_counters"]
        xs, ys = downsample(x, counters, how="max")
        for i, client_id in enumerate(chart_ids(trace.client_ids)):
            name = f"client {client_id}"
            lines.append({
                "type": "scatter", "x": xs, "y": ys[:, i], "mode": "lines", "name": name, "legendgroup": name,
                "showlegend": name not in shown,
                "line": {"color": theme.client_color(i), "width": style.line_width, "dash": style.client_dash(i)},
                "xaxis": xa, "yaxis": ya,
                "hovertemplate": f"{label}, {name}: %{{y:,.0f}} weighted tokens<extra></extra>",
            })
            shown.add(name)
        lift_x, lift_y, lift_c, lift_text = _lift_markers(trace, x)
        if len(lift_x):
            lines.append({
                "type": "scatter", "x": lift_x, "y": lift_y, "mode": "markers", "name": "lift (counter raised)",
                "legendgroup": "lift", "showlegend": False, "text": lift_text, "xaxis": xa, "yaxis": ya,
                "marker": {"symbol": "triangle-up", "size": style.marker_size + 2, "color": lift_c,
                           "line": {"color": theme.BLACK, "width": 1}},
                "hovertemplate": f"{label}: %{{text}}<extra></extra>",
            })
            shown.add("lift")
    if "lift" in shown:  # one legend entry in a neutral colour: the markers take their client's colour
        lines.append({
            "type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": "lift (counter raised)",
            "legendgroup": "lift",
            "marker": {"symbol": "triangle-up", "size": style.marker_size + 2, "color": theme.LIGHT_GREY,
                       "line": {"color": theme.BLACK, "width": 1}}, "hoverinfo": "skip",
        })
    return trusted_figure(lines, layout)


def _lift_markers(trace: Trace, x: np.ndarray, max_markers: int = 300) -> tuple[np.ndarray, np.ndarray, list[str],
                                                                                  list[str]]:
    """(x, counter after, colour, hover text) of the largest ``max_markers`` lifts."""
    counters, service = trace.clients["client_counters"], trace.clients["client_service"]
    lifted = counters - service
    jumps = np.diff(np.vstack([np.zeros((1, lifted.shape[1])), lifted]), axis=0)
    events = np.argwhere(jumps > 1e-6)  # [k, 2] (step, client)
    if len(events) > max_markers:
        events = events[np.argsort(-jumps[events[:, 0], events[:, 1]], kind="stable")[:max_markers]]
    steps, clients = events[:, 0], events[:, 1]
    names = chart_ids(trace.client_ids)
    text = [f"client {names[c]}'s counter lifted by {jumps[s, c]:,.0f} at step {s:,}"
            for s, c in zip(steps, clients, strict=True)]
    return x[steps], counters[steps, clients], [theme.client_color(int(c)) for c in clients], text


def client_rates_by_policy(traces: Mapping[str, Trace], style: ChartStyle, *, window_steps: int = 100,
                           x_unit: str = "steps", title: str = "Output tokens per second, per client") -> go.Figure:
    """Each policy's per-client output tokens/s over a sliding window, and all clients together (dotted)."""
    if window_steps < 1:
        raise ValueError(f"window_steps: must be >= 1, got {window_steps}")
    x_title = time_title(x_unit)
    layout, axes = _side_by_side(list(traces), style, title=title, x_title=x_title,
                                 y_title=f"output (tokens/s, last {window_steps:,} steps)")
    shown: set[str] = set()
    out = []
    for (label, trace), (xa, ya) in zip(traces.items(), axes, strict=True):
        tokens = trace.clients["client_output_tokens"].astype(np.float64)
        rates = _window_rate(np.column_stack([tokens, tokens.sum(axis=1)]), trace.steps["step_ms"], window_steps)
        x, _ = step_axis(trace, x_unit)
        xs, rates = downsample(x, rates, how="mean")
        lines = [(f"client {c}", theme.client_color(i), style.client_dash(i))
                 for i, c in enumerate(chart_ids(trace.client_ids))]
        lines.append(("all clients", theme.BLACK, "dot"))
        for i, (name, color, dash) in enumerate(lines):
            out.append({
                "type": "scatter", "x": xs, "y": rates[:, i], "mode": "lines", "name": name, "legendgroup": name,
                "showlegend": name not in shown, "line": {"color": color, "width": style.line_width, "dash": dash},
                "xaxis": xa, "yaxis": ya, "hovertemplate": f"{label}, {name}: %{{y:,.0f}} tokens/s<extra></extra>",
            })
            shown.add(name)
    return trusted_figure(out, layout)


def total_throughput(traces: Mapping[str, Trace], style: ChartStyle, *, window_steps: int = 100,
                     x_unit: str = "steps", title: str = "Total throughput") -> go.Figure:
    """All clients' output tokens/s over a sliding window, one line per policy; the run's mean in the legend."""
    if window_steps < 1:
        raise ValueError(f"window_steps: must be >= 1, got {window_steps}")
    colors = policy_colors(traces)
    lines = []
    for i, (label, trace) in enumerate(traces.items()):
        tokens = trace.clients["client_output_tokens"].sum(axis=1, keepdims=True).astype(np.float64)
        rate = _window_rate(tokens, trace.steps["step_ms"], window_steps)[:, 0]
        x, x_title = step_axis(trace, x_unit)
        xs, rate = downsample(x, rate, how="mean")
        mean = _mean_rate(trace)
        lines.append({
            "type": "scatter", "x": xs, "y": rate, "mode": "lines",
            "name": f"{label} (mean {fmt_num(mean, 0)} tokens/s)",
            "line": {"color": colors[label], "width": style.line_width, "dash": label_dash(i)},
            "hovertemplate": f"{label}: %{{y:,.0f}} tokens/s<extra></extra>",
        })
    layout = styled_layout(style, title=title, x_title=time_title(x_unit),
                           y_title=f"output (tokens/s, last {window_steps:,} steps)", hovermode="x unified",
                           xaxis={"rangemode": "tozero"}, yaxis={"rangemode": "tozero"})
    return trusted_figure(lines, layout)


def _mean_rate(trace: Trace) -> float:
    """Output tokens over the whole run per second (sim.metrics.summary's throughput_tok_s)."""
    ms = float(trace.steps["time_ms"][-1]) if trace.num_steps else 0.0
    return float(trace.requests["num_output_tokens"].sum()) / (ms / 1000.0) if ms else float("nan")


def _log_x(x: Sequence[float], labels: Sequence[str]) -> dict[str, Any]:
    """Settings of a log x axis ticked at the swept values, with a little room either side."""
    lo, hi = np.log10(min(x)), np.log10(max(x))
    pad = 0.04 * max(hi - lo, 0.5)
    return {"type": "log", "tickvals": list(x), "ticktext": list(labels), "range": [lo - pad, hi + pad]}


def _vline(x: float, text: str, style: ChartStyle, rows: int) -> dict[str, Any]:
    """Layout settings: a dotted vertical line at ``x`` through every panel of a log x axis, labelled inside the
    top panel.
    NOTE: on a log axis plotly places shapes by data value but annotations by log10 of it."""
    shapes = [{"type": "line", "x0": x, "x1": x, "xref": f"x{axis}", "y0": 0, "y1": 1, "yref": f"y{axis} domain",
               "line": {"color": theme.BLACK, "dash": "dot", "width": style.line_width * 0.6}}
              for axis in ("", *(str(row) for row in range(2, rows + 1)))]
    note = {"x": float(np.log10(x)), "y": 1.0, "xref": "x", "yref": "y domain", "text": text, "showarrow": False,
            "xanchor": "left", "yanchor": "top", "xshift": 4, "bgcolor": "rgba(255,255,255,0.85)",
            "font": {"size": style.font_size * 0.9}}
    return {"shapes": shapes, "annotations": [note]}


def limit_sweep_chart(sweep: Mapping[str, Any], references: Mapping[str, Mapping[str, Any]], style: ChartStyle, *,
                      light_client: int | None = None, chosen: float | None = None,
                      title: str = "Throughput against the per-client rate limit") -> go.Figure:
    """Rate-limit sweep: total throughput (top), the light client's mean finish time (middle, when given) and
    requests rejected per client (bottom) against the limit, with unlimited policies as flat references.

    ``sweep``: lesson.limit_sweep's ``{"x", "points", "window_steps"}`` (and ``x_all``, every swept value, when
    ``x`` has only the points run so far: the axis spans it); ``references``: label -> sweep point."""
    x = list(sweep["x"])
    x_all = list(sweep.get("x_all", x))
    pts = sweep["points"]
    ids = _client_ids(pts, references)
    panels = ["throughput"] + (["latency"] if light_client is not None and light_client < len(ids) else [])
    panels.append("rejected")
    grid, axes = subplot_grid(len(panels), shared_xaxes=True, vertical_spacing=0.07)
    panel = {name: axes[row, 1, False] for row, name in enumerate(panels, start=1)}
    limit_color = theme.POLICY_COLORS["rate_limit"]
    ref_colors = _reference_colors(references)
    line = {"width": style.line_width}
    ref_dash = ("dash", "dashdot", "longdash")
    data: list[dict[str, Any]] = [{
        "type": "scatter", "x": x, "y": [p["throughput"] for p in pts], "mode": "lines+markers",
        "name": "FCFS + rate limit", "legendgroup": "limit", "line": {**line, "color": limit_color},
        "marker": {"size": style.marker_size}, "customdata": [[p["num_rejected"], p["mean_batch"]] for p in pts],
        "hovertemplate": "limit %{x}: %{y:,.0f} tokens/s, %{customdata[0]:,} rejected, "
                         "%{customdata[1]:.1f} requests running on average<extra></extra>",
        **panel["throughput"],
    }]
    data += [{
        "type": "scatter", "x": [x_all[0], x_all[-1]], "y": [ref["throughput"]] * 2, "mode": "lines",
        "legendgroup": label,
        "name": f"{label}, no limit ({fmt_num(ref['throughput'], 0)} tokens/s)",
        "line": {**line, "color": ref_colors[label], "dash": ref_dash[j % 3]},
        "hovertemplate": f"{label}: %{{y:,.0f}} tokens/s<extra></extra>", **panel["throughput"],
    } for j, (label, ref) in enumerate(references.items())]
    if "latency" in panel:
        c = light_client
        data.append({
            "type": "scatter", "x": x, "y": [p["mean_finish_ms"][c] for p in pts], "mode": "lines+markers",
            "legendgroup": "limit", "showlegend": False, "name": "FCFS + rate limit",
            "line": {**line, "color": limit_color}, "marker": {"size": style.marker_size},
            "hovertemplate": f"limit %{{x}}: client {ids[c]}'s mean finish %{{y:,.0f}} ms<extra></extra>",
            **panel["latency"],
        })
        data += [{
            "type": "scatter", "x": [x_all[0], x_all[-1]], "y": [ref["mean_finish_ms"][c]] * 2, "mode": "lines",
            "legendgroup": label, "showlegend": False, "name": label,
            "line": {**line, "color": ref_colors[label], "dash": ref_dash[j % 3]},
            "hovertemplate": f"{label}: client {ids[c]}'s mean finish %{{y:,.0f}} ms<extra></extra>",
            **panel["latency"],
        } for j, (label, ref) in enumerate(references.items())]
    data += [{
        "type": "scatter", "x": x, "y": [p["rejected"][i] for p in pts], "mode": "lines+markers",
        "name": f"rejected: client {client_id}", "line": {**line, "color": theme.client_color(i)},
        "marker": {"size": style.marker_size, "symbol": ("circle", "square", "diamond", "cross")[i % 4]},
        "hovertemplate": f"limit %{{x}}: %{{y:,}} of client {client_id}'s requests rejected<extra></extra>",
        **panel["rejected"],
    } for i, client_id in enumerate(ids)]
    y_titles = {"throughput": "total output (tokens/s)",
                "latency": f"client {ids[light_client]}'s mean finish (ms)" if "latency" in panel else "",
                "rejected": "rejected (requests)"}
    marks = _vline(chosen, f"your limit: {chosen:g}", style, len(panels)) if chosen is not None and chosen > 0 \
        else {}  # (a log axis has no 0)
    layout = styled_layout(style, title=title, x_title=f"rate limit (requests per client per "
                           f"{sweep['window_steps']:,} steps, log scale)", y_title=[y_titles[p] for p in panels],
                           height=260 * len(panels) + 60, base=grid, xaxis=_log_x(x_all, [str(v) for v in x_all]),
                           yaxis={"rangemode": "tozero"}, layout=marks)
    return trusted_figure(data, layout)


def _client_ids(points: Sequence[Mapping[str, Any]], references: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The clients a sweep's panels are drawn for: from its first point, or a reference run before any point is in
    (so a sweep that fills in keeps its panels)."""
    first = points[0] if points else next(iter(references.values()), {})
    return chart_ids(list(first.get("client_ids", [])))


def _reference_colors(references: Mapping[str, Any]) -> dict[str, str]:
    """Policy colours by label when the label names a policy (FCFS grey, VTC green), spare colours otherwise."""
    out: dict[str, str] = {}
    for label in references:
        color = _POLICY.get(label.split(" ")[0].lower())
        if color is None or color in out.values():
            color = next((c for c in _SPARE if c not in out.values()), theme.GREY)
        out[label] = color
    return out


def weight_sweep_chart(sweep: Mapping[str, Any], references: Mapping[str, Mapping[str, Any]], style: ChartStyle, *,
                       chosen: float | None = None,
                       title: str = "Who waits, as the output weight changes") -> go.Figure:
    """Per-client mean finish time (ms) under VTC against the output weight (log scale), with each client's
    mean finish under the reference policies (e.g. FCFS) as flat dashed lines in the client's colour. ``sweep``:
    lesson.weight_sweep's (``x_all``, every swept value, spans the axis when ``x`` has only the points so far)."""
    x = list(sweep["x"])
    x_all = list(sweep.get("x_all", x))
    pts = sweep["points"]
    ids = _client_ids(pts, references)
    data = []
    for i, client_id in enumerate(ids):
        color = theme.client_color(i)
        data.append({
            "type": "scatter", "x": x, "y": [p["mean_finish_ms"][i] for p in pts], "mode": "lines+markers",
            "name": f"client {client_id}, VTC", "line": {"color": color, "width": style.line_width},
            "marker": {"size": style.marker_size, "symbol": ("circle", "square", "diamond", "cross")[i % 4]},
            "hovertemplate": f"output weight %{{x:g}}: client {client_id}'s mean finish %{{y:,.0f}} ms<extra></extra>",
        })
        for j, (label, ref) in enumerate(references.items()):
            if i >= len(ref["mean_finish_ms"]):
                continue
            value = ref["mean_finish_ms"][i]
            data.append({
                "type": "scatter", "x": [x_all[0], x_all[-1]], "y": [value, value], "mode": "lines",
                "name": f"client {client_id}, {label} ({fmt_num(value, 0)} ms)",
                "line": {"color": color, "width": style.line_width * 0.8, "dash": ("dash", "dot", "dashdot")[j % 3]},
                "hovertemplate": f"{label}: client {client_id}'s mean finish %{{y:,.0f}} ms<extra></extra>",
            })
    marks = _vline(chosen, f"your weight: {chosen:g}", style, 1) if chosen is not None and chosen > 0 else {}
    layout = styled_layout(style, title=title,
                           x_title=f"VTC output weight (charge per output token; input weight "
                                   f"{sweep['input_weight']:g}, log scale)", y_title="mean finish time (ms)",
                           height=440, xaxis=_log_x(x_all, [f"{v:g}" for v in x_all]), yaxis={"rangemode": "tozero"},
                           layout=marks)
    return trusted_figure(data, layout)


def service_gap_chart(traces: Mapping[str, Trace], style: ChartStyle, *, a: int = 0, b: int = 1,
                      x_unit: str = "steps", title: str | None = None,
                      precomputed: Mapping[str, tuple[np.ndarray, float, float]] | None = None) -> go.Figure:
    """Client ``a``'s weighted service minus ``b``'s, counted from the start of each stretch in which both had
    requests waiting (sim.fairness_metrics.service_difference; gaps in the line where they did not), one line per
    policy, between dashed lines at +/- VTC's bound 2 * max(w_in * L_input, w_out * M).

    ``precomputed`` maps a label to ``(difference, gap, bound)`` already computed for clients ``a`` and ``b``
    (the page keeps them cached); labels missing from it are computed here."""
    colors = policy_colors(traces)
    first = next(iter(traces.values()))
    names = chart_ids(first.client_ids)
    if max(a, b) >= len(names):
        raise ValueError(f"a, b: clients {a} and {b} do not both exist (the run has {len(names)})")
    lines = []
    peaks = []
    bounds: dict[float, list[str]] = {}
    for i, (label, trace) in enumerate(traces.items()):
        if precomputed is not None and label in precomputed:
            diff, gap_value, bound = precomputed[label]
            gap = {"gap": gap_value, "bound": bound}
        else:
            gap = fairness_metrics.service_gap(trace, a, b)
            diff = gap["difference"]
        x, _ = step_axis(trace, x_unit)
        keep = np.isfinite(diff)
        # Both signs matter (who is ahead): a long run keeps each bucket's lowest and highest value. A NaN breaks
        # the line between stretches in which both clients waited.
        xs, ys = envelope(x, np.where(keep, diff, np.nan))
        what = f"largest gap {fmt_num(gap['gap'], 0)}" if keep.any() else "never both waiting"
        lines.append({
            "type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": f"{label} ({what})",
            "line": {"color": colors[label], "width": style.line_width, "dash": label_dash(i)}, "connectgaps": False,
            "hovertemplate": f"{label}: %{{y:,.0f}} weighted tokens<extra></extra>",
        })
        peaks.append(np.nanmax(np.abs(ys), initial=0.0))
        bounds.setdefault(round(gap["bound"], 6), []).append(label)
    multiple = len(bounds) > 1
    marks = []
    for bound, labels in bounds.items():
        text = f"VTC bound ±{fmt_num(bound, 0)}" + (f" ({', '.join(labels)})" if multiple else "")
        marks += [hline(sign * bound, {"color": theme.BLACK, "dash": "dash", "width": style.line_width * 0.7},
                        text=text if sign > 0 else "", font={"size": style.font_size * 0.9}) for sign in (1, -1)]
    top = max([max(bounds), *peaks])
    layout = styled_layout(
        style, title=title or f"Service gap between clients {names[a]} and {names[b]} while both wait",
        x_title=time_title(x_unit), y_title=f"{names[a]} minus {names[b]} (weighted tokens)", height=440,
        xaxis={"rangemode": "tozero"},
        yaxis={"range": [-1.1 * top, 1.1 * top], "zeroline": True, "zerolinecolor": theme.GREY},
        layout={"shapes": [shape for shape, _ in marks], "annotations": [note for _, note in marks]})
    return trusted_figure(lines, layout)
