"""The Preemption page in a real browser: open presets by URL, restack the KV chart, extreme settings, check for
exception boxes, and save screenshots (tests/browser/screenshots/). The step player's block map:
test_player_browser.py."""

from __future__ import annotations

import pytest

from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app

PAGE = "Preemption"


def test_toy_pool_kv_chart_restacks_by_state(app_server, page):
    open_app(page, f"{app_server}/{PAGE}?preset=toy_pool")
    assert_no_exception(page)
    screenshot(page, "preemption-toy_pool")
    # The KV chart stacked by state instead of by request, in % of the pool.
    page.get_by_text("state (held / cached)", exact=True).click()
    wait_for_app(page)
    page.get_by_text("%", exact=True).last.click()
    wait_for_app(page)
    page.wait_for_function("() => [...document.querySelectorAll('.legendtext')].some("
                           "t => t.textContent === 'held by live requests')")
    assert page.locator(".ytitle", has_text="KV cache (% of pool)").count() == 2
    assert_no_exception(page)
    screenshot(page, "preemption-toy_pool-kv-by-state")


@pytest.mark.parametrize("preset", ["recompute_vs_swap", "prefix_cache", "sizing"])
def test_each_preset_opens_by_url(app_server, page, preset):
    open_app(page, f"{app_server}/{PAGE}?preset={preset}", timeout_ms=90_000)
    assert_no_exception(page)
    # The chart component loads lazily after the script has finished: wait for the page's charts to be drawn.
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length >= 5")
    # The player's pool, block by block: made once the player has been in view.
    page.locator('[data-testid="step-player"]').scroll_into_view_if_needed()
    page.locator('[data-testid="player-block-map"] canvas').first.wait_for()
    screenshot(page, f"preemption-{preset}")


def test_extreme_settings_and_presentation_mode(app_server, page):
    # One-token blocks (2,000 copies per swap), a slow link, too little CPU swap space: the swap falls back.
    open_app(page, f"{app_server}/{PAGE}?preset=recompute_vs_swap&block_size=1&swap_bandwidth_gb_s=5"
                   f"&cpu_swap_gib=0.1&present=1", timeout_ms=90_000)
    assert_no_exception(page)
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
    page.get_by_text("Swap: time each way").first.wait_for()  # the metrics are drawn (not placeholders)
    assert page.get_by_text("fell back to recompute").first.is_visible()
    screenshot(page, "preemption-extreme-presentation")
