"""Seeded problems (lessons/problems.py, lessons/<lesson>/problems.py) and ``python -m sim problems``: the same seed
gives the same problem, every kind's answer is what a fresh run of its scenario says, ``check`` explains a wrong
answer, and the CLI refuses bad arguments with one line and exit code 2."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from lessons import BY_ID, problems
from lessons import IDS as LESSONS
from lessons.problems import Problem, parse_number, problem_for
from sim import EventKind, metrics, scenario, simulate
from sim.__main__ import main
from sim.request import RequestStatus
from sim.trace import Trace
from tests.sim.factories import REPO_ROOT

NUM_KINDS = {lesson: len(BY_ID[lesson].problem_kinds) for lesson in LESSONS}
SEEDS = range(12)  # every kind of every lesson, three or more times


def _fresh(p: Problem) -> Trace:
    return simulate(p.scenario.config, list(p.scenario.requests))


def _row(trace: Trace, request_id: str) -> int:
    return trace.request_ids.index(request_id)


def _asked_step(p: Problem) -> int:
    return int(re.search(r"end of step ([\d,]+)", p.question).group(1).replace(",", ""))


def _first_preempt(trace: Trace):
    return next(e for e in trace.events if e.kind is EventKind.PREEMPT)


def _started_after(trace: Trace, request_id: str) -> str:
    starts = trace.requests["first_scheduled_step"]
    start = starts[_row(trace, request_id)]
    return trace.request_ids[int(np.where(starts > start, starts, np.iinfo(np.int64).max).argmin())]


# kind -> the figure a fresh run gives, computed here from the trace's own records (not through lessons/*/problems.py)
FIGURES = {
    "average_finish": lambda p, t: metrics.summary(t)["finish_steps"]["mean"],
    "finish_of": lambda p, t: int(t.requests["finish_step"][_row(t, re.search(r"does (\w+) finish",
                                                                                 p.question).group(1))]) + 1,
    "longest_wait": lambda p, t: t.request_ids[int(np.argmax(t.requests["first_scheduled_step"]
                                                             - t.requests["arrival_step"]))],
    "b_wait": lambda p, t: int(t.requests["first_scheduled_step"][_row(t, "B1")] - t.requests["arrival_step"][
        _row(t, "B1")]),
    "b_tokens": lambda p, t: int(t.clients["client_output_tokens"][: _asked_step(p) + 1,
                                                                   t.client_ids.index("B")].sum()),
    "counter": lambda p, t: float(t.clients["client_counters"][_asked_step(p), t.client_ids.index("A")]),
    "lift": lambda p, t: _started_after(t, "B1"),
    "wasted_tokens": lambda p, t: metrics.summary(t)["wasted_tokens"],
    "freed_mb": lambda p, t: int(t.requests["num_computed_tokens"][_row(t, "long")])
    * t.config.model.kv_bytes_per_token / 1e6,
    "next_start": lambda p, t: int(t.requests["first_scheduled_step"][_row(t, "next")]),
    "victim": lambda p, t: t.request_ids[_first_preempt(t).row],
    "first_step": lambda p, t: _first_preempt(t).step,
    "resume_tokens": lambda p, t: next(e.num_tokens for e in t.events
                                       if e.kind is EventKind.RESUME and e.row == _first_preempt(t).row),
    "swap_mb": lambda p, t: _first_preempt(t).num_blocks * t.config.block_bytes / 1e6,
    "ttft_steps": lambda p, t: int(t.requests["first_token_step"][_row(t, "long")]
                                   - t.requests["arrival_step"][_row(t, "long")]) + 1,
    "stall_ms": lambda p, t: float(t.steps["step_ms"][t.requests["first_scheduled_step"][_row(t, "long")]]),
    "request_cap": lambda p, t: int((t.requests["status"] == RequestStatus.REJECTED).sum()),
    "token_cap": lambda p, t: int((t.requests["status"] == RequestStatus.REJECTED).sum()),
}


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_kind_is_answered_by_a_fresh_run_of_its_scenario(lesson):
    kinds = set()
    for seed in SEEDS:
        p = problem_for(lesson, seed)
        kinds.add(p.kind)
        figure = FIGURES[p.kind](p, _fresh(p))
        if p.is_multiple_choice:
            assert p.answer == figure, (seed, p.kind)
        else:
            assert p.answer == pytest.approx(figure), (seed, p.kind)
        # The scenario file says the same: dumped and loaded back, it runs to the same figure.
        loaded = scenario.loads(scenario.dumps(p.scenario))
        assert loaded.config == p.scenario.config and loaded.requests == p.scenario.requests
    assert len(kinds) == NUM_KINDS[lesson]  # consecutive seeds go through every kind


def test_the_article_shaped_problems_by_hand():
    # Queueing seed 0: SJF, one slot, answers a 260, b 280, c 40 at step 0. SJF runs c (finishes after 40 steps),
    # a (40 + 260 = 300), b (300 + 280 = 580): average 920 / 3 = 306.7. FCFS: 260, 540, 580 -> 460.
    p = problem_for("queueing", 0)
    assert (p.kind, [r.output_len for r in p.scenario.requests]) == ("average_finish", [260, 280, 40])
    assert p.answer == pytest.approx(920 / 3)
    assert 460.0 in [figure for figure, _ in p.mistakes]  # the FCFS figure is a known mistake
    # Cancellation seed 1: abort at once; 'long' left at step 230 holding 230 tokens of KV (1-token prompt + 229
    # answer tokens): 230 x 131,072 B = 30.1 MB. Without the abort, 400 tokens: 52.4 MB.
    p = problem_for("cancellation", 1)
    assert p.kind == "freed_mb" and p.answer == pytest.approx(230 * 131_072 / 1e6)
    assert "52.4 MB" in p.reasoning
    # Preemption seed 1: FCFS, listed A, C, B; after step 48 they hold 56, 96, 80 tokens (4 + 6 + 5 = 15 blocks);
    # in step 49 they need 4 + 7 + 6 = 17 > 16 blocks: B, last of the running list, is the victim, in step 49.
    p = problem_for("preemption", 1)
    assert (p.kind, p.answer) == ("first_step", 49.0)
    assert [r.request_id for r in p.scenario.requests] == ["A", "C", "B"]
    assert "4 + 7 + 6 = 17" in p.reasoning and p.reasoning.endswith("the one admitted last): B.")


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_same_seed_gives_the_same_problem_and_text(lesson):
    for seed in (0, 1, 7, 123_456):
        a, b = problem_for(lesson, seed), problem_for(lesson, seed)
        assert a == b
        assert problems.to_markdown(a, 1, answers=True) == problems.to_markdown(b, 1, answers=True)


@pytest.mark.parametrize("lesson", LESSONS)
def test_another_seed_of_the_same_kind_draws_other_numbers(lesson):
    n = NUM_KINDS[lesson]
    for kind in range(n):
        drawn = {problem_for(lesson, kind + k * n).scenario.requests for k in range(3)}
        assert len(drawn) >= 2, (lesson, kind)  # (two of three may match by chance; all three, never)


def test_seeds_cycle_through_kinds_and_a_sheet_is_consecutive_seeds():
    sheet = problems.problems("fairness", 10, 4)
    assert [p.seed for p in sheet] == [10, 11, 12, 13]
    assert {p.kind for p in sheet} == {"b_wait", "b_tokens", "counter", "lift"}


@pytest.mark.parametrize(("lesson", "seed", "message"), [
    ("queue", 0, "lesson: 'queue' is not one of: queueing, fairness, cancellation, preemption, budget"),
    ("queueing", -1, "seed: must be a whole number from 0 to 2,147,483,647, got -1"),
    ("queueing", True, "seed: must be a whole number"),
    ("queueing", "3", "seed: must be a whole number"),
    ("queueing", 2**31, "seed: must be a whole number"),
])
def test_a_bad_lesson_or_seed_is_named(lesson, seed, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        problem_for(lesson, seed)


# ---- check ----------------------------------------------------------------------------------------------------
def test_check_accepts_the_number_written_any_usual_way_and_within_tolerance():
    p = problem_for("queueing", 0)  # 306.67 steps, within 0.5
    for answer in (p.answer, 306.7, "306.7", " 306.7 steps ", p.answer + 0.45, p.answer - 0.45):
        ok, feedback = p.check(answer)
        assert ok, answer
        assert feedback.startswith("Right: 306.7 steps.") and "c 0-39, then a 40-299, then b 300-579" in feedback
    p = problem_for("queueing", 3)  # FCFS: 550 steps exactly
    assert p.check("550")[0] and p.check("550.4")[0] and not p.check("551")[0]
    assert parse_number("1,100 steps") == 1100.0 and parse_number("39.3 MB") == 39.3


def test_check_says_why_a_known_wrong_figure_is_wrong():
    p = problem_for("queueing", 0)  # SJF asked; 460 is the FCFS figure, 193.3 the mean answer length
    ok, feedback = p.check(460)
    assert not ok
    assert feedback == "Not 460: that is the FCFS figure; SJF runs the shortest waiting answer first."
    ok, feedback = p.check("193.3")
    assert not ok and "average answer length: it leaves out the waiting" in feedback


def test_check_says_too_high_or_too_low_with_the_hint_for_any_other_number():
    p = problem_for("queueing", 0)
    ok, feedback = p.check(1000)
    assert not ok and feedback == ("Not 1,000: that is too high. With one slot, each request waits for every answer "
                                   "run before it, then runs its own length.")
    assert "too low" in p.check(5)[1]


def test_check_refuses_what_is_not_a_number():
    p = problem_for("queueing", 0)
    for answer in ("about three hundred", "", "nan", True):
        ok, feedback = p.check(answer)
        assert not ok and "is not a number: give a number of steps" in feedback


def test_check_of_a_choice_takes_the_option_or_its_letter_and_explains_a_wrong_one():
    # Priority policy; listed C, A, B (priorities 2, 1, 0): B is admitted first, needs the 17th block, and C
    # (priority 2) is evicted. FCFS would evict B, the last of the list.
    p = problem_for("preemption", 0)
    assert (p.kind, p.choices, p.answer) == ("victim", ("A", "B", "C"), "C")
    assert [(r.request_id, r.priority) for r in p.scenario.requests] == [("C", 2), ("A", 1), ("B", 0)]
    assert p.check("C")[0] and p.check("c")[0] and p.check("C.")[0]
    ok, feedback = p.check("B")
    assert not ok and feedback.startswith("Not B: that is the FCFS victim; the priority policy evicts the running "
                                          "request with the largest priority value")
    ok, feedback = p.check("a")
    assert not ok and feedback == ("Not A: the priority policy evicts the running request with the largest priority "
                                   "value (ties: the later arrival), C.")
    ok, feedback = p.check("D")
    assert not ok and feedback == "'D' is not one of the options: A. A, B. B, C. C."


def test_check_of_the_lift_names_the_other_policy():
    p = problem_for("fairness", 3)  # VTC: A3 goes after B1; LCF (no lift) would run B2
    assert (p.kind, p.answer, p.choices) == ("lift", "A3", ("B2", "A3"))
    ok, feedback = p.check("B2")
    assert not ok and "that is what LCF does: without the lift B's counter starts at 0" in feedback
    ok, feedback = p.check("A3")
    assert ok and "then B's counter is 438 and A's 340" in feedback


# ---- Markdown and the command line -----------------------------------------------------------------------------
def test_markdown_shows_the_question_first_and_the_answer_only_when_asked():
    p = problem_for("cancellation", 0)
    text = problems.to_markdown(p, 1)
    assert text.startswith("## Problem 1: cancellation, seed 0 (wasted tokens)")
    assert "| long | 0 | 1 | 800 | 580 |" in text  # the user-leaves column appears: one request has abort_step
    assert "`abort_on_disconnect` = False" in text
    assert "**Answer.**" not in text and "220" not in text
    assert "**Answer.** 220 tokens" in problems.to_markdown(p, 1, answers=True)


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["problems", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_the_same_sheet_for_the_same_seed(capsys):
    code, first, _ = _cli(capsys, "queueing", "--seed", "7", "--count", "3", "--answers")
    assert code == 0
    assert _cli(capsys, "queueing", "--seed", "7", "--count", "3", "--answers")[1] == first
    assert first.startswith("# Scheduler Lab: queueing problems, seeds 7 to 9")
    assert first.count("## Problem ") == 3 and first.count("**Answer.**") == 3
    assert problems.to_markdown(problem_for("queueing", 8), 2, answers=True) in first
    code, without, _ = _cli(capsys, "queueing", "--seed", "7", "--count", "3")
    assert code == 0 and "**Answer.**" not in without and "run again with --answers" in without


@pytest.mark.parametrize(("args", "message"), [
    (("queue", "--seed", "1"), "error: lesson 'queue' is not one of: queueing, fairness, cancellation, preemption, "
                               "budget"),
    (("queueing", "--seed", "1", "--count", "0"), "error: --count: must be a whole number from 1 to 100, got '0'"),
    (("queueing", "--seed", "1", "--count", "101"), "error: --count: must be a whole number from 1 to 100"),
    (("queueing", "--seed", "1", "--count", "two"), "error: --count: must be a whole number from 1 to 100"),
    (("queueing", "--seed", "-3"), "error: --seed: must be a whole number from 0 to 2,147,483,647, got '-3'"),
    (("queueing", "--seed", "1", "--scenario-dir", "/nonexistent/dir"),
     "error: --scenario-dir /nonexistent/dir: is not a folder"),
])
def test_cli_refuses_bad_arguments_with_one_line_and_exit_2(capsys, args, message):
    code, out, err = _cli(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(message)


def test_cli_writes_scenarios_that_python_m_sim_run_runs_to_the_answer(tmp_path, capsys):
    code, out, _ = _cli(capsys, "cancellation", "--seed", "3", "--count", "2", "--scenario-dir", str(tmp_path))
    assert code == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["problem-cancellation-3-1.json", "problem-cancellation-3-2.json"]
    assert f"`{tmp_path / files[0]}`" in out
    # Problem 1 is seed 3: wasted tokens without an abort, which the run's summary counts.
    proc = subprocess.run([sys.executable, "-m", "sim", "run", str(tmp_path / files[0])], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f'"wasted_tokens": {int(problem_for("cancellation", 3).answer)},' in proc.stdout


def test_python_m_sim_problems_runs_as_a_command():
    proc = subprocess.run([sys.executable, "-m", "sim", "problems", "budget", "--seed", "0", "--answers"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "**Answer.** 3 steps" in proc.stdout
