"""The request Gantt chart: one row per request (arrival order, first at the top), one bar per lifecycle segment.

Bars are ``go.Bar(orientation="h", base=start)`` with one trace per state (or per client), so the legend lists
states by their STATE_LABELS and a click on a legend entry hides that state. Event markers sit on top: a red
triangle where a request was preempted, a cross where one was rejected or aborted. Highlighted requests (e.g. the
head-of-line blocker) get a black outline and a bold tick label or a note at the end of their row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.request import NO_STEP, RequestStatus
from sim.trace import Trace
from ui import theme
from ui.charts.layout import NO_FILL, fmt_num, styled_layout, time_title, trusted_figure
from ui.charts.segments import STATES, life_spans, request_segments, segment_intervals
from ui.theme import ChartStyle
from ui.wording import chart_ids, chart_text, count

__all__ = ["gantt", "request_segments"]

MAX_TICK_LABELS = 40  # above this many rows, per-row request ids would overlap: hide them
ROW_PX, MIN_HEIGHT, MAX_HEIGHT = 34, 420, 800  # plot height grows with the rows up to a cap (px, base style)
LEGEND_PX = 190  # title and a legend that may wrap to several lines in a half-width column
MIN_PLOT_PX = 500  # the narrowest plot area expected (a half-width column); notes must fit beside the bars
RUNNING_STATES = ("prefill", "decode", "stalled")  # coloured by client when color_by="client"
_STATE_LABELS = np.asarray([theme.STATE_LABELS[s] for s in STATES], dtype=object)  # [state code] str
_RUNNING_CODES = [STATES.index(s) for s in RUNNING_STATES]
_HOVER = ("<b>%{customdata[0]}</b> (client %{customdata[1]})<br>%{customdata[2]}: %{customdata[3]}<br>"
          "%{customdata[4]}<extra></extra>")


def gantt(
    trace: Trace,
    style: ChartStyle,
    *,
    x_unit: str = "steps",
    title: str = "Each request over time",
    highlight_ids: Sequence[str] | Mapping[str, str] = (),
    color_by: str = "state",
    max_requests: int | None = None,
    segments: pd.DataFrame | None = None,
    x_max: float | None = None,
) -> go.Figure:
    """Gantt chart of ``trace``. ``highlight_ids`` may map an id to a note ("head-of-line blocker");
    ``max_requests`` keeps the first N requests by arrival; ``segments`` reuses a cached request_segments();
    ``x_max`` ends the x axis there (in ``x_unit``; default the end of the run), so charts side by side share a
    scale."""
    if color_by not in ("state", "client"):
        raise ValueError(f"color_by: must be 'state' or 'client', got {color_by!r}")
    x_title = time_title(x_unit)
    rows = arrival_order(trace)[:max_requests]
    pos = np.full(trace.num_requests, -1)  # [requests] row position from the top, -1 = not shown
    pos[rows] = np.arange(len(rows))
    many = len(rows) > MAX_TICK_LABELS
    highlights = _highlights(highlight_ids)
    seg = _shown_segments(trace, pos, segments)
    requests = _request_hover(trace, rows)
    # Traces and layout are plain dicts handed to plotly once (see trusted_figure): a page draws several of these
    # charts on every rerun, and plotly validating and copying every value as it was set took most of the time.
    data = [_bars(part, pos, requests, x_unit, name, color, pattern, many_rows=many)
            for name, color, pattern, part in _bar_groups(seg, color_by, trace)]
    data += _event_markers(trace, pos, x_unit, style, many_rows=many)
    shown = f" (first {len(rows)} of {trace.num_requests})" if len(rows) < trace.num_requests else ""
    x_max = _x_max(trace, x_unit) if x_max is None else x_max
    layout = styled_layout(style, title=title + shown, x_title=x_title, y_title="requests (in arrival order)",
                           height=_height(len(rows)), xaxis={"range": [0, x_max]},
                           yaxis=_row_axis(trace, rows, highlights),
                           layout={"barmode": "overlay"})  # a row's states must not be pushed side by side
    _outline_highlights(layout, trace, pos, x_unit, x_max, highlights, style, many)
    return trusted_figure(data, layout)


def arrival_order(trace: Trace) -> np.ndarray:
    """Request rows sorted by arrival step, ties in scenario order."""
    return np.argsort(trace.requests["arrival_step"], kind="stable")


def _shown_segments(trace: Trace, pos: np.ndarray, segments: pd.DataFrame | None) -> dict[str, np.ndarray]:
    """The segments of the requests shown, as named [segments] arrays: row, client (index into trace.client_ids),
    state (index into STATES), start_step, end_step, start_ms, end_ms. Plain numpy: this runs on every rerun."""
    if segments is None:
        row, start, end, state = segment_intervals(trace)
    else:
        row, start, end = (segments[c].to_numpy() for c in ("row", "start_step", "end_step"))
        state = pd.Index(STATES).get_indexer(segments["state"])
    keep = pos[row] >= 0
    row, start, end, state = row[keep], start[keep], end[keep], state[keep]
    return {"row": row, "client": trace.requests["client"][row], "state": state, "start_step": start,
            "end_step": end, "start_ms": trace.start_ms(start), "end_ms": trace.start_ms(end)}


def _bar_groups(seg: dict[str, np.ndarray], color_by: str, trace: Trace):
    """(legend name, colour, pattern shape, segments) per bar trace, in legend order."""
    states = seg["state"]
    for state, color in theme.STATE_COLORS.items():
        if color_by == "client" and state in RUNNING_STATES:
            if state == RUNNING_STATES[0]:
                yield from _client_groups(_take(seg, np.isin(states, _RUNNING_CODES)), trace)
            continue
        part = _take(seg, states == STATES.index(state))
        if len(part["row"]):
            yield theme.STATE_LEGEND[state], color, theme.STATE_PATTERNS.get(state, ""), part


def _client_groups(seg: dict[str, np.ndarray], trace: Trace):
    for c, client_id in enumerate(chart_ids(trace.client_ids)):
        part = _take(seg, seg["client"] == c)
        if len(part["row"]):
            yield f"client {client_id} (running)", theme.client_color(c), "", part


def _take(seg: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {column: values[mask] for column, values in seg.items()}


def _bars(seg: dict[str, np.ndarray], pos: np.ndarray, requests: np.ndarray, x_unit: str, name: str, color: str,
          pattern: str, *, many_rows: bool) -> dict[str, Any]:
    """One legend entry of bars; with many rows they touch (no gap), so a thin row still shows its colour."""
    col = "step" if x_unit == "steps" else "ms"
    start, end = seg[f"start_{col}"], seg[f"end_{col}"]
    return {
        "type": "bar", "orientation": "h", "y": pos[seg["row"]], "x": end - start,
        "base": start.astype(object),  # as plotly's validation makes it: sent as a JSON list, not in binary
        "width": 1.0 if many_rows else 0.8, "name": name,
        "marker": {"color": color, "line": {"width": 0},
                   "pattern": {"shape": pattern, "fillmode": "overlay", "size": 7, "solidity": 0.35,
                               "fgcolor": theme.LIGHT_GREY if color == theme.BLACK else theme.BLACK}},
        "customdata": _segment_hover(seg, requests), "hovertemplate": _HOVER,
    }


def _segment_hover(seg: dict[str, np.ndarray], requests: np.ndarray) -> np.ndarray:
    """[segments, 5] str: id, client, state label, "steps a to b (n steps, x to y ms)", request summary (the last
    from ``requests``, _request_hover()'s)."""
    columns = (seg[c].tolist() for c in ("start_step", "end_step", "start_ms", "end_ms"))  # Python scalars:
    spans = [  # formatting them is several times faster than formatting numpy ones
        f"step {a:,} ({fmt_num(x, 1)} to {fmt_num(y, 1)} ms)" if b - a == 1 else
        f"steps {a:,} to {b - 1:,} ({b - a:,} steps, {fmt_num(x, 1)} to {fmt_num(y, 1)} ms)"
        for a, b, x, y in zip(*columns, strict=True)
    ]
    who = requests[seg["row"]]
    text = np.column_stack([who[:, :2], _STATE_LABELS[seg["state"]], np.asarray(spans, dtype=object), who[:, 2]])
    # A string array, not object: plotly deep-copies customdata when it builds the figure and again in to_dict()
    # (as Streamlit sends it), one Python object at a time for an object array. It still goes out as a JSON list.
    return text.astype(np.dtypes.StringDType())


def _request_hover(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """[requests, 3] str: id, client, summary (_request_info(), "" for a request not in ``rows``)."""
    return np.column_stack([np.asarray(chart_ids(trace.request_ids), dtype=object),
                            np.asarray(chart_ids(trace.client_ids), dtype=object)[trace.requests["client"]],
                            _request_info(trace, rows)])


def _request_info(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """[requests] str, filled for ``rows``: prompt, output, finish time, preemptions, one hover line each."""
    r = trace.requests
    out = np.full(trace.num_requests, "", dtype=object)
    # Python lists and one vectorised clock lookup: this loop visits every request shown.
    finish, arrival, status, prompt, output, preemptions = (r[k].tolist() for k in (
        "finish_step", "arrival_step", "status", "prompt_len", "num_output_tokens", "num_preemptions"))
    took_ms = [0.0] * trace.num_requests  # arrival to the end of the last step, used where the request finished
    if trace.num_steps:
        # (clipped: in a partial trace a request may arrive after the last step recorded)
        start = trace.start_ms(np.minimum(r["arrival_step"], trace.num_steps))
        took_ms = (trace.end_ms(np.maximum(r["finish_step"], 0)) - start).tolist()
    for i in rows.tolist():
        state = RequestStatus(status[i])
        if finish[i] == NO_STEP:
            done = "not finished when the run ended"
        elif state in (RequestStatus.FINISHED_ABORTED, RequestStatus.REJECTED):
            done = f"{state.name.lower().replace('finished_', '')} at step {finish[i]:,} ({trace.finish_reason[i]})"
        else:
            done = (f"finished at step {finish[i]:,}: {count(finish[i] - arrival[i] + 1, 'step')}, "
                    f"{fmt_num(took_ms[i], 1)} ms after arrival")
        out[i] = (f"prompt {count(prompt[i], 'token')}, output {count(output[i], 'token')}"
                  f"<br>{done}<br>preemptions: {preemptions[i]}")
    return out


def _event_markers(trace: Trace, pos: np.ndarray, x_unit: str, style: ChartStyle, *,
                   many_rows: bool) -> list[dict[str, Any]]:
    """Preemptions (a red triangle pointing down onto the row), rejections and aborts (a black cross); smaller
    when rows are thin, so hundreds of them do not merge into one black band."""
    size = style.marker_size if many_rows else style.marker_size + 4
    pre_rows = [i for i, steps in enumerate(trace.preempted_at_steps) for _ in steps]
    pre_steps = [s for steps in trace.preempted_at_steps for s in steps]
    status = trace.requests["status"]
    rejected = np.flatnonzero(status == RequestStatus.REJECTED)
    aborted = np.flatnonzero(status == RequestStatus.FINISHED_ABORTED)
    groups = (
        ("preempted here", pre_rows, pre_steps, "triangle-down", theme.VERMILLION, -0.45),
        ("rejected on arrival", rejected, trace.requests["arrival_step"][rejected], "x", theme.BLACK, 0.0),
        ("aborted (client gone)", aborted, trace.requests["finish_step"][aborted], "x-thin", theme.BLACK, 0.0),
    )
    out = []
    for name, rows, steps, symbol, color, dy in groups:
        rows, steps = np.asarray(rows, dtype=np.int64), np.asarray(steps, dtype=np.int64)
        keep = pos[rows] >= 0 if len(rows) else np.zeros(0, dtype=bool)
        if not keep.any():
            continue
        rows, steps = rows[keep], steps[keep]
        x = steps if x_unit == "steps" else trace.start_ms(steps)
        ids = np.asarray(chart_ids(trace.request_ids), dtype=object)[rows]
        out.append({
            "type": "scatter", "x": x, "y": pos[rows] + dy, "mode": "markers", "name": name, "cliponaxis": False,
            "marker": {"symbol": symbol, "color": color, "size": size,
                       "line": {"color": theme.BLACK, "width": 1.5 if symbol != "x-thin" else 3}},
            "customdata": np.column_stack([ids, steps]),
            "hovertemplate": f"<b>%{{customdata[0]}}</b>: {name} at step %{{customdata[1]:,}}<extra></extra>",
        })
    return out


def _highlights(highlight_ids: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(highlight_ids, Mapping):
        return dict(highlight_ids)
    return {rid: "" for rid in highlight_ids}


def _row_axis(trace: Trace, rows: np.ndarray, highlights: dict[str, str]) -> dict[str, Any]:
    """Reversed numeric y axis (first arrival at the top); request ids as tick labels when they fit."""
    n = len(rows)
    axis = {"range": [n - 0.5, -0.5], "zeroline": False, "ticks": "", "showgrid": False}
    if n <= MAX_TICK_LABELS:
        ids = [trace.request_ids[r] for r in rows]
        text = [f"<b>{chart_text(rid)}</b>" if rid in highlights else chart_text(rid) for rid in ids]
        axis.update(tickmode="array", tickvals=list(range(n)), ticktext=text)
    else:
        axis.update(showticklabels=False)
    return axis


def _outline_highlights(layout: dict[str, Any], trace: Trace, pos: np.ndarray, x_unit: str, x_max: float,
                        highlights: dict[str, str], style: ChartStyle, many_rows: bool) -> None:
    """Add to ``layout`` a black box around each highlighted request's whole life, and its note (or id, when ticks
    are hidden) to the right of it; the right margin grows when a note would run off the figure."""
    index = {rid: i for i, rid in enumerate(trace.request_ids)}
    start, end = life_spans(trace)
    shapes, notes, margin = [], [], layout["margin"]["r"]
    for rid, note in highlights.items():
        row = index.get(rid)
        if row is None or pos[row] < 0:
            continue
        x0, x1 = (start[row], end[row]) if x_unit == "steps" else \
            trace.start_ms(np.minimum([start[row], end[row]], trace.num_steps))  # a partial run's clock ends
        y = int(pos[row])
        shapes.append({"type": "rect", "x0": x0, "x1": x1, "y0": y - 0.5, "y1": y + 0.5, "layer": "above",
                       "fillcolor": NO_FILL, "opacity": 1,
                       "line": {"color": theme.BLACK, "width": style.outline_width}})
        text = note or (rid if many_rows else "")
        if text:
            notes.append({"x": x1, "y": y, "text": f"\u2190 {text}", "showarrow": False, "xanchor": "left",
                          "font": {"color": theme.BLACK}})
            text_px = (len(text) + 3) * style.font_size * 0.6  # a rough width of sans-serif text
            room_px = (1 - float(x1) / x_max) * MIN_PLOT_PX
            margin = max(margin, int(text_px - room_px) + 12)
    layout["margin"]["r"] = margin
    if shapes:
        layout["shapes"] = shapes
    if notes:
        layout["annotations"] = notes


def _x_max(trace: Trace, x_unit: str) -> float:
    if not trace.num_steps:
        return 1.0
    return trace.num_steps if x_unit == "steps" else float(trace.steps["time_ms"][-1])


def _height(num_rows: int) -> int:
    return int(np.clip(LEGEND_PX + ROW_PX * num_rows, MIN_HEIGHT, MAX_HEIGHT))
