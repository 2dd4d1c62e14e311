"""The step player's speed in Chromium on a server that may be busy: steps played per second on each lesson.

    .venv/bin/python benchmarks/player_under_load.py --url http://127.0.0.1:8501 [--seconds 10] [--rounds 2]

Run it while ``benchmarks/class_load.py`` keeps a class of students on the same server (or on replicas behind
nginx) to see whether playing still feels like an animation (issue 20: at least 10 steps per second at the default
speed, with 30 students connected). For each lesson's default preset it opens the free page in headless Chromium
(Debian's /usr/bin/chromium), scrolls the player into view, presses play and reads the step it shows after
``--seconds`` s; the player animates in the browser and asks the server only for its detail (the queues' order)
and for the next window of steps, so a busy server shows as pauses ("Loading this part of the run…"). It prints
steps per second for each round and each lesson, and the time until the player's first step was drawn. Loopback
only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.helpers import open_app  # noqa: E402

LESSONS = ("Queueing", "Fairness", "Cancellation", "Preemption", "Token_budget")  # page names
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
CHROMIUM = "/usr/bin/chromium"
DEFAULT_SPEED_STEPS_S = 10  # the player's speed until the reader picks another (ui/player.js)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the app's base URL (loopback only)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to play on each lesson (1 to 60)")
    parser.add_argument("--rounds", type=int, default=2, help="times through the lessons (1 to 10)")
    args = parser.parse_args(argv)
    if urlsplit(args.url).hostname not in LOOPBACK_HOSTS:
        parser.error(f"--url: must be a loopback address ({', '.join(LOOPBACK_HOSTS)}), got {args.url!r}")
    if not 1 <= args.seconds <= 60:
        parser.error(f"--seconds: must be from 1 to 60, got {args.seconds:g}")
    if not 1 <= args.rounds <= 10:
        parser.error(f"--rounds: must be from 1 to 10, got {args.rounds}")
    return args


def _step(player) -> int:
    return int(player.locator(".runs").get_attribute("data-step"))


def play(page, base_url: str, lesson: str, seconds: float) -> tuple[float, float, float]:
    """(steps per second while playing, seconds played: ``seconds`` or less if the run would end first, seconds
    from opening the page to the player's first step drawn)."""
    t0 = time.perf_counter()
    open_app(page, f"{base_url}/{lesson}", timeout_ms=120_000)
    player = page.locator('[data-testid="step-player"]')
    player.scroll_into_view_if_needed()
    player.locator(".runs").wait_for(timeout=60_000)
    shown_s = time.perf_counter() - t0
    start = _step(player)
    last = int(player.locator(".of").first.inner_text().replace("of", "").replace(",", "").strip())
    # (stop before the run's end at the default 10 steps/s: a short run, Token budget's 61 steps, would end first)
    seconds = max(1.0, min(seconds, 0.8 * (last - start) / DEFAULT_SPEED_STEPS_S))
    # Pressed and read in the page, on the page's clock (Playwright's own round trips would count as playing time).
    began_ms = player.evaluate(_PRESS_PLAY_JS)
    page.wait_for_timeout(seconds * 1000)
    played, ended_ms = player.evaluate(_READ_STEP_JS)
    player.evaluate(_PRESS_PLAY_JS)
    elapsed = (ended_ms - began_ms) / 1000
    return (played - start) / elapsed, elapsed, shown_s


_PRESS_PLAY_JS = """(player) => {
  player.querySelector('[data-testid="player-play"]').click();
  return performance.now();
}"""
_READ_STEP_JS = """(player) => [Number(player.querySelector('.runs').dataset.step), performance.now()]"""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            for r in range(args.rounds):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                for lesson in LESSONS:
                    rate, played_s, shown_s = play(page, args.url, lesson, args.seconds)
                    print(f"round {r + 1} {lesson:<13} {rate:5.1f} steps/s over {played_s:.1f} s "
                          f"(player drawn {shown_s:.1f} s after opening)", flush=True)
                page.close()
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
