"""The Queueing lesson's logic without Streamlit: its knobs, variants, head-of-line blocker and notices."""

from __future__ import annotations

import pytest

from lessons.queueing import lesson
from sim import metrics, presets
from sim.engine import simulate


def runs_of(key: str, **config) -> list[lesson.Run]:
    p = presets.get(key)
    base = p.scenario.with_config(**config)
    out = []
    for label, sc in lesson.variants(p, base, {"policies": [label for label, _ in p.variants]}):
        trace = simulate(sc.config, sc.requests)
        out.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    return out


def knob_keys(key: str) -> set[str]:
    p = presets.get(key)
    return {k.key for k in lesson.knobs(p, p.scenario, False)}


def test_article_notices_give_the_article_numbers():
    text = " ".join(lesson.notices(runs_of("article_hol"), "steps"))
    assert "cut the average finish time from 1,100 to 500 steps (-55%)" in text
    # Under SJF the long request goes last: 1,200 steps instead of its 1,000 under FCFS. The run still ends
    # after 1,200 steps (short2 under FCFS, long under SJF): SJF only reorders who waits.
    assert ("long now finishes last, after 1,200 steps against 1,000 under FCFS; the last request finishes after "
            "1,200 steps either way") in text
    assert "short2 waited 1,100 engine steps in the queue, mostly behind long" in text


def test_notices_in_milliseconds_follow_the_unit():
    text = " ".join(lesson.notices(runs_of("article_hol"), "ms"))
    assert " ms (" in text and "steps (" not in text


def test_the_long_request_is_the_head_of_line_blocker():
    fcfs = runs_of("article_hol")[0]
    # short2 waits steps 0-1,099: long holds the only slot for 1,000 of them, short1 for 100.
    assert lesson.longest_wait(fcfs.trace) == lesson.LongestWait("short2", 1100, [("long", 1000)], 2,
                                                                 pytest.approx(1000 / 1100), "long", 1)
    # With three slots nobody waits: no blocker.
    three = runs_of("article_hol", max_num_seqs=3)[0]
    assert lesson.longest_wait(three.trace) is None


def test_one_long_request_in_one_of_several_slots_is_named_without_calling_it_a_blocker():
    # Starvation with 4 slots: s45 waits 150 steps; long holds one slot all that time, too few slots to block the
    # queue alone: the other three serve a stream. The sentence names it (it said "none for more than 100%").
    text = " ".join(lesson.notices(runs_of("starvation", max_num_seqs=4), "steps"))
    assert ("s45 waited 150 engine steps in the queue while 14 other requests ran: long held one of the 4 batch "
            "slots for all of that time, and the other slots served a stream of others ahead of it") in text
    assert "none for more than 100%" not in text


def test_a_starving_request_waits_behind_a_stream_not_one_blocker():
    # Under SJF the long request waits behind 120 short ones, 40 steps each: nobody held the slot for long, so
    # no request is named (or outlined in the Gantt chart) as its blocker.
    no_guard = runs_of("starvation")[0]
    lw = lesson.longest_wait(no_guard.trace)
    assert (lw.waiter, lw.wait_steps, lw.blockers, lw.num_ran) == ("long", 4800, [], 120)
    text = " ".join(lesson.notices(runs_of("starvation"), "steps"))
    assert ("long waited 4,800 engine steps in the queue while 120 other requests ran, none for more than 1% of "
            "that time: no single blocker") in text
    assert "Head-of-line blocking" not in text


def test_several_long_answers_pinning_the_slots_are_all_named():
    # Four batch jobs hold all 4 slots while batch4 waits 280 steps.
    text = " ".join(lesson.notices(runs_of("priority_lanes"), "steps"))
    assert ("batch4 waited 280 engine steps in the queue while batch0, batch1, batch2 and batch3 each held a batch "
            "slot for most of that time") in text


def test_knobs_appear_only_where_a_variant_uses_them():
    article = knob_keys("article_hol")  # FCFS vs SJF: the guard applies
    assert "guard" in article and "sigma" not in article
    busy = knob_keys("busy_server")  # has predicted SJF
    assert {"sigma", "guard", "quantum"} <= busy
    lanes = knob_keys("priority_lanes")  # FCFS vs priority
    assert lanes == {"policies", "unit"}


def test_apply_only_touches_present_knobs():
    cfg = presets.get("priority_lanes").scenario.config
    assert lesson.apply(cfg, {"policies": [], "unit": "steps"}) == cfg
    changed = lesson.apply(cfg, {"sigma": 1.5, "guard": 30, "quantum": 7})
    assert (changed.prediction_error_sigma, changed.starvation_threshold_steps, changed.priority_quantum_steps) == \
        (1.5, 30, 7)


def test_starvation_notice_compares_the_long_requests_wait():
    text = " ".join(lesson.notices(runs_of("starvation"), "steps"))
    # Without the guard "long" (arrives at step 1) starts at 4,801; with it, after the 200-step threshold at 201.
    assert "The longest request (long) waited 4,800 steps under SJF, no guard and 200 under SJF + guard" in text


def test_priority_notice_says_running_work_is_not_displaced():
    text = " ".join(lesson.notices(runs_of("priority_lanes"), "steps"))
    assert "never displaces a running request" in text


def test_sigma_sweep_moves_from_sjf_toward_fcfs():
    p = presets.get("predicted_lengths")
    sweep = lesson.sigma_sweep(p.scenario, (0.0, 2.0), lambda sc, fn: fn(simulate(sc.config, sc.requests)))
    sjf, fcfs = sweep["sjf"], sweep["fcfs"]
    assert sweep["predicted"][0] == sjf  # sigma 0: predictions are the true lengths
    assert sjf < sweep["predicted"][1] < fcfs  # a large error loses much of SJF's gain, still beats FCFS


def test_sigma_sweep_leaves_out_the_points_not_run_yet():
    p = presets.get("predicted_lengths")
    ready = {"sjf", "sjf_predicted"}  # FCFS and sigma 2.0 still running
    sweep = lesson.sigma_sweep(p.scenario, (0.0, 2.0), lambda sc, fn: fn(simulate(sc.config, sc.requests))
                               if sc.config.policy.value in ready and sc.config.prediction_error_sigma < 1 else None)
    assert sweep["sigma"] == [0.0] and len(sweep["predicted"]) == 1 and sweep["sigma_all"] == [0.0, 2.0]
    assert sweep["sjf"] is not None and sweep["fcfs"] is None


def test_sigma_notice_says_how_far_predicted_sjf_slides_toward_fcfs():
    sweep = {"sigma": [0.0, 0.5, 2.0], "predicted": [676.0, 716.0, 956.0], "sjf": 676.0, "fcfs": 1482.0}
    assert lesson.sigma_notice(sweep) == [
        "Predicted SJF slides from SJF's 676 steps toward FCFS's 1,482 as predictions get worse: 716 steps at sigma "
        "0.5, 5% of the way (two predictions in three within x1.6 of the true length), 956 steps at sigma 2, 35% of "
        "the way (within x7.4). Even a rough guess of the length keeps most of the gain."]
    # Past halfway, no claim that the guess keeps most of the gain.
    assert "keeps most" not in lesson.sigma_notice({**sweep, "predicted": [676.0, 900.0, 1300.0]})[0]
    # SJF and FCFS alike: nothing for the error to cost.
    assert "within 1% of each other" in lesson.sigma_notice({**sweep, "fcfs": 680.0})[0]
    assert lesson.sigma_notice(None) == [] and lesson.sigma_notice({**sweep, "fcfs": None}) == []
    assert lesson.sigma_notice({**sweep, "fcfs": 500.0}) == []  # FCFS ahead of SJF: nothing slides toward it


def test_two_long_answers_among_sixteen_slots_are_not_head_of_line_blockers():
    # busy_server under FCFS: r299 waits 2,534 steps while 227 others run; r94 and r149 each hold a slot for more
    # than half of that time, but 14 of the 16 slots keep turning over: an overloaded queue, not a blocked one.
    lw = lesson.longest_wait(runs_of("busy_server")[0].trace)
    assert (lw.waiter, lw.wait_steps, lw.num_ran) == ("r299", 2534, 227)
    assert lw.blockers == []


def test_the_guard_sentence_says_so_when_the_long_request_never_waited():
    # With 14 slots the starvation preset's long request starts the step it arrives: nothing to promote (the
    # sentence used to say it "waited 0 steps ... (promoted after 200 steps)").
    p = presets.get("starvation")
    base = p.scenario.with_config(max_num_seqs=14)
    runs = []
    for label, sc in lesson.variants(p, base, {"policies": [label for label, _ in p.variants]}):
        trace = simulate(sc.config, sc.requests)
        runs.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    text = " ".join(lesson.notices(runs, "steps"))
    assert "The longest request (long) waited 0 steps under SJF, no guard, less than the guard's 200-step" in text
    assert "promoted after" not in text


def test_a_starved_request_leads_the_notices():
    # The page shows three sentences: the starved request's 4,800-step wait leads, the averages follow.
    text = lesson.notices(runs_of("starvation"), "steps")
    assert text[0].startswith("The longest request (long) waited 4,800 steps under SJF, no guard")
    assert any("raised the average finish time" in s for s in text[2:])


def test_the_guard_sentence_leaves_out_a_long_request_that_never_ran():
    # An 8-block pool turns the starvation preset's long request away on arrival (it never fits): it has no wait to
    # speak of (the sentence used to say it "waited -2 steps under SJF, no guard").
    text = " ".join(lesson.notices(runs_of("starvation", num_blocks=8), "steps"))
    assert "The longest request" not in text and "-2 steps" not in text


def test_the_guard_sentence_says_how_many_were_promoted_in_words_that_fit():
    # With a 2,000-step threshold the guard promotes 71 of the 121 requests: most of them, not "almost every one".
    text = " ".join(lesson.notices(runs_of("starvation", starvation_threshold_steps=2000), "steps"))
    assert "The guard promoted 71 of the 121 requests" in text
    assert "almost every one" not in text and "most of them wait past the 2,000-step threshold" in text
    # At the preset's 200 steps it promotes 116 of them: almost every one.
    assert "The guard promoted 116 of the 121 requests: with this many requests waiting, almost every one waits" \
        in " ".join(lesson.notices(runs_of("starvation"), "steps"))
