"""Where ``python -m sim run FILE --out RESULT`` spends its time besides the simulation.

    .venv/bin/python benchmarks/cli_overhead.py [FILE] [--runs N] [--steps]

In-process, each of ``--runs`` rounds (default 20) goes through the CLI's phases with the functions the CLI calls
and times each: load and validate the scenario (``scenario.load``; its JSON parse and its ``scenario_from_dict``
are also timed on their own, for reference), ``simulate``, the records and the summary (``result_of``), the
result's JSON text (``result_json``), the write. The overhead is everything but ``simulate``; target: under a
quarter of it. Out of process: the interpreter's start-up, ``import sim.__main__`` on top of it, and the whole
command.

Each figure is the best round (this 2-core VM is shared and has slow stretches, see the README), with the median
and the worst beside it as the spread. Default FILE: benchmarks/scenarios/load_2k_tight.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim import scenario  # noqa: E402
from sim.__main__ import result_json, result_of  # noqa: E402
from sim.engine import simulate  # noqa: E402

DEFAULT_FILE = ROOT / "benchmarks" / "scenarios" / "load_2k_tight.json"
OVERHEAD_TARGET = 0.25  # of the simulation's time


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def one_round(path: Path, out: Path, steps: bool) -> dict[str, float]:
    """Seconds per phase of one pass through the CLI's work (the same calls in the same order as ``_run``), and
    before it, for reference, the load's two halves on their own."""
    clock = time.perf_counter
    t0 = clock()
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    t1 = clock()
    scenario.scenario_from_dict(data)
    t2 = clock()
    sc = scenario.load(path)
    t3 = clock()
    trace = simulate(sc.config, sc.requests, name=sc.name)
    t4 = clock()
    result = result_of(sc.name, trace, steps)
    t5 = clock()
    text = result_json(result)
    t6 = clock()
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
    t7 = clock()
    times = {"(read + json parse alone)": t1 - t0, "(scenario_from_dict alone)": t2 - t1, "load + validate": t3 - t2,
             "simulate": t4 - t3, "records + summary": t5 - t4, "JSON text": t6 - t5, "write": t7 - t6}
    times["overhead (all but simulate)"] = (t7 - t2) - times["simulate"]
    return times


def subprocess_best(argv: list[str], runs: int) -> list[float]:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
    return walls


def _row(label: str, walls: list[float]) -> str:
    return (f"{label:<30} {min(walls) * 1e3:>8.1f} {statistics.median(walls) * 1e3:>8.1f} "
            f"{max(walls) * 1e3:>8.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT_FILE), help="scenario file")
    parser.add_argument("--runs", type=_positive_int, default=20, help="rounds (>= 1); the best is reported")
    parser.add_argument("--steps", action="store_true", help="also build and write the per-step records")
    args = parser.parse_args(argv)
    path = Path(args.file)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        rounds = []
        for _ in range(args.runs):
            gc.collect()
            rounds.append(one_round(path, out, args.steps))
        size_mb = out.stat().st_size / 1e6
        py = sys.executable
        start = subprocess_best([py, "-c", "pass"], args.runs)
        imports = subprocess_best([py, "-c", "import sim.__main__"], args.runs)
        cli = [py, "-m", "sim", "run", str(path), "--out", str(out), *(["--steps"] if args.steps else [])]
        whole = subprocess_best(cli, args.runs)
    print(f"{path.name}{' --steps' if args.steps else ''}: {args.runs} rounds, result {size_mb:.1f} MB")
    print(f"{'phase (ms)':<30} {'best':>8} {'median':>8} {'worst':>8}")
    for key in rounds[0]:
        print(_row(key, [r[key] for r in rounds]))
    print(_row("interpreter start-up", start))
    print(_row("import sim.__main__ (with it)", imports))
    print(_row("python -m sim run (whole)", whole))
    best_sim = min(r["simulate"] for r in rounds)
    best_overhead = min(r["overhead (all but simulate)"] for r in rounds)
    ratio = best_overhead / best_sim
    print(f"overhead / simulate: {ratio:.2f} of the best runs (target < {OVERHEAD_TARGET}): "
          f"{'ok' if ratio < OVERHEAD_TARGET else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
