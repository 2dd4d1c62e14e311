"""Token budget: max_num_batched_tokens and chunked prefill; TTFT against the time between tokens."""

import streamlit as st

from lessons.budget import lesson
from ui import charts, knobs, page, sweeps
from ui.charts import budget as budget_charts
from ui.lesson import open_lesson, run_variants
from ui.wording import safe_id

lp = open_lesson(lesson.LESSON, "Token budget and chunked prefill", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base
engine = lp.panel("Engine", f"{lesson.LESSON}.engine", lesson.engine_knobs(base.config))
workload = lp.workload(lesson.LESSON)
own = lp.panel("Servers compared", lesson.LESSON, lesson.knobs(preset, base, lp.is_uploaded))
lp.show_changes()
config = lesson.apply(lesson.apply_engine(base.config, engine), own)
st.sidebar.caption(knobs.pool_caption(config))

scenario = page.guarded(lambda: knobs.scenario_with(base, config, workload))
budgets = preset.knobs.get("budget_sweep", ())
sweep_runs = lesson.sweep_runs(scenario, budgets)
runs = run_variants(lesson.variants(preset, scenario, own), what="server", ahead=sweep_runs)
story = lesson.worked_example(runs)
traces = {run.label: run.trace for run in runs}

if story:
    with st.container(border=True):
        st.markdown(f"**The worked example, measured:** {safe_id(story[0].request_id)} "
                    f"({story[0].prompt_len:,} tokens) arrives while the other streams decode.")
        page.cards(lesson.stall_metrics(story))
page.cards([lesson.headline(run, "ms") for run in runs])

sweep = page.guarded(lambda: sweeps.Sweep(sweep_runs, lesson.sweep_point, lp.started_s)) if budgets else None
page.notice(lesson.notices(runs, "ms") + lesson.sweep_notice(
    page.guarded(lambda: lesson.tradeoff_sweep(scenario, budgets, sweep.measure))
    if sweep is not None and sweep.is_complete else None))

st.subheader("Each stream's tokens: a stall is a gap")
x_max = charts.time_extent(traces.values(), "ms")


def draw_tokens(label: str) -> None:
    page.show_chart(budget_charts.token_times(traces[label], style, title=label), f"tokens-{label}", style,
                    cursor_runs=[label], x_unit="ms")


page.grid(list(traces), draw_tokens, columns=2 if len(runs) <= 4 else 3)
page.show_chart(budget_charts.tbt_distribution(traces, style), "time-between-tokens", style)

if sweep is not None:
    st.subheader("The trade-off: first token against smooth streams")
    current = [(run.label, run.summary["ttft_ms"]["p99"], run.summary["tbt_ms"]["p99"]) for run in runs]

    def draw_sweep(measure: sweeps.MeasureFn) -> None:
        points = page.guarded(lambda: lesson.tradeoff_sweep(scenario, budgets, measure))
        page.show_chart(budget_charts.tradeoff(points, style, current=current), "budget-tradeoff", style)
        st.caption(f"Budgets {budgets[0]:,} to {budgets[-1]:,} tokens. Without chunked prefill a budget must hold "
                   f"the longest request ({points['longest']:,} tokens): only "
                   f"{', '.join(f'{b:,}' for b in points['unchunked_budgets']) or 'none'} of them run.")

    sweeps.show(sweep, draw_sweep)

st.subheader("Who ran when, and the KV it held")
lp.player(runs, "ms", start_step=lesson.longest_prompt_start)


def draw_gantt(label: str) -> None:
    page.show_chart(charts.gantt(traces[label], style, x_unit="ms", title=label, x_max=x_max), f"gantt-{label}",
                    style, cursor_runs=[label], x_unit="ms")
    page.show_chart(charts.kv_occupancy(traces[label], style, x_unit="ms", title=f"KV cache, {label}"),
                    f"kv-{label}", style, cursor_runs=[label], x_unit="ms")


page.grid(list(traces), draw_gantt, columns=2 if len(runs) <= 4 else 3)

st.subheader("Metrics")
page.show_metrics({run.label: run.summary for run in runs}, style,
                  ("tbt_p50_ms", "tbt_p99_ms", "tbt_max_ms", "served", "preemptions", "recomputed", "peak_kv"))

lp.footer(runs)
