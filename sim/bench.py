"""``python -m sim bench``: time the simulator on the benchmark workloads and print the figures.

For each scenario: engine steps, wall seconds of ``simulate`` with the full trace (best of ``repeat`` runs),
steps per second, and peak memory of one run (Python + numpy allocations, measured with tracemalloc in a
separate, untimed run). Targets (DESIGN/issue): load_2k_tight < 0.15 s, load_20k_tight < 1.5 s and 500 MB.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path

from . import scenario
from .engine import simulate

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "scenarios" / "bench"


def time_run(sc: scenario.Scenario, repeat: int) -> tuple[float, int, int]:
    """(best wall seconds, steps, preemptions)."""
    best, steps, preemptions = float("inf"), 0, 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        trace = simulate(sc.config, sc.requests, name=sc.name)
        best = min(best, time.perf_counter() - t0)
        steps, preemptions = trace.num_steps, int(trace.requests["num_preemptions"].sum())
    return best, steps, preemptions


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
    print(f"{'scenario':<22} {'requests':>8} {'steps':>7} {'preempt':>7} {'wall s':>8} {'steps/s':>9} {'peak MB':>8}")
    for path in paths:
        try:
            sc = scenario.load(path)
        except scenario.ScenarioError as e:
            print(f"error: {path}: {e}")
            return 2
        wall, steps, preemptions = time_run(sc, repeat)
        mem = peak_memory_mb(sc)
        print(f"{path.stem:<22} {len(sc.requests):>8} {steps:>7} {preemptions:>7} {wall:>8.3f} "
              f"{steps / wall:>9.0f} {mem:>8.1f}")
    return 0
