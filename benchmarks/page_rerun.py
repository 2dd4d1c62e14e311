"""Server-side rerun time of every lesson page after a slider change, for every preset (AppTest timing).

    .venv/bin/python benchmarks/page_rerun.py [--rounds N] [--apptest-polling] [page ...]

For each page and preset: open it (first run, cold caches), then move the KV pool slider to REPEAT values it has
not had yet and time each rerun (new simulations, charts rebuilt), moving it back to the start value after each
(cached runs, timed too). Target: a slider change reruns in under 300 ms.

This shared 2-core VM has stretches of a few seconds in which everything runs up to ~1.7x slower (a plain Python
loop too: a neighbour on the host), long enough to cover all REPEAT reruns of a preset. So the whole measurement
runs ROUNDS times (``--rounds``, default 3), a few minutes apart for each preset, and each column is the fastest
over every round; "each round" lists each round's fastest slider rerun, so the spread stays visible.

A sweep (ui.sweeps) may still be filling in after the rerun: "settled ms" is the time from the slider change
until the page is complete, the rerun plus one more without a time limit on the sweep (in a browser the sweep's
fragment polls instead, every ui.sweeps.POLL_EVERY_S, and the page reruns once at the end, from cache); "-" where
the rerun already had everything.

How AppTest waits: it polls for the end of the script run with ``time.sleep(0.001)``, so the waiting thread asks
for the GIL ~1,000 times a second while the page's thread simulates, which slows CPU-bound pages by 20-50% on
this machine (a thread that polls like that beside a simulation: 52 -> 82 ms). A Streamlit server does not poll
(its event loop sleeps until there are messages to send). So this script waits for AppTest's script thread with
a blocking join instead; ``--apptest-polling`` keeps AppTest's own wait, for comparison.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
from streamlit.testing.v1 import AppTest, local_script_runner  # noqa: E402

from lessons import LESSONS  # noqa: E402
from sim import presets  # noqa: E402

PAGES = {lesson.id: lesson.page for lesson in LESSONS}  # every lesson of the course


def _pool_slider(at: AppTest):
    for slider in at.slider:
        # The Preemption page sets the pool in GiB (memory), the other pages in blocks.
        if slider.key and slider.key.endswith(("engine.num_blocks", "engine.pool_gib")):
            return slider
    raise LookupError("no KV pool slider (key ending in 'engine.num_blocks' or 'engine.pool_gib') on the page")


REPEAT = 3
ROUNDS = 3


def _wait_without_polling(runner: local_script_runner.LocalScriptRunner, timeout: float = 3) -> None:
    """AppTest's require_widgets_deltas, blocking on the script thread instead of polling every millisecond."""
    thread = runner._script_thread
    if thread is not None:
        thread.join(timeout)
    if not runner.script_stopped():
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


def _sweep_running(at: AppTest) -> bool:
    from ui import sweeps  # (imported once AppTest has set Streamlit up: no "no runtime" warnings)

    return any(sweeps.RUNNING_TEXT in c.value for c in at.caption)


def _timed_set(at: AppTest, value: float) -> tuple[float, float | None]:
    """(rerun s, s until its sweeps were complete, None if the rerun had them whole)."""
    from ui import sweeps

    t0 = time.perf_counter()
    _pool_slider(at).set_value(value).run()
    rerun = time.perf_counter() - t0
    if not _sweep_running(at):
        return rerun, None
    with sweeps.without_time_limit():  # one more rerun runs all that is left
        at.run()
    if _sweep_running(at):
        raise RuntimeError("a sweep was still running after a rerun without a time limit")
    return rerun, time.perf_counter() - t0


@contextlib.contextmanager
def _quiet_streamlit() -> Iterator[None]:
    """Warnings off for a moment (errors still print)."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def time_page(lesson: str, preset: str) -> tuple[float, float, float, float | None]:
    """(first run s, fastest rerun after a slider change s, fastest rerun back to the start value s, fastest time
    from a slider change until its sweeps were complete s or None). Caches are emptied first: presets share
    workloads (busy_server and predicted_lengths run the same policies on the same requests), and a run cached
    by the preset before would make this one look fast."""
    with _quiet_streamlit():  # outside a script run Streamlit warns that it has no runtime: expected here
        st.cache_data.clear()
        st.cache_resource.clear()  # (the prefetch workers too: they start again in the first run, not timed)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(PAGES[lesson])
    at.query_params["preset"] = preset
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"{lesson}/{preset}: {at.exception[0].value}")
    slider = _pool_slider(at)
    old, step = slider.value, slider.step or 1
    up = old + REPEAT * step <= slider.max
    changed, settled, back = [], [], []
    for i in range(1, REPEAT + 1):
        rerun, complete = _timed_set(at, old + i * step if up else old - i * step)  # a value not run yet
        changed.append(rerun)
        settled.append(rerun if complete is None else complete)
        back.append(_timed_set(at, old)[0])  # cached
    if at.exception:
        raise RuntimeError(f"{lesson}/{preset}: {at.exception[0].value}")
    return first, min(changed), min(back), (min(settled) if max(settled) > max(changed) else None)


def _fastest(rounds: list[tuple[float, float, float, float | None]]) -> tuple[float, float, float, float | None]:
    """Each column's fastest over the rounds (settled: None if no round had a sweep still filling in)."""
    settled = [r[3] for r in rounds if r[3] is not None]
    return (min(r[0] for r in rounds), min(r[1] for r in rounds), min(r[2] for r in rounds),
            min(settled) if settled else None)


def take_rounds(args: list[str], default: int) -> tuple[int, list[str]]:
    """(the ``--rounds N`` of ``args``, else ``default``; the other arguments). ValueError says what N may be."""
    if "--rounds" not in args:
        return default, args
    i = args.index("--rounds")
    value = args[i + 1] if i + 1 < len(args) else ""
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--rounds: must be a whole number >= 1, got {value!r}")
    return int(value), args[:i] + args[i + 2:]


def main(args: list[str]) -> int:
    if "--apptest-polling" in args:
        args = [a for a in args if a != "--apptest-polling"]
        print("waiting as AppTest does (polling every 1 ms)")
    else:
        local_script_runner.require_widgets_deltas = _wait_without_polling
    try:
        rounds, args = take_rounds(args, ROUNDS)
    except ValueError as e:
        print(e)
        return 2
    lessons = args or list(PAGES)
    unknown = [lesson for lesson in lessons if lesson not in PAGES]
    if unknown:
        print(f"unknown page {unknown[0]!r}: choose from {', '.join(PAGES)}")
        return 2
    pages = [(lesson, p.key) for lesson in lessons for p in presets.presets_for(lesson)]
    results: dict[tuple[str, str], list] = {page: [] for page in pages}
    for r in range(rounds):
        print(f"round {r + 1} of {rounds} ...", flush=True)
        for lesson, preset in pages:
            results[lesson, preset].append(time_page(lesson, preset))
    print(f"{'page':<13} {'preset':<20} {'first s':>8} {'slider ms':>10} {'back ms':>8} {'settled ms':>11}  "
          f"each round (slider ms)")
    worst = 0.0
    for (lesson, preset), measured in results.items():
        first, changed, back, settled = _fastest(measured)
        worst = max(worst, changed)
        sweep = "-" if settled is None else f"{settled * 1000:.0f}"
        each = " / ".join(f"{m[1] * 1000:.0f}" for m in measured)
        print(f"{lesson:<13} {preset:<20} {first:>8.2f} {changed * 1000:>10.0f} {back * 1000:>8.0f} {sweep:>11}  "
              f"{each}")
    print(f"slowest slider rerun: {worst * 1000:.0f} ms (target < 300 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
