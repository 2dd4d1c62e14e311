"""The benchmark scripts' own logic (their figures are printed, never asserted: see DEVELOPERS.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "page_rerun.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("rounds", ["0", "x", ""])
def test_page_rerun_refuses_a_bad_round_count(rounds):
    done = _run("queueing", "--rounds", *([rounds] if rounds else []))
    assert done.returncode == 2
    assert f"--rounds: must be a whole number >= 1, got {rounds!r}" in done.stdout


def test_page_rerun_names_the_pages_it_knows():
    done = _run("queue")
    assert done.returncode == 2
    assert "unknown page 'queue': choose from queueing, fairness, cancellation, preemption" in done.stdout


def test_page_rerun_reports_each_columns_fastest_round():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import page_rerun
    finally:
        sys.path.remove(str(SCRIPT.parent))
    # (first s, slider s, back s, settled s or None) per round: the slow round loses in every column.
    assert page_rerun._fastest([(1.0, 0.40, 0.15, None), (0.6, 0.25, 0.20, 0.5)]) == (0.6, 0.25, 0.15, 0.5)
    assert page_rerun._fastest([(1.0, 0.40, 0.15, None)]) == (1.0, 0.40, 0.15, None)


def test_sizing_sweep_refuses_a_repeat_below_one():
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "sizing_sweep.py"), "--repeat", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert "argument --repeat: must be a whole number >= 1, got '0'" in done.stderr


def test_cli_overhead_times_every_phase_of_a_run():
    # One round on a tiny scenario: every phase gets a row, and the verdict line is printed (its figures are not
    # asserted: the point is that the script keeps running the CLI's own calls).
    vllm_example = ROOT / "tests" / "fixtures" / "vllm" / "a_hol_fcfs.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "cli_overhead.py"), str(vllm_example), "--runs", "1",
                           "--steps"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line.split("  ")[0].strip() for line in done.stdout.splitlines()[2:-1]]
    assert rows == ["load + validate", "simulate", "records + summary", "JSON text", "write",
                    "overhead (all but simulate)", "interpreter start-up", "import sim.__main__ (with it)",
                    "python -m sim run (whole)"]
    assert done.stdout.splitlines()[-1].startswith("overhead / simulate: ")


def test_player_payload_refuses_a_bad_repeat_and_measures_one_lesson():
    script = ROOT / "benchmarks" / "player_payload.py"
    done = subprocess.run([sys.executable, str(script), "--repeat", "0"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 2 and "--repeat: must be at least 1, got 0" in done.stderr
    done = subprocess.run([sys.executable, str(script), "--repeat", "1", "--lesson", "preemption"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines[1:]] == ["toy_pool", "recompute_vs_swap", "prefix_cache", "sizing"]
    assert all(line.rstrip().endswith("kB") for line in lines[1:])
