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


def differences(a: Trace, b: Trace) -> list[str]:
    """The parts of two traces that differ, by name (empty when identical). Compared here rather than by one `assert`
    on the whole lists: pytest's diff of two long event lists takes minutes when CI turns truncation off."""
    parts = []
    if a.request_records() != b.request_records():
        parts.append("request records")
    if a.num_steps != b.num_steps:
        parts.append(f"num_steps {a.num_steps} != {b.num_steps}")
    for name in ("sched_offsets", "sched_rows", "sched_tokens", "sched_kind"):
        if not np.array_equal(getattr(a, name), getattr(b, name)):
            parts.append(name)
    for name, column in a.steps.items():
        if not np.array_equal(column, b.steps[name]):
            parts.append(f"steps.{name}")
    for name, column in a.clients.items():
        if not np.array_equal(column, b.clients[name]):
            parts.append(f"clients.{name}")
    if a.events != b.events:
        shorter = min(len(a.events), len(b.events))
        first = next((i for i in range(shorter) if a.events[i] != b.events[i]), shorter)
        parts.append(f"events from #{first}: {a.events[first:first + 1]} vs {b.events[first:first + 1]}")
    return parts


def assert_identical(a: Trace, b: Trace) -> None:
    parts = differences(a, b)
    assert not parts, f"the traces differ in: {parts}"


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
                    stop_type=r.stop_type, slo=r.slo)
        for r in draw(requests(max_requests=8))
    ]
    cfg = draw(configs())
    return cfg.replace(num_blocks=draw(st.integers(16, 120)), max_steps=20_000), reqs


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("SCHEDLAB_FF_EXAMPLES", "120")), deadline=None)
@given(case=long_answers())
def test_fast_forward_gives_the_step_loops_trace(case):
    cfg, reqs = case
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)


@pytest.mark.slow
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


def _stepped(cfg: EngineConfig, reqs: list[RequestSpec]) -> tuple[Trace, list[int]]:
    """The fast-forwarded trace and the steps the step loop itself ran (the rest were fast-forwarded)."""
    engine = Engine(cfg, reqs)
    calls = []
    original = engine.step
    engine.step = lambda step: (calls.append(step), original(step))  # type: ignore[method-assign]
    return engine.run(), calls


@pytest.mark.parametrize("policy, switch_step", [("lcf", 101), ("vtc", 96)])
def test_counter_order_head_passes_to_another_client_inside_a_quiet_stretch(policy, switch_step):
    # One slot. B was served 50 tokens (counter 8 + 2 x 50 = 108); A's long answer runs from step 50 (LCF: A's
    # counter 8 + 2 a token; VTC lifted A to B's 10 when it joined at step 1). A2 and B2 wait from steps 60-61,
    # A2 first in line while A's counter is the lower one. A's answer is charged every step, so its counter passes
    # B's inside the quiet stretch, and from that step the head in line (named by each "blocked" event) is B2.
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1, policy=policy)
    reqs = [RequestSpec("b1", 0, 8, 50, client_id="B"), RequestSpec("a1", 1, 8, 300, client_id="A"),
            RequestSpec("a2", 60, 8, 10, client_id="A"), RequestSpec("b2", 61, 8, 10, client_id="B")]
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)
    trace, stepped = _stepped(cfg, reqs)
    assert stepped == [0, 50, 350, 360]  # the stretch 61-349 went in bulk, head change and all
    head = {e.step: trace.request_ids[e.row] for e in trace.events if e.kind == "blocked" and 60 <= e.step < 350}
    assert {head[s] for s in range(61, switch_step)} == {"a2"}
    assert {head[s] for s in range(switch_step, 350)} == {"b2"}
    a, b = trace.client_ids.index("A"), trace.client_ids.index("B")
    counters = trace.clients["client_counters"]  # after each step: the head of step s is read after step s - 1
    assert counters[switch_step - 2, a] <= counters[switch_step - 2, b] < counters[switch_step - 1, a]


def test_counter_order_head_that_fits_ends_the_quiet_stretch_where_it_takes_the_lead():
    # Two slots, one free. A2's prompt does not fit in the free blocks, B2's does; A2 leads while A's counter
    # (2 a token of A1's answer, from step 55; prompts are free here) is below B's 100. At step 105 the counters
    # tie (the lower head row, A2, leads); at step 106 B2 leads and starts: the stretch ends exactly there.
    cfg = EngineConfig(num_blocks=60, max_num_seqs=2, policy="lcf", input_weight=0.0)
    reqs = [RequestSpec("b1", 0, 8, 50, client_id="B"), RequestSpec("a1", 55, 400, 300, client_id="A"),
            RequestSpec("a2", 60, 560, 10, client_id="A"), RequestSpec("b2", 61, 8, 10, client_id="B")]
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)
    trace, stepped = _stepped(cfg, reqs)
    assert stepped == [0, 55, 106, 355]
    admitted = {trace.request_ids[e.row]: e.step for e in trace.events if e.kind == "admit"}
    assert admitted == {"b1": 0, "a1": 55, "b2": 106, "a2": 355}
    a, b = trace.client_ids.index("A"), trace.client_ids.index("B")
    assert trace.clients["client_counters"][104, a] == trace.clients["client_counters"][104, b] == 100.0


def test_the_fast_forward_reaches_the_engine_only_through_its_interface():
    # sim/fast_forward.py reads the engine and acts on it only through QuietStretchEngine, the members its module
    # docstring lists and the Engine implements (with the same parameters): no engine attribute outside it, no part
    # of the engine (scheduler, pool, queue, counters, recorder) reached through it, the engine under no other name.
    import ast
    import inspect

    from sim import fast_forward

    tree = ast.parse(inspect.getsource(fast_forward))
    [protocol] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "QuietStretchEngine"]
    methods = {n.name: n for n in protocol.body if isinstance(n, ast.FunctionDef)}
    members = {n.target.id for n in protocol.body if isinstance(n, ast.AnnAssign)} | set(methods)
    outside = [n for n in tree.body if n is not protocol]
    nodes = [node for top in outside for node in ast.walk(top)]
    used = {n.attr for n in nodes if isinstance(n, ast.Attribute) and getattr(n.value, "id", None) == "engine"}
    assert used <= members, f"engine attributes outside QuietStretchEngine: {sorted(used - members)}"
    parts = {"scheduler", "kv", "pool", "waiting", "vtc", "recorder", "sparse", "executor", "writer", "rules"}
    reached = {n.attr for n in nodes if isinstance(n, ast.Attribute)} & parts
    assert not reached, f"the fast-forward reaches into the engine's parts: {sorted(reached)}"
    aliases = [ast.unparse(n) for n in nodes if isinstance(n, ast.Assign | ast.NamedExpr)
               and isinstance(n.value, ast.Name) and n.value.id == "engine"]
    assert not aliases, aliases
    for function in (n for n in nodes if isinstance(n, ast.FunctionDef)):
        for arg in function.args.args:
            if arg.arg == "engine":
                assert ast.unparse(arg.annotation) == "QuietStretchEngine", function.name
    engine = Engine(EngineConfig(num_blocks=64, max_num_seqs=2), [RequestSpec("a", 0, 4, 4)])
    for name in sorted(members):
        assert hasattr(engine, name), f"Engine lacks QuietStretchEngine.{name}"
        assert f"``{name}" in fast_forward.__doc__, f"the module docstring does not list {name}"
    for name, node in methods.items():
        implemented = inspect.getattr_static(type(engine), name)
        if isinstance(implemented, property):
            assert any(getattr(d, "id", None) == "property" for d in node.decorator_list), name
            continue
        assert [a.arg for a in node.args.args] == list(inspect.signature(implemented).parameters), name
