"""Waiting-queue orders: who is admitted next (docs/ENGINE.md#waiting-queue-orders). Each policy's record in
``sim.policies`` builds its queue from the classes here.

All queues hold request rows and share one small interface (``add``, ``prepend``, ``peek``, ``pop``, ``remove``,
``order``). ``prepend`` is where a preempted request goes back: the front for FCFS (as vLLM), its key position for
keyed orders (as vLLM's priority queue), the front of its client's queue for VTC.

- ``fcfs``: arrival order (vLLM's default).
- ``priority``: smallest ``(priority, arrival_step)`` first (vLLM's ``priority`` policy).
- ``sjf``: shortest remaining answer first, using the true length (an oracle).
- ``sjf_predicted``: shortest *predicted* remaining answer first (true length x seeded lognormal error).
  Both SJF orders take an optional starvation guard: a request waiting ``threshold`` steps is promoted ahead of
  all others and keeps that promotion for ``quantum`` steps of running, then is demoted.
- ``vtc``: Virtual Token Counter (Sheng et al., OSDI '24): the head request of the backlogged client with the
  lowest counter; a client whose queue goes from empty to non-empty is lifted (the rule and the counters' charges
  are ``sim.vtc.VirtualCounters``'s; the queue says when). ``lcf`` (least counter first) is the same without the
  lift.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable

import numpy as np

from .request import NO_STEP, RequestTable
from .vtc import VirtualCounters


class RequestQueue:
    """FCFS: a deque in arrival order; preempted requests go back to the front."""

    def __init__(self) -> None:
        self._dq: deque[int] = deque()

    def __len__(self) -> int:
        return len(self._dq)

    def add(self, row: int) -> None:
        self._dq.append(row)

    def prepend(self, row: int) -> None:
        self._dq.appendleft(row)

    def peek(self) -> int:
        return self._dq[0]

    def pop(self) -> int:
        return self._dq.popleft()

    def remove(self, row: int) -> None:
        self._dq.remove(row)

    def order(self, limit: int | None = None) -> list[int]:
        """Rows in the order they would be admitted if nothing changed (the first ``limit`` of them)."""
        return list(self._dq if limit is None else itertools.islice(self._dq, limit))

    def on_step(self, step: int) -> list[int]:
        """Called before admission each step (time-driven orders use it); returns the rows it promoted."""
        return []

    def next_promotion_step(self) -> int | None:
        """The first step at which ``on_step`` may reorder the queue (None: never, until something is added)."""
        return None

    def on_scheduled(self, rows: np.ndarray) -> None:
        """Called with the rows that ran this step."""

    def on_scheduled_steps(self, rows: np.ndarray, num_steps: int) -> None:
        """Called with the rows that ran in each of ``num_steps`` steps (a quiet stretch)."""


class KeyedQueue(RequestQueue):
    """Smallest key first (a heap with lazy deletion), with an optional starvation guard for SJF orders."""

    def __init__(
        self,
        key: Callable[[int], tuple],
        num_rows: int,
        wait_start_step: np.ndarray | None = None,
        starvation_threshold_steps: int = 0,
        priority_quantum_steps: int = 0,
    ):
        super().__init__()
        self._key = key
        self._heap: list[tuple] = []
        self._seq = 0
        self._entry = np.full(num_rows, -1, dtype=np.int64)  # [rows] seq of the live heap entry, -1 = absent
        self._size = 0
        # Starvation guard.
        self._threshold = starvation_threshold_steps
        self._quantum = priority_quantum_steps
        self._wait_start = wait_start_step  # [rows] int64, shared with the request table
        self._by_wait: list[tuple[int, int, int]] = []  # (wait_start_step, seq, row)
        self._promoted: deque[int] = deque()  # promoted waiting rows, oldest first
        self.quantum_left = np.zeros(num_rows, dtype=np.int64)  # [rows] >0 = promoted

    def __len__(self) -> int:
        return self._size + len(self._promoted)

    @property
    def has_guard(self) -> bool:
        return self._threshold > 0

    def add(self, row: int) -> None:
        if self.quantum_left[row] > 0:
            self._promoted.appendleft(row)
            return
        self._seq += 1
        self._entry[row] = self._seq
        heapq.heappush(self._heap, (*self._key(row), self._seq, row))
        self._size += 1
        if self.has_guard:
            heapq.heappush(self._by_wait, (self._wait_start.item(row), self._seq, row))

    prepend = add  # a preempted request is re-inserted by its key, as in vLLM's priority queue

    def _clean(self) -> None:
        while self._heap and self._entry[self._heap[0][-1]] != self._heap[0][-2]:
            heapq.heappop(self._heap)

    def peek(self) -> int:
        if self._promoted:
            return self._promoted[0]
        self._clean()
        return self._heap[0][-1]

    def pop(self) -> int:
        if self._promoted:
            return self._promoted.popleft()
        self._clean()
        row = heapq.heappop(self._heap)[-1]
        self._entry[row] = -1
        self._size -= 1
        return row

    def remove(self, row: int) -> None:
        if self._entry[row] >= 0:
            self._entry[row] = -1
            self._size -= 1
        else:
            self._promoted.remove(row)

    def order(self, limit: int | None = None) -> list[int]:
        live = (e for e in self._heap if self._entry[e[-1]] == e[-2])
        first = list(self._promoted if limit is None else itertools.islice(self._promoted, limit))
        rest = sorted(live) if limit is None else heapq.nsmallest(max(limit - len(first), 0), live)
        return first + [e[-1] for e in rest]

    def on_step(self, step: int) -> list[int]:
        promoted: list[int] = []
        if not self.has_guard:
            return promoted
        due = step - self._threshold
        while self._by_wait and self._by_wait[0][0] <= due:
            _, seq, row = heapq.heappop(self._by_wait)
            if self._entry[row] == seq:  # still waiting under that entry: promote it
                self._entry[row] = -1
                self._size -= 1
                self.quantum_left[row] = self._quantum
                self._promoted.append(row)
                promoted.append(row)
        return promoted

    def next_promotion_step(self) -> int | None:
        # The oldest entry may be stale (its request already left): then the answer is merely early.
        return self._by_wait[0][0] + self._threshold if self.has_guard and self._by_wait else None

    def on_scheduled(self, rows: np.ndarray) -> None:
        self.on_scheduled_steps(rows, 1)

    def on_scheduled_steps(self, rows: np.ndarray, num_steps: int) -> None:
        if self.has_guard and len(rows):
            q = self.quantum_left[rows]
            self.quantum_left[rows] = np.maximum(q - num_steps, 0)


class VTCQueue(RequestQueue):
    """Per-client FIFO queues; the backlogged client with the lowest virtual counter goes next (its head row breaks
    a tie). The counters, their charges and the lift rule are ``sim.vtc.VirtualCounters``'s: this queue says when a
    client joins (the lift's moment) and who left last.

    Only backlogged clients have a queue here, and a lazy heap finds the lowest: each has one live entry (counter,
    head row, sequence number, client), its key when pushed; ``_next_client`` drops the dead entries on top and
    pushes anew the keys that grew (why the first that holds its client's key is the lowest:
    docs/PERFORMANCE.md#the-vtc-queues-lazy-heap)."""

    def __init__(self, table: RequestTable, vtc: VirtualCounters):
        super().__init__()
        self._client = table.client
        self._first_scheduled_step = table.first_scheduled_step  # [rows], shared with the request table
        self._vtc = vtc
        self._counters = vtc.counters  # [num_clients] float64, updated in place by its owner
        self._queues: dict[int, deque[int]] = {}  # client -> its waiting rows, oldest first; never empty
        self._heap: list[tuple[float, int, int, int]] = []  # (counter, head row, sequence, client); see above
        self._live: dict[int, int] = {}  # backlogged client -> the sequence number of its live entry
        self._seq = 0
        self._size = 0
        self._last_left: int | None = None  # the client whose last waiting request left the queue most recently

    def __len__(self) -> int:
        return self._size

    def _push(self, c: int, q: deque[int]) -> None:
        """Client ``c``'s head changed (its queue ``q``): its key now is its live entry."""
        self._seq += 1
        self._live[c] = self._seq
        heapq.heappush(self._heap, (self._counters.item(c), q[0], self._seq, c))

    def add(self, row: int) -> None:
        c = self._client.item(row)
        q = self._queues.get(c)
        if q is None:  # the client joins the queue: VTC lifts its counter (LCF does not)
            lowest = [self._next_client()] if self._queues else []  # (the lowest counter of the others waiting)
            self._vtc.lift(c, lowest, self._last_left)
            q = self._queues[c] = deque([row])
            self._push(c, q)
        else:
            q.append(row)
        self._size += 1

    def prepend(self, row: int) -> None:
        # NOTE: a preempted request rejoins its client's queue without a lift: the client was not idle.
        c = self._client.item(row)
        q = self._queues.get(c)
        if q is None:
            q = self._queues[c] = deque()
        q.appendleft(row)
        self._push(c, q)
        self._size += 1

    def _next_client(self) -> int:
        heap, live, counters = self._heap, self._live, self._counters
        while True:
            counter, head, seq, c = heap[0]
            if live.get(c) != seq:  # the client left, or its head changed since: a dead entry
                heapq.heappop(heap)
                continue
            now = counters.item(c)
            if now == counter:
                return c
            self._seq += 1  # its counter grew since: its key now, further down
            live[c] = self._seq
            heapq.heapreplace(heap, (now, head, self._seq, c))

    def peek(self) -> int:
        return self._queues[self._next_client()][0]

    def heads_over(self, counters: np.ndarray) -> np.ndarray:
        """[n] the row ``peek`` would give with each row of ``counters`` ([n, clients]) as the counters, the
        queue's requests staying as they are: the backlogged client lowest in that row, the lowest head row
        breaking a tie. The fast-forward's head in each step of a stretch with no arrival (the counters grow every
        step, so the head may pass from one client to another)."""
        heads = sorted((q[0], c) for c, q in self._queues.items())
        if len(heads) == 1:
            return np.full(len(counters), heads[0][0], dtype=np.int64)
        rows = np.array([row for row, _ in heads], dtype=np.int64)
        columns = np.array([c for _, c in heads], dtype=np.int64)  # by head row: argmin takes the first lowest
        return rows[counters[:, columns].argmin(axis=1)]

    def pop(self) -> int:
        self._size -= 1
        c = self._next_client()
        q = self._queues[c]
        row = q.popleft()
        if q:
            self._push(c, q)
        else:
            self._left(c)
        return row

    def remove(self, row: int) -> None:
        c = self._client.item(row)
        q = self._queues[c]
        was_head = q[0] == row
        q.remove(row)
        self._size -= 1
        if not q:
            self._left(c)
        elif was_head:
            self._push(c, q)

    def _left(self, c: int) -> None:
        """Client ``c``'s last waiting request left the queue."""
        del self._queues[c], self._live[c]
        self._last_left = c

    def order(self, limit: int | None = None) -> list[int]:
        """Rows in the order they would be admitted if nothing else changed: each admission charges its prompt
        to its client's counter, so the next pick may be another client's (counters also move as tokens flow).
        ``limit``: only the first that many."""
        counters = self._counters.copy()
        queues = {c: deque(q) for c, q in self._queues.items()}
        rows: list[int] = []
        for _ in range(self._size if limit is None else min(self._size, limit)):
            c = min(queues, key=lambda c: (counters[c], queues[c][0]))
            q = queues[c]
            row = q.popleft()
            if not q:
                del queues[c]
            if self._first_scheduled_step.item(row) == NO_STEP:  # a resumed request was charged the first time
                counters[c] += self._vtc.prompt_charge[row]
            rows.append(row)
        return rows


def predicted_lengths(table: RequestTable, sigma: float, seed: int) -> np.ndarray:
    """[rows] int64: each answer's true length times a lognormal error (median 1), at least 1 token."""
    rng = np.random.default_rng(seed)
    error = rng.lognormal(mean=0.0, sigma=sigma, size=len(table)) if sigma > 0 else np.ones(len(table))
    return np.maximum(np.rint(table.target_len * error), 1).astype(np.int64)
