"""Quiet stretches (sim/fast_forward.py) against the plain step loop: the whole trace must be identical, every
per-step column, every scheduled entry and its kind, every event in order, every request record."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import Engine, EngineConfig, RequestSpec, Trace, presets
from sim.engine import simulate
from tests.sim.strategies import configs, requests


def assert_identical(a: Trace, b: Trace) -> None:
    assert a.request_records() == b.request_records()
    assert a.num_steps == b.num_steps
    for name in ("sched_offsets", "sched_rows", "sched_tokens", "sched_kind"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name, column in a.steps.items():
        assert np.array_equal(column, b.steps[name]), name
    for name, column in a.clients.items():
        assert np.array_equal(column, b.clients[name]), name
    assert a.events == b.events


def both_ways(cfg: EngineConfig, reqs: list[RequestSpec], **kw) -> tuple[Trace, Trace]:
    fast = Engine(cfg, reqs, check_invariants=True, **kw).run()
    plain = Engine(cfg, reqs, fast_forward=False, **kw).run()
    return fast, plain


@st.composite
def long_answers(draw) -> tuple[EngineConfig, list[RequestSpec]]:
    """Fewer, longer answers than the general strategy, so quiet stretches are long and frequent."""
    reqs = [
        RequestSpec(r.request_id, r.arrival_step * 7, r.prompt_len, r.output_len * draw(st.integers(1, 6)),
                    client_id=r.client_id, priority=r.priority,
                    abort_step=None if r.abort_step is None else r.abort_step * 7, prefix_group=r.prefix_group,
                    prefix_len=r.prefix_len, max_tokens=None if r.max_tokens is None else r.max_tokens * 4,
                    stop_type=r.stop_type)
        for r in draw(requests(max_requests=8))
    ]
    cfg = draw(configs())
    return cfg.replace(num_blocks=draw(st.integers(16, 120)), max_steps=20_000), reqs


@settings(max_examples=int(os.environ.get("SCHEDLAB_FF_EXAMPLES", "120")), deadline=None)
@given(case=long_answers())
def test_fast_forward_gives_the_step_loops_trace(case):
    cfg, reqs = case
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)


@pytest.mark.parametrize("key", [k for k in presets.all_presets()])
def test_presets_identical_both_ways(key):
    p = presets.get(key)
    for _, overrides in p.variants:
        sc = p.scenario.with_config(**overrides)
        assert_identical(simulate(sc.config, sc.requests), simulate(sc.config, sc.requests, fast_forward=False))


def test_snapshots_and_partial_runs_identical_both_ways():
    sc = presets.get("toy_pool").scenario
    fast, plain = both_ways(sc.config, list(sc.requests), snapshot_every_steps=7)
    assert_identical(fast, plain)
    assert fast.snapshots.keys() == plain.snapshots.keys()
    for step in fast.snapshots:
        assert all(np.array_equal(x, y) for x, y in zip(fast.snapshots[step], plain.snapshots[step], strict=True))
    a = Engine(sc.config, list(sc.requests))
    b = Engine(sc.config, list(sc.requests), fast_forward=False)
    a.run(until_step=150)
    b.run(until_step=150)
    assert a.queue_view() == b.queue_view() == {"waiting": ["C", "D", "E"], "running": ["A", "B"], "swapped": []}


def test_article_decode_stretch_is_fast_forwarded():
    # One slot, 1,000 + 100 + 100 decode steps: the step loop runs 1,200 steps, the fast-forward only the few
    # steps around each finish and admission; the trace is the same either way.
    p = presets.get("article_hol")
    engine = Engine(p.scenario.config, list(p.scenario.requests))
    calls = []
    original = engine.step
    engine.step = lambda step: (calls.append(step), original(step))  # type: ignore[method-assign]
    trace = engine.run()
    assert trace.num_steps == 1200
    assert len(calls) < 20


@pytest.mark.parametrize("policy", ["sjf", "sjf_predicted"])
def test_starvation_promotions_inside_a_quiet_stretch(policy):
    # One slot held by a long answer (decoding quietly for 300 steps) while two requests wait past the guard's
    # threshold: they are promoted at steps 21 and 22, inside the stretch, and the fast-forward must log and
    # apply that exactly as the step loop does.
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1, policy=policy, starvation_threshold_steps=20,
                       priority_quantum_steps=5)
    reqs = [RequestSpec("long", 0, 8, 300), RequestSpec("b", 1, 8, 40), RequestSpec("c", 2, 8, 30),
            RequestSpec("d", 150, 8, 5)]
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)
    promoted = [(e.step, fast.request_ids[e.row]) for e in fast.events if e.kind == "promote"]
    assert promoted[:2] == [(21, "b"), (22, "c")]
