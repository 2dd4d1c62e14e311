"""The home page through AppTest: it runs, links every lesson, and draws one engine step from a real run."""

import json
import re

from lessons.guided import simulate_step
from lessons.problems import fmt
from tests.app.conftest import ROOT, assert_clean, chart_titles, open_page
from ui.guide import paths
from ui.page import navigation

PATHS = paths()  # lesson id -> its guided path, every lesson of the course


def test_home_page_runs_and_links_every_page():
    at = open_page()
    assert_clean(at)
    assert at.title[0].value == "Scheduler Lab"
    for path, _, _ in navigation():
        assert (ROOT / path).exists(), path  # every page the navigation names exists
    cards = [h.value for h in at.subheader if h.value.startswith(":material/")]
    lessons = [(name, icon) for path, name, icon in navigation() if path.startswith("pages/") and name != "Glossary"]
    assert cards == [f"{icon} {name}" for name, icon in lessons]  # one card per lesson, in order
    # Two cards a row (four in a row break the lesson names on a 1,024-px projector), one in each column.
    rows = [block for block in at.main.children.values()
            if block.type == "flex_container" and any(c.type == "column" for c in block.children.values())]
    shown = [[h.value for col in row.children.values() for h in col.subheader[:1]] for row in rows]
    assert shown == [cards[i:i + 2] for i in range(0, len(cards), 2)]  # (a fifth card alone in its row)


def test_engine_step_slider_moves_the_picture():
    at = open_page()
    slider = at.slider(key="home.step")
    assert slider.value == 5  # E arrives and waits (not the first preemption: Preemption's step 1 asks who)
    assert chart_titles(at) == ["Step 5: 4 requests ran"]
    slider.set_value(113).run()
    assert chart_titles(at) == ["Step 113: 3 requests ran, D preempted"]
    assert "KV cache: 27 of 32<br>blocks in use, 5 free<br>after the step" in _annotations(at)
    slider.set_value(200).run()
    assert_clean(at)
    assert chart_titles(at) == ["Step 200: 3 requests ran, C and D re-admitted"]
    assert "KV cache: 21 of 32<br>blocks in use, 11 free<br>after the step" in _annotations(at)


def _annotations(at) -> str:
    """The engine-step chart's text notes (its column headers), joined."""
    (chart,) = at.get("plotly_chart")
    return " | ".join(note["text"] for note in json.loads(chart.proto.spec)["layout"]["annotations"])


def _guided_answers() -> list[tuple[str, str]]:
    """(step, a pattern for its answer at the step's default setting) for every guided step: a number answer as
    printed ("1,100") or rounded ("134-ms"), a choice answer as its text."""
    out = []
    for lesson, steps in PATHS.items():
        for step in steps:
            problem = step.ask(simulate_step(step), step.defaults())
            if problem.is_multiple_choice:
                out.append((f"{lesson}.{step.key}", rf"\b{re.escape(problem.answer)}\b"))
                continue
            numbers = "|".join(map(re.escape, {fmt(problem.answer), f"{round(problem.answer):,}"}))
            # (a figure of three digits or more is the answer wherever it stands; a small one, with its unit)
            unit = "" if abs(problem.answer) >= 100 else f"[ -]{problem.unit.rstrip('s')}"
            out.append((f"{lesson}.{step.key}", rf"(?<![\d,.])({numbers})(?![\d,])(?!\.\d){unit}"))
    return out


def test_the_home_page_gives_no_guided_answer_away():
    at = open_page()
    text = " ".join([*(m.value for m in at.markdown), *(m.value for m in at.caption), *chart_titles(at),
                     at.slider(key="home.step").proto.help])
    answers = _guided_answers()
    assert len(answers) == sum(len(steps) for steps in PATHS.values())
    given = [(step, re.search(pattern, text).group(0)) for step, pattern in answers if re.search(pattern, text)]
    assert not given, f"the home page states guided answers: {given}"
    # (the check would catch what the cards said before: the answers of Queueing 1-2 and Token budget 1)
    old = "cuts the average from 1,100 to 500 steps; an 8,000-token prompt is one 134-ms step"
    caught = {step for step, pattern in answers if re.search(pattern, old)}
    assert caught == {"queueing.fcfs", "queueing.sjf", "budget.stall"}
