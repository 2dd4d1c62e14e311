"""sim.preemption_metrics: preemption records and the KV each request held, rebuilt from a trace (checked by hand on
an 8-block pool, then against the engine's own counts and block maps on the presets), and what bringing a victim
back costs (the article's 2,000-token victim)."""

from __future__ import annotations

import numpy as np
import pytest

from sim import presets, simulate
from sim.config import MODELS, CostModel, EngineConfig
from sim.preemption_metrics import PreemptionKind, blocks_held, preemption_cost, preemptions
from sim.request import NO_STEP
from tests.sim.factories import config, req, run

# A and B (prompt 8, 12 tokens each) share 8 blocks of 4 tokens. Step 0 prefills both (2 blocks each); after step
# k each has computed 8 + k tokens, ceil((8 + k) / 4) blocks: 3 from step 1, 4 from step 5, 8 in all by step 8.
# At step 9 A needs a 5th block for its 17th token; none is free, and FCFS evicts the tail of the running list: B,
# holding 16 tokens in 4 blocks. B (5 blocks for 17 tokens, 3 free) waits until A finishes at step 11 (tokens 1-12
# at steps 0-11), and comes back at step 12.
TWO = (req("A", 0, 8, 12), req("B", 0, 8, 12))


def test_a_recompute_preemption_by_hand():
    t = run(config(), *TWO)
    (p,) = preemptions(t)
    assert (p.request_id, p.row, p.step, p.kind, p.needed_by_row) == ("B", 1, 9, PreemptionKind.RECOMPUTE, 0)
    assert (p.num_tokens, p.num_blocks, p.resume_step) == (16, 4, 12)
    # The re-prefill covers the 16 lost tokens and B's newest token (generated at step 8, never computed): 17.
    assert (p.num_resume_tokens, p.num_cached_tokens, p.num_recomputed_tokens) == (17, 0, 17)
    assert int(t.requests["num_recomputed_tokens"][1]) == 16  # the engine counts the lost tokens only


def test_a_recomputed_request_finds_its_own_freed_blocks_in_the_cache():
    # B's 4 blocks are freed tail first; A takes one (B's tokens 12-15), so B's first 3 full blocks (12 tokens)
    # are still cached at step 12: it prefills 17 - 12 = 5 tokens again.
    (p,) = preemptions(run(config(enable_prefix_caching=True), *TWO))
    assert (p.num_resume_tokens, p.num_cached_tokens, p.num_recomputed_tokens) == (17, 12, 5)


def test_a_swap_and_its_fallback_by_hand():
    (swap,) = preemptions(run(config(preemption_mode="swap", num_cpu_blocks=8), *TWO))
    assert (swap.kind, swap.num_tokens, swap.num_blocks, swap.resume_step) == (PreemptionKind.SWAP, 16, 4, 12)
    assert (swap.num_resume_tokens, swap.num_recomputed_tokens) == (0, 0)  # copied back, nothing recomputed
    # 2 CPU blocks cannot take B's 4: the engine recomputes it instead.
    (fallback,) = preemptions(run(config(preemption_mode="swap", num_cpu_blocks=2), *TWO))
    assert (fallback.kind, fallback.num_blocks, fallback.num_resume_tokens) == (PreemptionKind.FALLBACK, 4, 17)


def test_blocks_held_by_hand():
    # A: 2, 3 (steps 1-4), 4 (5-8), 5 (9-11: 17 to 20 tokens, held through its finish step). B: the same to step
    # 8, nothing while evicted (9-11), then 5 blocks for its 17-19 tokens (12-14).
    for changes in ({}, {"preemption_mode": "swap", "num_cpu_blocks": 8}):
        t = run(config(**changes), *TWO)
        held = blocks_held(t, [1, 0])  # any rows, in any order: one column each
        assert held[:, 1].tolist() == [2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 0, 0, 0]
        assert held[:, 0].tolist() == [2, 3, 3, 3, 3, 4, 4, 4, 4, 0, 0, 0, 5, 5, 5]
        np.testing.assert_array_equal(held.sum(axis=1), t.steps["used_blocks"])


def test_a_run_without_preemption_has_no_records():
    t = run(config(), req("A", 0, 4, 4))
    assert preemptions(t) == []
    assert blocks_held(t, [0])[:, 0].tolist() == [1, 2, 2, 2]  # 4, 5, 6, 7 tokens computed


# ---- on the presets: the engine's counts and block maps agree ---------------------------------------------------
def _variant(key: str, label: str, **changes):
    p = presets.get(key)
    return simulate(p.scenario.config.replace(**dict(p.variants)[label], **changes), p.scenario.requests)


@pytest.mark.parametrize(("key", "label"), [("toy_pool", "FCFS victim"), ("toy_pool", "priority victim"),
                                            ("prefix_cache", "prefix caching off"), ("sizing", "FCFS")])
def test_tokens_held_at_preemption_match_what_the_engine_recomputes(key, label):
    t = _variant(key, label)
    records = preemptions(t)
    rebuilt = sum(p.num_tokens - p.num_cached_tokens for p in records if p.kind != PreemptionKind.SWAP)
    assert rebuilt == int(t.requests["num_recomputed_tokens"].sum()) > 0
    assert len(records) == int(t.requests["num_preemptions"].sum())
    assert all(p.resume_step == NO_STEP or p.resume_step > p.step for p in records)


def test_the_toy_pools_victims():
    # 32 blocks of 16 tokens, A-D admitted at step 0: at step 113 each holds 16 + 112 = 128 tokens (8 blocks), A
    # needs a 9th, FCFS evicts D; priority evicts C (priority 2, the largest number).
    fcfs = preemptions(_variant("toy_pool", "FCFS victim"))
    assert [(p.request_id, p.step, p.num_tokens, p.num_blocks) for p in fcfs][0] == ("D", 113, 128, 8)
    assert [(p.request_id, p.step) for p in preemptions(_variant("toy_pool", "priority victim"))] == [
        ("C", 113), ("A", 131)]
    # With prefix caching C, evicted at step 145 with 160 tokens, finds 4 of its blocks (64 tokens) at step 200.
    c = next(p for p in preemptions(_variant("toy_pool", "FCFS victim", enable_prefix_caching=True))
             if p.request_id == "C")
    assert (c.num_tokens, c.resume_step, c.num_resume_tokens, c.num_cached_tokens) == (160, 200, 161, 64)


def test_the_articles_victim_recompute_and_swap():
    (rec,), (swp,) = preemptions(_variant("recompute_vs_swap", "recompute")), preemptions(
        _variant("recompute_vs_swap", "swap"))
    assert (rec.kind, rec.num_tokens, rec.num_resume_tokens) == (PreemptionKind.RECOMPUTE, 2000, 2001)
    assert (swp.kind, swp.num_blocks, swp.num_resume_tokens) == (PreemptionKind.SWAP, 125, 0)
    (fallback,) = preemptions(_variant("recompute_vs_swap", "swap", num_cpu_blocks=100))  # 100 < 125 blocks
    assert (fallback.kind, fallback.num_tokens) == (PreemptionKind.FALLBACK, 2000)


def test_prefix_cache_re_prefills_are_mostly_hits():
    off, on = (preemptions(_variant("prefix_cache", label)) for label in ("prefix caching off", "prefix caching on"))
    assert off and on and all(p.num_cached_tokens == 0 for p in off)
    hits = [p.num_cached_tokens for p in on if p.resume_step != NO_STEP]
    assert min(hits) >= 512  # the shared 512-token system prompt is always cached (others hold it)
    assert max(hits) > 512  # and some re-admissions also find their own blocks


@pytest.mark.parametrize(("key", "changes"), [
    ("toy_pool", {}), ("toy_pool", {"policy": "priority"}),
    ("toy_pool", {"preemption_mode": "swap", "num_cpu_blocks": 64}),
    ("recompute_vs_swap", {"preemption_mode": "swap"}), ("prefix_cache", {}),
])
def test_blocks_held_rebuilt_from_the_schedule_match_the_block_maps(key, changes):
    p = presets.get(key)
    trace = simulate(p.scenario.config.replace(**changes), p.scenario.requests, snapshot_every_steps=1)
    held = blocks_held(trace, np.arange(trace.num_requests))
    for step, (owner, _) in trace.snapshots.items():
        np.testing.assert_array_equal(held[step], np.bincount(owner[owner >= 0], minlength=trace.num_requests))
    np.testing.assert_array_equal(held.sum(axis=1), trace.steps["used_blocks"])


# ---- what bringing a victim back costs ----------------------------------------------------------------------------
def test_cost_of_a_2000_token_victim_is_the_articles():
    cost = preemption_cost(2000, EngineConfig())
    assert cost.recompute_ms == pytest.approx(32.0)  # 2,000 x 16 us
    assert cost.num_blocks == 125 and cost.swap_bytes == 262_144_000  # 125 blocks x 2 MiB = 2,000 x 131,072 B
    assert cost.swap_transfer_ms == pytest.approx(5.24288)  # 262,144,000 B / 50 GB/s
    assert cost.swap_overhead_ms == pytest.approx(0.625)  # 125 copies x 5 us
    assert cost.swap_ms == pytest.approx(5.86788)
    assert cost.effective_gb_s == pytest.approx(262.144 / 5.86788)


def test_small_blocks_and_a_slow_link_make_swap_dearer():
    # One-token blocks: 2,000 copies x 5 us = 10 ms of overhead each way on top of the 5.24 ms of data.
    tiny = preemption_cost(2000, EngineConfig(block_size=1))
    assert tiny.swap_bytes == 262_144_000 and tiny.swap_overhead_ms == pytest.approx(10.0)
    assert tiny.effective_gb_s == pytest.approx(262.144 / 15.24288, rel=1e-6)
    slow = EngineConfig(cost=CostModel(swap_bandwidth_gb_s=25.0))
    assert preemption_cost(2000, slow).swap_transfer_ms == pytest.approx(10.48576)
    # A 70B model stores 2.5x the bytes per token: 655 MB for the same 2,000 tokens.
    assert preemption_cost(2000, EngineConfig(model=MODELS["llama-3.1-70b"])).swap_bytes == 2000 * 327_680
    # A partly filled last block is copied whole: 17 tokens of 16-token blocks are 2 blocks.
    assert preemption_cost(17, EngineConfig()).num_blocks == 2
