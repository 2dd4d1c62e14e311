"""The workload generator's errors in the sidebar's words (ui/knobs.py): built from the error's fields
(``sim.config.FieldError``), each names the knob that sets the field, by its label, and what that knob may be; none
names the generator's own field."""

from __future__ import annotations

import pytest

from lessons.cancellation import lesson as cancellation
from lessons.fairness import clients as fairness
from sim import presets
from sim.config import EngineConfig, FieldError
from sim.workload import ClientSpec, TooFewArrivals, WorkloadSpec, generate
from ui import knobs


def _error(make) -> FieldError:
    with pytest.raises(FieldError) as err:
        make()
    return err.value


@pytest.mark.parametrize(("make", "words"), [
    # the Workload panel
    (lambda: WorkloadSpec(num_requests=0), "'Requests' (Workload) must be from 1 to 200,000, got 0"),
    (lambda: WorkloadSpec(rate_per_step=0.0),
     "'Arrival rate (requests per step)' (Workload) must be from 1e-06 to 1,000, got 0"),
    (lambda: WorkloadSpec(prompt_median=0), "'Prompt length, median (tokens)' (Workload) must be from 1 to 1,000,000, "
                                            "got 0"),
    (lambda: WorkloadSpec(output_median=0), "'Answer length, median (tokens)' (Workload) must be from 1 to 1,000,000, "
                                            "got 0"),
    (lambda: WorkloadSpec(output_sigma=9.0), "'Answer length spread (lognormal sigma)' (Workload) must be from 0 to 5, "
                                             "got 9"),
    (lambda: WorkloadSpec(seed=-1), "'Random seed' (Workload) must be from 0 to 4,294,967,295, got -1"),
    # a client's panel (Fairness)
    (lambda: ClientSpec("B", share=-1), "client B's 'Share of the arrivals (%)' must be at least 0, got -1"),
    (lambda: ClientSpec("B", start_step=-1), "client B's 'Starts sending at step' must be from 0 to 10,000,000, "
                                             "got -1"),
    (lambda: ClientSpec("B", start_step=10, stop_step=10), "client B's 'Stops sending at step' must be at least 11, "
                                                           "got 10"),
    (lambda: ClientSpec("B", on_steps=-1), "client B's 'Sends in bursts: on for' must be at least 0, got -1"),
    (lambda: ClientSpec("B", off_steps=-1), "client B's '...then off for' must be at least 0, got -1"),
    (lambda: ClientSpec("B", prompt_median=0), "client B's 'Prompt length, median (tokens)' must be from 1 to "
                                               "1,000,000, got 0"),
    (lambda: ClientSpec("B", output_median=0), "client B's 'Answer length, median (tokens)' must be from 1 to "
                                               "1,000,000, got 0"),
    # the Cancellation page's
    (lambda: WorkloadSpec(abandon_rate=2.0), "'Users who leave early (fraction)' must be from 0 to 1, got 2"),
    (lambda: WorkloadSpec(abandon_point="never"),
     "'When they leave' must be one of: uniform, early, late, got 'never'"),
])
def test_a_generator_error_names_the_knobs_label_and_what_it_allows(make, words):
    error = _error(make)
    assert knobs.in_sidebar_words(error) == words
    # not the generator's name for it (workload.num_requests, stop_step; "seed" is a word of its label too)
    assert error.field not in words and ("_" not in error.name or error.name not in words)


def test_the_labels_are_the_knobs_own():
    panel = {k.key: k.label for k in knobs.workload_knobs(WorkloadSpec())}
    on_clock = {k.key: k.label for k in knobs.workload_knobs(WorkloadSpec(rate_per_step=None, rate_per_s=5.0))}
    assert on_clock["rate_s"] == "Arrival rate (requests per second)" and "rate" not in on_clock
    assert knobs.workload_labels() == {"num_requests": panel["num_requests"], "rate_per_step": panel["rate"],
                                       "rate_per_s": on_clock["rate_s"], "prompt_median": panel["prompt_median"],
                                       "output_median": panel["output_median"], "output_sigma": panel["output_sigma"],
                                       "seed": panel["seed"]}
    spec = ClientSpec("A", prompt_median=100, output_median=100)  # (a client with lengths of its own: every knob)
    client = {k.key.removeprefix("A_"): k.label for k in fairness.client_knobs(spec, WorkloadSpec(clients=(spec,)),
                                                                                EngineConfig())}
    keys = {"share": "share", "start_step": "start", "stop_step": "stop", "on_steps": "on", "off_steps": "off",
            "prompt_median": "prompt", "output_median": "output"}
    assert keys.keys() == knobs.CLIENT_LABELS.keys()
    for name, label in knobs.CLIENT_LABELS.items():
        assert client[keys[name]].startswith(label), name
    preset = presets.get("impatient_users")
    lesson = {k.key: k.label for k in cancellation.knobs(preset, preset.scenario, False)}
    assert {name: lesson[name] for name in ("abandon_rate", "abandon_point")} == knobs.LESSON_WORKLOAD_LABELS


def test_windows_that_close_too_soon_are_said_with_the_stop_and_requests_knobs():
    error = _error(lambda: generate(WorkloadSpec(num_requests=100, clients=(ClientSpec("A", stop_step=3),))))
    assert isinstance(error, TooFewArrivals)
    assert knobs.in_sidebar_words(error) == (
        f"the clients' windows close by step 3 ('Stops sending at step') after only {error.num_arrived} of 100 "
        f"requests; move a stop later (or to 0 for never), give a client that is still sending a larger share, or "
        f"lower 'Requests' (Workload)")


def test_on_off_windows_that_let_too_little_through_are_said_with_the_burst_knobs():
    error = _error(lambda: generate(WorkloadSpec(num_requests=2000, seed=1, clients=(
        ClientSpec("a", rate_per_step=1000.0, on_steps=1, off_steps=10**9),))))
    words = knobs.in_sidebar_words(error)
    assert words.startswith("the clients' on/off windows ('Sends in bursts: on for', '...then off for') let through "
                            f"only {error.num_arrived} of 2000 requests in {error.num_drawn:,} Poisson arrivals")
    assert words.endswith("; make them send for longer or pause for less, or lower 'Requests' (Workload)")
    assert "num_requests" not in words and "on_steps" not in words


def test_a_setting_no_knob_sets_keeps_the_files_name():
    error = _error(lambda: WorkloadSpec(prompt_max=0))
    assert knobs.in_sidebar_words(error) == str(error) == "workload.prompt_max: must be between 1 and 10000000, got 0"


def test_the_sidebar_gets_a_plain_value_error_in_its_words():
    workload = presets.get("article_hol").scenario.workload or WorkloadSpec()
    values = {"num_requests": 0, "rate": 0.5, "prompt_median": 200, "output_median": 150, "output_sigma": 0.8,
              "seed": 0}
    with pytest.raises(ValueError) as err:
        knobs.apply_workload(workload, values)
    assert not isinstance(err.value, FieldError)
    assert str(err.value) == "'Requests' (Workload) must be from 1 to 200,000, got 0"


def test_a_workload_on_the_clock_keeps_its_rate_per_second_through_the_panel():
    spec = WorkloadSpec(rate_per_step=None, rate_per_s=12.5, num_requests=40)
    values = {k.key: k.default for k in knobs.workload_knobs(spec)}
    assert values["rate_s"] == 12.5
    assert knobs.apply_workload(spec, {**values, "rate_s": 20.0}) == spec.replace(rate_per_s=20.0)
