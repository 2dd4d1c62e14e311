"""Cancellation: work nobody reads. Abort at once vs notice late vs never; stop checks every step vs at max_tokens."""

import streamlit as st

from lessons.cancellation import lesson, measures
from ui import charts, knobs, page
from ui.charts import cancellation as cancel_charts
from ui.lesson import open_lesson, run_variants
from ui.wording import safe_id

lp = open_lesson(lesson.LESSON, "Cancellation: work nobody reads", lesson.QUESTION)
style, preset, base = lp.style, lp.preset, lp.base
engine = lp.panel("Engine", f"{lesson.LESSON}.engine", knobs.engine_knobs(base.config))
workload = lp.workload(lesson.LESSON)
own = lp.panel("Users and servers", lesson.LESSON, lesson.knobs(preset, base, lp.is_uploaded))
lp.show_changes()
config = lesson.apply(knobs.apply_engine(base.config, engine), own)
st.sidebar.caption(knobs.pool_caption(config))
unit = own["unit"]

scenario = page.guarded(lambda: lesson.apply_requests(
    knobs.scenario_with(base, config, lesson.apply_workload(workload, own)), own))
runs = run_variants(lesson.variants(preset, scenario, own), what="server")
story = measures.abandon_story(runs)
styles = cancel_charts.server_styles({run.label: run.scenario.config for run in runs})
summaries = {run.label: run.summary for run in runs}

if story is not None:
    with st.container(border=True):
        st.markdown(f"**The article's example, measured:** the user of request '{safe_id(story.request_id)}' "
                    f"leaves after token {story.tokens_read:,} of {story.tokens_read + story.wasted_tokens:,}.")
        page.cards(measures.story_metrics(story), columns=4)
page.cards([lesson.headline(run, unit) for run in runs])

page.notice(lesson.notices(runs, unit))

st.subheader("KV memory: who is it for?")
page.show_chart(cancel_charts.kv_for_nobody({run.label: run.trace for run in runs}, style, x_unit=unit),
                "kv-for-nobody", style, cursor_runs=[run.label for run in runs], x_unit=unit,
                cursor_axes=page.panel_axes(len(runs)))  # (a panel per server)

st.subheader("Who ran when")
lp.player(runs, unit, start_step=lesson.inspector_step)
x_max = charts.time_extent([run.trace for run in runs], unit)
page.run_grid(runs, lambda run: charts.gantt(run.trace, style, x_unit=unit, title=run.label, x_max=x_max,
                                             highlight_ids=lesson.gantt_notes(run, story)),
              "gantt", style, unit, lesson.gantt_columns(runs))

st.subheader("What the waste costs")
page.show_chart(cancel_charts.waste_bars(summaries, style, styles=styles), "work-for-nobody", style)
cols = st.columns(1 if style.presentation else 2)  # on a projector, one wide column: labels stay readable
with cols[0]:
    page.show_chart(cancel_charts.waiting_others_lose(measures.waiting_of_the_same_users(runs), style, styles=styles,
                                                      unit=unit), "waiting-others-lose", style)
with cols[-1]:
    page.show_chart(charts.queue_and_batch({run.label: run.trace for run in runs}, style, x_unit=unit,
                                           colors={label: color for label, (color, _) in styles.items()}),
                    "queue-and-batch", style, cursor_runs=[run.label for run in runs], x_unit=unit)

st.subheader("Metrics")
page.show_metrics(summaries, style, ("served", "aborted", "wasted", "wasted_gpu", "read", "throughput", "peak_kv"))

lp.footer(runs)
