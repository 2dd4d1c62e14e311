"""sim.playback: the queues and the pool the step player shows are the engine's own, step by step."""

from __future__ import annotations

import numpy as np
import pytest

from sim import presets
from sim.config import EngineConfig
from sim.engine import Engine, queues_after_step, simulate
from sim.playback import BLOCK_CACHED, BLOCK_FREE, record_window, window_around
from sim.request import RequestSpec as R


def _variant(key: str, label: str):
    preset = presets.get(key)
    overrides = dict(preset.variants)[label]
    return preset.scenario.with_config(**overrides) if overrides else preset.scenario


CASES = [("article_hol", "FCFS"), ("article_hol", "SJF (true lengths)"), ("starvation", "SJF + guard"),
         ("toy_pool", "FCFS victim"), ("toy_pool", "priority victim"), ("recompute_vs_swap", "swap"),
         ("returning_idle", "VTC (lift)"), ("impatient_users", "notices after 50 steps")]


@pytest.mark.parametrize(("key", "label"), CASES)
def test_the_queues_at_each_step_are_the_engines(key, label):
    sc = _variant(key, label)
    trace = simulate(sc.config, sc.requests)
    end = min(trace.num_steps, 400)
    pb = record_window(sc.config, sc.requests, 0, end, queue_head=5)
    ids = trace.request_ids
    for step in sorted({0, 1, end // 3, end // 2, end - 1, *(e.step for e in trace.events[:40] if e.step < end)}):
        want = queues_after_step(sc.config, sc.requests, step)
        got = pb.at(step)
        assert [ids[r] for r in got["waiting_head"]] == want["waiting"][:5], step
        assert [ids[r] for r in got["swapped"]] == want["swapped"], step
        lo, hi = trace.sched_offsets[step], trace.sched_offsets[step + 1]
        scheduled = {ids[r] for r in trace.sched_rows[lo:hi]}
        assert [ids[r] for r in got["idle_running"]] == [r for r in want["running"] if r not in scheduled], step


def test_a_window_later_in_the_run_matches_the_same_steps_from_the_start():
    sc = _variant("starvation", "SJF + guard")
    whole = record_window(sc.config, sc.requests, 0, 900)
    later = record_window(sc.config, sc.requests, 600, 900)
    for step in (600, 601, 750, 899):
        assert later.at(step) == whole.at(step)


def test_a_running_request_the_step_gave_no_tokens_is_listed_as_idle():
    # priority: L (priority 5) needs a block at step 2 and is the lowest priority: it preempts itself, and vLLM
    # stops scheduling the running list there, so M (running, after it) gets no token in that step.
    cfg = EngineConfig(num_blocks=3, max_num_seqs=4, policy="priority")
    reqs = [R("H", 0, 10, 5, priority=0), R("L", 0, 15, 5, priority=5), R("M", 1, 10, 5, priority=0)]
    pb = record_window(cfg, reqs, 0, 3)
    assert pb.at(2)["idle_running"] == (2,)  # M
    assert pb.at(1)["idle_running"] == ()
    assert pb.at(2)["waiting_head"] == (1,)  # L, back in the queue


def test_the_block_map_is_the_pool_during_each_step():
    sc = _variant("toy_pool", "FCFS victim")
    pb = record_window(sc.config, sc.requests, 0, 200, block_map=True)
    for step in (0, 60, 112, 113, 145, 199):
        engine = Engine(sc.config, sc.requests, snapshot_every_steps=max(step, 1))
        trace = engine.run(until_step=step)
        owner, cached = trace.snapshots[step]
        want = np.where(owner >= 0, owner, np.where(cached, BLOCK_CACHED, BLOCK_FREE))
        assert pb.block_codes_at(step).tolist() == want.tolist(), step
    # Step 113: D (row 3) is preempted: its blocks are free in the map of that step, held the step before.
    before, now = pb.block_codes_at(112), pb.block_codes_at(113)
    assert (before == 3).sum() > 0 and (now == 3).sum() == 0
    assert pb.block_changes[113 - pb.first_step]  # the change list of that step names the freed blocks


def test_no_block_map_unless_asked_or_when_the_pool_is_too_large():
    sc = _variant("toy_pool", "FCFS victim")
    assert record_window(sc.config, sc.requests, 0, 10).block_codes_at(5) is None
    big = sc.with_config(num_blocks=5000)
    assert record_window(big.config, big.requests, 0, 10, block_map=True).first_block_codes is None


def test_lists_that_repeat_the_step_before_are_not_stored_again():
    sc = _variant("article_hol", "FCFS")
    pb = record_window(sc.config, sc.requests, 0, 1200)
    stored = [i for i, rows in enumerate(pb.waiting_head) if rows is not None]
    assert stored[0] == 0 and len(stored) <= 4  # the start, long's end (short1 admitted), short1's end


@pytest.mark.parametrize(("step", "num_steps", "want"), [
    (0, 1000, (0, 1000)), (999, 1000, (0, 1000)), (0, 5400, (0, 1000)), (499, 5400, (0, 1000)),
    (1250, 5400, (500, 1500)), (2500, 5400, (2000, 3000)), (5399, 5400, (4400, 5400))])
def test_windows_hold_the_step_and_are_bounded(step, num_steps, want):
    first, end = window_around(step, num_steps)
    assert first <= step < end <= num_steps and end - first <= 1000
    assert (first, end) == want


def test_bad_windows_are_refused_with_the_field():
    sc = _variant("article_hol", "FCFS")
    with pytest.raises(ValueError, match="first_step < end_step"):
        record_window(sc.config, sc.requests, 5, 5)
    with pytest.raises(ValueError, match="queue_head"):
        record_window(sc.config, sc.requests, 0, 5, queue_head=0)
    with pytest.raises(ValueError, match="the run ends at step 1199"):
        record_window(sc.config, sc.requests, 1100, 1300)
    with pytest.raises(ValueError, match="step: must be in this window"):
        record_window(sc.config, sc.requests, 0, 5).at(7)
