"""Browser harness: a real Streamlit server on loopback, driven by Debian's headless Chromium via Playwright.

Fixtures:
  app_server (session)  base URL of `streamlit run app.py` (or $SCHEDLAB_APP_SCRIPT) run from the repo root
  browser    (session)  Playwright Chromium from /usr/bin/chromium (or $SCHEDLAB_CHROMIUM)
  page       (function) a fresh context, 1400x1000 CSS px at scale 1; a failed test leaves FAILED-<test>.png
Helpers (wait_for_app, assert_no_exception, screenshot, open_app) live in tests/browser/helpers.py.

Each test under tests/browser/ gets the `browser` marker, so `pytest -m "not browser"` is the fast loop.
Without Playwright or Chromium these tests skip locally and fail in CI (CI=true).
NOTE: never `playwright install`: it downloads a browser build and fails on these offline machines.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.helpers import screenshot

REPO_ROOT = Path(__file__).resolve().parents[2]
BROWSER_TESTS_DIR = Path(__file__).resolve().parent
APP_SCRIPT = os.environ.get("SCHEDLAB_APP_SCRIPT", "app.py")  # relative to the repo root, or absolute
CHROMIUM = os.environ.get("SCHEDLAB_CHROMIUM", "/usr/bin/chromium")
# Without the networking flags Chromium keeps trying to reach Google's services and hangs on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 60
SERVER_LOG_TAIL_LINES = 40

_REPORTS = pytest.StashKey[dict]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item, not only this folder's: filter by path.
    for item in items:
        if BROWSER_TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _unavailable(reason: str) -> None:
    """In CI a missing browser is a broken set-up (fail); on a developer's machine, skip with the fix."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log_tail(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-SERVER_LOG_TAIL_LINES:]) or "(no output)"


def _is_healthy(base_url: str) -> bool:
    # An opener without proxies: a proxy set in the environment must not see loopback traffic.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{base_url}/_stcore/health", timeout=2) as response:
            return response.status == 200 and response.read().strip() == b"ok"
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start `streamlit run` on a free loopback port; yield its base URL, e.g. "http://127.0.0.1:41234"."""
    script = Path(APP_SCRIPT)
    if not script.is_absolute():
        script = REPO_ROOT / script
    if not script.is_file():
        pytest.fail(f"Streamlit app script not found: {script}", pytrace=False)

    port = _free_loopback_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
    ]  # fmt: skip
    log_path = tmp_path_factory.mktemp("streamlit") / "server.log"
    with log_path.open("wb") as log:  # a file, not a pipe: a full pipe would block the server
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _is_healthy(base_url):
            if process.poll() is not None:
                pytest.fail(
                    f"Streamlit exited with code {process.returncode} before serving {base_url}.\n"
                    f"Server output (last lines):\n{_log_tail(log_path)}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"Streamlit did not answer {base_url}/_stcore/health within {SERVER_START_TIMEOUT_S} s.\n"
                    f"Server output (last lines):\n{_log_tail(log_path)}",
                    pytrace=False,
                )
            time.sleep(0.25)
        yield base_url
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole session (contexts keep tests apart)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"Python package playwright not importable ({exc}); pip install -r requirements-dev.txt")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(
            f"Chromium not found at {CHROMIUM}: install Debian's with "
            "`apt-get install -y --no-install-recommends chromium` or set SCHEDLAB_CHROMIUM "
            "(never `playwright install`: it downloads a browser and fails offline)"
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request: pytest.FixtureRequest):
    """A fresh page in its own context; on a failing test, saves screenshots/FAILED-<test>.png."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    new_page = context.new_page()
    new_page.set_default_timeout(30_000)
    yield new_page
    call_report = request.node.stash.get(_REPORTS, {}).get("call")
    if call_report is not None and call_report.failed:
        try:
            screenshot(new_page, f"FAILED-{request.node.name}")
        except Exception as exc:  # the test's own failure matters more than a missing screenshot
            print(f"could not save failure screenshot: {exc}", file=sys.stderr)
    context.close()
