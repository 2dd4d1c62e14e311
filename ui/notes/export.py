"""The export: for each lesson and preset chosen, run the page (``capture``), draw its charts (``render``) and
write the files, then each lesson's notes page (``document``). The pages run one after another in this thread
while Chromium draws the figures of the pages already run, on the other core.

Files, for ``--out DIR`` and the Queueing lesson::

    DIR/queueing.md, DIR/queueing.html           the notes page (Markdown; HTML with the figures inline)
    DIR/queueing/<preset>-<chart>.svg|.png|.html  each chart (the camera button's name less scheduler-lab-queueing-)
    DIR/queueing/plotly.min.js                    what the interactive charts load (no CDN)
    DIR/queueing/scenarios/<preset>-<run>.json    each run's scenario, for ``python -m sim run``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import lessons
from sim import scenario as scenario_io
from sim.presets import Preset
from ui.theme import ChartStyle, plotly_config
from ui.wording import file_slug

from . import document, render
from .capture import Capture, PageError, capture

__all__ = ["FORMATS", "THEMES", "Job", "PageError", "UsageError", "export", "parse_formats", "plan"]

FORMATS = ("svg", "png", "html")
THEMES = ("print", "screen")
SCREEN_WIDTH = 900  # px: a screen-theme figure's width in the files (on the page it is as wide as its column)


class UsageError(ValueError):
    """A lesson, preset, format or theme that does not exist: the message names the allowed values."""


@dataclass(frozen=True)
class Job:
    lesson: lessons.Lesson
    presets: tuple[Preset, ...]


DEFAULT = "default"  # --preset default: each lesson's first preset, the one its page opens on


def plan(lesson: str, presets: Sequence[str] = ()) -> list[Job]:
    """The lessons (``all`` or one id) and presets (keys, or ``default`` for each lesson's first; none: every
    preset of each lesson) to export."""
    if lesson != "all" and lesson not in lessons.IDS:
        raise UsageError(f"lesson: {lesson!r} is not one of: all, {', '.join(lessons.IDS)}")
    chosen = list(lessons.LESSONS) if lesson == "all" else [lessons.lesson_of(lesson)]
    by_lesson = {item.id: {p.key: p for p in item.presets()} for item in chosen}
    known = [key for keys in by_lesson.values() for key in keys]
    unknown = [key for key in presets if key not in known and key != DEFAULT]
    if unknown:
        where = "any lesson" if lesson == "all" else f"the {lesson} lesson"
        raise UsageError(f"preset: {unknown[0]!r} is not a preset of {where}; its presets: {DEFAULT} (each "
                         f"lesson's first), {', '.join(known)}")
    jobs = []
    for item in chosen:
        keys = [key for i, key in enumerate(by_lesson[item.id])
                if not presets or key in presets or (i == 0 and DEFAULT in presets)]
        if keys:
            jobs.append(Job(item, tuple(by_lesson[item.id][key] for key in keys)))
    return jobs


def parse_formats(text: str) -> tuple[str, ...]:
    """"svg,png" -> ("svg", "png"), in FORMATS' order; a UsageError names the allowed ones."""
    wanted = [part.strip().lower() for part in text.split(",") if part.strip()]
    bad = [part for part in wanted if part not in FORMATS]
    if bad or not wanted:
        raise UsageError(f"format: {bad[0] if bad else text!r} is not one of: {', '.join(FORMATS)} "
                         "(give one or more, joined by commas)")
    return tuple(fmt for fmt in FORMATS if fmt in wanted)


Progress = Callable[[str, int, int], None]  # (what is being done, files written so far, files known so far)


class _Count:
    """Files written and files known (the total grows as each page run says how many charts it drew)."""

    def __init__(self, progress: Progress | None) -> None:
        self.done, self.total, self.progress = 0, 0, progress

    def expect(self, n: int, what: str) -> None:
        self.total += n
        self.tell(what)

    def step(self, what: str) -> None:
        self.done += 1
        self.tell(what)

    def tell(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what, self.done, self.total)


def command_for(job: Job, formats: Sequence[str], theme: str) -> str:
    """The command line that writes ``job``'s notes (named in them)."""
    parts = ["python -m ui.notes", job.lesson.id]
    keys = [p.key for p in job.lesson.presets()]
    if [p.key for p in job.presets] == keys[:1]:
        parts.append(f"--preset {DEFAULT}")
    elif [p.key for p in job.presets] != keys:
        parts.append("--preset " + ",".join(p.key for p in job.presets))
    if tuple(formats) != FORMATS:
        parts.append("--format " + ",".join(formats))
    if theme != "print":
        parts.append(f"--theme {theme}")
    return " ".join([*parts, "--out <this folder>"])


def export(jobs: Sequence[Job], out: Path, formats: Sequence[str] = FORMATS, theme: str = "print",
           progress: Progress | None = None) -> list[Path]:
    """Write every job's figures, scenarios and notes pages under ``out``; the notes pages' paths."""
    if theme not in THEMES:
        raise UsageError(f"theme: {theme!r} is not one of: {', '.join(THEMES)}")
    out.mkdir(parents=True, exist_ok=True)
    count = _Count(progress)
    count.expect(sum(len(job.presets) for job in jobs) + len(jobs), "starting Chromium")
    written = []
    with render.Renderer() as renderer:
        pending: list[tuple[Job, list[tuple[Capture, list[Drawing]]]]] = []
        for job in jobs:
            folder = out / job.lesson.id
            (folder / "scenarios").mkdir(parents=True, exist_ok=True)
            per_preset = []
            for preset in job.presets:
                count.tell(f"{job.lesson.id}/{preset.key}: running the page")
                cap = capture(job.lesson, preset, theme)
                # (its words first: a page whose notes cannot be written fails now, not after every figure is drawn)
                document.blocks(job.lesson.title, "", "", "", [document.PresetNotes(
                    cap, [document.Figure(chart, {}) for chart in cap.charts], [])])
                count.step(f"{job.lesson.id}/{preset.key}: drawing {len(cap.charts)} charts")
                count.expect(len(cap.charts) * len(formats), f"{job.lesson.id}/{preset.key}: drawing")
                figures = [_draw(renderer, chart, folder, formats, count) for chart in cap.charts]
                per_preset.append((cap, figures))
            pending.append((job, per_preset))
        for job, per_preset in pending:
            written.append(_write_notes(job, per_preset, out, formats, theme, count))
    return written


Drawing = tuple[document.Figure, dict[str, Future[bytes]]]  # a figure and its files being drawn, by format


def _draw(renderer: render.Renderer, chart: document.Chart, folder: Path, formats: Sequence[str],
          count: _Count) -> Drawing:
    """Start drawing ``chart`` (its SVG always: the HTML notes inline it); write its interactive HTML now."""
    figure = render.prepared(chart.figure)
    width, height = chart.size
    size = (width or SCREEN_WIDTH, height or 450)
    futures = {fmt: renderer.submit(figure, fmt, size) for fmt in ("svg", "png")
               if fmt in formats or fmt == "svg"}
    files = {fmt: f"{folder.name}/{chart.name}.{fmt}" for fmt in formats}
    if "html" in formats:
        config = plotly_config(file_slug("scheduler-lab", folder.name, chart.name), ChartStyle(), size)
        render.write_html(figure, folder / f"{chart.name}.html", chart.name, config)
        count.step(f"{folder.name}: {chart.name}.html")
    return document.Figure(chart, files), futures


def _write_notes(job: Job, per_preset: list[tuple[Capture, list[Drawing]]], out: Path, formats: Sequence[str],
                 theme: str, count: _Count) -> Path:
    """Wait for the lesson's figures, write them, its scenarios and its notes pages."""
    folder = out / job.lesson.id
    notes = []
    for cap, figures in per_preset:
        done = []
        for figure, futures in figures:
            svg = b""
            for fmt, future in futures.items():
                data = future.result()
                if fmt == "svg":
                    data = svg = render.stable_svg(data, figure.chart.name)
                if fmt in formats:
                    (folder / f"{figure.chart.name}.{fmt}").write_bytes(data)
                    count.step(f"{job.lesson.id}: {figure.chart.name}.{fmt}")
            done.append(document.Figure(figure.chart, figure.files, svg))
        scenarios = []
        for label, scenario in cap.runs:
            name = file_slug(cap.preset.key, label)
            (folder / "scenarios" / f"{name}.json").write_text(scenario_io.dumps(scenario), encoding="utf-8")
            scenarios.append((label, f"{job.lesson.id}/scenarios/{name}.json"))
        notes.append(document.PresetNotes(cap, done, scenarios))
    items = document.blocks(job.lesson.title, job.lesson.question, job.lesson.summary,
                            command_for(job, formats, theme), notes, theme)
    page = out / f"{job.lesson.id}.md"
    page.write_text(document.markdown(items), encoding="utf-8")
    (out / f"{job.lesson.id}.html").write_text(document.page_html(items, f"{job.lesson.title}: course notes"),
                                                encoding="utf-8")
    count.step(f"{job.lesson.id}: notes written")
    return page
