"""Knobs without Streamlit: how a setting's value is written for people (the page's notes and warnings)."""

from ui.controls import Knob


def test_numbers_get_thousands_separators_and_no_float_noise():
    assert Knob("num_blocks", "KV pool size (blocks)", "int", 2000).display(12000) == "12,000"
    assert Knob("rate", "Arrival rate", "float", 0.25).display(0.1 + 0.2) == "0.3"
    assert Knob("rate", "Arrival rate", "float", 0.25).display(1500.0) == "1,500"


def test_switches_read_on_and_off_and_options_use_their_names():
    assert Knob("lift", "Lift", "bool", True).display(False) == "off"
    assert Knob("lift", "Lift", "bool", True).display(True) == "on"
    policy = Knob("policy", "Policy", "choice", "fcfs", options=("fcfs", "sjf"), labels={"sjf": "SJF"})
    assert policy.display("sjf") == "SJF" and policy.display("fcfs") == "fcfs"
    many = Knob("policies", "Policies", "multi", ("fcfs",), options=("fcfs", "sjf"), labels={"sjf": "SJF"})
    assert many.display(["fcfs", "sjf"]) == "fcfs, SJF" and many.display([]) == "none"


def test_the_range_a_message_gives_is_a_range_the_knob_accepts():
    # 2**-10 GiB is 0.0009765625: six digits ("0.000976562") named a minimum the knob itself refused.
    pool = Knob("pool_gib", "KV pool (GiB)", "float", 1.0, min=2**-10, max=0.25)
    try:
        pool.parse("0")
    except ValueError as e:
        message = str(e)
    assert message == "must be between 0.0009765625 and 1"  # (the max widens to take in the default)
    assert pool.parse("0.0009765625") == 2**-10


def test_a_float_knob_keeps_float_bounds_whatever_the_file_wrote():
    # An uploaded "rate_per_step": 3 becomes the default: the widened maximum must stay a float for the slider.
    rate = Knob("rate", "Arrival rate", "float", 3, min=0.05, max=2.0, step=0.05)
    assert rate.bounds == (0.05, 3.0) and all(isinstance(x, float) for x in (*rate.bounds, rate.default))


def test_a_list_given_twice_in_a_link_is_both_lists():
    many = Knob("policies", "Policies", "multi", ("fcfs",), options=("fcfs", "sjf", "vtc"))
    assert many.parse(["fcfs", "sjf,vtc"]) == ["fcfs", "sjf", "vtc"]
    assert Knob("n", "N", "int", 1, min=1, max=9).parse(["2", "3"]) == 3


def _slider_panel():
    from ui.controls import Knob, KnobPanel

    knobs = [Knob("num_blocks", "KV pool size (blocks)", "int", 600, min=100, max=2000, step=50),
             Knob("rate", "Arrival rate", "float", 0.25, min=0.05, max=2.0, step=0.05)]
    KnobPanel("lab", knobs).render()


def test_sliders_show_their_state_without_copying_the_session_state(monkeypatch):
    # A slider drawn without a value makes Streamlit copy the whole session state (filtered_state) to learn whether
    # it is a range: on every rerun, for every slider. The panel passes the knob's default; the state still wins.
    from streamlit.runtime.state.session_state import SessionState
    from streamlit.testing.v1 import AppTest

    copies = []
    original = SessionState.filtered_state
    monkeypatch.setattr(SessionState, "filtered_state",
                        property(lambda self: copies.append(1) or original.fget(self)))
    at = AppTest.from_function(_slider_panel)
    at.query_params["num_blocks"] = "900"
    at.run()
    assert [s.value for s in at.sidebar.slider] == [900, 0.25]  # the link's value, not the knob's default
    at.sidebar.slider[1].set_value(1.5).run()
    at.run()
    assert [s.value for s in at.sidebar.slider] == [900, 1.5]
    assert not at.exception and copies == []
