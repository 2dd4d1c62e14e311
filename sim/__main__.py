"""Command line: ``python -m sim run SCENARIO.json [--out RESULT.json] [--steps]``, ``python -m sim bench`` and
``python -m sim problems LESSON --seed N [--count K] [--answers] [--scenario-dir DIR]``.

Exit codes: 0 ok, 2 invalid scenario (one line on stderr naming the field) or one past the CLI's limits (the figure
and the limit, decided before the run: ``sim/cost_estimate.py``), 3 a run that cannot finish.

Every line this prints about a file or an argument goes through ``sim.untrusted.printable`` (``_say``): an id with a
newline cannot forge a second line, a scenario name with escape sequences cannot set the terminal's title.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import lessons  # (the command line serves the course's problems too; nothing in sim imports this module)
from lessons import problems

from . import cost_estimate, metrics, scenario
from .engine import SimulationError, gc_paused, simulate
from .trace import Trace
from .untrusted import printable, whole_number


def _say(line: str) -> None:
    """One line on stderr, control characters shown as their escapes (a file's id, name or key, an argument)."""
    print(printable(line), file=sys.stderr)


def _out_problem(out: str) -> str:
    """Why the result cannot be written to ``out`` ('' if it can): said before the run, not after it."""
    if os.path.isdir(out):
        return f"--out {out}: is a directory; give a file name"
    folder = os.path.dirname(out) or "."
    if not os.path.isdir(folder):
        return f"--out {out}: the folder {folder} does not exist"
    return ""


def _run(args: argparse.Namespace) -> int:
    why = _out_problem(args.out) if args.out else ""
    if why:
        _say(f"error: {why}")
        return 2
    try:
        sc = load_scenario(args.scenario)
    except scenario.ScenarioError as e:
        _say(f"error: {args.scenario}: {e}")
        return 2
    try:
        trace = simulate(sc.config, sc.requests, name=sc.name)
    except SimulationError as e:
        _say(f"error: {args.scenario}: {e}")
        return 3
    result = result_of(sc.name, trace, steps=args.steps)
    text = result_json(result)
    if not args.out:
        return _print(text, "the result")
    try:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
            f.write("\n")  # (not text + "\n": a copy of the megabyte text costs ~0.5 ms)
    except OSError as e:  # a full disk, a device that refuses writes: found only now, after the run
        _say(f"error: --out {args.out}: could not write the result: {e.strerror}")
        return 2
    return _print(f"{summary_line(sc, result['summary'])} -> {args.out}", "the summary")


def summary_line(sc: scenario.Scenario, s: dict[str, Any]) -> str:
    """The line ``run --out`` prints: requests, steps, preemptions, mean finish; with SLO targets, how many met
    them and the goodput; with vLLM's admission caps or shedding on, how many were turned away or shed."""
    cfg = sc.config
    line = (f"{printable(sc.name)}: {s['num_requests']} requests, {s['num_steps']} steps, "
            f"{s['num_preemptions']} preemptions, mean finish {s['finish_steps']['mean']:.1f} steps")
    if cfg.ttft_slo_ms or cfg.tbt_slo_ms:
        line += f", {s['num_slo_met']} met the SLOs (goodput {s['slo_goodput_req_s']:.2f} requests/s)"
    if cfg.max_num_queued_reqs is not None or cfg.max_num_queued_tokens is not None or cfg.shed_past_ttft_slo:
        door = sum(s["rejected_by_reason"].get(cap, 0) for cap in ("max_num_queued_reqs", "max_num_queued_tokens"))
        line += f", {door} turned away at the door (HTTP 503), {s['num_shed']} shed"
    return line


MAX_PROBLEMS = 100  # problems one call prints at most


def _whole_number(text: str, lo: int, hi: int) -> int | None:
    """``text`` as a whole number from ``lo`` to ``hi`` (ASCII digits: ``sim.untrusted``); None when it is not
    one ('²', 5,000 digits)."""
    try:
        return whole_number(text, lo, hi)
    except ValueError:
        return None


def _problems(args: argparse.Namespace) -> int:
    """Print ``--count`` seeded problems as Markdown; each bad argument is one line on stderr and exit 2."""
    seed = _whole_number(args.seed, 0, problems.MAX_SEED)
    count = _whole_number(args.count, 1, MAX_PROBLEMS)
    seed_given, count_given = args.seed[:30], args.count[:30]  # (5,000 digits make no line to read)
    why = (f"lesson {args.lesson!r} is not one of: {', '.join(lessons.IDS)}" if args.lesson not in lessons.IDS
           else f"--seed: must be a whole number from 0 to {problems.MAX_SEED:,}, got {seed_given!r}" if seed is None
           else f"--count: must be a whole number from 1 to {MAX_PROBLEMS}, got {count_given!r}" if count is None
           else f"--scenario-dir {args.scenario_dir}: is not a folder" if args.scenario_dir
           and not os.path.isdir(args.scenario_dir) else "")
    if why:
        _say(f"error: {why}")
        return 2
    sheet = problems.problems(args.lesson, seed, count)
    files = [f"problem-{args.lesson}-{seed}-{i}.json" for i in range(1, len(sheet) + 1)]
    if args.scenario_dir:
        files = [os.path.join(args.scenario_dir, f) for f in files]
        for path, problem in zip(files, sheet, strict=True):
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(scenario.dumps(problem.scenario) + "\n")
            except OSError as e:
                _say(f"error: --scenario-dir: could not write {path}: {e.strerror}")
                return 2
    title = (f"# Scheduler Lab: {args.lesson} problems, seed{'s' if count > 1 else ''} {seed}"
             + (f" to {seed + len(sheet) - 1}" if len(sheet) > 1 else "")
             + ("" if args.answers else "\n\n(Answers: run again with --answers.)"))
    pages = [problems.to_markdown(p, i, args.answers, files[i - 1] if args.scenario_dir else "")
             for i, p in enumerate(sheet, start=1)]
    return _print("\n\n".join([title, *pages]), "the problems")


def _print(text: str, what: str) -> int:
    """Print ``text`` to stdout; a reader that stops reading (``| head -1``) gets no traceback: one line on stderr,
    exit 2."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python's own advice: point stdout at devnull, or the interpreter's flush at exit raises again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        _say(f"error: stdout closed before {what} was written (a reader that stopped early?)")
        return 2
    return 0


def load_scenario(path: str) -> scenario.Scenario:
    """``scenario.load`` within the CLI's limits (``sim.cost_estimate.CLI_LIMITS``), with the garbage collector
    paused: a file of thousands of requests makes as many dicts and specs, and none of them is in a cycle (the
    collector's passes cost more than the parsing)."""
    with gc_paused():
        return scenario.load(path, cost_estimate.CLI_LIMITS)


def result_of(name: str, trace: Trace, steps: bool = False) -> dict[str, Any]:
    """The result the CLI writes (docs/SCENARIO.md#running-a-scenario): the requests' records, the summary, and with
    ``steps`` the steps' records.

    The garbage collector pauses meanwhile: the records are new lists and dicts without a cycle among them, and with
    ``steps`` (a list for each request scheduled in each step: 260,000 for load_2k_tight) its passes over them took
    more time than building them."""
    with gc_paused():
        result = {"name": name, "requests": trace.request_records(), "summary": metrics.summary(trace)}
        if steps:
            result["steps"] = trace.step_records()
    return result


# The result's lists of records: one record a line.
_RECORD_LISTS = ("requests", "steps")


def result_json(result: dict[str, Any]) -> str:
    """``result`` as JSON text, indented by one space as ``json.dumps(indent=1)`` would, except that each request
    and each step is one line. A line per record reads and greps better (``grep '"id": "r17"'`` shows a request's
    whole outcome; a step's scheduled pairs stay on its line instead of taking four lines each), and json's C encoder
    writes it, where ``indent`` falls back to the pure-Python one (load_2k_tight: 25 ms instead of ~9; with
    ``--steps`` 520 ms instead of ~80)."""
    encode = json.JSONEncoder(allow_nan=False).encode  # (records hold ints, strings, null and the rounded clock)
    pieces = ["{"]
    for key, value in result.items():
        pieces.append(f"\n {encode(key)}: ")
        if key in _RECORD_LISTS and value:
            pieces.append("[\n  ")
            for record in value:
                pieces += (encode(record), ",\n  ")
            pieces[-1] = "\n ]"
        else:  # (JSON strings hold no raw newline: each line of the nested text moves one space right)
            pieces.append(json.dumps(_jsonable(value), indent=1, allow_nan=False).replace("\n", "\n "))
        pieces.append(",")
    pieces[-1] = "\n}"
    return "".join(pieces)  # (one join: each copy of a megabyte string costs ~0.5 ms)


def _jsonable(value: object) -> object:
    """NaN (a statistic over no requests) becomes null; JSON has no NaN. (Only the summary has floats that can be
    NaN.)"""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _positive_int(text: str) -> int:
    try:
        return whole_number(text, 1, 10**18)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text[:30]!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:  # (also refuses nan and inf)
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to 3600, got {text[:30]!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description="Scheduler Lab's step-level simulator")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario file")
    run.add_argument("scenario", help="scenario JSON file")
    run.add_argument("--out", help="write the result JSON here (default: stdout)")
    run.add_argument("--steps", action="store_true", help="include per-step records")
    bench = sub.add_parser("bench", help="time the simulator on the benchmark workloads")
    bench.add_argument("files", nargs="*", help="scenario files (default: benchmarks/scenarios/*.json)")
    bench.add_argument("--repeat", type=_positive_int, default=5,
                       help="runs per file at least (>= 1); the fastest and the median are reported")
    bench.add_argument("--seconds", type=_seconds, default=3.0,
                       help="keep running each file until this many seconds have passed (>= 0, default 3)")
    sheet = sub.add_parser("problems", help="print seeded problems with answers as Markdown")
    sheet.add_argument("lesson", help=f"one of: {', '.join(lessons.IDS)}")
    sheet.add_argument("--seed", required=True, help=f"the first problem's seed (0 to {problems.MAX_SEED:,}); "
                                                     f"problem i has seed N + i - 1, the app's ?problem=N + i - 1")
    sheet.add_argument("--count", default="1", help=f"how many problems (1 to {MAX_PROBLEMS}, default 1)")
    sheet.add_argument("--answers", action="store_true", help="print each answer and its reasoning")
    sheet.add_argument("--scenario-dir", help="write each problem's scenario (for python -m sim run) into this folder "
                                              "as problem-LESSON-SEED-I.json")
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "problems":
        return _problems(args)
    from .bench import main as bench_main

    return bench_main(args.files, args.repeat, args.seconds)


if __name__ == "__main__":
    sys.exit(main())
