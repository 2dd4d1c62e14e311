"""Regenerate the README's screenshot, docs/queueing-lesson.png: the Queueing lesson on the article's preset.

    .venv/bin/python docs/make_screenshot.py

Starts the app on a free loopback port, opens the lesson in Debian's Chromium (/usr/bin/chromium, or
SCHEDLAB_CHROMIUM) in a 1,400 x 1,494 CSS px window (the two policies side by side), waits for the run to finish
and saves what the window shows, scaled to 1,040 px wide.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

logging.disable(logging.WARNING)  # importing the helpers' ui module outside a Streamlit run warns: expected
from tests.browser.helpers import assert_no_exception, open_app  # noqa: E402

logging.disable(logging.NOTSET)

OUT = ROOT / "docs" / "queueing-lesson.png"
VIEWPORT = {"width": 1400, "height": 1494}
WIDTH_PX = 1040  # of the PNG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    from playwright.sync_api import sync_playwright

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/_stcore/health", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    print("error: the app did not start", file=sys.stderr)
                    return 1
                time.sleep(0.3)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("SCHEDLAB_CHROMIUM", "/usr/bin/chromium"),
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport=VIEWPORT, device_scale_factor=WIDTH_PX / VIEWPORT["width"])
            open_app(page, f"{base}/Queueing?preset=article_hol", timeout_ms=120_000)
            assert_no_exception(page)
            page.screenshot(path=str(OUT))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
