"""AppTest helpers: run a page the way a browser reaches it (app.py is the entrypoint, then the page), so the
sidebar's page links resolve exactly as on a live server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui import sweeps

ROOT = Path(__file__).resolve().parents[2]


def open_page(page: str | None = None, query: dict[str, str] | None = None, timeout: float = 120,
              settle: bool = True, session: dict[str, object] | None = None) -> AppTest:
    """Run ``page`` (e.g. "pages/1_Queueing.py"; None = the home page) with ``query`` as URL parameters and
    ``session`` in the session state (e.g. an uploaded scenario); then, with ``settle``, until its sweeps are
    complete (what a reader sees a moment later). A lesson opens on its free page (``?mode=free``) unless ``query``
    asks for a view itself (``mode``, ``guide``, ``problem``): a first visit without settings would open the guided
    path (ui/guide.py), which tests/app/test_guide_page.py drives."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    if page:
        at.switch_page(page)
        if page.startswith("pages/") and not {"mode", "guide", "problem"} & set(query or {}):
            query = {"mode": "free", **(query or {})}
    for key, value in (query or {}).items():
        at.query_params[key] = value
    for key, value in (session or {}).items():
        at.session_state[key] = value
    at.run()
    return settle_sweeps(at) if settle else at


SWEEP_RUNNING = sweeps.RUNNING_TEXT  # ui.sweeps' line under a sweep that is still filling in


def sweep_running(at: AppTest) -> bool:
    return any(SWEEP_RUNNING in c.value for c in at.caption)


def settle_sweeps(at: AppTest) -> AppTest:
    """Complete a sweep that is still filling in. In a browser the sweep's fragment polls until it is; AppTest runs
    no fragment by itself, so rerun once with no time limit on the page's own pass over the sweep (it then runs
    every point left, whether or not a prefetch worker helps)."""
    if not sweep_running(at):
        return at
    with sweeps.without_time_limit():
        at.run()
    assert not sweep_running(at), "a sweep was still running after a rerun without a time limit"
    return at


def metric_values(at: AppTest) -> dict[str, str]:
    """Every st.metric on the page: label as a reader reads it (a run's label is escaped by ui.wording.plain) ->
    shown value."""
    return {as_read(m.label): m.value for m in at.metric}


def as_read(markdown: str) -> str:
    """A message's Markdown source as a reader reads it: text from outside escaped by ui.wording.plain (a backslash
    before each special character, a zero-width space after an escaped colon) reads as typed."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u200b", "")


def chart_titles(at: AppTest) -> list[str]:
    """The title of every plotly chart on the page, in page order ('' for a chart without one)."""
    return [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]


def notice_text(at: AppTest) -> str:
    """The "what to notice" box (and any other st.info) as one string."""
    return " ".join(i.value for i in at.info)


def clean_notices(page: str, query: dict[str, str]) -> str:
    """Open ``page`` with ``query``, check it shows no error, and return its notice text."""
    at = open_page(page, query)
    assert_clean(at)
    return notice_text(at)


def assert_clean(at: AppTest) -> None:
    """No exception and no error box on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.fixture
def page_runner():
    return open_page


def player_data(at: AppTest) -> dict:
    """The step player's data as the browser gets it (ui/player.py's component)."""
    players = [e for e in at.get("bidi_component") if e.proto.component_name == "scheduler_lab.step_player"]
    assert len(players) == 1, f"expected one step player, found {len(players)}"
    return json.loads(players[0].proto.bytes)  # (JSON sent as bytes: ui/player.py's component_data)


def chart_cursors(at: AppTest) -> dict[str, dict]:
    """Chart title -> the player's cursor settings of every chart that has one (layout.meta.cursor)."""
    out = {}
    for c in at.get("plotly_chart"):
        layout = json.loads(c.proto.spec)["layout"]
        cursor = layout.get("meta", {}).get("cursor")
        if cursor:
            out[layout.get("title", {}).get("text", "")] = cursor
    return out
