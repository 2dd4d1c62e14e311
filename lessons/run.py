"""A lesson's run: one policy variant of the lesson, run on the lesson's workload (``ui.lesson.run_variants`` makes
them; the lessons' sentences, guides and charts read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.scenario import Scenario
from sim.trace import Trace


@dataclass
class Run:
    """One policy variant of a lesson, run on the lesson's workload."""

    label: str
    scenario: Scenario
    trace: Trace
    summary: dict[str, Any]  # sim.metrics.summary
