"""Time the Preemption lesson's sizing sweep: the "sizing" preset's workload at every (max_num_seqs, KV pool
size) pair of its 10 x 10 grid, exactly as the page computes it (uncached). Target: under 2 s on a 2-core machine.

    .venv/bin/python benchmarks/sizing_sweep.py [--repeat 3]

Prints the wall and CPU seconds of each repeat, the best, the engine steps simulated and the grid of preemptions.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: the repo root on the path

from lessons.preemption import sizing  # noqa: E402
from sim import presets  # noqa: E402

TARGET_S = 2.0


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=_positive_int, default=3,
                        help="runs of the whole sweep (>= 1; best is reported)")
    args = parser.parse_args(argv)
    preset = presets.get("sizing")
    pools, seqs = sizing.sweep_axes(preset)
    walls, cpus = [], []
    for _ in range(args.repeat):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        sweep = sizing.sizing_sweep(preset.scenario, pools, seqs)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    runs, steps = sweep.preemptions.size, int(sweep.num_steps.sum())
    print(f"sizing sweep: {len(seqs)} x {len(pools)} = {runs} runs, {steps:,} engine steps "
          f"({steps / runs:,.0f} per run), {len(preset.scenario.requests)} requests each")
    for k, (w, c) in enumerate(zip(walls, cpus, strict=True), start=1):
        print(f"  run {k}: {w:.3f} s wall, {c:.3f} s CPU")
    best = min(walls)
    print(f"best: {best:.3f} s wall ({steps / best:,.0f} steps/s, {best / runs * 1e3:.1f} ms per run); "
          f"target < {TARGET_S:.1f} s: {'ok' if best < TARGET_S else 'OVER'}")
    print("preemptions (rows: max_num_seqs, top = most; columns: pool GiB):")
    print("      " + " ".join(f"{g:>5.2f}" for g in pools))
    for i in reversed(range(len(seqs))):
        print(f"  {seqs[i]:>3} " + " ".join(f"{int(v):>5}" for v in sweep.preemptions[i]))
    return 0 if best < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
