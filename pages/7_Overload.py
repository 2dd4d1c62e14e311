"""Overload: offered load past the server's capacity, admission control at the door, and goodput under SLOs."""

import streamlit as st

from lessons.overload import lesson
from ui import charts, knobs, page, sweeps
from ui.charts import overload as overload_charts
from ui.lesson import open_lesson, run_variants

lp = open_lesson(lesson.LESSON, "Overload, admission control and goodput", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base
engine = lp.panel("Engine", f"{lesson.LESSON}.engine", knobs.engine_knobs(base.config))
traffic = (lp.panel("Traffic", f"{lesson.LESSON}.traffic", lesson.traffic_knobs(preset, base.workload))
           if base.workload is not None else None)
own = lp.panel("Admission and targets", lesson.LESSON, lesson.knobs(preset, base, lp.is_uploaded))
lp.show_changes()
config = lesson.apply(knobs.apply_engine(base.config, engine), own)
st.sidebar.caption(knobs.pool_caption(config))

workload = page.guarded(lambda: lesson.apply_traffic(base.workload, traffic)) if traffic is not None else None
scenario = page.guarded(lambda: knobs.scenario_with(base, config, workload))
load = lesson.load_of(preset) if traffic is not None and "load_rps" in traffic else None
loads = preset.knobs.get("load_sweep", ()) if load is not None else ()
duration_s = lesson.sweep_duration(traffic["duration_s"]) if load is not None else 0.0  # (each sweep point's)
sweep_runs = page.guarded(lambda: lesson.sweep_runs(preset, scenario, own, loads, duration_s)) if loads else []
runs = run_variants(lesson.variants(preset, scenario, own), what="setting", ahead=sweep_runs)
traces = {run.label: run.trace for run in runs}
colors = charts.label_colors(traces)

page.cards([lesson.headline(run, "ms") for run in runs])
sweep = page.guarded(lambda: sweeps.Sweep(sweep_runs, lesson.sweep_point, lp.started_s)) if sweep_runs else None
page.notice(lesson.notices(runs, "ms") + lesson.sweep_notice(
    page.guarded(lambda: lesson.load_sweep(preset, scenario, own, loads, duration_s, sweep.measure))
    if sweep is not None and sweep.is_complete else None))

if sweep is not None:
    st.subheader("The knee: what the server serves as the load grows")

    def draw_sweep(measure: sweeps.MeasureFn) -> None:
        points = page.guarded(lambda: lesson.load_sweep(preset, scenario, own, loads, duration_s, measure))
        current = lesson.offered_req_s(runs[0].trace)  # (the runs share their requests: the first marks the load)
        page.show_chart(overload_charts.load_sweep(points, colors, style, current_load=current), "load-sweep",
                        style)
        st.caption(f"Offered loads {loads[0]:,} to {loads[-1]:,} requests/s for {duration_s:,.0f} s each, every "
                   f"setting compared; the x axis is the load each run measured. Goodput: requests that met both "
                   f"targets, per second; throughput: every request served, per second; both counted while the "
                   f"traffic lasts (the first {lesson.WARM_UP:.0%} of it and the drain after it left out), so they "
                   f"can differ from the cards above, which count the whole run as vLLM's benchmark does. The "
                   f"dotted line is where every request offered would be served.")

    sweeps.show(sweep, draw_sweep)
elif base.workload is None:
    st.caption("The load sweep needs a generated workload (a scenario with a `workload` section): this one lists "
               "its requests.")

st.subheader("When each request arrived, and how long it waited for its first token")
x_max = charts.time_extent(traces.values(), "ms") / 1000.0


def draw_ttft(label: str) -> None:
    page.show_chart(overload_charts.ttft_by_arrival(traces[label], style, title=f"{label}: first token by arrival",
                                                    color=colors[label],
                                                    x_max_s=x_max), f"ttft-{label}", style)


page.grid(list(traces), draw_ttft, columns=2 if len(runs) <= 4 else 3)
page.show_chart(charts.queue_and_batch(traces, style, x_unit="ms", colors=colors), "queue", style,
                cursor_runs=list(traces), x_unit="ms")

st.subheader("Who ran when, and the KV it held")
lp.player(runs, "ms")


def draw_gantt(label: str) -> None:
    page.show_chart(charts.gantt(traces[label], style, x_unit="ms", title=f"{label}: each request",
                                 x_max=x_max * 1000.0),
                    f"gantt-{label}", style, cursor_runs=[label], x_unit="ms")
    page.show_chart(charts.kv_occupancy(traces[label], style, x_unit="ms", title=f"KV cache, {label}"),
                    f"kv-{label}", style, cursor_runs=[label], x_unit="ms")


page.grid(list(traces), draw_gantt, columns=2 if len(runs) <= 4 else 3)

st.subheader("Metrics")
page.show_metrics({run.label: run.summary for run in runs}, style,
                  ("served", "rejected", "shed", "slo_share", "slo_goodput", "throughput_req", "tbt_max_ms",
                   "preemptions"))

lp.footer(runs)
