"""The one interface every lesson's ``lesson.py`` has (``LessonModule``): the free page calls each lesson the same
way, with the same names and the same signatures.

A page's common path is::

    own = lp.panel(..., lesson.knobs(preset, base, lp.is_uploaded))   # the lesson's own sidebar panel
    config = lesson.apply(config, own)                                # that panel's values onto the config
    runs = run_variants(lesson.variants(preset, scenario, own))       # the runs compared
    page.cards([lesson.headline(run, unit) for run in runs])          # a card per run
    page.notice(lesson.notices(runs, unit))                           # "what to notice"

What a lesson needs beyond that it reads from ``values`` (the chosen policies, a toggle) and ``preset`` (its
reference config, its sweeps), or derives from the runs (a story such as Cancellation's abandoned request). A lesson
with more panels keeps extra functions under other names (Preemption's ``apply_engine`` and ``apply_swap``, Token
budget's ``apply_engine``); a sweep's sentences are functions of their own (``sigma_notice``, ``sweep_notice``).

``mismatches(module)`` says how a module differs from the interface (``tests/lessons/test_lesson_interface.py``
checks every lesson of the registry with it).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # (the types only: importing ui.controls at run time would import Streamlit)
    from sim.config import EngineConfig
    from sim.presets import Preset
    from sim.scenario import Scenario
    from ui.controls import Knob
    from ui.wording import Card

    from .run import Run


class LessonModule(Protocol):
    """A lesson's ``lesson.py``: the free page's logic, no Streamlit calls."""

    LESSON: str  # the registry id (``lessons.LESSONS``)
    QUESTION: str  # the page's opening question (Markdown; a glossary term linked at its first use)

    def knobs(self, preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
        """The lesson's own sidebar panel, its defaults from ``base`` (the preset's scenario, or an uploaded one:
        ``uploaded``)."""
        ...

    def apply(self, config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
        """That panel's ``values`` onto ``config`` (what every run shares; what differs per run is ``variants``')."""
        ...

    def variants(self, preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
        """The runs compared, ``(label, scenario)``, each ``scenario`` with the variant's settings."""
        ...

    def headline(self, run: Run, unit: str) -> Card:
        """A run's headline card (times in ``unit``, "steps" or "ms", where the lesson shows times in it)."""
        ...

    def notices(self, runs: Sequence[Run], unit: str) -> list[str]:
        """The "what to notice" sentences of the runs, most important first."""
        ...


def members() -> dict[str, inspect.Signature | None]:
    """The interface's members: name -> the signature a module's function must have (``self`` left out), or None
    for a constant."""
    out: dict[str, inspect.Signature | None] = dict.fromkeys(LessonModule.__annotations__)
    for name, value in vars(LessonModule).items():
        if inspect.isfunction(value) and not name.startswith("_"):
            signature = inspect.signature(value)
            out[name] = signature.replace(parameters=list(signature.parameters.values())[1:])
    return out


def _shape(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    """What two signatures must share: each parameter's name, kind and default, in order (not the annotations:
    a lesson may take its own ``Run`` subclass)."""
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def mismatches(module: ModuleType) -> list[str]:
    """How ``module`` differs from ``LessonModule``: a member missing, a constant that is no string, a function
    whose parameters differ (name, order, kind or default). Empty when it conforms."""
    out = []
    for name, wanted in members().items():
        if not hasattr(module, name):
            out.append(f"{module.__name__}.{name}: missing")
            continue
        value = getattr(module, name)
        if wanted is None:
            if not isinstance(value, str):
                out.append(f"{module.__name__}.{name}: must be a str, got {type(value).__name__}")
            continue
        if not callable(value):
            out.append(f"{module.__name__}.{name}: must be a function, got {type(value).__name__}")
            continue
        got = inspect.signature(value)
        if _shape(got) != _shape(wanted):
            out.append(f"{module.__name__}.{name}{got}: the interface's is {name}{wanted}")
    return out
