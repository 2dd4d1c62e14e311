"""Print one digest per reference run, to check that a refactor leaves every trace unchanged.

    python scripts/trace_digests.py > before.txt   # on the old code
    python scripts/trace_digests.py > after.txt    # on the new code
    diff before.txt after.txt                      # no output: traces identical

Runs every preset's policy variants (with and without block-map snapshots) and every scenario file under
``scenarios/``, ``tests/fixtures/`` and ``benchmarks/scenarios/`` (the 20,000-request one only with ``--all``).
A digest covers the per-step, per-client and per-request arrays, the schedule, the snapshots and the events as
``Trace.describe`` words them (or, before events were data, their text), so a change in any decision or in what
an event says shows up.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from sim import presets, scenario  # noqa: E402
from sim.engine import simulate  # noqa: E402


def _event_rows(trace) -> list[str]:
    if not hasattr(trace, "describe"):  # the code before events were data: each event is (step, kind, row, why)
        return [f"{s}|{k}|{r}|{w}" for s, k, r, w in trace.events]
    return [f"{e.step}|{e.kind}|{e.row}|{trace.describe(e)}" for e in trace.events]


def digest(trace) -> str:
    h = hashlib.sha256()
    for group in (trace.steps, trace.clients, trace.requests):
        for name in sorted(group):
            h.update(name.encode())
            h.update(np.ascontiguousarray(group[name]).tobytes())
    for arr in (trace.sched_rows, trace.sched_tokens, trace.sched_kind, trace.sched_offsets):
        h.update(np.ascontiguousarray(arr).tobytes())
    for name in ("preempted_at_steps", "resumed_at_steps", "swapped_out_at_steps", "swapped_in_at_steps"):
        h.update(repr([list(steps) for steps in getattr(trace, name)]).encode())  # (lists before, tuples now)
    h.update(repr([str(reason) for reason in trace.finish_reason]).encode())  # (a StrEnum's value, or a str)
    for step in sorted(trace.snapshots):
        owner, cached = trace.snapshots[step]
        h.update(str(step).encode() + owner.tobytes() + cached.tobytes())
    h.update("\n".join(_event_rows(trace)).encode())
    return h.hexdigest()[:16]


def scenario_files(include_large: bool) -> list[Path]:
    files = []
    for folder in ("scenarios", "tests/fixtures", "benchmarks/scenarios"):
        files += sorted(p for p in (REPO_ROOT / folder).rglob("*.json") if not p.name.endswith(".expected.json"))
    return [p for p in files if include_large or "20k" not in p.name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="include the 20,000-request benchmark scenario")
    args = parser.parse_args(argv)
    for key, preset in presets.all_presets().items():
        for label, overrides in preset.variants:
            sc = preset.scenario.with_config(**overrides)
            for snapshots in (0, 1):
                trace = simulate(sc.config, sc.requests, name=sc.name, snapshot_every_steps=snapshots)
                print(f"preset {key} / {label} / snapshots={snapshots}: {digest(trace)}")
    for path in scenario_files(args.all):
        sc = scenario.load(path)
        try:
            trace = simulate(sc.config, sc.requests, name=sc.name)
        except Exception as e:  # a scenario that cannot finish is a result too
            print(f"file {path.relative_to(REPO_ROOT)}: {type(e).__name__}: {e}")
            continue
        print(f"file {path.relative_to(REPO_ROOT)}: {digest(trace)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
