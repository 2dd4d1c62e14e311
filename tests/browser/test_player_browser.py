"""The step player on every lesson, in Chromium: it steps, plays, jumps, keeps the compared columns on one step,
moves the charts' cursors, opens where a link says and puts the step it pauses on in the link. Prints the time from
a step button's press to the new step painted (measured in the page; the test's own round trips added to it are
printed beside), and the bytes a page load receives (figures, not assertions)."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser.helpers import assert_no_exception, open_app, screenshot

# lesson -> (a preset with two or more runs, how many runs it compares)
LESSONS = {"Queueing": ("article_hol", 2), "Fairness": ("article_fairness", 3),
           "Cancellation": ("article_abandon", 2), "Preemption": ("toy_pool", 2),
           "Token_budget": ("long_prompt", 2)}


def _player(page):
    return page.locator('[data-testid="step-player"]')


def _step(page) -> int:
    return int(_player(page).locator(".runs").get_attribute("data-step"))


def _wait_step(page, predicate, timeout_s: float = 15) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        step = _step(page)
        if predicate(step) or time.monotonic() > deadline:
            return step
        page.wait_for_timeout(50)


def _column_steps(page) -> list[int]:
    """The step each run's column explains ("Step 123 · ...")."""
    texts = _player(page).locator('[data-testid="player-when"]').all_text_contents()
    return [int(re.match(r"Step ([\d,]+)", t).group(1).replace(",", "")) for t in texts]


def _cursors(page) -> list[tuple[str, float]]:
    return [(c.get_attribute("data-run"), float(c.get_attribute("data-x")))
            for c in page.locator(".sl-cursor").all()]


def _settled_cursors(page, timeout_s: float = 30) -> list[tuple[str, float]]:
    """The cursors once every chart has drawn its own: the same count on reads 0.5 s apart (charts draw one by one
    after the player appears, so a read too early misses the last ones)."""
    deadline = time.monotonic() + timeout_s
    previous = _cursors(page)
    while True:
        page.wait_for_timeout(500)
        current = _cursors(page)
        if len(current) == len(previous) or time.monotonic() > deadline:
            return current
        previous = current


# In the page: press "forward 1", wait for the player to show another step, then for the frame after it to be
# painted; the milliseconds from the press (a re-mount may replace the player's box meanwhile: read the new one).
_PRESS_JS = """async (box) => {
  const find = (root) => root.querySelector('[data-testid="step-player"]') || [...root.querySelectorAll('*')]
    .map((e) => e.shadowRoot && find(e.shadowRoot)).find(Boolean);
  let now = box;
  const shown = () => {
    if (!now.isConnected) now = find(document) || now;  // (a re-mount: the player's box is a new one)
    return now.querySelector('.runs').getAttribute('data-step');
  };
  const before = shown(), t0 = performance.now();
  box.querySelector('[data-testid="player-fwd"]').click();
  while (shown() === before && performance.now() - t0 < 10000) await new Promise((r) => setTimeout(r, 1));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""


def _open(page, base: str, lesson: str, query: str = "") -> int:
    received = [0]
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.__setitem__(
        0, received[0] + len(f))))
    preset, _ = LESSONS[lesson]
    open_app(page, f"{base}/{lesson}?preset={preset}{query}", timeout_ms=120_000)
    _player(page).wait_for(timeout=60_000)
    assert_no_exception(page)
    return received[0]


@pytest.mark.parametrize("lesson", list(LESSONS))
def test_the_player_steps_plays_and_drives_every_column_and_cursor(app_server, page, lesson):
    received = _open(page, app_server, lesson)
    _player(page).scroll_into_view_if_needed()
    start = _step(page)
    num_runs = LESSONS[lesson][1]
    assert _column_steps(page) == [start] * num_runs  # one step for every compared run
    cursors_before = _settled_cursors(page)
    assert len({run for run, _ in cursors_before}) == num_runs  # each run's charts carry a cursor
    why_before = _player(page).locator('[data-testid="player-why"]').all_text_contents()

    times, trips = [], []
    for k in range(1, 4):
        t0 = time.perf_counter()
        times.append(_player(page).evaluate(_PRESS_JS))
        assert _wait_step(page, lambda s, k=k: s == start + k) == start + k
        trips.append(time.perf_counter() - t0)
    assert _column_steps(page) == [start + 3] * num_runs
    after = _settled_cursors(page)
    assert len(after) == len(cursors_before)
    assert all(b[0] == a[0] and b[1] != a[1] for b, a in zip(cursors_before, after, strict=True))  # every one moved
    print(f"\n{lesson}: step button press to the new step painted: {', '.join(f'{t:.0f} ms' for t in times)} "
          f"(with the test's own round trips: {', '.join(f'{t * 1000:.0f} ms' for t in trips)}); "
          f"page load received {received / 1e6:.2f} MB over the websocket")

    # The next decision: the explained decisions are that step's.
    _player(page).locator('[data-testid="player-next-event"]').click()
    jumped = _wait_step(page, lambda s: s > start + 3)
    assert jumped > start + 3
    assert _player(page).locator('[data-testid="player-why"]').all_text_contents() != why_before

    # Play for 2 s: at least 15 steps at the default 10 steps/s.
    _player(page).locator('[data-testid="player-play"]').click()
    page.wait_for_timeout(2000)
    _player(page).locator('[data-testid="player-play"]').click()
    played = _step(page)
    assert played - jumped >= 15
    assert set(_column_steps(page)) == {played}  # (a run that has ended by then says so instead)
    # Paused: the step is put in the link (the player tells the server once it stops).
    page.wait_for_function("(s) => new URLSearchParams(location.search).get('step') === String(s)", arg=played,
                           timeout=15_000)
    if lesson == "Preemption":  # each run's pool, block by block
        assert _player(page).locator('[data-testid="player-block-map"] canvas').count() == num_runs
    assert_no_exception(page)
    screenshot(page, f"player-{lesson}")


@pytest.mark.parametrize("lesson", list(LESSONS))
def test_a_link_with_a_step_opens_the_player_there(app_server, page, lesson):
    _open(page, app_server, lesson, "&step=57")
    assert _step(page) == 57
    assert _column_steps(page) == [57] * LESSONS[lesson][1]


def test_the_keyboard_steps_and_plays(app_server, page):
    _open(page, app_server, "Queueing", "&step=10")
    page.locator("h1").first.click()  # focus on the page, not on a widget
    page.keyboard.press("ArrowRight")
    assert _wait_step(page, lambda s: s == 11) == 11
    page.keyboard.press("Shift+ArrowLeft")
    assert _wait_step(page, lambda s: s == 1) == 1
    page.keyboard.press(" ")
    page.wait_for_timeout(1000)
    page.keyboard.press(" ")
    assert _step(page) >= 6


def test_a_step_pressed_while_playing_plays_on_from_there(app_server, page):
    _open(page, app_server, "Queueing", "&step=100")
    play = _player(page).locator('[data-testid="player-play"]')
    play.click()
    page.wait_for_timeout(1000)
    _player(page).locator('[data-testid="player-fwd10"]').click()
    pressed_at = _step(page)  # (the +10 landed, or playing moved on past it already)
    page.wait_for_timeout(1000)
    assert "Pause" in play.inner_text()  # still playing
    assert _step(page) >= pressed_at + 5  # on from there, not back to where the clock alone would be
    play.click()


def test_stepping_past_the_window_fetches_the_next_one(app_server, page):
    """The article's run is 1,200 steps; a window holds 1,000: from step 995, +10 needs the next window."""
    _open(page, app_server, "Queueing", "&step=995")
    assert _step(page) == 995
    _player(page).locator('[data-testid="player-fwd10"]').click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('step') === '1005'", timeout=30_000)
    deadline = time.monotonic() + 30
    while _column_steps(page) != [1005, 1005] and time.monotonic() < deadline:  # until its window has come
        page.wait_for_timeout(100)
    assert _column_steps(page) == [1005, 1005]
    assert "short1" in " ".join(_player(page).locator('[data-testid="player-batch"]').all_text_contents())


_CURSOR_SPANS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter((gd) => gd.layout?.meta?.cursor)
  .map((gd) => ({title: gd.layout.title?.text || '', plot_top: gd._fullLayout._size.t,
                 plot_height: gd._fullLayout._size.h,
                 cursors: [...gd.querySelectorAll('.sl-cursor')].map((c) => ({run: c.dataset.run,
                   top: parseFloat(c.style.top), height: parseFloat(c.style.height), tag: c.textContent}))}))"""


def test_a_cursor_crosses_stacked_panels_and_sits_on_its_own_runs_panel(app_server, page):
    """Cancellation: the queue chart's two panels share one x axis, so its cursor crosses both; the KV chart has a
    panel per server, so each server's cursor is on its own panel. On an axis of steps the cursors coincide: no
    names on them (they covered the legend)."""
    _open(page, app_server, "Cancellation", "&step=320")
    _player(page).scroll_into_view_if_needed()
    _settled_cursors(page)
    charts = {c["title"].split(" (")[0]: c for c in page.evaluate(_CURSOR_SPANS_JS)}
    queue = charts["Waiting queue and running batch"]
    assert len(queue["cursors"]) == 2
    assert all(c["height"] > 0.9 * queue["plot_height"] and not c["tag"] for c in queue["cursors"])
    kv = charts["KV memory: wanted vs held for nobody"]
    tops = [c["top"] for c in kv["cursors"]]
    assert [c["run"] for c in kv["cursors"]] == ["abort on disconnect", "no abort"]
    assert tops[1] > tops[0] + 0.3 * kv["plot_height"]  # the second server's panel is below the first's
