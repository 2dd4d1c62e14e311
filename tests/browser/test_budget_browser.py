"""The Token budget page in a real browser: its charts drawn, the worked example's figures on the first screen
(1280 x 720), and the budget slider moving them; screenshots saved under tests/browser/screenshots/."""

from __future__ import annotations

from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app, wait_for_chart_title

TRADEOFF_TITLE = "The budget's trade-off"
B_PAUSE = "B: chunked, {budget}: streams' longest pause"


def _metric(page, label: str) -> str:
    box = page.get_by_test_id("stMetric").filter(has_text=label)
    return box.get_by_test_id("stMetricValue").inner_text()


def _in_first_screen(page, text: str) -> bool:
    box = page.get_by_text(text, exact=False).first.bounding_box()
    return box is not None and box["y"] + box["height"] <= 720


def test_worked_example_first_screen_and_charts(app_server, page):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, f"{app_server}/Token_budget")
    assert_no_exception(page)
    wait_for_chart_title(page, TRADEOFF_TITLE)
    assert _metric(page, "A: no chunking, 8,192: streams' longest pause") == "133.8 ms"
    assert _metric(page, B_PAUSE.format(budget="512")) == "13.9 ms"
    for text in ("133.8 ms", "13.9 ms", "long's first token after 220.8 ms"):
        assert _in_first_screen(page, text), text
    titles = [t.text_content() for t in page.locator(".js-plotly-plot .gtitle").all()]
    for title in ("Time between tokens, every gap", TRADEOFF_TITLE, "KV cache, A: no chunking, 8,192"):
        assert any(title in t for t in titles), titles
    screenshot(page, "budget-article")


def test_presentation_mode(app_server, page):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, f"{app_server}/Token_budget?present=true")
    assert_no_exception(page)
    wait_for_chart_title(page, TRADEOFF_TITLE)
    assert _metric(page, B_PAUSE.format(budget="512")) == "13.9 ms"
    screenshot(page, "budget-presentation")


def test_moving_the_budget_slider_changes_the_figures(app_server, page):
    open_app(page, f"{app_server}/Token_budget")
    wait_for_chart_title(page, TRADEOFF_TITLE)
    group = page.get_by_role("group", name="Server B: token budget (tokens per step)")
    thumb = group.get_by_role("slider")
    thumb.focus()
    for _ in range(5):  # 512 -> 1,024 is one press; a press can land before the slider answers on a loaded machine
        page.keyboard.press("ArrowRight")
        wait_for_app(page)
        if group.get_by_test_id("stSliderThumbValue").inner_text() != "512":
            break
    assert group.get_by_test_id("stSliderThumbValue").inner_text() == "1024"
    wait_for_app(page)
    assert_no_exception(page)
    # A bigger chunk: longer steps for the streams (13.9 -> 22.1 ms), an earlier first token (220.8 ms ->
    # 7 x 22.054 + 20.006 = 174.4 ms).
    assert _metric(page, B_PAUSE.format(budget="1,024")) == "22.1 ms"
    assert page.get_by_text("long's first token after 174.4 ms (its prefill in 8 steps)").count() == 1
    assert "budget_b=1024" in page.url
