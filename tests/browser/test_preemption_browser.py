"""The Preemption page in a real browser: open presets by URL, scrub the block map (only its fragment reruns),
wait for the fresh map, check for exception boxes, and save screenshots (tests/browser/screenshots/)."""

from __future__ import annotations

import re

import pytest

from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app

PAGE = "Preemption"


def _map_titles(page) -> list[str]:
    """The block maps' plotly titles (SVG text), e.g. "Step 113: 32 of 32 KV blocks in use (100%)"."""
    return [t for t in page.locator(".gtitle").all_text_contents() if re.match(r"Step [\d,]+", t)]


def _map_slider(page):
    """The block map's step slider (the step inspector's sits in a collapsed expander further down)."""
    return page.locator('[data-testid="stSlider"]').filter(has_text="Engine step").first.get_by_role("slider")


def _wait_for_map_step(page, step: int, num_maps: int = 2) -> None:
    """Wait until ``num_maps`` block maps (the toy pool's two policies) show ``step``: the second chart may still
    be drawing when the first one is there."""
    page.wait_for_function(
        """([step, count]) => {
          const titles = [...document.querySelectorAll('.gtitle')].map(t => t.textContent);
          const maps = titles.filter(t => /^Step [\\d,]+/.test(t));
          return maps.length === count && maps.every(t => t.startsWith(`Step ${step.toLocaleString('en-US')}:`));
        }""",
        arg=[step, num_maps], timeout=30_000)


def test_toy_pool_block_map_scrubs_by_keyboard_and_buttons(app_server, page):
    open_app(page, f"{app_server}/{PAGE}?preset=toy_pool")
    assert_no_exception(page)
    _wait_for_map_step(page, 113)  # the first preemption
    assert len(_map_titles(page)) == 2  # FCFS victim and priority victim side by side
    screenshot(page, "preemption-toy_pool")

    slider = _map_slider(page)
    slider.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    wait_for_app(page)
    _wait_for_map_step(page, 118)
    assert_no_exception(page)
    assert "map_step=118" in page.url  # the scrubbed step is in the link

    page.get_by_role("button", name="Next").first.click()
    wait_for_app(page)
    _wait_for_map_step(page, 131)  # priority: A preempted at 131
    assert_no_exception(page)
    page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Step 131").first.scroll_into_view_if_needed()
    screenshot(page, "preemption-toy_pool-step131")

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
    page.wait_for_function("() => [...document.querySelectorAll('.gtitle')].some(t => /^Step /.test(t.textContent))")
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
