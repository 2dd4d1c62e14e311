"""The home page through AppTest: it runs, links every lesson, and draws one engine step from a real run."""

from tests.app.conftest import ROOT, assert_clean, open_page
from ui.page import PAGES


def test_home_page_runs_and_links_every_page():
    at = open_page()
    assert_clean(at)
    assert at.title[0].value == "Scheduler Lab"
    for path, _, _ in PAGES:
        assert (ROOT / path).exists(), path  # every page the navigation names exists
    cards = [m.value for m in at.markdown if m.value.startswith("### :material/")]
    assert cards == [f"### {icon} {name}" for _, name, icon in PAGES[1:]]  # one card per lesson, in order


def test_engine_step_slider_moves_the_picture():
    at = open_page()
    slider = at.slider(key="home.step")
    assert slider.value == 113  # the first preemption of the toy pool
    slider.set_value(200).run()
    assert_clean(at)
