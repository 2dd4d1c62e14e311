"""Every number in every lesson's "what to notice" box is a figure of the runs on the screen, on every preset and
with each slider or number knob at its minimum, middle and maximum (one knob at a time, the others at the preset's
values), on the free page.

Each view is opened in AppTest with every simulation made in the test's own process (no prefetch workers, sweeps
without a time limit). The scenarios the page ran are recorded (``ui.runner.run`` and ``ui.runner.measure``, and
``ui.lesson._run_one`` for the runs it compares side by side), simulated afresh with ``sim.engine.simulate``, and
every number the sentences quote must be one of their figures (``tests/app/notice_figures.py`` says which are
allowed, and which numbers are names rather than figures). A view that shows an exception or an error box fails
too.

Marked ``sweep`` (minutes, not seconds): the fast loop leaves it out; the whole suite (scripts/test.sh) runs it.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import streamlit as st

from lessons import LESSONS
from sim import presets
from sim.scenario import Scenario
from tests.app import notice_figures as nf
from tests.app.conftest import open_page
from ui import background, controls, lesson, runner, sweeps

pytestmark = pytest.mark.sweep

PAGES = {lesson.id: lesson.page for lesson in LESSONS}  # every lesson in the course
CASES = [(name, p.key) for name in PAGES for p in presets.presets_for(name)]


class _NoWorkers:
    """ui.background's prefetcher without worker processes: every run is made in this process, where the
    recorder sees it."""

    @staticmethod
    def take(key: str, patience_s: float = 0.0) -> None:
        return None

    @staticmethod
    def status(key: str) -> None:
        return None

    @staticmethod
    def prefetch(items: Any) -> None:
        return None


@dataclass
class Recorder:
    """What the page ran while a view was open: scenario key -> (scenario, compared side by side), the runs'
    labels, and the knobs its panels drew."""

    scenarios: dict[str, tuple[Scenario, bool]] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    knobs: list[controls.Knob] = field(default_factory=list)

    def add(self, scenario: Scenario, compared: bool) -> None:
        key = runner.scenario_key(scenario)
        seen = self.scenarios.get(key)
        self.scenarios[key] = (scenario, compared or (seen is not None and seen[1]))

    def clear(self) -> None:
        self.scenarios.clear()
        self.labels.clear()
        self.knobs.clear()


@pytest.fixture(scope="module")
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    run, measure, run_one, render = runner.run, runner.measure, lesson._run_one, controls.KnobPanel.render

    def recorded_run(scenario: Scenario, *args: Any, **kwargs: Any) -> Any:
        rec.add(scenario, False)
        return run(scenario, *args, **kwargs)

    def recorded_measure(scenario: Scenario, *args: Any, **kwargs: Any) -> Any:
        rec.add(scenario, False)
        return measure(scenario, *args, **kwargs)

    def recorded_run_one(i: int, n: int, label: str, scenario: Scenario, *args: Any) -> Any:
        rec.add(scenario, True)
        rec.labels.append(label)
        return run_one(i, n, label, scenario, *args)

    def recorded_render(self: controls.KnobPanel, container: Any = None) -> dict[str, Any]:
        rec.knobs.extend(self.knobs)
        return render(self, container)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "_prefetcher", _NoWorkers)
        mp.setattr(sweeps, "RERUN_BUDGET_S", float("inf"))  # a sweep completes in the view's first run
        mp.setattr(runner, "run", recorded_run)
        mp.setattr(runner, "measure", recorded_measure)
        mp.setattr(lesson, "_run_one", recorded_run_one)
        mp.setattr(controls.KnobPanel, "render", recorded_render)
        yield rec
    st.cache_resource.clear()  # (later tests get a prefetcher with workers again)


@pytest.fixture(scope="module")
def checker() -> Iterator[ProcessPoolExecutor | None]:
    """One worker process that checks each view's sentences against fresh runs while this process opens the
    next view (the page's runs here, the fresh ones there: both cores busy). None with a single CPU."""
    if (os.cpu_count() or 1) < 2:
        yield None
        return
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    finally:
        pool.shutdown(cancel_futures=True)


def knob_values(knob: controls.Knob) -> list[Any]:
    """A slider's or number box's minimum, middle (on its step) and maximum, without its default."""
    lo, hi = knob.bounds
    step = knob.step or (1 if knob.kind == "int" else (hi - lo) / 100)
    mid = lo + round((hi - lo) / 2 / step) * step
    values = [lo, mid, hi]
    if knob.kind == "int":
        values = [int(round(v)) for v in values]
    else:
        values = [float(f"{v:.10g}") for v in values]
    return [v for i, v in enumerate(values) if v != knob.default and v not in values[:i]]


def is_swept(knob: controls.Knob) -> bool:
    return knob.kind in ("int", "float") and knob.widget in ("slider", "number")


# Contradictory settings (a client that stops before it starts; windows that close before the workload is drawn)
# get ui.page.guarded's "Invalid setting" box, which names the setting to move: the page's answer, not a failure.
INVALID_SETTING = "**Invalid setting:**"
DUMP = os.environ.get("SCHEDLAB_SWEEP_DUMP", "")


@dataclass
class View:
    """One view's outcome: problems found on the page itself, a pending check of its sentences, the settings it
    refused."""

    name: str
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0  # to open it (the page's runs and its rerun; the check runs meanwhile in the worker)
    check: Future | list[tuple[str, str]] | None = None
    refused: str = ""

    def all_problems(self) -> list[str]:
        found = self.check.result() if isinstance(self.check, Future) else (self.check or [])
        return self.problems + [f"[{self.name}] {problem}\n    {sentence}" for sentence, problem in found]


def open_view(page: str, query: dict[str, str], rec: Recorder, constants: dict[str, float], name: str,
              pool: ProcessPoolExecutor | None) -> View:
    """Open the view, check what the page shows by itself, and start the check of its sentences."""
    rec.clear()
    started = time.perf_counter()
    at = open_page(page, query)
    view = View(name, [f"[{name}] exception: {e.value}" for e in at.exception], time.perf_counter() - started)
    for e in at.error:
        if e.value.startswith(INVALID_SETTING):
            view.refused = e.value
        else:
            view.problems.append(f"[{name}] error box: {e.value}")
    if view.problems or view.refused:
        return view
    names = set(rec.labels)
    for sc, _ in rec.scenarios.values():
        names.add(sc.config.model.name)
        names.update(r.request_id for r in sc.requests)
        names.update(r.client_id for r in sc.requests)
    notices = nf.ViewNotices(name, tuple((key, sc, compared) for key, (sc, compared) in rec.scenarios.items()),
                             tuple(nf.sentences(i.value for i in at.info)), frozenset(names),
                             tuple(constants.items()))
    if DUMP:  # every sentence of every view, to read them (SCHEDLAB_SWEEP_DUMP=file)
        with open(DUMP, "a", encoding="utf-8") as f:
            f.writelines(f"{name}\t{sentence}\n" for sentence in notices.sentences)
    if pool is None:
        view.check = nf.check_notices(notices)
    else:
        with background._bare_main():  # (a spawned worker must not import pytest's __main__)
            view.check = pool.submit(nf.check_notices, notices)
    return view


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("name", "preset"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_every_number_in_the_notices_is_a_figure_of_the_runs(name: str, preset: str, recorder: Recorder,
                                                             checker: ProcessPoolExecutor | None) -> None:
    page = PAGES[name]
    constants = nf.package_constants(name)
    started = time.perf_counter()
    views = [open_view(page, {"preset": preset}, recorder, constants, f"{preset}, preset's settings", checker)]
    knobs = [k for k in recorder.knobs if is_swept(k)]
    seen: set[tuple[str, str]] = set()
    for knob in knobs:
        for value in knob_values(knob):
            if (knob.key, str(value)) in seen:
                continue
            seen.add((knob.key, str(value)))
            views.append(open_view(page, {"preset": preset, knob.key: str(value)}, recorder, constants,
                                   f"{preset}, {knob.key}={value}", checker))
    problems = [p for view in views for p in view.all_problems()]
    refused = [f"{view.name}: {view.refused[:160]}" for view in views if view.refused]
    slowest = ", ".join(f"{v.name.split(', ')[1]} {v.seconds:.1f} s"
                        for v in sorted(views, key=lambda v: -v.seconds)[:3])
    print(f"\n{name}/{preset}: {len(views)} views in {time.perf_counter() - started:.1f} s (slowest: {slowest})"
          + "".join(f"\n  refused (contradictory settings) {r}" for r in refused))
    assert not problems, f"{len(problems)} problems in {len(views)} views:\n" + "\n".join(problems)
