"""Figures to files with plotly's own export: SVG and PNG by kaleido, which drives the system's Chromium (found
through kaleido's ``BROWSER_PATH`` setting; nothing is downloaded, it works offline), and interactive HTML that
loads plotly.js from a file beside it.

Plotly draws a figure with random ids (the SVG's clip paths and patterns, each trace's class), so two exports of
one figure would differ: every trace gets a fixed ``uid`` before it is drawn, and the figure's own id in the SVG is
replaced by one made from the chart's name (a deterministic post-processing step; unique per chart, so several
SVGs inlined in one HTML page keep their clip paths apart).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
import re
import shutil
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import plotly.io as pio

CHROMIUM = "/usr/bin/chromium"  # Debian's (the browser tests use it too)
TABS = 2  # Chromium tabs drawing at once (a 2-core machine: the page runs take the other core meanwhile)
PNG_SCALE = 3  # print resolution: 3 pixels for each of the page's
RENDER_TIMEOUT_S = 120  # one figure (kaleido's default is 90 s: a busy machine's first figure can take ~20 s)

INSTALL_HINT = ("install Debian's Chromium with `apt-get install -y --no-install-recommends chromium` (as root), or "
                "set BROWSER_PATH to a Chromium or Chrome binary; do not run kaleido's or plotly's get_chrome, which "
                "downloads a browser")


class BrowserMissing(RuntimeError):
    """No Chromium to draw with (the message says where it looked and how to install one)."""


class RenderError(RuntimeError):
    """Chromium started but could not draw a figure."""


def find_chromium() -> str:
    """The Chromium kaleido will drive: ``BROWSER_PATH`` if set, else Debian's ``/usr/bin/chromium`` (or a
    ``chromium`` on the PATH), which is then put in ``BROWSER_PATH`` for kaleido. BrowserMissing if there is none."""
    if os.environ.get("BROWSER_PATH"):
        path = os.environ["BROWSER_PATH"]
        if not _executable(path):
            raise BrowserMissing(f"BROWSER_PATH is {path}, which is not an executable file: {INSTALL_HINT}.")
        return path
    path = CHROMIUM if _executable(CHROMIUM) else shutil.which("chromium")
    if path is None:
        raise BrowserMissing(f"the SVG and PNG figures are drawn by Chromium (through kaleido), and there is none "
                             f"at {CHROMIUM} or on the PATH: {INSTALL_HINT}.")
    os.environ["BROWSER_PATH"] = path
    return path


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def prepared(figure: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``figure`` whose traces have fixed uids (plotly.js names each trace's SVG group after its uid, a
    random one when it has none)."""
    out = {**figure, "data": [dict(trace) for trace in figure.get("data", [])]}
    for i, trace in enumerate(out["data"]):
        trace.setdefault("uid", f"t{i}")
    return out


_FIGURE_ID = re.compile(r'<defs id="defs-([0-9a-f]+)"')


def stable_svg(svg: bytes, name: str) -> bytes:
    """``svg`` with the figure id plotly drew it with (random) replaced by one made from ``name``, wherever it names
    a definition: ``defs-ID``, ``topdefs-ID``, ``clipID...``, ``legendID``, pattern ``pID-...``."""
    text = svg.decode("utf-8")
    found = _FIGURE_ID.search(text)
    if found is None:
        return svg
    uid, fixed = found.group(1), hashlib.sha256(name.encode()).hexdigest()[:8]
    text = re.sub(rf'(defs-|clip|legend|["#]p){uid}', lambda m: m.group(1) + fixed, text)
    return text.encode("utf-8")


class Renderer:
    """One Chromium (``TABS`` tabs) drawing figures on its own thread's event loop, so the page runs go on in the
    caller's thread meanwhile. ``with Renderer() as r: r.submit(figure, "svg", (640, 480)).result()``."""

    def __init__(self, tabs: int = TABS) -> None:
        self.tabs = tabs
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="notes-chromium", daemon=True)
        self._started: Future[Any] = Future()

    def __enter__(self) -> Renderer:
        """Start Chromium, in the background: the first figure waits for it, the caller's page runs need not."""
        import kaleido  # (imported when figures are drawn: the rest of the notes never needs it)

        find_chromium()
        self._thread.start()
        self._started = asyncio.run_coroutine_threadsafe(self._start(kaleido), self._loop)
        return self

    async def _start(self, kaleido: Any) -> Any:
        from choreographer.errors import BrowserFailedError, ChromeNotFoundError

        try:
            k = kaleido.Kaleido(n=self.tabs, timeout=RENDER_TIMEOUT_S, mathjax=False)
            await k.open()
        except ChromeNotFoundError as e:
            raise BrowserMissing(f"kaleido found no browser: {INSTALL_HINT}.") from e
        except (BrowserFailedError, OSError) as e:
            raise BrowserMissing(f"Chromium at {os.environ.get('BROWSER_PATH')} did not start ({e}): "
                                 f"{INSTALL_HINT}.") from e
        return k

    def submit(self, figure: dict[str, Any], fmt: str, size: tuple[int, int]) -> Future[bytes]:
        """Draw ``figure`` (already ``prepared``) as ``fmt`` ("svg" or "png", 3x) at ``size`` (width, height px)."""
        opts = {"format": fmt, "width": size[0], "height": size[1], "scale": PNG_SCALE if fmt == "png" else 1}
        return asyncio.run_coroutine_threadsafe(self._draw(figure, opts), self._loop)

    async def _draw(self, figure: dict[str, Any], opts: dict[str, Any]) -> bytes:
        k = await asyncio.wrap_future(self._started)  # (BrowserMissing if Chromium did not start)
        try:
            return await k.calc_fig(figure, opts=opts)
        except Exception as e:  # (kaleido's own errors, a timeout, a closed browser)
            title = figure.get("layout", {}).get("title", {}).get("text", "")
            raise RenderError(f"Chromium could not draw the figure {title!r} as {opts['format']}: {e}") from e

    def __exit__(self, *exc: object) -> None:
        try:
            k = self._started.result(timeout=RENDER_TIMEOUT_S)
            asyncio.run_coroutine_threadsafe(k.close(), self._loop).result(timeout=30)
        except Exception:  # noqa: S110 (closing: the browser did not start, or is gone already)
            pass
        self._stop()

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()


def write_html(figure: dict[str, Any], path: Path, name: str, config: dict[str, Any]) -> None:
    """The interactive figure as ``path`` (HTML), loading plotly.js from ``plotly.min.js`` beside it (written there
    once, from plotly's own copy), with a fixed element id so the file is the same on every export."""
    div_id = "figure-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    pio.write_html(copy.deepcopy(figure), str(path), config=config, include_plotlyjs="directory", full_html=True,
                   div_id=div_id, validate=False)
