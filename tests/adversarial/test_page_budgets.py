"""The app's side of issue 19: a run past the app's limits is refused before it starts (sliders included), a
refused run is never prefetched, and the caches of traces drop their oldest entries past their byte budget."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from sim import RequestSpec, presets
from sim.scenario import Scenario, ScenarioError
from ui import knobs, player, runner


class _Cached:
    """A stand-in for a cached function: records which entries were cleared."""

    def __init__(self) -> None:
        self.cleared: list[tuple] = []

    def clear(self, *args) -> None:
        self.cleared.append(args)


def test_the_byte_budget_drops_the_oldest_traces_first_never_the_newest():
    budget, fn = runner._ByteBudget(max_bytes=1_000), _Cached()
    budget.add(fn, ("a",), 400)
    budget.add(fn, ("b",), 400)
    assert fn.cleared == [] and budget.total == 800
    budget.add(fn, ("a",), 400)  # asked again: now the newest (the same entry, counted once)
    assert budget.total == 800
    budget.add(fn, ("c",), 500)  # 1,300 > 1,000: the oldest, b, goes
    assert fn.cleared == [("b",)] and budget.total == 900
    budget.add(fn, ("d",), 5_000)  # bigger than the whole budget: everything else goes, d stays
    assert fn.cleared == [("b",), ("a",), ("c",)] and budget.total == 5_000


def test_the_budget_evicts_a_shared_trace_from_the_real_cache(monkeypatch, no_prefetch_workers):
    # The traces live in st.cache_resource (one object for every session): the budget's clear must reach it.
    budget = runner._ByteBudget(max_bytes=1)
    monkeypatch.setattr(runner, "_cache_bytes", lambda: budget)
    first_sc = presets.get("article_hol").scenario.with_config(max_num_seqs=3)
    second_sc = first_sc.with_config(max_num_seqs=4)
    first = runner.run(first_sc)
    assert runner.run(first_sc) is first  # cached: the same object
    runner.run(second_sc)  # over the budget: the older run is dropped
    again = runner.run(first_sc)
    assert again is not first and again.num_steps == first.num_steps  # run anew, the same run


def test_generated_workloads_and_player_windows_count_toward_the_same_budget(monkeypatch, no_prefetch_workers):
    # They are cached by entries too (64 each): 64 workloads of 20,000 requests hold ~350 MB, outside the traces'
    # budget. Each entry now counts its bytes, and the budget drops them from the real caches.
    budget = runner._ByteBudget(max_bytes=1)
    monkeypatch.setattr(runner, "_cache_bytes", lambda: budget)
    sc = presets.get("busy_server").scenario
    first = knobs.scenario_with(sc, sc.config, sc.workload)
    assert budget.total == knobs.SPEC_BYTES * len(first.requests)
    assert knobs.scenario_with(sc, sc.config, sc.workload).requests is first.requests  # cached: the same tuple
    knobs.scenario_with(sc, sc.config, sc.workload.replace(seed=sc.workload.seed + 1))  # past the budget
    again = knobs.scenario_with(sc, sc.config, sc.workload)
    assert again.requests is not first.requests and again.requests == first.requests  # drawn anew, the same
    trace = runner.run(again)
    _, _, payload = player.window_payload("FCFS", again, trace, 0, block_map=False, detail=False)
    assert budget.total == len(payload)  # the newest entry; everything older was dropped
    assert player.window_payload("FCFS", again, trace, 0, block_map=False, detail=False)[2] is payload
    runner.run(presets.get("article_hol").scenario)  # a trace past the budget: the window goes
    assert player.window_payload("FCFS", again, trace, 0, block_map=False, detail=False)[2] is not payload


_CALLS: list[int] = []


def _counted_requests(trace) -> list[str]:
    """A measure that grows with the run (a list a request) and counts how often it is computed."""
    _CALLS.append(1)
    return [f"request {i}" for i in range(trace.num_requests)]


def test_summaries_and_measures_count_their_bytes_and_leave_the_real_caches_past_the_budget(
        monkeypatch, no_prefetch_workers):
    # st.cache_data counts entries only (1,024 measures, 256 summaries): each entry now counts its pickle's bytes
    # toward the process's budget, and past it the oldest leave the real cache (asked again: computed again).
    budget = runner._ByteBudget(max_bytes=10**9)
    monkeypatch.setattr(runner, "_cache_bytes", lambda: budget)
    sc = presets.get("busy_server").scenario.with_config(max_num_seqs=7)
    trace = runner.run(sc)
    before = budget.total
    _CALLS.clear()
    rows = runner.measure(sc, _counted_requests, trace=trace)
    assert budget.total - before == len(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)) > 10 * len(rows)
    assert runner.measure(sc, _counted_requests, trace=trace) == rows and len(_CALLS) == 1  # cached
    summary = runner.summary(sc, trace)
    assert budget.total - before == (len(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
                                     + len(pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)))
    budget.max_bytes = 1  # nothing older fits: the next entry added pushes every other one out
    runner.computed("test.small", runner.scenario_key(sc), lambda: 1)
    assert runner.measure(sc, _counted_requests, trace=trace) == rows and len(_CALLS) == 2  # dropped: computed again


@pytest.mark.parametrize("preset", ["busy_server", "article_fairness", "prefix_cache"])
def test_a_trace_knows_about_how_many_bytes_it_holds(preset):
    # the budget counts a cached trace's arrays and lists: about its pickle's size (what a worker sends), give or
    # take half
    sc = presets.get(preset).scenario
    trace = runner.simulate(sc.config, sc.requests, snapshot_every_steps=50)
    size = len(pickle.dumps(trace))
    assert size / 2 < trace.nbytes() < 2 * size, (trace.nbytes(), size)


def test_a_run_pushed_past_the_apps_limits_is_refused_and_not_prefetched(monkeypatch):
    sc = presets.get("article_hol").scenario
    long = dataclasses.replace(sc, requests=tuple(RequestSpec(f"r{i}", 0, 200, 50_000) for i in range(200)))
    queued: list = []

    class Prefetcher:
        def prefetch(self, runs) -> None:
            queued.extend(runs)

    monkeypatch.setattr(runner, "_prefetcher", Prefetcher)
    runner.prefetch([sc, long])
    assert [key for key, _ in queued] == [runner.scenario_key(sc)]
    with pytest.raises(ScenarioError, match=r"^tokens: its requests hold 10,040,000 tokens .* this app runs at most "
                                            r"8,000,000 a scenario; move the sliders that add work"):
        runner.check_cost(long)


def test_a_workload_slider_past_the_apps_limits_is_refused_before_drawing(monkeypatch):
    sc = presets.get("busy_server").scenario
    monkeypatch.setattr(knobs, "_generate", lambda key, w: pytest.fail("drew the workload"))
    workload = sc.workload.replace(num_requests=20_000, output_median=2_000, prompt_median=4_000)
    with pytest.raises(ScenarioError, match=r"^tokens: its requests hold .* and this app runs at most 8,000,000"):
        knobs.scenario_with(Scenario(sc.name, sc.config, sc.requests, workload=sc.workload), sc.config, workload)
