"""Preemption: when KV memory runs out mid-answer. Who is evicted, what recompute and swap cost, how to size."""

import streamlit as st

from lessons.preemption import lesson, sizing
from ui import knobs, page, sweeps
from ui import preemption_sections as sections
from ui.charts import preemption as charts
from ui.charts import time_extent
from ui.controls import KnobPanel
from ui.lesson import open_lesson, run_variants

lp = open_lesson(lesson.LESSON, "Preemption: when KV memory runs out mid-answer", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base
engine = lp.panel("Engine", f"{lesson.LESSON}.engine", lesson.engine_knobs(base.config))
workload = lp.workload(lesson.LESSON)
own = lp.panel("Preemption", lesson.LESSON, lesson.knobs(preset, base, lp.is_uploaded))
swap = lp.panel("Swap", f"{lesson.LESSON}.swap", lesson.swap_knobs(base.config))
lp.show_changes()
config = page.guarded(lambda: lesson.apply(lesson.apply_swap(lesson.apply_engine(base.config, engine), swap), own))
st.sidebar.caption(knobs.pool_caption(config))
unit = own["unit"]

scenario = page.guarded(lambda: knobs.scenario_with(base, config, workload))
runs = run_variants(lesson.variants(preset, scenario, own), make=lesson.Run, what="run")
columns = 1 if len(runs) == 1 else 2  # one run: full width

page.cards([lesson.headline(run, unit) for run in runs])

page.notice(lesson.notices(runs, unit))


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


def show_sweep() -> None:
    if "pool_sweep_blocks" not in preset.knobs or lp.is_uploaded:
        return
    st.subheader("Sizing: KV pool size x max_num_seqs")
    pools, seqs = sizing.sweep_axes(preset)
    points = sizing.sizing_points(runs[0].scenario, pools, seqs)  # (coarse first: the grid fills in as they run)
    live = page.guarded(lambda: sweeps.Sweep([sc for _, _, sc in points], sizing.sizing_point, lp.started_s))
    sweeps.show(live, lambda measure: sections.sizing_heatmaps(sizing.sizing_from(points, pools, seqs, measure),
                                                               config, style))


SECTIONS = {"timeline": show_timeline, "kv": show_kv, "cost": lambda: sections.cost(runs, config, style),
            "hits": lambda: sections.prefix_hits(runs, style), "sweep": show_sweep}
for name in lesson.section_order(preset):
    SECTIONS[name]()

st.subheader("Metrics")
page.show_metrics({run.label: run.summary for run in runs}, style,
                  ("served", "throughput", "preemptions", "swaps", "recomputed", "peak_kv"))

lp.footer(runs)
