"""The notice sweep's own rules (tests/app/notice_figures.py), on sentences written here: which numbers are names and
which are figures, what a figure may be derived from, and that a wrong number is caught. Quick: one small scenario,
no page."""

from __future__ import annotations

import pytest

from sim import presets
from sim.engine import simulate
from tests.app import notice_figures as nf


def quoted(sentence: str, names: tuple[str, ...] = ()) -> list[tuple[str, str, float]]:
    return [(q.text, q.kind, round(q.value, 6)) for q in nf.quoted_numbers(sentence, names)]


def test_numbers_in_names_are_not_figures():
    names = ("Llama 3.1 8B", "VTC 1:2", "notices after 50 steps", "r12")
    assert quoted("Llama 3.1 8B under VTC 1:2 and notices after 50 steps: r12's p99 TTFT on an H100, 7 s", names) \
        == [("7 s", "plain", 7000.0)]
    assert quoted("`max_num_seqs=4` [term](/Glossary#v1-2)") == []


def test_units_kinds_and_precision():
    got = nf.quoted_numbers("1,100 steps (-55%), 23x a step, within x1.3, 262 MB, 2.34 GiB, 0.94 s, 50 GB/s, 36 B's")
    assert [(q.text, q.kind) for q in got] == [
        ("1,100", "plain"), ("-55%", "percent"), ("23x", "times"), ("x1.3", "times"), ("262 MB", "bytes"),
        ("2.34 GiB", "bytes"), ("0.94 s", "plain"), ("50", "plain"), ("36", "plain")]
    steps, pct, _, _, mb, gib, s, _, _ = got
    assert (steps.value, pct.value, pct.negative) == (1100, 0.55, True)
    assert mb.value == 262e6 and mb.tol == pytest.approx(0.5e6)
    assert gib.value == pytest.approx(2.34 * 2**30) and s.value == 940 and s.tol == pytest.approx(5)


def test_the_rest_of_a_list_counts_the_names_listed():
    q = nf.quoted_numbers("r1 waited: r12 (3 blocks), r13 (4 blocks) and 100 more waited behind it",
                          ("r1", "r12", "r13"))[-1]
    assert (q.text, q.listed) == ("100", 2)


@pytest.fixture(scope="module")
def article():
    """The Queueing lesson's head-of-line example: FCFS and SJF on three requests."""
    p = presets.get("article_hol")
    runs = [(label, p.scenario.with_config(**overrides)) for label, overrides in p.variants]
    figures = [nf.run_figures(sc, simulate(sc.config, list(sc.requests))) for _, sc in runs]
    return nf.Universe(figures, [True, True]), [r.request_id for r in p.scenario.requests]


def unexplained(universe: nf.Universe, sentence: str, names=()) -> list[str]:
    quotes = nf.quoted_numbers(sentence, names)
    return [q.text for q in quotes if universe.explain(q, quotes, sentence) is None]


def test_the_articles_figures_match_and_made_up_ones_do_not(article):
    universe, ids = article
    true = ("SJF (true lengths) cut the average finish time from 1,100 to 500 steps (-55%) compared with FCFS.")
    assert unexplained(universe, true, ("SJF (true lengths)", "FCFS")) == []
    # (the percent agrees with the numbers quoted beside it: the wrong one is the 517)
    assert unexplained(universe, "SJF cut the average finish time from 1,100 to 517 steps (-53%).") == ["517"]
    assert unexplained(universe, "SJF cut the average finish time from 1,100 to 500 steps (-77%).") == ["-77%"]
    assert unexplained(universe, "The pool holds 1,234 tokens, 4.5 ms a step.") == ["1,234", "4.5 ms"]


def test_a_requests_own_figures_count_only_where_the_sentence_names_it(article):
    universe, ids = article
    # short2 waited 1,100 steps in the queue under FCFS; long ran 1,000 steps of that wait
    assert unexplained(universe, "short2 waited 1,100 steps behind long, which ran for 1,000 of them.", ids) == []
    assert unexplained(universe, "A request waited 1,337 steps.") == ["1,337"]


def test_derived_figures_follow_the_sentence(article):
    universe, _ = article
    # a difference of two numbers the sentence quotes
    assert unexplained(universe, "It started at step 300 instead of 1,000: 700 steps earlier.") == []
    assert unexplained(universe, "It started at step 300 instead of 1,000: 654 steps earlier.") == ["654"]


def test_a_direction_word_must_agree_with_the_numbers():
    ok = "p99 TTFT falls from 820 ms to 125 ms, and throughput rose from 1,700 to 4,081 tokens/s."
    assert nf.direction_problems(ok, nf.quoted_numbers(ok)) == []
    bad = "p99 time between tokens grows from 16.8 ms (budget 64) to 13.8 ms (8,192)."
    assert nf.direction_problems(bad, nf.quoted_numbers(bad)) == ["says 'grows' from 16.8 ms to 13.8 ms"]


def test_a_negative_count_or_time_is_no_figure(article):
    universe, ids = article
    # a request that never started has no first step (NO_STEP, -1): its "wait" is no figure
    assert unexplained(universe, "The longest request (long) waited -2 steps.", ids) == ["-2"]
    assert unexplained(universe, "SJF cut the average finish time from 1,100 to 500 steps (-55%).") == []


def test_a_view_is_checked_against_fresh_runs_of_its_scenarios():
    p = presets.get("article_hol")
    runs = tuple((f"key-{label}", p.scenario.with_config(**overrides), True) for label, overrides in p.variants)
    view = nf.ViewNotices("article_hol", runs, (
        "SJF (true lengths) cut the average finish time from 1,100 to 500 steps (-55%) compared with FCFS.",
        "Under FCFS, short2 took — on average.",
        "SJF raised the average finish time from 1,100 to 500 steps.",
        "short2 waited 1,337 steps."), frozenset({"SJF (true lengths)", "FCFS", "long", "short1", "short2"}), ())
    assert [problem for _, problem in nf.check_notices(view)] == [
        "quotes a missing figure ('—')", "says 'raised' from 1,100 to 500", "'1,337' is no figure of the runs"]


def test_a_lesson_constant_may_be_a_named_tuple_of_figures():
    # (Fairness quotes the VTC paper's ~780 -> ~340 tokens/s, PAPER_RATE_LIMIT, beside the runs' own figures)
    from lessons.fairness import notices

    constants = nf.lesson_constants(notices)
    assert constants["const.PAPER_RATE_LIMIT.unlimited_tok_s"] == 780.0
    assert constants["const.PAPER_RATE_LIMIT.limited_tok_s"] == 340.0
    # ... and the sweep reads them from every module of the lesson's free page (lesson.py's parts), not its guide's
    everything = nf.package_constants("fairness")
    assert constants.items() <= everything.items() and "const.FAIRNESS_WINDOW_STEPS" in everything
    assert "const.KNEE_FACTOR" in nf.package_constants("budget")
