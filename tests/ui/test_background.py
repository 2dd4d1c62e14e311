"""Runs prefetched in a worker process: the same traces as running them here, errors passed on, never a wait for
work nobody started."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sim import presets, scenario
from sim.engine import SimulationError, StepLimitError, simulate
from tests.conftest import BENCH_SCENARIOS_DIR
from ui import background


def _scenario(sigma: float = 0.5):
    return presets.get("predicted_lengths").scenario.with_config(policy="sjf_predicted",
                                                                 prediction_error_sigma=sigma)


def _wait_for(prefetcher: background.Prefetcher, key: str, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while prefetcher.status(key) != "done":
        assert time.monotonic() < end, f"the worker did not finish {key} in {timeout_s} s"
        time.sleep(0.02)


def _same(a, b) -> bool:
    return (a.num_steps == b.num_steps and a.events == b.events
            and all(np.array_equal(a.steps[k], b.steps[k]) for k in a.steps)
            and all(np.array_equal(a.requests[k], b.requests[k]) for k in a.requests)
            and np.array_equal(a.sched_rows, b.sched_rows) and np.array_equal(a.sched_kind, b.sched_kind))


@pytest.fixture(scope="module")
def prefetcher():
    p = background.Prefetcher(workers=1)
    p.warm_up()
    return p


def test_a_worker_run_is_the_trace_a_local_run_gives(prefetcher):
    front, back = _scenario(0.25), _scenario(1.5)
    prefetcher.prefetch([("front", front), ("back", back)])
    _wait_for(prefetcher, "back")  # the worker starts from the back of the queue
    trace = prefetcher.take("back")
    assert trace is not None and _same(trace, simulate(back.config, back.requests, name=back.name))
    _wait_for(prefetcher, "front")  # then the one left
    trace = prefetcher.take("front")
    assert trace is not None and _same(trace, simulate(front.config, front.requests, name=front.name))
    assert prefetcher.status("front") is None and prefetcher.status("back") is None  # taken: nothing kept


def test_take_waits_for_a_run_in_progress(prefetcher):
    sc = scenario.load(BENCH_SCENARIOS_DIR / "load_2k_tight.json")  # long enough to catch running
    prefetcher.prefetch([("long", sc)])
    end = time.monotonic() + 60
    while prefetcher.status("long") == "queued":
        assert time.monotonic() < end, "the worker did not start"
        time.sleep(0.001)
    assert prefetcher.status("long") == "running"
    trace = prefetcher.take("long")  # blocks until the worker is done, rather than returning None
    assert trace is not None and _same(trace, simulate(sc.config, sc.requests, name=sc.name))


def test_work_no_worker_started_is_left_to_the_caller(prefetcher):
    scenarios = [(f"q{i}", _scenario(0.1 * i)) for i in range(6)]
    prefetcher.prefetch(scenarios)
    # The worker takes one at a time from the back: the front waits in the queue, and take() returns at once.
    assert prefetcher.status("q0") == "queued"
    assert prefetcher.take("q0") is None
    for key, _ in scenarios[1:]:
        prefetcher.take(key)


def test_a_patient_caller_gets_its_queued_run_from_the_worker_next(prefetcher):
    # The worker is busy with a long run; two more are queued, the one asked for at the front (the worker would
    # take it last). A patient take moves it next in line and waits for the worker rather than returning None.
    long = scenario.load(BENCH_SCENARIOS_DIR / "load_2k_tight.json")
    prefetcher.prefetch([("busy", long)])
    end = time.monotonic() + 60
    while prefetcher.status("busy") == "queued":
        assert time.monotonic() < end, "the worker did not start"
        time.sleep(0.001)
    wanted, other = _scenario(0.3), long.with_config(max_num_seqs=32)  # (the other one long too)
    prefetcher.prefetch([("wanted", wanted), ("other", other)])
    trace = prefetcher.take("wanted", patience_s=60.0)
    assert trace is not None and _same(trace, simulate(wanted.config, wanted.requests, name=wanted.name))
    assert prefetcher.status("other") in ("queued", "running")  # not done: "wanted" went ahead of it
    assert prefetcher.take("busy") is not None
    prefetcher.take("other")


def test_a_patient_caller_takes_its_run_back_when_no_worker_starts_it_in_time(prefetcher):
    long = scenario.load(BENCH_SCENARIOS_DIR / "load_2k_tight.json").with_config(max_num_seqs=64)
    prefetcher.prefetch([("busy long", long)])
    end = time.monotonic() + 60
    while prefetcher.status("busy long") == "queued":
        assert time.monotonic() < end, "the worker did not start"
        time.sleep(0.001)
    prefetcher.prefetch([("late", _scenario(0.9))])
    started = time.monotonic()
    assert prefetcher.take("late", patience_s=0.05) is None  # the worker is still on the long run: ours now
    assert time.monotonic() - started < 5.0
    assert prefetcher.status("late") is None
    prefetcher.take("busy long")


def test_a_key_is_prefetched_once(prefetcher):
    sc = _scenario(0.75)
    prefetcher.prefetch([("once", sc)])
    _wait_for(prefetcher, "once")
    assert prefetcher.take("once") is not None
    prefetcher.prefetch([("once", sc)])  # the runner's cache has it now
    assert prefetcher.status("once") is None


def test_a_run_that_fails_in_the_worker_raises_the_same_error(prefetcher):
    bad = _scenario().with_config(max_steps=10)
    with pytest.raises(SimulationError) as local:
        simulate(bad.config, bad.requests)
    prefetcher.prefetch([("bad", bad)])
    _wait_for(prefetcher, "bad")
    with pytest.raises(SimulationError) as remote:
        prefetcher.take("bad")
    assert str(remote.value) == str(local.value)
    assert type(remote.value) is type(local.value) is StepLimitError  # with its figures, for the page's advice
    assert (remote.value.max_steps, remote.value.num_unfinished, remote.value.num_requests) == \
        (local.value.max_steps, local.value.num_unfinished, local.value.num_requests)


def test_without_workers_nothing_is_prefetched():
    p = background.Prefetcher(workers=0)
    p.prefetch([("k", _scenario())])
    assert p.status("k") is None and p.take("k") is None


def test_the_worker_count_can_be_set(monkeypatch):
    monkeypatch.setenv("SCHEDLAB_PREFETCH_WORKERS", "0")
    assert background.default_workers() == 0
    monkeypatch.setenv("SCHEDLAB_PREFETCH_WORKERS", "3")
    assert background.default_workers() == 3
    monkeypatch.setenv("SCHEDLAB_PREFETCH_WORKERS", "two")
    with pytest.raises(ValueError, match="SCHEDLAB_PREFETCH_WORKERS"):
        background.default_workers()


def test_workers_that_keep_dying_turn_prefetching_off(monkeypatch):
    p = background.Prefetcher(workers=1)

    def broken_start():
        raise OSError("no processes here")

    monkeypatch.setattr(p, "_start", broken_start)
    with pytest.warns(RuntimeWarning, match="prefetching is off"):
        for _ in range(background.MAX_POOL_FAILURES):
            p.warm_up()
    assert p.workers == 0
    p.prefetch([("k", _scenario())])  # now a no-op: the caller runs everything itself
    assert p.status("k") is None and p.take("k") is None


def test_a_closed_prefetcher_stops_its_workers_and_prefetches_nothing():
    p = background.Prefetcher(workers=1)
    p.warm_up()
    p.prefetch([("a", _scenario(0.3)), ("b", _scenario(0.6))])
    p.close()
    assert p.workers == 0 and p._pool is None
    p.prefetch([("c", _scenario(0.9))])
    assert p.status("c") is None and p.take("c") is None
    for thread in p._dispatchers:  # the dispatchers leave once the run they handed out (if any) is over
        thread.join(timeout=60)
        assert not thread.is_alive()


def test_a_run_that_cannot_be_pickled_any_more_is_run_by_the_caller():
    """After Streamlit reloads this module on a code change, the old prefetcher's function no longer pickles by
    name: the caller runs the simulation itself (no error box) and prefetching stops until a restart."""
    import pickle
    from concurrent.futures import Future

    p = background.Prefetcher(workers=1)
    broken = Future()
    broken.set_exception(pickle.PicklingError("Can't pickle <function simulate_scenario>: it's not the same object "
                                              "as ui.background.simulate_scenario"))
    p._started["k"] = broken
    assert p.take("k") is None
    p.prefetch([("later", _scenario())])
    assert p.status("later") is None  # prefetching is off
