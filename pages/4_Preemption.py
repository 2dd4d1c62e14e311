"""Preemption: when KV memory runs out mid-answer. Who is evicted, what recompute and swap cost, how to size."""

import streamlit as st

from ui import knobs, page, sweeps, theme
from ui.charts import preemption as charts
from ui.charts import time_extent
from ui.controls import KnobPanel
from ui.lesson import open_lesson, run_variants
from ui.lessons import preemption as lesson
from ui.wording import fmt_gib

lp = open_lesson(lesson.LESSON, "Preemption: when KV memory runs out mid-answer", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base
engine = lp.panel("Engine", f"{lesson.LESSON}.engine", lesson.engine_knobs(base.config))
workload = lp.workload(lesson.LESSON)
own = lp.panel("Preemption", lesson.LESSON, lesson.knobs(preset, base.config, lp.is_uploaded))
swap = lp.panel("Swap", f"{lesson.LESSON}.swap", lesson.swap_knobs(base.config))
lp.show_changes()
config = page.guarded(lambda: lesson.apply(base.config, engine, own, swap))
st.sidebar.caption(knobs.pool_caption(config))
unit = own["unit"]

scenario = page.guarded(lambda: knobs.scenario_with(base, config, workload))
runs = run_variants(lesson.variants(preset, scenario, own.get("compare")), make=lesson.Run, what="run")
labels = [run.label for run in runs]
columns = 1 if len(runs) == 1 else 2  # one run: full width

page.cards([lesson.headline(run, unit) for run in runs])

page.notice(lesson.notices(runs))


def show_timeline() -> None:
    st.subheader("Who was evicted, and when")
    st.caption("Red triangles: a preemption; green (or purple) triangles: the request came back, re-prefilled "
               "(or copied back from CPU memory). Hover a triangle for the details. The player shows the pool "
               "block by block at each step.")
    lp.player(runs, unit, block_map=True)
    x_max = time_extent([r.trace for r in runs], unit)
    page.run_grid(runs, lambda run: charts.gantt_with_resumes(
        run.trace, style, notes=lesson.gantt_notes(run.preempted), x_unit=unit, title=run.label, x_max=x_max),
        "preemption-gantt", style, unit, columns)


def show_kv() -> None:
    st.subheader("KV cache over time")
    if any(r.trace.steps["cpu_blocks_used"].any() for r in runs):
        st.caption("The dotted purple line, CPU swap: a swapped victim's blocks parked in host RAM, outside the GPU "
                   "pool (they do not count against the pool line).")
    view = KnobPanel(f"{lesson.LESSON}.kv", lesson.KV_VIEW_KNOBS, lp.scope).render(st.container(horizontal=True))

    page.run_grid(runs, lambda run: charts.kv_over_time(
        run.trace, style, by=view["kv_by"], x_unit=unit, unit=view["kv_unit"], title=f"{run.label}: KV cache in use",
        parts=lesson.kv_parts(run.trace) if view["kv_by"] == "request" else ()), "preemption-kv", style, unit, columns)


def show_cost() -> None:
    st.subheader("What bringing a victim back costs: recompute vs swap")
    victim = lesson.victim_cost(runs, config)
    if victim is None:
        st.caption("No request could run on this engine (each was too big for the pool), so there is no victim to "
                   "bring back.")
        return
    cost, what = victim
    page.cards(lesson.cost_cards(cost, config))
    st.caption(lesson.cost_caption(cost, config, what))
    page.show_chart(charts.cost_bars(cost, style, bandwidth_gb_s=config.cost.swap_bandwidth_gb_s),
                    "preemption-recompute-vs-swap", style)


def show_hits() -> None:
    with_hits = [r for r in runs if lesson.readmissions(r.preempted)]
    if not with_hits:
        return
    st.subheader("Re-prefill and the prefix cache")
    if not any(r.trace.config.enable_prefix_caching for r in runs):
        n = sum(len(lesson.readmissions(r.preempted)) for r in runs)
        each = "the one re-admission" if n == 1 else f"each of the {n:,} re-admissions"
        st.caption(f"Prefix caching is off here (vLLM V1 turns it on by default), so {each} prefilled all its "
                   "tokens again. Turn it on in the sidebar to see how much a re-prefill finds in the cache.")
        return
    st.caption("A recomputed request's freed blocks keep their contents until the pool hands them out again: with "
               "prefix caching on, the re-admission reuses the ones still cached (and any prefix shared with "
               "running requests) and prefills only the rest.")

    def draw(label: str) -> None:
        run = next(r for r in with_hits if r.label == label)
        page.show_chart(charts.reprefill_hits(lesson.readmissions(run.preempted), style, title=label),
                        f"preemption-hits-{label}", style)

    page.grid([r.label for r in with_hits], draw, columns=1 if len(with_hits) == 1 else 2)


def show_sweep() -> None:
    if "pool_sweep_blocks" not in preset.knobs or lp.is_uploaded:
        return
    st.subheader("Sizing: KV pool size x max_num_seqs")
    pools, seqs = lesson.sweep_axes(preset)
    points = lesson.sizing_points(runs[0].scenario, pools, seqs)  # (coarse first: the grid fills in as they run)
    live = page.guarded(lambda: sweeps.Sweep([sc for _, _, sc in points], lesson.sizing_point, lp.started_s))
    sweeps.show(live, lambda measure: draw_sweep(lesson.sizing_from(points, pools, seqs, measure)))


def draw_sweep(sweep: lesson.Sweep) -> None:
    pool = lesson.pool_gib(config)
    i, j, exact = lesson.nearest_cell(sweep, pool, config.max_num_seqs)
    # (presentation mode: one under the other; half a projector's width runs the larger cell numbers together)
    left, right = (st.container(), st.container()) if style.presentation else st.columns(2)
    with left:
        page.show_chart(charts.sweep_heatmap(
            sweep.pools_gib, sweep.pools_blocks, sweep.seqs, sweep.preemptions, style, current=(i, j),
            title="Preemptions per run", colorbar_title="preemptions", color=theme.VERMILLION,
            pending=sweep.pending), "preemption-sweep-preemptions", style)
    with right:
        page.show_chart(charts.sweep_heatmap(
            sweep.pools_gib, sweep.pools_blocks, sweep.seqs, sweep.finish_ms / 1000, style, current=(i, j),
            title="Mean finish time (s)", colorbar_title="mean finish (s)", color=theme.BLUE, value_format=".2f",
            from_zero=False, pending=sweep.pending),
            "preemption-sweep-latency", style)
    where = "your setting" if exact else "the grid cell nearest your setting"
    st.caption(f"Outlined: {where} ({fmt_gib(pool)}, max_num_seqs {config.max_num_seqs}). "
               f"{sweep.preemptions.size} runs of this workload, cached: moving the pool or max_num_seqs knobs only "
               "moves the outline.")
    if sweep.pending is None:
        page.notice(lesson.sweep_notices(sweep, pool, config.max_num_seqs))


SECTIONS = {"timeline": show_timeline, "kv": show_kv, "cost": show_cost,
            "hits": show_hits, "sweep": show_sweep}
for name in lesson.section_order(preset):
    SECTIONS[name]()

st.subheader("Metrics")
page.show_metrics({run.label: run.summary for run in runs}, style,
                  ("served", "throughput", "preemptions", "swaps", "recomputed", "peak_kv"))

lp.footer(runs)
