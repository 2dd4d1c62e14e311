"""The home page and the Queueing lesson in a real browser: opened by URL (including a shared link with settings),
a slider moved, the fresh chart awaited, no exception box, screenshots saved for a human to look at."""

from __future__ import annotations

from lessons import LESSONS
from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app, wait_for_chart_title

GANTT_TITLE = "FCFS"




def metric_values(page) -> list[str]:
    return [m.inner_text() for m in page.locator('[data-testid="stMetricValue"]').all()]


def test_home_page(app_server, page):
    open_app(page, app_server)
    assert_no_exception(page)
    wait_for_chart_title(page, "Step 5")  # (the engine step opens at step 5: step 113 is Preemption's answer)
    text = page.locator('[data-testid="stMain"]').inner_text()
    for lesson in LESSONS:  # a card for every lesson of the course
        assert lesson.title in text
    assert text.count("Open the lesson") == len(LESSONS)
    screenshot(page, "home")


def test_article_preset_by_url(app_server, page):
    open_app(page, f"{app_server}/Queueing")
    assert_no_exception(page)
    wait_for_chart_title(page, GANTT_TITLE)
    assert metric_values(page) == ["1,100 steps", "500 steps"]
    screenshot(page, "queueing-article")


def test_shared_link_with_settings_and_a_slider_move(app_server, page):
    # A link with two slots: long and short1 start at once, short2 when short1 ends: 1,000 / 100 / 200 -> mean 433.
    open_app(page, f"{app_server}/Queueing?max_num_seqs=2")
    assert_no_exception(page)
    wait_for_chart_title(page, GANTT_TITLE)
    assert metric_values(page)[0] == "433 steps"
    thumb = page.get_by_role("slider", name="max_num_seqs (batch slots)")
    thumb.focus()
    page.keyboard.press("ArrowRight")  # 3 slots: everybody runs at once, 1,000 / 100 / 100 -> mean 400
    wait_for_app(page)
    wait_for_chart_title(page, GANTT_TITLE)
    assert_no_exception(page)
    assert metric_values(page) == ["400 steps", "400 steps"]
    assert "max_num_seqs=3" in page.url
    screenshot(page, "queueing-three-slots")


def test_busy_server_presentation_mode(app_server, page):
    open_app(page, f"{app_server}/Queueing?preset=busy_server&present=1&num_requests=500&unit=ms")
    assert_no_exception(page)
    wait_for_chart_title(page, GANTT_TITLE)
    assert all(v.endswith(" ms") for v in metric_values(page))
    assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "20px"  # projector text
    fcfs, sjf = _chart_boxes(page)[:2]
    assert sjf["y"] == fcfs["y"]  # still compared side by side at 1,400 px
    screenshot(page, "queueing-busy-500-presentation")


def test_tampered_link_warns_and_falls_back(app_server, page):
    open_app(page, f"{app_server}/Queueing?max_num_seqs=abc&preset=nope")
    assert_no_exception(page)
    wait_for_chart_title(page, GANTT_TITLE)
    warnings = page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    assert any("max_num_seqs=abc" in w for w in warnings), warnings
    assert metric_values(page) == ["1,100 steps", "500 steps"]


def _chart_boxes(page) -> list[dict]:
    return [c.bounding_box() for c in page.locator('[data-testid="stPlotlyChart"]').all()]


def test_side_by_side_charts_stack_on_a_narrow_projector(app_server, page):
    # 1,400 px: the two Gantt charts share a row. 1,024 px with the sidebar open leaves ~520 px: two charts of
    # ~250 px cut their titles and legends off, so each takes a row of its own, at the full width.
    open_app(page, f"{app_server}/Queueing")
    wait_for_chart_title(page, GANTT_TITLE)
    fcfs, sjf = _chart_boxes(page)[:2]
    assert sjf["y"] == fcfs["y"] and sjf["x"] > fcfs["x"] + fcfs["width"]
    wide_width = fcfs["width"]
    page.set_viewport_size({"width": 1024, "height": 768})
    page.wait_for_timeout(500)  # the layout reflows; the charts resize to their new cells
    fcfs, sjf = _chart_boxes(page)[:2]
    assert sjf["y"] >= fcfs["y"] + fcfs["height"] and sjf["x"] == fcfs["x"]
    assert fcfs["width"] > wide_width  # a narrow screen gives each chart more room, not less
    metrics = [m.bounding_box() for m in page.locator('[data-testid="stMetric"]').all()]
    assert all(m["width"] >= 190 for m in metrics)  # metric labels are not cut to "FCFS: av…"
    screenshot(page, "queueing-article-1024px")
