"""The hostile links and files of issue 40, one by one, on the pages that failed: each is refused with the page's
usual warning, shows no heading, link or image made from it, and stops nothing. (The link fuzzer,
tests/app/test_link_fuzz.py, runs a corpus of such values through every parameter of every page.)"""

from __future__ import annotations

import base64
import zlib

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import as_read, metric_values, open_page
from tests.app.markup import live_markup_on

QUEUEING, WORKBENCH = "pages/1_Queueing.py", "pages/6_Workbench.py"
FORGED = "\n\n# Session expired\n\n[Log in](https://evil.example/x)"
HUGE = "9" * 5000


def _warnings(at: AppTest) -> str:
    return " ".join(as_read(w.value) for w in at.warning)


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not live_markup_on(at), live_markup_on(at)


@pytest.mark.parametrize("param", ["num_blocks", "preset", "uploaded", "export", "present", "policies"])
def test_a_value_starting_with_a_blank_line_stays_inside_the_warning(param):
    at = open_page(QUEUEING, {param: FORGED}, settle=False)
    _clean(at)
    assert "Session expired" in _warnings(at) or param == "uploaded"  # (the upload's warning names the file)
    if param == "uploaded":
        assert "copied while a scenario file was uploaded" in _warnings(at)


def test_an_uploaded_param_with_an_image_fetches_nothing():
    at = open_page(QUEUEING, {"uploaded": "\n\n![](http://host.example/b.png)"}, settle=False)
    _clean(at)


@pytest.mark.parametrize("query", [{"guide": "`![](//host/g)"}, {"guide": "²"}, {"guide": HUGE}],
                         ids=["backtick", "superscript", "5000 digits"])
def test_a_bad_guide_step_is_warned_about_and_the_path_starts_at_step_1(query):
    at = open_page(QUEUEING, query, settle=False)
    _clean(at)
    assert "was ignored: it must be a whole number from 1 to" in _warnings(at)
    assert at.query_params["guide"] == "1"


@pytest.mark.parametrize("raw", ["![](//host/p)", "[Log in](//evil.co)", "²", HUGE, "-1", "7\n# PWNED"])
def test_a_bad_problem_is_never_put_into_the_heading(raw):
    at = open_page(QUEUEING, {"problem": raw}, settle=False)
    _clean(at)
    assert any(m.value.startswith("### Queueing: problem") and m.value.endswith("problem") for m in at.markdown)
    assert "does not exist: `problem=` takes a seed" in _warnings(at)


def test_a_good_problem_keeps_its_seed_in_the_heading():
    at = open_page(QUEUEING, {"problem": "7"}, settle=False)
    assert not at.exception and any(m.value == "### Queueing: problem 7" for m in at.markdown)


@pytest.mark.parametrize("raw", ["²", HUGE, "`![](//host/s)"], ids=["superscript", "5000 digits", "backtick"])
def test_a_bad_player_step_is_warned_about(raw):
    at = open_page(QUEUEING, {"step": raw}, settle=False)
    _clean(at)
    assert "The link's step" in _warnings(at) and "was ignored: it must be a whole number from 0 to" in _warnings(at)


@pytest.mark.parametrize("raw", ["²", "٣", HUGE])
def test_a_knob_with_other_digits_or_5000_of_them_is_warned_about(raw):
    at = open_page(QUEUEING, {"num_blocks": raw}, settle=False)
    _clean(at)
    assert "must be a whole number between" in _warnings(at)


def test_a_table_link_that_unpacks_to_990_nested_lists_is_refused():
    table = "1." + base64.urlsafe_b64encode(zlib.compress(b"[" * 990 + b"]" * 990, 9)).decode().rstrip("=")
    at = open_page(WORKBENCH, {"table": table}, settle=False)
    _clean(at)
    assert "The link's table was ignored" in _warnings(at)
    assert metric_values(at) == {"FCFS: average finish": "1,100 steps",
                                 "SJF (true lengths): average finish": "500 steps"}


def test_vtc_weights_from_a_link_are_text_in_the_metric_label_and_caption():
    at = open_page(WORKBENCH, {"r1": "vtc", "r1_weights": "![](//host/w.png):2"}, settle=False)
    _clean(at)
    assert not at.error
    labels = [as_read(m.label) for m in at.metric]
    assert labels[0].startswith("VTC") and "??" in labels[0]  # (a client's name that is not a plain word: ?s)


def test_a_csv_import_with_a_cell_past_the_csv_field_limit_is_a_clear_error():
    at = open_page(WORKBENCH, settle=False)
    data = ("id,arrival_step,prompt_len,output_len\nr0,0,4,4\n" + "x" * 150_000 + ",0,4,4\n").encode()
    at.file_uploader(key="workbench.import").set_value(("big.csv", data, "text/csv")).run()
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [as_read(e.value) for e in at.error]
    assert "big.csv was not imported: line 3: a cell longer than 131,072 characters" in error
    assert "The table is as it was" in error
