"""The course: one record per lesson, in the order the course teaches them. Everything that lists the lessons reads
this registry: the navigation and the home page's cards (``ui/page.py``, ``app.py``), the guided paths and their
"next lesson" button (``ui/guide.py``), the problems (``lessons/problems.py``, ``python -m sim problems``) and the
tests' page parameters.

A lesson is a package ``lessons/<id>/`` with three modules of fixed names, loaded by name when first needed (so the
command line's problems never import the Streamlit side):

- ``lesson.py``: the free page's logic, the ``LessonModule`` interface of ``lessons/interface.py`` (its knobs,
  variants, headline cards and "what to notice" sentences, the same signatures in every lesson; no Streamlit calls),
- ``guide.py``: the guided path, ``STEPS`` (``lessons/guided.py``'s ``Step`` records),
- ``problems.py``: the seeded problems, ``KINDS`` (``lessons/problems.py``),

and a page ``pages/<n>_<Title>.py`` that draws it. Adding a lesson is that package, the page and one line in
``LESSONS`` (docs/ARCHITECTURE.md, "Add a lesson"; ``tests/test_lesson_registry.py`` checks each part).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Lesson:
    """One lesson of the course. ``id`` names it in URLs, widget keys, file names, presets (``Preset.lesson``) and
    the problems command line; ``title`` in the navigation and on the page; ``page`` is the Streamlit page file;
    ``icon`` a Material icon name for the navigation; ``question`` and ``summary`` are its home-page card (what the
    student does there, never its answers: a guided path asks the student to predict them first)."""

    id: str
    title: str
    page: str
    icon: str
    question: str
    summary: str

    @property
    def url_path(self) -> str:
        """The page's path in the app's URL, as Streamlit names it: ``pages/5_Token_budget.py`` -> ``Token_budget``."""
        return re.sub(r"^\d+_", "", self.page.rsplit("/", 1)[-1].removesuffix(".py"))

    def module(self, name: str) -> ModuleType:
        """The lesson's module ``name`` (``"lesson"``, ``"guide"`` or ``"problems"``), imported on first use."""
        if name not in MODULES:
            raise ValueError(f"module: {name!r} is not one of: {', '.join(MODULES)}")
        return importlib.import_module(f"{__name__}.{self.id}.{name}")

    @property
    def steps(self) -> tuple[Any, ...]:
        """The guided path's steps (``lessons/guided.py``'s ``Step``)."""
        return tuple(self.module("guide").STEPS)

    @property
    def problem_kinds(self) -> tuple[Any, ...]:
        """The problem makers, in the order consecutive seeds cycle through them."""
        return tuple(self.module("problems").KINDS)

    def presets(self) -> list[Any]:
        """The lesson's presets (``sim/presets.py``), the article's example first."""
        from sim.presets import presets_for
        return presets_for(self.id)


MODULES = ("lesson", "guide", "problems")  # the modules every lesson package has

LESSONS: tuple[Lesson, ...] = (
    Lesson("queueing", "Queueing", "pages/1_Queueing.py", ":material/hourglass_top:",
           "Who waits, and in what order?",
           "One long answer and two short ones share a single batch slot. Does the order they run in change the "
           "average wait, and who pays for a better one? First come, first served against shortest-job-first and "
           "vLLM's priority."),
    Lesson("fairness", "Fairness", "pages/2_Fairness.py", ":material/balance:",
           "Fair to whom: requests or customers?",
           "One customer sends most of the traffic, another a trickle. Is a server that is fair to requests fair to "
           "its customers? Try a per-client rate limit and the Virtual Token Counter."),
    Lesson("cancellation", "Cancellation", "pages/3_Cancellation.py", ":material/content_cut:",
           "What happens when the user closes the tab?",
           "A user stops reading halfway through an answer. What does a server that keeps generating cost: tokens, "
           "KV memory, and the users waiting behind it?"),
    Lesson("preemption", "Preemption", "pages/4_Preemption.py", ":material/autorenew:",
           "What if KV memory runs out mid-answer?",
           "Every running answer needs a new KV block now and then. When none is free, who is evicted, how does it "
           "come back, and what does that cost?"),
    Lesson("budget", "Token budget", "pages/5_Token_budget.py", ":material/speed:",
           "First token, or smooth streams?",
           "A long prompt arrives while others are streaming. Should its prefill go in one step or in chunks, and "
           "who waits either way?"),
    Lesson("overload", "Overload", "pages/7_Overload.py", ":material/traffic:",
           "What if more arrives than the server can serve?",
           "Requests arrive faster than they finish. What happens to the queue, to throughput and to the requests "
           "that meet their latency targets, and what can the server refuse at the door?"),
)

BY_ID: dict[str, Lesson] = {lesson.id: lesson for lesson in LESSONS}
IDS: tuple[str, ...] = tuple(BY_ID)


def lesson_of(lesson_id: object) -> Lesson:
    """The lesson ``lesson_id``; a ValueError names the allowed ids."""
    if not isinstance(lesson_id, str) or lesson_id not in BY_ID:
        raise ValueError(f"lesson: {lesson_id!r} is not one of: {', '.join(IDS)}")
    return BY_ID[lesson_id]


def following(lesson_id: str) -> Lesson | None:
    """The lesson after ``lesson_id`` in the course, None after the last."""
    i = [lesson.id for lesson in LESSONS].index(lesson_id)
    return LESSONS[i + 1] if i + 1 < len(LESSONS) else None
