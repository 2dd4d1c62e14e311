"""``python -m sim bench``: time the simulator on the benchmark workloads and print the figures.

For each scenario: engine steps, wall seconds of ``simulate`` with the full trace (the best of ``repeat`` runs,
and their median), steps per second (of the best run), and peak memory of one run (Python + numpy allocations,
measured with tracemalloc in a separate, untimed run). Targets (DESIGN/issue): load_2k_tight < 0.15 s,
load_20k_tight < 1.5 s and 500 MB.

The best run is the engine's speed; the median shows how much the machine wandered meanwhile (a shared 2-core
VM here: the same run takes up to ~1.6x as long on a busy minute).
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from pathlib import Path

from . import scenario
from .engine import simulate

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "scenarios" / "bench"


def time_run(sc: scenario.Scenario, repeat: int) -> tuple[float, float, int, int]:
    """(best wall seconds, median wall seconds, steps, preemptions)."""
    walls, steps, preemptions = [], 0, 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        trace = simulate(sc.config, sc.requests, name=sc.name)
        walls.append(time.perf_counter() - t0)
        steps, preemptions = trace.num_steps, int(trace.requests["num_preemptions"].sum())
    return min(walls), statistics.median(walls), steps, preemptions


def peak_memory_mb(sc: scenario.Scenario) -> float:
    gc.collect()
    tracemalloc.start()
    simulate(sc.config, sc.requests, name=sc.name)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


def main(files: list[str], repeat: int = 5) -> int:
    paths = [Path(f) for f in files] or sorted(DEFAULT_DIR.glob("*.json"))
    if not paths:
        print(f"no benchmark scenarios found in {DEFAULT_DIR}")
        return 2
    print(f"{'scenario':<22} {'requests':>8} {'steps':>7} {'preempt':>7} {'wall s':>8} {'median s':>8} "
          f"{'steps/s':>9} {'peak MB':>8}")
    for path in paths:
        try:
            sc = scenario.load(path)
        except scenario.ScenarioError as e:
            print(f"error: {path}: {e}")
            return 2
        wall, median, steps, preemptions = time_run(sc, repeat)
        mem = peak_memory_mb(sc)
        print(f"{path.stem:<22} {len(sc.requests):>8} {steps:>7} {preemptions:>7} {wall:>8.3f} {median:>8.3f} "
              f"{steps / wall:>9.0f} {mem:>8.1f}")
    return 0
