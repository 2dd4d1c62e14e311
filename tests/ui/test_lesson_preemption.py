"""The Preemption lesson's logic without Streamlit: victim choice and requeue position under both policies, swap
and its fallback, the article's cost numbers as the page words them, prefix-cache hits on re-prefill, the
per-request KV chart's parts, the sizing sweep, the knobs, and the figure builders. (The preemption records, KV held
per request and the costs themselves: tests/sim/test_preemption_metrics.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lessons.preemption import costs, lesson, notices, sizing
from sim import metrics, presets
from sim.config import MODELS, EngineConfig, gib_for_blocks
from sim.engine import queues_after_step, simulate
from sim.preemption_metrics import preemption_cost
from sim.workload import generate
from ui.charts import preemption as charts
from ui.theme import ChartStyle

STYLE = ChartStyle()


def runs_of(key: str, **config) -> list[lesson.Run]:
    p = presets.get(key)
    out = []
    for label, sc in lesson.variants(p, p.scenario.with_config(**config), {}):
        trace = simulate(sc.config, sc.requests)
        out.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    return out


def run_of(key: str, label: str, **config) -> lesson.Run:
    return next(r for r in runs_of(key, **config) if r.label == label)


# ---- who is evicted, and where it goes -------------------------------------------------------------------------------
def test_fcfs_evicts_the_last_admitted_and_puts_it_at_the_head_of_the_queue():
    # Toy pool: 32 blocks of 16 tokens, A-D (16-token prompts) admitted in that order at step 0, E at step 5 waits
    # for a slot. At step 113 each of A-D holds 16 + 112 = 128 tokens = 8 blocks: the pool is full, A needs a 9th
    # block, and FCFS evicts the tail of the running list, D.
    fcfs = run_of("toy_pool", "FCFS victim")
    first = fcfs.preempted[0]
    assert (first.request_id, first.step, first.kind, first.num_tokens, first.num_blocks) == (
        "D", 113, "recompute", 128, 8)
    # Back at the head of the waiting queue, ahead of E (which arrived at step 5): it blocks E until step 200.
    sc = fcfs.scenario
    assert queues_after_step(sc.config, sc.requests, 113)["waiting"] == ["D", "E"]
    assert fcfs.trace.request_records()[4]["first_scheduled_step"] == 200
    text = " ".join(lesson.notices([fcfs], "steps"))
    assert "evicted D, the last request in the running list" in text
    assert "D went back to the head of the waiting queue" in text and "E (1 block) waited behind it" in text
    # Its whole wait, 113 to 200: C (preempted at 145) went in front of it, so only 31 of those steps at the head.
    assert "it waited 87 steps to be re-admitted (31 of them at the head of the queue)" in text


def test_priority_evicts_the_lowest_priority_and_requeues_it_by_priority():
    # Same pool under the priority policy: C (priority 2) is the lowest, so it goes at step 113; re-inserted by
    # (priority, arrival), it lands behind E (priority 0), which is admitted at step 114. A (priority 1) next.
    prio = run_of("toy_pool", "priority victim")
    assert [(p.request_id, p.step) for p in prio.preempted] == [("C", 113), ("A", 131)]
    sc = prio.scenario
    assert queues_after_step(sc.config, sc.requests, 113)["waiting"] == ["E", "C"]
    text = " ".join(lesson.notices([prio], "steps"))
    assert "evicted C, the running request with the lowest priority (priority 2" in text
    assert "E (priority 0) went ahead of it" in text


# ---- recompute vs swap: the article's numbers ------------------------------------------------------------------------
def test_swap_sizes_are_worded_in_decimal_units_as_the_article_counts_them():
    # (the costs themselves: tests/sim/test_preemption_metrics.py)
    assert costs.fmt_bytes(preemption_cost(2000, EngineConfig()).swap_bytes) == "262 MB"  # 262,144,000 B
    assert costs.fmt_bytes(preemption_cost(2000, EngineConfig(model=MODELS["llama-3.1-70b"])).swap_bytes) == "655 MB"
    assert costs.fmt_bytes(21_000_000) == "21.0 MB" and costs.fmt_bytes(512) == "512 B"


def test_recompute_vs_swap_preset_numbers_come_from_the_run():
    runs = runs_of("recompute_vs_swap")
    assert costs.largest_victim_tokens(runs)[0] == 2000
    cost, what = costs.victim_cost(runs, runs[0].trace.config)
    assert (cost.num_tokens, cost.num_blocks) == (2000, 125) and what.startswith("victim (preempted at step 102")
    rec, swp = (r.preempted[0] for r in runs)
    assert (rec.kind, rec.num_tokens, rec.num_resume_tokens) == ("recompute", 2000, 2001)
    assert (swp.kind, swp.num_blocks, swp.num_resume_tokens) == ("swap", 125, 0)
    text = " ".join(lesson.notices(runs, "steps"))
    assert "2,000 tokens of prefill to rebuild: 32.0 ms of GPU time" in text
    assert "1 swap copied 262 MB to CPU memory (and back), 11.7 ms of copies in all" in text
    assert "the same number of steps" in text


def test_swap_falls_back_to_recompute_when_cpu_space_is_full():
    # 100 CPU blocks < the victim's 125: the engine recomputes instead, and the lesson says why.
    run = run_of("recompute_vs_swap", "swap", num_cpu_blocks=100)
    (p,) = run.preempted
    assert p.kind == "fallback" and p.num_tokens == 2000
    assert run.summary["swap_ms"] == 0.0 and run.summary["recomputed_tokens"] == 2000
    text = " ".join(notices.cost_notices([run]))
    assert "1 swap fell back to recompute" in text and "100 blocks" in text and "125 blocks" in text
    # With room for it (125 blocks exactly), it swaps.
    assert run_of("recompute_vs_swap", "swap", num_cpu_blocks=125).preempted[0].kind == "swap"


# ---- prefix caching softens recompute --------------------------------------------------------------------------------
def test_a_recomputed_request_finds_its_own_freed_blocks_in_the_cache():
    # Toy pool with prefix caching: C is evicted at step 145 with 160 tokens (10 blocks, tail freed first). By its
    # re-admission at step 200, 4 of its blocks (64 tokens) are still cached: it re-prefills 161 - 64 = 97 tokens.
    run = run_of("toy_pool", "FCFS victim", enable_prefix_caching=True)
    c = next(p for p in run.preempted if p.request_id == "C")
    assert (c.num_tokens, c.resume_step, c.num_resume_tokens, c.num_cached_tokens, c.num_recomputed_tokens) == (
        160, 200, 161, 64, 97)
    assert lesson.readmissions(run.preempted) == [("D @ 200", 0, 129), ("C @ 200", 64, 97)]
    # The engine's own count agrees: 160 computed, 64 from the cache -> 96 recomputed.
    assert int(run.trace.requests["num_recomputed_tokens"][2]) == 96


def test_prefix_cache_preset_re_prefills_are_mostly_hits():
    off, on = runs_of("prefix_cache")
    assert off.preempted and on.preempted  # the pool is small enough to preempt either way
    assert all(p.num_cached_tokens == 0 for p in off.preempted)
    hits = [p.num_cached_tokens for p in on.preempted if p.resume_step >= 0]
    assert min(hits) >= 512  # the shared 512-token system prompt is always cached (others hold it)
    assert max(hits) > 512  # and some re-admissions also find their own blocks
    text = " ".join(notices.cache_notices([off, on]))
    assert "prefix caching on: the" in text and "in the prefix cache (" in text
    assert "prefix caching off: the 10 re-admissions prefilled all" in text and "(no prefix cache)" in text


# ---- KV per request --------------------------------------------------------------------------------------------------
def test_kv_parts_stack_to_the_blocks_in_use_even_with_shared_prefixes():
    on = runs_of("prefix_cache")[1].trace
    parts = lesson.kv_parts(on)
    assert len(parts) == lesson.TOP_REQUESTS + 1 and parts[-1][1] == -1  # six requests, then the rest
    np.testing.assert_allclose(sum(p[2] for p in parts), on.steps["used_blocks"])


# ---- the sizing sweep ------------------------------------------------------------------------------------------------
def test_sizing_sweep_finds_where_preemption_stops():
    p = presets.get("sizing")
    c = p.scenario.config
    pools = tuple(gib_for_blocks(b, c.model, c.block_size) for b in (1200, 1600))
    sweep = sizing.sizing_sweep(p.scenario, pools, (16, 32))
    assert sweep.pools_blocks == (1200, 1600)
    # 32 slots grow into more than 1,200 blocks; 16 slots or 1,600 blocks never preempt.
    assert sweep.preemptions[1, 0] > 0
    assert sweep.preemptions[0, 0] == sweep.preemptions[0, 1] == sweep.preemptions[1, 1] == 0
    assert np.isfinite(sweep.finish_ms).all() and (sweep.rejected == 0).all()
    text = " ".join(sizing.sweep_notices(sweep, pools[0], 32))
    assert "With 32 batch slots, preemption stops from 3.13 GiB (1,600 blocks)" in text
    assert "lowering max_num_seqs from 32 to 16 stops preemption" in text


def test_sweep_axes_are_the_presets_grid_in_gib():
    pools, seqs = sizing.sweep_axes(presets.get("sizing"))
    assert len(pools) == len(seqs) == 10
    assert pools[list(presets.get("sizing").knobs["pool_sweep_blocks"]).index(1600)] == pytest.approx(3.125)
    sweep = sizing.Sweep(pools, (0,) * 10, seqs, np.zeros((10, 10), int), np.zeros((10, 10)), np.zeros((10, 10)),
                         np.zeros((10, 10), int), np.zeros((10, 10), int), 0.0)
    assert sizing.nearest_cell(sweep, 2.34375, 32) == (seqs.index(32), 6, True)
    assert sizing.nearest_cell(sweep, 2.4, 30)[2] is False


# ---- knobs -----------------------------------------------------------------------------------------------------------
def _values(preset_key: str, **changes):
    p = presets.get(preset_key)
    c = p.scenario.config
    engine = {k.key: k.default for k in lesson.engine_knobs(c)}
    own = {k.key: k.default for k in lesson.knobs(p, p.scenario, False)}
    swap = {k.key: k.default for k in lesson.swap_knobs(c)}
    for d in (engine, own, swap):
        d.update({k: v for k, v in changes.items() if k in d})
    return p, lesson.apply(lesson.apply_swap(lesson.apply_engine(c, engine), swap), own)


def test_knob_defaults_reproduce_the_preset():
    for key in ("toy_pool", "recompute_vs_swap", "prefix_cache", "sizing"):
        p, config = _values(key)
        c = p.scenario.config
        assert (config.num_blocks, config.block_size, config.max_num_seqs, config.model) == \
            (c.num_blocks, c.block_size, c.max_num_seqs, c.model), key
    assert _values("recompute_vs_swap")[1].num_cpu_blocks == 400  # 0.78125 GiB of 2 MiB blocks
    assert _values("toy_pool")[1].num_cpu_blocks == 2048  # no swap space in the preset: vLLM's 4 GiB


def test_the_pool_is_memory_block_size_and_model_change_the_block_count():
    assert _values("toy_pool", pool_gib=0.125)[1].num_blocks == 64  # 128 MiB / 2 MiB
    assert _values("toy_pool", block_size=8)[1].num_blocks == 64  # same 64 MiB, 1 MiB blocks
    assert _values("toy_pool", model="llama-3.1-70b")[1].num_blocks == 12  # 64 MiB / 5 MiB
    config = _values("recompute_vs_swap", swap_bandwidth_gb_s=25.0, swap_overhead_us=0.0, cpu_swap_gib=0.0)[1]
    assert config.cost.swap_bandwidth_gb_s == 25.0 and config.cost.swap_overhead_per_block_us == 0.0
    assert config.num_cpu_blocks == 0


def test_compared_fields_are_left_to_the_variants():
    p = presets.get("recompute_vs_swap")
    keys = {k.key for k in lesson.knobs(p, p.scenario, False)}
    assert "preemption_mode" not in keys and {"policy", "enable_prefix_caching", "compare"} <= keys
    single = presets.get("sizing")  # one variant: nothing compared, every knob shown
    assert {"policy", "preemption_mode", "enable_prefix_caching"} <= {k.key for k in lesson.knobs(
        single, single.scenario, False)}
    modes = [sc.config.preemption_mode.value for _, sc in lesson.variants(p, p.scenario, {"compare": ["swap"]})]
    assert modes == ["swap"]


def test_kv_chart_stacks_requests_with_preemption_marks_and_cpu_swap():
    trace = run_of("toy_pool", "FCFS victim", preemption_mode="swap", num_cpu_blocks=64).trace
    fig = charts.kv_over_time(trace, STYLE, by="request", unit="GiB", parts=lesson.kv_parts(trace))
    names = [t.name for t in fig.data]
    assert names[:5] == ["A", "B", "C", "D", "E"]
    assert "preemption" in names and "CPU swap" in names
    assert fig.layout.yaxis.title.text == "KV cache (GiB)"
    state = charts.kv_over_time(trace, STYLE, by="state", unit="%")
    assert state.layout.yaxis.title.text == "KV cache (% of pool)"
    with pytest.raises(ValueError, match="by: must be"):
        charts.kv_over_time(trace, STYLE, by="client")


def test_cost_bars_show_both_ways_with_totals():
    fig = charts.cost_bars(preemption_cost(2000, EngineConfig()), STYLE, bandwidth_gb_s=50)
    texts = [a.text for a in fig.layout.annotations]
    assert " 32.0 ms" in texts and " 11.7 ms" in texts and " 262 MB" in texts
    assert fig.layout.xaxis.title.text == "time added to engine steps (ms)"
    assert fig.layout.xaxis2.title.text == "CPU RAM held (MB)"


def test_gantt_marks_where_evicted_requests_came_back():
    run = run_of("toy_pool", "FCFS victim", enable_prefix_caching=True)
    fig = charts.gantt_with_resumes(run.trace, STYLE, notes=lesson.gantt_notes(run.preempted))
    back = next(t for t in fig.data if t.name == "came back (re-prefill)")
    assert len(back.x) == 2 and any("64 from the prefix cache" in h for h in back.customdata)


def test_reprefill_hits_and_sweep_heatmap():
    fig = charts.reprefill_hits([("C @ 200", 64, 97)], STYLE, title="FCFS")
    assert [t.name for t in fig.data] == ["found in the prefix cache", "prefilled again (GPU)"]
    assert fig.layout.title.text == "FCFS: 40% cache hits"
    z = np.array([[0, 3], [np.nan, 0]])
    heat = charts.sweep_heatmap((1.0, 2.0), (512, 1024), (8, 16), z, STYLE, title="t", colorbar_title="c",
                                color="#D55E00", current=(0, 1))
    assert heat.data[0].text.tolist() == [["0", "3"], ["\u2014", "0"]]
    assert heat.layout.shapes[0].x0 == 0.5 and heat.layout.margin.autoexpand is False


def test_cost_cards_and_caption_for_the_article_victim():
    # 2,000 tokens of Llama 3.1 8B: recompute 2,000 x 16 us = 32 ms; swap 125 blocks x 2 MiB = 262 MB each way,
    # 5.24 ms at 50 GB/s + 125 x 5 us = 5.87 ms. A CPU space of 100 blocks cannot park them: "needed", and the
    # caption says the victim falls back to recompute.
    config = EngineConfig(num_cpu_blocks=100)
    cost = preemption_cost(2000, config)
    cards = costs.cost_cards(cost, config)
    assert [(card.label, card.value) for card in cards] == [
        ("Recompute: GPU time", "32.0 ms"), ("Swap: copied each way", "262 MB"), ("Swap: time each way", "5.87 ms"),
        ("Swap: CPU RAM needed", "262 MB")]
    assert cards[2].help == "5.24 ms at 50 GB/s + 0.63 ms for 125 block copies"
    text = costs.cost_caption(cost, config, "r7")
    assert text.startswith("For r7: 2,000 tokens of KV at 128 KiB per token.")
    assert "(8,000 copies of 32 KiB here)" in text  # 125 blocks x 32 layers x K and V
    assert text.endswith("cannot hold these 125 blocks: in swap mode this victim falls back to recompute.")
    roomy = EngineConfig(num_cpu_blocks=125)
    assert costs.cost_cards(cost, roomy)[3][0] == "Swap: CPU RAM parked"
    assert "falls back" not in costs.cost_caption(cost, roomy, "r7")


def test_coarse_first_spans_the_grid_before_filling_it_in():
    order = sizing.coarse_first(10, 10)
    assert len(order) == len(set(order)) == 100
    # every 4th row and column first (3 x 3 = 9 runs), then every 2nd (5 x 5 = 25 in all), then the rest
    assert order[:9] == [(i, j) for i in (0, 4, 8) for j in (0, 4, 8)]
    assert set(order[:25]) == {(i, j) for i in range(0, 10, 2) for j in range(0, 10, 2)}
    assert sizing.coarse_first(1, 3) == [(0, 0), (0, 2), (0, 1)]  # (the ends first: stride 2 takes 0 and 2)


def test_sizing_sweep_assembled_point_by_point_equals_the_whole_sweep():
    p = presets.get("sizing")
    c = p.scenario.config
    pools, seqs = tuple(gib_for_blocks(b, c.model, c.block_size) for b in (1200, 1600)), (16, 32)
    whole = sizing.sizing_sweep(p.scenario, pools, seqs)
    points = sizing.sizing_points(p.scenario, pools, seqs)
    assert [(i, j) for i, j, _ in points] == [(0, 0), (0, 1), (1, 0), (1, 1)]

    def measure(scenario, fn):
        return fn(simulate(scenario.config, scenario.requests))

    built = sizing.sizing_from(points, pools, seqs, measure)
    assert built.pools_blocks == whole.pools_blocks and built.pending is None
    np.testing.assert_array_equal(built.preemptions, whole.preemptions)
    np.testing.assert_allclose(built.finish_ms, whole.finish_ms)
    np.testing.assert_array_equal(built.num_steps, whole.num_steps)
    # half run: the rest is pending (drawn as "…"), not zero preemptions
    ran = {id(sc) for _, _, sc in points[:2]}
    half = sizing.sizing_from(points, pools, seqs, lambda sc, fn: measure(sc, fn) if id(sc) in ran else None)
    assert half.pending.tolist() == [[False, False], [True, True]]
    heat = charts.sweep_heatmap(pools, half.pools_blocks, seqs, half.preemptions, STYLE, title="t",
                                colorbar_title="c", color="#000000", pending=half.pending)
    assert heat.data[0].text[1].tolist() == ["\u2026", "\u2026"]


def test_notices_put_what_the_runs_compare_first():
    # The page shows three sentences: on the prefix-cache preset the cache's hits lead, not who was evicted.
    off, on = runs_of("prefix_cache")
    first_three = lesson.notices([off, on], "steps")[:3]
    assert first_three[0].startswith("prefix caching off: the 10 re-admissions prefilled all")
    assert first_three[1].startswith("prefix caching on: the 9 re-admissions found")
    assert "threw away KV that cost" in first_three[2]
    # one run, nothing compared: the victim first
    assert lesson.notices([off], "steps")[0].startswith("prefix caching off: the pool filled at step 33")


def test_the_mode_sentence_needs_a_victim():
    # A 290-block pool holds both requests of recompute_vs_swap: nothing is preempted, so no "victim waits for free
    # blocks either way" (the sentence used to say so beside "nothing was preempted").
    runs = runs_of("recompute_vs_swap", num_blocks=290)
    assert all(r.summary["num_preemptions"] == 0 for r in runs)
    text = " ".join(lesson.notices(runs, "steps"))
    assert "nothing was preempted" in text and "A victim waits" not in text


def test_the_sweep_and_cache_sentences_count_in_words_that_fit():
    # Every pool preempting once at most: "up to 1 preemption", not "1 preemptions".
    pools, seqs = (1.0, 2.0), (8, 16)
    ones = np.ones((2, 2), int)
    sweep = sizing.Sweep(pools, (512, 1024), seqs, ones, np.full((2, 2), 900.0), np.zeros((2, 2)), ones * 0,
                         ones * 100, 0.0)
    assert "every pool size on the grid preempts (up to 1 preemption);" in sizing.sweep_notices(sweep, 1.0, 16)[0]
    # One re-admission without a prefix cache (the prefix_cache preset's workload cut to 10 requests): "its newest
    # token", not "its's newest token".
    p = presets.get("prefix_cache")
    workload = p.scenario.workload.replace(num_requests=10)
    runs = []
    for label, sc in lesson.variants(p, dataclasses.replace(p.scenario, workload=workload,
                                                            requests=tuple(generate(workload))), {}):
        trace = simulate(sc.config, sc.requests)
        runs.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    text = " ".join(notices.cache_notices(runs))
    assert "the 1 re-admission prefilled all" in text and "its's" not in text and "its newest token" in text
