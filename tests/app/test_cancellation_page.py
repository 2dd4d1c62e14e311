"""The Cancellation lesson driven through AppTest: every preset runs, the article's numbers are on screen, knobs
rerun by key, URL values apply, and the rerun after a slider change is timed (printed with ``-s``)."""


import pytest

from sim import presets
from tests.app.conftest import assert_clean, clean_notices, metric_values, notice_text, open_page

PAGE = "pages/3_Cancellation.py"


def notice(at) -> str:
    return " ".join(i.value for i in at.info)


def chart_titles(at) -> str:
    return " ".join(chart.proto.spec for chart in at.get("plotly_chart"))


def test_article_numbers_on_screen():
    at = open_page(PAGE)
    assert_clean(at)
    values = metric_values(at)
    assert values["Generated for nobody, no abort"] == "700 tokens"
    assert values["Its KV at the end, no abort"] == "131 MB"
    assert values["Freed by the abort at step 300"] == "39 MB"
    assert values["'waiting' starts sooner by"] == "700 steps"
    assert values["abort on disconnect: tokens for nobody"] == "0"
    assert values["no abort: tokens for nobody"] == "700"
    captions = " ".join(c.value for c in at.caption)
    assert "at step 300 with the abort, step 1,000 without" in captions
    assert "63 blocks = 132 MB allocated" in captions and "19 blocks = 40 MB allocated" in captions
    text = notice(at)
    assert "1,000 tokens = 131 MB" in text and "(39 MB) were freed at step 300" in text
    assert "700 steps earlier" in text
    specs = chart_titles(at)
    assert "an abort freed 39 MB at step 300" in specs and "131 MB (6% of the pool) held for nobody" in specs


@pytest.mark.parametrize("preset", [p.key for p in presets.presets_for("cancellation")])
def test_every_preset_runs(preset):
    at = open_page(PAGE, {"preset": preset})
    assert_clean(at)
    variants = presets.get(preset).variants
    assert sum(label.endswith("tokens for nobody") for label in metric_values(at)) == len(variants)
    assert "What to notice" in notice(at)
    assert len(at.get("plotly_chart")) >= 4 + len(variants)  # KV, waste, waiting, queue + one Gantt per server
    assert at.dataframe  # the metrics table


def test_impatient_users_compare_three_servers():
    at = open_page(PAGE, {"preset": "impatient_users"})
    assert_clean(at)
    values = metric_values(at)
    waste = [int(values[f"{label}: tokens for nobody"].replace(",", ""))
             for label in ("abort at once", "notices after 50 steps", "no abort")]
    assert waste[0] == 0 < waste[1] < waste[2]
    text = notice(at)
    assert "Useful throughput (tokens somebody read" in text and "The waiting time others lose" in text
    assert "A server that notices after 50 steps kept" in text


def test_stops_preset_explains_the_late_stop_string():
    at = open_page(PAGE, {"preset": "stops"})
    assert_clean(at)
    assert metric_values(at)["check every step: tokens for nobody"] == "12"
    assert metric_values(at)["stop at max_tokens: tokens for nobody"] == "8,316"
    assert "each ran one token past their end" in notice(at)
    at.selectbox(key="cancellation.stop_marker").set_value("token").run()
    assert_clean(at)
    assert metric_values(at)["check every step: tokens for nobody"] == "0"
    at.slider(key="cancellation.max_tokens").set_value(304).run()
    assert_clean(at)
    assert "still runs to max_tokens (304)" in notice(at)
    assert at.query_params["max_tokens"] in ("304", ["304"])


def test_leaving_later_frees_more_kv():
    at = open_page(PAGE)
    at.slider(key="cancellation.leave_after_tokens").set_value(500).run()
    assert_clean(at)
    values = metric_values(at)
    # 500 tokens of KV = 65.5 MB, freed at step 500; 500 tokens for nobody; the waiter starts 500 steps sooner.
    assert values["Freed by the abort at step 500"] == "66 MB"
    assert values["Generated for nobody, no abort"] == "500 tokens"
    assert values["'waiting' starts sooner by"] == "500 steps"
    assert at.query_params["leave_after_tokens"] in ("500", ["500"])


def test_two_slots_leave_nobody_waiting():
    at = open_page(PAGE)
    at.slider(key="cancellation.engine.max_num_seqs").set_value(2).run()
    assert_clean(at)
    values = metric_values(at)
    assert "'waiting' starts sooner by" not in values  # nobody waits for the slot any more
    assert values["Generated for nobody, no abort"] == "700 tokens"  # the waste stays


def test_detection_delay_and_timeout_knobs():
    at = open_page(PAGE, {"preset": "impatient_users"})
    at.slider(key="cancellation.delay").set_value(120).run()
    assert_clean(at)
    assert "notices after 120 steps: tokens for nobody" in metric_values(at)
    at.slider(key="cancellation.timeout").set_value(300).run()
    assert_clean(at)
    assert "With a 300-step client timeout" in notice(at)
    at.slider(key="cancellation.abandon_rate").set_value(0.0).run()
    assert_clean(at)
    assert metric_values(at)["notices after 120 steps: tokens for nobody"] != "0"  # timeouts still leave users


def test_url_settings_apply_and_bad_values_warn():
    at = open_page(PAGE, {"preset": "impatient_users", "abandon_rate": "0", "unit": "ms"})
    assert_clean(at)
    assert all(v == "0" for k, v in metric_values(at).items() if k.endswith("tokens for nobody"))
    assert "ms on average" in " ".join(c.value for c in at.caption)
    at = open_page(PAGE, {"leave_after_tokens": "banana"})
    assert_clean(at)
    assert any("leave_after_tokens=banana" in w.value for w in at.warning)
    assert metric_values(at)["Freed by the abort at step 300"] == "39 MB"  # the default


def test_no_server_chosen_asks_for_one():
    at = open_page(PAGE)
    at.multiselect(key="cancellation.servers").set_value([]).run()
    assert_clean(at)
    assert any("at least one server" in w.value for w in at.warning)


def test_presentation_mode_runs():
    at = open_page(PAGE, {"present": "1", "preset": "stops"})
    assert_clean(at)


@pytest.mark.parametrize(("preset", "key", "values"), [
    ("article_abandon", "cancellation.leave_after_tokens", (310, 320, 330)),
    ("impatient_users", "cancellation.abandon_rate", (0.35, 0.4, 0.45)),
    ("stops", "cancellation.max_tokens", (528, 544, 560)),
])
def test_slider_changes_rerun_cleanly(preset, key, values):
    """Several slider moves in a row each rerun the page without an error and change what it shows. The rerun's
    speed is measured by benchmarks/page_rerun.py, not here."""
    at = open_page(PAGE, {"preset": preset})
    seen = [[m.value for m in at.metric]]
    for value in values:
        at.slider(key=key).set_value(value).run()
        assert_clean(at)
        seen.append([m.value for m in at.metric])
    assert all(seen[i] != seen[i + 1] for i in range(len(seen) - 1)), seen  # the numbers followed each move


def test_sentences_credit_the_abort_and_the_late_server_honestly():
    # Every leaver aborted at once: nothing was wasted *because* of the aborts (not "nothing to waste").
    text = clean_notices(PAGE, {"preset": "impatient_users", "servers": "abort at once"})
    assert "abort at once aborted 64 requests the moment their users left" in text
    # 20-token answers end before a 370-step-late server notices anyone: it never aborts.
    text = clean_notices(PAGE, {"preset": "impatient_users", "output_median": "20", "delay": "370"})
    assert "never got to abort: 64 abandoned requests finished for nobody within the 370 steps" in text
    assert "until it noticed" not in text
    # The default: 22 of 25 aborted when noticed, 3 finished first.
    assert "it aborted 22 when it noticed; the other 3 requests finished for nobody" in clean_notices(
        PAGE, {"preset": "impatient_users"})


def test_nobody_is_said_to_start_sooner_who_then_gave_up():
    # With a 300-step timeout the article's 'waiting' user times out under both servers: starting sooner under
    # the abort helped nobody, so no card or sentence claims it.
    at = open_page(PAGE, {"timeout": "300"})
    assert_clean(at)
    assert not any("starts sooner" in label for label in metric_values(at))
    assert "steps earlier" not in notice_text(at)


def test_a_one_block_abort_says_one_block():
    at = open_page(PAGE, {"leave_after_tokens": "10", "answer_tokens": "2250"})
    assert_clean(at)
    assert any(c.value.startswith("10 tokens; 1 block = 2 MB allocated") for c in at.caption)


def test_an_uploaded_late_server_keeps_its_delay_and_its_name():
    """The download of "notices after 120 steps", uploaded again: the late server runs (and is named) with the
    file's 120 steps, not the preset's 50."""
    from sim.scenario import scenario_to_dict

    p = presets.get("impatient_users")
    late = p.scenario.with_config(disconnect_detect_delay_steps=120)
    at = open_page(PAGE, {"preset": "impatient_users"}, session={"cancellation.uploaded": scenario_to_dict(late)})
    assert not at.exception and not at.error
    assert at.slider(key="cancellation.delay").value == 120
    assert any(m.label.startswith("notices after 120 steps") for m in at.metric)


def test_where_nobody_leaves_nobody_is_said_to_have_stayed():
    at = open_page(PAGE, {"preset": "stops"})
    text = notice_text(at) + " ".join(c.value for c in at.caption)
    assert "The waiting time others lose: the 24 users waited 1,200 steps on average" in text
    assert "stayed" not in text


def test_small_counts_read_right():
    text = notice_text(open_page(PAGE, {"answer_tokens": "16", "leave_after_tokens": "10"}))
    assert "(1 block of 16 tokens)" in text and "1 blocks" not in text
    text = notice_text(open_page(PAGE, {"preset": "stops", "stop_marker": "string"}))
    assert "answers ending on a stop string each ran one token past their end" in text
    assert "the 0 ending on a stop token" not in text  # no answer ends on a stop token: nothing to say
