"""The course's registry (lessons/__init__.py) and docs/ARCHITECTURE.md's "Add a lesson": every part a lesson needs
is there for every registered lesson, nothing lesson-shaped lives outside the registry, and a lesson added by its
record and its package alone (a toy, in a temporary folder) joins the navigation, the home page, the guided paths
and the problems."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from streamlit.testing.v1 import AppTest

import lessons
from lessons import IDS, LESSONS, MODULES, Lesson, lesson_of
from lessons.problems import problem_for
from sim import presets
from sim.__main__ import main
from tests.conftest import REPO_ROOT

IDS_OF = [lesson.id for lesson in LESSONS]


# ---- every registered lesson has every part ----------------------------------------------------------------------
@pytest.mark.parametrize("lesson", LESSONS, ids=IDS_OF)
def test_each_lesson_has_its_package_modules_and_names(lesson: Lesson):
    for name in MODULES:
        assert (REPO_ROOT / "lessons" / lesson.id / f"{name}.py").exists(), f"lessons/{lesson.id}/{name}.py"
    assert lesson.id == lesson.module("lesson").LESSON
    assert lesson.module("lesson").QUESTION.strip()
    assert 4 <= len(lesson.steps) <= 6  # a guided path of four to six steps
    assert lesson.problem_kinds and all(callable(k) for k in lesson.problem_kinds)
    assert lesson.presets(), f"no preset in sim/presets.py has lesson={lesson.id!r}"


@pytest.mark.parametrize("lesson", LESSONS, ids=IDS_OF)
def test_each_lessons_page_opens_that_lesson(lesson: Lesson):
    source = (REPO_ROOT / lesson.page).read_text()
    assert f"from lessons.{lesson.id} import lesson" in source
    assert "open_lesson(lesson.LESSON" in source
    assert lesson.url_path == re.sub(r"^\d+_", "", lesson.page.split("/")[-1][:-3])


def test_the_registry_and_the_lesson_packages_agree():
    packages = {p.parent.name for p in (REPO_ROOT / "lessons").glob("*/__init__.py")}
    unmatched = packages ^ set(IDS)
    assert not unmatched, f"lesson packages without a registry line, or registry lines without a package: {unmatched}"
    assert len(set(IDS)) == len(IDS) and len({lesson.page for lesson in LESSONS}) == len(LESSONS)


def test_every_lesson_page_is_registered():
    lesson_pages = {p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "pages").glob("*.py")
                    if "from lessons." in p.read_text()}
    assert lesson_pages == {lesson.page for lesson in LESSONS}


def test_every_presets_lesson_is_registered():
    assert {p.lesson for p in presets.all_presets().values()} <= set(IDS)


def test_a_bad_lesson_id_is_named_with_the_allowed_ones():
    with pytest.raises(ValueError, match=r"lesson: 'nope' is not one of: queueing, fairness"):
        lesson_of("nope")
    with pytest.raises(ValueError, match="module: 'page' is not one of: lesson, guide, problems"):
        LESSONS[0].module("page")


def test_no_lesson_module_calls_streamlit():
    # A lesson's logic borrows ui's vocabulary (Knob, wording) but draws nothing: the pages and ui/ do.
    calls = [p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "lessons").rglob("*.py")
             if re.search(r"^\s*(import streamlit|from streamlit)|\bst\.\w", p.read_text(), re.M)]
    assert not calls, f"Streamlit in lessons/: {calls}"


def test_the_problems_never_import_the_streamlit_side():
    code = ("import sys, lessons.problems as p; p.problem_for('budget', 1); "
            "bad = [m for m in sys.modules if m == 'ui' or m.startswith(('ui.', 'streamlit', 'plotly'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


# ---- a toy lesson, added by its record and its package alone ------------------------------------------------------
_TOY_LESSON = '''
LESSON = "toy"
QUESTION = "How long does one answer take alone?"
'''
_TOY_GUIDE = '''
from lessons import BY_ID

STEPS = BY_ID["queueing"].steps[:4]  # (a toy borrows its path; a real lesson writes its own)
'''
_TOY_PROBLEMS = '''
from sim.config import EngineConfig
from sim.request import RequestSpec

from ..problems import finish_steps, number_problem, problem_scenario, run_trace


def _alone(rng, seed):
    answer_tokens = rng.randrange(10, 100)
    config = EngineConfig(num_blocks=99, max_num_seqs=1)
    requests = [RequestSpec("a", 0, 16, answer_tokens)]
    steps = finish_steps(run_trace(config, requests))[0]
    scenario = problem_scenario("toy", seed, "alone", config, requests, "One request, alone.")
    return number_problem("toy", seed, "alone", scenario,
                          f"A {answer_tokens}-token answer alone: how many steps from its arrival to its end?", steps,
                          "steps", f"One step for the prompt and its first token, then one a token: {steps}.",
                          "Count the prompt's step.")


KINDS = (_alone,)
'''


@pytest.fixture
def toy_lesson(tmp_path, monkeypatch) -> Lesson:
    """A toy lesson in a temporary folder, registered after the five for this test only. Its page is Queueing's
    (a page file must exist for the navigation's link; the page is not what is tested here)."""
    package = tmp_path / "toy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in (("lesson", _TOY_LESSON), ("guide", _TOY_GUIDE), ("problems", _TOY_PROBLEMS)):
        (package / f"{name}.py").write_text(textwrap.dedent(text))
    toy = Lesson("toy", "Toy lesson", "pages/1_Queueing.py", ":material/toys:", "How long is one answer alone?",
                 "A toy lesson added by its record alone.")
    monkeypatch.setattr(lessons, "__path__", [*lessons.__path__, str(tmp_path)])
    monkeypatch.setattr(lessons, "LESSONS", (*LESSONS, toy))
    monkeypatch.setattr(lessons, "BY_ID", {**lessons.BY_ID, "toy": toy})
    monkeypatch.setattr(lessons, "IDS", (*IDS, "toy"))
    yield toy
    for name in [m for m in sys.modules if m.startswith("lessons.toy")]:
        del sys.modules[name]


def test_a_toy_lesson_joins_the_course_by_its_record_alone(toy_lesson, capsys):
    from ui import guide, page

    assert page.navigation()[len(LESSONS) + 1] == (toy_lesson.page, "Toy lesson", ":material/toys:")
    assert guide.paths()["toy"] == LESSONS[0].steps[:4]
    assert guide.next_lesson(LESSONS[-1].id) == "toy" and guide.next_lesson("toy") is None
    # its problems, in the app's ?problem= and on the command line
    p = problem_for("toy", 3)
    assert p.lesson == "toy" and p.check(p.answer)[0] and not p.check(p.answer + 5)[0]
    assert main(["problems", "toy", "--seed", "3", "--answers"]) == 0
    out = capsys.readouterr().out
    assert "# Scheduler Lab: toy problems, seed 3" in out and f"**Answer.** {p.answer_text}" in out
    # the home page's card
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    assert ":material/toys: Toy lesson" in [h.value for h in at.subheader]


def test_without_the_toy_the_course_is_the_five_lessons():
    # (the fixture above undoes itself: nothing of the toy is left for the other tests)
    from ui import guide

    assert "toy" not in guide.paths() and "toy" not in IDS
    with pytest.raises(ValueError, match="'toy' is not one of"):
        problem_for("toy", 3)
