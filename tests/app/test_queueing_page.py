"""The Queueing lesson driven through AppTest: every preset runs, knobs rerun by key, URL values apply."""

import json

import pytest

from sim import presets
from sim.events import over_kv_pool
from tests.app.conftest import (
    assert_clean,
    chart_cursors,
    metric_values,
    notice_text,
    open_page,
    player_data,
    settle_sweeps,
    sweep_running,
)
from ui import sweeps

PAGE = "pages/1_Queueing.py"


def test_article_preset_shows_1100_and_500():
    at = open_page(PAGE)
    assert_clean(at)
    values = metric_values(at)
    assert values["FCFS: average finish"] == "1,100 steps"
    assert values["SJF (true lengths): average finish"] == "500 steps"
    notice = " ".join(i.value for i in at.info)
    assert "from 1,100 to 500 steps" in notice
    assert "Head-of-line blocking" in notice


def _gantt_annotations(at, title: str) -> list[str]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    gantt = next(s for s in specs if s["layout"]["title"]["text"] == title)
    return [a["text"] for a in gantt["layout"].get("annotations", [])]


def test_starvation_outlines_the_starving_request_not_a_blocker():
    # Under SJF the long request waits behind a stream of short ones: no head-of-line blocker to name; its own
    # row is outlined (named beside its bar, since 121 rows hide the tick labels).
    at = open_page(PAGE, {"preset": "starvation"})
    assert_clean(at)
    notice = " ".join(i.value for i in at.info)
    assert "Under SJF, no guard, long waited 4,800 engine steps" in notice and "Head-of-line blocking" not in notice
    # In this overload the guard promotes almost everyone, in FCFS's order: it says what that cost.
    assert ("The guard promoted 116 of the 121 requests" in notice
            and "the guard saved long at the price of 96% of SJF's gain" in notice)
    assert [text for text in _gantt_annotations(at, "SJF, no guard") if "long" in text] == ["\u2190 long"]


@pytest.mark.parametrize("preset", [p.key for p in presets.presets_for("queueing")])
def test_every_preset_runs(preset):
    at = open_page(PAGE, {"preset": preset})
    assert_clean(at)
    assert len(at.metric) == len(presets.get(preset).variants)


def test_slider_change_reruns_with_new_numbers():
    at = open_page(PAGE)
    at.slider(key="queueing.engine.max_num_seqs").set_value(3).run()
    assert_clean(at)
    # Three slots: every request runs at once, so both orders finish at 1,000 / 100 / 100 -> mean 400.
    values = metric_values(at)
    assert values["FCFS: average finish"] == values["SJF (true lengths): average finish"] == "400 steps"
    assert at.query_params["max_num_seqs"] in ("3", ["3"])


def test_url_settings_apply_and_bad_values_warn():
    at = open_page(PAGE, {"max_num_seqs": "3"})
    assert_clean(at)
    assert metric_values(at)["FCFS: average finish"] == "400 steps"
    at = open_page(PAGE, {"max_num_seqs": "banana", "preset": "nope"})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "max_num_seqs=banana" in warnings and "nope" in warnings
    assert metric_values(at)["FCFS: average finish"] == "1,100 steps"  # defaults


def test_unit_toggle_shows_milliseconds():
    at = open_page(PAGE, {"unit": "ms"})
    assert_clean(at)
    assert metric_values(at)["FCFS: average finish"].endswith(" ms")


def test_no_policy_chosen_asks_for_one():
    at = open_page(PAGE)
    at.multiselect(key="queueing.policies").set_value([]).run()
    assert_clean(at)
    assert any("at least one policy" in w.value for w in at.warning)


def test_the_player_gets_each_run_and_opens_where_the_link_says():
    at = open_page(PAGE, {"step": "1000"})
    assert_clean(at)
    data = player_data(at)
    assert [r["label"] for r in data["runs"]] == ["FCFS", "SJF (true lengths)"]
    assert data["default_step"] == 0  # the first refusal to admit: short1 and short2 find the one slot taken
    # Until the player has been in view, it gets a preview window of 100 steps around the linked step.
    assert all((r["first"], r["end"], r["num_steps"]) == (950, 1050, 1200) for r in data["runs"])
    # The Gantt charts and the queue chart carry the player's cursor, each on its own run's steps.
    cursors = chart_cursors(at)
    assert cursors["FCFS"] == {"runs": ["FCFS"], "unit": "steps"}
    assert cursors["SJF (true lengths): KV cache in use"] == {"runs": ["SJF (true lengths)"], "unit": "steps"}
    assert cursors["Waiting queue and running batch"]["runs"] == ["FCFS", "SJF (true lengths)"]


def test_a_bad_step_in_the_link_is_warned_about():
    at = open_page(PAGE, {"step": "soon"})
    assert_clean(at)
    assert any("step `soon` was ignored" in w.value for w in at.warning)
    at = open_page(PAGE, {"step": "99999"})
    assert any("past the end of these runs (step 1,199)" in w.value for w in at.warning)

def _sweep_chart(at) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(s for s in specs if "as predictions get worse" in s["layout"]["title"]["text"])


def test_prediction_error_sweep_fills_in(monkeypatch):
    """Out of time (budget 0), the rerun draws the policies and the sweep points ready so far on the full x axis;
    reruns (in a browser: the sweep's polls) complete it with both references."""
    monkeypatch.setattr(sweeps, "RERUN_BUDGET_S", 0.0)
    at = open_page(PAGE, {"preset": "predicted_lengths", "max_num_seqs": "13"}, settle=False)  # runs no test made
    assert_clean(at)
    assert len(at.metric) == 3
    assert sweep_running(at)
    chart = _sweep_chart(at)
    sigmas = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0]
    assert len(chart["data"][0]["x"]) < len(sigmas)
    assert chart["layout"]["xaxis"]["range"][0] < 0 < 2 < chart["layout"]["xaxis"]["range"][1]
    assert "Predicted SJF slides" not in notice_text(at)  # the sweep's sentence waits for it
    settle_sweeps(at)
    assert_clean(at)
    chart = _sweep_chart(at)
    assert chart["data"][0]["x"] == sigmas
    assert [t["name"].split(" (")[0] for t in chart["data"][1:]] == ["SJF, true lengths", "FCFS"]
    # Complete: the notice quotes the chart's end points.
    sjf, fcfs = (t["y"][0] for t in chart["data"][1:])
    last = chart["data"][0]["y"][-1]
    text = notice_text(at)
    assert f"Predicted SJF slides from SJF's {sjf:,.0f} steps toward FCFS's {fcfs:,.0f} as predictions get" in text
    assert f"{last:,.0f} steps at sigma 2, {(last - sjf) / (fcfs - sjf):.0%} of the way" in text


def test_requests_too_big_for_the_pool_are_reported_not_silently_dropped():
    # 8 blocks (128 tokens) is the smallest pool: most of the busy server's answers can never fit. The averages
    # then cover the few that ran, and the page says so above them.
    at = open_page(PAGE, {"preset": "busy_server", "num_blocks": "8"})
    assert_clean(at)
    warning = " ".join(w.value for w in at.warning)
    assert "289 of 300 requests can never run on this engine and were rejected on arrival" in warning
    tiny = presets.get("busy_server").scenario.config.replace(num_blocks=8)  # (its words: sim.events, their home)
    assert f"**: {over_kv_pool(tiny, 247, who='they', many=True)}: enlarge the KV pool to run them." in warning
    # The article's two short answers still fit; both orders run them alike.
    at = open_page(PAGE, {"num_blocks": "8"})
    assert "1 of 3 requests can never run" in " ".join(w.value for w in at.warning)
    assert "SJF (true lengths) gave the same average finish time as FCFS on this workload: 150 steps." in \
        notice_text(at)


@pytest.mark.parametrize("raw", ["", "banana", "fcfs,banana"])
def test_a_bad_or_empty_policy_list_in_the_url_never_crashes(raw):
    # "" is what the page itself writes when every policy is deselected: the page asks for one, as after the click.
    at = open_page(PAGE, {"policies": raw})
    assert_clean(at)
    if raw:
        warnings = " ".join(w.value for w in at.warning)
        assert f"policies={raw}" in warnings and "Using the default, FCFS, SJF (true lengths)" in warnings
        assert at.multiselect(key="queueing.policies").value == ["FCFS", "SJF (true lengths)"]
    else:
        assert any("at least one policy" in w.value for w in at.warning)


def test_a_policy_list_given_twice_with_a_bad_name_names_the_whole_setting():
    # ?policies=banana&policies=FCFS: the warning shows the setting that was ignored (both parts), not just "FCFS".
    at = open_page(PAGE, {"policies": ["banana", "FCFS"]}, settle=False)
    assert_clean(at)
    warning = next(w.value for w in at.warning if "policies=" in w.value)
    assert "`policies=banana,FCFS` was ignored" in warning


@pytest.mark.parametrize("query", [{"present": "x"}, {"export": "gif"}])
def test_a_bad_display_setting_in_the_link_is_warned_about_where_the_page_starts(query):
    at = open_page(PAGE, query, settle=False)
    assert_clean(at)
    key = next(iter(query))
    assert any(f"`{key}=" in w.value for w in at.main.warning)  # not hidden in the collapsed Display expander
    assert not any(f"`{key}=" in w.value for w in at.sidebar.warning)


def test_a_bad_url_value_is_shown_as_text_not_markdown():
    at = open_page(PAGE, {"unit": "[x](https://example.com)"})
    assert_clean(at)
    warning = next(w for w in at.warning if "unit=" in w.value)
    assert "`unit=[x](https://example.com)`" in warning.value  # a code span: no link is drawn


def test_an_uploaded_scenario_outside_the_sliders_ranges_runs_as_uploaded():
    # A valid scenario with a 4-block pool (the slider starts at 8) and a 5 requests/step workload (it stops at 2):
    # the sliders take the file's values in, instead of the page failing to draw them.
    uploaded = {"name": "tiny pool", "config": {"num_blocks": 4, "block_size": 16, "max_num_seqs": 2},
                "workload": {"num_requests": 20, "rate_per_step": 5.0, "prompt_median": 8, "prompt_sigma": 0.0,
                             "output_median": 8, "output_sigma": 0.0}}
    at = open_page(PAGE, settle=False, session={"queueing.uploaded": uploaded})  # what the upload box stores
    assert_clean(at)
    assert at.slider(key="queueing.engine.num_blocks").value == 4
    assert at.slider(key="queueing.workload.rate").value == 5.0


def test_a_bad_url_value_stays_warned_about_until_a_setting_changes():
    # The sweep of predicted_lengths reruns the page when it completes: the warning must not vanish with it.
    at = open_page(PAGE, {"preset": "predicted_lengths", "unit": "banana"}, settle=False)
    assert any("`unit=banana`" in w.value for w in at.warning)
    settle_sweeps(at)
    assert any("`unit=banana`" in w.value for w in at.warning)
    at.button_group(key="queueing.unit").set_value("ms").run()  # the reader sets it: the link no longer matters
    assert not any("unit=banana" in w.value for w in at.warning)


def test_a_policy_whose_name_holds_a_comma_survives_the_link():
    # The starvation preset's "SJF, no guard": the link the page writes after FCFS is deselected must reopen.
    at = open_page(PAGE, {"preset": "starvation", "policies": "SJF, no guard,SJF + guard"})
    assert_clean(at)
    assert not any("policies=" in w.value for w in at.warning)
    assert at.multiselect(key="queueing.policies").value == ["SJF, no guard", "SJF + guard"]


def _changes_note(at) -> list[str]:
    return [c.value for c in at.caption if "Changed from the preset" in c.value]


def test_changed_settings_are_named_and_one_button_brings_the_preset_back():
    untouched = metric_values(open_page(PAGE, {"preset": "busy_server"}))
    at = open_page(PAGE, {"preset": "busy_server"})
    reset = [b for b in at.button if b.key == "queueing.reset_settings"]
    assert _changes_note(at) == [] and not reset  # nothing changed: nothing to say, no button
    at.slider(key="queueing.engine.num_blocks").set_value(800).run()
    at.slider(key="queueing.engine.max_num_seqs").set_value(4).run()
    settle_sweeps(at)
    assert metric_values(at) != untouched
    (note,) = _changes_note(at)
    assert "KV pool size (blocks) 2,000 → 800; max_num_seqs (batch slots) 16 → 4" in note
    assert at.query_params["num_blocks"] == "800"
    at.button(key="queueing.reset_settings").click().run()
    settle_sweeps(at)
    assert_clean(at)
    assert at.slider(key="queueing.engine.num_blocks").value == 2000
    assert at.slider(key="queueing.engine.max_num_seqs").value == 16
    assert "num_blocks" not in at.query_params and "max_num_seqs" not in at.query_params
    assert _changes_note(at) == [] and metric_values(at) == untouched


def test_the_changes_note_lists_four_settings_and_counts_the_rest():
    at = open_page(PAGE, {"preset": "busy_server", "num_blocks": "800", "max_num_seqs": "4", "seed": "3",
                          "num_requests": "100", "rate": "0.1"})
    (note,) = _changes_note(at)
    assert note.count("→") == 4 and "; and 1 more." in note


def test_the_request_a_sentence_names_is_marked_in_that_runs_chart():
    # "The price of SJF (true lengths)'s better average: r39 now finishes last": r39 is outlined in the SJF charts
    # (300 rows: named beside its bar), as FCFS's chart marks the request its own sentence names.
    at = open_page(PAGE, {"preset": "busy_server"})
    assert "r39 now finishes last" in notice_text(at)
    assert _gantt_annotations(at, "SJF (true lengths)") == ["\u2190 r39"]
    assert _gantt_annotations(at, "SJF (predicted)") == ["\u2190 r39"]
    assert _gantt_annotations(at, "FCFS") == ["\u2190 r299"]


def test_the_starvation_sentences_follow_the_time_axis():
    text = notice_text(open_page(PAGE, {"preset": "starvation", "unit": "ms"}))
    assert "everyone's average finish went from 10,721 to 13,793 ms" in text  # as the metrics above show it
    assert "averages 13,793 ms, close to FCFS's 13,929" in text


def test_a_key_given_twice_in_a_link():
    # A list takes both values; a single setting takes the last and says so.
    at = open_page(PAGE, {"policies": ["FCFS", "SJF (true lengths)"], "max_num_seqs": ["2", "3"]})
    assert not at.exception
    assert at.multiselect(key="queueing.policies").value == ["FCFS", "SJF (true lengths)"]
    assert at.slider(key="queueing.engine.max_num_seqs").value == 3
    assert any("The link gives `max_num_seqs` 2 times; using the last, `3`." in w.value for w in at.warning)
