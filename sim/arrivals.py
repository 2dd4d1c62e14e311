"""When requests come and when their clients leave: the engine's calendar (docs/ENGINE.md#the-step-loop,
docs/ENGINE.md#arrivals-on-the-clock, docs/ENGINE.md#disconnects-and-aborts). The engine does what it calls for
(sim/engine.py: ``arrive``, ``_disconnect``); this module only says who and when.

``Arrivals``: each request arrives at the step it gives (``arrival_step``), or, given a time (``arrival_ms``), at the
first step whose start the run's clock has reached it (sim/clock.py), in file order within a step. A timed request's
step is known only as the run goes: the engine reads the clock at the step it runs, and ahead of the record (an idle
or a quiet stretch) every step lasts the same ``step_ms``, which the engine says.

``Leaving``: clients that leave (``abort_step``; ``timeout_steps`` after the arrival step, registered at the start
for a request given its step and when it arrives for one given a time) and the steps the server notices them.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .events import FinishReason
from .request import NO_STEP

if TYPE_CHECKING:
    from .clock import Clock
    from .config import EngineConfig
    from .request import RequestSpec, RequestTable


class Arrivals:
    """The arrivals still to come. Those given a step are read by the engine's loop directly (``steps``, ``rows``,
    ``next``: the fast path of a step); ``timed_left`` says whether any given a time remain."""

    def __init__(self, table: RequestTable, clock: Clock | None, max_steps: int):
        # Arrivals given a step, in step order, file order within a step
        by_step = None if table.arrival_ms is None else np.flatnonzero(table.arrival_step != NO_STEP)
        if by_step is None:
            order = np.argsort(table.arrival_step, kind="stable")
        else:
            order = by_step[np.argsort(table.arrival_step[by_step], kind="stable")]
        self.steps: list[int] = table.arrival_step[order].tolist()  # ascending, as Python ints
        self.rows: list[int] = order.tolist()
        self.next = 0  # the first of them still to come
        # Those given a time, in time order (file order at one time); a clock reads when they come
        self.table, self.clock, self.max_steps = table, clock, max_steps
        self._ms: list[float] = []
        self._timed_rows: list[int] = []
        if table.arrival_ms is not None:
            timed = np.flatnonzero(table.arrival_step == NO_STEP)
            timed = timed[np.argsort(table.arrival_ms[timed], kind="stable")]
            self._ms, self._timed_rows = table.arrival_ms[timed].tolist(), timed.tolist()
        self._next_timed = 0
        self.timed_left = bool(self._ms)  # some request given a time has not arrived yet

    def next_step(self, step_ms: float, before: int | None = None) -> int | None:
        """The step of the next arrival still to come (None: none), each step not yet recorded lasting ``step_ms``.
        Given ``before``, a step at or past ``before`` may stand for any arrival that late (the caller asks only
        whether one comes before it: a time far ahead is then not summed to)."""
        step = self.steps[self.next] if self.next < len(self.steps) else None
        if not self.timed_left:
            return step
        if step is not None:  # (only whether the timed one comes first matters)
            before = step + 1 if before is None else min(before, step + 1)
        timed = self.clock.first_step_at(self._ms[self._next_timed], step_ms, before, self.max_steps)
        return timed if step is None else min(step, timed)

    def take_timed(self, step: int, step_ms: float) -> list[int]:
        """The rows given a time that arrive at ``step`` (the clock at its start reached their time; ahead of the
        record each step lasting ``step_ms``), taken off the list in time order, each given ``step`` as its arrival
        step."""
        clock, i = self.clock, self._next_timed
        start = (clock.start_ms(step) if step <= clock.num_steps
                 else float(clock.ahead(step_ms, step - clock.num_steps + 1)[-1]))
        j = bisect.bisect_right(self._ms, start, lo=i)
        if j == i:
            return []
        rows = self._timed_rows[i:j]
        self._next_timed = j
        self.timed_left = j < len(self._ms)
        self.table.arrival_step[rows] = step
        return rows

    def take_given(self, step: int) -> list[int]:
        """The rows given ``step`` itself, taken off the list, in file order."""
        steps, i = self.steps, self.next
        while i < len(steps) and steps[i] == step:
            i += 1
        rows = self.rows[self.next:i]
        self.next = i
        return rows


class Leaving:
    """Clients that leave at a step (``at``: step -> [(row, reason)], the aborts then the timeouts, each by row) and
    the steps the server notices them (``noticed``: step -> [rows]); the engine pops each step's."""

    def __init__(self, specs: Sequence[RequestSpec], config: EngineConfig):
        self.timeout_steps = config.timeout_steps
        self.at: dict[int, list[tuple[int, FinishReason]]] = defaultdict(list)
        for row, spec in enumerate(specs):
            if spec.abort_step is not None:
                self.at[spec.abort_step].append((row, FinishReason.CLIENT_DISCONNECTED))
        if self.timeout_steps:
            for row, spec in enumerate(specs):
                if spec.arrival_step is not None:
                    self.at[spec.arrival_step + self.timeout_steps].append((row, FinishReason.TIMEOUT))
        self._steps = sorted(self.at)  # every step some client leaves, ascending (popped ones stay: bisect past them)
        self.noticed: dict[int, list[int]] = defaultdict(list)
        self._noticed_steps: list[int] = []  # heap of the keys of noticed

    def add_timeouts(self, rows: list[int], step: int) -> None:
        """``rows``, given a time, arrived at ``step``: their clients give up ``timeout_steps`` later (if set)."""
        if not self.timeout_steps:
            return
        leave = step + self.timeout_steps
        if leave not in self.at:
            bisect.insort(self._steps, leave)
        for row in rows:  # (where a file's step would have put it: after the aborts, among the timeouts by row)
            bisect.insort(self.at[leave], (row, FinishReason.TIMEOUT), key=_order)

    def notice(self, row: int, step: int) -> None:
        """The server notices at ``step`` that ``row``'s client left."""
        if step not in self.noticed:
            heapq.heappush(self._noticed_steps, step)
        self.noticed[step].append(row)

    def next_step(self, after: int) -> int | None:
        """The first step after ``after`` when a client leaves or the server notices one that left."""
        candidates = []
        i = bisect.bisect_right(self._steps, after)
        if i < len(self._steps):
            candidates.append(self._steps[i])
        while self._noticed_steps and self._noticed_steps[0] not in self.noticed:
            heapq.heappop(self._noticed_steps)  # already handled
        later = [d for d in self._noticed_steps if d > after]
        if later:
            candidates.append(min(later))
        return min(candidates) if candidates else None


def _order(entry: tuple[int, FinishReason]) -> tuple[bool, int]:
    """A client's leaving among a step's: the aborts first, then the timeouts, each by row (the order ``Leaving``
    registers a file's at the start)."""
    return entry[1] is FinishReason.TIMEOUT, entry[0]
