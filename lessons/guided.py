"""The guided path's pieces, shared by every lesson's path (``lessons/<lesson>/guide.py``): a step, the settings
it exposes, and the question it ends with. No Streamlit calls here (``ui/guide.py`` draws them), so every step's
answer can be checked against the simulator without a page.

A step names a preset, the preset's variants it runs (by label) and the settings it applies on top (each a knob the
student may change once the answer is out); ``ask(runs, values)`` builds its question from those runs, so the
answer, the explanation and the reasons for likely wrong answers are always the simulator's figures for the
step's settings (a question is a ``lessons.problems.Problem``: ``Problem.check`` says why a wrong answer is wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lessons.problems import Problem, choice_problem, number_problem
from sim import metrics
from sim.engine import simulate
from sim.presets import get
from sim.scenario import Scenario

from .run import Run

Values = Mapping[str, Any]


@dataclass(frozen=True)
class Setting:
    """A knob a step sets and exposes: ``apply(scenario, value)`` puts ``value`` into a run's scenario."""

    key: str
    label: str  # with its unit
    default: Any
    options: tuple[Any, ...]  # what a student may try (the default among them)
    apply: Callable[[Scenario, Any], Scenario]
    labels: Mapping[Any, str] = field(default_factory=dict)  # display names for options
    names_run: bool = False  # the run's label is the value's name (a setting that picks the policy)
    runs: tuple[str, ...] = ()  # the variants (labels) it reaches; () = every run of the step

    def reaches(self, label: str) -> bool:
        return not self.runs or label in self.runs

    def display(self, value: Any) -> str:
        return self.labels.get(value, f"{value:,}" if isinstance(value, int) else str(value))


def config_setting(key: str, name: str, label: str, default: Any, options: Sequence[Any],
                   labels: Mapping[Any, str] | None = None, names_run: bool = False,
                   runs: Sequence[str] = ()) -> Setting:
    """A setting that is one ``EngineConfig`` field (``name``), applied to the runs ``runs`` (default every run)."""
    return Setting(key, label, default, tuple(options), lambda sc, v: sc.with_config(**{name: v}), labels or {},
                   names_run, tuple(runs))


@dataclass(frozen=True)
class Step:
    """One step of a guided path. ``text`` is two or three sentences (Markdown, a glossary link at a term's first
    use), or a function of the step's values when a sentence names a figure a setting changes; it never names an
    answer. ``ask(runs, values)`` builds the question from the step's runs."""

    key: str
    title: str  # names no figure a setting changes
    text: str | Callable[[Values], str]
    preset: str  # sim.presets key
    variants: tuple[str, ...]  # the preset's variants run, by label, in order
    ask: Callable[[Sequence[Run], Values], Problem]
    charts: tuple[str, ...]  # what ui/guide.py draws once the answer is out (its CHARTS' names)
    settings: tuple[Setting, ...] = ()
    shown: tuple[str, ...] = ()  # the runs drawn (labels); () = every run
    unit: str = "steps"  # the charts' time axis
    start_step: Callable[[Any], int] | None = None  # where the player starts (of the first run's trace)

    def defaults(self) -> dict[str, Any]:
        return {s.key: s.default for s in self.settings}

    def chosen(self, values: Values | None = None) -> dict[str, Any]:
        """The step's values: its defaults, with ``values`` over them."""
        return {**self.defaults(), **(values or {})}

    def intro(self, values: Values | None = None) -> str:
        return self.text(self.chosen(values)) if callable(self.text) else self.text

    def scenarios(self, values: Values | None = None) -> list[tuple[str, Scenario]]:
        """(label, scenario) per variant: the preset's scenario with the variant's overrides, then the settings."""
        chosen = self.chosen(values)
        preset = get(self.preset)
        overrides = dict(preset.variants)
        out = []
        for label in self.variants:
            if label not in overrides:
                raise ValueError(f"step {self.key!r}: preset {self.preset!r} has no variant {label!r}; its "
                                 f"variants: {', '.join(overrides)}")
            scenario = preset.scenario.with_config(**overrides[label])
            name = label
            for s in self.settings:
                if s.reaches(label):  # (a setting reaches only the runs it is meant for)
                    scenario = s.apply(scenario, chosen[s.key])
                    name = s.display(chosen[s.key]) if s.names_run else name
            out.append((name, scenario))
        return out

    def shown_runs(self, runs: Sequence[Run]) -> list[Run]:
        return [r for r in runs if not self.shown or r.label in self.shown]


def simulate_step(step: Step, values: Values | None = None) -> list[Run]:
    """The step's runs, simulated here (the page uses the cached runner instead; the figures are the same)."""
    out = []
    for label, scenario in step.scenarios(values):
        trace = simulate(scenario.config, list(scenario.requests))
        out.append(Run(label, scenario, trace, metrics.summary(trace)))
    return out


def by_label(runs: Sequence[Run], label: str) -> Run:
    return next(r for r in runs if r.label == label)


def number_question(step: str, runs: Sequence[Run], question: str, answer: float, unit: str, reasoning: str,
                    hint: str, mistakes: Sequence[tuple[float, str]] = (), tolerance: float = 0.0,
                    decimals: int = 1) -> Problem:
    """A number to predict, right within ``tolerance`` (``lessons.problems.number_problem``, of the first run's
    scenario)."""
    return number_problem("guide", 0, step, runs[0].scenario, question, answer, unit, reasoning, hint, mistakes,
                          tolerance, decimals)


def choice_question(step: str, runs: Sequence[Run], question: str, choices: Sequence[str], answer: str,
                    reasoning: str, hint: str, mistakes: Mapping[str, str] | None = None) -> Problem:
    """A multiple-choice question; ``mistakes`` says why each wrong option is wrong (``hint`` for the others)."""
    if answer not in choices:
        raise ValueError(f"step {step!r}: the answer {answer!r} is not one of its choices {list(choices)}")
    return choice_problem("guide", 0, step, runs[0].scenario, question, choices, answer, reasoning, hint,
                          mistakes or {})
