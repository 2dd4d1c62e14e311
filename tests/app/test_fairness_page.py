"""The Fairness lesson driven through AppTest: every preset runs with its numbers on screen, knobs rerun by key
(engine, clients, weights, lift, rate limit), URL values apply, bad settings show a message, and the rerun after a
slider change is timed (printed; run with -s to see it)."""

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from sim import presets
from tests.app.conftest import (
    ROOT,
    SWEEP_RUNNING,
    as_read,
    assert_clean,
    clean_notices,
    metric_values,
    open_page,
    settle_sweeps,
)
from ui import sweeps

PAGE = "pages/2_Fairness.py"
PRESETS = [p.key for p in presets.presets_for("fairness")]


def notice(at) -> str:
    return " ".join(i.value for i in at.info)


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_runs_and_shows_its_numbers(preset):
    at = open_page(PAGE, {"preset": preset})
    assert_clean(at)
    p = presets.get(preset)
    values = metric_values(at)
    assert list(values) == [f"{label}: total throughput" for label, _ in p.variants]
    assert all(v.endswith(" tokens/s") for v in values.values())
    assert "What to notice" in notice(at)
    assert "mean finish: A " in captions(at) and "fair-share index (Jain) " in captions(at)
    per_policy, per_client = at.dataframe[0].value, at.dataframe[1].value
    assert list(per_policy.columns) == [label for label, _ in p.variants]
    assert "total throughput (tokens/s)" in per_policy.index and "Jain's index vs fair share" in per_policy.index
    assert set(per_client["client"]) >= {"A", "B"}


def test_article_numbers_on_screen():
    at = open_page(PAGE)
    assert_clean(at)
    values = metric_values(at)
    assert values == {"FCFS: total throughput": "4,081 tokens/s", "Rate limit: total throughput": "1,700 tokens/s",
                      "VTC: total throughput": "4,051 tokens/s"}
    text = notice(at)
    assert "B's mean finish time fell from 2,445 ms to 963 ms (-61%)" in text
    assert "throughput fell from 4,081 to 1,700 tokens/s (42% of FCFS's)" in text
    assert "turned away 233 requests (231 of A's, 2 of B's)" in text
    assert "FCFS went past it" in text
    # The paper's figure beside the simulator's (lessons.fairness.notices.PAPER_RATE_LIMIT), the shares compared.
    assert "The VTC paper measured a fall from ~780 to ~340 tokens/s" in text
    assert "the simulator's 4,081 and 1,700 tokens/s come from its own cost model" in text
    assert "(42% here, ~44% in the paper)" in text


def test_papers_figure_leaves_when_the_limit_changes():
    at = open_page(PAGE)  # (the article preset: the first)
    at.slider(key="fairness.limit").set_value(12).run()
    assert_clean(at)
    text = notice(at)
    assert "The rate limit (12 requests per client per 200 steps)" in text  # the limit's own sentence stays
    assert "The VTC paper measured" not in text


def test_rate_limit_knob_moves_the_rate_limited_run_and_the_sweep():
    at = open_page(PAGE, {"preset": "rate_limits"})
    assert "At the tightest limit (2 requests per client per 200 steps)" in notice(at)
    settle_sweeps(at.slider(key="fairness.limit").set_value(3).run())
    assert_clean(at)
    assert "At the tightest limit (2 requests" in notice(at)  # 3 joins the sweep; 2 stays the tightest
    assert "The rate limit (3 requests per client per 200 steps)" in notice(at)
    assert metric_values(at)["Rate limit: total throughput"] != "1,700 tokens/s"
    assert at.query_params["limit"] in ("3", ["3"])


def test_engine_slider_reruns_with_new_numbers():
    at = open_page(PAGE)
    before = metric_values(at)["FCFS: total throughput"]
    at.slider(key="fairness.engine.max_num_seqs").set_value(8).run()
    assert_clean(at)
    after = metric_values(at)["FCFS: total throughput"]
    assert after != before and int(after.split()[0].replace(",", "")) < 2000  # 8 slots serve far less
    assert at.query_params["max_num_seqs"] in ("8", ["8"])


def test_client_weight_changes_the_weighted_split():
    at = open_page(PAGE, {"preset": "weighted_vtc"})
    assert "B was served 2.01x the tokens (prompt + output) A was under VTC 1:2" in notice(at)
    at.slider(key="fairness.client.B.B_weight").set_value(3.0).run()
    assert_clean(at)
    assert "VTC 1:2 (weights A 1 : B 3): total throughput" in metric_values(at)
    text = notice(at)
    ratio = float(text.split("B was served ")[1].split("x")[0])
    assert ratio == pytest.approx(3.0, rel=0.1)
    assert at.query_params["B_weight"] in ("3.0", ["3.0"])


def test_lift_toggle_turns_vtc_into_lcf():
    at = open_page(PAGE)
    at.toggle(key="fairness.lift").set_value(False).run()
    assert_clean(at)
    assert "VTC (no lift): total throughput" in metric_values(at)
    assert "lifted a returning client's counter" not in notice(at)


def test_returning_idle_compares_lift_and_lcf():
    at = open_page(PAGE, {"preset": "returning_idle"})
    text = notice(at)
    assert "at step 300 B's counter went from 0 to" in text
    assert "Without the lift (LCF (no lift)) B came back" in text


def test_a_third_client_joins():
    at = open_page(PAGE)
    at.slider(key="fairness.clients.clients").set_value(3).run()
    assert_clean(at)
    assert "C " in captions(at).split("mean finish:")[1]
    assert "**C**" in captions(at)  # the arrivals line in the sidebar
    at.slider(key="fairness.client.C.C_share").set_value(40).run()
    assert_clean(at)
    assert "**C** 29%" in captions(at)  # 90 + 10 + 40 -> 64%, 7%, 29%


def test_on_off_pattern_and_bad_client_window():
    at = open_page(PAGE)
    at.slider(key="fairness.client.B.B_on").set_value(100).run()
    at.slider(key="fairness.client.B.B_off").set_value(300).run()
    assert_clean(at)
    assert "100 on / 300 off" in captions(at)
    at.slider(key="fairness.client.B.B_start").set_value(500).run()
    at.slider(key="fairness.client.B.B_stop").set_value(200).run()
    assert not at.exception
    assert any("'Stops sending at step' (200) must come after 'Starts sending at step' (500)" in as_read(e.value)
               for e in at.error)  # a clear message in the sidebar's words, not a traceback


def test_output_weight_sweep_marks_the_chosen_weight():
    at = open_page(PAGE, {"preset": "prefill_vs_decode", "w_out": "4.0"})
    assert_clean(at)
    assert "VTC (in 1 : out 4): total throughput" in metric_values(at)
    assert "Raising the output weight from 0.5 to 16" in notice(at)
    assert "Mean charge per request at your weights (in 1 : out 4)" in notice(at)


def test_url_settings_apply_and_bad_values_warn():
    at = open_page(PAGE, {"preset": "weighted_vtc", "B_weight": "1.0"})
    assert_clean(at)
    assert "VTC 1:2 (equal weights): total throughput" in metric_values(at)
    at = open_page(PAGE, {"limit": "lots", "B_share": "250"})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "limit=lots" in warnings and "B_share=250" in warnings
    assert metric_values(at)["Rate limit: total throughput"] == "1,700 tokens/s"  # defaults


def test_no_policy_chosen_asks_for_one():
    at = open_page(PAGE)
    at.multiselect(key="fairness.policies").set_value([]).run()
    assert_clean(at)
    assert any("at least one policy" in w.value for w in at.warning)


def test_zero_charges_are_refused_with_a_message():
    at = open_page(PAGE)
    at.slider(key="fairness.w_in").set_value(0.0).run()
    at.slider(key="fairness.w_out").set_value(0.0).run()
    assert not at.exception
    assert any("input_weight" in as_read(e.value) for e in at.error)


@pytest.mark.parametrize("preset", PRESETS)
def test_a_pool_change_reruns_and_moving_back_restores_the_numbers(preset):
    """A KV pool change reruns the page cleanly with new numbers (a quarter of the pool: the batch shrinks and
    throughput falls); moving the slider back gives the first numbers again (served from the cache). The rerun's
    speed is measured by benchmarks/page_rerun.py, not here."""
    at = open_page(PAGE, {"preset": preset})
    before = [m.value for m in at.metric]
    slider = at.slider(key="fairness.engine.num_blocks")
    old = slider.value
    slider.set_value(old // 4).run()
    assert_clean(at)
    assert at.query_params["num_blocks"] in (str(old // 4), [str(old // 4)])
    after = [m.value for m in at.metric]
    assert len(after) == len(before) and after != before
    at.slider(key="fairness.engine.num_blocks").set_value(old).run()
    assert_clean(at)
    assert [m.value for m in at.metric] == before


def test_an_uploaded_request_list_runs_without_client_knobs():
    """A scenario file with explicit requests (no workload): the policies still compare, the client sliders (which
    regenerate a workload) are not offered, and the per-client numbers come from the file's clients."""
    from sim import RequestSpec
    from sim.scenario import Scenario, scenario_to_dict

    p = presets.get("weighted_vtc")
    requests = [RequestSpec(f"{c}{i}", 5 * i, 100, 60, client_id=c) for i in range(40) for c in "XY"]
    scenario = Scenario("two clients from a file", p.scenario.config.replace(client_weights=()), tuple(requests))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(PAGE)
    at.query_params["preset"] = "weighted_vtc"
    at.session_state["fairness.uploaded"] = scenario_to_dict(scenario)  # what the upload box stores
    at.run()
    assert_clean(at)
    assert not any((s.key or "").startswith("fairness.client") for s in at.slider)
    assert "mean finish: X " in captions(at) and "Y " in captions(at)
    assert any("Service gap between clients X and Y" in c.proto.spec for c in at.get("plotly_chart"))


def _chart(at, title: str) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(s for s in specs if title in s["layout"]["title"]["text"])


def test_rate_limit_sweep_fills_in_without_holding_up_the_rerun(monkeypatch):
    """With no time left in the rerun (budget 0) the page shows the policies at once and the sweep's points that
    are ready, says how many are still running and leaves its sentences out; reruns complete it."""
    import streamlit as st

    monkeypatch.setattr(sweeps, "RERUN_BUDGET_S", 0.0)
    # No prefetch worker: one could finish every point before the page draws the sweep (a race, not a failure).
    monkeypatch.setenv("SCHEDLAB_PREFETCH_WORKERS", "0")
    st.cache_resource.clear()
    try:
        _check_the_sweep_fills_in()
    finally:
        st.cache_resource.clear()  # later tests get a prefetcher with workers again


def _check_the_sweep_fills_in() -> None:
    at = open_page(PAGE, {"preset": "rate_limits", "max_num_seqs": "29"}, settle=False)  # runs no test made
    assert_clean(at)
    assert len(metric_values(at)) == 3
    running = next(c.value for c in at.caption if SWEEP_RUNNING in c.value)
    done, total = (int(v) for v in running.split("sweep: ")[1].split(" simulations")[0].split(" of "))
    assert total == 8 and done < total  # 2, 4, 6, 10, 15, 25, 40, 60 requests per window
    assert "At the tightest limit" not in notice(at)
    chart = _chart(at, "Throughput against the per-client rate limit")
    limited = next(t for t in chart["data"] if t["name"] == "FCFS + rate limit")
    assert len(limited["x"]) == done and chart["layout"]["xaxis"]["tickvals"] == [2, 4, 6, 10, 15, 25, 40, 60]
    settle_sweeps(at)
    assert_clean(at)
    assert "At the tightest limit (2 requests per client per 200 steps)" in notice(at)
    chart = _chart(at, "Throughput against the per-client rate limit")
    assert next(t for t in chart["data"] if t["name"] == "FCFS + rate limit")["x"] == [2, 4, 6, 10, 15, 25, 40, 60]


def test_a_sweep_point_that_cannot_finish_shows_a_message_once(monkeypatch):
    """A sweep run that fails (here: the limit-60 point) ends in the page's error box, not a traceback, and is not
    run again on the next rerun (the runner remembers the error; a polling sweep would otherwise retry it)."""
    import streamlit as st

    from sim import SimulationError
    from ui import runner

    monkeypatch.setenv("SCHEDLAB_PREFETCH_WORKERS", "0")  # every run in this process, where the patch applies
    st.cache_resource.clear()
    st.cache_data.clear()
    calls = []
    real_simulate = runner.simulate

    def simulate(config, requests, **kwargs):
        if config.rate_limit_max_requests == 60:
            calls.append(1)
            raise SimulationError("stopped after max_steps=1 steps (planted for this test)")
        return real_simulate(config, requests, **kwargs)

    monkeypatch.setattr(runner, "simulate", simulate)
    monkeypatch.setattr(sweeps, "RERUN_BUDGET_S", 0.0)
    try:
        at = open_page(PAGE, {"preset": "rate_limits"}, settle=False)
        assert_clean(at)  # the policies ran; the sweep is still filling in
        monkeypatch.setattr(sweeps, "RERUN_BUDGET_S", float("inf"))
        at.run()  # what the polls do: every point left, the failing one included
        assert not at.exception
        assert any("planted for this test" in e.value for e in at.error)
        at.run()
        assert not at.exception and any("planted for this test" in e.value for e in at.error)
        assert len(calls) == 1
    finally:
        st.cache_resource.clear()  # later tests get a prefetcher with workers (and no remembered failure) again


def test_a_lift_names_the_counter_it_lifts_to_and_the_lower_idle_ones():
    # Four clients: at the largest lift B rose to D's counter, the lowest among clients with requests waiting; C
    # had a lower counter but nothing waiting, so the lift did not count it (the paper's rule). B's own queue had
    # only just emptied (its requests were running): its counter was low, not 'saved' while idle.
    text = clean_notices(PAGE, {"preset": "article_fairness", "clients": "4"})
    assert ("B's counter went from 17,499 to 28,085, D's, the lowest among the clients with requests waiting (C, "
            "lower, had none waiting), so B's lower counter (its queue had only just emptied, with requests still "
            "running) could not be spent") in text


def test_with_nobody_waiting_the_lift_goes_to_the_last_client_to_leave_the_queue():
    text = clean_notices(PAGE, {"preset": "article_fairness"})
    assert ("at step 61 B's counter went from 0 to 10,280, A's: nobody else was waiting, and A was the last client "
            "to leave the queue, so the credit B 'saved' while idle could not be spent at A's expense") in text


def test_a_rate_limit_that_never_rejects_says_it_changes_nothing():
    text = clean_notices(PAGE, {"preset": "article_fairness", "limit": "100"})
    assert "The rate limit (100 requests per client per 200 steps) never turned a request away" in text
    assert "Rate limit: B's mean finish time stayed at 2,445 ms, with none of B's requests rejected." in text
    assert "turned away 0 requests" not in text and "from 2,445 ms to 2,445 ms" not in text


def test_an_output_weight_sweep_that_moves_nothing_says_so():
    # At 0.02 requests per step the two clients never wait for each other: any output weight gives the same order.
    text = clean_notices(PAGE, {"preset": "prefill_vs_decode", "rate": "0.02"})
    assert ("Raising the output weight from 0.5 to 16 (input weight 1) changes nothing here: every client's mean "
            "finish time stays the same (A 278 ms, B 1,828 ms)") in text
    assert "moves the waiting" not in text
    # The preset itself: the decode-heavy client B waits longer as output tokens get dearer.
    text = clean_notices(PAGE, {"preset": "prefill_vs_decode"})
    assert "moves the waiting between clients" in text and "counts as served sooner and waits longer" in text


def test_throughput_and_queueing_sentences_name_the_real_cause():
    # 7 slots, long answers: the rate limit costs no throughput because the slots are full even under FCFS (it
    # said "the KV pool or the load"); the pool is 38% full on average.
    text = clean_notices(PAGE, {"max_num_seqs": "7", "output_median": "860"})
    assert "what holds the server back is the batch slots (6.9 of 7 slots busy on average even under FCFS)" in text
    # 20-token answers: nobody queues, so B's requests do not "queue behind A's"; and the KV pool sits mostly
    # empty while the limit idles slots, so "room to spare" comes with its number.
    text = clean_notices(PAGE, {"output_median": "20"})
    assert "none of them queues here" in text and "queues behind" not in text
    assert "while the GPU had room to spare (the KV pool" in text
    assert "FCFS 1.00, Rate limit 1.00, VTC 1.00." in text and "scores well only because" not in text
    # A limit that rejects 233 of 300 even where throughput recovers does not "barely hold anyone back".
    text = clean_notices(PAGE, {"preset": "rate_limits", "output_median": "1320"})
    assert "and even there it rejects 233 of 300 requests" in text and "no longer protects" not in text


def test_the_light_client_sentence_follows_the_run():
    # B arrives (steps 302-472) long before A starts (step 1,681) and waits a fifth as long as A: neither "as long
    # as A's" nor "queues behind the A requests" is true here.
    text = clean_notices(PAGE, {"preset": "returning_idle", "output_median": "2000", "B_weight": "0.25",
                                "A_start": "1680", "max_num_seqs": "69"})
    assert "against A's 173,364 ms: they queued only behind each other" in text
    assert "as long as A's" not in text and "queues behind the A requests" not in text
    at = open_page(PAGE, {"preset": "weighted_vtc", "rate": "2.0"})
    assert any("(1 request/step)" in c.value for c in at.caption)  # not "1 requests/step"


def test_a_stop_before_the_start_is_explained_in_the_sidebars_words():
    at = open_page(PAGE, {"preset": "returning_idle", "B_stop": "20"})
    assert not at.exception
    assert any("client B: 'Stops sending at step' (20) must come after 'Starts sending at step' (300)"
               in as_read(e.value) for e in at.error)


def test_all_shares_at_zero_is_explained_and_the_preset_is_one_click_away():
    at = open_page(PAGE, {"preset": "article_fairness", "A_share": "0", "B_share": "0"})
    assert not at.exception
    assert [as_read(e.value) for e in at.error] == [  # (the message is text: ui.wording.plain)
        "**Invalid setting:** every client's 'Share of the arrivals (%)' is 0, so nobody sends a request; give a "
        "client a share above 0"]
    (note,) = [c.value for c in at.caption if "Changed from the preset" in c.value]
    assert "Client A: Share of the arrivals (%) 90 → 0; Client B: Share of the arrivals (%) 10 → 0" in note
    at.button(key="fairness.reset_settings").click().run()
    assert_clean(at)
    assert "A_share" not in at.query_params and "B_share" not in at.query_params
    assert metric_values(at) == metric_values(open_page(PAGE, {"preset": "article_fairness"}))


@pytest.mark.parametrize("preset", ["article_fairness", "rate_limits"])
def test_a_pool_too_small_for_any_request_explains_and_does_not_crash(preset):
    """8 blocks (128 tokens): every request is rejected on arrival. The page says so; the sentences that compare
    throughput with FCFS's (0 tokens/s) are left out instead of dividing by zero."""
    at = open_page(PAGE, {"preset": preset, "num_blocks": "8"})
    assert not at.exception, [e.value for e in at.exception]
    assert any("can never run on this engine" in w.value for w in at.warning)


def test_an_output_weight_of_zero_stays_off_the_log_scaled_sweep():
    at = open_page(PAGE, {"preset": "prefill_vs_decode", "w_out": "0.0"})
    assert not at.exception and not at.error
    sweep = _chart(at, "Who waits, as the output weight changes")
    assert all(np.isfinite(sweep["layout"]["xaxis"]["range"]))  # log10(0) made it -inf
    assert 0 not in sweep["layout"]["xaxis"]["tickvals"]
    assert not any("your weight" in a["text"] for a in sweep["layout"].get("annotations", []))


def test_clients_that_stop_too_soon_are_explained_in_the_sidebars_words():
    # returning_idle: B stops at step 480; with A's share at 0 only B sends, and 131 of 300 requests arrive by then.
    at = open_page(PAGE, {"preset": "returning_idle", "A_share": "0"})
    (error,) = [as_read(e.value) for e in at.error]
    assert "close by step 480 ('Stops sending at step') after only 131 of 300 requests" in error
    assert "lower 'Requests' (Workload)" in error and "num_requests" not in error and "stop_step" not in error


def test_a_bound_broken_by_preemptions_says_the_paper_assumes_none():
    text = clean_notices(PAGE, {"preset": "prefill_vs_decode", "num_blocks": "150", "B_output": "1500"})
    assert ("VTC, FCFS went past it (VTC preempted 658 requests: the paper's bound assumes a server that never "
            "preempts, reserving memory for each answer's full length)") in text
