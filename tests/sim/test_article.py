"""The article's numbers, exactly (docs/ENGINE.md#the-step-loop, docs/ENGINE.md#cost-model)."""

from __future__ import annotations

import numpy as np
import pytest

from sim import CostModel, EngineConfig, ModelSpec, metrics, presets
from sim.config import MODELS
from tests.sim.factories import rec, run

MB = 1_000_000
LLAMA_8B_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V x layers x KV heads x head dim x fp16 = 131,072 B


def _variant(key: str, label: str):
    p = presets.get(key)
    overrides = dict(p.variants)[label]
    return run(p.scenario.config.replace(**overrides), *p.scenario.requests)


# ---- queueing: one slot, answers of 1,000 / 100 / 100 steps ---------------------------------------------------------
def test_fcfs_mean_finish_is_1100_steps():
    # Finishes at the end of steps 999, 1099, 1199: 1,000 + 1,100 + 1,200 steps elapsed, mean 1,100.
    t = _variant("article_hol", "FCFS")
    assert [rec(t, x)["finish_step"] for x in ("long", "short1", "short2")] == [999, 1099, 1199]
    assert metrics.summary(t)["finish_steps"]["mean"] == 1100.0


def test_sjf_mean_finish_is_500_steps():
    # Shortest first: 100 + 200 + 1,200 = 1,500 steps, mean 500.
    t = _variant("article_hol", "SJF (true lengths)")
    assert [rec(t, x)["finish_step"] for x in ("short1", "short2", "long")] == [99, 199, 1199]
    assert metrics.summary(t)["finish_steps"]["mean"] == 500.0


# ---- memory ---------------------------------------------------------------------------------------------------------
def test_llama_8b_kv_footprint():
    model = ModelSpec()  # the default is Llama 3.1 8B
    assert model == MODELS["llama-3.1-8b"]
    assert model.kv_bytes_per_token == LLAMA_8B_BYTES_PER_TOKEN == 131_072 == 128 * 1024  # 128 KiB
    assert EngineConfig().block_bytes == 16 * 131_072 == 2 * 1024**2  # a 16-token block = 2 MiB
    assert 2000 * model.kv_bytes_per_token == 262_144_000  # 2,000 tokens ~ 262 MB
    assert round(2000 * model.kv_bytes_per_token / MB) == 262


# ---- cancellation: a 1,000-token answer abandoned at token 300 ------------------------------------------------------
def test_without_abort_700_tokens_are_wasted_and_the_kv_reaches_131_mb():
    t = _variant("article_abandon", "no abort")
    long = rec(t, "long")
    # Tokens 1..1000 at steps 0..999; the client left at step 300 (after token 300): 700 tokens for nobody.
    assert long["wasted_tokens"] == 700 and long["num_output_tokens"] == 1000
    assert long["final_status"] == "FINISHED_LENGTH_CAPPED"
    # KV peaks in the last step: 1 prompt token + 999 generated fed back = 1,000 tokens = 131,072,000 B = 131 MB.
    assert int(t.steps["orphan_kv_tokens"].max()) == 1000
    peak_bytes = int(t.steps["kv_tokens"].max()) * t.config.block_bytes // t.config.block_size
    assert peak_bytes == 131_072_000 and round(peak_bytes / MB) == 131
    assert rec(t, "waiting")["first_scheduled_step"] == 1000


def test_with_abort_39_mb_are_freed_on_the_step_after_token_300():
    t = _variant("article_abandon", "abort on disconnect")
    long = rec(t, "long")
    # Token 300 at step 299; aborted at the start of step 300 holding 1 + 299 = 300 tokens of KV = 39,321,600 B.
    assert (long["final_status"], long["finish_step"], long["num_output_tokens"]) == ("FINISHED_ABORTED", 300, 300)
    assert int(t.steps["kv_tokens"][299]) == 300
    freed_bytes = int(t.steps["kv_tokens"][299]) * t.config.block_bytes // t.config.block_size  # the run's model
    assert freed_bytes == 39_321_600 and round(freed_bytes / MB) == 39
    # The blocks go at once: step 299 used ceil(300 / 16) = 19; step 300 only the newcomer's 1 block.
    assert int(t.steps["used_blocks"][299]) == 19 and int(t.steps["used_blocks"][300]) == 1
    assert long["wasted_tokens"] == 0


def test_abort_lets_the_waiting_request_start_700_steps_earlier():
    with_abort = rec(_variant("article_abandon", "abort on disconnect"), "waiting")
    without = rec(_variant("article_abandon", "no abort"), "waiting")
    assert (with_abort["first_scheduled_step"], without["first_scheduled_step"]) == (300, 1000)
    assert without["first_scheduled_step"] - with_abort["first_scheduled_step"] == 700


# ---- preemption: recompute vs swap of a 2,000-token victim ----------------------------------------------------------
def test_recompute_of_2000_tokens_costs_32_ms_of_prefill():
    cost = CostModel()
    assert cost.step_ms(2000, 0) - cost.step_base_ms == pytest.approx(32.0)  # 2,000 x 16 us


def test_swap_of_2000_tokens_costs_about_5_ms_each_way():
    cost, cfg = CostModel(), EngineConfig()
    num_blocks = 2000 // 16  # 125 blocks of 2 MiB = 262,144,000 B
    pure = num_blocks * cfg.block_bytes / 50e9 * 1e3  # at 50 GB/s: 5.24288 ms
    assert pure == pytest.approx(5.24288)
    # Plus 5 us per copied block: 125 x 0.005 = 0.625 ms -> 5.86788 ms.
    assert cost.swap_ms(num_blocks, cfg.block_bytes) == pytest.approx(5.24288 + 0.625)


def test_the_cost_model_gives_the_parts_the_preemption_lesson_shows():
    # The same 2,000-token victim, priced by CostModel's own methods (what the page's cost cards show).
    cost, cfg = CostModel(), EngineConfig()
    assert cost.recompute_ms(2000) == pytest.approx(32.0) == cost.step_ms(2000, 0) - cost.step_base_ms
    assert cost.swap_bytes(125, cfg.block_bytes) == 262_144_000 == 2000 * LLAMA_8B_BYTES_PER_TOKEN  # ~262 MB
    assert cost.swap_transfer_ms(262_144_000) == pytest.approx(5.24288)  # at 50 GB/s
    assert cost.swap_overhead_ms(125) == pytest.approx(0.625)  # 125 copies x 5 us
    assert cost.swap_transfer_ms(262_144_000) + cost.swap_overhead_ms(125) == pytest.approx(
        cost.swap_ms(125, cfg.block_bytes))
    slow = CostModel(swap_bandwidth_gb_s=25.0, swap_overhead_per_block_us=0.0)
    assert slow.swap_transfer_ms(262_144_000) == pytest.approx(10.48576) == slow.swap_ms(125, cfg.block_bytes)


def test_recompute_vs_swap_preset_preempts_a_2000_token_victim():
    # Priority policy, 144 blocks (2,304 tokens). The victim (prompt 1,900, priority 1) holds 1,900 + 100 = 2,000
    # tokens when the pool runs out at step 102 (the grower, prompt 200, was admitted first and holds 301 tokens:
    # 125 + 19 = 144 blocks): it is the lowest priority, so it is preempted with 2,000 tokens = 262 MB of KV.
    recompute = _variant("recompute_vs_swap", "recompute")
    swap = _variant("recompute_vs_swap", "swap")
    for t in (recompute, swap):
        assert rec(t, "victim")["preempted_at_steps"] == [102]
        assert int(t.steps["kv_tokens"][101]) == 2000 + 301
        assert rec(t, "grower")["num_preemptions"] == 0
    # Recompute: the 2,000 lost tokens are computed again (+ the token generated last: 2,001 in the resume step).
    victim = rec(recompute, "victim")
    assert victim["recomputed_tokens"] == 2000
    (resume,) = victim["resumed_at_steps"]
    assert recompute.scheduled_at(resume) == [("victim", 2001)]
    assert recompute.steps["step_ms"][resume] == pytest.approx(5.75 + 2001 * 0.016)  # ~32 ms of prefill
    # Swap: 125 blocks out at the preemption and back at the resume, 5.86788 ms each way, no recompute.
    assert rec(swap, "victim")["swapped_out_at_steps"] == [102]
    assert swap.steps["swap_ms"][102] == pytest.approx(5.86788)
    assert swap.steps["swap_ms"][rec(swap, "victim")["resumed_at_steps"][0]] == pytest.approx(5.86788)
    assert rec(swap, "victim")["recomputed_tokens"] == 0
    assert np.count_nonzero(swap.steps["swap_ms"]) == 2
