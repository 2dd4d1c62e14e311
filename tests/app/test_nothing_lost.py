"""Nothing lost on the way (issue 40, item 7): a lesson's uploaded scenario and its slider values survive a visit to
another page in the same tab (the Workbench, and back). (The Workbench's empty last row keeps what is typed into
it: tests/browser/test_link_fuzz_browser.py, which types; ``only_blank_rows_added`` here.)"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from sim import presets
from sim.scenario import dumps
from tests.app.conftest import assert_clean, metric_values, open_page
from ui import workbench_table as wt

PAGE = "pages/1_Queueing.py"
THREE_SLOTS = dumps(presets.get("article_hol").scenario.with_config(max_num_seqs=3)).encode()


def _follow_link(at: AppTest, page: str) -> AppTest:
    """What a page link in the sidebar does: the query string dropped, the page switched, a run."""
    at.query_params.clear()
    at.switch_page(page)
    return at.run()


def test_an_upload_and_a_slider_survive_a_visit_to_the_workbench():
    at = open_page(PAGE, settle=False)
    at.file_uploader(key="queueing.upload.0").set_value(("three.json", THREE_SLOTS, "application/json")).run()
    at.slider(key="queueing.engine.max_num_seqs").set_value(2).run()
    before = metric_values(at)
    assert any("Your scenario: Head-of-line blocking" in c.value for c in at.caption)
    _follow_link(at, "pages/6_Workbench.py")
    assert_clean(at)
    _follow_link(at, PAGE)
    assert_clean(at)
    assert any("Your scenario: Head-of-line blocking" in c.value for c in at.caption), "the upload was lost"
    assert at.slider(key="queueing.engine.max_num_seqs").value == 2
    assert metric_values(at) == before
    # and taking the file out of the box still goes back to the presets
    at.button(key="queueing.clear_upload").click().run()
    assert not any("Your scenario" in c.value for c in at.caption)


def test_a_row_added_with_nothing_typed_yet_waits_for_the_typed_value():
    # The editor's first event when a reader types into the empty last line: a blank added row. Committing it
    # (and drawing the editor afresh) lost the typed value; the next event to the same editor carries it.
    assert wt.only_blank_rows_added({"added_rows": [{}], "edited_rows": {}, "deleted_rows": []})
    assert wt.only_blank_rows_added({"added_rows": [{"id": None, "row": None}]})
    assert not wt.only_blank_rows_added({"added_rows": [{"id": "mine"}]})
    assert not wt.only_blank_rows_added({"added_rows": [{}], "edited_rows": {0: {"id": "x"}}})
    assert not wt.only_blank_rows_added({"edited_rows": {0: {"id": "x"}}})
    rows = wt.rows_of(presets.get("article_hol").scenario.requests)
    added = wt.apply_edits(rows, {"added_rows": [{"id": "mine", "arrival_step": "7"}]})
    assert added[-1]["id"] == "mine" and added[-1]["arrival_step"] == "7"
