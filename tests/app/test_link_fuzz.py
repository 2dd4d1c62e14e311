"""The link and file fuzzer, AppTest layer (issue 40, item 2; marker ``linkfuzz``): every page, every query
parameter it reads, every entry of the hostile corpus (tests/link_corpus.py); then the same corpus through an
uploaded scenario, the Workbench's table link, its CSV import and its cells. Each run: no exception, no error box
(but for the Workbench's list of bad cells, which quotes them), the page still drawn, and no heading, link, image,
autolink, tag, formula or directive made from the input in anything drawn as Markdown (tests/app/markup.py).

Which parameters a page reads is found, not listed: a spy on ``st.query_params`` records every name a page's run
asks for (``_reads``), under each preset of a lesson (each brings knobs of its own) and, on the Workbench, with runs
picked whose settings are read only then (VTC's weights, SJF's guard, the rate limit's window). A parameter added to
a page is fuzzed with no change here. All of a group's parameters get the entry at once (one run each), the view
parameters (``problem``, ``guide``, ``mode``, ``preset``) one at a time, since each changes what else is read.
(The Chromium layer: tests/browser/test_link_fuzz_browser.py.)
"""

from __future__ import annotations

import functools
import json

import pytest
from streamlit.runtime.state.query_params_proxy import QueryParamsProxy
from streamlit.testing.v1 import AppTest

import lessons
from sim import presets
from sim.request import RequestSpec
from sim.scenario import Scenario, dumps
from tests.app.conftest import ROOT
from tests.app.markup import live_markup_on
from tests.link_corpus import CORPUS, TEXT_ENTRIES
from ui import workbench_table as wt

pytestmark = pytest.mark.linkfuzz

WORKBENCH, GLOSSARY, HOME = "pages/6_Workbench.py", "pages/9_Glossary.py", "app.py"
LESSON_PAGES = {lesson.page: lesson.id for lesson in lessons.LESSONS}
PAGES = (*LESSON_PAGES, WORKBENCH, GLOSSARY, HOME)
VIEW = frozenset({"mode", "preset", "problem", "guide"})
# Workbench runs whose own settings are read only when picked (weights, sigma, guard, limit and window).
WORKBENCH_RUNS = {"r1": "vtc", "r2": "sjf_predicted", "r3": "rate_limit", "r4": "sjf"}

_reads: set[str] = set()  # (the spy's record: one run at a time)


def _spy(method):
    @functools.wraps(method)
    def spied(self, key, *args):
        _reads.add(key)
        return method(self, key, *args)
    return spied


def _run(page: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    if page != HOME:
        at.switch_page(page)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def _read_by(page: str, query: dict[str, str]) -> set[str]:
    """The query parameters a run of ``page`` with ``query`` asks for by name."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("__getitem__", "get_all", "__contains__"):
            mp.setattr(QueryParamsProxy, name, _spy(getattr(QueryParamsProxy, name)))
        _reads.clear()
        at = _run(page, query)
        assert not at.exception, [e.value for e in at.exception]
        return set(_reads)


@functools.cache
def groups(page: str) -> tuple[tuple[str, tuple[tuple[str, str], ...], frozenset[str]], ...]:
    """(name, fixed parameters, fuzzed parameters) of each run a corpus entry gets on ``page``."""
    out = []
    if page in LESSON_PAGES:
        covered: set[str] = set()
        for i, preset in enumerate(presets.presets_for(LESSON_PAGES[page])):
            base = {"mode": "free", "preset": preset.key}
            read = _read_by(page, base) - VIEW
            if i == 0:  # (a hostile preset or mode opens the free page on the first preset: its knobs are read)
                out.append(("free page, the link's preset and mode", (), frozenset(read | {"mode", "preset"})))
            elif read - covered:  # (a preset with no knob of its own adds no run)
                out.append((f"free page, {preset.key}", tuple(base.items()), frozenset(read)))
            covered |= read
        out += [("guided path", (), frozenset({"guide"})), ("problem", (), frozenset({"problem"}))]
    elif page == WORKBENCH:
        plain = _read_by(page, {})
        out.append(("workbench", (), frozenset(plain)))
        picked = _read_by(page, WORKBENCH_RUNS) - set(WORKBENCH_RUNS)
        out.append(("workbench, runs picked", tuple(WORKBENCH_RUNS.items()), frozenset(picked)))
    else:
        out.append((page, (), frozenset(_read_by(page, {}))))
    return tuple(out)


def _check(at: AppTest, what: str, *, errors_allowed: bool = False) -> None:
    assert not at.exception, f"{what}: {[e.value[:300] for e in at.exception]}"
    assert errors_allowed or not at.error, f"{what}: {[e.value[:300] for e in at.error]}"
    assert at.title or any(m.value.startswith("###") for m in at.markdown), f"{what}: the page drew no title"
    live = live_markup_on(at)
    assert not live, f"{what}: markup made from the input: {live[:5]}"


def _entries(names=tuple(CORPUS)) -> list:
    return [pytest.param(CORPUS[name], id=name) for name in names]


def test_every_page_reads_the_parameters_the_fuzzer_knows_of():
    # The spy sees what matters: the lessons' knobs, the view, the player's step, the upload's name, the
    # Workbench's table and runs (if it saw nothing, the fuzzer would pass without fuzzing).
    free = groups("pages/1_Queueing.py")[0][2]
    assert {"mode", "preset"} <= free
    assert {"num_blocks", "max_num_seqs", "step", "uploaded", "present", "export", "theme"} <= free, free
    workbench = {p for _, _, params in groups(WORKBENCH) for p in params}
    assert {"table", "r1", "r4", "r1_weights", "r2_sigma", "r3_limit", "r3_window", "r4_guard", "num_blocks",
            "model", "step"} <= workbench, workbench
    fairness = {p for _, _, params in groups("pages/2_Fairness.py") for p in params}
    assert {"A_share", "B_share"} <= fairness, fairness


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("value", _entries())
def test_every_parameter_of_every_page_takes_the_corpus(page, value):
    for name, fixed, fuzzed in groups(page):
        query = {**dict(fixed), **{p: value for p in fuzzed}}
        _check(_run(page, query), f"{page} {name} with {sorted(fuzzed)[:8]}...")


def _hostile_scenario(lesson: str, value: str) -> Scenario:
    """The lesson's first preset with ``value`` as its name and description and in every id and client."""
    base = presets.presets_for(lesson)[0].scenario
    short = value[:60]
    clients = (short or "c", (short or "c") + "-2")
    requests = tuple(RequestSpec(f"{short}#{i}", r.arrival_step, r.prompt_len, r.output_len,
                                 client_id=clients[i % 2], priority=r.priority, abort_step=r.abort_step,
                                 arrival_ms=r.arrival_ms)  # (a preset's traffic may arrive on the clock)
                     for i, r in enumerate(base.requests[:40]))
    return Scenario(value[:500] or "x", base.config.replace(client_weights=()), requests, value[:2000])


@pytest.mark.parametrize("page", LESSON_PAGES)
@pytest.mark.parametrize("value", _entries(TEXT_ENTRIES))
def test_an_uploaded_scenario_holding_the_corpus_is_text(page, value):
    lesson = LESSON_PAGES[page]
    at = _run(page, {"mode": "free"})
    data = dumps(_hostile_scenario(lesson, value)).encode()
    at.file_uploader(key=f"{lesson}.upload.0").set_value(("hostile.json", data, "application/json")).run()
    _check(at, f"{page} upload")
    assert any("Your scenario" in c.value for c in at.caption), "the upload was not shown"


@pytest.mark.parametrize("value", _entries(TEXT_ENTRIES))
def test_a_refused_file_quoting_the_corpus_is_text(value):
    at = _run("pages/1_Queueing.py", {"mode": "free"})
    key = json.dumps(value[:300] or "?")  # (an unknown key: the error quotes it)
    data = dumps(presets.get("article_hol").scenario).replace('"config": {', f'"config": {{{key}: 1, ', 1).encode()
    at.file_uploader(key="queueing.upload.0").set_value(("refused.json", data, "application/json")).run()
    _check(at, "refused upload", errors_allowed=True)
    assert any("That scenario is not valid" in e.value for e in at.error)


def _hostile_rows(value: str) -> list[wt.Row]:
    short = value[:60]
    return [{"id": f"{short}{i}", "client": short, "arrival_step": "0", "prompt_len": "4", "output_len": "4",
             "priority": value[:30], "abort_step": "", "prefix_group": short, "prefix_len": ""} for i in range(3)]


@pytest.mark.parametrize("value", _entries(TEXT_ENTRIES))
def test_the_workbench_table_link_csv_import_and_cells_take_the_corpus(value):
    rows = _hostile_rows(value)
    encoded = wt.encode_rows(rows)
    at = _run(WORKBENCH, {"table": encoded})
    _check(at, "table link", errors_allowed=True)  # (a bad cell is listed in an error box: its text quoted)
    at = _run(WORKBENCH, {})
    at.file_uploader(key="workbench.import").set_value(("hostile.csv", wt.to_csv(rows).encode(), "text/csv")).run()
    _check(at, "CSV import", errors_allowed=True)
    assert wt.from_csv(wt.to_csv(rows)) == [{k: wt.text(r.get(k)) for k in wt.KEYS} for r in rows]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.switch_page(WORKBENCH)
    at.session_state["workbench.rows"] = rows  # (the rows as the editor's callback leaves them)
    _check(at.run(), "cells", errors_allowed=True)


def test_the_corpus_has_what_the_issue_asks_for():
    values = list(CORPUS.values())
    assert any(v.startswith("\n\n") for v in values) and any("`" in v for v in values)
    assert any(ch in v for v in values for ch in "\x1b\x00\u202e") and "²" in values and "9" * 5000 in values
    assert any("<img" in v for v in values) and any(len(v) > 10_000 for v in values)
