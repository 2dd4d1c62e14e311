"""What the engine's queues and KV pool held at each step of a window of a run: the state a step-by-step player
shows beside the trace (the trace keeps the schedule, the per-step counts and the events; not the order of the
waiting queue nor which block each request holds).

``record_window`` re-runs the scenario (quiet stretches fast-forwarded up to the window) and reads the scheduler's
own queues and the block manager's block tables after every step of the window. Each per-step list is stored only
when it changed (``None``: as the step before), so a window of thousands of quiet steps costs little.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .config import EngineConfig
from .engine import Engine, gc_paused
from .events import Event, EventKind
from .policies import spec_of
from .request import RequestSpec

BLOCK_FREE = -1  # a free block (in ``Playback.block_codes``)
BLOCK_CACHED = -2  # a free block that still holds prefix-cache content (a later request may hit it)

_KIND = Event._fields.index("kind")
_QUIET = (EventKind.BLOCKED, EventKind.FINISH, EventKind.DISCONNECT)  # kinds that leave the waiting queue as it was
DEFAULT_QUEUE_HEAD = 10  # waiting requests listed per step (head first); the count covers the rest
MAX_WINDOW_STEPS = 1_000  # steps per window: what a page sends to the browser at once (100 s of play at 10 steps/s)
MAX_BLOCK_MAP_BLOCKS = 4_096  # pools past this size get no block map (the counts still hold)

# What a player can jump between: the decisions a student looks for (not arrivals, not "still waiting").
JUMP_KINDS = frozenset({EventKind.ADMIT, EventKind.RESUME, EventKind.PREEMPT, EventKind.SWAP_OUT,
                        EventKind.SWAP_IN, EventKind.ABORT, EventKind.FINISH, EventKind.REJECT})


@dataclass(frozen=True)
class Playback:
    """The window ``[first_step, end_step)`` of a run. Each list has one entry per step of the window: a tuple of
    request rows, or None where it equals the step before (the first step's entry is never None).

    - ``waiting_head``: the waiting queue after the step, in admission order, its first ``queue_head`` rows.
    - ``swapped``: requests parked in CPU memory after the step, in the order they come back.
    - ``idle_running``: requests in the running list after the step that the step gave no tokens (the token
      budget ran out, or scheduling stopped at a preemption).
    - ``block_changes``: the KV pool during each step (after scheduling, before the finished leave, as the
      trace's ``used_blocks``) as changes to ``first_block_codes``: per step a tuple of (block, code) pairs,
      code a request row, BLOCK_FREE or BLOCK_CACHED. None when the run has no block map (a pool over
      MAX_BLOCK_MAP_BLOCKS blocks, or none asked for).
    """

    first_step: int
    end_step: int
    queue_head: int
    waiting_head: list[tuple[int, ...] | None]
    swapped: list[tuple[int, ...] | None]
    idle_running: list[tuple[int, ...] | None]
    first_block_codes: np.ndarray | None
    block_changes: list[tuple[tuple[int, int], ...]] | None

    @property
    def num_steps(self) -> int:
        return self.end_step - self.first_step

    def at(self, step: int) -> dict[str, tuple[int, ...]]:
        """The queues after ``step`` (in the window), each list resolved: for tests and the CLI."""
        if not self.first_step <= step < self.end_step:
            raise ValueError(f"step: must be in this window, {self.first_step} to {self.end_step - 1}; got {step}")
        i = step - self.first_step
        return {name: _resolved(getattr(self, name), i) for name in ("waiting_head", "swapped", "idle_running")}

    def block_codes_at(self, step: int) -> np.ndarray | None:
        """[num_blocks] codes of the pool during ``step``: a request row, BLOCK_FREE or BLOCK_CACHED."""
        if self.first_block_codes is None or self.block_changes is None:
            return None
        if not self.first_step <= step < self.end_step:
            raise ValueError(f"step: must be in this window, {self.first_step} to {self.end_step - 1}; got {step}")
        codes = self.first_block_codes.copy()
        for changes in self.block_changes[1 : step - self.first_step + 1]:
            for block, code in changes:
                codes[block] = code
        return codes


def _resolved(entries: list[tuple[int, ...] | None], i: int) -> tuple[int, ...]:
    while entries[i] is None:
        i -= 1
    return entries[i]  # type: ignore[return-value]


def window_around(step: int, num_steps: int, max_steps: int = MAX_WINDOW_STEPS) -> tuple[int, int]:
    """The window of at most ``max_steps`` steps of a ``num_steps``-step run that holds ``step``: it starts on a
    multiple of half a window, half a window or less before ``step``, so nearby steps share one window (and one
    cached recording) and a player moving forward has most of the window ahead of it."""
    if num_steps <= max_steps:
        return 0, num_steps
    half = max_steps // 2
    first = min(max(0, (step // half - 1) * half), num_steps - max_steps)
    return first, first + max_steps


def record_window(config: EngineConfig, requests: Sequence[RequestSpec], first_step: int, end_step: int, *,
                  queue_head: int = DEFAULT_QUEUE_HEAD, block_map: bool = False) -> Playback:
    """Re-run the scenario and record the queues (and with ``block_map`` the pool) after each step in
    ``[first_step, end_step)``. The steps before the window run as fast as a plain run."""
    if first_step < 0 or end_step <= first_step:
        raise ValueError(f"window: need 0 <= first_step < end_step, got {first_step} and {end_step}")
    if queue_head < 1:
        raise ValueError(f"queue_head: must be at least 1, got {queue_head}")
    engine = Engine(config, requests)
    if first_step > 0:
        engine.advance(until_step=first_step - 1)
    engine.fast_forward = False  # one step at a time through the window
    with_map = block_map and config.num_blocks <= MAX_BLOCK_MAP_BLOCKS
    if with_map:
        engine.snapshot_every_steps = 1
    s, kv, recorder = engine.scheduler, engine.kv, engine.recorder
    # The queue's order changes only with an event (an arrival, admission, preemption, promotion...), except under
    # the counter orders, where it follows the clients' counters as tokens flow: read it every step there.
    every_step = spec_of(config.policy).head_moves == "counters"
    waiting: list[tuple[int, ...] | None] = []
    swapped: list[tuple[int, ...] | None] = []
    idle: list[tuple[int, ...] | None] = []
    changes: list[tuple[tuple[int, int], ...]] = []
    first_codes = codes = None
    last: tuple = (None, None, None)
    with gc_paused():
        for step in range(first_step, end_step):
            num_events = len(recorder.events)
            engine._advance(step)
            changed = every_step or step == first_step or any(
                e[_KIND] not in _QUIET for e in recorder.events[num_events:])
            ran = set(recorder.last_step_rows().tolist())
            head = tuple(s.waiting.order(queue_head)) if changed else last[0]
            now = (head, tuple(s.swapped), tuple(r for r in s.running.tolist() if r not in ran))
            for out, value, before in zip((waiting, swapped, idle), now, last, strict=True):
                out.append(None if value == before else value)
            last = now
            if with_map:
                snap = recorder.snapshots.pop(step, None)
                if snap is None:  # nothing ran: the pool as the step left it
                    owner, cached = kv.owner_map(), engine._cached_free_mask()
                else:
                    owner, cached = snap
                new = np.where(owner >= 0, owner, np.where(cached, BLOCK_CACHED, BLOCK_FREE)).astype(np.int32)
                if codes is None:
                    first_codes = new
                    changes.append(())
                else:
                    moved = np.flatnonzero(new != codes)
                    changes.append(tuple(zip(moved.tolist(), new[moved].tolist(), strict=True)))
                codes = new
            if engine.num_done == len(engine.table) and step + 1 < end_step:
                raise ValueError(f"window: the run ends at step {step}, before end_step={end_step}")
    return Playback(first_step, end_step, queue_head, waiting, swapped, idle, first_codes,
                    changes if with_map else None)

