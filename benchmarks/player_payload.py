"""What the step player costs the server and the network, per preset: the time to build a window of steps for each
compared run (re-running the queues, ``sim.playback.record_window``, then wording it, ``ui.timeline.run_payload``;
the server does this once per run and window, then serves it from its cache) and the bytes sent for it.

    python benchmarks/player_payload.py [--repeat 3] [--lesson queueing]

Prints best-of times (the machine is shared: compare figures from one sitting) and JSON sizes. Playing, stepping
and jumping happen in the browser and cost the server nothing; the server hears of the step only when the player
pauses (to put it in the URL) or leaves its window.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim import presets  # noqa: E402
from sim.engine import simulate  # noqa: E402
from sim.playback import record_window, window_around  # noqa: E402
from ui import timeline  # noqa: E402

LESSONS = ("queueing", "fairness", "cancellation", "preemption", "budget")


def measure(lesson: str, repeat: int) -> list[tuple[str, int, float, int]]:
    """(preset, steps in its longest run, best build time of all its runs' first windows in s, their JSON bytes)."""
    rows = []
    for preset in presets.presets_for(lesson):
        runs = []
        for label, overrides in preset.variants:
            sc = preset.scenario.with_config(**overrides) if overrides else preset.scenario
            runs.append((label, sc, simulate(sc.config, sc.requests)))
        best, size = float("inf"), 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            window = []
            for label, sc, trace in runs:
                first, end = window_around(0, trace.num_steps)
                playback = record_window(sc.config, sc.requests, first, end, block_map=lesson == "preemption")
                window.append(timeline.run_payload(label, trace, playback))
            best = min(best, time.perf_counter() - t0)
            size = len(json.dumps(window))
        rows.append((preset.key, max(t.num_steps for _, _, t in runs), best, size))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="builds per preset, best kept (default 3)")
    parser.add_argument("--lesson", choices=LESSONS, action="append", help="only this lesson (repeatable)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat: must be at least 1, got {args.repeat}")
    print(f"{'lesson':13} {'preset':22} {'steps':>6} {'build (best)':>13} {'sent':>9}")
    for lesson in args.lesson or LESSONS:
        for key, steps, best_s, size in measure(lesson, args.repeat):
            print(f"{lesson:13} {key:22} {steps:6,} {best_s * 1000:10.0f} ms {size / 1000:6.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
