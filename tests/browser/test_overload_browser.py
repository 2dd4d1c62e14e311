"""The Overload page in a real browser: every preset opens by URL with no exception, the load sweep is drawn where
the preset has one, an extreme setting in presentation mode; screenshots in tests/browser/screenshots/."""

from __future__ import annotations

import pytest

from sim.presets import presets_for
from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_chart_title

PAGE = "Overload"
SWEEP_TITLE = "Throughput and goodput against offered load"  # ui/charts/overload.py's load_sweep


@pytest.mark.parametrize("preset", [p.key for p in presets_for("overload")])
def test_each_preset_opens_by_url_and_draws_its_load_sweep(app_server, page, preset):
    open_app(page, f"{app_server}/{PAGE}?preset={preset}", timeout_ms=120_000)
    assert_no_exception(page)
    if "load_rps" in next(p for p in presets_for("overload") if p.key == preset).knobs:
        wait_for_chart_title(page, SWEEP_TITLE, timeout_ms=120_000)  # (it fills in: every point, then drawn whole)
        page.wait_for_function("() => !document.body.innerText.includes('Running the sweep')", timeout=120_000,
                               polling=500)
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length >= 5",
                           timeout=60_000)
    assert "What to notice" in page.inner_text("body")
    assert_no_exception(page)
    screenshot(page, f"overload-{preset}")


def test_a_small_cap_and_a_tight_target_in_presentation_mode(app_server, page):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, f"{app_server}/{PAGE}?preset=request_cap&request_cap=8&ttft_slo_ms=200&load_rps=120&present=1",
             timeout_ms=120_000)
    assert_no_exception(page)
    wait_for_chart_title(page, SWEEP_TITLE, timeout_ms=120_000)
    body = page.inner_text("body")
    assert "request cap 8: goodput" in body
    assert "a first token after 200 ms" in body
    screenshot(page, "overload-request_cap-extreme-present")
