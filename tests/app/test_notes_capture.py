"""What the course notes read from a page (ui/notes/capture.py, no browser): every chart the page draws (each pick
of a one-at-a-time chart too), the page's own sentences and runs, and the print theme changing the figures' look
but none of the numbers."""

from __future__ import annotations

import lessons
from tests.app.conftest import chart_titles, notice_text, open_page
from ui import page
from ui.notes import captions
from ui.notes.capture import capture
from ui.theme import PRINT_WIDTH

FAIRNESS = lessons.lesson_of("fairness")


def test_the_notes_take_every_pick_of_a_one_at_a_time_chart_and_the_pages_own_numbers():
    preset = FAIRNESS.presets()[0]
    cap = capture(FAIRNESS, preset)
    reader = open_page(FAIRNESS.page, {"preset": preset.key})
    labels = [label for label, _ in cap.runs]
    assert labels == ["FCFS", "Rate limit", "VTC"]
    gantts = [c.name for c in cap.charts if "-gantt-" in c.name]
    assert gantts == [f"{preset.key}-gantt-{label.replace(' ', '_')}" for label in labels]
    assert sum("each request over time" in t for t in chart_titles(reader)) == 1  # (a reader picks one at a time)
    assert len(cap.charts) == len(chart_titles(reader)) + len(labels) - 1
    # The print theme changes sizes and titles, never a sentence or a number.
    assert " ".join(cap.notices) == " ".join(captions.page_markdown(s) for i in reader.info
                                             for s in [line[2:] for line in i.value.splitlines()
                                                       if line.startswith("- ")])
    assert [(c.label, c.value) for c in cap.cards] == [(m.label, m.value) for m in reader.metric]
    assert all(c.size[0] == PRINT_WIDTH for c in cap.charts)
    assert all(c.figure["layout"]["title"]["subtitle"]["text"] == f"Fairness · {preset.title}" for c in cap.charts)
    assert "What to notice" in notice_text(reader)


def test_without_the_notes_flag_a_page_keeps_no_runs_for_them():
    at = open_page(FAIRNESS.page, {"preset": "weighted_vtc"})
    assert page.NOTES_RUNS not in at.session_state
