"""The Workbench in a real browser: a cell edited in the table changes the Gantt chart; three runs picked give three
columns; a bad cell is named with its allowed range while the other rows stay and the runs keep the last valid
table; the table exported as CSV and imported again gives the same numbers; a link with a small table reproduces
the view. Screenshots at 1,280 x 720, normal and presentation mode."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlparse

from sim import metrics, presets
from sim.engine import simulate
from tests.browser.helpers import assert_no_exception, open_app, screenshot, wait_for_app, wait_for_chart_title
from ui import workbench_runs as wr
from ui import workbench_table as wt

COLUMN_ORDER = ("row", "check", *wt.KEYS)  # the editor's columns, left to right


def metric_values(page) -> list[str]:
    return [m.inner_text() for m in page.locator('[data-testid="stMetricValue"]').all()]


def gantt_x_max(page, title: str) -> float:
    """The right end of the x axis of the Gantt chart titled ``title`` (plotly's own layout, in the page)."""
    return page.evaluate(
        """(title) => { const el = [...document.querySelectorAll('[data-stale="false"] .js-plotly-plot')]
             .find(p => p.layout && p.layout.title && p.layout.title.text === title);
           return el ? el.layout.xaxis.range[1] : null; }""", title)


def edit_cell(page, row: int, column: str, value: str) -> None:
    """Type ``value`` into the editor's cell at ``row`` (0-based) and ``column`` (a key): select the row's first
    cell, walk right with the arrow keys, open the cell's editor (Enter), replace its text, Enter commits."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    row_px = 35  # st.data_editor's row height (the header too)
    grid.click(position={"x": 70, "y": row_px * (row + 1) + row_px / 2})  # (x 20 is the row's selection box)
    page.wait_for_timeout(300)
    for _ in range(COLUMN_ORDER.index(column)):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")  # the cell's editor opens on its value (a typed key may lose its first letters)
    page.wait_for_timeout(500)  # (keys sent at once into the fresh editor were lost)
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type(value)
    page.wait_for_timeout(300)
    page.keyboard.press("Enter")
    wait_for_app(page)


def table_in_link(page) -> list[wt.Row]:
    return wt.decode_rows(parse_qs(urlparse(page.url).query)["table"][0])


def test_edit_a_cell_and_the_gantt_changes(app_server, page):
    open_app(page, f"{app_server}/Workbench")
    assert_no_exception(page)
    wait_for_chart_title(page, "FCFS")
    assert metric_values(page) == ["1,100 steps", "500 steps"]  # the article's example, as on Queueing
    assert gantt_x_max(page, "FCFS") == 1200
    edit_cell(page, 0, "output_len", "300")  # long: 1,000 -> 300 tokens: FCFS finishes 300 / 400 / 500
    wait_for_chart_title(page, "FCFS")
    assert_no_exception(page)
    assert metric_values(page)[0] == "400 steps"
    assert gantt_x_max(page, "FCFS") == 500
    assert table_in_link(page)[0]["output_len"] == "300"


def test_pick_fcfs_sjf_and_vtc_for_three_columns(app_server, page):
    open_app(page, f"{app_server}/Workbench")
    wait_for_chart_title(page, "FCFS")
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Run 3").click()
    page.get_by_role("option", name="VTC", exact=True).click()
    wait_for_app(page)
    wait_for_chart_title(page, "VTC")
    assert_no_exception(page)
    names = [t.strip() for t in page.locator('[data-testid="stMarkdown"]')  # (above the numbers)
             .filter(has_text="average finish").all_inner_texts()]
    assert names == ["FCFS: average finish", "SJF (true lengths): average finish", "VTC: average finish"]
    metric_boxes = [m.bounding_box() for m in page.locator('[data-testid="stMetric"]').all()]
    assert len({round(b["y"]) for b in metric_boxes}) == 1  # side by side: three columns of one row
    assert metric_values(page) == ["1,100 steps", "500 steps", "1,100 steps"]  # one client: VTC serves in order
    assert "r3=vtc" in page.url


def test_a_bad_cell_is_named_and_the_other_rows_stay(app_server, page):
    open_app(page, f"{app_server}/Workbench")
    wait_for_chart_title(page, "FCFS")
    edit_cell(page, 1, "prompt_len", "-5")
    assert_no_exception(page)
    errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert any("row 2, prompt tokens: a whole number from 1 to 10,000,000, got -5" in e for e in errors), errors
    warnings = page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    assert any("last valid table (3 requests)" in w for w in warnings), warnings
    assert metric_values(page) == ["1,100 steps", "500 steps"]  # the runs kept the last valid table
    rows = table_in_link(page)
    assert [r["id"] for r in rows] == ["long", "short1", "short2"]
    assert [r["prompt_len"] for r in rows] == ["4", "-5", "4"]  # as typed, the others untouched
    screenshot(page, "workbench-bad-cell")


def test_export_csv_and_import_it_again(app_server, page, tmp_path):
    # Five generated-looking requests from a link, two clients, under FCFS and VTC on four slots.
    rows = [{"id": f"q{i}", "client": "AB"[i % 2], "arrival_step": str(3 * i), "prompt_len": str(40 + 10 * i),
             "output_len": str(60 - 7 * i)} for i in range(5)]
    query = urlencode({"table": wt.encode_rows(rows), "max_num_seqs": 2, "r2": "vtc"})
    open_app(page, f"{app_server}/Workbench?{query}")
    wait_for_chart_title(page, "VTC")
    before = metric_values(page)
    page.get_by_text("Import and export (CSV, scenario JSON)").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Table (CSV)", exact=True).click()
    path = tmp_path / "table.csv"
    download.value.save_as(path)
    assert path.read_text() == wt.to_csv(rows)
    page.get_by_role("button", name="Add a row").click()  # change the table (r5: 100 + 100 tokens), then import
    wait_for_app(page)
    wait_for_chart_title(page, "VTC")
    assert metric_values(page) != before
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    wait_for_app(page)
    wait_for_chart_title(page, "VTC")
    assert_no_exception(page)
    assert metric_values(page) == before
    assert table_in_link(page) == [{k: r.get(k, "") for k in wt.KEYS} for r in rows]


def test_a_link_with_a_small_workload_reproduces_the_view(app_server, page):
    rows = [{"id": "a", "arrival_step": "0", "prompt_len": "64", "output_len": "200", "client": "A"},
            {"id": "b", "arrival_step": "5", "prompt_len": "32", "output_len": "20", "client": "B"},
            {"id": "c", "arrival_step": "6", "prompt_len": "32", "output_len": "30", "client": "B", "priority": "-1"}]
    query = urlencode({"table": wt.encode_rows(rows), "max_num_seqs": 1, "r1": "priority", "r2": "lcf",
                       "unit": "ms"})
    open_app(page, f"{app_server}/Workbench?{query}")
    wait_for_chart_title(page, "Priority")
    assert_no_exception(page)
    # The same runs made here: the link's rows on the default engine with one slot.
    engine = wr.engine_config(999, 16, 1, 2048, True, 0.0, "llama-3.1-8b")
    specs = wt.check_rows(wt.decode_rows(wt.encode_rows(rows)), engine).specs
    expected = [f"{metrics.summary(simulate(sc.config, sc.requests))['finish_ms']['mean']:,.0f} ms"
                for _, sc in wr.scenarios(specs, engine, [wr.RunChoice("priority"), wr.RunChoice("lcf")])]
    assert metric_values(page) == expected
    assert presets.get("article_hol").scenario.config.max_num_seqs == 1  # (the default engine the link changes)


def test_screenshots_normal_and_presentation(app_server, page):
    page.set_viewport_size({"width": 1280, "height": 720})
    for name, query in (("workbench", ""), ("workbench-presentation", "?present=true")):
        open_app(page, f"{app_server}/Workbench{query}")
        wait_for_chart_title(page, "FCFS")
        assert_no_exception(page)
        screenshot(page, name)


def test_a_scenario_json_imports_its_requests_engine_and_policy(app_server, page, tmp_path):
    from sim import scenario as scenario_io

    path = tmp_path / "swap.json"
    preset = presets.get("recompute_vs_swap")
    path.write_text(scenario_io.dumps(preset.scenario.with_config(preemption_mode="swap")))
    open_app(page, f"{app_server}/Workbench")
    wait_for_chart_title(page, "FCFS")
    page.get_by_text("Import and export (CSV, scenario JSON)").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    wait_for_app(page)
    wait_for_chart_title(page, "Priority · swap")
    assert_no_exception(page)
    query = parse_qs(urlparse(page.url).query)
    assert (query["num_blocks"], query["max_num_seqs"], query["r1"], query["r1_mode"]) == (
        ["144"], ["4"], ["priority"], ["swap"])
    assert [r["id"] for r in table_in_link(page)] == ["victim", "grower"]
    trace = simulate(preset.scenario.config.replace(preemption_mode="swap", num_cpu_blocks=144,
                                                    max_steps=wt.MAX_STEPS), preset.scenario.requests)
    assert metric_values(page)[0] == f"{metrics.summary(trace)['finish_steps']['mean']:,.0f} steps"
