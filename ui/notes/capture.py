"""What a lesson page shows for one preset, read from the page itself: the page runs headless in Streamlit's AppTest
(the free page, ``?preset=KEY``, the print theme unless asked otherwise), and every plotly chart's figure, its
section and the page's words around it, the "what to notice" sentences, the headline cards, the metrics table and
the runs' scenarios are taken from what it drew. The notes then show the page's own charts and numbers: nothing
here runs the simulator or words a number itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import lessons
from sim.presets import Preset
from sim.scenario import Scenario
from ui import page, sweeps
from ui.wording import file_slug

APP = Path(__file__).resolve().parents[2] / "app.py"  # AppTest starts where a browser does: the home page's script
PAGE_TIMEOUT_S = 300  # one page's run (a sweep on a busy machine takes tens of seconds)
NOTICE_HEADING = "**What to notice**"  # ui.page.notice's box starts with it


class PageError(RuntimeError):
    """The page showed an error, raised an exception or drew no run (the message says which)."""


@dataclass(frozen=True)
class Chart:
    """One chart as the page drew it. ``name``: the camera button's file name less ``scheduler-lab-<lesson>-``
    (``article_hol-gantt-FCFS``); ``section``: the subheader above it; ``context``: the page's captions between that
    subheader and the chart (what the page says about it)."""

    name: str
    figure: dict[str, Any]
    section: str
    context: tuple[str, ...]

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in px as the figure's layout sets them (the print theme fixes both)."""
        layout = self.figure["layout"]
        return int(layout.get("width") or 0), int(layout.get("height") or 0)


@dataclass(frozen=True)
class Card:
    label: str
    value: str
    caption: str = ""


@dataclass(frozen=True)
class Capture:
    """Everything the notes take from one view of a lesson page."""

    lesson: lessons.Lesson
    preset: Preset
    charts: list[Chart]
    notices: list[str]  # every "what to notice" sentence, in page order (the box, "more", a section's own box)
    cards: list[Card]  # the headline numbers
    tables: list[pd.DataFrame]  # the Metrics section's tables, as shown
    runs: list[tuple[str, Scenario]]  # (label, scenario) of each run compared, as the page's downloads give them
    warnings: list[str] = field(default_factory=list)  # what the page warned about (e.g. requests it rejected)
    query: dict[str, str] = field(default_factory=dict)  # the page's URL settings for this view


def page_query(preset: Preset, theme: str = "print") -> dict[str, str]:
    """The URL that opens a lesson's free page on ``preset`` in ``theme``."""
    query = {"mode": "free", "preset": preset.key}
    if theme != "screen":
        query["theme"] = theme
    return query


def capture(lesson: lessons.Lesson, preset: Preset, theme: str = "print") -> Capture:
    """Run ``lesson``'s page on ``preset`` and read what it shows; a PageError if it shows an error."""
    from streamlit.testing.v1 import AppTest  # (Streamlit's testing API: imported when a page is run)

    quiet_streamlit()

    query = page_query(preset, theme)
    at = AppTest.from_file(str(APP), default_timeout=PAGE_TIMEOUT_S)
    at.switch_page(lesson.page)
    for key, value in query.items():
        at.query_params[key] = value
    at.session_state[page.NOTES_EXPORT] = True
    with sweeps.without_time_limit():  # (every sweep point in this one run: AppTest polls none)
        at.run()
    where = f"{lesson.id} page, preset {preset.key}"
    if at.exception:  # (Streamlit's log above has the traceback)
        raise PageError(f"the {where} raised an exception: {at.exception[0].value}")
    if at.error:
        raise PageError(f"the {where} shows an error: {at.error[0].value}")
    try:
        runs = at.session_state[page.NOTES_RUNS]
    except KeyError:
        runs = None
    if not runs:
        raise PageError(f"the {where} drew no run to take notes of")
    prefix = file_slug("scheduler-lab", lesson.id) + "-"
    charts: list[Chart] = []
    notices: list[str] = []
    cards: list[Card] = []
    tables: list[pd.DataFrame] = []
    section: list[str] = [""]
    context: list[str] = []
    about: list[str | None] = [None]  # the kind of chart the captions in ``context`` are about (the first after them)
    slugs = [file_slug(label) for label, _ in runs]

    def visit(node: Any, in_columns: bool) -> None:
        kind = getattr(node, "type", "")
        if kind == "subheader":
            section[0], context[:], about[0] = node.value, [], None
        elif kind == "caption" and not in_columns and section[0]:
            if about[0] is not None:
                context[:], about[0] = [], None
            context.append(node.value)
        elif kind == "plotly_chart":
            config = json.loads(node.proto.config)
            name = config["toImageButtonOptions"]["filename"].removeprefix(prefix)
            family = _family(name, preset.key, slugs)
            if about[0] is None:
                about[0] = family
            said = tuple(context) if family == about[0] else ()
            charts.append(Chart(name, json.loads(node.proto.spec), section[0], said))
        elif kind == "info":
            notices.extend(_sentences(node.value))
        elif kind == "dataframe" and section[0] == "Metrics":
            tables.append(node.value)
        elif kind == "column":
            _cards(node, cards)
            in_columns = True
        for key in sorted(getattr(node, "children", {}) or {}):
            visit(node.children[key], in_columns)

    visit(at.main, False)
    return Capture(lesson, preset, charts, notices, cards, tables, list(runs),
                   [w.value for w in at.warning], query)


def _family(name: str, preset_key: str, run_slugs: list[str]) -> str:
    """What kind of chart a name is, whichever run it draws: "article_hol-kv-FCFS" -> "kv". A page's caption
    above a grid of charts is about the charts of that kind (the kind after it), not the ones further down."""
    stem = name.removeprefix(f"{preset_key}-")
    for slug in sorted(run_slugs, key=len, reverse=True):
        if slug and stem.endswith(f"-{slug}"):
            return stem[: -len(slug) - 1]
    return stem


def _sentences(text: str) -> list[str]:
    """The sentences of a "what to notice" box (ui.page.notice: a heading, then one bullet each)."""
    body = text.removeprefix(NOTICE_HEADING).strip()
    return [line[2:].strip() for line in body.splitlines() if line.startswith("- ")]


def _cards(column: Any, cards: list[Card]) -> None:
    """A headline card: a column holding a metric and, under it, its caption (ui.page.cards)."""
    children = [column.children[k] for k in sorted(column.children)]
    metric = next((c for c in children if getattr(c, "type", "") == "metric"), None)
    if metric is None:
        return
    caption = next((c.value for c in children if getattr(c, "type", "") == "caption"), "")
    cards.append(Card(metric.label, metric.value, caption))


def quiet_streamlit() -> None:
    """Streamlit warns at every import and run without a server ("No runtime found", "missing ScriptRunContext"):
    true and expected here, so it logs errors only. (Its config option, not only its loggers: each AppTest run
    reads the config again and sets the loggers' level from it.)"""
    from streamlit import config, logger

    config.set_option("logger.level", "error")
    logger.set_log_level("error")
