"""What every lesson page promises, checked on each of them alike: its preset's runs side by side (a headline number
each, the step player over the same runs, a cursor on each run's Gantt chart), the "what to notice" box, a bad
link value warned about where the page starts, and the way back to the preset after a change."""

from __future__ import annotations

import pytest

from lessons import LESSONS
from sim import presets
from tests.app.conftest import assert_clean, chart_cursors, open_page, player_data
from ui import page

# The knob every page has, the KV pool, and a value it takes: `num_blocks` = 500 unless the lesson sizes its pool
# otherwise (a lesson added to the course is checked here with the default, or says its own in this table).
POOL_KNOB = {"preemption": ("pool_gib", "0.125"), "budget": ("num_blocks", "3000")}
# page -> (lesson, its pool knob, a value it takes): every lesson in the course (lessons.LESSONS)
LESSON_PAGES = {lesson.page: (lesson.id, *POOL_KNOB.get(lesson.id, ("num_blocks", "500"))) for lesson in LESSONS}


@pytest.mark.parametrize("path", list(LESSON_PAGES))
def test_each_lesson_compares_its_presets_runs_with_one_player(path):
    lesson, _, _ = LESSON_PAGES[path]
    preset = presets.presets_for(lesson)[0]
    at = open_page(path)
    assert_clean(at)
    data = player_data(at)
    labels = [run["label"] for run in data["runs"]]  # (a lesson may name a run by its settings: "B: chunked, 512")
    assert len(labels) == len(preset.variants) >= 2
    headlines = [m.label for m in at.metric]
    # one headline number per run, named after it (a story's cards may come first)
    assert all(any(h.startswith(f"{label}:") for h in headlines) for label in labels), headlines
    assert all(run["num_steps"] > 0 and run["first"] <= data["default_step"] < max(run["end"], 1)
               for run in data["runs"])
    cursors = chart_cursors(at)
    for label in labels:  # each run's charts carry the player's cursor on that run's steps
        assert any(c["runs"] == [label] for c in cursors.values()), (label, list(cursors))
    assert "What to notice" in " ".join(i.value for i in at.info)


@pytest.mark.parametrize("path", list(LESSON_PAGES))
def test_each_lesson_shows_each_runs_kv_cache_under_the_players_cursor(path):
    at = open_page(path)
    labels = [run["label"] for run in player_data(at)["runs"]]
    kv = {title: c for title, c in chart_cursors(at).items() if "KV" in title}
    for label in labels:  # (Queueing and Fairness too: the long request's blocks, the busy client's share)
        assert any(label in c["runs"] for c in kv.values()), (label, list(kv))
    for title, c in kv.items():  # a figure with a panel per run puts each run's cursor on its own panel
        if len(c["runs"]) > 1:
            assert c.get("axes") == page.panel_axes(len(c["runs"])), title


def test_the_fairness_counters_carry_each_policys_cursor_on_its_own_panel():
    cursors = chart_cursors(open_page("pages/2_Fairness.py"))
    for title in ("Virtual token counter per client", "Output tokens per second, per client"):
        assert cursors[title]["runs"] == ["FCFS", "Rate limit", "VTC"]
        assert cursors[title]["axes"] == ["x", "x2", "x3"]


@pytest.mark.parametrize("path", list(LESSON_PAGES))
def test_each_lesson_warns_about_a_bad_link_value_and_keeps_its_preset(path):
    _, knob, _ = LESSON_PAGES[path]
    at = open_page(path, {knob: "banana", "step": "soon"})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    assert f"{knob}=banana" in warnings and "step `soon` was ignored" in warnings


@pytest.mark.parametrize("path", list(LESSON_PAGES))
def test_each_lesson_names_a_changed_setting_and_goes_back_to_the_preset(path):
    lesson, knob, value = LESSON_PAGES[path]
    at = open_page(path, {knob: value})
    assert_clean(at)
    changed = " ".join(c.value for c in at.caption if "Changed from the preset" in c.value)
    assert changed, "the page does not say which setting differs from its preset"
    at.button(key=f"{lesson}.reset_settings").click().run()
    assert_clean(at)
    assert not any("Changed from the preset" in c.value for c in at.caption)
