"""Time between tokens (TBT) and the token budget, by hand: a tiny scenario with chunked prefill on and off, the
article's worked example (an 8,000-token prompt among eight decoding streams), the Token budget lesson's presets,
and vLLM's own reference run that chunks a prompt under a small budget.

Step durations: 5.75 ms + 16 us x prefill tokens + 6 us x decoding requests.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim import metrics, presets, scenario, simulate
from sim.config import CostModel
from tests.conftest import VLLM_SCENARIOS_DIR
from tests.sim.factories import config, req, run, schedule


def _tiny(chunked: bool):
    # A (prompt 1, 6 tokens) decodes from step 0; B (prompt 12, 2 tokens) arrives at step 1.
    budget = 4 if chunked else 16
    return run(config(max_num_batched_tokens=budget, chunked_prefill=chunked), req("A", 0, 1, 6), req("B", 1, 12, 2))


def test_tbt_by_hand_chunked():
    t = _tiny(chunked=True)
    # Budget 4: A's decode first, B the 3 tokens left, for 4 steps (3 + 3 + 3 + 3 = 12: its token at step 4).
    assert schedule(t)[1:5] == [[("A", 1), ("B", 3)]] * 4
    # Steps 1-4: 5.75 + 3 x 0.016 + 0.006 = 5.804 ms; step 5 decodes both: 5.75 + 2 x 0.006 = 5.762 ms.
    g = metrics.token_gaps(t)
    assert g.rows.tolist() == [0, 0, 0, 0, 0, 1]
    assert g.steps.tolist() == [1, 1, 1, 1, 1, 1]
    assert g.ms.tolist() == pytest.approx([5.804] * 4 + [5.762, 5.762])
    tbt = metrics.request_tbt(t)
    assert tbt["max_ms"].tolist() == pytest.approx([5.804, 5.762])
    assert tbt["mean_ms"][0] == pytest.approx((4 * 5.804 + 5.762) / 5)
    assert tbt["mean_steps"].tolist() == [1.0, 1.0]
    # B's first token: from the start of step 1 to the end of step 4, 4 steps.
    assert metrics.request_latencies(t)["ttft_steps"][1] == 4


def test_tbt_by_hand_without_chunking_one_long_step():
    t = _tiny(chunked=False)
    # Budget 16: B's whole 12-token prompt in step 1 beside A's decode: 5.75 + 12 x 0.016 + 0.006 = 5.948 ms. A's
    # token of step 1 comes that long after its token of step 0: the stall. Then 5.762 (both decode), 5.756 (A alone).
    assert schedule(t)[1] == [("A", 1), ("B", 12)]
    tbt = metrics.request_tbt(t)
    g = metrics.token_gaps(t)
    assert g.ms[g.rows == 0].tolist() == pytest.approx([5.948, 5.762, 5.756, 5.756, 5.756])
    assert tbt["max_ms"].tolist() == pytest.approx([5.948, 5.762])
    assert metrics.request_latencies(t)["ttft_steps"][1] == 1
    # The run's TBT statistics pool all six gaps of the served requests.
    s = metrics.summary(t)
    assert s["tbt_ms"]["count"] == 6 and s["tbt_ms"]["max"] == pytest.approx(5.948)
    assert s["tbt_ms"]["p50"] == pytest.approx(5.759)  # the middle of 5.756, 5.756, 5.756, 5.762, 5.762, 5.948
    assert s["tbt_steps"]["max"] == 1


def test_tbt_gap_in_steps_across_a_preemption():
    # 4 blocks of 4, two slots: B (prompt 4, 8 out) is preempted at step 5 and re-prefills its 9 tokens at steps 8-9
    # (budget 8: 8 then 1; the last chunk gives its 6th token at step 9). Its 5th token came at step 4: a 5-step gap.
    t = run(config(num_blocks=4, max_num_seqs=2, max_num_batched_tokens=8), req("A", 0, 4, 8), req("B", 0, 4, 8))
    g = metrics.token_gaps(t)
    assert g.steps[g.rows == 1].tolist() == [1, 1, 1, 1, 5, 1, 1]
    assert metrics.request_tbt(t)["max_steps"][1] == 5


def test_a_request_with_one_token_has_no_tbt():
    t = run(config(), req("A", 0, 4, 1), req("B", 0, 4, 3))
    tbt = metrics.request_tbt(t)
    assert np.isnan(tbt["max_ms"][0]) and np.isnan(tbt["mean_steps"][0])
    assert tbt["max_steps"][1] == 1
    assert metrics.summary(t)["tbt_steps"]["count"] == 2


def test_tokens_nobody_reads_are_not_gaps():
    # A's client leaves at step 3 and the server does not abort: its tokens from then on are for nobody.
    t = run(config(abort_on_disconnect=False), req("A", 0, 4, 8, abort_step=3))
    assert metrics.token_gaps(t).steps.tolist() == [1, 1]  # tokens at steps 0, 1, 2 only


# ---- the worked example ---------------------------------------------------------------------------------------------
def _variant(key: str, label: str):
    p = presets.get(key)
    sc = p.scenario.with_config(**dict(p.variants)[label])
    return simulate(sc.config, sc.requests)


def test_stall_figures_by_hand():
    f = presets.stall_figures(CostModel(), 8000, 8, 512)
    assert f.decode_step_ms == pytest.approx(5.75 + 8 * 0.006)  # 5.798
    assert f.one_step_ms == pytest.approx(5.75 + 8000 * 0.016 + 8 * 0.006)  # 133.798
    assert (f.chunk_tokens, f.num_chunks) == (504, 16)  # 512 - 8 decodes; 15 x 504 = 7,560, the last 440
    assert f.chunk_step_ms == pytest.approx(5.75 + 504 * 0.016 + 0.048)  # 13.862
    assert f.chunked_ttft_ms == pytest.approx(15 * 13.862 + (5.75 + 440 * 0.016 + 0.048))  # 220.768
    with pytest.raises(ValueError, match="budget"):
        presets.stall_figures(CostModel(), 8000, 8, 8)


def test_worked_example_without_chunking():
    t = _variant("long_prompt", "no chunking")
    long = t.request_ids.index("long")
    # It arrives at step 20 and its whole prompt runs in that step beside the eight decodes: 133.798 ms.
    assert t.steps["num_prefill_tokens"][20] == 8000
    assert t.steps["step_ms"][20] == pytest.approx(133.798)
    lat = metrics.request_latencies(t)
    assert lat["ttft_steps"][long] == 1 and lat["ttft_ms"][long] == pytest.approx(133.798)
    tbt = metrics.request_tbt(t)
    # Every chat stream waits that long between two tokens (one step apart, but a 133.8-ms step).
    assert tbt["max_ms"][:8].tolist() == pytest.approx([133.798] * 8)
    assert tbt["max_steps"][:8].tolist() == [1] * 8
    s = metrics.summary(t)
    assert s["tbt_ms"]["p99"] == pytest.approx(133.798) and s["num_steps"] == 60


def test_worked_example_with_chunked_prefill():
    t = _variant("long_prompt", "chunked prefill")
    long = t.request_ids.index("long")
    # Budget 512: the eight decodes first, the prompt the 504 left, at steps 20-34, then the last 440 at step 35.
    assert t.steps["num_prefill_tokens"][20:36].tolist() == [504] * 15 + [440]
    assert t.steps["step_ms"][20:35].tolist() == pytest.approx([13.862] * 15)
    lat = metrics.request_latencies(t)
    assert lat["ttft_steps"][long] == 16 and lat["ttft_ms"][long] == pytest.approx(220.768)
    tbt = metrics.request_tbt(t)
    assert tbt["max_ms"][:8].tolist() == pytest.approx([13.862] * 8)  # no stall: ~2.4x a plain decode step
    s = metrics.summary(t)
    assert s["tbt_ms"]["p99"] == pytest.approx(13.862)
    # (61 steps: at step 0 the budget of 512 fits five 100-token prompts and 12 tokens of a sixth, so three chats
    # end a step later than without chunking)
    assert s["num_steps"] == 61
    assert t.requests["finish_step"][:8].tolist() == [59] * 5 + [60] * 3


def test_preset_descriptions_state_the_computed_figures():
    text = presets.get("long_prompt").description
    for figure in ("133.8 ms", "504", "16 chunks", "13.9 ms", "~221 ms", "~134"):
        assert figure in text


def test_budget_memory_preset_preempts_only_with_the_large_budget():
    big, small = _variant("budget_memory", "budget 8,192"), _variant("budget_memory", "budget 512")
    sb, ss = metrics.summary(big), metrics.summary(small)
    # 8,192: a burst of four documents admitted in one step fills the 680-block pool; the last one admitted is
    # preempted and its 2,000 tokens (plus the 2 it had generated) recomputed.
    assert (sb["num_preemptions"], sb["recomputed_tokens"], sb["peak_used_blocks"]) == (1, 2002, 680)
    assert [big.request_ids[i] for i, at in enumerate(big.preempted_at_steps) if at] == ["doc2.3"]
    assert (ss["num_preemptions"], ss["peak_used_blocks"]) == (0, 657)
    assert ss["tbt_ms"]["p99"] < sb["tbt_ms"]["p99"] and ss["ttft_ms"]["p99"] > sb["ttft_ms"]["p99"]


def test_busy_budget_trades_ttft_for_tbt():
    p = presets.get("busy_budget")
    p99 = {}
    for budget in (256, 2048):
        sc = p.scenario.with_config(max_num_batched_tokens=budget)
        s = metrics.summary(simulate(sc.config, sc.requests))
        p99[budget] = (s["ttft_ms"]["p99"], s["tbt_ms"]["p99"])
    assert p99[256][0] > p99[2048][0] and p99[256][1] < p99[2048][1]


# ---- vLLM's reference run with chunks ------------------------------------------------------------------------------
def test_vllm_reference_that_chunks_matches():
    # Of the reference fixtures only prefix_free_order_lifo chunks: a 16-token budget, prompts of 32, 20 and 40
    # tokens (A and C prefill over two steps; B hits A's 32 cached tokens and computes 8). Our engine must make
    # vLLM's choices (tests/sim/test_vllm_scenarios.py compares every field; here the chunks themselves).
    path = VLLM_SCENARIOS_DIR / "prefix_free_order_lifo.json"
    sc = scenario.load(path)
    assert sc.config.chunked_prefill and sc.config.max_num_batched_tokens == 16
    assert max(r.prompt_len for r in sc.requests) > sc.config.max_num_batched_tokens
    expected = json.loads(path.with_name("prefix_free_order_lifo.expected.json").read_text())
    t = simulate(sc.config, sc.requests)
    got = {r["id"]: r for r in t.request_records()}
    for want in expected["requests"]:
        for field in ("first_scheduled_step", "first_token_step", "finish_step"):
            assert got[want["id"]][field] == want[field], (want["id"], field)
    assert schedule(t)[:4] == [[("A", 16)], [("A", 16)], [("C", 16)], [("C", 4)]]
    # Each request emits one token, so no request has a gap between tokens.
    assert metrics.summary(t)["tbt_steps"]["count"] == 0
