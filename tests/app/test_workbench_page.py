"""The Workbench page under AppTest: the article's example by default, runs picked by link, a bad cell that keeps the
last valid table, a preset's workload loaded with its engine, a table too large for a link, a tampered link."""

from __future__ import annotations

from sim import presets
from sim.workload import ClientSpec, WorkloadSpec, generate
from tests.app.conftest import as_read, chart_titles, metric_values, open_page
from ui import workbench_table as wt

PAGE = "pages/6_Workbench.py"


def test_the_article_by_default_as_on_queueing():
    at = open_page(PAGE)
    assert not at.exception
    assert metric_values(at) == {"FCFS: average finish": "1,100 steps",
                                 "SJF (true lengths): average finish": "500 steps"}
    assert at.query_params["table"] == wt.encode_rows(wt.rows_of(presets.get("article_hol").scenario.requests))


def test_runs_from_the_link_with_their_settings():
    at = open_page(PAGE, {"r2": "sjf_predicted", "r2_sigma": "0.0", "r3": "priority", "r4": "rate_limit",
                          "r4_limit": "1", "r4_window": "5000"})
    assert not at.exception
    # Perfect predictions order as SJF (500); priority with equal priorities as FCFS (1,100); one request per 5,000
    # steps: the two others are rejected, the long one alone finishes at 1,000.
    assert metric_values(at) == {"FCFS: average finish": "1,100 steps",
                                 "SJF (predicted) σ 0: average finish": "500 steps",
                                 "Priority: average finish": "1,100 steps",
                                 "Rate limit 1/5000 steps: average finish": "1,000 steps"}


def test_a_bad_cell_keeps_the_last_valid_table_and_says_so():
    at = open_page(PAGE)
    rows = wt.rows_of(presets.get("article_hol").scenario.requests)
    rows[2]["output_len"] = "1.5"
    at.session_state["workbench.rows"] = rows
    at.run()
    assert not at.exception
    shown = at.error[0].value.replace("\\", "")  # (the Markdown source: the typed text's specials are escaped)
    assert "row 3, answer tokens: a whole number from 1 to 10,000,000 (not a fraction), got '1.5'" in shown
    assert "last valid table (3 requests)" in at.warning[0].value
    assert metric_values(at)["FCFS: average finish"] == "1,100 steps"


def test_a_preset_loads_its_requests_and_its_engine():
    at = open_page(PAGE)
    at.selectbox(key="workbench.preset").set_value("recompute_vs_swap").run()
    at.button(key="workbench.load_preset").click().run()
    assert not at.exception
    assert at.session_state["workbench.engine.num_blocks"] == 144
    assert [r["id"] for r in at.session_state["workbench.rows"]] == ["victim", "grower"]
    assert "Loaded Recompute vs swap" in at.success[0].value
    assert len(at.metric) == 2


def test_a_table_too_large_for_a_link_says_the_json_is_the_way():
    at = open_page(PAGE)
    at.session_state["workbench.rows"] = [{"id": f"r{i}", "arrival_step": str(i), "prompt_len": "4",
                                           "output_len": "3"} for i in range(wt.URL_MAX_ROWS + 1)]
    at.run()
    assert not at.exception
    assert "table" not in at.query_params
    assert any("a link holds a table of up to 50 rows" in c.value for c in at.caption)


def test_a_tampered_link_warns_and_shows_the_article():
    at = open_page(PAGE, {"table": "1.garbage"})
    assert not at.exception
    assert "The link's table was ignored: cut or changed" in at.warning[0].value
    assert metric_values(at)["FCFS: average finish"] == "1,100 steps"


def test_duplicate_and_remove_act_on_the_picked_row():
    at = open_page(PAGE)
    at.number_input(key="workbench.pick_row").set_value(2).run()
    at.button(key="workbench.duplicate").click().run()
    assert [r["id"] for r in at.session_state["workbench.rows"]] == ["long", "short1", "short1-copy", "short2"]
    at.number_input(key="workbench.pick_row").set_value(4).run()
    for _ in range(3):  # the picker follows the shrinking table: 4 -> 3 -> 2
        at.button(key="workbench.remove").click().run()
    assert not at.exception
    assert [r["id"] for r in at.session_state["workbench.rows"]] == ["long"]
    assert at.number_input(key="workbench.pick_row").value == 1
    assert metric_values(at) == {"FCFS: average finish": "1,000 steps",
                                 "SJF (true lengths): average finish": "1,000 steps"}


def test_a_cell_typed_as_markdown_is_shown_as_typed():
    at = open_page(PAGE)
    rows = wt.rows_of(presets.get("article_hol").scenario.requests)
    rows[1]["arrival_step"] = "**[x](http://e.com)**"
    at.session_state["workbench.rows"] = rows
    at.run()
    assert r"got '\*\*\[x\]\(http" in at.error[0].value  # escaped: no bold, no link


def test_bad_vtc_weights_are_named_and_no_run_is_made():
    # From a link, as any bad setting in a link: the usual warning, and the runs with no weights (issue 40).
    at = open_page(PAGE, {"r1": "vtc", "r1_weights": "A:zero"})
    assert not at.exception and not at.error
    (warning,) = [as_read(w.value) for w in at.warning]
    assert warning.startswith("The link's setting `r1_weights=A:zero` was ignored: VTC weights: 'A:zero' is not "
                              "client:weight with a weight from 0.001 to 1,000")
    assert at.metric and "r1_weights" not in at.query_params
    # Typed into the box: named, and no run until they are fixed.
    at.text_input(key="workbench.r1_weights").set_value("A:zero").run()
    assert not at.exception
    assert "VTC weights: 'A:zero' is not client:weight with a weight from 0.001 to 1,000" in as_read(at.error[0].value)
    assert not at.metric


def test_the_generator_fills_rows_to_edit_and_two_clients_bring_the_per_client_charts():
    at = open_page(PAGE, {"r3": "vtc"})
    for key, value in {"n": 12, "rate": 0.5, "seed": 4, "clients": 2, "share": 75, "abandon": 50}.items():
        at.number_input(key=f"workbench.gen.{key}").set_value(value)
    next(b for b in at.button if b.label == "Fill the table").click().run()
    assert not at.exception
    rows = at.session_state["workbench.rows"]
    assert "generator's 12 requests (seed 4)" in at.success[0].value
    # The generator's own requests, as rows of text (so the same seed gives the same table, cell by cell).
    spec = WorkloadSpec(num_requests=12, rate_per_step=0.5, prompt_median=200, prompt_sigma=0.8, output_median=150,
                        output_sigma=0.8, clients=(ClientSpec("A", 0.75), ClientSpec("B", 0.25)), abandon_rate=0.5,
                        seed=4)
    assert rows == wt.rows_of(generate(spec))
    assert {r["client"] for r in rows} == {"A", "B"} and any(r["abort_step"] for r in rows)
    assert len(at.metric) == 3
    titles = chart_titles(at)
    assert "VTC: virtual token counters" in titles and "Waiting queue and running batch" in titles
    assert "VTC: KV cache in use" in titles and "TTFT, request by request" in titles


def test_a_link_whose_table_was_never_valid_still_offers_a_preset_and_an_import():
    bad = wt.encode_rows([{"id": "a", "arrival_step": "0", "prompt_len": "-5", "output_len": "3"}])
    at = open_page(PAGE, {"table": bad})
    assert not at.exception
    assert "row 1, prompt tokens: a whole number from 1 to 10,000,000, got -5" in at.error[0].value.replace("\\", "")
    assert "The runs start once every cell is valid." in at.info[0].value
    assert not at.metric and at.query_params["table"] == bad  # no run; the table as typed stays in the link
    assert at.get("file_uploader")  # the import is there to replace the table
    at.button(key="workbench.load_preset").click().run()  # the first preset: the article's three requests
    assert not at.exception
    assert metric_values(at) == {"FCFS: average finish": "1,100 steps",
                                 "SJF (true lengths): average finish": "500 steps"}
