"""Learn mode in a real browser (ui/guide.py): a first visit to each lesson shows its guided path with the question
and no chart; a wrong answer gets its reason, a right one the explanation and then the step's chart; the free page
is one click away; a problem link opens that problem. Screenshots at 1280x720, normal and presentation mode."""

from __future__ import annotations

import pytest

from lessons import LESSONS
from lessons.problems import problem_for
from tests.browser.helpers import (
    SCREENSHOT_DIR,
    assert_no_exception,
    open_app,
    screenshot,
    wait_for_app,
    wait_for_chart_title,
)
from ui.guide import paths

PATHS = paths()  # lesson id -> its guided path, every lesson of the course

LESSON_PAGES = {lesson.id: lesson.url_path for lesson in LESSONS}


def _main(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _num_charts(page) -> int:
    return page.locator('[data-testid="stPlotlyChart"]').count()


def _below_the_fold(page, text: str) -> bool:
    """Does ``text`` end below the first screen (the viewport's height)?"""
    box = page.get_by_text(text, exact=False).first.bounding_box()
    return box is None or box["y"] + box["height"] > page.viewport_size["height"]


# The element the browser finds at the top edge of the step buttons, and at the top of the "Free page" button: the
# buttons themselves when nothing (Streamlit's header, opaque under presentation mode) covers them.
_TOP_EDGE_HITS_JS = """() => ['[data-testid="stButtonGroup"]', '[data-testid="stButton"]'].map(sel => {
  const r = document.querySelector(sel).getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + 3);
  return hit !== null && hit.closest(sel) !== null;
})"""


def _type_and_check(page, answer: str) -> None:
    """Type a number answer (the box's unit: steps) and press Check."""
    box = page.get_by_label("Your answer (steps)")
    box.fill(answer)
    box.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name="Check").click()
    wait_for_app(page)


def _step_buttons_uncovered(page) -> bool:
    return all(page.evaluate(_TOP_EDGE_HITS_JS))


@pytest.mark.parametrize("lesson", list(LESSON_PAGES))
def test_a_first_visit_shows_the_guided_path_with_its_question_on_the_first_screen(app_server, page, lesson):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, f"{app_server}/{LESSON_PAGES[lesson]}", timeout_ms=120_000, first_visit=True)
    assert_no_exception(page)
    text = _main(page)
    first = PATHS[lesson][0]
    assert "guided path" in text and f"Step 1 of {len(PATHS[lesson])}: {first.title}" in text
    assert "Predict:" in text and _num_charts(page) == 0  # the question, and no chart giving the answer away
    assert not _below_the_fold(page, "Show the answer")  # nothing of the question needs scrolling
    assert "guide=1" in page.url
    screenshot(page, f"guide-{lesson}-step1")


def test_wrong_then_right_shows_the_reason_then_the_explanation_and_the_chart(app_server, page):
    open_app(page, f"{app_server}/Queueing", first_visit=True)
    _type_and_check(page, "500")
    alert = page.locator('[data-testid="stAlert"]').first.inner_text()
    assert "Not 500: that is shortest-job-first's figure" in alert
    assert _num_charts(page) == 0
    _type_and_check(page, "1100")
    assert "Right: 1,100 steps. FCFS runs them in arrival order" in _main(page)
    wait_for_chart_title(page, "FCFS")  # the step's chart, after the explanation
    explanation = page.get_by_text("Right: 1,100 steps").first.bounding_box()
    chart = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
    assert explanation["y"] < chart["y"]
    assert_no_exception(page)
    screenshot(page, "guide-queueing-answered")


def test_the_free_page_is_one_click_away_and_back(app_server, page):
    open_app(page, f"{app_server}/Fairness", timeout_ms=120_000, first_visit=True)
    page.get_by_role("button", name="Free page").click()
    wait_for_app(page, timeout_ms=120_000)
    assert_no_exception(page)
    assert "Fairness: per customer" in page.locator("h1").first.inner_text()
    assert "mode=free" in page.url and _num_charts(page) > 3
    page.get_by_role("button", name="Guided path").click()
    wait_for_app(page, timeout_ms=120_000)
    assert "Fairness: guided path" in _main(page) and "guide=1" in page.url


_GUIDED_BUTTON_TOP_HIT_JS = """() => {
  const b = [...document.querySelectorAll('[data-testid="stButton"]')].find(e => e.innerText.includes("Guided path"));
  const r = b.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + 3);
  return hit !== null && b.contains(hit);
}"""


def test_under_presentation_mode_the_free_pages_guided_path_button_is_clear_of_the_header(app_server, page):
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, f"{app_server}/Queueing?mode=free&present=1", timeout_ms=120_000)
    assert_no_exception(page)
    assert page.evaluate(_GUIDED_BUTTON_TOP_HIT_JS)  # (its top was under the header's opaque bar, which took clicks)


def test_a_problem_link_opens_that_problem(app_server, page):
    problem = problem_for("preemption", 4)  # (seed 4: the victim kind, a multiple choice)
    open_app(page, f"{app_server}/Preemption?problem=4", first_visit=True)
    assert_no_exception(page)
    text = _main(page)
    assert "Preemption: problem 4" in text and problem.question.startswith("A pool of 16 KV blocks")
    assert "Which request is preempted first?" in text and _num_charts(page) == 0
    page.locator('[data-testid="stRadio"]').get_by_text(problem.answer_text, exact=True).click()  # the right one
    wait_for_app(page)
    page.get_by_role("button", name="Check").click()
    wait_for_app(page)
    assert f"Right: {problem.answer_text}." in _main(page)
    assert _num_charts(page) >= 1
    assert_no_exception(page)


@pytest.mark.parametrize("present", [False, True])
def test_screenshots_of_every_guided_step_at_1280x720(app_server, page, present):
    """Every step's first screen, to look at: the question before any answer, nothing below the fold."""
    page.set_viewport_size({"width": 1280, "height": 720})
    for lesson, steps in PATHS.items():
        for n in range(1, len(steps) + 1):
            query = f"guide={n}" + ("&present=true" if present else "")
            open_app(page, f"{app_server}/{LESSON_PAGES[lesson]}?{query}", timeout_ms=120_000)
            assert_no_exception(page)
            assert f"Step {n} of {len(steps)}" in _main(page) and _num_charts(page) == 0
            assert not _below_the_fold(page, "Show the answer"), f"{lesson} step {n}: the question needs scrolling"
            assert _step_buttons_uncovered(page), f"{lesson} step {n}: the header covers the step buttons"
            shot = SCREENSHOT_DIR / f"guide-{lesson}-{n}{'-present' if present else ''}.png"
            page.screenshot(path=str(shot))  # (the first screen only: what a student sees before scrolling)


def test_answer_move_the_knob_and_the_feedback_and_charts_go_for_a_new_question(app_server, page):
    """Queueing step 1 answered right at one slot; three slots: the green box and the Gantt go, the question is
    asked for three slots, and the new answer (400, everyone starts at once) brings the explanation for it."""
    page.set_viewport_size({"width": 1280, "height": 720})
    open_app(page, f"{app_server}/Queueing", first_visit=True)
    _type_and_check(page, "1100")
    assert "Right: 1,100 steps." in _main(page)
    wait_for_chart_title(page, "FCFS")
    page.locator('[data-testid="stButtonGroup"]').filter(has_text="Try another setting").get_by_text(
        "3", exact=True).click()
    wait_for_app(page)
    assert_no_exception(page)
    text = _main(page)
    assert "Right: 1,100" not in text and "short1 steps 1,000-1,099" not in text  # the old value's feedback
    assert _num_charts(page) == 0  # the charts wait for the new prediction
    assert "Under FCFS with 3 batch slots, what is the average finish time" in text
    assert "Three batch slots and three requests" in text  # the step's own text follows the knob
    assert page.get_by_label("Your answer (steps)").input_value() == ""  # (the old answer is not kept in the box)
    screenshot(page, "guide-queueing-knob-moved")
    _type_and_check(page, "400")
    wait_for_chart_title(page, "FCFS")
    text = _main(page)
    assert "Right: 400 steps." in text and "the bars in the Gantt chart below all start at step 0" in text
    assert "start only where" not in text
    assert_no_exception(page)
    screenshot(page, "guide-queueing-knob-answered")
