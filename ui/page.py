"""What every page shares: setup (page config, presentation mode, figure export format), chart display, the
"what to notice" box, the side-by-side comparison grid and error display.

Every page (home included) calls ``setup`` itself, so a shared link to any page works on a fresh server.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import lessons
from sim import ScenarioError, SimulationError, StepLimitError

from . import runner
from .charts.tables import metric_row
from .controls import Knob, KnobPanel, arrive, set_param
from .theme import ChartStyle, plotly_config
from .wording import Card, as_code, file_slug, plain

_DISPLAY_KNOBS = [
    Knob("present", "Presentation mode (projector)", "bool", False, widget="toggle",
         help="Bigger text and thicker lines for a projected classroom demo."),
    Knob("export", "Figure download format", "choice", "png", options=("png", "svg"),
         labels={"png": "PNG (3x, print resolution)", "svg": "SVG (vector)"}, widget="select",
         help="What each chart's camera button saves."),
    Knob("theme", "Chart theme", "choice", "screen", options=("screen", "print"),
         labels={"screen": "Screen", "print": "Print (course notes)"}, widget="select",
         help="Print: figures of a fixed size for half a page (larger text, thicker lines), titles that name the "
              "lesson and preset; the camera button saves that size. `python -m ui.notes` exports every chart so."),
]

# Set in the session by the course notes' export (ui/notes, which runs a page in AppTest): every choice of a
# one-at-a-time picker is drawn (pick_one), and a lesson page keeps its runs' scenarios under NOTES_RUNS.
NOTES_EXPORT = "notes.export"
NOTES_RUNS = "notes.runs"

# Presentation mode: larger text; a metric's larger number ("4,081 tokens/s") needs 18 rem before its row wraps.
# A projector's first screen (1,280 x 720) holds the title, the question, the preset and the headline numbers: the
# page's margins (5 rem at the sides, 6 above, in rem: 100 and 120 px at 20 px) and the title shrink to fit, so
# three metrics (3 x 18 rem) and two charts (2 x 400 px) fit a row of the 1,160 px left. The first line starts
# below Streamlit's header, an opaque 3.75-rem bar in this mode that takes clicks (at 3 rem it hid the top of the
# "Guided path" button).
_PRESENTATION_CSS = f"""
<style>
html {{ font-size: {ChartStyle(presentation=True).root_font_px}px; }}
[data-testid="stColumn"]:has([data-testid="stMetric"]) {{ min-width: min(100%, 18rem); }}
[data-testid="stMainBlockContainer"] {{ padding-top: 4rem; padding-left: 3rem; padding-right: 3rem; }}
[data-testid="stMainBlockContainer"] h1 {{ font-size: 2.2rem; padding-top: 0; }}
</style>
"""

# Side-by-side cells wrap onto rows of their own where they would be too narrow to read (a 1,024-px projector with
# the sidebar open leaves ~520 px for two charts: titles and legends were cut off, metric labels cut to "Swap: c…").
# Only rows of charts or metrics wrap; buttons and other widgets in columns keep their row. Charts wrap below 400 px
# (presentation mode's larger chart text still fits two across at 1,400 px), metrics below 12 rem of their text.
_LAYOUT_CSS = """
<style>
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stPlotlyChart"]),
[data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"]) { flex-wrap: wrap; }
[data-testid="stColumn"]:has([data-testid="stPlotlyChart"]) { min-width: min(100%, 400px); }
[data-testid="stColumn"]:has([data-testid="stMetric"]) { min-width: min(100%, 12rem); }
</style>
"""


HOME = ("app.py", "Home", ":material/home:")  # a page of the navigation: (file, label, icon)
WORKBENCH = ("pages/6_Workbench.py", "Workbench", ":material/construction:")
GLOSSARY = ("pages/9_Glossary.py", "Glossary", ":material/menu_book:")


def navigation() -> tuple[tuple[str, str, str], ...]:
    """The sidebar's pages: home, the course's lessons in its order (``lessons.LESSONS``), then the tools."""
    return (HOME, *((lesson.page, lesson.title, lesson.icon) for lesson in lessons.LESSONS), WORKBENCH, GLOSSARY)


FAVICON = "🚦"  # (an emoji is drawn in the browser; a :material/...: page icon is fetched from Google's servers)


def setup(title: str) -> ChartStyle:
    """Configure the page, draw the navigation and return the chart style chosen under Display."""
    runner.settle_long_lived_objects()
    st.set_page_config(page_title=f"{title} · Scheduler Lab", page_icon=FAVICON, layout="wide")
    arrive(title)  # (back on this page: its settings return to the URL, and from there to its widgets)
    st.sidebar.markdown("### Scheduler Lab")
    for path, label, page_icon in navigation():
        st.sidebar.page_link(path, label=label, icon=page_icon)
    # (widgets in the expander, a bad link value warned about in the main area, where the page starts: inside the
    # collapsed expander nobody would see it)
    values = KnobPanel("display", _DISPLAY_KNOBS).render(st.sidebar.expander("Display", expanded=False))
    # A projector's 1,280 px less an open sidebar leaves too little for two charts a row: presentation mode starts
    # each page with the sidebar closed (its arrow opens it).
    st.set_page_config(initial_sidebar_state="collapsed" if values["present"] else "auto")
    st.html(_LAYOUT_CSS + (_PRESENTATION_CSS if values["present"] else ""))  # (style only: takes no space)
    return ChartStyle(presentation=values["present"], export_format=values["export"],
                      printed=values["theme"] == "print")


def show_chart(fig: go.Figure, name: str, style: ChartStyle, key: str | None = None, *,
               cursor_runs: Sequence[str] = (), x_unit: str = "steps", cursor_axes: Sequence[str] = ()) -> None:
    """Render a figure; its camera button downloads ``<style.file_prefix>-<name>.png`` (or .svg), e.g.
    ``scheduler-lab-queueing-busy_server-gantt-FCFS.png``. ``cursor_runs``: the runs (by label) whose steps the
    figure's x axis shows, in ``x_unit`` (steps or ms): the step player draws its cursor there for each; on the
    x axis ``cursor_axes[i]`` ("x2") for run i when the figure has a panel per run."""
    if cursor_runs:
        cursor = {"runs": list(cursor_runs), "unit": x_unit, **({"axes": list(cursor_axes)} if cursor_axes else {})}
        fig.update_layout(meta={"cursor": cursor})
    # The print theme's figures have a fixed size: the camera button saves that, not the width shown.
    size = (fig.layout.width, fig.layout.height) if style.width is not None and fig.layout.height else None
    # theme=None: the figure's own fonts and colours (Streamlit's theme would grey and shrink the tick labels).
    if key is None or st.session_state.get(NOTES_EXPORT):  # (the notes draw every pick of a keyed picker's chart)
        key = f"chart-{name}"
    st.plotly_chart(fig, config=plotly_config(file_slug(style.file_prefix, name), style, size), key=key, theme=None)


def panel_axes(count: int) -> list[str]:
    """The x axes of a figure with one panel per run, in order ("x", "x2", ...): ``show_chart``'s ``cursor_axes``,
    so each run's cursor is drawn on its own panel."""
    return [f"x{i + 1 if i else ''}" for i in range(count)]


def cards(items: Sequence[Card], columns: int | None = None) -> None:
    """Headline numbers side by side, ``columns`` to a row (default: all of them)."""
    for col, card in zip(st.columns(columns or max(len(items), 1)), items, strict=False):
        col.metric(card.label, card.value, help=card.help or None)
        if card.caption:
            col.caption(card.caption)


NOTICE_SHOWN = 3  # sentences in the "what to notice" box; the rest wait under "more" (a lesson lists its most
# important first)


def notice(sentences: Sequence[str], shown: int = NOTICE_SHOWN) -> None:
    """The "what to notice" box: sentences computed from the run, the first ``shown`` in the box and the rest in an
    expander under it, so the box stays short on a projector."""
    if not sentences:
        return
    st.info("**What to notice**\n\n" + _bullets(sentences[:shown]), icon=":material/lightbulb:")
    if len(sentences) > shown:
        with st.expander(f"More to notice ({len(sentences) - shown})", expanded=False):
            st.info(_bullets(sentences[shown:]), icon=None)


def _bullets(sentences: Sequence[str]) -> str:
    return "\n".join(f"- {s}" for s in sentences)


_LATENCY_COLUMNS = ("finish_mean", "finish_p50", "finish_p99", "finish_max", "queue_mean", "queue_p99", "ttft_mean",
                    "ttft_p99")


ROW_REM = 2.1875  # st.dataframe's row height (the header row too): 35 px, 44 px under presentation mode's 20-px rem


def table_height(num_rows: int, style: ChartStyle, max_px: int = 800) -> int:
    """Pixels for an st.dataframe that shows ``num_rows`` rows and its header with no blank space below, up to
    ``max_px`` (then it scrolls; both grow with presentation mode's larger text)."""
    rem_px = style.root_font_px
    row_px, scale = math.ceil(ROW_REM * rem_px), rem_px / ChartStyle().root_font_px
    return min(row_px * (num_rows + 1) + 3, int(max_px * scale))


def show_metrics(summaries: dict[str, dict], style: ChartStyle, other_columns: Sequence[str] = (),
                 latency: bool = True) -> None:
    """The metrics table, one column per policy, latencies in both steps and ms, then ``other_columns``."""
    keys = [(key, unit) for unit in ("steps", "ms") for key in _LATENCY_COLUMNS] if latency else []
    rows = [metric_row(summaries, key, unit) for key, unit in [*keys, *((key, "steps") for key in other_columns)]]
    # (built as rows of text in one go: a frame per unit, joined and transposed, cost ~6 ms a rerun)
    table = pd.DataFrame([_row_cells(values) for _, values in rows], columns=list(summaries),
                         index=pd.Index([header for header, _ in rows], name="metric"))
    # The cells are formatted text ("1,100", "—"): align them right, as numbers are in every other table.
    right = {str(c): st.column_config.TextColumn(alignment="right") for c in table.columns}
    st.dataframe(table, column_config=right, height=table_height(len(table), style))


def _row_cells(row: Sequence[Any]) -> list[str]:
    """One metric's cells for reading: thousands separators, one decimal in every cell of a row where any has one
    ("6,326.0" beside "6,320.2", not "6,326"), a dash for no value (a latency when no request was served)."""
    def missing(value: Any) -> bool:
        return value is None or value is pd.NA or (isinstance(value, float) and not np.isfinite(value))

    decimal = any(isinstance(v, float) and not missing(v) and not v.is_integer() for v in row)
    return ["—" if missing(v) else f"{v:,.1f}" if decimal else f"{int(v):,}" for v in row]


def grid(labels: Sequence[str], draw: Callable[[str], None], columns: int = 2) -> None:
    """Side-by-side comparison: one cell per label, ``columns`` per row, drawn by ``draw(label)``."""
    for start in range(0, len(labels), columns):
        cols = st.columns(columns)
        for col, label in zip(cols, labels[start : start + columns], strict=False):
            with col:
                draw(label)


def run_grid(runs: Sequence[Any], build: Callable[[Any], go.Figure], name: str, style: ChartStyle, x_unit: str,
             columns: int = 2) -> None:
    """One chart per run (``build(run)``, each run with a ``label``), side by side, each with the step player's
    cursor on that run's steps; saved as ``<name>-<label>``."""
    by_label = {run.label: run for run in runs}

    def draw(label: str) -> None:
        show_chart(build(by_label[label]), f"{name}-{label}", style, cursor_runs=[label], x_unit=x_unit)

    grid(list(by_label), draw, columns=columns)


def pick_one(key: str, labels: Sequence[str], draw: Callable[[str], None], what: str = "Policy",
             help: str = "Which run's chart to draw.", param: str | None = None) -> None:
    """One run at a time, full width, picked with a row of buttons: switching reruns only this section (a
    fragment); the pick is kept in the session under ``key`` and in the URL as ``param`` (default: the key's last
    part, e.g. ``?gantt_policy=VTC``; absent for the first label), so a copied link shows the same chart."""
    param = param or key.rsplit(".", 1)[-1]
    if st.session_state.get(NOTES_EXPORT):  # the course notes: every choice's chart, one after another
        for label in labels:
            draw(label)
        return

    @st.fragment
    def _picked() -> None:
        if st.session_state.get(key) not in labels:
            linked = st.query_params.get(param)
            if linked is not None and linked not in labels:
                st.warning(f"The link's {what.lower()} {as_code(linked, 40)} is not one of this chart's "
                           f"({plain(', '.join(labels))}); showing {plain(labels[0])}.", icon=":material/warning:")
            st.session_state[key] = linked if linked in labels else labels[0]
        picked = st.segmented_control(what, list(labels), key=key, help=help, format_func=plain) or labels[0]
        set_param(param, None if picked == labels[0] else picked)
        draw(picked)

    _picked()


def guarded(fn: Callable[[], Any], on_stop: Callable[[], None] | None = None) -> Any:
    """Run ``fn``; turn a bad scenario or a run that cannot finish into a clear message instead of a trace (and
    call ``on_stop`` before the page stops there)."""
    try:
        return fn()
    except ScenarioError as e:
        st.error(f"**This scenario is not valid:** {plain(str(e), 600)}", icon=":material/block:")
    except StepLimitError as e:  # (max_steps is no setting here: the engine's "raise max_steps" would not help)
        st.error(f"**The simulation cannot finish:** it stopped after {e.max_steps:,} engine steps with "
                 f"{e.num_unfinished:,} of {e.num_requests:,} requests unfinished. Give the engine less to do (fewer "
                 f"requests, a lower arrival rate, shorter answers) or more room (a larger KV pool, more batch "
                 f"slots), or run the scenario with `python -m sim run`, where max_steps can be raised.",
                 icon=":material/block:")
    except SimulationError as e:
        st.error(f"**The simulation cannot finish:** {plain(str(e), 600)}", icon=":material/block:")
    except ValueError as e:
        st.error(f"**Invalid setting:** {plain(str(e), 600)}", icon=":material/block:")
    if on_stop is not None:
        on_stop()
    st.stop()


def show_table(table: pd.DataFrame, style: ChartStyle, *, index: bool = False) -> None:
    """A plain frame of numbers, shown the way a reader expects: thousands separators, no float noise
    (4,081 and 0.745, not 4081.0 and 0.7450000001). ``index``: show the frame's index as the first column."""
    numeric = {str(c): st.column_config.NumberColumn(format="localized") for c in table.columns
               if pd.api.types.is_numeric_dtype(table[c])}
    st.dataframe(table, hide_index=not index, column_config=numeric, height=table_height(len(table), style))
