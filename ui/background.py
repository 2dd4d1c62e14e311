"""Simulations run ahead in a worker process, so a page that needs several runs (policy variants, a sweep) uses
the machine's other cores while the page's own thread runs one of them.

``Prefetcher.prefetch(items)`` queues ``(key, scenario)`` pairs; ``take(key)`` is what a cache miss calls. It
returns the trace if a worker ran it (waiting while it runs), or None if no worker has started it, and then the
caller runs it itself: a page alone in its process never waits for work that has not begun, so a prefetch can
only save it time. ``take(key, patience_s)`` is for a page that shares its process with others running: its run
goes next to a worker and it waits up to ``patience_s`` for one to start it, since a run in its own thread would
hold the interpreter lock the other pages need (a worker is another process, with its own).

- Each worker gets one scenario at a time (a dispatcher thread per worker hands out the next), so queued work
  stays claimable by the page's thread until a worker is free. Workers take from the back of the queue while
  the page consumes from the front, so the two meet in the middle.
- Workers take the newest work first, so runs queued by a page rerun that was stopped (a slider dragged
  through many values) only use a worker nobody else needs; the oldest are dropped past MAX_QUEUED.
- A key is prefetched once per process: the runner's cache answers the second time.
- With one CPU there are no workers and ``prefetch`` does nothing.
- Errors raised by the simulation (a bad setting, a run that cannot finish) reach the caller of ``take``
  unchanged. A crashed worker is replaced and the run made in the caller's thread.

No Streamlit here: the worker processes import only this module and ``sim``. They are started with "spawn",
which normally re-imports the parent's ``__main__`` in the child; under Streamlit that is the page script (it
would run the page, and start workers of its own), so a process is started with a bare ``__main__`` in place.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
import threading
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from sim import cost_estimate
from sim.engine import simulate
from sim.scenario import Scenario
from sim.trace import Trace
from sim.untrusted import whole_number

MAX_QUEUED = 64  # runs waiting for a worker
MAX_UNCLAIMED = 32  # finished runs kept for a caller that never came (its page rerun was stopped)
MAX_POOL_FAILURES = 3  # pools that die in a row before prefetching stops
MAX_SEEN = 100_000  # keys remembered (a forgotten key costs one run made in the page's thread)


def simulate_scenario(scenario: Scenario) -> Trace:
    """What a worker runs (a module-level function, so it can be sent to another process)."""
    return simulate(scenario.config, scenario.requests, name=scenario.name, limits=cost_estimate.PAGE_LIMITS)


def _warm_up() -> None:
    """A no-op task: the first one makes the worker import numpy and the simulator."""


_MAIN_SWAP = threading.Lock()


@contextmanager
def _bare_main() -> Iterator[None]:
    """While a worker process starts: a ``__main__`` without a file, so the child imports no page script."""
    with _MAIN_SWAP:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


def default_workers() -> int:
    """One worker per CPU beyond the one the page's own thread uses, or SCHEDLAB_PREFETCH_WORKERS (0 = none)."""
    setting = os.environ.get("SCHEDLAB_PREFETCH_WORKERS", "").strip()
    if setting:
        try:
            return whole_number(setting, 0, 1024)
        except ValueError:
            raise ValueError(f"SCHEDLAB_PREFETCH_WORKERS: must be a whole number from 0 to 1,024, got "
                             f"{setting[:30]!r}") from None
    return max((os.cpu_count() or 1) - 1, 0)


class Prefetcher:
    def __init__(self, workers: int | None = None):
        self.workers = default_workers() if workers is None else workers
        self._lock = threading.Condition()
        self._queued: OrderedDict[str, Scenario] = OrderedDict()  # key -> scenario no worker has started
        self._started: OrderedDict[str, Future] = OrderedDict()  # key -> a worker's run, until taken
        self._seen: set[str] = set()  # keys queued or run in this process
        self._pool: ProcessPoolExecutor | None = None
        self._dispatchers: list[threading.Thread] = []
        self._num_failures = 0  # pools dropped in a row
        self._closed = False

    # ---- the page's side ----------------------------------------------------------------------------------
    def prefetch(self, items: Iterable[tuple[str, Scenario]]) -> None:
        """Queue the runs of ``items`` not seen yet (``items`` in the order the caller will take them)."""
        if not self.workers:
            return
        items = list(items)
        with self._lock:
            for key, scenario in items:
                if key not in self._seen:
                    self._seen.add(key)
                    self._queued[key] = scenario
            while len(self._queued) > MAX_QUEUED:
                self._seen.discard(self._queued.popitem(last=False)[0])
            if self._queued:
                self._start()
                self._lock.notify_all()

    def take(self, key: str, patience_s: float = 0.0) -> Trace | None:
        """The worker's trace for ``key`` (waiting if it is running), or None: run it yourself.

        ``patience_s`` > 0 (the caller's process has other work for the interpreter, see ``ui.runner``): a run
        still queued goes next to a worker, and the caller waits up to that long for one to start it rather than
        run it in its own thread; past that, it is the caller's again."""
        with self._lock:
            if len(self._seen) > MAX_SEEN:
                self._seen = set(self._queued) | set(self._started)
            self._seen.add(key)
            if key in self._queued and patience_s > 0 and self.workers:
                self._queued.move_to_end(key)  # workers take from the back: this one next
                self._lock.wait_for(lambda: key not in self._queued, timeout=patience_s)
            if self._queued.pop(key, None) is not None:
                return None
            future = self._started.pop(key, None)
        if future is None:
            return None
        try:
            return future.result()
        except BrokenProcessPool:
            self._reset_pool()
            return None
        except CancelledError:  # another caller reset the pool
            return None
        except pickle.PicklingError:
            # The code changed under a running server (Streamlit reloaded this module): this prefetcher's functions
            # are the old module's and no longer pickle by name. Run here, and prefetch no more until a restart.
            self.close()
            return None

    def status(self, key: str) -> str | None:
        """'queued', 'running' or 'done' (not taken yet); None if the prefetcher holds nothing for ``key``."""
        with self._lock:
            if key in self._queued:
                return "queued"
            future = self._started.get(key)
        if future is None:
            return None
        return "done" if future.done() else "running"

    def warm_up(self) -> None:
        """Start the workers now, so the first page that prefetches does not wait for them to import."""
        if self.workers:
            with self._lock:
                try:
                    self._start()
                    self._submit(_warm_up)
                except (BrokenProcessPool, OSError, RuntimeError) as e:
                    self._pool_failed(e)

    def close(self) -> None:
        """Stop for good: drop the queue and shut the workers down (runs already handed out still finish)."""
        with self._lock:
            self.workers = 0
            self._closed = True
            for key in self._queued:
                self._seen.discard(key)
            self._queued.clear()
            pool, self._pool = self._pool, None
            self._lock.notify_all()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # ---- the workers' side --------------------------------------------------------------------------------
    def _start(self) -> None:
        """(Lock held.) Create the pool and the dispatcher threads if needed."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        while len(self._dispatchers) < self.workers:
            thread = threading.Thread(target=self._dispatch, name="scheduler-lab-prefetch", daemon=True)
            self._dispatchers.append(thread)
            thread.start()

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                while not self._queued and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                key, scenario = self._queued.popitem(last=True)  # the page's thread starts from the front
                try:
                    self._start()  # (again, after a crashed pool was dropped)
                    future = self._submit(simulate_scenario, scenario)
                except (BrokenProcessPool, OSError) as e:  # a worker died, or could not start
                    self._seen.discard(key)
                    self._pool_failed(e)
                    continue
                except RuntimeError:  # the interpreter is shutting down: no more work
                    self._queued.clear()
                    return
                self._started[key] = future
                self._lock.notify_all()  # (a patient taker may be waiting for this run to start)
                while len(self._started) > MAX_UNCLAIMED:
                    old_key, old = next(iter(self._started.items()))
                    if not old.done():
                        break
                    del self._started[old_key]
            wait([future])  # one run at a time per worker (a failed or cancelled run is the taker's business)
            if not future.cancelled() and not isinstance(future.exception(), BrokenProcessPool):
                with self._lock:
                    self._num_failures = 0  # the pool works

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """(Lock held.) ``pool.submit``, which starts the worker process when there is none yet."""
        with _bare_main():
            return self._pool.submit(fn, *args)

    def _pool_failed(self, error: BaseException) -> None:
        """(Lock held.) Drop a pool whose workers died or could not start; after MAX_POOL_FAILURES in a row, stop
        prefetching (everything then runs in the page's thread, as with no workers)."""
        self._pool = None
        self._num_failures += 1
        if self._num_failures >= MAX_POOL_FAILURES:
            self.workers = 0
            for key in self._queued:
                self._seen.discard(key)
            self._queued.clear()
            self._lock.notify_all()  # (a patient taker's run is its own again)
            warnings.warn(f"ui.background: simulation workers keep failing ({error!r}); prefetching is off",
                          RuntimeWarning, stacklevel=2)

    def _reset_pool(self) -> None:
        """A taker found the pool broken: drop it (the dispatchers start a new one for the next run)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool_failed(BrokenProcessPool("a worker died while running a simulation"))
