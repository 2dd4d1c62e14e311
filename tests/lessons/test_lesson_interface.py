"""Every lesson's ``lesson.py`` has the one interface, ``lessons.interface.LessonModule``: the same members with the
same parameters (names, order, kinds, defaults), so every page calls every lesson the same way."""

from __future__ import annotations

import types
from typing import Any

import pytest

from lessons import LESSONS
from lessons.interface import LessonModule, members, mismatches


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.id for lesson in LESSONS])
def test_every_lesson_module_has_the_interface(lesson):
    module = lesson.module("lesson")
    assert mismatches(module) == []  # each member, its parameters as the Protocol's (inspect.signature)
    assert lesson.id == module.LESSON


def test_the_interface_has_the_members_every_page_calls():
    assert list(members()) == ["LESSON", "QUESTION", "knobs", "apply", "variants", "headline", "notices"]
    shown = {name: list(sig.parameters) for name, sig in members().items() if sig is not None}
    assert shown == {"knobs": ["preset", "base", "uploaded"], "apply": ["config", "values"],
                     "variants": ["preset", "scenario", "values"], "headline": ["run", "unit"],
                     "notices": ["runs", "unit"]}
    assert LessonModule.__doc__


def _toy(**changes: Any) -> types.ModuleType:
    """A module with the interface (every function a stub), then ``changes``."""
    module = types.ModuleType("toy.lesson")
    module.LESSON, module.QUESTION = "toy", "Why?"
    module.knobs = lambda preset, base, uploaded: []
    module.apply = lambda config, values: config
    module.variants = lambda preset, scenario, values: []
    module.headline = lambda run, unit: None
    module.notices = lambda runs, unit: []
    for name, value in changes.items():
        if value is None:
            delattr(module, name)
        else:
            setattr(module, name, value)
    return module


def test_a_conforming_toy_passes():
    assert mismatches(_toy()) == []


@pytest.mark.parametrize(("changes", "said"), [
    ({"notices": lambda runs: []}, "notices"),  # a parameter missing
    ({"notices": lambda runs, story, unit: []}, "notices"),  # one too many
    ({"variants": lambda preset, base, chosen: []}, "variants"),  # other names
    ({"apply": lambda values, config: config}, "apply"),  # the order swapped
    ({"headline": lambda run, unit="steps": None}, "headline"),  # a default the interface has not
    ({"knobs": lambda preset, base, *, uploaded: []}, "knobs"),  # keyword-only
    ({"headline": None}, "headline: missing"),
    ({"QUESTION": None}, "QUESTION: missing"),
    ({"LESSON": 3}, "LESSON: must be a str"),
    ({"apply": "apply"}, "apply: must be a function"),
])
def test_the_check_fails_for_a_module_that_differs(changes, said):
    found = mismatches(_toy(**changes))
    assert len(found) == 1 and said in found[0], found
