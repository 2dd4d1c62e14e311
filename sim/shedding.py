"""Deadline-aware shedding, the simulator's own (docs/ENGINE.md#deadline-aware-shedding), and the clock it reads.

With ``shed_past_ttft_slo``, at the start of each step (after the aborts, before scheduling) every request in the
waiting queue that has no first token yet, whose SLO targets apply (``slo``) and whose TTFT target has passed is
dropped: ``now - arrived >= ttft_slo_ms``, ``now`` the clock at the start of the step and ``arrived`` the clock at
the start of its arrival step. Its TTFT (sim/metrics.py: from the start of its arrival step to the end of its first
token's step) could only come out above the target. It ends ``FINISHED_ABORTED``, reason ``deadline_passed``.

Deadlines come in arrival order (one target for all), so the candidates wait in a FIFO and each step looks only at
the overdue ones at its front. A candidate whose deadline passes while it runs or is swapped (mid-prefill, no token
yet) is kept aside: it is shed if a preemption sends it back to the waiting queue before its first token.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from .request import NO_STEP, RequestStatus

if TYPE_CHECKING:
    from .config import EngineConfig
    from .request import RequestTable

_FINISHED = RequestStatus.FINISHED_STOPPED  # (a status at or above it has ended)
_WAITING = (RequestStatus.WAITING, RequestStatus.PREEMPTED)


class Clock:
    """The clock at the end of every step recorded so far: the trace's ``time_ms`` as the run goes, summed one step
    after another as ``np.cumsum`` sums the trace's ``step_ms`` (the same floats; a test compares)."""

    def __init__(self) -> None:
        self._ends = np.empty(1024)
        self.num_steps = 0
        self.now = 0.0  # the end of the last step recorded: the start of the next

    def record(self, step_ms: float | np.ndarray, num_steps: int) -> None:
        """``num_steps`` steps more, each ``step_ms`` long (a number for all, or [num_steps] each its own)."""
        n = self.num_steps
        if n + num_steps > len(self._ends):
            self._ends = np.concatenate([self._ends[:n], np.empty(max(n + num_steps, 2 * n))])
        if num_steps == 1 and not isinstance(step_ms, np.ndarray):
            self.now = self.now + step_ms
            self._ends[n] = self.now
        else:
            sums = np.empty(num_steps + 1)
            sums[0], sums[1:] = self.now, step_ms
            ends = np.cumsum(sums)[1:]
            self._ends[n:n + num_steps] = ends
            self.now = float(ends[-1])
        self.num_steps = n + num_steps

    def start_ms(self, step: int) -> float:
        """The clock at the start of ``step`` (a step already recorded, or the next one)."""
        return float(self._ends[step - 1]) if step else 0.0


class Shedder:
    """Whom to shed at the start of a step (``due``), and when a quiet stretch would first shed (``first_due``)."""

    def __init__(self, config: EngineConfig, table: RequestTable):
        self.target_ms = config.ttft_slo_ms
        self.cost = config.cost
        self.table = table
        self.clock = Clock()
        self._queue: deque[int] = deque()  # accepted rows with an SLO and (when last looked at) no first token, in
        # arrival order: deadline order
        self._overdue: list[int] = []  # rows past their deadline while running or swapped without a first token

    @classmethod
    def of(cls, config: EngineConfig, table: RequestTable) -> Shedder | None:
        return cls(config, table) if config.shed_past_ttft_slo and config.ttft_slo_ms else None  # (no target:
        # none passes)

    def enter(self, row: int, step: int) -> None:
        """Request ``row`` joined the waiting queue on arrival (at ``step``)."""
        if self.table.slo.item(row):
            self._queue.append(row)

    def _done(self, row: int) -> bool:
        """Never to be shed: ended, or has its first token."""
        t = self.table
        return t.status.item(row) >= _FINISHED or t.first_token_step.item(row) != NO_STEP

    def _late(self, row: int, now_ms: float) -> bool:
        return now_ms - self.clock.start_ms(self.table.arrival_step.item(row)) >= self.target_ms

    def due(self, step: int) -> list[int]:
        """The waiting requests to shed at the start of ``step`` (every step before it recorded), in arrival order."""
        now, status, out = self.clock.start_ms(step), self.table.status, []
        if self._overdue:  # (they arrived before any row still in the queue)
            keep = []
            for row in self._overdue:
                if not self._done(row):
                    (out if status.item(row) in _WAITING else keep).append(row)
            self._overdue = keep
        queue = self._queue
        while queue:
            row = queue[0]
            if not self._done(row):
                if not self._late(row, now):
                    break
                (out if status.item(row) in _WAITING else self._overdue).append(row)
            queue.popleft()
        return out

    def first_due(self, first_step: int, num_steps: int, num_running: int, next_arrival: int | None) -> int | None:
        """The first of steps ``first_step`` to ``first_step + num_steps - 1`` at whose start ``due`` could shed
        somebody, when each of them is a step of ``num_running`` decodes (a quiet stretch: nobody ends or gets a
        first token meanwhile); None if none. An arrival within them (``next_arrival``, the first) counts as a
        request that could be shed."""
        if any(not self._done(row) for row in self._overdue):
            return first_step  # (one may be waiting, or come back to the queue)
        queue = self._queue
        while queue and self._done(queue[0]):
            queue.popleft()
        if queue:
            after = 0
        elif next_arrival is not None and next_arrival < first_step + num_steps:
            after = next_arrival - first_step
        else:
            return None
        sums = np.empty(num_steps)  # the clock at the start of each step, summed as Clock.record sums it
        sums[0], sums[1:] = self.clock.now, self.cost.step_ms(0, num_running) + 0.0  # (a decode step, as recorded)
        starts = np.cumsum(sums)
        arrived = self.clock.start_ms(self.table.arrival_step.item(queue[0])) if queue else starts[after]
        late = starts[after:] - arrived >= self.target_ms
        return first_step + after + int(late.argmax()) if late.any() else None
