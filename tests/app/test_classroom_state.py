"""Settings that follow the reader (issue 24): presentation mode across pages, a lesson's settings after a visit to
another page, the Fairness chart picker in the URL, "Back to preset" after a return.

A page link drops the query string: ``_follow_link`` does what the browser does (clear it, switch page, run)."""

from streamlit.testing.v1 import AppTest

from tests.app.conftest import assert_clean, open_page


def _follow_link(at: AppTest, page: str) -> AppTest:
    at.query_params.clear()
    at.switch_page(page)
    at.run()
    return at


def test_presentation_mode_on_at_home_is_still_on_at_fairness_and_back():
    at = open_page()
    at.toggle(key="display.present").set_value(True).run()
    assert at.query_params.get("present") == "1"
    _follow_link(at, "pages/2_Fairness.py")
    assert_clean(at)
    assert at.toggle(key="display.present").value is True
    assert at.query_params.get("present") == "1"  # and in the URL again, for a copied link
    at.toggle(key="display.present").set_value(False).run()
    _follow_link(at, "app.py")  # turned off on Fairness: off at Home too, though Home's own URL had it on
    assert at.toggle(key="display.present").value is False
    assert "present" not in at.query_params


def test_a_lessons_slider_and_preset_survive_a_visit_to_another_page():
    at = open_page("pages/1_Queueing.py", {"preset": "starvation"}, settle=False)
    at.slider(key="queueing.engine.max_num_seqs").set_value(3).run()
    _follow_link(at, "pages/9_Glossary.py")
    assert "max_num_seqs" not in at.query_params and "preset" not in at.query_params
    _follow_link(at, "pages/1_Queueing.py")
    assert_clean(at)
    assert at.selectbox(key="queueing.preset").value == "starvation"
    assert at.slider(key="queueing.engine.max_num_seqs").value == 3
    assert at.query_params.get("max_num_seqs") == "3" and at.query_params.get("preset") == "starvation"
    # "Back to preset" still works, and the return after it finds the preset's settings
    at.button(key="queueing.reset_settings").click().run()
    assert at.slider(key="queueing.engine.max_num_seqs").value != 3
    assert "max_num_seqs" not in at.query_params
    _follow_link(at, "app.py")
    _follow_link(at, "pages/1_Queueing.py")
    assert at.slider(key="queueing.engine.max_num_seqs").value != 3 and "max_num_seqs" not in at.query_params


def test_a_link_with_its_own_settings_wins_over_the_remembered_ones():
    at = open_page("pages/1_Queueing.py", settle=False)
    at.slider(key="queueing.engine.max_num_seqs").set_value(3).run()
    _follow_link(at, "app.py")
    at.query_params["max_num_seqs"] = "5"  # (a link within the app that carries settings of its own)
    at.switch_page("pages/1_Queueing.py")
    at.run()
    assert at.slider(key="queueing.engine.max_num_seqs").value == 5


def test_fairness_chart_picker_is_in_the_url_and_a_bad_one_warns():
    at = open_page("pages/2_Fairness.py", settle=False)
    picker = at.get("button_group")[0] if at.get("button_group") else None
    labels = list(picker.options) if picker is not None else []
    assert len(labels) >= 2, labels
    at = open_page("pages/2_Fairness.py", {"gantt_policy": labels[1]}, settle=False)
    assert_clean(at)
    assert at.session_state["fairness.gantt_policy"] == labels[1]
    assert at.query_params.get("gantt_policy") == labels[1]
    at = open_page("pages/2_Fairness.py", {"gantt_policy": "Nobody"}, settle=False)
    assert any("Nobody" in w.value and "is not one of this chart's" in w.value for w in at.warning)
    assert at.session_state["fairness.gantt_policy"] == labels[0] and "gantt_policy" not in at.query_params


def test_the_players_step_and_the_chart_picked_come_back_with_the_page():
    at = open_page("pages/2_Fairness.py", {"step": "40"}, settle=False)
    labels = list(at.get("button_group")[0].options)
    at.get("button_group")[0].set_value(labels[2]).run()
    assert at.query_params.get("gantt_policy") == labels[2] and at.query_params.get("step") == "40"
    _follow_link(at, "app.py")
    _follow_link(at, "pages/2_Fairness.py")
    assert at.query_params.get("step") == "40" and at.query_params.get("gantt_policy") == labels[2]
    assert at.session_state["fairness.gantt_policy"] == labels[2]
