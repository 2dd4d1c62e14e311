"""Text from an uploaded file is shown as text: Markdown, HTML and image links in a scenario's name and description
are drawn literally, and the page fetches nothing from any host but the app's."""

from __future__ import annotations

import json
from urllib.parse import urlparse

from sim import presets
from sim.scenario import scenario_to_dict
from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app, wait_for_chart_title

NAME = "Mine [log in](https://evil.example/login) <b>bold</b>"
DESCRIPTION = ("See ![tracker](https://evil.example/pixel.png) and <img src='https://evil.example/i.png'> $x^2$ "
               ":red[red]")


def _upload_to_queueing(app_server, page, path) -> list[str]:
    """Upload ``path`` on the Queueing page; returns the list (filled as the page loads) of URLs requested from any
    host but the app's."""
    app_host = urlparse(app_server).hostname
    elsewhere: list[str] = []
    page.on("request", lambda r: elsewhere.append(r.url) if urlparse(r.url).hostname not in (app_host, None) and
            not r.url.startswith("data:") else None)
    open_app(page, f"{app_server}/Queueing")
    page.get_by_text("Load your own scenario").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    wait_for_app(page)
    return elsewhere


def test_an_uploaded_files_text_is_shown_literally_and_fetches_nothing(app_server, page, tmp_path):
    data = scenario_to_dict(presets.get("article_hol").scenario)
    data["name"], data["description"] = NAME, DESCRIPTION
    path = tmp_path / "markdown.json"
    path.write_text(json.dumps(data))
    elsewhere = _upload_to_queueing(app_server, page, path)
    wait_for_chart_title(page, "FCFS")
    assert_no_exception(page)
    caption = page.locator('[data-testid="stCaptionContainer"]', has_text="Your scenario").first
    text = caption.inner_text().replace("\u200b", "")  # (the zero-width spaces that keep a bare URL unlinked)
    assert NAME in text  # the brackets, the URL and the tag, as typed
    assert "![tracker](https://evil.example/pixel.png)" in text and "$x^2$" in text and ":red[red]" in text
    assert caption.locator("a, img, b, .katex").count() == 0  # no link, image, tag or formula drawn
    assert page.locator('a[href*="evil.example"], img[src*="evil.example"]').count() == 0
    screenshot(page, "upload-markdown-text")
    assert not elsewhere, f"the page fetched from other hosts: {elsewhere[:5]}"


def test_no_page_fetches_from_another_host(app_server, page):
    # A classroom may be offline, and a page should not tell anyone who reads it: the favicon (a :material: icon
    # was fetched from Google's font servers), fonts, scripts and images all come from the app.
    app_host = urlparse(app_server).hostname
    elsewhere: list[str] = []
    page.on("request", lambda r: elsewhere.append(r.url) if urlparse(r.url).hostname not in (app_host, None) else None)
    for path, chart in (("", "Step 5"), ("/Queueing", "FCFS"), ("/Fairness", None), ("/Cancellation", None),
                        ("/Preemption", None)):
        open_app(page, f"{app_server}{path}")
        if chart:
            wait_for_chart_title(page, chart)
        assert_no_exception(page)
    assert not elsewhere, f"fetched from other hosts: {sorted(set(elsewhere))[:5]}"


def test_a_refused_files_text_in_the_error_is_literal_and_fetches_nothing(app_server, page, tmp_path):
    # The error quotes the file's own text (here an unknown key): it was Markdown, and its image was fetched.
    image = "![tracker](https://evil.example/error.png)"
    data = scenario_to_dict(presets.get("article_hol").scenario)
    data["config"][image] = 1
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(data))
    elsewhere = _upload_to_queueing(app_server, page, path)
    error = page.locator('[data-testid="stAlertContentError"]', has_text="That scenario is not valid").first
    error.wait_for(timeout=30_000)
    assert image in error.inner_text().replace("\u200b", "")
    assert error.locator("a, img").count() == 0
    assert not elsewhere, f"the page fetched from other hosts: {elsewhere[:5]}"
