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
