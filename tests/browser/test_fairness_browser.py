"""The Fairness lesson in a real browser: presets opened by URL, a client's VTC weight changed with the keyboard,
the fresh chart awaited, no exception box, and screenshots (tests/browser/screenshots/fairness-*.png) of the
default preset, the changed weight, an extreme setting and presentation mode for a human to look at."""

from __future__ import annotations

import re

from tests.browser.helpers import (
    SWEEP_RUNNING_JS,
    assert_no_exception,
    open_app,
    screenshot,
    wait_for_app,
    wait_for_chart_title,
)

COUNTERS_TITLE = "Virtual token counter per client"




def metric_labels(page) -> list[str]:
    return [m.inner_text() for m in page.locator('[data-testid="stMetricLabel"]').all()]


def metric_values(page) -> list[str]:
    return [m.inner_text() for m in page.locator('[data-testid="stMetricValue"]').all()]


def notice_text(page) -> str:
    return " ".join(page.locator('[data-testid="stAlertContentInfo"]').all_inner_texts())


def test_article_preset_by_url(app_server, page):
    open_app(page, f"{app_server}/Fairness", timeout_ms=120_000)
    assert_no_exception(page)
    wait_for_chart_title(page, COUNTERS_TITLE)
    wait_for_chart_title(page, "Service gap between clients A and B")
    assert metric_values(page) == ["4,081 tokens/s", "1,700 tokens/s", "4,051 tokens/s"]
    assert "from 2,445 ms to 963 ms" in notice_text(page)
    screenshot(page, "fairness-article")


def test_weight_changed_with_the_keyboard(app_server, page):
    open_app(page, f"{app_server}/Fairness?preset=weighted_vtc", timeout_ms=120_000)
    assert_no_exception(page)
    wait_for_chart_title(page, "VTC 1:2: each request over time")  # the Gantt of the first policy
    sidebar = page.locator('[data-testid="stSidebar"]')
    client_b = sidebar.locator('[data-testid="stExpander"]').filter(has_text="Client B")
    client_b.get_by_text("Client B").click()
    thumb = client_b.get_by_role("slider", name="VTC weight (its share of the service)")
    thumb.focus()
    for _ in range(4):  # 2.0 -> 3.0 in steps of 0.25
        page.keyboard.press("ArrowRight")
    wait_for_app(page, timeout_ms=120_000)
    wait_for_chart_title(page, "VTC 1:2 (weights A 1 : B 3): each request over time")
    assert_no_exception(page)
    assert "VTC 1:2 (weights A 1 : B 3): total throughput" in metric_labels(page)
    assert "B_weight=3.0" in page.url
    ratio = float(notice_text(page).split("B was served ")[1].split("x")[0])
    assert 2.7 < ratio < 3.3, ratio
    screenshot(page, "fairness-weighted-b3")


def test_extreme_setting_four_clients_tiny_pool(app_server, page):
    open_app(page, f"{app_server}/Fairness?clients=4&C_share=30&D_share=30&num_blocks=120&w_out=16",
             timeout_ms=120_000)
    assert_no_exception(page)
    wait_for_chart_title(page, COUNTERS_TITLE)
    legend = " ".join(t.text_content() for t in page.locator(".js-plotly-plot .legendtext").all())
    assert all(f"client {c}" in legend for c in "ABCD")
    screenshot(page, "fairness-extreme-4-clients-120-blocks")


def test_rate_limit_sweep_in_presentation_mode(app_server, page):
    open_app(page, f"{app_server}/Fairness?preset=rate_limits&present=1&unit=ms", timeout_ms=120_000)
    assert_no_exception(page)
    wait_for_chart_title(page, "Throughput against the per-client rate limit")
    assert "At the tightest limit" in notice_text(page)
    screenshot(page, "fairness-rate-limits-presentation")


def test_returning_idle_and_a_tampered_link(app_server, page):
    open_app(page, f"{app_server}/Fairness?preset=returning_idle&B_start=abc", timeout_ms=120_000)
    assert_no_exception(page)
    wait_for_chart_title(page, COUNTERS_TITLE)
    warnings = page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    assert any("B_start=abc" in w for w in warnings), warnings
    assert "Without the lift" in notice_text(page)
    screenshot(page, "fairness-returning-idle")


def test_rate_limit_sweep_fills_in_after_a_slider_move(app_server, page):
    """A KV-pool change makes every run new: the page answers with the policies while the sweep's line says how
    many runs are done; the fragment's polls finish it and the page reruns once more with the sweep's sentences."""
    open_app(page, f"{app_server}/Fairness?preset=rate_limits", timeout_ms=120_000)
    wait_for_chart_title(page, "Throughput against the per-client rate limit")
    thumb = page.get_by_role("slider", name=re.compile(r"^KV pool"))
    thumb.focus()
    page.keyboard.press("ArrowLeft")
    page.wait_for_function(SWEEP_RUNNING_JS, timeout=60_000, polling=50)  # the rerun is back, the sweep is not
    assert "At the tightest limit" not in notice_text(page)
    wait_for_app(page, timeout_ms=120_000)  # the polls (and the last rerun) are done
    assert_no_exception(page)
    assert "At the tightest limit" in notice_text(page)
    assert "num_blocks=" in page.url
    screenshot(page, "fairness-rate-limits-after-pool-change")
