"""Arrivals on the clock (docs/ENGINE.md#arrivals-on-the-clock): a request given ``arrival_ms`` arrives at the first
step whose start (the trace's clock: the sum of the steps before it) is at or past its time. The plain loop, the
idle jump and the fast-forward all find that step; every rule counted from arrival counts from it."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import Engine, EngineConfig, RequestSpec, Trace, cost_estimate, fast_forward, scenario
from sim.config import CostModel, FieldError, ScenarioError
from sim.engine import StepLimitError, simulate
from sim.events import EventKind
from sim.workload import WorkloadSpec, generate, workload_from_dict
from tests.sim.strategies import configs, requests, scenarios
from tests.sim.test_fast_forward import both_ways, differences

EXAMPLES = int(os.environ.get("SCHEDLAB_FF_EXAMPLES", "120"))


def timed(request_id: str, ms: float, prompt_len: int = 4, output_len: int = 4, **kw) -> RequestSpec:
    return RequestSpec(request_id, None, prompt_len, output_len, arrival_ms=ms, **kw)


def start_ms(trace: Trace, step: int) -> float:
    """The clock at the start of ``step``: the sum of the steps before it, as the trace sums them."""
    return float(trace.start_ms(step))


def assert_arrived_by_the_rule(trace: Trace, specs: list[RequestSpec]) -> None:
    """Each request given a time arrived at the first step whose start is at or past it."""
    for row, spec in enumerate(specs):
        if spec.arrival_ms is None:
            continue
        k = int(trace.requests["arrival_step"][row])
        assert start_ms(trace, k) >= spec.arrival_ms, (spec.request_id, k)
        assert k == 0 or start_ms(trace, k - 1) < spec.arrival_ms, (spec.request_id, k)


def given_steps(specs: list[RequestSpec], trace: Trace) -> list[RequestSpec]:
    """The same requests, each given the step it arrived at in ``trace`` instead of its time."""
    steps = trace.requests["arrival_step"].tolist()
    return [s if s.arrival_ms is None else dataclasses.replace(s, arrival_step=steps[i], arrival_ms=None)
            for i, s in enumerate(specs)]


def differences_but_the_times(a: Trace, b: Trace) -> list[str]:
    """``differences``, the request records compared without the times given (``arrival_ms``)."""
    parts = [p for p in differences(a, b) if p != "request records"]
    strip = [lambda t: [{k: v for k, v in r.items() if k != "arrival_ms"} for r in t.request_records()]] * 2
    if strip[0](a) != strip[1](b):
        parts.append("request records")
    return parts


# ---- the rule -----------------------------------------------------------------------------------------------------
def test_an_idle_gap_ends_exactly_at_the_arrival():
    # a runs steps 0-3; then nothing until b's time: the idle steps tick 5.75 ms each, and b arrives at the first
    # step whose start reaches 200 ms
    cfg = EngineConfig(num_blocks=100)
    reqs = [RequestSpec("a", 0, 16, 4), timed("b", 200.0)]
    for ff in (True, False):
        trace = Engine(cfg, reqs, fast_forward=ff, check_invariants=True).run()
        assert_arrived_by_the_rule(trace, reqs)
        k = int(trace.requests["arrival_step"][1])
        assert trace.steps["num_scheduled"][k - 1] == 0 and trace.steps["num_scheduled"][k] == 1  # (idle to k)
        assert k > 4


def test_a_time_on_a_step_boundary_arrives_in_the_step_that_starts_there():
    cfg = EngineConfig(num_blocks=100)
    first = simulate(cfg, [RequestSpec("a", 0, 300, 20)])
    boundary = start_ms(first, 7)  # the clock at the start of step 7, as summed
    on = simulate(cfg, [RequestSpec("a", 0, 300, 20), timed("b", boundary)])
    after = simulate(cfg, [RequestSpec("a", 0, 300, 20), timed("b", math.nextafter(boundary, math.inf))])
    before = simulate(cfg, [RequestSpec("a", 0, 300, 20), timed("b", math.nextafter(boundary, 0))])
    assert [int(t.requests["arrival_step"][1]) for t in (before, on, after)] == [7, 7, 8]
    assert on.requests["arrival_step"][1] == 7 and start_ms(on, 7) == boundary


def test_arrivals_during_a_long_prefill_all_come_at_the_next_step_in_file_order():
    # a's 8,000-token prompt takes step 0 (5.75 + 128 ms); five requests sent meanwhile arrive together at step 1
    cfg = EngineConfig(num_blocks=1000, max_num_batched_tokens=8192)
    burst = [timed(f"b{i}", ms) for i, ms in enumerate([90.0, 1.0, 133.0, 50.5, 0.001])]
    reqs = [RequestSpec("a", 0, 8000, 4), *burst]
    for ff in (True, False):
        trace = Engine(cfg, reqs, fast_forward=ff, check_invariants=True).run()
        assert trace.steps["step_ms"][0] > 133.0
        assert trace.requests["arrival_step"].tolist() == [0, 1, 1, 1, 1, 1]
        arrived = [trace.request_ids[e.row] for e in trace.events_between(1, 2) if e.kind is EventKind.ARRIVE]
        assert arrived == ["b0", "b1", "b2", "b3", "b4"]  # (file order, not time order)


def test_a_mixed_file_takes_a_steps_arrivals_in_file_order():
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1)
    reqs = [timed("t0", 3.0), RequestSpec("s1", 1, 4, 4), timed("t2", 0.5), RequestSpec("s3", 1, 4, 4)]
    trace = Engine(cfg, reqs, check_invariants=True).run()
    assert trace.requests["arrival_step"].tolist() == [1, 1, 1, 1]
    assert [trace.request_ids[e.row] for e in trace.events_between(1, 2) if e.kind is EventKind.ARRIVE] == [
        "t0", "s1", "t2", "s3"]


def test_offered_load_is_open_loop():
    # The same arrival process with short and long prompts: per second of the run's clock, as many requests arrive
    # with rate_per_s; with rate_per_step longer prompts make longer steps and fewer arrive each second.
    def arrivals_per_s(prompt_median: int, **rate) -> float:
        sc = scenario.scenario_from_dict({"config": {"num_blocks": 60_000, "max_num_batched_tokens": 8192},
                                          "workload": {"num_requests": 400, "prompt_median": prompt_median,
                                                       "prompt_sigma": 0.2, "output_median": 40, "seed": 5, **rate}})
        trace = simulate(sc.config, sc.requests)
        last = int(trace.requests["arrival_step"].max())
        return 399 / (start_ms(trace, last) - start_ms(trace, int(trace.requests["arrival_step"].min()))) * 1000

    short, long = arrivals_per_s(100, rate_per_s=40.0), arrivals_per_s(3000, rate_per_s=40.0)
    assert abs(long - short) / short < 0.05 and 30 < short < 50  # (the same times: only the step boundaries move)
    short_steps, long_steps = arrivals_per_s(100, rate_per_step=0.23), arrivals_per_s(3000, rate_per_step=0.23)
    assert long_steps < 0.5 * short_steps  # (at the engine's pace: longer steps, fewer per second: 14 against 39)


# ---- rules counted from the arrival step --------------------------------------------------------------------------
def test_a_timeout_counts_from_the_arrival_step():
    # a is done by step 2; b arrives by the clock at step 6 (its 30 ms reached at the start of step 6, idle steps of
    # 5.75 ms since) and its client gives up 5 steps later, while it still runs (40 tokens)
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1, timeout_steps=5)
    reqs = [RequestSpec("a", 0, 4, 3), timed("b", 30.0, 4, 40)]
    for ff in (True, False):
        trace = Engine(cfg, reqs, fast_forward=ff, check_invariants=True).run()
        assert trace.requests["arrival_step"][1] == 6
        assert trace.requests["disconnect_step"][1] == trace.requests["finish_step"][1] == 6 + 5
        assert trace.finish_reason[1] == "timeout"


def test_a_quiet_stretch_ends_before_the_timeout_of_a_request_that_arrived_in_it(monkeypatch):
    # one slot: a decodes 60 steps; b arrives by the clock in the middle of that quiet stretch (after a's client gave
    # up at step 10, which ended the stretch before) and waits; its client gives up 10 steps after it arrived, which
    # the stretch must stop before (nobody is aborted: a runs on, and b waits on)
    stretches = []
    advance = fast_forward.advance
    monkeypatch.setattr(fast_forward, "advance", lambda e, step, d: stretches.append((step, advance(e, step, d)))
                        or stretches[-1][1])
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1, timeout_steps=10, abort_on_disconnect=False)
    reqs = [RequestSpec("a", 0, 4, 60), timed("b", 100.0)]
    fast, plain = both_ways(cfg, reqs)
    assert not differences(fast, plain)
    arrived = int(fast.requests["arrival_step"][1])
    assert fast.requests["disconnect_step"].tolist() == [10, arrived + 10] and arrived > 12
    assert any(step < arrived < step + n for step, n in stretches)  # (it arrived within a stretch)
    assert not any(step < arrived + 10 < step + n for step, n in stretches)  # (which ended before its timeout)


def test_the_rate_limit_and_the_door_count_timed_arrivals_at_their_step():
    cfg = EngineConfig(num_blocks=100, rate_limit_max_requests=2, rate_limit_window_steps=3, max_num_queued_reqs=5)
    reqs = [timed(f"r{i}", ms) for i, ms in enumerate([0.0, 1.0, 2.0, 6.0, 30.0, 31.0, 32.0, 33.0])]
    for ff in (True, False):
        trace = Engine(cfg, reqs, fast_forward=ff, check_invariants=True).run()
        steps = trace.requests["arrival_step"].tolist()
        assert steps[:4] == [0, 1, 1, 2]  # (0 ms: step 0; 1 and 2 ms within step 0; 6 ms within step 1)
        # the window of 3 steps holds r0 and r1 when r2 comes: rate limited
        assert trace.finish_reason[2] == "rate_limited"
        same = simulate(cfg, given_steps(reqs, trace), fast_forward=ff)
        assert not differences_but_the_times(trace, same)


def test_shedding_counts_from_the_start_of_the_arrival_step():
    cfg = EngineConfig(num_blocks=100, max_num_seqs=1, ttft_slo_ms=50.0, shed_past_ttft_slo=True)
    reqs = [RequestSpec("a", 0, 4, 40), timed("b", 20.0)]
    trace = Engine(cfg, reqs, check_invariants=True).run()
    arrived, shed = int(trace.requests["arrival_step"][1]), int(trace.requests["finish_step"][1])
    assert trace.finish_reason[1] == "deadline_passed"
    assert start_ms(trace, shed) - start_ms(trace, arrived) >= 50.0 > start_ms(trace, shed - 1) - start_ms(
        trace, arrived)


def test_the_engines_clock_is_the_traces_clock():
    cfg = EngineConfig(num_blocks=200, max_num_seqs=2)
    reqs = [RequestSpec("a", 0, 40, 60), timed("b", 17.0, 10, 50), timed("c", 17.5, 7, 5), timed("d", 2000.0, 30, 30)]
    engine = Engine(cfg, reqs, check_invariants=True)
    trace = engine.run()
    assert engine.shedder is None and engine.clock.num_steps == trace.num_steps
    assert np.array_equal(engine.clock._ends[:trace.num_steps], trace.steps["time_ms"])
    assert_arrived_by_the_rule(trace, reqs)


def test_a_run_without_times_keeps_no_clock():
    engine = Engine(EngineConfig(num_blocks=100), [RequestSpec("a", 0, 4, 4)])
    assert engine.clock is None and engine.writer.clock is None


def test_a_time_past_max_steps_stops_the_run_at_once():
    cfg = EngineConfig(num_blocks=100, max_steps=1000)
    with pytest.raises(StepLimitError, match="idle until step"):
        simulate(cfg, [RequestSpec("a", 0, 4, 4), timed("late", 1e12)])


# ---- the fast-forward and the plain loop --------------------------------------------------------------------------
@st.composite
def long_timed_answers(draw) -> tuple[EngineConfig, list[RequestSpec]]:
    """Few requests with long answers (long quiet stretches), some or all of them arriving by the clock; often one
    or two batch slots, so that arrivals wait through a stretch."""
    reqs = [dataclasses.replace(r, output_len=r.output_len * draw(st.integers(1, 6)),
                                arrival_ms=None if r.arrival_ms is None else r.arrival_ms * 7,
                                arrival_step=None if r.arrival_step is None else r.arrival_step * 7,
                                abort_step=None if r.abort_step is None else r.abort_step * 7)
            for r in draw(requests(max_requests=8, timed=True))]
    cfg = draw(configs())
    return cfg.replace(num_blocks=draw(st.integers(16, 120)), max_steps=20_000,
                       max_num_seqs=draw(st.sampled_from([1, 2, cfg.max_num_seqs]))), reqs


@pytest.mark.slow  # (seconds: CI runs it, the fast loop leaves it out)
@settings(max_examples=EXAMPLES, deadline=None)
@given(case=long_timed_answers())
def test_fast_forward_gives_the_step_loops_trace_with_timed_arrivals(case):
    cfg, reqs = case
    fast, plain = both_ways(cfg, reqs)
    assert not differences(fast, plain)
    assert_arrived_by_the_rule(fast, reqs)


@pytest.mark.slow  # (seconds: CI runs it, the fast loop leaves it out)
@settings(max_examples=EXAMPLES, deadline=None)
@given(case=scenarios(timed=True))
def test_a_timed_run_is_the_run_of_the_steps_they_arrived_at(case):
    # every invariant after every step (no request lost, blocks conserved, ...), and the same trace as when each
    # request is given the step it arrived at: from its arrival on, nothing tells them apart
    cfg, reqs = case
    trace = Engine(cfg, reqs, check_invariants=True).run()
    assert trace.requests["status"].tolist().count(0) == 0  # (NOT_ARRIVED: every request arrived and ended)
    assert_arrived_by_the_rule(trace, reqs)
    assert not differences_but_the_times(trace, Engine(cfg, given_steps(reqs, trace), check_invariants=True).run())


def test_presets_and_files_keep_their_traces_with_a_clock_beside_them():
    # A run whose requests all give steps reads no clock; shedding's clock is the same object timed arrivals use
    cfg = EngineConfig(num_blocks=100, ttft_slo_ms=30.0, shed_past_ttft_slo=True)
    engine = Engine(cfg, [RequestSpec("a", 0, 4, 4)])
    assert engine.shedder.clock is engine.clock is engine.writer.clock


# ---- scenario files -----------------------------------------------------------------------------------------------
def _file(*requests: dict, **config) -> str:
    return json.dumps({"config": {"num_blocks": 100, **config}, "requests": list(requests)})


def test_a_file_gives_arrival_ms_and_round_trips():
    text = _file({"id": "a", "arrival_ms": 12.5, "prompt_len": 4, "output_len": 4},
                 {"id": "b", "arrival_step": 2, "prompt_len": 4, "output_len": 4},
                 {"id": "c", "arrival_ms": 3, "prompt_len": 4, "output_len": 4})
    sc = scenario.loads(text)
    assert [(r.arrival_step, r.arrival_ms) for r in sc.requests] == [(None, 12.5), (2, None), (None, 3.0)]
    assert scenario.loads(scenario.dumps(sc)) == sc
    assert json.loads(scenario.dumps(sc))["requests"][0] == {"id": "a", "arrival_ms": 12.5, "prompt_len": 4,
                                                             "output_len": 4}
    # the column-at-a-time path and the one-by-one path make the same specs
    assert tuple(scenario.request_from_dict(r, i) for i, r in enumerate(json.loads(text)["requests"])) == sc.requests


@pytest.mark.parametrize(("request_keys", "message"), [
    ({"arrival_step": 0, "arrival_ms": 1.0}, "requests[0]: request 'a': arrival_ms: give exactly one of arrival_step"
                                             " (a step) and arrival_ms (a time on the run's clock, ms); it gives both"),
    ({}, "requests[0].arrival_step: required (or arrival_ms, a time on the run's clock)"),
    ({"arrival_step": None}, "requests[0]: request 'a': arrival_step: give exactly one of arrival_step (a step) and "
                             "arrival_ms (a time on the run's clock, ms); it gives neither"),
    ({"arrival_ms": -1.0}, "requests[0]: request 'a': arrival_ms: must be >= 0.0, got -1.0"),
    ({"arrival_ms": True}, "requests[0]: request 'a': arrival_ms: must be a finite number, got True"),
    ({"arrival_ms": "5"}, "requests[0]: request 'a': arrival_ms: must be a finite number, got '5'"),
    ({"arrival_ms": 5.0, "abort_step": 9}, "requests[0]: request 'a': abort_step: a request that arrives by the clock "
                                           "(arrival_ms) cannot give abort_step"),
])
def test_a_bad_arrival_names_the_request_and_the_field(request_keys, message):
    text = _file({"id": "a", "prompt_len": 4, "output_len": 4, **request_keys})
    with pytest.raises(ScenarioError) as e:
        scenario.loads(text)
    assert str(e.value).startswith(message)


def test_the_spec_refuses_both_and_neither_as_a_field_error():
    with pytest.raises(FieldError) as e:
        RequestSpec("a", 0, 4, 4, arrival_ms=1.0)
    assert e.value.name == "request 'a': arrival_ms"
    with pytest.raises(FieldError, match="gives neither"):
        RequestSpec("a", None, 4, 4)
    with pytest.raises(FieldError, match="finite"):
        RequestSpec("a", None, 4, 4, arrival_ms=float("nan"))


def test_the_cli_records_carry_the_time_given():
    trace = simulate(EngineConfig(num_blocks=100), [timed("a", 7.0), RequestSpec("b", 0, 4, 4)])
    a, b = trace.request_records()
    assert list(a)[:4] == ["id", "client", "arrival_step", "arrival_ms"]
    assert (a["arrival_step"], a["arrival_ms"], b["arrival_ms"]) == (2, 7.0, None)
    assert "arrival_ms" not in simulate(EngineConfig(num_blocks=100), [RequestSpec("b", 0, 4, 4)]).request_records()[0]


def test_the_cost_estimate_counts_a_time_at_its_latest_step():
    cfg = EngineConfig(num_blocks=100, cost=CostModel(step_base_ms=5.0))
    estimate = cost_estimate.of_requests(cfg, [timed("a", 1000.0), RequestSpec("b", 3, 4, 4)])
    assert estimate.last_arrival_step == 200 and estimate.last_arrival_ms == 1000.0
    with pytest.raises(ScenarioError, match=r"arrival_step: its requests arrive until step 20,000,000 \(the last "
                                            r"at 100,000,000.0 ms on the run's clock: that step when every step is"):
        cost_estimate.check(cost_estimate.of_requests(cfg, [timed("a", 1e8)]), cost_estimate.CLI_LIMITS)


# ---- the workload generator ----------------------------------------------------------------------------------------
def test_rate_per_s_draws_times_that_round_trip():
    spec = workload_from_dict({"num_requests": 50, "rate_per_s": 25.0, "seed": 3})
    assert spec.rate_per_step is None and spec.on_clock
    reqs = generate(spec)
    times = [r.arrival_ms for r in reqs]
    assert all(r.arrival_step is None and r.abort_step is None for r in reqs)
    assert times == sorted(times) and all(round(t, 3) == t for t in times)
    assert 1000 < times[-1] < 3000  # (50 at 25 a second: ~2 s)
    sc = scenario.scenario_from_dict({"config": {"num_blocks": 10_000}, "workload": {"rate_per_s": 25.0,
                                                                                      "num_requests": 50, "seed": 3}})
    assert scenario.loads(scenario.dumps(sc)) == sc and list(sc.requests) == reqs
    assert json.loads(scenario.dumps(sc))["workload"]["rate_per_s"] == 25.0
    assert "rate_per_step" not in json.loads(scenario.dumps(sc))["workload"]


def test_rate_per_s_clients_share_it_or_give_their_own():
    spec = WorkloadSpec(rate_per_step=None, rate_per_s=10.0, num_requests=400, seed=1,
                        clients=(workload_from_dict({"clients": [{"client_id": "A"}]}).clients[0],
                                 dataclasses.replace(WorkloadSpec().clients[0], client_id="B", rate_per_s=30.0)))
    reqs = generate(spec)
    share_b = sum(r.client_id == "B" for r in reqs) / len(reqs)
    assert 0.65 < share_b < 0.85  # (A takes the workload's 10 a second, B its own 30)


@pytest.mark.parametrize(("workload", "message"), [
    ({"rate_per_s": 5.0, "rate_per_step": 0.5}, "workload.rate_per_s: give one of rate_per_step"),
    ({"rate_per_s": 0.0}, "workload.rate_per_s: must be >= 1e-06"),
    ({"rate_per_s": 5.0, "abandon_rate": 0.2}, "workload.abandon_rate: users who leave part-way are counted in steps"),
    ({"rate_per_s": 5.0, "clients": [{"client_id": "A", "start_step": 10}]},
     "workload.clients[A].start_step: counted in engine steps, which a workload on the clock (rate_per_s)"),
    ({"rate_per_s": 5.0, "clients": [{"client_id": "A", "on_steps": 10, "off_steps": 5}]},
     "workload.clients[A].on_steps: counted in engine steps"),
    ({"rate_per_s": 5.0, "clients": [{"client_id": "A", "rate_per_step": 0.2}]},
     "workload.clients[A].rate_per_step: the workload's arrivals are on the clock (rate_per_s)"),
    ({"clients": [{"client_id": "A", "rate_per_s": 3.0}]},
     "workload.clients[A].rate_per_s: a client's rate per second needs the workload's arrivals on the clock"),
    ({"rate_per_s": 5.0, "clients": [{"client_id": "A", "rate_per_s": 3.0, "rate_per_step": 1.0}]},
     "workload.clients[A].rate_per_s: give one of rate_per_step and rate_per_s, not both"),
])
def test_a_workload_on_the_clock_refuses_what_counts_in_steps(workload, message):
    with pytest.raises(ScenarioError) as e:
        scenario.scenario_from_dict({"config": {"num_blocks": 10_000}, "workload": {"num_requests": 5, **workload}})
    assert str(e.value).startswith(message)


def test_the_workload_estimate_counts_its_span_on_the_clock():
    cfg = EngineConfig(num_blocks=10_000, cost=CostModel(step_base_ms=5.0))
    estimate = cost_estimate.of_workload(cfg, WorkloadSpec(rate_per_step=None, rate_per_s=20.0, num_requests=100))
    assert estimate.last_arrival_ms == 5000.0 and estimate.last_arrival_step == 1000
