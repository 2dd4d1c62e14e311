"""Tiny factories for the simulator tests: a pool of 8 blocks of 4 tokens, so every expected number in a test can be
checked by hand (the arithmetic sits in a comment beside each assertion).

``run`` always checks the engine's invariants after every step (block accounting, ownership, one block per
``block_size`` computed tokens, no lost request, counters only grow): a violation raises inside the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sim import Engine, EngineConfig, RequestSpec, Trace
from sim.events import Event
from tests.conftest import VLLM_SCENARIOS_DIR


def config(**changes: Any) -> EngineConfig:
    """8 blocks of 4 tokens, 4 batch slots, a 64-token step budget; FCFS, recompute, chunked prefill."""
    base: dict[str, Any] = {"num_blocks": 8, "block_size": 4, "max_num_seqs": 4, "max_num_batched_tokens": 64}
    base.update(changes)
    return EngineConfig(**base)


def req(request_id: str, arrival_step: int = 0, prompt_len: int = 4, output_len: int = 4, **kw: Any) -> RequestSpec:
    return RequestSpec(request_id, arrival_step, prompt_len, output_len, **kw)


def run(cfg: EngineConfig, *requests: RequestSpec, fast_path: bool = True) -> Trace:
    """Simulate with invariant checks after every step; ``fast_path=False`` uses the scheduler's plain loop."""
    engine = Engine(cfg, list(requests), check_invariants=True)
    engine.scheduler.use_fast_path = fast_path
    return engine.run()


def one_slot(**changes: Any) -> EngineConfig:
    """One batch slot, a roomy pool (64 blocks of 4 tokens), VTC: requests run one after another, in counter order."""
    return EngineConfig(num_blocks=64, block_size=4, max_num_seqs=1, policy="vtc").replace(**changes)


# Two clients on one_slot(): a1 runs steps 0-5 (6 tokens) while a2 waits; b1 and b2 arrive at step 3 while b has been
# idle (VTC lifts b's counter then; the arithmetic: tests/ui/test_lesson_fairness.py).
RETURNING = (req("a1", 0, 4, 6, client_id="a"), req("a2", 0, 4, 2, client_id="a"),
             req("b1", 3, 4, 2, client_id="b"), req("b2", 3, 4, 2, client_id="b"))


def rec(trace: Trace, request_id: str) -> dict[str, Any]:
    """The CLI's record of one request."""
    return trace.request_records()[trace.request_ids.index(request_id)]


def schedule(trace: Trace) -> list[list[tuple[str, int]]]:
    """Per step, the scheduled ``(request id, num_tokens)`` in scheduling order."""
    return [trace.scheduled_at(t) for t in range(trace.num_steps)]


def event_kinds(trace: Trace, step: int, kind: str) -> list[str]:
    """Ids of the requests with an event of ``kind`` at ``step``, e.g. which were blocked."""
    return [trace.request_ids[e.row] for e in trace.events_at(step) if e.kind == kind]


def events_of(trace: Trace, step: int, kind: str) -> list[Event]:
    """The events of ``kind`` at ``step`` (their reasons and figures are what tests check)."""
    return [e for e in trace.events_at(step) if e.kind == kind]


def refusal(trace: Trace, step: int) -> tuple:
    """The one ``blocked`` event of ``step`` as (reason, num_blocks, num_free_blocks): why the head waited."""
    [e] = events_of(trace, step, "blocked")
    return e.reason, e.num_blocks, e.num_free_blocks


def assert_same_trace(a: Trace, b: Trace) -> None:
    """Request records, per-step scheduled lists and every per-step column equal."""
    assert a.request_records() == b.request_records()
    assert a.num_steps == b.num_steps
    assert np.array_equal(a.sched_offsets, b.sched_offsets)
    assert np.array_equal(a.sched_rows, b.sched_rows)
    assert np.array_equal(a.sched_tokens, b.sched_tokens)
    for name, column in a.steps.items():
        assert np.array_equal(column, b.steps[name]), name
    for name, column in a.clients.items():
        assert np.array_equal(column, b.clients[name]), name


REPO_ROOT = Path(__file__).resolve().parents[2]
__all__ = ["REPO_ROOT", "VLLM_SCENARIOS_DIR"]  # (test modules import both from here)


def vllm_scenario_paths() -> list[Path]:
    """The vLLM worked examples (``X.json`` with ``X.expected.json`` beside it), sorted."""
    return sorted(p for p in VLLM_SCENARIOS_DIR.glob("*.json") if not p.name.endswith(".expected.json"))
