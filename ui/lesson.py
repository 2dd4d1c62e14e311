"""The skeleton every lesson page shares: its header (title, question, preset, upload), the sidebar panels for the
engine and the workload, and the runs of the policy variants it compares.

A page is then: ``lp = open_lesson(...)``, its knobs (``lp.panel(...)``), ``lp.show_changes()`` once the sidebar
is drawn, ``run_variants(...)``, the step player (``lp.player(runs, unit)``) beside its Gantt charts, its other
charts and notices, and ``lp.footer(runs)``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

import lessons
from lessons.run import Run
from sim.admission import NEVER_RUNS, rejection_message
from sim.events import RejectReason, refusal
from sim.presets import Preset
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import WorkloadSpec

from . import guide, knobs, page, player, runner, sections
from .controls import Knob, KnobPanel, preset_picker
from .theme import ChartStyle
from .wording import chart_text, count, file_slug, join_and, plain


@dataclass(frozen=True)
class LessonPage:
    style: ChartStyle
    preset: Preset
    base: Scenario  # the preset's scenario, or the one the user uploaded
    is_uploaded: bool
    scope: str  # widget-state scope: a new preset (or uploaded file) resets the knobs to its defaults
    started_s: float  # time.perf_counter() when this rerun of the page began (a sweep's time budget counts from it)
    changes_slot: Any = None  # a place under the preset's description for show_changes()
    panels: list[tuple[KnobPanel, str]] = field(default_factory=list)  # the sidebar panels so far (and whose)
    deferred: list[Callable[[], None]] = field(default_factory=list)  # drawn last, in their slots (the player)

    def panel(self, title: str, key: str, knob_list: list[Knob]) -> dict[str, Any]:
        """A titled group of knobs in the sidebar; returns their values."""
        st.sidebar.subheader(title)
        return self.knob_panel(key, knob_list).render()

    def knob_panel(self, key: str, knob_list: list[Knob], whose: str = "") -> KnobPanel:
        """A panel of the page's settings (drawn by the caller), counted by show_changes(), which names a change
        ``whose`` setting it is (e.g. "Client A") when the knob's label alone does not say."""
        panel = KnobPanel(key, knob_list, self.scope)
        self.panels.append((panel, whose))
        return panel

    def show_changes(self) -> None:
        """Once the sidebar is drawn: under the preset's description, which settings now differ from it (the
        description and the article's numbers are the preset's), and a button back to the preset's settings."""
        changed = [(whose, knob, value) for panel, whose in self.panels for knob, value in panel.changed()]
        if not changed or self.changes_slot is None:
            return
        origin = "the uploaded scenario" if self.is_uploaded else "the preset"
        # (a knob's label is the course's, a client's name in it already escaped; a value may be a file's: plain)
        shown = [f"{whose + ': ' if whose else ''}{knob.label} {plain(knob.display(knob.default), 60)} → "
                 f"{plain(knob.display(value), 60)}" for whose, knob, value in changed[:MAX_CHANGES_LISTED]]
        more = len(changed) - len(shown)
        listed = "; ".join(shown) + (f"; and {more} more" if more else "")
        with self.changes_slot.container(horizontal=True, vertical_alignment="center"):
            st.caption(f":material/tune: Changed from {origin}: {listed}. The description above is {origin} as "
                       f"it starts.")
            st.button(f"Back to {origin}'s settings", key=f"{self.preset.lesson}.reset_settings",
                      on_click=_reset_panels, args=(tuple(p for p, _ in self.panels),), icon=":material/undo:",
                      width="content")

    def player(self, runs: Sequence[Run], unit: str, *, block_map: bool = False,
               start_step: Callable[[Trace], int] | None = None) -> None:
        """The step player for the runs compared (``ui/player.py``), here on the page: one step drives every column
        and every chart shown with ``cursor_runs``. ``start_step(trace)``: where it starts on a fresh preset. It is
        filled in by ``footer()``, after the charts: re-running the queues for it never delays them."""
        slot = st.container()
        self.deferred.append(lambda: player.show(runs, self.preset.lesson, unit, scope=self.scope,
                                                 block_map=block_map, start_step=start_step, container=slot))

    def footer(self, runs: Sequence[Run]) -> None:
        """The end of every lesson page: each run's scenario and trace to download; then the step player."""
        lesson = self.preset.lesson
        if st.session_state.get(page.NOTES_EXPORT):  # the course notes' export (ui/notes) links each run's scenario
            st.session_state[page.NOTES_RUNS] = [(run.label, run.scenario) for run in runs]
        st.subheader("Take it with you")
        for run in runs:
            st.caption(plain(run.label))
            sections.downloads(run.scenario, run.trace, file_slug(self.style.file_prefix, run.label),
                               key=f"{lesson}.{run.label}")
        for draw in self.deferred:
            draw()

    def workload(self, lesson: str, workload: WorkloadSpec | None = None) -> WorkloadSpec | None:
        """The shared workload knobs for a generated workload (``workload``, default the base scenario's)."""
        spec = self.base.workload if workload is None else workload
        if spec is None:
            return None
        values = self.panel("Workload", f"{lesson}.workload", knobs.workload_knobs(spec))
        return page.guarded(lambda: knobs.apply_workload(spec, values))  # (a setting the generator refuses: said)


MAX_CHANGES_LISTED = 4


def _reset_panels(panels: tuple[KnobPanel, ...]) -> None:
    for panel in panels:
        panel.reset()


def open_lesson(lesson: str, title: str, question: str) -> LessonPage:
    """Set the page up and draw its header: title, the question, the preset picker and the upload box."""
    started_s = time.perf_counter()
    style = page.setup(title.split(":")[0])
    if guide.take_over(lesson, style):  # the guided path, or a problem from a link: not the free page
        st.stop()
    st.title(title)
    st.markdown(question)
    preset = preset_picker(lesson, runner.presets_for(lesson))
    uploaded = sections.upload(lesson)  # (in the sidebar)
    if uploaded is None:
        st.caption(preset.description)
    else:  # the file's own words; the page's policies (the preset's) are compared on it
        said = " " + plain(uploaded.description) if uploaded.description.strip() else ""
        st.caption(f"**Your scenario: {plain(uploaded.name, 80)}.**{said} Compared as in the preset above: "
                   f"{join_and([label for label, _ in preset.variants])}.")
    changes_slot = st.empty()
    scope = preset.key if uploaded is None else f"upload:{runner.scenario_key(uploaded)}"
    base = preset.scenario if uploaded is None else as_variant_base(preset, uploaded)
    name = preset.key if uploaded is None else f"upload-{uploaded.name}"
    style = dataclasses.replace(style, file_prefix=file_slug("scheduler-lab", lesson, name),
                                figure_label=f"{lessons.lesson_of(lesson).title} · "
                                             f"{preset.title if uploaded is None else chart_text(uploaded.name, 60)}")
    return LessonPage(style, preset, base, uploaded is not None, scope, started_s, changes_slot)


def as_variant_base(preset: Preset, uploaded: Scenario) -> Scenario:
    """An uploaded scenario as the base the preset's variants override. A file is often one variant's download:
    a setting that a variant switches (FCFS's ``rate_limit_max_requests: 0``, "VTC 1:1"'s equal weights, "SJF, no
    guard"'s threshold 0) holds that variant's value there, and the other variants, which rely on the preset's
    value ("Rate limit", "VTC 1:2", "SJF + guard"), would run without it under their labels. Such a setting gets
    the preset's value back; every other setting of the file is kept."""
    ours, theirs = preset.scenario.config, uploaded.config
    restore = {name: getattr(ours, name) for _, overrides in preset.variants for name, value in overrides.items()
               if getattr(theirs, name) == value != getattr(ours, name)}
    return uploaded.with_config(**restore) if restore else uploaded


def run_variants(variants: Sequence[tuple[str, Scenario]], make: Callable[..., Any] = Run,
                 what: str = "policy", ahead: Sequence[Scenario] = ()) -> list[Any]:
    """Run each ``(label, scenario)`` (cached) and wrap it with ``make(label, scenario, trace, summary)``; a bad
    setting or a run that cannot finish stops the page with a clear message; no variant at all asks for one.
    ``ahead``: the runs the page makes next (a sweep), started on the other cores with these."""
    # The page runs the first half of the variants in order while a worker takes queued runs from the back: put
    # the second half last, so the worker starts on those before it gets to the sweep ``ahead`` (a sweep often
    # repeats a variant, e.g. SJF and FCFS as its references: that run keeps its place among the variants).
    half = (len(variants) + 1) // 2
    keys = {runner.scenario_key(sc) for _, sc in variants}
    sweep = [sc for sc in ahead if runner.scenario_key(sc) not in keys]
    runner.prefetch([*(sc for _, sc in variants[:half]), *sweep, *(sc for _, sc in variants[half:])])
    # A run not made before may take seconds (a busy preset, a large workload): a bar says which is running from
    # the start. Runs from the cache draw none (no flicker on a slider moved back).
    slot = None if all(runner.is_ready(key) for key in keys) else st.empty()
    runs = page.guarded(lambda: [_run_one(i, len(variants), label, sc, make, slot) for i, (label, sc) in
                                 enumerate(variants, 1)])
    if slot is not None:
        slot.empty()
    if not runs:
        st.warning(f"Pick at least one {what} to compare in the sidebar.", icon=":material/warning:")
        st.stop()
    messages = {run.label: unservable_message(run.scenario, run.trace) for run in runs}
    if len(set(messages.values())) == 1:
        text = next(iter(messages.values()))
    else:
        text = "\n".join(f"- **{plain(label)}:** {m}" for label, m in messages.items() if m)
    if text:
        st.warning(text, icon=":material/block:")
    return runs


def _run_one(i: int, n: int, label: str, scenario: Scenario, make: Callable[..., Any], slot: Any) -> Any:
    """One variant's run, with a progress bar in ``slot`` (None: no bar, every run is cached) that says which.
    Each update is also where a newer slider move stops this rerun: a busy preset never holds up the next one
    for longer than the run in progress."""
    if slot is not None:
        slot.progress((i - 1) / n, text=f":material/hourglass_top: Simulating {plain(label)} ({i:,} of {n:,}): "
                                        f"{count(len(scenario.requests), 'request')}…")
    # The first run is the page's own to make at once; the others the worker has begun on (from the back of the
    # queue) are waited for, with other pages running in this process (runner.run's ``patient``).
    trace = runner.run(scenario, patient=i > 1)
    return make(label, scenario, trace, runner.summary(scenario, trace))


def unservable_message(scenario: Scenario, trace: Trace) -> str:
    """Why some requests were rejected on arrival because this engine can never run them ('' if none were): the
    figures then cover only the others. Each reason in its own sentence (``sim.events.refusal``), about the one
    request or, for several, the largest of their figures. (A rate limit's rejections are the lesson's subject,
    not said here.)"""
    reasons = trace.finish_reason
    groups = {reason: rows for reason in NEVER_RUNS if (rows := [i for i, why in enumerate(reasons) if why == reason])}
    if not groups:
        return ""
    cfg, specs = scenario.config, scenario.requests
    parts = []
    for reason, rows in groups.items():
        one = len(rows) == 1
        # (several reasons: each part says how many requests it is about)
        who = count(len(rows), "request") if len(groups) > 1 else "it" if one else "they"
        if one:
            part = rejection_message(specs[rows[0]], cfg, who=who)
        else:
            part = refusal(reason, cfg, num_blocks=max(specs[i].max_blocks(cfg) for i in rows),
                           prompt_len=max(specs[i].prompt_len for i in rows), who=who, many=True)
        if reason is RejectReason.EXCEEDS_KV_POOL:
            part += f": enlarge the KV pool to run {'it' if one else 'them'}"
        parts.append(part)
    rejected = sum(map(len, groups.values()))
    verb = "was" if rejected == 1 else "were"
    return (f"**{rejected:,} of {count(len(reasons), 'request')} can never run on this engine and {verb} rejected on "
            f"arrival**: " + "; ".join(parts) + ". Every figure on this page counts only the others.")
