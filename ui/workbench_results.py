"""The Workbench page's results, drawn from its runs: each run's headline numbers, the lessons' charts (who ran
when, the KV cache, the queues, per client), the step player, each request's latency (TTFT and time between tokens,
request by request and as distributions, with its table) and the metrics and downloads."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import streamlit as st

from sim.config import EngineConfig
from sim.request import RequestSpec

from . import charts, page, player, runner, sections
from . import workbench_runs as wr
from .charts import request_latency
from .lesson import Run, run_variants
from .theme import ChartStyle
from .wording import count, file_slug, plain, sentence_case
from .workbench import PAGE


def run_all(specs: Sequence[RequestSpec], engine: EngineConfig, choices: Sequence[wr.RunChoice]) -> list[Run]:
    if not specs:  # (no valid table yet: checked_table said so)
        st.stop()
    if not choices:
        st.warning("Pick at least one run above.", icon=":material/warning:")
        st.stop()
    variants = page.guarded(lambda: wr.scenarios(specs, engine, choices))
    return run_variants(variants, what="run")


def headline(runs: Sequence[Run], unit: str) -> None:
    """One column per run: the average finish time, TTFT and time between tokens."""
    # Each run's name in a row of its own, where it wraps (a metric's label is cut to one line: four runs' names
    # were cut), aligned at the bottom so that the numbers below stand in one line.
    names = st.columns(len(runs), vertical_alignment="bottom")
    for head, col, run in zip(names, st.columns(len(runs)), runs, strict=True):
        s = run.summary
        finished = s[f"finish_{unit}"]["count"] > 0
        head.markdown(f"**{plain(run.label)}**: average finish", help="Arrival to the end of the last token, "
                                                                   "averaged over the requests that finished.")
        col.metric(f"{plain(run.label)}: average finish", f"{s[f'finish_{unit}']['mean']:,.0f} {unit}" if finished
                   else "none finished", label_visibility="collapsed")
        ttft = s[f"ttft_{unit}"]["mean"]
        col.caption(f"TTFT mean {ttft:,.{0 if unit == 'steps' else 1}f} {unit} · "
                    f"{count(s['num_preemptions'], 'preemption')}" if finished else "")


def charts_section(runs: Sequence[Run], unit: str, style: ChartStyle) -> Any:
    """The lessons' charts; returns the place above the Gantt charts where ``show_player`` draws the player (last:
    re-running each run's queues for it never holds the charts up)."""
    traces = {run.label: run.trace for run in runs}
    st.subheader("Who ran when")
    slot = st.container()
    x_max = charts.time_extent(traces.values(), unit)
    page.run_grid(runs, lambda run: charts.gantt(run.trace, style, x_unit=unit, title=run.label, x_max=x_max),
                  "gantt", style, unit)
    st.subheader("The KV cache and the queues")
    page.run_grid(runs, lambda run: charts.kv_occupancy(run.trace, style, x_unit=unit,
                                                        title=f"{run.label}: KV cache in use"), "kv", style, unit)
    left, right = st.columns(2)
    with left:
        page.show_chart(charts.queue_and_batch(traces, style, x_unit=unit), "queue-and-batch", style,
                        cursor_runs=list(traces), x_unit=unit)
    with right:
        page.show_chart(charts.finish_time_ecdf(traces, style, unit=unit), "finish-time-distribution", style)
    if len(runs[0].trace.client_ids) > 1:
        st.subheader("Per client")
        page.run_grid(runs, lambda run: charts.client_counters(run.trace, style, x_unit=unit,
                                                               title=f"{run.label}: virtual token counters"),
                      "client-counters", style, unit)
        page.show_chart(charts.latency_by_client(traces, style, unit=unit), "latency-by-client", style)
    return slot


def latency_section(runs: Sequence[Run], unit: str, style: ChartStyle) -> None:
    """TTFT and time between tokens, request by request and as distributions, and the table of every request."""
    st.subheader("Each request's latency")
    st.caption("TTFT: arrival to the end of the step that made the first token. Time between tokens (TBT): from one "
               "token of a request to its next, mean and max per request (a stall or a preemption is a long gap). "
               "Blank where it never happened: a rejected request has no TTFT, a one-token answer no gap.")
    traces = {run.label: run.trace for run in runs}
    values = {run.label: runner.measure(run.scenario, request_latency.per_request, trace=run.trace) for run in runs}
    metric = st.segmented_control("Latency", list(request_latency.METRICS), key=f"{PAGE}.latency_metric",
                                  format_func=lambda k: sentence_case(request_latency.METRICS[k][0]),
                                  default="ttft") or "ttft"
    what = request_latency.METRICS[metric][0]
    left, right = st.columns(2)
    with left:
        page.show_chart(request_latency.by_request(traces, style, metric=metric, unit=unit, values=values),
                        f"{metric}-by-request", style)
    with right:
        shown = {label: v[f"{metric}_{unit}"] for label, v in values.items()}
        page.show_chart(charts.finish_time_ecdf(shown, style, unit=unit, what=what, colors=charts.label_colors(traces),
                                                title=f"{sentence_case(what)}, distribution"),
                        f"{metric}-distribution", style)
    frame = request_latency.latency_frame(traces, values)
    page.show_table(frame, style)
    st.download_button("Per-request latencies (CSV)", lambda: sections.frame_csv(frame),
                       file_name="scheduler-lab-workbench-latencies.csv", mime="text/csv", key=f"{PAGE}.dl_latency")


def show_player(runs: Sequence[Run], unit: str, slot: Any) -> None:
    with slot:
        player.show(runs, PAGE, unit, scope=PAGE)


def footer(runs: Sequence[Run], style: ChartStyle) -> None:
    st.subheader("Metrics")
    page.show_metrics({run.label: run.summary for run in runs}, style, ("served", "throughput", "preemptions"))
    st.subheader("Take it with you")
    for run in runs:
        st.caption(plain(run.label))
        sections.downloads(run.scenario, run.trace, file_slug("scheduler-lab-workbench", run.label),
                           key=f"{PAGE}.{hashlib.sha256(run.label.encode()).hexdigest()[:8]}")
