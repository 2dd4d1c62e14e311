"""The Overload lesson without Streamlit: the admission settings (a cap reaches only the runs that have it), the
presets' points (past the knee, a request cap, a burst, two classes), the load sweep's knee against the measured
capacity, and sentences that are true at settings other than the defaults."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lessons.overload import lesson
from lessons.run import Run
from sim import metrics, presets
from sim.engine import simulate
from sim.request import RequestStatus


def _runs(key: str, **values: object) -> tuple[presets.Preset, list[Run]]:
    preset = presets.get(key)
    base = preset.scenario
    chosen = {k.key: k.default for k in lesson.knobs(preset, base, False)} | values
    scenario = dataclasses.replace(base, config=lesson.apply(base.config, chosen))
    out = []
    for label, sc in lesson.variants(preset, scenario, chosen):
        trace = simulate(sc.config, list(sc.requests))
        out.append(Run(label, sc, trace, metrics.summary(trace)))
    return preset, out


def test_a_cap_knob_reaches_only_the_settings_that_have_that_cap():
    preset = presets.get("request_cap")
    settings = dict(lesson.settings(preset, {"request_cap": 30, "ttft_slo_ms": 1000, "tbt_slo_ms": 100}))
    assert settings["no admission control"]["max_num_queued_reqs"] is None
    assert settings["request cap 30"]["max_num_queued_reqs"] == 30
    assert settings["request cap 30"]["max_num_queued_tokens"] is None
    burst = dict(lesson.settings(presets.get("burst"), {"request_cap": 10, "token_cap": 2000}))
    assert (burst["request cap 10"]["max_num_queued_tokens"], burst["token cap 2,000"]["max_num_queued_reqs"]) == (
        None, None)


def test_past_the_knee_the_server_is_busy_and_few_requests_meet_their_targets():
    _, (plain, shed) = _runs("past_the_knee")
    o = lesson.outcome(plain.trace, plain.summary)
    assert o.num_refused == o.num_shed == 0 and o.num_served == o.num_requests == 800
    assert o.goodput_req_s < 0.25 * o.throughput_req_s  # goodput near zero, throughput at the capacity
    waiting = plain.trace.steps["num_waiting"]
    assert waiting.max() > 200  # the queue grows for as long as the traffic lasts (~15 a second for 20 s)
    last_arrival = int(plain.trace.requests["arrival_step"].max())
    assert int(np.argmax(waiting)) >= 0.9 * last_arrival  # its peak comes as the traffic stops
    # the late ones are the later arrivals: TTFT grows with arrival time
    ttft = metrics.request_latencies(plain.trace)["ttft_ms"]
    order = np.argsort(plain.trace.requests["arrival_step"])
    assert np.median(ttft[order[-100:]]) > 10 * np.median(ttft[order[:100]])
    s = lesson.outcome(shed.trace, shed.summary)
    assert s.num_shed > 0 and s.goodput_req_s > 3 * o.goodput_req_s


def test_a_request_cap_refuses_some_and_goodput_recovers():
    _, (plain, capped) = _runs("request_cap")
    a, b = (lesson.outcome(r.trace, r.summary) for r in (plain, capped))
    assert b.num_refused > 0 and a.num_refused == 0
    assert b.goodput_req_s > 4 * a.goodput_req_s
    refused = capped.trace.requests["status"] == RequestStatus.REJECTED
    assert not (capped.trace.requests["first_scheduled_step"][refused] >= 0).any()  # never entered the queue
    # the cap holds at every step: waiting + running never pass it
    steps = capped.trace.steps
    assert (steps["num_waiting"] + steps["num_running"]).max() <= 48


def test_in_a_burst_the_token_cap_keeps_the_chats_ttft_where_the_request_cap_does_not():
    _, (req, tok) = _runs("burst")
    chat = {r.label: (r.trace.requests["client"] == r.trace.client_ids.index("chat")) & metrics.served_mask(r.trace)
            for r in (req, tok)}
    p99 = {r.label: np.percentile(metrics.request_latencies(r.trace)["ttft_ms"][chat[r.label]], 99)
           for r in (req, tok)}
    assert p99["token cap 8,000"] < 0.2 * p99["request cap 48"]
    assert p99["request cap 48"] > 1000  # past the 1 s target


def test_priority_keeps_the_interactive_targets_and_batch_absorbs_the_delay():
    _, (fcfs, prio) = _runs("two_classes")
    met = {r.label: metrics.request_slo(r.trace)["slo_met"][r.trace.slo].mean() for r in (fcfs, prio)}
    assert met["priority"] == 1.0 and met["FCFS"] < 0.5
    finish = {r.label: np.median(metrics.request_latencies(r.trace)["finish_ms"][~r.trace.slo]) for r in (fcfs, prio)}
    assert finish["priority"] > 1.5 * finish["FCFS"]
    sentences = " ".join(lesson.notices([fcfs, prio], "ms"))
    assert "every request with targets met them and every batch request was served" in sentences


def test_the_sweeps_knee_is_where_the_offered_load_passes_the_measured_capacity():
    preset = presets.get("past_the_knee")
    values = {"ttft_slo_ms": 1000, "tbt_slo_ms": 100}
    scenario = preset.scenario
    loads = preset.knobs["load_sweep"]

    def measure(sc, fn):
        return fn(simulate(sc.config, list(sc.requests)))

    sweep = lesson.load_sweep(preset, scenario, values, loads, lesson.sweep_duration(20), measure)
    points = sweep["no admission control"]
    capacity = lesson.capacity(sweep)
    below = [p for p in points if p[1] < 0.9 * capacity]
    above = [p for p in points if p[1] > 1.9 * capacity]
    assert below and above
    assert all(p[3] > 0.9 * p[2] for p in below)  # under capacity: goodput is the throughput
    assert all(p[3] < 0.25 * p[2] for p in above)  # well past it: goodput collapses...
    assert all(p[2] > 0.85 * capacity for p in above)  # ...while throughput holds
    offered_at_knee, _ = lesson.knee(points)
    assert 0.8 * capacity <= offered_at_knee <= 1.2 * capacity


@pytest.mark.parametrize("values", [{"request_cap": 200}, {"request_cap": 12, "ttft_slo_ms": 300}])
def test_the_sentences_follow_the_knobs(values):
    _, runs = _runs("request_cap", **values)
    capped = runs[1]
    cap = capped.scenario.config.max_num_queued_reqs
    assert capped.label == f"request cap {cap}"
    o = lesson.outcome(capped.trace, capped.summary)
    text = " ".join(lesson.notices(runs, "ms"))
    assert f"{o.num_met:,} of {o.num_requests:,} requests met both targets" in text
    if values.get("ttft_slo_ms") == 300:
        assert "a first token after 300 ms" in text
    card = lesson.headline(capped, "ms")
    assert card.value == f"{o.goodput_req_s:,.1f} requests/s"
    assert f"{o.num_refused:,} refused at the door" in card.caption


def test_a_request_cap_below_the_batch_slots_is_said_to_leave_them_empty():
    _, runs = _runs("request_cap", request_cap=8)
    text = " ".join(lesson.notices(runs, "ms"))
    peak = int(runs[1].trace.steps["num_running"].max())
    assert peak <= 8
    assert f"request cap 8 is below max_num_seqs (32): at most 8 requests are in the server at once (the most " \
           f"running in a step: {peak})" in text
    assert "is below max_num_seqs" not in " ".join(lesson.notices(_runs("request_cap")[1], "ms"))
