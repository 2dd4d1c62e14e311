"""Swap preemption: the victim's blocks go to a CPU pool and come back; the transfer costs time, not steps.

The run of test_engine_steps' FCFS victim test: 4 blocks of 4 tokens, two slots, A and B (prompt 4, 8 tokens out),
C (prompt 2, 1 token) arriving at step 1. Step 5: A needs a 3rd block, none free, victim B (the last running) with
2 blocks (8 tokens of KV). Block bytes = 4 tokens x 131,072 B (Llama 3.1 8B) = 524,288 B.
"""

from __future__ import annotations

import pytest

from sim import RequestStatus
from sim.events import PreemptReason, WaitReason
from tests.sim.factories import config, events_of, rec, req, run, schedule

BLOCK_BYTES = 4 * 131_072
# One block one way: 524,288 B / 50 GB/s = 0.01048576 ms, plus the 5 us per-block overhead = 0.01548576 ms.
TWO_BLOCKS_MS = 2 * (BLOCK_BYTES / 50e9 * 1e3 + 0.005)


def _run(num_cpu_blocks: int):
    cfg = config(num_blocks=4, max_num_seqs=2, preemption_mode="swap", num_cpu_blocks=num_cpu_blocks)
    return run(cfg, req("A", 0, 4, 8), req("B", 0, 4, 8), req("C", 1, 2, 1))


def test_swapped_victim_keeps_its_kv_and_resumes_with_a_decode_step():
    t = _run(num_cpu_blocks=4)
    b = rec(t, "B")
    assert b["swapped_out_at_steps"] == [5]
    assert b["preempted_at_steps"] == [5] and b["resumed_at_steps"] == [8]
    assert t.swapped_in_at_steps[1] == (8,)
    # A finishes at step 7; at step 8 B needs ceil((8 + 1) / 4) = 3 blocks: it copies its 2 back and decodes one
    # token (no re-prefill: 1 token, not 4 + 5 = 9); C then takes the last block.
    assert schedule(t)[8] == [("B", 1), ("C", 2)]
    assert b["recomputed_tokens"] == 0
    assert b["finish_step"] == 10 and b["num_output_tokens"] == 8
    assert t.steps["cpu_blocks_used"][4:9].tolist() == [0, 2, 2, 2, 0]


def test_swapped_requests_resume_before_any_waiting_request():
    # Steps 6 and 7: 1 block free, B needs 3 to come back; C (needs 1) could start but waits for B.
    t = _run(num_cpu_blocks=4)
    for step in (6, 7):
        assert int(t.steps["free_blocks_after"][step - 1]) == 1
        blocked = {t.request_ids[e.row]: e for e in events_of(t, step, "blocked")}
        assert blocked["C"].reason is WaitReason.SWAPPED_FIRST  # the one held back
        assert (blocked["B"].reason, blocked["B"].num_blocks) == (WaitReason.NO_KV_BLOCKS, 3)  # why B cannot yet
    assert rec(t, "C")["first_scheduled_step"] == 8


def test_swap_transfer_time_is_added_to_the_step():
    t = _run(num_cpu_blocks=4)
    assert t.steps["swap_ms"][5] == pytest.approx(TWO_BLOCKS_MS)  # out: 2 blocks
    assert t.steps["swap_ms"][8] == pytest.approx(TWO_BLOCKS_MS)  # back in: the same 2 blocks
    # Step 5 runs A's decode only: 5.75 ms + 6 us + the copy.
    assert t.steps["step_ms"][5] == pytest.approx(5.75 + 0.006 + TWO_BLOCKS_MS)
    assert t.steps["swap_ms"].sum() == pytest.approx(2 * TWO_BLOCKS_MS)


def test_swap_falls_back_to_recompute_when_the_cpu_pool_is_full():
    # 1 CPU block < the victim's 2: B is preempted by recompute and re-prefills 9 tokens at step 8.
    t = _run(num_cpu_blocks=1)
    b = rec(t, "B")
    assert b["swapped_out_at_steps"] == [] and b["preempted_at_steps"] == [5]
    [preempt] = events_of(t, 5, "preempt")
    assert preempt.reason is PreemptReason.SWAP_SPACE_FULL  # fell back to recompute
    assert (preempt.num_cpu_blocks, preempt.num_free_cpu_blocks) == (2, 1)  # needed 2 CPU blocks, 1 free
    assert schedule(t)[8] == [("B", 9), ("C", 2)]
    assert b["recomputed_tokens"] == 8
    assert t.steps["swap_ms"].sum() == 0.0


def test_a_swapped_request_can_be_aborted():
    # B's client leaves at step 6 while B sits in CPU memory: aborted, its CPU blocks released.
    cfg = config(num_blocks=4, max_num_seqs=2, preemption_mode="swap", num_cpu_blocks=4)
    t = run(cfg, req("A", 0, 4, 8), req("B", 0, 4, 8, abort_step=6))
    assert rec(t, "B")["final_status"] == RequestStatus.FINISHED_ABORTED.name
    assert rec(t, "B")["finish_step"] == 6
    assert t.steps["cpu_blocks_used"][5:7].tolist() == [2, 0]


def test_a_victim_scheduled_earlier_in_the_step_swaps_only_the_blocks_holding_kv():
    # Priority: lo (prompt 15, priority 1) runs first; hi (prompt 16, priority 0) arrives at step 1. 9 blocks of 4.
    # Step 2: lo is scheduled first (17th token: a 5th block), then hi needs a 5th block too and none is free, so
    # lo, the lowest priority, is the victim. Its new block holds nothing: the swap copies 4 blocks (16 tokens).
    cfg = config(num_blocks=9, policy="priority", preemption_mode="swap", num_cpu_blocks=100)
    t = run(cfg, req("lo", 0, 15, 10, priority=1), req("hi", 1, 16, 10, priority=0))
    assert rec(t, "lo")["swapped_out_at_steps"] == [2]
    assert events_of(t, 2, "swap_out")[0].num_cpu_blocks == 4  # copied to CPU memory
    assert t.steps["cpu_blocks_used"][2] == 4
    assert t.steps["swap_ms"][2] == pytest.approx(2 * TWO_BLOCKS_MS)  # 4 blocks, not 5
