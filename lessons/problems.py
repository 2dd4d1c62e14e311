"""Seeded problems with answers, for instructors (``python -m sim problems``) and for the app's problem links.

A problem is a small scenario (a few requests on a small engine), a question (multiple choice, or a number with a
tolerance and a unit), the answer and the reasoning. The numbers are drawn from ``random.Random(seed)`` (the same
draws on every machine and Python version: integer seeds, ``randrange``/``choice``/``sample`` only); the answer,
the reasoning's figures and the likely wrong answers are read from the simulator's runs of the scenario, never
written in. ``problem_for(lesson, seed)`` makes one: ``seed % len(kinds)`` picks the kind, so consecutive seeds
(a sheet of ``--count K``) go through every kind of a lesson, and the seed's draws pick the numbers.

Small on purpose, so a student can solve each by hand: one batch slot, or a 16-block pool of 16-token blocks, a few
requests with answers of tens to hundreds of tokens. ``scenario.config`` is the setting the question asks about:
a fresh run of the scenario gives the answer (a test checks every kind). Units: engine steps, tokens, MB (10^6
bytes), ms (the config's cost model).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sim.config import EngineConfig
from sim.engine import simulate
from sim.events import with_commas
from sim.metrics import request_latencies
from sim.request import RequestSpec
from sim.scenario import Scenario, config_to_dict
from sim.trace import Trace

from . import lesson_of

MAX_SEED = 2**31 - 1
MB = 1e6  # bytes; decimal, as the Cancellation lesson counts


@dataclass(frozen=True)
class Problem:
    """One problem. A multiple-choice problem has ``choices`` and ``answer`` is one of them; a number problem has no
    choices, ``answer`` is the number, right within ``tolerance`` of it, in ``unit``. ``mistakes`` pairs likely
    wrong answers (an option, or a figure another setting gives) with why they are wrong; ``hint`` is said for any
    other wrong answer (it gives no figure away)."""

    lesson: str
    seed: int
    kind: str
    scenario: Scenario
    question: str
    answer_text: str  # the answer as a sentence's worth: "500 steps", "C"
    reasoning: str  # the why, with the numbers, in 2-4 sentences
    choices: tuple[str, ...] = ()
    answer: str | float = 0.0
    tolerance: float = 0.0
    unit: str = ""
    mistakes: tuple[tuple[str | float, str], ...] = ()
    hint: str = ""

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.choices)

    @property
    def unit_phrase(self) -> str:
        """What a number answer is: 'a step number', 'a number of steps', 'a number of MB'."""
        return "a step number" if self.unit == "step" else f"a number of {self.unit}"

    def check(self, answer: str | float) -> tuple[bool, str]:
        """(correct, feedback). Right: the reasoning. Wrong: why that answer is wrong (a known mistake's reason, or
        too high / too low and the hint). An answer that is not an option, or not a number, says what is expected."""
        if self.is_multiple_choice:
            return self._check_choice(answer)
        return self._check_number(answer)

    def _check_choice(self, answer: str | float) -> tuple[bool, str]:
        picked = self._option(answer)
        if picked is None:
            options = ", ".join(f"{letter(i)}. {c}" for i, c in enumerate(self.choices))
            return False, f"{str(answer)!r} is not one of the options: {options}."
        if picked == self.answer:
            return True, f"Right: {self.answer_text}. {self.reasoning}"
        why = dict(self.mistakes).get(picked, self.hint)
        return False, f"Not {picked}: {why}"

    def _option(self, answer: str | float) -> str | None:
        text = str(answer).strip()
        for i, choice in enumerate(self.choices):
            if text.casefold() in (choice.casefold(), letter(i).casefold(), f"{letter(i)}.".casefold()):
                return choice
        return None

    def _check_number(self, answer: str | float) -> tuple[bool, str]:
        value = parse_number(answer)
        if value is None:
            return False, f"{str(answer)!r} is not a number: give {self.unit_phrase}, e.g. 120."
        assert isinstance(self.answer, float)
        if abs(value - self.answer) <= self.tolerance:
            return True, f"Right: {self.answer_text}. {self.reasoning}"
        for figure, why in self.mistakes:
            if isinstance(figure, float) and abs(value - figure) <= max(self.tolerance, 1e-9):
                return False, f"Not {fmt(value)}: {why}"
        side = "too high" if value > self.answer else "too low"
        return False, f"Not {fmt(value)}: that is {side}. {self.hint}"


_NUMBER = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*[a-zA-Z/% ]*\s*")


def parse_number(answer: str | float) -> float | None:
    """A typed answer as a number: 1100, "1,100", "1100 steps", "39.3 MB"; None when it is none (or not finite)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int | float):
        value = float(answer)
    else:
        m = _NUMBER.fullmatch(str(answer).replace(",", "").replace("_", ""))
        if m is None:
            return None
        value = float(m.group(1))
    return value if math.isfinite(value) else None


def letter(i: int) -> str:
    return "ABCDEFGHIJ"[i]


def fmt(value: float, decimals: int = 1) -> str:
    """1100 -> '1,100'; 371.666 -> '371.7' (``decimals`` places when not whole)."""
    return with_commas(int(value)) if float(value).is_integer() else f"{value:,.{decimals}f}"


def number_problem(lesson: str, seed: int, kind: str, scenario: Scenario, question: str, answer: float,
                   unit: str, reasoning: str, hint: str, mistakes: Sequence[tuple[float, str]] = (),
                   tolerance: float = 0.0, decimals: int = 1) -> Problem:
    """A number problem; mistakes that equal the answer (within the tolerance) or an earlier mistake are dropped,
    so each wrong figure has one reason and the right one none."""
    kept: list[tuple[float, str]] = []
    for figure, why in mistakes:
        figure = float(figure)
        if abs(figure - answer) > tolerance and all(abs(figure - f) > tolerance for f, _ in kept):
            kept.append((figure, why))
    text = f"step {fmt(answer)}" if unit == "step" else f"{fmt(answer, decimals)} {unit}"
    return Problem(lesson, seed, kind, scenario, question, text, reasoning,
                   answer=float(answer), tolerance=tolerance, unit=unit, mistakes=tuple(kept), hint=hint)


def choice_problem(lesson: str, seed: int, kind: str, scenario: Scenario, question: str, choices: Sequence[str],
                   answer: str, reasoning: str, hint: str, mistakes: Mapping[str, str]) -> Problem:
    """A multiple-choice problem; ``mistakes`` says why each wrong option is wrong (``hint`` for the others)."""
    return Problem(lesson, seed, kind, scenario, question, answer, reasoning, choices=tuple(choices), answer=answer,
                   mistakes=tuple((c, mistakes[c]) for c in choices if c != answer and c in mistakes), hint=hint)


def run_trace(config: EngineConfig, requests: Sequence[RequestSpec]) -> Trace:
    return simulate(config, list(requests))


def problem_scenario(lesson: str, seed: int, kind: str, config: EngineConfig, requests: Sequence[RequestSpec],
              description: str) -> Scenario:
    return Scenario(f"{lesson.capitalize()} problem, seed {seed} ({kind})", config, tuple(requests), description)


def row_of(trace: Trace, request_id: str) -> int:
    return trace.request_ids.index(request_id)


def finish_steps(trace: Trace) -> list[int]:
    """Per request: steps from its arrival to the end of its finish step."""
    return [int(v) for v in request_latencies(trace)["finish_steps"]]


def start_steps(trace: Trace) -> list[int]:
    return [int(v) for v in trace.requests["first_scheduled_step"]]



POLICY_NAME = {"fcfs": "FCFS", "sjf": "SJF (shortest answer first)", "vtc": "VTC", "lcf": "LCF",
                "priority": "priority"}
def check_lesson(lesson: object) -> str:
    """``lesson`` if it is a lesson's id; a ValueError names the allowed ids."""
    return lesson_of(lesson).id


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed: must be a whole number from 0 to {MAX_SEED:,}, got {seed!r}")
    return seed


def problem_for(lesson: str, seed: int) -> Problem:
    """The problem ``seed`` of ``lesson`` (an id of ``lessons.LESSONS``): the same on every machine. A ValueError
    names a bad lesson (and the allowed ones) or a bad seed."""
    kinds = lesson_of(lesson).problem_kinds  # (lessons/<lesson>/problems.py's KINDS)
    seed = check_seed(seed)
    return kinds[seed % len(kinds)](random.Random(seed), seed)


def problems(lesson: str, seed: int, count: int) -> list[Problem]:
    """``count`` problems: seeds ``seed``, ``seed + 1``, ... (consecutive seeds cycle through the lesson's kinds)."""
    return [problem_for(lesson, s) for s in range(seed, min(seed + count, MAX_SEED + 1))]


# ---- Markdown ------------------------------------------------------------------------------------------------
_REQUEST_COLUMNS = (  # (header, value of a RequestSpec, shown only when some request differs from the default)
    ("client", lambda r: r.client_id, "default"),
    ("arrives at step", lambda r: with_commas(r.arrival_step), None),
    ("prompt tokens", lambda r: with_commas(r.prompt_len), None),
    ("answer tokens", lambda r: with_commas(r.output_len), None),
    ("priority", lambda r: str(r.priority), "0"),
    ("user leaves at step", lambda r: "" if r.abort_step is None else with_commas(r.abort_step), ""),
)


def requests_table(requests: Sequence[RequestSpec]) -> str:
    """The requests as a Markdown table, with only the columns that say something."""
    columns = [(h, f) for h, f, default in _REQUEST_COLUMNS
               if default is None or any(f(r) != default for r in requests)]
    lines = ["| request | " + " | ".join(h for h, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    lines += [f"| {r.request_id} | " + " | ".join(f(r) for _, f in columns) + " |" for r in requests]
    return "\n".join(lines)


def engine_line(config: EngineConfig) -> str:
    """The engine's settings as the scenario file states them: '`num_blocks` = 999, `max_num_seqs` = 1, ...'."""
    settings = config_to_dict(config)
    settings.pop("cost", None)  # (the default cost model's numbers are in the question where it matters)
    return ", ".join(f"`{k}` = {with_commas(v) if isinstance(v, int) and not isinstance(v, bool) else v}"
                     for k, v in settings.items())


def to_markdown(problem: Problem, number: int, answers: bool = False, scenario_file: str = "") -> str:
    """The problem as Markdown: a heading, the engine, the requests, the question (and its options), and with
    ``answers`` the answer and the reasoning."""
    p = problem
    parts = [f"## Problem {number}: {p.lesson}, seed {p.seed} ({p.kind.replace('_', ' ')})",
             f"**Engine.** {engine_line(p.scenario.config)}", requests_table(p.scenario.requests),
             f"**Question.** {p.question}" + ("" if p.is_multiple_choice else f" (answer: {p.unit_phrase})")]
    if p.is_multiple_choice:
        parts.append("\n".join(f"- {letter(i)}. {c}" for i, c in enumerate(p.choices)))
    if scenario_file:
        parts.append(f"Scenario file: `{scenario_file}` (run it: `python -m sim run {scenario_file}`).")
    if answers:
        tolerance = f" (within {p.tolerance:g})" if p.tolerance else ""
        parts += [f"**Answer.** {p.answer_text}{tolerance}", f"**Why.** {p.reasoning}"]
    return "\n\n".join(parts)


