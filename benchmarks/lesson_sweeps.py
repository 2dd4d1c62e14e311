"""Time every lesson sweep a page fills in, uncached, as the page computes it: the Overload load sweeps (every
admission setting at every offered load), the Token budget sweep, the Preemption sizing grid,
each simulated one run after another in this process (a page spreads them over its prefetch
workers too). The Overload issue's target: its full sweep within the time the existing sweeps take.

    .venv/bin/python benchmarks/lesson_sweeps.py [--repeat 3]

Prints, per sweep: its runs, the engine steps simulated, and the best and median wall seconds over the repeats.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: the repo root on the path

from lessons.budget import lesson as budget  # noqa: E402
from lessons.overload import lesson as overload  # noqa: E402
from lessons.preemption import sizing  # noqa: E402
from sim import presets  # noqa: E402
from sim.engine import simulate  # noqa: E402
from sim.scenario import Scenario  # noqa: E402


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def _overload(key: str) -> Callable[[], list[Scenario]]:
    def runs() -> list[Scenario]:
        preset = presets.get(key)
        values = {k.key: k.default for k in overload.knobs(preset, preset.scenario, False)}
        load = overload.load_of(preset)
        return overload.sweep_runs(preset, preset.scenario, values, preset.knobs["load_sweep"],
                                   overload.sweep_duration(load[1]))
    return runs


def _budget() -> list[Scenario]:
    preset = presets.get("busy_budget")
    return budget.sweep_runs(preset.scenario, preset.knobs["budget_sweep"])


def _sizing() -> list[Scenario]:
    preset = presets.get("sizing")
    pools, seqs = sizing.sweep_axes(preset)
    return [sc for _, _, sc in sizing.sizing_points(preset.scenario, pools, seqs)]


SWEEPS: dict[str, Callable[[], list[Scenario]]] = {
    "overload past_the_knee": _overload("past_the_knee"),
    "overload request_cap": _overload("request_cap"),
    "overload two_classes": _overload("two_classes"),
    "budget busy_budget": _budget,
    "preemption sizing": _sizing,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=_positive_int, default=3, help="times each sweep runs (>= 1)")
    args = parser.parse_args(argv)
    print(f"{'sweep':<24} {'runs':>5} {'steps':>9} {'best s':>8} {'median s':>9}")
    for name, make in SWEEPS.items():
        scenarios = make()  # (workloads generated once, outside the timing: the page caches them)
        walls, steps = [], 0
        for _ in range(args.repeat):
            gc.collect()
            t0 = time.perf_counter()
            steps = sum(simulate(sc.config, list(sc.requests)).num_steps for sc in scenarios)
            walls.append(time.perf_counter() - t0)
        print(f"{name:<24} {len(scenarios):>5} {steps:>9,} {min(walls):>8.2f} {statistics.median(walls):>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
