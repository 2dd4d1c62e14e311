"""The one layout every chart shares, plus the helpers every builder needs (downsampling, label colours).

``styled_layout`` owns fonts, margins, the print-friendly white template, the legend and the hover label, so a chart
builder only makes traces and names its axes (with units). Margins are pushed by plotly's auto-margin (title, legend
and tick labels), so nothing is cut off whatever the labels. ``downsample`` keeps a long step series to a bounded
number of points, so a 20,000-step trace sends a few kB instead of a few MB to the browser.

A page rebuilds its charts on every rerun, so builders make plain trace and layout dicts and hand them to plotly
once (``trusted_figure``): each plotly ``add_*``/``update_*``/``make_subplots`` call validates and deep-copies the
figure (~5-50 ms a chart). ``subplot_grid`` (subplot axes) and ``hline`` (a labelled horizontal line) give what
make_subplots and add_hline would have put in the layout.
"""

from __future__ import annotations

import copy
import functools
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from sim.config import cdiv
from sim.trace import Trace
from ui import theme
from ui.theme import ChartStyle

FONT_FAMILY = "Arial, Helvetica, 'DejaVu Sans', sans-serif"
NO_FILL = "rgba(0,0,0,0)"  # not a colour: "draw no fill" (templates give shapes a grey fill by default)
MAX_POINTS = 1500  # per series; a 1,000-px-wide chart cannot show more anyway

# Every figure here is styled by styled_layout. Plotly's default template ("plotly") would be deep-copied into
# each new figure and serialised with it (~6 ms a figure, for a look we replace anyway), so: no template.
pio.templates.default = "none"


def styled_layout(
    style: ChartStyle,
    *,
    title: str,
    x_title: str | None,
    y_title: str | Sequence[str] | None,
    height: int = 420,
    legend: bool = True,
    legend_title: str | None = None,
    hovermode: str | bool = "closest",
    xaxis: Mapping[str, Any] | None = None,
    yaxis: Mapping[str, Any] | None = None,
    layout: Mapping[str, Any] | None = None,
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The shared look as a plotly layout dict, on top of ``base`` (a layout the builder set already).

    ``y_title`` may be one title per subplot row (top first); ``x_title`` goes on the bottom x axis. ``height`` is
    the base height in px (presentation mode and the print theme scale it; the print theme fixes the width too and
    names the lesson and preset under the title). The title sits top-left, the legend in one or more
    horizontal rows between the title and the plot, so it never covers data and reads left to right.
    ``xaxis``/``yaxis`` (applied to every x or y axis) and ``layout`` carry a builder's own settings: the whole
    layout is built here as one dict, because each plotly ``update_*`` call deep-copies the figure's state (~10 ms
    each).
    """
    new = dict(base or {})
    new.update(
        paper_bgcolor=theme.WHITE,  # plotly's "simple_white" look, set directly (the template default is "none")
        plot_bgcolor=theme.WHITE,
        height=style.height(height),
        font={"family": FONT_FAMILY, "size": style.font_size, "color": theme.BLACK},
        title={"text": title, "font": {"size": style.title_size}, "x": 0, "xref": "container", "xanchor": "left",
               "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 10, "l": 12, "b": 6}, "automargin": True},
        margin={"l": 12, "r": 24, "t": 12, "b": 12},
        showlegend=legend,
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom",
                "title": {"text": legend_title or "", "side": "left"}, "font": {"size": style.font_size},
                "itemsizing": "constant", "traceorder": "normal"},
        hovermode=hovermode,
        hoverlabel={"font": {"family": FONT_FAMILY, "size": style.font_size}, "align": "left"},
    )
    axis = {"automargin": True, "showgrid": True, "gridcolor": theme.LIGHT_GREY, "gridwidth": 1, "showline": True,
            "zeroline": False, "ticks": "outside", "ticklen": 5, "tickcolor": theme.BLACK,
            "linecolor": theme.BLACK, "title": {"font": {"size": style.font_size}},
            "separatethousands": True, "exponentformat": "none"}  # 25,000 ms, not 25k
    x_axes = sorted((k for k in new if k.startswith("xaxis")), key=_axis_number) or ["xaxis"]
    y_axes = sorted((k for k in new if k.startswith("yaxis")), key=_axis_number) or ["yaxis"]
    for names, extra in ((x_axes, xaxis), (y_axes, yaxis)):
        for name in names:
            new[name] = _merged(new.get(name, {}), axis, extra or {})
    if x_title is not None:
        new[x_axes[-1]]["title"]["text"] = x_title  # subplots share x: name it once, at the bottom
    if y_title is not None:
        titles = [y_title] if isinstance(y_title, str) else list(y_title)
        for name, text in zip(y_axes, titles, strict=False):
            new[name]["title"]["text"] = text
    out = _merged(new, layout or {})
    if style.width is not None:
        out["width"] = style.width
    if style.width is not None:  # (a fixed width: a long title gets smaller text rather than run off the figure,
        # a long x axis title a second line)
        out["title"]["font"]["size"] = _fitting_size(out["title"]["text"], style)
        for name in x_axes:
            title = out[name]["title"]
            if title.get("text"):
                title["text"] = _wrapped(title["text"], int(0.9 * style.chars_per_line(style.font_size)))
    if style.printed and style.figure_label:
        _add_subtitle(out["title"], style.figure_label, style.font_size - 3, style.chars_per_line(style.font_size - 3))
    return out


MIN_TITLE_SIZE = 15  # px: a print title's smallest text


def _fitting_size(text: str, style: ChartStyle) -> int:
    """The title's text size in a figure of fixed width: the style's, or smaller for a title that would not fit on
    one line (plotly lays a title of several lines out from its last line up, over the figure's top edge)."""
    size = style.title_size
    while size > MIN_TITLE_SIZE and "<" not in text and len(text) > style.chars_per_line(size):
        size -= 1
    return size


def _wrapped(text: str, width: int) -> str:
    """Plain ``text`` in lines of at most ``width`` characters joined by <br>; text with markup is left as it is."""
    if not width or "<" in text or len(text) <= width:
        return text
    return "<br>".join(textwrap.wrap(text, width))


def _add_subtitle(title: dict[str, Any], text: str, size: int, width: int) -> None:
    """A print figure's title names what it belongs to (the lesson and preset) on a line under it, after the
    builder's own subtitle if it has one."""
    own = title.get("subtitle", {})
    text = _wrapped(text, width)
    title["subtitle"] = {**own, "text": f"{_wrapped(own['text'], width)}<br>{text}" if own.get("text") else text,
                         "font": {**own.get("font", {}), "size": size}}


def trusted_figure(data: Sequence[Mapping[str, Any]], layout: Mapping[str, Any]) -> go.Figure:
    """A figure from trace dicts (each with its ``type``) and a layout dict that our own builders made, so their
    values are known to be valid: plotly skips validating them (for a chart of hundreds of bars, most of its build
    time). Later edits through the figure (``update_xaxes``, ``add_traces``) are validated as usual.

    Values must already have the form validation would give them, or the JSON sent to the browser changes: e.g.
    a bar's ``base`` becomes an object array (a JSON list), while numeric ``x`` and ``y`` arrays stay numeric
    (sent in binary).
    """
    fig = go.Figure(data=list(data), layout=dict(layout), _validate=False)
    # Plotly has no public way back: _validate=False leaves this flag off on the figure, its layout and each trace.
    fig._validate = fig.layout._validate = True
    for trace in fig.data:
        trace._validate = True
    return fig


AxisIds = dict[tuple[int, int, bool], dict[str, str]]  # (row, col, is_secondary_y) -> {"xaxis": "x2", "yaxis": "y2"}


def subplot_grid(rows: int, cols: int = 1, *, secondary_y: bool = False,
                 **options: Any) -> tuple[dict[str, Any], AxisIds]:
    """make_subplots' axes for a ``rows`` x ``cols`` grid, as a layout dict to pass as styled_layout's ``base``, and
    the axes of each cell by (row, col, is_secondary_y) as a trace's ``xaxis`` and ``yaxis`` settings (``{"xaxis":
    "x2", "yaxis": "y2"}``). ``options`` are make_subplots' own (shared_xaxes, vertical_spacing...);
    ``secondary_y`` gives every cell a right-hand y axis.

    make_subplots costs 15-50 ms a figure, yet its layout depends on the grid alone: it runs once per grid shape
    (a memo of a pure function, so sessions may share it) and each call gets its own copy to edit."""
    layout, axes = _subplot_grid(rows, cols, secondary_y, tuple(sorted(options.items())))
    return copy.deepcopy(layout), {cell: dict(ids) for cell, ids in axes.items()}


@functools.lru_cache(maxsize=32)
def _subplot_grid(rows: int, cols: int, secondary_y: bool,
                  options: tuple[tuple[str, Any], ...]) -> tuple[dict[str, Any], AxisIds]:
    specs = [[{"secondary_y": True}] * cols for _ in range(rows)] if secondary_y else None
    fig = make_subplots(rows=rows, cols=cols, specs=specs, **dict(options))
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)  # trusted_figure sets the default one
    axes = {}
    for row in range(1, rows + 1):
        for col in range(1, cols + 1):
            for secondary in (False, True) if secondary_y else (False,):
                cell = fig.get_subplot(row, col, secondary_y=secondary)
                axes[row, col, secondary] = {"xaxis": _axis_id(cell.xaxis.plotly_name),
                                             "yaxis": _axis_id(cell.yaxis.plotly_name)}
    return layout, axes


def _axis_id(layout_key: str) -> str:
    return layout_key.replace("axis", "", 1)  # "xaxis2" -> "x2", as a trace names its axis


def layout_key(axis_id: str) -> str:
    """The layout key of a trace's axis id: "y2" -> "yaxis2"."""
    return f"{axis_id[0]}axis{axis_id[1:]}"


def hline(y: float, line: Mapping[str, Any], *, text: str, font: Mapping[str, Any] | None = None,
          opacity: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(shape, annotation): a line across the plot at ``y`` labelled at its top left, as
    ``fig.add_hline(y, annotation_position="top left")`` would add them to the layout, but as plain dicts for
    styled_layout (each add_hline validates and copies the whole figure)."""
    shape = {"type": "line", "x0": 0, "x1": 1, "xref": "x domain", "y0": y, "y1": y, "yref": "y", "line": dict(line)}
    if opacity is not None:
        shape["opacity"] = opacity
    note = {"text": text, "xanchor": "left", "yanchor": "bottom", "x": 0, "xref": "x domain", "y": y, "yref": "y",
            "showarrow": False}
    if font is not None:
        note["font"] = dict(font)
    return shape, note


def _merged(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """Later dicts win; nested dicts merge key by key."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
                out[key] = _merged(out[key], value)
            else:
                out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


def _axis_number(name: str) -> int:
    digits = name[len("xaxis"):]  # "xaxis" -> 1, "yaxis3" -> 3
    return int(digits) if digits else 1


def downsample(
    x: np.ndarray, *ys: np.ndarray, max_points: int = MAX_POINTS, how: Literal["max", "mean"] = "max"
) -> tuple[np.ndarray, ...]:
    """Bucket a long series to at most ``max_points`` points: ``(x, *ys)`` with x the first x of each bucket.

    ``how="max"`` (the default, for counts such as queue length) keeps each bucket's peak, so a short spike still
    shows; ``how="mean"`` keeps averages, so series stacked on each other still add up to the mean total. Series
    shorter than ``max_points`` come back as copies, untouched. Inputs are never modified.
    """
    x = np.asarray(x)
    n = len(x)
    if n <= max_points:
        return (x.copy(), *(np.asarray(y).copy() for y in ys))
    size = cdiv(n, max_points)  # bucket length, steps
    starts = np.arange(0, n, size)
    reduce = np.maximum.reduceat if how == "max" else np.add.reduceat
    counts = np.diff(np.append(starts, n))
    out = [x[starts]]
    for y in ys:
        y = np.asarray(y, dtype=np.float64)
        r = reduce(y, starts, axis=0)
        out.append(r if how == "max" else r / (counts if y.ndim == 1 else counts[:, None]))
    return tuple(out)


def envelope(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """A long signed series (NaN = no value) in at most ``max_points`` points that keep each bucket's lowest and
    highest value, in the order they come: (x, y), two points a bucket. Unlike ``downsample`` it loses no
    extreme on either side, and a bucket is empty (NaN) only when every value in it is. Short series come back
    as copies."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = len(y)
    if n <= max_points:
        return x.copy(), y.copy()
    size = cdiv(n, max_points // 2)  # bucket length, steps
    starts = np.arange(0, n, size)
    rows = np.concatenate([y, np.full(len(starts) * size - n, np.nan)]).reshape(-1, size)  # one bucket a row
    missing = np.isnan(rows)
    hi_at = starts + np.where(missing, -np.inf, rows).argmax(axis=1)  # an all-NaN bucket: its first (NaN) point
    lo_at = starts + np.where(missing, np.inf, rows).argmin(axis=1)
    first, second = np.minimum(lo_at, hi_at), np.maximum(lo_at, hi_at)
    idx = np.column_stack([first, second]).ravel()
    return x[idx], y[idx]


TIME_TITLES = {"steps": "time (engine steps)", "ms": "time (ms)"}


def time_title(x_unit: str) -> str:
    """The time axis title for ``x_unit`` ("steps" or "ms"); any other unit is a ValueError."""
    if x_unit not in TIME_TITLES:
        raise ValueError(f"x_unit: must be 'steps' or 'ms', got {x_unit!r}")
    return TIME_TITLES[x_unit]


def step_axis(trace: Trace, x_unit: str) -> tuple[np.ndarray, str]:
    """The x values of a per-step series and the axis title: the step index, or the clock at the start of each
    step. Either way step t's value holds over step t's own span (drawn with the "hv" line shape), as the Gantt
    chart and the markers place it."""
    title = time_title(x_unit)
    steps = np.arange(trace.num_steps)
    return (steps if x_unit == "steps" else trace.start_ms(steps)), title


def time_extent(traces: Iterable[Trace], x_unit: str) -> float:
    """Where the longest of ``traces`` ends on a time axis (``x_unit`` steps or ms): side-by-side charts share it."""
    return max(float(t.steps["time_ms"][-1]) if x_unit == "ms" else t.num_steps for t in traces)


def label_colors(traces: Mapping[str, Trace]) -> dict[str, str]:
    """One colour per comparison label: a label that alone runs its policy gets the policy's own colour (so FCFS
    is grey on every page); labels sharing a policy (SJF with and without a guard; recompute vs swap, both FCFS)
    get the series colours in order, skipping those colours."""
    policies = [_policy_key(t) for t in traces.values()]
    alone = {p for p in policies if policies.count(p) == 1 and p in theme.POLICY_COLORS}
    spare = iter([c for c in theme.SERIES_COLORS if c not in {theme.POLICY_COLORS[p] for p in alone}])
    return {label: theme.POLICY_COLORS[p] if p in alone else next(spare, theme.GREY)
            for label, p in zip(traces, policies, strict=True)}


def _policy_key(trace: Trace) -> str:
    """The POLICY_COLORS key of a run: its queue policy, or "rate_limit" when a rate limit is on."""
    return "rate_limit" if trace.config.rate_limit_max_requests else str(trace.config.policy)


def fmt_num(value: float, decimals: int | None = None) -> str:
    """A number for legends and hover text: thousands separators, NaN as an em dash. Without ``decimals``, as
    many as a reader needs: none from 100 up, one from 10, two below (9,498 ms; 23.5 ms; 5.75 ms)."""
    if value is None or not math.isfinite(value):  # math, not numpy: this runs for every hover line
        return "\u2014"
    if decimals is None:
        decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:,.{decimals}f}"


DASHES = ("solid", "dash", "dot", "dashdot", "longdash")  # per comparison label: apart in grayscale and when equal


def label_dash(index: int) -> str:
    return DASHES[index % len(DASHES)]


def integer_ticks(max_value: float) -> dict[str, Any]:
    """Axis settings for whole-number ticks on a count axis: with a small maximum, plotly would otherwise tick 0.5
    requests."""
    return {"dtick": 1, "tick0": 0} if max_value <= 8 else {}
