"""The guided paths (lessons/*/guide.py): every step's answer is the simulator's figure for the step's settings
(pinned for the article's examples), and changes when a knob the step exposes changes."""

from __future__ import annotations

import re

import pytest

from lessons import LESSONS
from lessons.cancellation.guide import HELD_FOR_NOBODY
from lessons.guided import Step, simulate_step
from lessons.preemption.guide import _pool_scene
from sim import metrics
from sim.preemption_metrics import preemption_cost, preemptions
from ui.charts.cancellation import KV_PARTS
from ui.glossary import PAGE_PATH, TERMS
from ui.guide import CHARTS, paths

PATHS = paths()  # lesson id -> its guided path, every lesson of the course
LESSON_MODULES = {lesson.id: lesson.module("lesson") for lesson in LESSONS}
ALL_STEPS = [(lesson, step) for lesson, steps in PATHS.items() for step in steps]
IDS = [f"{lesson}.{step.key}" for lesson, step in ALL_STEPS]


def _answer(step: Step, values: dict | None = None):
    values = {**step.defaults(), **(values or {})}
    return step.ask(simulate_step(step, values), values)


def test_every_lesson_has_a_path_of_four_to_six_steps_with_known_charts():
    assert list(PATHS) == [lesson.id for lesson in LESSONS]
    for lesson, steps in PATHS.items():
        assert 4 <= len(steps) <= 6, lesson
        assert len({s.key for s in steps}) == len(steps)
        for s in steps:
            assert s.charts and set(s.charts) <= set(CHARTS), (lesson, s.key)
            assert s.settings, f"{lesson}.{s.key} exposes no knob"
            assert 1 <= s.intro().count(". ") + 1 <= 4  # two or three sentences


@pytest.mark.parametrize(("lesson", "step"), ALL_STEPS, ids=IDS)
def test_the_answer_is_right_by_its_own_check_and_a_known_mistake_is_not(lesson, step):
    problem = _answer(step)
    ok, feedback = problem.check(problem.answer)
    assert ok and feedback.startswith(f"Right: {problem.answer_text}.")
    for wrong, why in problem.mistakes:
        ok, feedback = problem.check(wrong)
        assert not ok and why in feedback  # the reason, not just "wrong"
    if problem.is_multiple_choice:
        for wrong in problem.choices:
            if wrong != problem.answer:
                assert problem.check(wrong)[1].startswith(f"Not {wrong}:")


@pytest.mark.parametrize(("lesson", "step"), ALL_STEPS, ids=IDS)
def test_every_value_of_a_knob_the_step_exposes_changes_what_it_says(lesson, step):
    # A knob worth moving: each other value changes the explanation's figures, and somewhere the answer (priority
    # and the trade-off keep their answer: what moves is how far chat0 jumps and what chunking costs).
    base = _answer(step)
    answers = set()
    for s in step.settings:
        for option in s.options:
            if option != s.default:
                other = _answer(step, {s.key: option})
                assert other.reasoning != base.reasoning, f"{lesson}.{step.key}: {s.key}={option!r} says the same"
                answers.add(other.answer)
    same_answer = {("queueing", "priority"), ("budget", "tradeoff")}
    assert (answers == {base.answer}) == ((lesson, step.key) in same_answer), (lesson, step.key, answers)


# The article's figures, from the simulator's runs of the steps' settings (the presets' numbers).
ARTICLE = {
    ("queueing", "fcfs"): 1100.0, ("queueing", "sjf"): 500.0, ("cancellation", "wasted"): 700.0,
    ("cancellation", "delay"): 50.0, ("budget", "chunks"): 16.0,
}


@pytest.mark.parametrize(("key", "figure"), list(ARTICLE.items()), ids=[".".join(k) for k in ARTICLE])
def test_the_article_examples(key, figure):
    step = next(s for s in PATHS[key[0]] if s.key == key[1])
    assert _answer(step).answer == figure


def _step(lesson: str, key: str) -> Step:
    return next(s for s in PATHS[lesson] if s.key == key)


def test_each_answer_equals_the_simulators_figure_read_independently():
    # Queueing: the runs' mean finish times (1,100 / 500 on one slot; 433.3 on two, by hand: 1000, 100, 200).
    step = _step("queueing", "fcfs")
    for slots, figure in ((1, 1100.0), (2, 1300 / 3)):
        runs = simulate_step(step, {"max_num_seqs": slots})
        assert _answer(step, {"max_num_seqs": slots}).answer == pytest.approx(figure)
        assert runs[0].summary["finish_steps"]["mean"] == pytest.approx(figure)
    # Cancellation: KV held at the end without an abort, 1,000 tokens x 131,072 B = 131.07 MB (2,000: 262.1).
    kv = _step("cancellation", "kv")
    for tokens in (1000, 2000):
        runs = simulate_step(kv, {"answer_tokens": tokens})
        held = int(runs[1].trace.requests["num_computed_tokens"][0]) * runs[1].scenario.config.model.kv_bytes_per_token
        assert held == tokens * 131072
        assert _answer(kv, {"answer_tokens": tokens}).answer == pytest.approx(held / 1e6)
    # Preemption: the first victim of the trace (D under FCFS, C under priority) ...
    victim = _step("preemption", "victim")
    for policy, who in (("fcfs", "D"), ("priority", "C")):
        runs = simulate_step(victim, {"policy": policy})
        assert preemptions(runs[0].trace)[0].request_id == who == _answer(victim, {"policy": policy}).answer
    # ... and the 2,000-token victim: recompute 32 ms against swap ~5.9 ms (50 GB/s) or ~53 ms (5 GB/s).
    cost_step = _step("preemption", "cost")
    for gb_s, faster in ((50.0, "swap is faster"), (5.0, "recompute is faster")):
        runs = simulate_step(cost_step, {"swap_gb_s": gb_s})
        p = preemptions(runs[0].trace)[0]
        cost = preemption_cost(p.num_tokens, runs[0].scenario.config)
        assert p.num_tokens == 2000 and cost.recompute_ms == pytest.approx(32.0) and cost.swap_bytes == 262_144_000
        assert _answer(cost_step, {"swap_gb_s": gb_s}).answer == faster
    # The swap is timed out and back, as the chart's swap bar (2 x 5.87 ms at 50 GB/s): at 10 GB/s one way is 26.8 ms
    # (within 20% of recompute's 32) but out and back 53.7 ms, so recompute is faster.
    assert "5.87 ms each way at 50 GB/s" in _answer(cost_step).reasoning
    assert "11.7 ms out and back" in _answer(cost_step).reasoning
    assert _answer(cost_step, {"swap_gb_s": 10.0}).answer == "recompute is faster"
    # Budget: the stalling step's cost from the trace, 5.75 + 8,000 x 16 us + 8 x 6 us = 133.798 ms.
    stall = _step("budget", "stall")
    runs = simulate_step(stall)
    row = runs[0].trace.request_ids.index("long")
    step_ms = float(runs[0].trace.steps["step_ms"][runs[0].trace.requests["first_scheduled_step"][row]])
    assert step_ms == pytest.approx(133.798) and _answer(stall).answer == pytest.approx(step_ms)
    # Fairness: under FCFS the light client waits about as long as the heavy one (mean queueing ms per client).
    trace = simulate_step(_step("fairness", "who_waits"))[0].trace
    rows = {r["client"]: r["mean_queue_ms"] for r in metrics.per_client(trace)}
    assert abs(rows["A"] - rows["B"]) <= 0.2 * max(rows.values())
    assert _answer(_step("fairness", "who_waits")).answer.startswith("about the same")


def test_the_steps_text_links_glossary_terms_at_first_use():
    for lesson, steps in PATHS.items():
        text = " ".join(s.intro() for s in steps)
        links = re.findall(rf"\]\({PAGE_PATH}#([a-z0-9-]+)\)", text)
        assert links, lesson
        assert len(links) == len(set(links)), f"{lesson}: a term linked twice in its steps' text"
        assert set(links) <= {t.anchor for t in TERMS}


def test_a_step_naming_a_variant_its_preset_lacks_is_refused_with_the_variants():
    bad = Step("x", "t", "text.", "article_hol", ("LIFO",), lambda runs, v: None, ("gantt",))
    with pytest.raises(ValueError, match="preset 'article_hol' has no variant 'LIFO'; its variants: FCFS, SJF"):
        bad.scenarios()


def test_the_cancellation_explanation_names_the_kv_charts_own_legend_entry():
    # (it said "the orange area" of a chart whose KV for nobody is dotted black)
    assert HELD_FOR_NOBODY in KV_PARTS
    reasoning = _answer(_step("cancellation", "wasted")).reasoning
    assert f'"{HELD_FOR_NOBODY}"' in reasoning and "orange" not in reasoning



def test_the_sizing_explanation_states_the_runs_own_peak_not_a_worst_case_bound():
    # (it said "32 x 77 blocks at once against the pool's 1,600" beside "0 preemptions")
    step = _step("preemption", "sizing")
    for blocks, said in ((1200, "3 preemptions"), (1600, "0 preemptions")):
        values = {**step.defaults(), "num_blocks": blocks}
        trace = simulate_step(step, values)[0].trace
        peak = int(trace.steps["used_blocks"].max())
        assert peak <= blocks
        reasoning = step.ask(simulate_step(step, values), values).reasoning
        assert reasoning.startswith(f"{said}: at the busiest step the running requests held {peak:,} of the pool's "
                                    f"{blocks:,} blocks")
        assert " x " not in reasoning


def test_the_toy_pool_question_describes_the_scenario_it_runs():
    # (it was written in: "A, B, C and D (priorities 1, 0, 2, 0) ... 200-token answers in a 32-block pool", and left
    # out E, the fifth row of the step's Gantt chart)
    step = _step("preemption", "victim")
    question = _answer(step).question
    assert ("A, B, C and D (priorities 1, 0, 2, 0) start together and grow 200-token answers in a pool of 32 blocks "
            "of 16 tokens; E arrives at step 5 and waits: the 4 batch slots are taken.") in question
    smaller = step.scenarios()[0][1].with_config(num_blocks=24)
    assert "in a pool of 24 blocks" in _pool_scene(smaller)[1]


def test_every_free_lesson_page_links_glossary_terms_in_its_opening_question():
    # The free page's first words are its question (ui.lesson.open_lesson): a term is linked there, each once.
    for lesson, module in LESSON_MODULES.items():
        links = re.findall(rf"\]\({PAGE_PATH}#([a-z0-9-]+)\)", module.QUESTION)
        assert links, lesson
        assert len(links) == len(set(links)), f"{lesson}: a term linked twice in its question"
        assert set(links) <= {t.anchor for t in TERMS}


# Where each step's player starts (the first run's trace): the moment the step is about.
PLAYER_STARTS = {
    ("fairness", "lift"): 300,  # B returns
    ("cancellation", "wasted"): 300, ("cancellation", "kv"): 300, ("cancellation", "delay"): 300,  # the user leaves
    ("preemption", "victim"): 113, ("preemption", "cost"): 102,  # the first preemption
    ("budget", "stall"): 20, ("budget", "chunks"): 20, ("budget", "tradeoff"): 20,  # the long prompt arrives
    ("budget", "memory"): 153,  # the first preemption (budget 8,192)
}


@pytest.mark.parametrize("key", list(PLAYER_STARTS), ids=[".".join(k) for k in PLAYER_STARTS])
def test_the_player_starts_where_the_step_happens(key):
    step = _step(*key)
    assert step.start_step is not None
    assert step.start_step(simulate_step(step)[0].trace) == PLAYER_STARTS[key]
