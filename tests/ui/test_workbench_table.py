"""The Workbench's pure logic (ui/workbench_table.py), by hand: cells checked one by one with the allowed range, a bad
cell never losing the other rows, the editor's edits, the runs' configs, CSV and the link in and out; the article's
three requests giving 1,100 / 500 as on Queueing; and a scenario exported here running through ``python -m sim run``
with the same outcome, request by request."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import zlib

import pytest

from sim import metrics, policies, presets
from sim.config import Policy, PreemptionMode
from sim.engine import simulate
from sim.events import over_kv_pool, over_max_model_len, over_token_budget
from sim.request import RequestSpec
from sim.request_queue import RequestQueue
from tests.conftest import REPO_ROOT
from ui import workbench
from ui import workbench_runs as wr
from ui import workbench_table as wt

ARTICLE = presets.get("article_hol").scenario
ENGINE = wr.engine_config(999, 16, 1, 2048, True, 0.0, "llama-3.1-8b")  # the article's: one slot
TINY = wr.engine_config(8, 4, 2, 64, True, 0.0, "llama-3.1-8b")  # 8 blocks of 4 tokens = 32 tokens


def rows(*cells: dict[str, str]) -> list[wt.Row]:
    return [{k: c.get(k, "") for k in wt.KEYS} for c in cells]


def row(i: int, **cells: str) -> dict[str, str]:
    return {"id": f"r{i}", "arrival_step": "0", "prompt_len": "4", "output_len": "4", **cells}


# ---- cells ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "value"), [("12", 12), ("1,000", 1000), ("1_000", 1000), ("12.0", 12), ("1e3", 1000),
                                            ("+3", 3)])
def test_whole_numbers_as_people_type_them(raw, value):
    assert wt.parse_whole(raw, 0, 5000) == value


@pytest.mark.parametrize(("raw", "message"), [
    ("2.5", "a whole number from 0 to 5,000 (not a fraction), got '2.5'"),
    ("abc", "a whole number from 0 to 5,000, got 'abc'"),
    ("-5", "a whole number from 0 to 5,000, got -5"),
    ("5001", "a whole number from 0 to 5,000, got 5,001"),
])
def test_a_bad_number_says_what_is_allowed(raw, message):
    with pytest.raises(ValueError, match=None) as e:
        wt.parse_whole(raw, 0, 5000)
    assert str(e.value) == message


def test_the_article_rows_are_valid_and_round_trip_to_the_same_specs():
    table = wt.rows_of(ARTICLE.requests)
    assert table[0] == {"id": "long", "client": "", "arrival_step": "0", "prompt_len": "4", "output_len": "1000",
                        "priority": "", "abort_step": "", "prefix_group": "", "prefix_len": "", "arrival_ms": ""}
    checked = wt.check_rows(table, ENGINE)
    assert checked.is_valid and checked.specs == ARTICLE.requests


def test_every_bad_cell_is_named_at_its_row_and_column_and_the_good_rows_stay():
    table = rows(row(0), row(1, prompt_len="-5"), row(2, arrival_step="2.5"), row(3, id="r0"), row(4),
                 row(5, abort_step="0", arrival_step="9"), row(6, prefix_len="3"), row(7, prefix_len="9",
                                                                                      prefix_group="sys"))
    checked = wt.check_rows(table, ENGINE)
    assert [str(p) for p in checked.problems] == [
        "row 2, prompt tokens: a whole number from 1 to 10,000,000, got -5",
        "row 3, arrival step: a whole number from 0 to 199,999 (not a fraction), got '2.5'",
        "row 4, id: 'r0' is also row 1's id; ids must be unique",
        "row 6, abandon step: at or after the arrival step (9), or empty for never; got 0",
        "row 7, prefix group: required when prefix tokens is 3: name the group of requests that share the prefix",
        "row 8, prefix tokens: at most the prompt (4 tokens), got 9",
    ]
    assert not checked.is_valid
    assert [s.request_id for s in checked.specs] == ["r0", "r4"]  # the rows without a problem


def test_a_request_that_can_never_fit_the_pool_is_marked_on_its_answer_or_its_prompt():
    # 8 blocks of 4 tokens: a 4-token prompt with a 40-token answer needs cdiv(4 + 40 - 1, 4) = 11 blocks.
    checked = wt.check_rows(rows(row(0, output_len="40"), row(1, prompt_len="33"), row(2)), TINY)
    assert [(p.row, p.column) for p in checked.problems] == [(0, "output_len"), (1, "prompt_len")]
    assert checked.problems[0].message == (
        f"can never run on this engine: {over_kv_pool(TINY, 11, 4, 40)}; prompt + answer at most 33 tokens fit the "
        f"pool")
    assert [s.request_id for s in checked.specs] == ["r2"]
    # 33 tokens fit: the last answer token is never stored, 4 + 29 - 1 = 32 = 8 x 4; one more does not.
    assert wt.check_rows(rows(row(0, output_len="29")), TINY).is_valid
    assert not wt.check_rows(rows(row(0, output_len="30")), TINY).is_valid


def test_a_prompt_over_the_budget_without_chunking_or_over_max_model_len_says_that_limit():
    unchunked = wr.engine_config(999, 16, 1, 2048, False, 0.0, "llama-3.1-8b")
    checked = wt.check_rows(rows(row(0, prompt_len="3000"), row(1, prompt_len="2048")), unchunked)
    assert [str(p) for p in checked.problems] == [
        f"row 1, prompt tokens: can never run on this engine: {over_token_budget(unchunked, 3000)}"]
    huge = wr.engine_config(100_000, 16, 1, 2048, True, 0.0, "llama-3.1-8b")
    assert [str(p) for p in wt.check_rows(rows(row(0, prompt_len="200000")), huge).problems] == [
        f"row 1, prompt tokens: can never run on this engine: {over_max_model_len(huge, 200_000)}"]


def test_empty_cells_take_their_defaults_and_required_ones_are_said():
    checked = wt.check_rows(rows(row(0, client="", priority="", output_len="")), ENGINE)
    assert [str(p) for p in checked.problems] == ["row 1, answer tokens: required: a whole number from 1 to 10,000,000"]
    spec = wt.check_rows(rows(row(0)), ENGINE).specs[0]
    assert (spec.client_id, spec.priority, spec.abort_step, spec.prefix_group) == ("default", 0, None, None)
    assert str(wt.check_rows([], ENGINE).problems[0]) == "row 1, id: the table is empty: add at least one request"


def test_a_row_may_give_an_arrival_time_instead_of_a_step():
    table = rows(row(0), row(1, arrival_step="", arrival_ms="1,250.5"), row(2, arrival_step="", arrival_ms="3"))
    checked = wt.check_rows(table, ENGINE)
    assert checked.is_valid
    assert [(s.arrival_step, s.arrival_ms) for s in checked.specs] == [(0, None), (None, 1250.5), (None, 3.0)]
    assert [wt.row_of(s)["arrival_ms"] for s in checked.specs] == ["", "1250.5", "3"]
    assert wt.check_rows(wt.rows_of(checked.specs), ENGINE).specs == checked.specs
    assert wt.new_row(table)["arrival_ms"] == "3" and wt.new_row(table)["arrival_step"] == ""  # (as the last row)
    assert wt.from_csv(wt.to_csv(table)) == table
    assert wt.from_csv("id,arrival_ms,prompt_len,output_len\na,2.5,4,4\n")[0]["arrival_ms"] == "2.5"
    assert wt.decode_rows(wt.encode_rows(table)) == table


def test_an_arrival_is_one_step_or_one_time_and_a_time_has_no_abandon_step():
    table = rows(row(0, arrival_step=""), row(1, arrival_ms="5"), row(2, arrival_step="", arrival_ms="5",
                                                                      abort_step="9"),
                 row(3, arrival_step="", arrival_ms="-1"), row(4, arrival_step="", arrival_ms="soon"))
    assert [str(p) for p in wt.check_rows(table, ENGINE).problems] == [
        "row 1, arrival step: required: a whole number from 0 to 199,999 (or a time in arrival ms)",
        "row 2, arrival ms: give an arrival step or a time in arrival ms, not both",
        "row 3, abandon step: empty for a request given a time (arrival ms): its arrival step is known only once it "
        "arrives",
        "row 4, arrival ms: a time in ms from 0 to 1,000,000,000, got '-1'",
        "row 5, arrival ms: a time in ms from 0, got 'soon'",
    ]


# ---- the editor's edits and the buttons -------------------------------------------------------------------------
def test_edits_deletions_and_additions_apply_in_the_editors_order():
    table = rows(row(0), row(1), row(2))
    out = wt.apply_edits(table, {"edited_rows": {"1": {"output_len": 300.0}}, "deleted_rows": [0],
                                 "added_rows": [{"prompt_len": "7"}]})
    assert [r["id"] for r in out] == ["r1", "r2", "r3"]
    assert out[0]["output_len"] == "300"  # (a float from the editor, shown as typed)
    assert out[2] == {"id": "r3", "client": "", "arrival_step": "0", "prompt_len": "7", "output_len": "100",
                      "priority": "", "abort_step": "", "prefix_group": "", "prefix_len": "", "arrival_ms": ""}


def test_duplicate_gives_a_fresh_id_after_the_row():
    table = wt.duplicate_row(wt.duplicate_row(rows(row(0), row(1)), 0), 0)
    assert [r["id"] for r in table] == ["r0", "r0-copy2", "r0-copy", "r1"]
    assert wt.new_row(rows(row(0), row(2)))["id"] == "r3"  # r2 is taken


# ---- the runs ---------------------------------------------------------------------------------------------------
def test_each_run_choice_sets_its_policy_and_settings():
    fcfs_swap = wr.RunChoice("fcfs", "swap", True).config(ENGINE)
    assert (fcfs_swap.policy, fcfs_swap.preemption_mode, fcfs_swap.num_cpu_blocks,
            fcfs_swap.enable_prefix_caching) == (Policy.FCFS, PreemptionMode.SWAP, 999, True)
    predicted = wr.RunChoice("sjf_predicted", sigma=1.5, guard_steps=200).config(ENGINE)
    assert (predicted.policy, predicted.prediction_error_sigma, predicted.starvation_threshold_steps) == (
        Policy.SJF_PREDICTED, 1.5, 200)
    vtc = wr.RunChoice("vtc", weights="A:2, B=1").config(ENGINE)
    assert vtc.policy is Policy.VTC and vtc.client_weight("A") == 2.0 and vtc.client_weight("C") == 1.0
    limited = wr.RunChoice("rate_limit", rate_limit=3, window_steps=50).config(ENGINE)
    assert (limited.policy, limited.rate_limit_max_requests, limited.rate_limit_window_steps) == (Policy.FCFS, 3, 50)
    assert wr.RunChoice("lcf").config(ENGINE).policy is Policy.LCF
    assert wr.run_labels([wr.RunChoice("fcfs"), wr.RunChoice("fcfs", "swap"), wr.RunChoice("fcfs"),
                          wr.RunChoice("sjf_predicted", sigma=0.8)]) == [
        "FCFS (run 1)", "FCFS · swap", "FCFS (run 3)", "SJF (predicted) σ 0.8"]


def test_the_run_picker_offers_the_records_marked_for_it_with_their_labels():
    offered = [name for name, spec in policies.POLICIES.items() if spec.workbench]
    assert list(wr.POLICIES) == [*offered, "rate_limit"]  # (rate_limit: FCFS with a limit, not a queue policy)
    for name in offered:
        assert wr.POLICIES[name][0] == policies.POLICIES[name].label
        assert wr.RunChoice(name).config(ENGINE).policy is policies.POLICIES[name].name
        assert wr.RunChoice(name).label().startswith(policies.POLICIES[name].label)
    assert [k.options for k in [workbench.policy_knob(1)]] == [("off", *offered, "rate_limit")]


@pytest.mark.parametrize("name", list(wr.POLICIES))
def test_a_runs_own_settings_follow_its_records_knobs(name):
    choice = wr.RunChoice(name, sigma=1.5, guard_steps=200, weights="A:2")
    knobs = choice.knobs
    config = choice.config(ENGINE)
    assert (config.prediction_error_sigma == 1.5) == ("prediction_error_sigma" in knobs)
    assert (config.starvation_threshold_steps == 200) == ("starvation_threshold_steps" in knobs)
    assert (config.client_weight("A") == 2.0) == ("client_weights" in knobs)  # VTC's and LCF's
    shown = {k.key for k in workbench.option_knobs(1, name)}
    assert ("r1_sigma" in shown) == ("prediction_error_sigma" in knobs)
    assert ("r1_guard" in shown) == ("starvation_threshold_steps" in knobs)


def test_a_file_policy_the_workbench_does_not_offer_comes_in_as_fcfs(monkeypatch):
    toy = policies.PolicySpec("lpf", "Longest prompt first", lambda c, t, v: RequestQueue(), RequestQueue,
                              workbench=False)
    monkeypatch.setitem(policies.POLICIES, "lpf", toy)
    config = ENGINE.replace(policy="lpf")
    assert wr.run_choice_of(config).policy == "fcfs"
    assert wr.config_not_kept(config) == ["policy"]


@pytest.mark.parametrize("raw", ["A", "A:0", "A:x", ":2", "A:1, A:2"])
def test_bad_vtc_weights_say_what_is_wrong(raw):
    with pytest.raises(ValueError, match="VTC weights"):
        wr.parse_weights(raw)


def test_the_article_on_the_workbench_gives_1100_and_500_like_the_queueing_lesson():
    specs = wt.check_rows(wt.rows_of(ARTICLE.requests), ENGINE).specs
    runs = wr.scenarios(specs, ENGINE, [wr.RunChoice("fcfs"), wr.RunChoice("sjf")])
    means = {label: metrics.summary(simulate(sc.config, sc.requests))["finish_steps"]["mean"] for label, sc in runs}
    assert means == {"FCFS": 1100.0, "SJF (true lengths)": 500.0}


def test_an_exported_scenario_runs_through_the_cli_with_the_same_outcomes(tmp_path):
    table = rows(row(0, client="A", output_len="60"), row(1, client="B", arrival_step="2", output_len="9"),
                 row(2, client="B", arrival_step="3", prompt_len="20", output_len="30", abort_step="10"),
                 row(3, client="A", arrival_step="3", priority="-1", prefix_group="sys", prefix_len="4",
                     prompt_len="12"))
    engine = wr.engine_config(24, 4, 2, 16, True, 0.0, "llama-3.1-8b")
    checked = wt.check_rows(table, engine)
    assert checked.is_valid
    specs = checked.specs
    (label, scenario), = wr.scenarios(specs, engine, [wr.RunChoice("vtc", "swap", True, weights="A:2")])
    path = tmp_path / "workbench.json"
    path.write_text(wt.scenario_json(specs, scenario.config, label))
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, "-m", "sim", "run", str(path), "--out", str(out)], cwd=REPO_ROOT, check=True,
                   capture_output=True)
    cli = json.loads(out.read_text())["requests"]
    trace = simulate(scenario.config, scenario.requests)
    assert cli == trace.request_records()
    # Two slots: r0 and r1 run; r2's user leaves at step 10 while it waits; r3 takes r1's slot at step 11.
    assert [(r["id"], r["final_status"], r["finish_step"]) for r in cli] == [
        ("r0", "FINISHED_LENGTH_CAPPED", 59), ("r1", "FINISHED_LENGTH_CAPPED", 10), ("r2", "FINISHED_ABORTED", 10),
        ("r3", "FINISHED_LENGTH_CAPPED", 14)]


# ---- CSV and the link ---------------------------------------------------------------------------------------------
def test_csv_round_trip_keeps_cells_as_typed():
    table = rows(row(0, client="A,B", priority="-2"), row(1, prompt_len="-5"))
    text = wt.to_csv(table)
    assert text.splitlines()[0] == "id,client,arrival_step,prompt_len,output_len,priority,abort_step,prefix_group," \
                                   "prefix_len,arrival_ms"
    assert wt.from_csv(text) == table


@pytest.mark.parametrize(("text", "message"), [
    ("", "the file is empty"),
    ("id,arrival_step,prompt_len,output_len,colour\n", "unknown column 'colour'"),
    ("id,arrival_step,prompt_len\nr0,0,4\n", "missing column 'output_len'"),
    ("id,arrival_step,prompt_len,output_len\n", "a header line but no requests"),
    ("id,arrival_step,prompt_len,output_len\nr0,0,4,4,9\n", "line 2: more cells than the 4 columns"),
])
def test_a_bad_csv_says_why(text, message):
    with pytest.raises(ValueError, match=message):
        wt.from_csv(text)


def test_a_csv_of_more_rows_than_the_table_holds_is_refused():
    text = "id,arrival_step,prompt_len,output_len\n" + "".join(f"r{i},0,4,4\n" for i in range(wt.MAX_ROWS + 1))
    with pytest.raises(ValueError, match="more than 2,000 rows"):
        wt.from_csv(text)


def test_the_link_holds_up_to_50_rows_and_reads_back_the_same():
    table = rows(*(row(i, client="AB"[i % 2], prompt_len=str(10 + i)) for i in range(wt.URL_MAX_ROWS)))
    encoded = wt.encode_rows(table)
    assert encoded.startswith("1.") and len(encoded) < 1500
    assert wt.decode_rows(encoded) == table
    assert wt.encode_rows([*table, row(99)]) is None  # 51 rows: the JSON is the way to share it


@pytest.mark.parametrize(("param", "message"), [
    ("2.abc", "not a workbench table"),
    ("1.!!!", "cut or changed"),
    ("1." + base64.urlsafe_b64encode(zlib.compress(b'{"a": 1}')).decode(), "1 to 50 rows"),
    ("1." + base64.urlsafe_b64encode(zlib.compress(b"[[1, 2]]")).decode(), "not a list of cells"),
    ("1." + base64.urlsafe_b64encode(zlib.compress(b"[" + b'["x"],' * 400_000 + b'["x"]]')).decode(),
     "longer than|cut or changed"),
])
def test_a_tampered_link_is_refused_with_a_reason(param, message):
    with pytest.raises(ValueError, match=message):
        wt.decode_rows(param)


def test_a_link_that_unpacks_to_megabytes_is_refused_unread():
    bomb = "1." + base64.urlsafe_b64encode(zlib.compress(b" " * 50_000_000, 9)).decode()
    assert len(bomb) < wt.MAX_URL_CHARS * 10
    with pytest.raises(ValueError):
        wt.decode_rows(bomb)


def test_a_scenario_file_imports_with_what_the_table_cannot_hold_named():
    text = json.dumps({"config": {"num_blocks": 64, "policy": "priority"},
                       "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 5, "max_tokens": 9},
                                    {"id": "b", "arrival_step": 1, "prompt_len": 4, "output_len": 5}]})
    scenario = wt.from_json(text)
    assert scenario.config.policy is Policy.PRIORITY
    assert wt.dropped_fields(scenario.requests) == ["max_tokens of 1 request"]
    assert wt.rows_of(scenario.requests)[1]["arrival_step"] == "1"
    assert wt.dropped_fields([RequestSpec("x", 0, 1, 1)]) == []


def test_a_files_config_maps_to_run_one_and_what_cannot_be_kept_is_named():
    config = presets.get("recompute_vs_swap").scenario.config.replace(preemption_mode="swap", seed=3)
    choice = wr.run_choice_of(config)
    assert (choice.policy, choice.preemption_mode) == ("priority", "swap")
    # swap here gets CPU space as large as the pool (144 blocks), the file had 400; the prediction seed has no knob
    assert wr.config_not_kept(config) == ["num_cpu_blocks", "seed"]
    fair = presets.get("weighted_vtc").scenario.config.replace(policy="vtc")
    assert wr.run_choice_of(fair).config(wr.engine_of(fair)).client_weights == fair.client_weights
    assert wr.config_not_kept(ARTICLE.config) == []
