"""The scheduler's vectorised fast path against its plain per-request loop (vLLM's algorithm written out).

Both must make the same decisions: the same request records and the same scheduled (request, tokens) lists at every
step, for FCFS and priority (and the teaching policies, which share the running phase), recompute and swap,
chunked prefill on and off, prefix caching on and off.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import scheduler_fast
from sim.kv_cache_manager import KVCacheManager
from tests.sim.factories import assert_same_trace, config, req, run
from tests.sim.strategies import ALL_POLICIES, scenarios


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(case=scenarios(policies=("fcfs", "priority")))
def test_fast_path_equals_plain_loop_fcfs_and_priority(case):
    cfg, reqs = case
    assert_same_trace(run(cfg, *reqs, fast_path=True), run(cfg, *reqs, fast_path=False))


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(case=scenarios(policies=ALL_POLICIES))
def test_fast_path_equals_plain_loop_teaching_policies(case):
    cfg, reqs = case
    assert_same_trace(run(cfg, *reqs, fast_path=True), run(cfg, *reqs, fast_path=False))


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(num_requests=st.integers(6, 12), num_blocks=st.integers(10, 14), policy=st.sampled_from(["fcfs", "priority"]))
def test_fast_path_equals_plain_loop_under_heavy_preemption(num_requests, num_blocks, policy):
    # 6 to 12 answers growing together; the longest (prompt 6 + 10 + 2 x 11 out = 38 tokens) fits a pool of
    # 10 x 4 = 40 tokens alone, the first six (13 + 16 + 19 + 22 + 21 + 24 = 115 tokens) far exceed 14 x 4 = 56:
    # preemptions every few steps, victims anywhere in the running list.
    reqs = [req(f"r{i}", i % 3, 3 + i % 4, 10 + 2 * i, priority=i % 3) for i in range(num_requests)]
    cfg = config(num_blocks=num_blocks, max_num_seqs=8, policy=policy)
    fast, plain = run(cfg, *reqs, fast_path=True), run(cfg, *reqs, fast_path=False)
    assert fast.requests["num_preemptions"].sum() > 0
    assert_same_trace(fast, plain)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(block_size=st.sampled_from([3, 5, 6]), num_blocks=st.integers(12, 20), policy=st.sampled_from(["fcfs", "sjf"]))
def test_fast_path_equals_plain_loop_for_block_sizes_not_a_power_of_two(block_size, num_blocks, policy):
    # The decode step finds the requests that need a block with a remainder, not a bit mask, for these sizes.
    reqs = [req(f"r{i}", i % 4, 2 + i % 5, 8 + 3 * i) for i in range(8)]
    cfg = config(num_blocks=num_blocks, block_size=block_size, max_num_seqs=6, policy=policy)
    assert_same_trace(run(cfg, *reqs, fast_path=True), run(cfg, *reqs, fast_path=False))


@pytest.mark.parametrize("fast_path", [True, False])
def test_use_fast_path_switches_between_the_two(monkeypatch, fast_path):
    # The equivalence tests above mean something only if the flag really picks the path: count the calls into
    # sim/scheduler_fast.py and the plain loop's own work (it grows requests one at a time, KVCacheManager.grow).
    calls = {"fast": 0, "plain": 0}
    fast, grow = scheduler_fast.schedule_running, KVCacheManager.grow

    def counting_fast(*args):
        calls["fast"] += 1
        return fast(*args)

    def counting_grow(*args):
        calls["plain"] += 1
        return grow(*args)

    monkeypatch.setattr(scheduler_fast, "schedule_running", counting_fast)
    monkeypatch.setattr(KVCacheManager, "grow", counting_grow)
    run(config(), req("a", 0, 4, 6), req("b", 0, 4, 6), fast_path=fast_path)
    # Both are admitted in step 0 and decode in steps 1 to 5: five running phases, on one path only.
    assert (calls["fast"], calls["plain"] > 0) == ((5, False) if fast_path else (0, True))
