"""The link and file fuzzer, Chromium layer (issue 40, item 2; markers ``browser`` and ``linkfuzz``): every page at
links carrying ``BROWSER_SAMPLE`` of the hostile corpus (tests/link_corpus.py) in its view, display and knob
parameters, then an upload and a Workbench CSV import holding it. In the page Chromium drew: no heading, link or
image made from the input, no request to another host, no exception or error box, and the page still works (its
title drawn, the sidebar's navigation there). Also what item 7 of the issue asks of a real browser: the Workbench's
empty last row keeps what is typed into it, and a lesson's upload survives a visit to the Workbench and back.
(The AppTest layer, every parameter and the whole corpus: tests/app/test_link_fuzz.py.)"""

from __future__ import annotations

import json
from urllib.parse import urlencode, urlparse

import pytest

from sim import presets
from sim.scenario import scenario_to_dict
from tests.app.markup import MARKERS
from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app, wait_for_chart_title
from tests.link_corpus import BROWSER_SAMPLE, CORPUS
from ui import workbench_table as wt

pytestmark = pytest.mark.linkfuzz

LESSONS = ("Queueing", "Fairness", "Cancellation", "Preemption", "Token_budget")
# The parameters every page reads from a link (the view's, the Display panel's, two shared knobs, the player's).
SHARED = ("preset", "uploaded", "export", "present", "theme", "step", "num_blocks", "max_num_seqs")
WORKBENCH = ("table", "r1", "r2", "r1_weights", "num_blocks", "model", "unit", "step", "present")
VIEWS = ("backtick image", "superscript two")  # (in ?guide= and ?problem=: a code-span breaker, a number's lookalike)

# Whatever the page drew from the input: headings, links or images carrying a marker, images from elsewhere.
_DRAWN_JS = """(markers) => {
  const marked = (t) => markers.some(m => (t || '').toLowerCase().includes(m.toLowerCase()));
  const out = [];
  for (const h of document.querySelectorAll('h1,h2,h3,h4,h5,h6')) {
    if (marked(h.textContent)) out.push('heading: ' + h.textContent.slice(0, 80));
  }
  for (const a of document.querySelectorAll('a[href]')) {
    if (marked(a.getAttribute('href')) || marked(a.textContent)) out.push('link: ' + a.getAttribute('href'));
  }
  for (const i of document.querySelectorAll('img[src], image[href]')) {
    const src = i.getAttribute('src') || i.getAttribute('href') || '';
    const here = src.startsWith('data:') || src.startsWith('blob:') || src.startsWith(location.origin)
      || !src.includes('//');
    if (marked(src) || !here) out.push('image: ' + src.slice(0, 80));
  }
  for (const k of document.querySelectorAll('.katex')) {
    if (marked(k.textContent)) out.push('formula: ' + k.textContent.slice(0, 80));
  }
  return out;
}"""


@pytest.fixture
def elsewhere(app_server, page) -> list[str]:
    """The URLs the page requests from any host but the app's (filled as it loads)."""
    app_host = urlparse(app_server).hostname
    found: list[str] = []
    page.on("request", lambda r: found.append(r.url) if urlparse(r.url).hostname not in (app_host, None)
            and not r.url.startswith(("data:", "blob:")) else None)
    return found


def _check(page, elsewhere: list[str], what: str) -> None:
    assert_no_exception(page)
    drawn = page.evaluate(_DRAWN_JS, list(MARKERS))
    assert not drawn, f"{what}: drawn from the input: {drawn[:5]}"
    errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert not errors, f"{what}: error boxes: {[e[:200] for e in errors]}"
    assert page.locator('[data-testid="stSidebarNav"], [data-testid="stSidebarNavItems"], '
                        '[data-testid="stPageLink"]').count() > 0, f"{what}: no navigation"
    assert page.locator("h1, h3").count() > 0, f"{what}: no title"
    assert not elsewhere, f"{what}: requests to other hosts: {sorted(set(elsewhere))[:5]}"


def _sample(names=BROWSER_SAMPLE) -> list:
    return [pytest.param(CORPUS[name], id=name) for name in names]


@pytest.mark.parametrize("path", ["", *LESSONS, "Glossary"])
@pytest.mark.parametrize("value", _sample())
def test_a_hostile_link_draws_nothing_from_it(app_server, page, elsewhere, path, value):
    query = urlencode({"mode": "free", **{p: value for p in SHARED}} if path in LESSONS
                      else {p: value for p in SHARED})
    open_app(page, f"{app_server}/{path}?{query}", first_visit=True)
    _check(page, elsewhere, f"/{path}")
    if value == CORPUS["blank line, heading, link"] and path == "Queueing":
        screenshot(page, "link-fuzz-queueing-blank-line")


@pytest.mark.parametrize("path", LESSONS)
@pytest.mark.parametrize("view", ["guide", "problem"])
@pytest.mark.parametrize("name", VIEWS)
def test_a_hostile_guide_or_problem_draws_nothing_from_it(app_server, page, elsewhere, path, view, name):
    open_app(page, f"{app_server}/{path}?{urlencode({view: CORPUS[name]})}", first_visit=True)
    _check(page, elsewhere, f"/{path} {view}")
    warnings = " ".join(page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts())
    assert "The link's" in warnings and "must be a whole number" in warnings or "does not exist" in warnings


@pytest.mark.parametrize("value", _sample())
def test_the_workbench_at_a_hostile_link_draws_nothing_from_it(app_server, page, elsewhere, value):
    query = {p: value for p in WORKBENCH}
    open_app(page, f"{app_server}/Workbench?{urlencode(query)}")
    _check(page, elsewhere, "/Workbench")
    open_app(page, f"{app_server}/Workbench?{urlencode({'r1': 'vtc', 'r1_weights': value + ':2'})}")
    _check(page, elsewhere, "/Workbench weights")


def _upload_to_queueing(page, app_server: str, path) -> None:
    """Open Queueing, upload the scenario file at ``path`` and wait for its runs' charts."""
    open_app(page, f"{app_server}/Queueing")
    page.get_by_text("Load your own scenario").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    wait_for_app(page)
    wait_for_chart_title(page, "FCFS")


@pytest.mark.parametrize("value", _sample(BROWSER_SAMPLE[:3]))
def test_an_upload_and_a_csv_import_holding_the_corpus_draw_nothing_from_it(app_server, page, elsewhere, tmp_path,
                                                                            value):
    data = scenario_to_dict(presets.get("article_hol").scenario)
    data["name"], data["description"] = value[:200] or "x", value[:2000]
    for i, r in enumerate(data["requests"]):
        r["id"], r["client"] = f"{value[:60]}{i}", value[:60] or "c"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data))
    _upload_to_queueing(page, app_server, path)
    _check(page, elsewhere, "upload")
    rows = [{"id": f"{value[:60]}{i}", "client": value[:60], "arrival_step": "0", "prompt_len": "4",
             "output_len": "4", "prefix_group": "", "priority": "", "abort_step": "", "prefix_len": ""}
            for i in range(3)]
    csv_path = tmp_path / "hostile.csv"
    csv_path.write_text(wt.to_csv(rows))
    open_app(page, f"{app_server}/Workbench")
    page.get_by_text("Import and export (CSV, scenario JSON)").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(csv_path))
    wait_for_app(page)
    assert_no_exception(page)
    assert not page.evaluate(_DRAWN_JS, list(MARKERS))
    assert not elsewhere


def _table_in_link(page) -> list[wt.Row]:
    from urllib.parse import parse_qs

    return wt.decode_rows(parse_qs(urlparse(page.url).query)["table"][0])


@pytest.mark.parametrize(("column", "x", "typed"), [("id", 235, "mine"), ("arrival_step", 380, "7")])
def test_typing_into_the_workbenchs_empty_last_row_keeps_the_value(app_server, page, column, x, typed):
    # The editor's first event on the empty last line is a blank row; drawing the editor afresh on it lost what
    # was typed (the row got the defaults: id r3, arriving with the row before).
    open_app(page, f"{app_server}/Workbench")
    wait_for_chart_title(page, "FCFS")
    wait_for_app(page)  # (the step player and the charts drawn: the editor is not redrawn under the click)
    page.wait_for_timeout(1000)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.click(position={"x": x, "y": 35 * 4 + 17})  # (a cell of the empty line under the article's three rows)
    page.wait_for_timeout(800)
    page.keyboard.type(typed)  # (typed at once, as a reader does: the old editor was redrawn on the blank row)
    page.wait_for_timeout(300)
    page.keyboard.press("Enter")
    wait_for_app(page)
    page.wait_for_timeout(1000)
    wait_for_app(page)
    rows = _table_in_link(page)
    assert len(rows) == 4 and rows[3][column] == typed, rows[3]
    assert_no_exception(page)


def _nav(page, name: str):
    """The sidebar's link to page ``name`` (a page link: the query string is dropped, as a reader's click does)."""
    return page.locator('[data-testid="stSidebar"] a', has_text=name).first


def test_a_lessons_upload_survives_a_visit_to_the_workbench(app_server, page, tmp_path):
    data = scenario_to_dict(presets.get("article_hol").scenario.with_config(max_num_seqs=3))
    path = tmp_path / "three.json"
    path.write_text(json.dumps(data))
    _upload_to_queueing(page, app_server, path)
    _nav(page, "Workbench").click()
    wait_for_app(page)
    wait_for_chart_title(page, "FCFS")
    _nav(page, "Queueing").click()
    wait_for_app(page)
    wait_for_chart_title(page, "FCFS")
    caption = page.locator('[data-testid="stCaptionContainer"]', has_text="Your scenario")
    assert caption.count() == 1, "the upload was lost on the way back"
    assert_no_exception(page)
