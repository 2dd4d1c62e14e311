"""The guided path and the problem links through AppTest (ui/guide.py): the first visit's view, the switch to the
free page and back, ``?guide=N``, predict -> check -> reveal, ``?problem=SEED``."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from lessons import LESSONS
from lessons.guided import simulate_step
from lessons.problems import MAX_SEED, problem_for
from tests.app.conftest import ROOT, assert_clean, open_page
from ui.guide import paths

PATHS = paths()  # lesson id -> its guided path, every lesson of the course

PAGE = "pages/1_Queueing.py"


def first_visit(page: str = PAGE, query: dict[str, str] | None = None) -> AppTest:
    """The page as a first visit opens it: no ``mode=free`` added (unlike ``open_page``)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(page)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    return at.run()


def _text(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown)


def _chart_titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]


def test_a_first_visit_opens_the_guided_path_with_the_question_and_no_chart():
    at = first_visit()
    assert_clean(at)
    assert "Queueing: guided path" in _text(at)
    assert "Step 1 of 5: First come, first served." in _text(at)
    assert "what is the average finish time" in _text(at)
    assert not at.title  # (the free page's header is not drawn)
    assert not _chart_titles(at)  # nothing gives the answer away before the student predicts
    assert at.query_params["guide"] in ("1", ["1"])


def test_a_link_with_settings_opens_the_free_page():
    at = first_visit(query={"preset": "busy_server"})
    assert_clean(at)
    assert at.title[0].value == "Queueing: who waits, and in what order"
    assert at.button(key="queueing.guide.to_guided")


def test_one_click_to_the_free_page_and_back():
    at = first_visit()
    at.button(key="queueing.guide.to_free").click().run()
    assert_clean(at)
    assert at.title[0].value == "Queueing: who waits, and in what order"
    assert at.query_params["mode"] in ("free", ["free"]) and "guide" not in at.query_params
    assert len(_chart_titles(at)) > 3  # today's dashboard
    at.slider(key="queueing.engine.max_num_seqs").set_value(2).run()  # a free-page setting in the URL ...
    at.button(key="queueing.guide.to_guided").click().run()
    assert_clean(at)
    assert "Queueing: guided path" in _text(at) and not at.title
    assert at.query_params["guide"] in ("1", ["1"])
    assert "max_num_seqs" not in at.query_params and "mode" not in at.query_params  # ... goes: steps set their own


def test_guide_n_in_the_link_opens_that_step_and_next_moves_on():
    at = first_visit(query={"guide": "2"})
    assert_clean(at)
    assert "Step 2 of 5: Shortest job first." in _text(at)
    at.button(key="queueing.guide.sjf.reveal").click().run()
    assert "Answer: 500 steps." in at.info[0].value
    assert "queueing.guide.sjf.reveal" not in [b.key for b in at.button]  # (shown: its button goes)
    at.button(key="queueing.guide.next").click().run()
    assert "Step 3 of 5: Nobody knows an answer's length." in _text(at)
    assert at.query_params["guide"] in ("3", ["3"])


def test_a_bad_guide_value_is_named_and_step_one_shown():
    at = first_visit(query={"guide": "9"})
    assert "`guide=9` was ignored: it must be a whole number from 1 to 5" in at.warning[0].value
    assert "Step 1 of 5" in _text(at)


def test_wrong_then_right_gives_the_reason_then_the_explanation_and_the_charts():
    at = first_visit()
    box = at.text_input(key="queueing.guide.fcfs.answer")
    box.input("400").run()
    at.button(key="queueing.guide.fcfs.check").click().run()
    assert_clean(at)
    assert at.warning[0].value.startswith("Not 400: that is the average answer length")
    assert not _chart_titles(at)
    at.text_input(key="queueing.guide.fcfs.answer").input("1,100").run()
    at.button(key="queueing.guide.fcfs.check").click().run()
    assert_clean(at)
    assert at.success[0].value.startswith("Right: 1,100 steps. FCFS runs them in arrival order")
    assert _chart_titles(at) == ["FCFS"]  # the step's one chart: FCFS's Gantt
    # The step's knob, once the answer is out: two slots change the answer the page states.
    at.segmented_control(key="queueing.guide.fcfs.max_num_seqs").set_value(2).run()
    at.button(key="queueing.guide.fcfs.reveal").click().run()
    assert "Answer: 433.3 steps." in at.info[0].value


def test_a_problem_link_opens_the_seeded_problem():
    problem = problem_for("queueing", 7)
    at = first_visit(query={"problem": "7"})
    assert_clean(at)
    assert "Queueing: problem 7" in _text(at)
    assert problem.question in _text(at)
    assert not _chart_titles(at)
    at.button(key="queueing.problem.7.reveal").click().run()
    assert f"Answer: {problem.answer_text}." in at.info[0].value
    assert _chart_titles(at)  # the scenario's Gantt chart, after the answer


def test_a_bad_problem_seed_names_the_allowed_values():
    at = first_visit(query={"problem": "abc"})
    assert_clean(at)
    assert f"a whole number from 0 to {MAX_SEED:,}" in at.warning[0].value


def test_existing_page_tests_still_open_the_free_page():
    at = open_page(PAGE)
    assert at.title[0].value == "Queueing: who waits, and in what order"


_LESSON_PAGES = {lesson.id: lesson.page for lesson in LESSONS}
_STEPS = [(lesson, n, step) for lesson, steps in PATHS.items() for n, step in enumerate(steps, 1)]


@pytest.mark.parametrize(("lesson", "n", "step"), _STEPS, ids=[f"{lesson}.{s.key}" for lesson, _, s in _STEPS])
def test_a_knob_change_is_a_new_prediction(lesson, n, step):
    """Every step: answered at its default, then another value of its knob: the old feedback, reveal and charts go,
    the question is asked for the new value; answered again, the page states the new value's answer."""
    at = first_visit(_LESSON_PAGES[lesson], {"guide": str(n)})
    key = f"{lesson}.guide.{step.key}"
    assert not [b for b in at.get("button_group") if b.key == f"{key}.{step.settings[0].key}"]  # (not before)
    at.button(key=f"{key}.reveal").click().run()
    assert_clean(at)
    old = step.ask(simulate_step(step), step.defaults())
    assert f"Answer: {old.answer_text}." in at.info[0].value and _chart_titles(at)
    setting = step.settings[0]
    other = next(v for v in setting.options if v != setting.default)
    at.segmented_control(key=f"{key}.{setting.key}").set_value(other).run()
    assert_clean(at)
    values = {**step.defaults(), setting.key: other}
    new = step.ask(simulate_step(step, values), values)
    assert not at.info and not at.success and not at.warning  # nothing said for the old value stays
    assert not _chart_titles(at)  # the charts wait for the new prediction
    assert new.question in _text(at)
    assert at.segmented_control(key=f"{key}.{setting.key}").value == other  # the knob stays, to move on
    at.button(key=f"{key}.reveal").click().run()
    assert f"Answer: {new.answer_text}." in at.info[0].value and _chart_titles(at)


def test_the_last_step_leads_to_problems_the_free_page_and_the_next_lesson():
    steps = PATHS["queueing"]
    at = first_visit(query={"guide": str(len(steps))})
    at.button(key=f"queueing.guide.{steps[-1].key}.reveal").click().run()
    assert "That was the last step of Queueing's path." in _text(at)
    assert [b.label for b in at.button if b.key and b.key.startswith("queueing.guide.problem.")] == [
        "Problem 1", "Problem 2", "Problem 3"]
    assert at.button(key="queueing.guide.end_free") and at.button(key="queueing.guide.next_lesson").label == (
        "Next lesson: Fairness")
    at.button(key="queueing.guide.problem.2").click().run()
    assert_clean(at)
    assert "Queueing: problem 2" in _text(at) and problem_for("queueing", 2).question in _text(at)


def test_next_lesson_opens_the_next_lessons_path_at_step_one_even_after_its_free_page():
    steps = PATHS["queueing"]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(PAGE)
    at.query_params["guide"] = str(len(steps))
    at.session_state["fairness.guide.mode"] = "free"  # (the session was last on Fairness's free page ...)
    at.session_state["fairness.guide.step"] = 3
    at.run()
    at.button(key=f"queueing.guide.{steps[-1].key}.reveal").click().run()
    at.button(key="queueing.guide.next_lesson").click().run()
    assert_clean(at)
    assert "Fairness: guided path" in _text(at)  # (... but the way on is its guided path, from the start)
    assert f"Step 1 of {len(PATHS['fairness'])}" in _text(at)
