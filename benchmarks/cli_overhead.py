"""Where ``python -m sim run FILE --out RESULT`` spends its time besides the simulation.

    .venv/bin/python benchmarks/cli_overhead.py [FILE] [--runs N] [--steps]

Each of ``--runs`` rounds (default 20) is a fresh interpreter doing what the CLI does, once and cold as every real
run (first calls, lazy imports inside numpy), timing each phase with the functions the CLI calls: load and validate
the scenario (``load_scenario``), ``simulate``, the records and the summary (``result_of``), the result's JSON text
(``result_json``), the write. The overhead is all of them but ``simulate``; target: under a quarter of it. Timed
from outside, as many times: the interpreter's start-up (``python -c pass``), ``import sim.__main__`` (start-up
included) and the whole command (``python -m sim run``).

Each figure is the best round (this 2-core VM is shared and has slow stretches, see the README), with the median
and the worst beside it as the spread. Default FILE: benchmarks/scenarios/load_2k_tight.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "benchmarks" / "scenarios" / "load_2k_tight.json"
OVERHEAD_TARGET = 0.25  # of the simulation's time
PHASES = ("load + validate", "simulate", "records + summary", "JSON text", "write")


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def one_round(path: str, out: str, steps: bool) -> dict[str, float]:
    """Seconds per phase of one run, in this (fresh) interpreter: the same calls in the same order as the CLI."""
    sys.path.insert(0, str(ROOT))
    from sim.__main__ import load_scenario, result_json, result_of
    from sim.engine import simulate

    clock = time.perf_counter
    t1 = clock()
    sc = load_scenario(path)
    t2 = clock()
    trace = simulate(sc.config, sc.requests, name=sc.name)
    t3 = clock()
    result = result_of(sc.name, trace, steps)
    t4 = clock()
    text = result_json(result)
    t5 = clock()
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
    t6 = clock()
    return dict(zip(PHASES, (t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5), strict=True))


def _rounds(path: Path, out: Path, steps: bool, runs: int) -> list[dict[str, float]]:
    argv = [sys.executable, __file__, str(path), "--one-round", str(out), *(["--steps"] if steps else [])]
    rounds = []
    for _ in range(runs):
        done = subprocess.run(argv, check=True, capture_output=True, text=True, cwd=ROOT)
        rounds.append(json.loads(done.stdout))
    return rounds


def _walls(argv: list[str], runs: int) -> list[float]:
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
    parser.add_argument("--one-round", metavar="OUT", help=argparse.SUPPRESS)  # (a round's child process)
    args = parser.parse_args(argv)
    if args.one_round:
        print(json.dumps(one_round(args.file, args.one_round, args.steps)))
        return 0
    path = Path(args.file).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        rounds = _rounds(path, out, args.steps, args.runs)
        size_mb = out.stat().st_size / 1e6
        start = _walls([sys.executable, "-c", "pass"], args.runs)
        imports = _walls([sys.executable, "-c", "import sim.__main__"], args.runs)
        cli = [sys.executable, "-m", "sim", "run", str(path), "--out", str(out), *(["--steps"] if args.steps else [])]
        whole = _walls(cli, args.runs)
    overhead = [sum(r.values()) - r["simulate"] for r in rounds]
    print(f"{path.name}{' --steps' if args.steps else ''}: {args.runs} rounds, each a fresh interpreter; result "
          f"{size_mb:.1f} MB")
    print(f"{'phase (ms)':<30} {'best':>8} {'median':>8} {'worst':>8}")
    for key in PHASES:
        print(_row(key, [r[key] for r in rounds]))
    print(_row("overhead (all but simulate)", overhead))
    print(_row("interpreter start-up", start))
    print(_row("import sim.__main__ (with it)", imports))
    print(_row("python -m sim run (whole)", whole))
    ratio = min(overhead) / min(r["simulate"] for r in rounds)
    print(f"overhead / simulate: {ratio:.2f} of the best runs (target < {OVERHEAD_TARGET}): "
          f"{'ok' if ratio < OVERHEAD_TARGET else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
