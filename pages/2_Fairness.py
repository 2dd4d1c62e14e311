"""Fairness: per customer, not per request. FCFS vs a rate limit vs LCF vs the Virtual Token Counter, per client."""

import streamlit as st

from lessons.fairness import clients as fairness_clients
from lessons.fairness import lesson, stats
from ui import charts, clients, knobs, page, runner, sweeps
from ui.charts import fairness as fairness_charts
from ui.lesson import open_lesson, run_variants

lp = open_lesson(lesson.LESSON, "Fairness: per customer, not per request", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base

engine = lp.panel("Engine", f"{lesson.LESSON}.engine", knobs.engine_knobs(base.config))
config = knobs.apply_engine(base.config, engine)
workload, config = clients.client_settings(lp, config)
own = lp.panel("Policies", lesson.LESSON, lesson.knobs(preset, base, lp.is_uploaded))
lp.show_changes()
config = page.guarded(lambda: lesson.apply(config, own))
st.sidebar.caption(knobs.pool_caption(config))
unit = own["unit"]

scenario = page.guarded(lambda: fairness_clients.in_client_order(knobs.scenario_with(base, config, workload)))
# (labels are the preset's: one whose numbers the knobs or an uploaded file changed says what it runs now)
variants = lesson.variants(preset, scenario, own)
# A preset with a sweep makes its point there: its runs start on the other cores with the policies'.
limit_values = weight_values = None
if "limit_sweep" in preset.knobs and "limit" in own:
    limit_values = stats.sweep_values(preset, "limit_sweep", own["limit"])
vtc_scenario = next((sc for _, sc in variants if sc.config.policy.value in ("vtc", "lcf")), None)
if "output_weight_sweep" in preset.knobs and vtc_scenario is not None:
    weight_values = stats.sweep_values(preset, "output_weight_sweep", vtc_scenario.config.output_weight)
limit_runs = page.guarded(lambda: stats.limit_sweep_runs(scenario, limit_values)) if limit_values else []
weight_runs = page.guarded(lambda: stats.weight_sweep_runs(vtc_scenario, weight_values)) if weight_values else []
runs = run_variants(variants, make=stats.run_maker(runner.measure), ahead=[*limit_runs, *weight_runs])

page.cards([lesson.headline(run, unit) for run in runs])  # the numbers first: one column per policy

# The sweep's curve comes first, and its sentences join the notice once every point is in (ui.sweeps: the page
# draws the points ready now, and the rest fill in without holding up the rerun).
limit_sweep = weight_sweep = None
if limit_runs:
    limit_sweep = page.guarded(lambda: sweeps.Sweep(limit_runs, stats.sweep_point, lp.started_s))
if weight_runs:
    weight_sweep = page.guarded(lambda: sweeps.Sweep(weight_runs, stats.sweep_point, lp.started_s))
page.notice(lesson.sweep_notices(
    runs,
    page.guarded(lambda: stats.limit_sweep(scenario, limit_values, runner.measure))
    if limit_sweep and limit_sweep.is_complete else None,
    page.guarded(lambda: stats.weight_sweep(vtc_scenario, weight_values, runner.measure))
    if weight_sweep and weight_sweep.is_complete else None) + lesson.notices(runs, unit))

if limit_sweep is not None:
    st.subheader("Rate limits: throughput against the limit")
    sweeps.show(limit_sweep, lambda measure: page.show_chart(fairness_charts.limit_sweep_chart(
        page.guarded(lambda: stats.limit_sweep(scenario, limit_values, measure)),
        stats.sweep_references(runs, runner.measure), style, light_client=stats.light_client(runs[0]),
        chosen=own["limit"]), "rate-limit-sweep", style))
if weight_sweep is not None:
    st.subheader("Input and output weights: who counts as served")
    sweeps.show(weight_sweep, lambda measure: page.show_chart(fairness_charts.weight_sweep_chart(
        page.guarded(lambda: stats.weight_sweep(vtc_scenario, weight_values, measure)),
        stats.sweep_references(runs, runner.measure, policies=("fcfs",)), style,
        chosen=vtc_scenario.config.output_weight), "output-weight-sweep", style))

traces = {run.label: run.trace for run in runs}
labels, panels = list(traces), page.panel_axes(len(traces))  # one panel per policy
st.subheader("Who ran when, coloured by client")
lp.player(runs, unit)
page.pick_one(f"{lesson.LESSON}.gantt_policy", labels, lambda label: page.show_chart(
    charts.gantt(traces[label], style, x_unit=unit, title=f"{label}: each request over time", color_by="client"),
    f"gantt-{label}", style, key="chart-gantt", cursor_runs=[label], x_unit=unit))
st.subheader("Who holds the KV cache")
page.run_grid(runs, lambda run: charts.kv_occupancy(run.trace, style, by="client", x_unit=unit,
                                                    title=f"{run.label}: KV cache per client"), "kv", style, unit)
st.subheader("Virtual token counters")
st.caption(lesson.COUNTERS_CAPTION)
page.show_chart(fairness_charts.counters_by_policy(traces, style, x_unit=unit), "counters", style,
                cursor_runs=labels, x_unit=unit, cursor_axes=panels)

st.subheader("Service per client over time")
page.show_chart(fairness_charts.client_rates_by_policy(traces, style, window_steps=own["window"], x_unit=unit),
                "tokens-per-client", style, cursor_runs=labels, x_unit=unit, cursor_axes=panels)

left, right = st.columns(2)
with left:
    page.show_chart(fairness_charts.total_throughput(traces, style, window_steps=own["window"], x_unit=unit),
                    "total-throughput", style, cursor_runs=labels, x_unit=unit)
with right:
    page.show_chart(charts.latency_by_client(traces, style, unit="ms", colors=fairness_charts.policy_colors(traces)),
                    "latency-per-client", style)

pair = stats.gap_pair(runs[0].trace.client_ids)
if pair:
    st.subheader("The fairness bound")
    st.caption(lesson.BOUND_CAPTION)
    page.show_chart(fairness_charts.service_gap_chart(traces, style, a=pair[0], b=pair[1], x_unit=unit,
                                                      precomputed=stats.gap_inputs(runs)), "service-gap", style,
                    cursor_runs=labels, x_unit=unit)

st.subheader("Metrics")
page.show_table(stats.policy_table(runs), style, index=True)
page.show_table(stats.client_table(runs), style)

lp.footer(runs)
