"""A policy is one record (sim/policies.py): every Policy has exactly one, the consumers read it, the fast-forward
equals the step loop under each registered policy (a new record is covered here without a new test), the docs name
every policy, and a toy policy runs by its record alone."""

from __future__ import annotations

import re

import pytest

from sim import Engine, EngineConfig, RequestSpec, policies
from sim.config import Policy
from sim.policies import POLICIES, PolicySpec, spec_of
from sim.request_queue import KeyedQueue, RequestQueue, VTCQueue
from sim.vtc import VirtualCounters
from tests.conftest import REPO_ROOT
from tests.sim.test_fast_forward import assert_identical, both_ways, differences

REGISTERED = list(POLICIES)  # (at collection: a record added to sim/policies.py is parametrized below)


def test_every_policy_has_exactly_one_record():
    names = [spec.name for spec in POLICIES.values()]
    assert sorted(names) == sorted(p.value for p in Policy)
    assert len(set(names)) == len(names)
    assert all(isinstance(name, Policy) for name in names)
    assert all(key == spec.name for key, spec in POLICIES.items())
    assert all(spec_of(p) is POLICIES[p] for p in Policy)


def test_an_unknown_policy_names_the_registered_ones():
    with pytest.raises(ValueError, match="policy: 'lpf' is not one of: fcfs, priority, sjf, sjf_predicted, vtc, lcf"):
        EngineConfig(policy="lpf")
    with pytest.raises(ValueError, match="is not one of"):
        EngineConfig(policy=3)  # type: ignore[arg-type]


def test_a_built_in_name_is_its_policy_member():
    assert EngineConfig(policy="vtc").policy is Policy.VTC


def test_what_the_records_say():
    assert {p for p, s in POLICIES.items() if s.vllm} == {Policy.FCFS, Policy.PRIORITY}
    assert {p for p, s in POLICIES.items() if s.lifts} == {Policy.VTC}
    assert {p for p, s in POLICIES.items() if s.victim == "lowest_priority"} == {Policy.PRIORITY}
    assert {p for p, s in POLICIES.items() if s.head_moves == "counters"} == {Policy.VTC, Policy.LCF}
    assert "prediction_error_sigma" in POLICIES[Policy.SJF_PREDICTED].knobs
    assert "starvation_threshold_steps" in POLICIES[Policy.SJF].knobs
    assert "client_weights" in POLICIES[Policy.LCF].knobs
    assert POLICIES[Policy.FCFS].knobs == ()


@pytest.mark.parametrize("name", REGISTERED)
def test_a_counter_record_has_a_queue_that_reads_heads_off_counters(name):
    spec = POLICIES[name]
    if spec.head_moves == "counters":
        assert callable(getattr(spec.queue, "heads_over", None))
    else:
        assert spec.head_moves == "arrival"


def test_a_counter_record_without_heads_over_is_refused():
    with pytest.raises(ValueError, match="heads_over"):
        PolicySpec("bad", "Bad", lambda c, t, v: KeyedQueue(lambda r: (r,), len(t)), KeyedQueue,
                   head_moves="counters")
    with pytest.raises(ValueError, match="not EngineConfig fields"):
        PolicySpec("bad", "Bad", lambda c, t, v: RequestQueue(), RequestQueue, knobs=("no_such_field",))


@pytest.mark.parametrize("name", REGISTERED)
def test_the_queue_the_lift_and_the_victim_are_the_records(name):
    cfg = EngineConfig(num_blocks=100, policy=name)
    engine = Engine(cfg, SCENARIO)
    assert isinstance(engine.scheduler.waiting, POLICIES[name].queue)
    assert engine.scheduler.vtc.has_lift is POLICIES[name].lifts
    assert engine.scheduler.victim_by_priority is (POLICIES[name].victim == "lowest_priority")


def test_a_queue_that_is_not_the_records_class_is_refused(monkeypatch):
    wrong = PolicySpec(Policy.FCFS, "FCFS", lambda c, t, v: RequestQueue(), VTCQueue, vllm=True)
    monkeypatch.setitem(POLICIES, Policy.FCFS, wrong)
    with pytest.raises(TypeError, match="its record says VTCQueue"):
        Engine(EngineConfig(num_blocks=100), SCENARIO)


# One slot and two clients: B's first answer, then A's long one decodes quietly for 300 steps while a2, b2, a3
# wait. Under VTC and LCF A's counter passes B's inside that stretch (the head in line changes with no arrival);
# under SJF the guard promotes the waiting requests inside it; priority and SJF order them otherwise.
SCENARIO = [RequestSpec("b1", 0, 8, 50, client_id="B"), RequestSpec("a1", 1, 8, 300, client_id="A"),
            RequestSpec("a2", 60, 8, 10, client_id="A", priority=1), RequestSpec("b2", 61, 8, 20, client_id="B"),
            RequestSpec("a3", 62, 30, 5, client_id="A", priority=-1)]
CONFIG = EngineConfig(num_blocks=100, max_num_seqs=1, starvation_threshold_steps=150, priority_quantum_steps=5)


def _stepped(cfg: EngineConfig, reqs: list[RequestSpec]) -> int:
    """How many steps the step loop itself ran in a fast-forwarded run (the rest went in bulk)."""
    engine = Engine(cfg, reqs)
    calls = []
    original = engine.step
    engine.step = lambda step: (calls.append(step), original(step))  # type: ignore[method-assign]
    engine.run()
    return len(calls)


@pytest.mark.parametrize("name", REGISTERED)
def test_the_fast_forward_gives_the_step_loops_trace_under_every_policy(name):
    cfg = CONFIG.replace(policy=name)
    fast, plain = both_ways(cfg, SCENARIO)
    assert_identical(fast, plain)
    assert _stepped(cfg, SCENARIO) < fast.num_steps / 10  # (the quiet stretches did go in bulk)


@pytest.mark.parametrize("name", [p for p in REGISTERED if POLICIES[p].head_moves == "counters"])
def test_a_counter_policy_recorded_as_arrival_driven_is_caught(name, monkeypatch):
    # The scenario above can tell a wrong record: taken in bulk as if its head moved only at arrivals, a counter
    # order keeps the wrong head in line for the rest of the stretch.
    cfg = CONFIG.replace(policy=name)
    plain = Engine(cfg, SCENARIO, fast_forward=False).run()
    wrong = PolicySpec(**{**POLICIES[name].__dict__, "head_moves": "arrival"})
    monkeypatch.setitem(POLICIES, name, wrong)
    fast = Engine(cfg, SCENARIO).run()
    assert differences(fast, plain), "the wrong record went unnoticed: fast-forward still equals the plain loop"


# ---- the docs ---------------------------------------------------------------------------------------------------
def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:] if end < 0 else text[start:end]


def test_architecture_names_every_policy_in_its_add_a_policy_section():
    section = _section((REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text(), "## Add a policy")
    named = set(re.findall(r"`(\w+)`", section))
    missing = [name for name in POLICIES if name not in named]
    assert not missing, f"docs/ARCHITECTURE.md's 'Add a policy' does not name: {missing}"


def test_readme_names_the_policies_that_follow_vllm():
    text = " ".join((REPO_ROOT / "README.md").read_text().split())
    sentence = re.search(r"same decisions as vLLM's V1 scheduler for (.*?) with ", text)
    assert sentence, "README.md no longer says which policies make vLLM's decisions"
    assert set(re.findall(r"`(\w+)`", sentence.group(1))) == {n for n, s in POLICIES.items() if s.vllm}


# ---- a policy added by its record alone -------------------------------------------------------------------------
def _longest_prompt_first(config: EngineConfig, table, vtc: VirtualCounters) -> RequestQueue:
    t = table
    return KeyedQueue(lambda r: (-t.prompt_len.item(r), t.arrival_step.item(r), r), len(t))


TOY = PolicySpec("lpf", "Longest prompt first", _longest_prompt_first, KeyedQueue, workbench=False)


@pytest.fixture
def toy(monkeypatch) -> PolicySpec:
    """The toy's record registered for this test only (undone after it)."""
    monkeypatch.setitem(policies.POLICIES, TOY.name, TOY)
    return TOY


def test_a_toy_policy_added_by_its_record_alone_runs(toy):
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1, policy="lpf")
    assert cfg.policy == "lpf" and spec_of(cfg.policy) is toy
    reqs = [RequestSpec("long", 0, 8, 200), RequestSpec("p10", 1, 10, 30), RequestSpec("p50", 2, 50, 30),
            RequestSpec("p30", 3, 30, 30), RequestSpec("p40", 120, 40, 30)]
    fast, plain = both_ways(cfg, reqs)
    assert_identical(fast, plain)
    start = {r["id"]: r["first_scheduled_step"] for r in fast.request_records()}
    assert sorted(start, key=start.get) == ["long", "p50", "p40", "p30", "p10"]  # the longest prompt first
    assert _stepped(cfg, reqs) < fast.num_steps / 10
    assert "lpf" in policies.names()


def test_the_toy_is_gone_after_its_test():
    assert "lpf" not in POLICIES
