"""The Cancellation page in a real browser: opened by URL (a shared link), no exception box, the fresh charts drawn,
screenshots saved under tests/browser/screenshots/ for a human to look at."""

from __future__ import annotations

import pytest

from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app, wait_for_chart_title

KV_TITLE = "KV memory: wanted vs held for nobody"




def body_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def test_article_preset_by_url(app_server, page):
    open_app(page, f"{app_server}/Cancellation")
    assert_no_exception(page)
    wait_for_chart_title(page, KV_TITLE)
    text = body_text(page)
    for number in ("700 tokens", "131 MB", "39 MB", "700 steps", "700 steps earlier"):
        assert number in text
    titles = [t.text_content() for t in page.locator(".js-plotly-plot .gtitle").all()]
    assert any("The waiting time others lose" in t for t in titles), titles
    screenshot(page, "cancellation-article")


@pytest.mark.parametrize("preset", ["impatient_users", "stops"])
def test_other_presets_by_url(app_server, page, preset):
    open_app(page, f"{app_server}/Cancellation?preset={preset}")
    assert_no_exception(page)
    wait_for_chart_title(page, KV_TITLE)
    assert "What to notice" in body_text(page)
    screenshot(page, f"cancellation-{preset}")


def test_extreme_settings_by_url(app_server, page):
    # Everyone leaves, early, and users time out after 200 steps; a small pool and many slots.
    url = (f"{app_server}/Cancellation?preset=impatient_users&abandon_rate=1.0&abandon_point=early&timeout=200"
           "&num_blocks=300&max_num_seqs=64&delay=200&unit=ms")
    open_app(page, url)
    assert_no_exception(page)
    wait_for_chart_title(page, KV_TITLE)
    assert "notices after 200 steps" in body_text(page)
    screenshot(page, "cancellation-extreme")


def test_presentation_mode_and_a_knob_change(app_server, page):
    open_app(page, f"{app_server}/Cancellation?present=1")
    assert_no_exception(page)
    wait_for_chart_title(page, KV_TITLE)
    screenshot(page, "cancellation-presentation")
    # Change the user's leaving point from the sidebar: the numbers follow (token 500 -> 500 tokens = 66 MB freed).
    thumb = page.get_by_role("group", name="The user leaves after reading token").get_by_role("slider")
    shown = page.get_by_role("group", name="The user leaves after reading token").get_by_test_id("stSliderThumbValue")
    thumb.focus()
    for _ in range(40):  # step 10: 300 -> 500 is 20 presses; on a loaded machine a press can land before the slider
        if shown.inner_text().replace(",", "") == "500":  # answers, so press until it reads 500
            break
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(30)
    assert shown.inner_text().replace(",", "") == "500"
    wait_for_app(page)
    assert_no_exception(page)
    wait_for_chart_title(page, KV_TITLE)
    text = body_text(page)
    assert "500 steps earlier" in text and "66 MB" in text, text[:2000]
