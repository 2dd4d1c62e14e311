"""Deadline-aware shedding, the simulator's own (docs/ENGINE.md#deadline-aware-shedding).

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

from .request import NO_STEP, RequestStatus

if TYPE_CHECKING:
    from .clock import Clock
    from .config import EngineConfig
    from .request import RequestTable

_FINISHED = RequestStatus.FINISHED_STOPPED  # (a status at or above it has ended)
_WAITING = (RequestStatus.WAITING, RequestStatus.PREEMPTED)


class Shedder:
    """Whom to shed at the start of a step (``due``), and when a quiet stretch would first shed (``first_due``)."""

    def __init__(self, config: EngineConfig, table: RequestTable, clock: Clock):
        self.target_ms = config.ttft_slo_ms
        self.cost = config.cost
        self.table = table
        self.clock = clock  # the run's (sim/clock.py), told every step as it is recorded
        self._queue: deque[int] = deque()  # accepted rows with an SLO and (when last looked at) no first token, in
        # arrival order: deadline order
        self._overdue: list[int] = []  # rows past their deadline while running or swapped without a first token

    @staticmethod
    def wanted(config: EngineConfig) -> bool:
        """Shedding is on: ``shed_past_ttft_slo`` with a TTFT target (without one, none passes)."""
        return bool(config.shed_past_ttft_slo and config.ttft_slo_ms)

    @classmethod
    def of(cls, config: EngineConfig, table: RequestTable, clock: Clock | None) -> Shedder | None:
        """The engine's shedder reading ``clock`` (the run's), or None when shedding is off."""
        return cls(config, table, clock) if cls.wanted(config) else None

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
        # The clock at the start of each step, each a decode step as recorded (sim/clock.py sums them as it will)
        starts = self.clock.ahead(self.cost.step_ms(0, num_running) + 0.0, num_steps)
        arrived = self.clock.start_ms(self.table.arrival_step.item(queue[0])) if queue else starts[after]
        late = starts[after:] - arrived >= self.target_ms
        return first_step + after + int(late.argmax()) if late.any() else None
