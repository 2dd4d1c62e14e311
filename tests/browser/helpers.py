"""Helpers for browser tests: wait for a Streamlit rerun to finish, check for exceptions, take screenshots.

Import them in a test module with `from tests.browser.helpers import open_app, wait_for_app, ...`.
Playwright is imported lazily so that collecting the suite never needs it (browser tests skip without it).

Why waiting is subtle: after a widget changes, Streamlit debounces, sends a rerun request, marks the old
elements stale (`data-stale="true"`), runs the script, then drops the stale ones. Until then the page can show
the old chart beside the new one. `wait_for_app` waits until the app is connected, its script state is idle,
the "Running..." status widget is gone, no element is stale, no element is still a grey placeholder while its
code loads (``stSkeleton``: sliders, metrics and charts on a page's first load) and no sweep is still filling in
(ui.sweeps: its fragment polls between reruns), and requires that to hold twice in a row.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lessons import LESSONS
from ui import sweeps

if TYPE_CHECKING:
    from playwright.sync_api import Page

SCREENSHOT_DIR = Path(__file__).resolve().parent / "screenshots"
MAX_SCREENSHOT_HEIGHT_PX = 16_000  # beyond this Chromium's capture gets unreliable; such pages are cut

_NO_SKELETON_JS = """() => document.querySelector('[data-testid="stSkeleton"]') === null"""

# A JS expression: is a sweep still filling in (ui.sweeps' line under it)?
_SWEEP_RUNNING = ("[...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')]"
                  f".some(c => c.textContent.includes({json.dumps(sweeps.RUNNING_TEXT)}))")

# Streamlit's frontend sets these attributes on the stApp root for its own e2e tests. The script state goes
# initial -> running -> notRunning (compilationError on a syntax error, which the page shows as an exception).
_APP_IS_IDLE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return false;
  const script = app.getAttribute('data-test-script-state');
  return app.getAttribute('data-test-connection-state') === 'CONNECTED'
    && (script === 'notRunning' || script === 'compilationError')
    && document.querySelector('[data-testid="stStatusWidget"]') === null
    && document.querySelector('[data-stale="true"]') === null
    && document.querySelector('[data-testid="stSkeleton"]') === null
    && !(SWEEP_RUNNING);
}""".replace("SWEEP_RUNNING", _SWEEP_RUNNING)

SWEEP_RUNNING_JS = f"() => {_SWEEP_RUNNING}"

_APP_STATE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const status = document.querySelector('[data-testid="stStatusWidget"]');
  return {
    has_app: app !== null,
    connection_state: app && app.getAttribute('data-test-connection-state'),
    script_state: app && app.getAttribute('data-test-script-state'),
    status_widget: status && status.innerText,
    num_stale_elements: document.querySelectorAll('[data-stale="true"]').length,
    num_skeletons: document.querySelectorAll('[data-testid="stSkeleton"]').length,
    sweep_running: SWEEP_RUNNING,
  };
}""".replace("SWEEP_RUNNING", _SWEEP_RUNNING)


# How much taller than its box the tallest scrolling element is (CSS px); Streamlit's main area is one.
_HIDDEN_SCROLL_HEIGHT_JS = """() => {
  let hidden = 0;
  for (const el of document.querySelectorAll('*')) {
    if (/(auto|scroll)/.test(getComputedStyle(el).overflowY)) {
      hidden = Math.max(hidden, el.scrollHeight - el.clientHeight);
    }
  }
  return hidden;
}"""


def wait_for_app(page: Page, timeout_ms: float = 30_000, settle_ms: float = 250) -> None:
    """Block until Streamlit has finished the current run (after page load or a widget change).

    `settle_ms` first gives a debounced widget time to send its rerun request, so we do not mistake the idle
    state *before* the rerun for the idle state after it.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    page.wait_for_timeout(settle_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        remaining_ms = max((deadline - time.monotonic()) * 1000, 1)  # 0 would mean "no timeout" to Playwright
        try:
            page.wait_for_function(_APP_IS_IDLE_JS, timeout=remaining_ms, polling=100)
        except PlaywrightTimeoutError:
            raise AssertionError(
                f"Streamlit app still busy after {timeout_ms:.0f} ms: {page.evaluate(_APP_STATE_JS)}"
            ) from None
        page.wait_for_timeout(150)  # idle twice in a row, not a gap between two reruns
        if page.evaluate(_APP_IS_IDLE_JS):
            return


_LESSON_PATHS = tuple(f"/{lesson.url_path}" for lesson in LESSONS)
_VIEW_PARAMS = ("mode=", "guide=", "problem=")


def free_page_url(url: str) -> str:
    """A lesson's URL with ``mode=free`` added unless it names a view itself (``mode``, ``guide``, ``problem``): a
    first visit without settings opens the guided path (ui/guide.py), and the lesson tests address the free page."""
    path, _, query = url.partition("?")
    if not path.endswith(_LESSON_PATHS) or any(p in query for p in _VIEW_PARAMS):
        return url
    return f"{path}?mode=free" + (f"&{query}" if query else "")


def open_app(page: Page, url: str, timeout_ms: float = 60_000, *, first_visit: bool = False) -> Page:
    """Load `url` (the app's base URL, or base URL + "/PageName?query") and wait for its first run. A lesson page
    opens on its free page (``free_page_url``); ``first_visit`` loads ``url`` as it is."""
    page.goto(url if first_visit else free_page_url(url))
    wait_for_app(page, timeout_ms=timeout_ms)
    return page


def assert_no_exception(page: Page) -> None:
    """Fail if the app shows an exception box (st.exception, an uncaught error) or a syntax-error dialog."""
    messages = [box.inner_text() for box in page.locator('[data-testid="stException"]').all()]
    script_state = page.locator('[data-testid="stApp"]').get_attribute("data-test-script-state")
    if script_state == "compilationError":  # shown in a modal "Script execution error", not as stException
        code_blocks = page.locator('[data-testid="stErrorCodeBlock"]').all()
        messages.append("script did not compile:\n" + "\n".join(block.inner_text() for block in code_blocks))
    if messages:
        texts = "\n---\n".join(messages)
        raise AssertionError(f"{len(messages)} Streamlit exception(s) on {page.url}:\n{texts}")


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page PNG as tests/browser/screenshots/<name>.png (gitignored) and return its path.

    Streamlit scrolls inside `stMain`, not the document, so Playwright's `full_page` alone captures only the
    viewport: grow the viewport by the hidden height of the tallest scroller for the shot, then restore it.
    """
    safe_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "screenshot"
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{safe_name}.png"
    viewport = page.viewport_size
    hidden_px = page.evaluate(_HIDDEN_SCROLL_HEIGHT_JS)
    if viewport is not None and hidden_px > 0:
        tall_height = min(viewport["height"] + hidden_px, MAX_SCREENSHOT_HEIGHT_PX)
        page.set_viewport_size({"width": viewport["width"], "height": tall_height})
        page.wait_for_timeout(300)  # let charts and layout react to the resize
        page.wait_for_function(_NO_SKELETON_JS, timeout=10_000, polling=100)
        try:
            page.screenshot(path=str(path), full_page=True)
        finally:
            page.set_viewport_size(viewport)
    else:
        page.screenshot(path=str(path), full_page=True)
    return path


def wait_for_chart_title(page: Page, text: str, timeout_ms: float = 60_000) -> None:
    """Wait until a fresh (not stale) plotly chart has ``text`` in its SVG title (text_content, not inner_text)."""
    page.wait_for_function(
        """(text) => [...document.querySelectorAll('[data-stale="false"] .js-plotly-plot .gtitle')]
             .some(t => t.textContent.includes(text))""",
        arg=text, timeout=timeout_ms, polling=200,
    )
