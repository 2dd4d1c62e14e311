"""Queueing: who waits, and in what order. FCFS vs SJF vs predicted SJF vs priority on the same requests."""

import streamlit as st

from lessons.queueing import lesson
from ui import charts, knobs, page, sweeps
from ui.lesson import open_lesson, run_variants

lp = open_lesson(lesson.LESSON, "Queueing: who waits, and in what order", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base
engine = lp.panel("Engine", f"{lesson.LESSON}.engine", knobs.engine_knobs(base.config))
workload = lp.workload(lesson.LESSON)
own = lp.panel("Policies", lesson.LESSON, lesson.knobs(preset, base, lp.is_uploaded))
lp.show_changes()
config = lesson.apply(knobs.apply_engine(base.config, engine), own)
st.sidebar.caption(knobs.pool_caption(config))
unit = own["unit"]

scenario = page.guarded(lambda: knobs.scenario_with(base, config, workload))
sweeping = "sigma_sweep" in preset.knobs and not lp.is_uploaded
sigmas = preset.knobs["sigma_sweep"] if sweeping else ()
sigma_sweep_runs = lesson.sigma_sweep_runs(scenario, sigmas) if sweeping else []
runs = run_variants(lesson.variants(preset, scenario, own), ahead=sigma_sweep_runs)

page.cards([lesson.headline(run, unit) for run in runs])  # the numbers first: one column per policy

# The sweep's runs are made (or taken from the workers) as the rerun's time allows; its sentence joins the notice
# once every point is in (ui.sweeps: the page reruns then).
sigma_sweep = page.guarded(lambda: sweeps.Sweep(sigma_sweep_runs, lesson.mean_finish_steps, lp.started_s)) \
    if sweeping else None
page.notice(lesson.notices(runs, unit) + lesson.sigma_notice(
    page.guarded(lambda: lesson.sigma_sweep(scenario, sigmas, sigma_sweep.measure))
    if sigma_sweep and sigma_sweep.is_complete else None))

st.subheader("Who ran when")
lp.player(runs, unit)
longest = lesson.longest_wait(runs[0].trace)
# Outlined in the first run's chart: the head-of-line blockers, or (behind a stream, as under SJF) the request
# that waited longest. No notes beside the bars: they would narrow this chart against its neighbours.
outlined = [] if longest is None else [who for who, _ in longest.blockers] or [longest.waiter]
# ... and in each other run's chart, the request its "price" sentence names (the one that now finishes last).
payers = {run.label: run.trace.request_ids[price.row] for run in runs[1:]
          if (price := lesson.price_payer(runs[0], run, unit)) is not None}
x_max = charts.time_extent([run.trace for run in runs], unit)
columns = 2 if len(runs) <= 4 else 3
page.run_grid(runs, lambda run: charts.gantt(
    run.trace, style, x_unit=unit, title=run.label, x_max=x_max,
    highlight_ids=outlined if run is runs[0] else [payers[run.label]] if run.label in payers else []),
    "gantt", style, unit, columns)
st.subheader("Who holds the KV cache")
st.caption("Blocks in use during each step: a long request admitted first holds its blocks, and its batch slot, "
           "until its last token.")
page.run_grid(runs, lambda run: charts.kv_occupancy(run.trace, style, x_unit=unit, title=f"{run.label}: KV cache "
                                                    "in use"), "kv", style, unit, columns)

left, right = st.columns(2)
with left:
    page.show_chart(charts.finish_time_ecdf({run.label: run.trace for run in runs}, style, unit=unit),
                    "finish-time-distribution", style)
with right:
    page.show_chart(charts.queue_and_batch({run.label: run.trace for run in runs}, style, x_unit=unit),
                    "queue-and-batch", style, cursor_runs=[run.label for run in runs], x_unit=unit)

if sigma_sweep is not None:
    st.subheader("Prediction error: from SJF toward FCFS")

    def draw_sigma_sweep(measure: sweeps.MeasureFn) -> None:
        sweep = page.guarded(lambda: lesson.sigma_sweep(scenario, sigmas, measure))
        references = {label: v for label, v in (("SJF, true lengths", sweep["sjf"]), ("FCFS", sweep["fcfs"]))
                      if v is not None}
        page.show_chart(charts.sweep_lines(
            sweep["sigma"], {"SJF on predicted lengths": sweep["predicted"]}, style, references=references,
            colors=lesson.SIGMA_SWEEP_COLORS, title="Average finish time as predictions get worse",
            x_all=sweep["sigma_all"], x_title="prediction error (lognormal sigma)",
            y_title="average finish time (engine steps)", unit="steps"),
            "prediction-error-sweep", style)

    sweeps.show(sigma_sweep, draw_sigma_sweep)

st.subheader("Metrics")
page.show_metrics({run.label: run.summary for run in runs}, style, ("served", "throughput", "preemptions"))

lp.footer(runs)
