"""Learn mode on every lesson page: the guided path (a few steps, each setting the knobs itself, a question to
predict before any chart is shown, then the explanation and the step's charts), a seeded problem from a link
(``?problem=SEED``), and the switch between the guided path and the free page.

Which view a lesson page opens: ``?problem=SEED`` a problem; ``?mode=free`` the free page; ``?guide=N`` step N of
the guided path; a link with other settings (``?preset=...``, a knob, a player step) the free page it describes;
no settings at all (a first visit) the guided path. After the first run the session remembers the view, and the
URL follows it (``?guide=N`` while guided, ``?mode=free`` on the free page). ``open_lesson`` (``ui/lesson.py``)
calls ``take_over`` before it draws the free page's header, so no page has code of its own for this.

The steps are data (``lessons/<lesson>/guide.py``, pure); this module draws them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

import lessons
from lessons.guided import Step
from lessons.preemption import lesson as preemption_lesson
from lessons.problems import MAX_SEED, Problem, engine_line, problem_for, requests_table
from lessons.run import Run
from sim.preemption_metrics import preemption_cost, preemptions
from sim.untrusted import whole_number

from . import charts, page, player, runner
from .charts import budget as budget_charts
from .charts import cancellation as cancel_charts
from .charts import fairness as fairness_charts
from .charts import overload as overload_charts
from .charts import preemption as preemption_charts
from .controls import set_param
from .theme import ChartStyle
from .wording import as_code, join_and, plain


def paths() -> dict[str, tuple[Step, ...]]:
    """Lesson id -> its guided path (``lessons/<lesson>/guide.py``), in the course's order (``lessons.LESSONS``)."""
    return {lesson.id: lesson.steps for lesson in lessons.LESSONS}

MODE_PARAM, GUIDE_PARAM, PROBLEM_PARAM = "mode", "guide", "problem"
GUIDED, FREE = "guided", "free"
# URL parameters that are not a lesson's settings: a link with only these is a first visit (the guided path)
NOT_SETTINGS = frozenset({"present", "export", "embed", "embed_options"})

# Guided mode fits its first screen (header, step, question) in 1280 x 720: less space above the first line. Under
# presentation mode the sidebar starts collapsed and Streamlit's header becomes an opaque 3.75-rem bar that takes
# clicks: the first line starts below it (at 2.5 rem it hid the top of the step buttons and caught clicks on them).
_COMPACT_CSS = """
<style>
[data-testid="stMainBlockContainer"] {{ padding-top: {top_rem}rem; }}
</style>
"""


def _compact_css(style: ChartStyle) -> str:
    return _COMPACT_CSS.format(top_rem=4 if style.presentation else 2.5)


# ---- which view ---------------------------------------------------------------------------------------------------
def _mode_key(lesson: str) -> str:
    return f"{lesson}.guide.mode"


def _step_key(lesson: str) -> str:
    return f"{lesson}.guide.step"


def first_mode(query: dict[str, Any]) -> str:
    """The view a link opens on a session's first run of a page (``query``: the URL's parameters)."""
    mode = query.get(MODE_PARAM)
    if mode in (GUIDED, FREE):
        return str(mode)
    if GUIDE_PARAM in query:
        return GUIDED
    return FREE if any(k not in NOT_SETTINGS for k in query) else GUIDED


def mode(lesson: str) -> str:
    key = _mode_key(lesson)
    if key not in st.session_state:
        st.session_state[key] = first_mode(st.query_params.to_dict())
    return st.session_state[key]


def _to_free(lesson: str) -> None:
    st.session_state[_mode_key(lesson)] = FREE
    st.query_params.pop(GUIDE_PARAM, None)
    st.query_params[MODE_PARAM] = FREE


def _to_guided(lesson: str) -> None:
    st.session_state[_mode_key(lesson)] = GUIDED
    for key in list(st.query_params):  # (the free page's settings: the guided steps set their own)
        if key not in NOT_SETTINGS:
            del st.query_params[key]
    st.query_params[GUIDE_PARAM] = str(st.session_state.get(_step_key(lesson), 1))


def take_over(lesson: str, style: ChartStyle) -> bool:
    """Called by ``open_lesson`` right after the page's setup. Draws a problem (``?problem=``) or the guided path
    and returns True (the page stops there); on the free page draws the button back to the guided path and returns
    False."""
    if lesson not in lessons.BY_ID:
        return False
    if PROBLEM_PARAM in st.query_params:
        st.html(_compact_css(style))
        show_problem(lesson, st.query_params[PROBLEM_PARAM], style)
        return True
    if mode(lesson) == FREE:
        st.button("Guided path", key=f"{lesson}.guide.to_guided", on_click=_to_guided, args=(lesson,),
                  icon=":material/school:", type="tertiary",
                  help="A few short steps: predict each answer before the charts show it.")
        return False
    st.html(_compact_css(style))
    show_path(lesson, style)
    return True


# ---- the guided path -------------------------------------------------------------------------------------------
def current_step(lesson: str, num_steps: int) -> int:
    """The step shown (1-based): the session's, else the URL's ``?guide=N`` (a bad value is warned about)."""
    key = _step_key(lesson)
    if key not in st.session_state:
        raw = st.query_params.get(GUIDE_PARAM, "1")
        try:
            n = whole_number(raw, 1, num_steps)
        except ValueError as e:
            st.warning(f"The link's step {as_code(f'{GUIDE_PARAM}={raw}', 30)} was ignored: it {plain(str(e))}. "
                       f"Starting at step 1.", icon=":material/warning:")
            n = 1
        st.session_state[key] = n
    n = st.session_state[key]
    set_param(GUIDE_PARAM, str(n))  # (remembered too: a return to the page finds it in the URL)
    return n


def _go(lesson: str, n: int) -> None:
    st.session_state[_step_key(lesson)] = n
    st.session_state[f"{lesson}.guide.nav"] = n


def _nav_changed(lesson: str) -> None:
    picked = st.session_state.get(f"{lesson}.guide.nav")
    if picked is not None:
        st.session_state[_step_key(lesson)] = picked


def show_path(lesson: str, style: ChartStyle) -> None:
    steps = lessons.BY_ID[lesson].steps
    n = current_step(lesson, len(steps))
    step = steps[n - 1]
    nav = f"{lesson}.guide.nav"
    st.session_state[nav] = n
    with st.container(horizontal=True, vertical_alignment="center"):
        st.markdown(f"### {lessons.BY_ID[lesson].title}: guided path")
        st.segmented_control("Step", list(range(1, len(steps) + 1)), key=nav, on_change=_nav_changed, args=(lesson,),
                             format_func=lambda i: f"{i}{' ✓' if _is_answered(lesson, steps[i - 1]) else ''}",
                             label_visibility="collapsed", help="The path's steps (✓ answered)")
        st.button("Free page", key=f"{lesson}.guide.to_free", on_click=_to_free, args=(lesson,),
                  icon=":material/tune:", help="Every chart and knob of the lesson, as before.")
    values = _values(lesson, step)
    stop = "" if step.title.endswith(("?", "!", ".")) else "."
    st.markdown(f"**Step {n} of {len(steps)}: {step.title}{stop}** {step.intro(values)}")
    if _is_answered(lesson, step):  # (once answered: another value is a new prediction, asked below)
        _settings(lesson, step)
    runs = page.guarded(lambda: [Run(label, sc, tr := runner.run(sc), runner.summary(sc, tr))
                                 for label, sc in step.scenarios(values)])
    problem = step.ask(runs, values)
    if not question(_question_key(lesson, step), problem, values_id(values)):
        return
    shown = step.shown_runs(runs)
    for name in step.charts:
        CHARTS[name].draw(shown, style, step.unit)
    if n < len(steps):
        st.button(f"Next: {steps[n].title}", key=f"{lesson}.guide.next", on_click=_go, args=(lesson, n + 1),
                  icon=":material/arrow_forward:", type="primary")
    else:
        _path_end(lesson)
    st.caption(player_caption(step))
    player.show(shown, lesson, step.unit, scope=f"guide.{step.key}", start_step=step.start_step)


def player_caption(step: Step) -> str:
    """What the player below a step drives: the cursor only on the step's charts that have one."""
    with_cursor = [CHARTS[name].what for name in step.charts if CHARTS[name].cursor]
    if not with_cursor:
        return "Step through the run: the player shows each step's batch, queue and KV blocks."
    return f"Step through the run: a cursor on the {join_and(with_cursor)} follows the player."


PRACTICE_SEEDS = (1, 2, 3)  # the problems a path's last step offers (``?problem=SEED``; consecutive seeds: each kind)


def next_lesson(lesson: str) -> str | None:
    """The id of the lesson after ``lesson`` in the course, None after the last."""
    following = lessons.following(lesson)
    return None if following is None else following.id


def _open_problem(seed: int) -> None:
    st.query_params[PROBLEM_PARAM] = str(seed)


def _to_next_path(lesson: str) -> None:
    st.session_state[_mode_key(lesson)] = GUIDED
    st.session_state[_step_key(lesson)] = 1


def _path_end(lesson: str) -> None:
    """The last step leads on: the lesson's problems, its free page, the next lesson's path."""
    with st.container(border=True):
        st.markdown(f"**That was the last step of {lessons.BY_ID[lesson].title}'s path.** Where next:")
        with st.container(horizontal=True):
            for seed in PRACTICE_SEEDS:
                st.button(f"Problem {seed}", key=f"{lesson}.guide.problem.{seed}", on_click=_open_problem,
                          args=(seed,), icon=":material/quiz:",
                          help=f"A new scenario to solve (the same as `python -m sim problems {lesson} --seed "
                               f"{seed}`).")
            st.button("Free page", key=f"{lesson}.guide.end_free", on_click=_to_free, args=(lesson,),
                      icon=":material/tune:", help="Every chart and knob of the lesson.")
            following = next_lesson(lesson)
            if following is not None and st.button(
                    f"Next lesson: {lessons.BY_ID[following].title}", key=f"{lesson}.guide.next_lesson",
                    on_click=_to_next_path, args=(following,), icon=":material/arrow_forward:", type="primary"):
                st.switch_page(lessons.BY_ID[following].page, query_params={GUIDE_PARAM: "1"})


def _question_key(lesson: str, step: Step) -> str:
    return f"{lesson}.guide.{step.key}"


def _is_answered(lesson: str, step: Step) -> bool:
    """Answered (or shown) at some value of the step's settings."""
    return bool(st.session_state.get(f"{_question_key(lesson, step)}.done"))


def values_id(values: dict[str, Any]) -> str:
    """The settings a question was asked for, as a key: an answer given for other values is not this one's."""
    return "&".join(f"{k}={values[k]!r}" for k in sorted(values))


def _setting_key(lesson: str, step: Step, key: str) -> str:
    return f"{lesson}.guide.{step.key}.{key}"


def _values(lesson: str, step: Step) -> dict[str, Any]:
    """The step's settings: its defaults, or what the student picked after the first answer."""
    out = {}
    for s in step.settings:
        key = _setting_key(lesson, step, s.key)
        if st.session_state.get(key) not in s.options:
            st.session_state[key] = s.default
        out[s.key] = st.session_state[key]
    return out


def _settings(lesson: str, step: Step) -> None:
    """The knobs the step exposes, once the step has been answered: another value is a new prediction (the
    question below is asked for it, and its charts wait for the answer)."""
    if not step.settings:
        return
    with st.container(horizontal=True, vertical_alignment="bottom"):
        for s in step.settings:
            st.segmented_control(f"Try another setting: {s.label}", list(s.options),
                                 key=_setting_key(lesson, step, s.key), format_func=s.display,
                                 help="Pick a value, then predict the answer for it.")
        st.button("Predict again", key=f"{_question_key(lesson, step)}.again", on_click=_reset_question,
                  args=(_question_key(lesson, step),), icon=":material/replay:", type="tertiary",
                  help="Hide the answer and the charts, and answer the question again.")


# ---- predict, check, reveal -------------------------------------------------------------------------------------
def _fresh(for_values: str = "") -> dict[str, Any]:
    return {"feedback": "", "solved": False, "revealed": False, "correct": False, "for": for_values}


def _reset_question(key: str) -> None:
    for_values = st.session_state.get(f"{key}.state", {}).get("for", "")
    st.session_state[f"{key}.state"] = _fresh(for_values)
    st.session_state.pop(f"{key}.answer", None)


def _check(key: str, problem: Problem) -> None:
    state = st.session_state[f"{key}.state"]
    given = st.session_state.get(f"{key}.answer")
    if given is None or str(given).strip() == "":
        state["feedback"] = "Give an answer first: " + (
            "pick one of the options." if problem.is_multiple_choice else f"type {problem.unit_phrase}.")
        return
    correct, feedback = problem.check(given)
    state["feedback"], state["solved"] = feedback, state["solved"] or correct
    state["correct"] = correct
    if state["solved"]:
        st.session_state[f"{key}.done"] = True


def _reveal(key: str) -> None:
    st.session_state[f"{key}.state"]["revealed"] = True
    st.session_state[f"{key}.done"] = True


def question(key: str, problem: Problem, for_values: str = "") -> bool:
    """The question, an answer box, Check and Show the answer; then what the check said. True once the answer is
    out (answered right, or shown): the caller then draws the charts, which would give it away before.
    ``for_values``: the settings the question is asked for; when they change, so does the question, and the
    answer, feedback and reveal of the old values go (a new prediction)."""
    state = st.session_state.setdefault(f"{key}.state", _fresh(for_values))
    if state.get("for", "") != for_values:
        state = st.session_state[f"{key}.state"] = _fresh(for_values)
        # (set, not dropped: a dropped key leaves the browser's old entry in the box)
        st.session_state[f"{key}.answer"] = None if problem.is_multiple_choice else ""
    with st.container(border=True):
        st.markdown(f"**Predict:** {problem.question}")
        if problem.is_multiple_choice:
            st.radio("Your answer", problem.choices, index=None, key=f"{key}.answer", label_visibility="collapsed")
        else:
            st.text_input(f"Your answer ({problem.unit})", key=f"{key}.answer", width=260,
                          placeholder=f"a number of {problem.unit}")
        with st.container(horizontal=True):
            st.button("Check", key=f"{key}.check", on_click=_check, args=(key, problem), type="primary",
                      icon=":material/check:")
            if not (state["solved"] or state["revealed"]):  # (once the answer is out, Check stays: try it)
                st.button("Show the answer", key=f"{key}.reveal", on_click=_reveal, args=(key,), type="tertiary")
        if state.get("correct"):
            st.success(state["feedback"], icon=":material/check_circle:")
        elif state["feedback"]:
            st.warning(state["feedback"], icon=":material/lightbulb:")
        if state["revealed"] and not state["solved"]:
            st.info(f"**Answer: {problem.answer_text}.** {problem.reasoning}", icon=":material/visibility:")
    return bool(state["solved"] or state["revealed"])


# ---- the charts a step shows (each: runs, style, time unit) -------------------------------------------------------
def _traces(runs: Sequence[Run]) -> dict[str, Any]:
    return {run.label: run.trace for run in runs}


def _labels(runs: Sequence[Run]) -> list[str]:
    return [run.label for run in runs]


def _gantt(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    x_max = charts.time_extent([run.trace for run in runs], unit)
    page.run_grid(runs, lambda run: charts.gantt(run.trace, style, x_unit=unit, title=run.label, x_max=x_max),
                  "gantt", style, unit, 2)


def _kv(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.run_grid(runs, lambda run: charts.kv_occupancy(run.trace, style, x_unit=unit,
                                                        title=f"{run.label}: KV cache in use"), "kv", style, unit, 2)


def _kv_requests(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.run_grid(runs, lambda run: preemption_charts.kv_over_time(
        run.trace, style, by="request", x_unit=unit, parts=preemption_lesson.kv_parts(run.trace),
        title=f"{run.label}: KV cache per request"), "kv-per-request", style, unit, 2)


def _finish_ecdf(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(charts.finish_time_ecdf(_traces(runs), style, unit="steps"), "finish-time-distribution", style)


def _client_latency(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(charts.latency_by_client(_traces(runs), style, unit="ms"), "finish-per-client", style)


def _client_queue(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(charts.latency_by_client(_traces(runs), style, unit="ms", measure="queue"), "queue-per-client",
                    style)


def _throughput(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(fairness_charts.total_throughput(_traces(runs), style, x_unit=unit), "total-throughput", style,
                    cursor_runs=_labels(runs), x_unit=unit)


def _counters(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(fairness_charts.counters_by_policy(_traces(runs), style, x_unit=unit), "counters", style,
                    cursor_runs=_labels(runs), x_unit=unit, cursor_axes=page.panel_axes(len(runs)))


def _client_rates(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(fairness_charts.client_rates_by_policy(_traces(runs), style, x_unit=unit), "client-rates", style,
                    cursor_runs=_labels(runs), x_unit=unit, cursor_axes=page.panel_axes(len(runs)))


def _kv_for_nobody(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(cancel_charts.kv_for_nobody(_traces(runs), style, x_unit=unit), "kv-for-nobody", style,
                    cursor_runs=_labels(runs), x_unit=unit, cursor_axes=page.panel_axes(len(runs)))


def _cost(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    run = runs[0]
    victims = preemptions(run.trace)
    if victims:
        config = run.scenario.config
        cost = preemption_cost(victims[0].num_tokens, config)
        page.show_chart(preemption_charts.cost_bars(cost, style, bandwidth_gb_s=config.cost.swap_bandwidth_gb_s),
                        "recompute-vs-swap", style)


def _hits(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    back = preemption_lesson.readmissions(preemptions(runs[0].trace))
    if back:
        page.show_chart(preemption_charts.reprefill_hits(back, style), "reprefill-hits", style)


def _streams(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.run_grid(runs, lambda run: budget_charts.token_times(run.trace, style, title=run.label), "streams", style,
                  "ms", 2)


def _tbt(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(budget_charts.tbt_distribution(_traces(runs), style), "time-between-tokens", style)


def _ttft_arrival(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    colors = charts.label_colors(_traces(runs))
    x_max = charts.time_extent([run.trace for run in runs], "ms") / 1000.0
    page.grid(_labels(runs), lambda label: page.show_chart(overload_charts.ttft_by_arrival(
        next(r.trace for r in runs if r.label == label), style, title=label, color=colors[label], x_max_s=x_max),
        f"ttft-{label}", style), columns=2)


def _queue(runs: Sequence[Run], style: ChartStyle, unit: str) -> None:
    page.show_chart(charts.queue_and_batch(_traces(runs), style, x_unit=unit), "queue", style,
                    cursor_runs=_labels(runs), x_unit=unit)


@dataclass(frozen=True)
class GuideChart:
    """A chart a step can show: how it is drawn, whether the step player's cursor moves on it, what it is called
    in a sentence."""

    draw: Callable[[Sequence[Run], ChartStyle, str], None]
    cursor: bool
    what: str


CHARTS: dict[str, GuideChart] = {
    "gantt": GuideChart(_gantt, True, "Gantt chart"), "kv": GuideChart(_kv, True, "KV chart"),
    "kv_requests": GuideChart(_kv_requests, True, "KV chart"),
    "finish_ecdf": GuideChart(_finish_ecdf, False, "finish-time curves"),
    "client_latency": GuideChart(_client_latency, False, "per-client finish times"),
    "client_queue": GuideChart(_client_queue, False, "per-client queueing delays"),
    "throughput": GuideChart(_throughput, True, "throughput chart"),
    "counters": GuideChart(_counters, True, "counters chart"),
    "client_rates": GuideChart(_client_rates, True, "per-client tokens/s chart"),
    "kv_for_nobody": GuideChart(_kv_for_nobody, True, "KV chart"),
    "cost": GuideChart(_cost, False, "cost bars"), "hits": GuideChart(_hits, False, "cache-hit bars"),
    "streams": GuideChart(_streams, True, "streams chart"),
    "tbt": GuideChart(_tbt, False, "time-between-tokens chart"),
    "ttft_arrival": GuideChart(_ttft_arrival, False, "first-token chart"),
    "queue": GuideChart(_queue, True, "queue chart"),
}


# ---- a seeded problem from a link --------------------------------------------------------------------------------
def _leave_problem() -> None:
    st.query_params.pop(PROBLEM_PARAM, None)


def show_problem(lesson: str, raw: str, style: ChartStyle) -> None:
    """``?problem=SEED``: the lesson's seeded problem (``lessons/<lesson>/problems.py``): its scenario, the question,
    predict -> check -> the answer and reasoning, then the scenario's charts."""
    try:
        seed: int | None = whole_number(raw, 0, MAX_SEED)
    except ValueError:
        seed = None
    with st.container(horizontal=True, vertical_alignment="center"):
        st.markdown(f"### {lessons.BY_ID[lesson].title}: problem" + ("" if seed is None else f" {seed}"))
        st.button("Back to the lesson", key=f"{lesson}.problem.leave", on_click=_leave_problem,
                  icon=":material/arrow_back:")
    if seed is None:
        st.warning(f"The link's problem {as_code(raw, 30)} does not exist: `problem=` takes a seed, a whole number "
                   f"from 0 to {MAX_SEED:,} (e.g. `?problem=7`).", icon=":material/warning:")
        return
    problem = problem_for(lesson, seed)
    with st.expander("The scenario (engine and requests)", expanded=len(problem.scenario.requests) <= 4):
        st.markdown(f"**Engine.** {engine_line(problem.scenario.config)}")
        st.markdown(requests_table(problem.scenario.requests))
    if not question(f"{lesson}.problem.{seed}", problem):
        return
    sc = problem.scenario
    run = page.guarded(lambda: Run(sc.name, sc, tr := runner.run(sc), runner.summary(sc, tr)))
    _gantt([run], style, "steps")
    if lesson in ("preemption", "cancellation"):
        _kv([run], style, "steps")
