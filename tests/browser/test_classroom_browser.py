"""In the classroom (issue 24), in a real browser: presentation mode and a lesson's settings follow the reader from
page to page, a projector's 1280x720 keeps comparisons two across, and a long sweep shows its progress at once.
Screenshots of every lesson at 1280x720 in presentation mode go to tests/browser/screenshots/classroom-*.png."""

from __future__ import annotations

import pytest

from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app

PROJECTOR = {"width": 1280, "height": 720}
ROOT_FONT_JS = "() => getComputedStyle(document.documentElement).fontSize"
CHART_BOXES_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
    .map(e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width}; })"""


def _slider(page, label: str):
    return page.locator(f'input[type=range][aria-label="{label}"]')


def _follow(page, link) -> None:
    link.click()
    page.wait_for_url(lambda url: True)
    wait_for_app(page, timeout_ms=90_000)


def test_presentation_mode_on_at_home_is_still_on_at_fairness(app_server, page):
    open_app(page, app_server)
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.locator('[data-testid="stExpander"]').filter(has_text="Display").locator("summary").click()
    sidebar.get_by_text("Presentation mode (projector)").click()
    wait_for_app(page)
    assert page.evaluate(ROOT_FONT_JS) == "20px" and "present=1" in page.url
    # The sidebar closes in presentation mode: go on through the lesson card's link in the main area.
    _follow(page, page.locator('[data-testid="stMain"] a[href*="Fairness"]'))
    assert "/Fairness" in page.url and "present=1" in page.url
    assert page.evaluate(ROOT_FONT_JS) == "20px"
    assert_no_exception(page)


def test_a_lessons_changed_slider_survives_a_visit_to_another_page(app_server, page):
    open_app(page, f"{app_server}/Queueing?preset=starvation", timeout_ms=90_000)
    slider = _slider(page, "max_num_seqs (batch slots)")
    before = int(slider.input_value())
    # (dragged with the mouse, not an arrow key: the step player listens for arrow keys on the whole page)
    thumb = page.locator('[data-testid="stSidebar"] [role="slider"]').filter(
        has=page.locator('input[aria-label="max_num_seqs (batch slots)"]')).first
    thumb = thumb if thumb.count() else slider
    box = thumb.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 40, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    wait_for_app(page, timeout_ms=90_000)
    after = int(_slider(page, "max_num_seqs (batch slots)").input_value())
    assert after != before and f"max_num_seqs={after}" in page.url
    sidebar = page.locator('[data-testid="stSidebar"]')
    _follow(page, sidebar.locator('a[href*="Glossary"]'))
    assert "max_num_seqs" not in page.url
    _follow(page, sidebar.locator('a[href*="Queueing"]'))
    assert f"max_num_seqs={after}" in page.url and "preset=starvation" in page.url
    assert int(_slider(page, "max_num_seqs (batch slots)").input_value()) == after
    assert_no_exception(page)


def test_comparisons_stay_two_across_on_a_projector(app_server, browser):
    context = browser.new_context(viewport=PROJECTOR, device_scale_factor=1)
    page = context.new_page()
    try:
        open_app(page, f"{app_server}/Queueing?present=1&mode=free", timeout_ms=90_000)
        page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg')"
                               ".length >= 2")
        assert page.locator('[data-testid="stSidebar"]').get_attribute("aria-expanded") != "true"
        first, second = page.evaluate(CHART_BOXES_JS)[:2]  # the two policies' Gantt charts
        assert abs(first["y"] - second["y"]) < 1 and second["x"] >= first["x"] + first["width"]
        assert min(first["width"], second["width"]) >= 400
        # the headline numbers are on the first screen
        bottoms = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stMetric"]')]
            .map(e => e.getBoundingClientRect().bottom)""")
        assert bottoms and max(bottoms[:2]) <= PROJECTOR["height"]
    finally:
        context.close()


# A MutationObserver notes when the rerun starts and when a spinner or progress bar first shows.
_WATCH_JS = """() => {
  window.__classroom = {started: null, progress: null};
  const app = document.querySelector('[data-testid="stApp"]');
  const look = () => {
    const w = window.__classroom;
    if (w.started === null && app.getAttribute('data-test-script-state') === 'running') w.started = performance.now();
    const shown = document.querySelector('[data-testid="stSpinner"], [data-testid="stProgress"]');
    if (w.started !== null && w.progress === null && shown) w.progress = performance.now();
  };
  new MutationObserver(look).observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def test_a_long_sweep_shows_progress_within_a_second(app_server, page):
    open_app(page, f"{app_server}/Preemption?preset=sizing&seed=7", timeout_ms=120_000)
    page.evaluate(_WATCH_JS)
    slider = _slider(page, "Requests")
    slider.focus()
    slider.press("End")  # 500 requests: each of the sweep's 100 runs takes ~0.1-1 s
    page.wait_for_function("() => window.__classroom.progress !== null", timeout=30_000, polling=50)
    watch = page.evaluate("() => window.__classroom")
    print(f"progress shown {watch['progress'] - watch['started']:.0f} ms after the rerun started")
    assert watch["progress"] - watch["started"] <= 1000, watch
    page.locator('[data-testid="stProgress"]').first.wait_for(timeout=10_000)  # the sweep's own bar
    assert_no_exception(page)


@pytest.mark.parametrize("lesson", ["Queueing", "Fairness", "Cancellation", "Preemption", "Token_budget"])
def test_screenshot_each_lesson_on_a_projector(app_server, browser, lesson):
    context = browser.new_context(viewport=PROJECTOR, device_scale_factor=1)
    page = context.new_page()
    try:
        open_app(page, f"{app_server}/{lesson}?present=1&mode=free", timeout_ms=120_000)
        assert_no_exception(page)
        page.screenshot(path=str(screenshot(page, f"classroom-{lesson}").with_name(f"classroom-{lesson}-first.png")))
    finally:
        context.close()
