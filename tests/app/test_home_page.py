"""The home page through AppTest: it runs, links every lesson, and draws one engine step from a real run."""

import json

from tests.app.conftest import ROOT, assert_clean, chart_titles, open_page
from ui.page import PAGES


def test_home_page_runs_and_links_every_page():
    at = open_page()
    assert_clean(at)
    assert at.title[0].value == "Scheduler Lab"
    for path, _, _ in PAGES:
        assert (ROOT / path).exists(), path  # every page the navigation names exists
    cards = [h.value for h in at.subheader if h.value.startswith(":material/")]
    lessons = [(name, icon) for path, name, icon in PAGES if path.startswith("pages/") and name != "Glossary"]
    assert cards == [f"{icon} {name}" for name, icon in lessons]  # one card per lesson, in order
    # Two cards a row (four in a row break the lesson names on a 1,024-px projector), one in each column.
    rows = [block for block in at.main.children.values()
            if block.type == "flex_container" and any(c.type == "column" for c in block.children.values())]
    shown = [[h.value for col in row.children.values() for h in col.subheader[:1]] for row in rows]
    assert shown == [cards[i:i + 2] for i in range(0, len(cards), 2)]  # (a fifth card alone in its row)


def test_engine_step_slider_moves_the_picture():
    at = open_page()
    slider = at.slider(key="home.step")
    assert slider.value == 113  # the first preemption of the toy pool
    assert chart_titles(at) == ["Step 113: 3 requests ran, D preempted"]  # what the slider's help promises
    assert "KV cache: 27 of 32<br>blocks in use, 5 free<br>after the step" in _annotations(at)
    slider.set_value(200).run()
    assert_clean(at)
    assert chart_titles(at) == ["Step 200: 3 requests ran, C and D re-admitted"]
    assert "KV cache: 21 of 32<br>blocks in use, 11 free<br>after the step" in _annotations(at)


def _annotations(at) -> str:
    """The engine-step chart's text notes (its column headers), joined."""
    (chart,) = at.get("plotly_chart")
    return " | ".join(note["text"] for note in json.loads(chart.proto.spec)["layout"]["annotations"])
