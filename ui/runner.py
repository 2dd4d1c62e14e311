"""The cached simulator, so moving a slider back is instant and concurrent sessions share results.

A trace is cached once for the whole process (``st.cache_resource``): every session that asks for the same run gets
the same object, read-only (``Trace.freeze``: its arrays refuse writes), without the copy ``st.cache_data`` would
unpickle on every rerun (~20% of a cached Fairness rerun; a class of 30 shares most of its runs). Small derived
values a page may edit (summaries, per-client rows) stay in ``st.cache_data``, a copy for each caller.

The cache key is a hash of the scenario (the full config repr and the request list); the Scenario object itself
is passed unhashed (leading underscore).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import itertools
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from sim import SimulationError, cost_estimate, metrics, presets
from sim.engine import queues_after_step, simulate
from sim.scenario import Scenario
from sim.trace import Trace

from . import background


def scenario_key(scenario: Scenario) -> str:
    """What a run depends on: the config and the request list (not the workload spec: a lesson may edit or
    reorder generated requests)."""
    return hashlib.sha256(f"{scenario.config!r}|{_requests_digest(scenario.requests)}".encode()).hexdigest()


def _requests_digest(requests: tuple | list) -> str:
    """The hash of a request list's repr (300 requests: ~2 ms). A page's variants share one tuple and a rerun asks
    for each run's key a dozen times or more, so a tuple's digest is remembered: by the tuple object itself (a
    dict lookup), then by its contents (hashing 300 frozen specs, ~0.3 ms, ~5x cheaper than their repr: a cached
    request list comes back as a new, equal tuple on each rerun). A list, which could change in place, never is."""
    if not isinstance(requests, tuple):
        return _digest(requests)
    seen = _DIGEST_BY_OBJECT.get(id(requests))
    if seen is not None and seen[0] is requests:
        return seen[1]
    digest = _tuple_digest(requests)
    with _DIGEST_LOCK:  # (every session's thread writes here: the trimming must not race another's insert)
        _DIGEST_BY_OBJECT[id(requests)] = (requests, digest)  # holding the tuple keeps its id from being reused
        while len(_DIGEST_BY_OBJECT) > 64:
            del _DIGEST_BY_OBJECT[next(iter(_DIGEST_BY_OBJECT))]
    return digest


def _digest(requests: tuple | list) -> str:
    return hashlib.sha256(repr(requests).encode()).hexdigest()


_tuple_digest = functools.lru_cache(maxsize=64)(_digest)  # a pure function of an immutable argument
# id(tuple) -> (the tuple, its digest): a memo of immutable values, oldest first, shared by every session (a pure
# cache like _tuple_digest's: no session can see another's state through it)
_DIGEST_BY_OBJECT: dict[int, tuple[tuple, str]] = {}
_DIGEST_LOCK = threading.Lock()


@st.cache_resource(show_spinner=False, on_release=background.Prefetcher.close)
def _prefetcher() -> background.Prefetcher:
    """The process-wide worker pool (one for all sessions: it hands each run to one caller). Released (its
    workers stopped) when Streamlit drops the resource, e.g. on st.cache_resource.clear()."""
    prefetcher = background.Prefetcher()
    prefetcher.warm_up()
    return prefetcher


CACHE_MAX_BYTES = 2**30  # the traces the process keeps cached, all sessions together (Trace.nbytes)


class _ByteBudget:
    """The bytes of each cached trace, oldest first, so that the caches of traces (st.cache_data counts entries,
    not bytes: 256 traces of a 500-client upload held ~560 MB each) drop their oldest entries once they hold more
    than CACHE_MAX_BYTES together (generated workloads, player windows, summaries and measures too:
    ``charge_cache``). One for the process, shared by every session (like the caches)."""

    def __init__(self, max_bytes: int = CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.total = 0
        # (cached function, its hashed arguments) -> bytes
        self._entries: OrderedDict[tuple[Any, tuple], int] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, fn: Any, args: tuple, num_bytes: int) -> None:
        """``fn(*args)`` is cached and holds ``num_bytes``: evict the oldest entries (``fn.clear(*args)``) past the
        budget, never the one just added."""
        evict = []
        with self._lock:
            entry = (fn, args)
            self.total += num_bytes - self._entries.pop(entry, 0)
            self._entries[entry] = num_bytes
            while self.total > self.max_bytes and len(self._entries) > 1:
                old, size = self._entries.popitem(last=False)
                self.total -= size
                evict.append(old)
        for old_fn, old_args in evict:
            old_fn.clear(*old_args)


@st.cache_resource(show_spinner=False)
def _cache_bytes() -> _ByteBudget:
    return _ByteBudget()


def charge_cache(fn: Any, args: tuple, num_bytes: int) -> None:
    """``fn(*args)``, a cached function's entry (underscored arguments given as None), holds ``num_bytes``: it
    counts toward the process's CACHE_MAX_BYTES with the traces, and is dropped oldest first with them."""
    _cache_bytes().add(fn, args, num_bytes)


@st.cache_resource(max_entries=256, show_spinner=False)
def _run(key: str, _scenario: Scenario, snapshot_every_steps: int, _patient: bool = True) -> Trace:
    """The run, shared by every session and read-only (see the module docstring)."""
    if not snapshot_every_steps:
        trace = _prefetcher().take(key, _patience_s() if _patient else 0.0)  # a worker's run, if one started it
        if trace is not None:
            return trace.freeze()
    return simulate(_scenario.config, _scenario.requests, name=_scenario.name,
                    snapshot_every_steps=snapshot_every_steps, limits=cost_estimate.PAGE_LIMITS).freeze()


# How long a page waits for a worker to start a run it queued, when other pages are running in this process.
PATIENCE_S = 0.25
SCRIPT_THREAD_NAME = "ScriptRunner.scriptThread"  # the thread Streamlit runs each page script in


def _patience_s() -> float:
    """0 when this page is the only one running in the process: it runs a queued run itself (nobody waits for a
    worker to start it). With other pages running, a run in this thread takes the interpreter lock from them for
    its whole length while a worker process would not: the page waits up to PATIENCE_S for a worker instead. (A
    class of 30 on one server is what this is for: its replicas' cores are half idle while their page threads
    queue for the lock.)"""
    others = sum(thread.name == SCRIPT_THREAD_NAME for thread in threading.enumerate()) - 1
    return PATIENCE_S if others > 0 else 0.0


# The page runs of the process after whose start the objects alive are frozen (see settle_long_lived_objects).
FREEZE_AT_PAGE_RUNS = (1, 50)
_page_runs = itertools.count(1)


def settle_long_lived_objects() -> None:
    """Called as each page run starts. At the process's first page run, and again at its 50th (by then a class has
    opened every lesson), take what is alive out of the garbage collector's full passes (``gc.freeze``).

    A full collection walks every tracked object while holding the interpreter lock: in a server, ~170,000 of
    them, almost all the modules' functions, classes and dicts, which live as long as the process. It took
    0.14-0.26 s, and a replica under a class made one every ~15 s, stalling every page in the process. Frozen
    objects are still freed when their count of references drops to zero; only one that later becomes part of an
    unreachable cycle is kept (at most what a session or two alive at those two moments leave: their objects)."""
    if next(_page_runs) in FREEZE_AT_PAGE_RUNS:
        gc.collect()  # (garbage first: only what is alive is frozen)
        gc.freeze()


def check_cost(scenario: Scenario) -> None:
    """Refuse (``ScenarioError``) a run past the app's limits (``sim.cost_estimate.PAGE_LIMITS``) before it
    starts: an uploaded file within them can still be pushed past them by a slider (longer answers, more
    requests). Remembered per scenario (the estimate reads every request: ~10 ms for 20,000)."""
    key = scenario_key(scenario)
    with _DIGEST_LOCK:
        error = _COST_CHECKED.get(key, False)
    if error is False:
        try:
            cost_estimate.check(cost_estimate.of_requests(scenario.config, scenario.requests),
                                cost_estimate.PAGE_LIMITS, SLIDER_ADVICE)
            error = None
        except ValueError as e:
            error = e
        with _DIGEST_LOCK:
            _COST_CHECKED[key] = error
            while len(_COST_CHECKED) > 1024:
                del _COST_CHECKED[next(iter(_COST_CHECKED))]
    if error is not None:
        raise error


SLIDER_ADVICE = ("move the sliders that add work (answer lengths, requests, clients) back, or run the scenario with "
                 "`python -m sim run FILE`, which allows more")
# scenario key -> the refusal of its cost, or None if within the app's limits (a pure memo of the key, oldest first)
_COST_CHECKED: dict[str, ValueError | None] = {}


def run(scenario: Scenario, snapshot_every_steps: int = 0, *, patient: bool = True) -> Trace:
    """Simulate ``scenario`` (cached). Raises sim.SimulationError for a run that cannot finish (and ValueError
    for a request list the engine refuses, ScenarioError for one past the app's limits); the error is remembered,
    so asking again does not run it again."""
    key = scenario_key(scenario)
    ready = _ready_keys()
    ready.raise_if_failed(key)
    try:
        check_cost(scenario)
        trace = _run(key, scenario, snapshot_every_steps, patient)
        charge_cache(_run, (key, None, snapshot_every_steps), trace.nbytes())
    except (SimulationError, ValueError) as e:
        ready.add(key, e)
        raise
    if not snapshot_every_steps:
        ready.add(key)
    return trace


class _ReadyKeys:
    """The keys of the runs this process has made (so they are cached), newest last; at most MAX_KEYS. A run
    that failed is kept with its error: it is done too (a sweep polling for it must not run it again and again)."""

    MAX_KEYS = 4096  # well past the caches' sizes: a forgotten key only makes a sweep wait for a cached run

    def __init__(self) -> None:
        self._keys: OrderedDict[str, Exception | None] = OrderedDict()  # key -> the run's error, None if it ran
        self._lock = threading.Lock()

    def add(self, key: str, error: Exception | None = None) -> None:
        with self._lock:
            self._keys[key] = error
            self._keys.move_to_end(key)
            if len(self._keys) > self.MAX_KEYS:
                self._keys.popitem(last=False)

    def raise_if_failed(self, key: str) -> None:
        error = self._keys.get(key)
        if error is not None:
            raise error

    def __contains__(self, key: str) -> bool:
        return key in self._keys


@st.cache_resource(show_spinner=False)
def _ready_keys() -> _ReadyKeys:
    """One registry for the process, like the caches it indexes (Streamlit's resource cache, not a global)."""
    return _ReadyKeys()


def is_ready(key: str) -> bool:
    """Would ``run`` or ``measure`` of the scenario with ``scenario_key`` ``key`` be quick now: made before (so
    cached) or finished by a worker? (A cache entry evicted since only makes that call slow, never wrong.)"""
    return key in _ready_keys() or _prefetcher().status(key) == "done"


def prefetch(scenarios: Sequence[Scenario]) -> None:
    """About to ``run`` (or ``measure``) each of ``scenarios``: start the ones never run in this process on the
    other cores (ui.background), so the page's own thread shares the work. The page's thread takes them from the
    front of this list and the workers from the back: put last what the page needs soonest but leaves to them."""
    _prefetcher().prefetch((scenario_key(sc), sc) for sc in scenarios if _within_limits(sc))


def _within_limits(scenario: Scenario) -> bool:
    try:
        check_cost(scenario)
    except ValueError:
        return False  # (``run`` says why, when the page asks for it)
    return True


def _charged(fn: Any, args: tuple, value: Any) -> Any:
    """``value``, just computed for a ``st.cache_data`` entry of ``fn(*args)`` (underscored arguments as None),
    charged to the process's byte budget at its pickle's size: what the cache stores. (Those caches count
    entries; a thousand small values are nothing, but a value that grows with the workload, e.g. per-client rows of
    a 100-client upload, would be kept a thousand times.) Called on a miss only: one more pickle of a small value."""
    charge_cache(fn, args, len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))
    return value


@st.cache_data(max_entries=256, show_spinner=False)
def _summary(key: str, _trace: Trace) -> dict:
    return _charged(_summary, (key, None), metrics.summary(_trace))


def summary(scenario: Scenario, trace: Trace) -> dict:
    return _summary(scenario_key(scenario), trace)


@st.cache_data(max_entries=128, show_spinner=False)
def _queues(key: str, _scenario: Scenario, step: int) -> dict[str, list[str]]:
    return _charged(_queues, (key, None, step), queues_after_step(_scenario.config, _scenario.requests, step))


def queues_at(scenario: Scenario, step: int) -> dict[str, list[str]]:
    """Waiting queue (admission order), running list and swapped queue at the end of ``step`` (cached): the home
    page's picture of one step."""
    return _queues(scenario_key(scenario), scenario, step)


@st.cache_data(max_entries=32, show_spinner=False)
def _computed(name: str, key: str, _fn: Callable[[], Any]) -> Any:
    return _charged(_computed, (name, key, None), _fn())


def computed(name: str, key: str, fn: Callable[[], Any]) -> Any:
    """The result of a pure computation over many runs (e.g. a sizing sweep), cached under ``(name, key)``:
    ``key`` must change whenever the result would (build it from ``scenario_key``)."""
    return _computed(name, key, fn)


@st.cache_data(max_entries=1024, show_spinner=False)
def _measure(key: str, name: str, args: tuple, _scenario: Scenario, _fn: Callable[..., Any],
             _trace: Trace | None) -> Any:
    return _charged(_measure, (key, name, args, None, None, None),
                    _fn(run(_scenario) if _trace is None else _trace, *args))


def measure(scenario: Scenario, fn: Callable[..., Any], *args: Any, trace: Trace | None = None) -> Any:
    """``fn(trace of scenario, *args)``, cached per scenario, function and (hashable) ``args``: for the numbers a
    page needs from a run on every rerun (per-client rows, fairness statistics, one point of a sweep) without
    recomputing them or unpickling the trace again. ``fn`` must be a pure module-level function of the trace.
    ``trace``: the scenario's trace if the caller has it already (spares fetching it from the cache)."""
    key = scenario_key(scenario)
    _ready_keys().raise_if_failed(key)
    value = _measure(key, f"{fn.__module__}.{fn.__qualname__}", args, scenario, fn, trace)
    _ready_keys().add(key)
    return value


@st.cache_resource(max_entries=16, show_spinner=False)
def presets_for(lesson: str) -> tuple[presets.Preset, ...]:
    """A lesson's presets (cached: building them generates every preset's workload, ~20 ms a rerun). One tuple of
    frozen presets for every session: no copy to unpickle on each rerun."""
    return tuple(presets.presets_for(lesson))
