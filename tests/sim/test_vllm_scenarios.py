"""The vLLM worked examples (tests/fixtures/vllm, copies of vLLM's own outcomes): our engine must make vLLM's
decisions at every step.

Each ``X.expected.json`` was produced by vLLM's own V1 scheduler; every field it lists is compared per request, and
the number of steps. The plain per-request scheduling loop must give the same trace as the vectorised fast path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim import Engine, scenario
from tests.sim.factories import VLLM_SCENARIOS_DIR, assert_same_trace, vllm_scenario_paths

SCENARIOS = vllm_scenario_paths()
FIELDS = ("id", "arrival_step", "first_scheduled_step", "first_token_step", "finish_step", "num_output_tokens",
          "num_preemptions", "preempted_at_steps", "resumed_at_steps", "final_status")


def test_vllm_scenarios_are_there():
    # a_hol_fcfs, c_preempt_fcfs, d_abort_slots, prefix_free_order_lifo and watermark_rounding at least; an empty
    # folder must not pass silently.
    assert len(SCENARIOS) >= 5, f"vLLM scenarios missing from {VLLM_SCENARIOS_DIR}"
    for path in SCENARIOS:
        assert path.with_name(path.stem + ".expected.json").is_file(), f"{path.name} has no .expected.json"


def _run(path: Path, fast_path: bool):
    sc = scenario.load(path)
    engine = Engine(sc.config, sc.requests, name=sc.name, check_invariants=True)
    engine.scheduler.use_fast_path = fast_path
    return engine.run()


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_matches_vllm(path: Path):
    expected = json.loads(path.with_name(path.stem + ".expected.json").read_text())
    trace = _run(path, fast_path=True)
    got = {r["id"]: r for r in trace.request_records()}
    assert sorted(got) == sorted(r["id"] for r in expected["requests"])
    for want in expected["requests"]:
        assert {k: got[want["id"]][k] for k in FIELDS} == {k: want[k] for k in FIELDS}, want["id"]
    assert trace.num_steps == expected["num_steps"]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_plain_loop_gives_the_same_trace(path: Path):
    assert_same_trace(_run(path, fast_path=True), _run(path, fast_path=False))
