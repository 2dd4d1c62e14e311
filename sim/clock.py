"""The run's clock as the run goes: the trace's ``time_ms`` (the cumulative sum of every step's ``step_ms``, idle
steps included), summed one step after another exactly as the recorder's ``np.cumsum`` sums it, and the steps ahead
of it when each of them lasts the same time.

Two parts read it mid-run: timed arrivals (a request given ``arrival_ms`` arrives at the first step whose start is
at or past it: docs/ENGINE.md#the-step-loop) and deadline-aware shedding (sim/shedding.py). The engine keeps one
clock when either needs it (``StepWriter.write`` tells it every step's duration) and none otherwise.

Looking ahead: the step loop reads the clock at the start of the step it is about to run, which is recorded. Only
two paths look further, an idle stretch (every step one base step) and a quiet stretch (sim/fast_forward.py: every
step the same decodes), and in both every step ahead lasts the same ``step_ms``. ``ahead`` sums those steps as
``record`` will once they are recorded (``np.cumsum`` adds one step after another: the same floats), so the step
found ahead is the step the plain loop finds by reading the clock step by step.
"""

from __future__ import annotations

import math

import numpy as np

# A sum of k equal steps from ``now`` drifts from ``now + k * step_ms`` by at most k rounding errors of 2^-53 each:
# within a relative 1e-8 for any run (max_steps is at most 10^7 steps).
_DRIFT = 1e-8


class Clock:
    """The clock at the end of every step recorded so far, and at the start of the steps ahead."""

    def __init__(self) -> None:
        self._ends = np.empty(1024)
        self.num_steps = 0
        self.now = 0.0  # the end of the last step recorded: the start of the next
        # The steps ahead, from the first not recorded, each ``step_ms`` long: (step_ms, [k] their starts); dropped
        # when a step is recorded
        self._ahead: tuple[float, np.ndarray] | None = None

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
        self._ahead = None

    def start_ms(self, step: int) -> float:
        """The clock at the start of ``step`` (a step already recorded, or the next one)."""
        return float(self._ends[step - 1]) if step else 0.0

    def ahead(self, step_ms: float, num_steps: int) -> np.ndarray:
        """[num_steps] the clock at the start of each of the ``num_steps`` steps from the first not recorded, when
        each step from there lasts ``step_ms``: summed as ``record`` will sum them (read only)."""
        a = self._ahead
        if a is not None and a[0] == step_ms and len(a[1]) >= num_steps:
            return a[1][:num_steps]
        have = a[1] if a is not None and a[0] == step_ms else np.array([self.now])
        size = max(num_steps, 2 * len(have), 64)
        sums = np.empty(size - len(have) + 1)
        sums[0], sums[1:] = have[-1], step_ms
        starts = np.concatenate([have, np.cumsum(sums)[1:]])
        self._ahead = (step_ms, starts)
        return starts[:num_steps]

    def first_step_at(self, target_ms: float, step_ms: float, before: int | None = None,
                      limit: int = 10_000_000) -> int:
        """The first step, from the first not recorded, whose start is at or past ``target_ms`` when every step from
        there lasts ``step_ms`` (> 0): the step the clock, read step by step, first reaches it. Given ``before``, a
        step at or past ``before`` stands for any that late (the caller only asks whether one comes before it), and
        no step past it is summed. Past ``limit`` (a run's most steps) the answer is estimated, not summed."""
        first = self.num_steps
        if self.now >= target_ms:
            return first
        end = limit if before is None else min(before, limit)
        if end <= first:
            return first
        # The start of step end - 1 at the most (the sum drifts up by less than _DRIFT): if even that falls short,
        # no step before ``end`` reaches the target.
        if (self.now + (end - 1 - first) * step_ms) * (1 + _DRIFT) < target_ms:
            return self._none_before(end, limit, target_ms, step_ms)
        # Within reach: sum up to the estimate (and a little past it), then further only if the estimate fell short.
        guess = first + math.ceil((target_ms - self.now) / step_ms * (1 + _DRIFT)) + 2
        n = min(guess, end) - first
        while True:
            starts = self.ahead(step_ms, n)
            k = int(np.searchsorted(starts, target_ms, side="left"))  # (the starts only grow)
            if k < n:
                return first + k
            if first + n >= end:
                return self._none_before(end, limit, target_ms, step_ms)
            n = min(2 * n, end - first)

    def _none_before(self, end: int, limit: int, target_ms: float, step_ms: float) -> int:
        """No step before ``end`` reaches ``target_ms``: ``end`` stands for them, or past the run's ``limit``, an
        estimate of the step (a message may quote it)."""
        if end < limit:
            return end
        return max(limit, self.num_steps + math.ceil((target_ms - self.now) / step_ms))
