"""Quiet stretches: advance many engine steps at once when all the batch does is decode.

A stretch of steps starting at ``step`` is quiet when, in each of its steps:
- no client leaves and no abort is noticed (scheduled events we can see ahead);
- every running request is decoding (one token to compute) and they all fit in the token budget;
- nobody finishes before the last step (the stretch ends with the step of the first requests' last token);
- the blocks the batch grows into fit in the free pool, so nothing is preempted;
- the head of the waiting queue is refused (there are no swapped requests and no prefix caching);
- no waiting request's TTFT target passes (with deadline-aware shedding: sim/shedding.py).
Arrivals may come: ``_walk`` goes through the stretch from one arrival (or starvation promotion) to the next for
the cheap part (arrivals, promotions, the head's refusal, counter charges), exactly as the step loop would, and
stops before the first step whose head could be admitted. A request that arrives by the clock (``arrival_ms``)
comes at the step the clock reaches its time, every step of the stretch lasting the same (the engine sums them as
they will be recorded: sim/clock.py); its timeout, registered as it arrives, ends the stretch before it. The engine
then runs and records the whole stretch with a few array operations: tests check that a run with fast-forwarding
gives a trace identical to one without. What it saves, and why it is written as it is:
docs/PERFORMANCE.md#quiet-stretches.

The engine is reached only through ``QuietStretchEngine`` (``Engine`` implements it; a test checks that this module
touches nothing else). What a quiet stretch may read: ``config``, ``table`` (request state, read only),
``running``, ``num_waiting``, ``num_swapped``, ``num_free_blocks``, ``max_steps``, ``snapshot_every_steps``,
``sparse_clients``, ``arrivals_add_disconnects``, ``quiet_retry_step`` (its own, written here), ``batch_decodes()``,
``next_arrival_step(before)``, ``next_promotion_step()``, ``next_disconnect_step(after)``,
``first_shed_step(first_step, num_steps)``, ``waiting_heads(num_steps, charge)``, ``head_refusal(row, free_blocks)``,
``batch_refusal()``, ``decode_charge()``.
The actions it may take, each the step loop's own: ``arrive(step)`` (admit arrivals to the waiting queue, or
reject them), ``promote(step)``, ``refuse(first_step, num_steps, rows, refusals)`` (log the head's refusals),
``charge_decode_steps(first_step, num_steps, charge)`` (charge the counters) and ``decode_steps(...)`` (allocate the
stretch's blocks, advance the tokens, record the steps through the one writer, finish who is done).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from .npfast import add_accumulate as _cumsum
from .npfast import max_reduce
from .policies import spec_of

if TYPE_CHECKING:
    from .admission import Refusal
    from .config import EngineConfig
    from .request import RequestTable
    from .step_record import Totals

MIN_STEPS = 6  # shorter stretches cost more to set up than stepping through them (docs/PERFORMANCE.md#quiet-stretches)


class QuietStretchEngine(Protocol):
    """What a quiet stretch may read of the engine and the actions it may take (sim/engine.py, ``Engine``'s
    section "the quiet-stretch interface", documents each)."""

    # ---- reads
    config: EngineConfig
    table: RequestTable  # read only: request state changes through the actions
    max_steps: int
    snapshot_every_steps: int
    sparse_clients: bool
    arrivals_add_disconnects: bool  # an arrival may add a client's leaving ahead (a timed arrival's timeout)
    quiet_retry_step: int  # the fast-forward's own: no quiet stretch is looked for before this step

    @property
    def running(self) -> np.ndarray: ...
    @property
    def num_waiting(self) -> int: ...
    @property
    def num_swapped(self) -> int: ...
    @property
    def num_free_blocks(self) -> int: ...
    def batch_decodes(self) -> bool: ...
    def next_arrival_step(self, before: int | None = None) -> int | None: ...
    def next_promotion_step(self) -> int | None: ...
    def next_disconnect_step(self, after: int) -> int | None: ...
    def first_shed_step(self, first_step: int, num_steps: int) -> int | None: ...
    def waiting_heads(self, num_steps: int, charge: tuple | None = None) -> list[int]: ...
    def head_refusal(self, row: int, free_blocks: int) -> Refusal | None: ...
    def batch_refusal(self) -> Refusal | None: ...
    def decode_charge(self) -> tuple: ...

    # ---- actions
    def arrive(self, step: int) -> None: ...
    def promote(self, step: int) -> None: ...
    def refuse(self, first_step: int, num_steps: int, rows: list[int], refusals: list[Refusal]) -> None: ...
    def charge_decode_steps(self, first_step: int, num_steps: int, charge: tuple) -> tuple: ...
    def decode_steps(self, first_step: int, num_steps: int, new_blocks: tuple[np.ndarray, np.ndarray, np.ndarray],
                     free_after: np.ndarray, num_waiting: list[int], totals: Totals) -> None: ...


def quiet_steps(engine: QuietStretchEngine, step: int, until_step: int | None) -> int:
    """How many steps from ``step`` (whose arrivals are already queued) may be quiet, 0 if fewer than
    MIN_STEPS. Checks the cheap conditions first; ``advance`` checks admissions step by step."""
    cfg, t, run = engine.config, engine.table, engine.running
    if step < engine.quiet_retry_step or not len(run) or engine.num_swapped or cfg.enable_prefix_caching \
            or len(run) > cfg.max_num_batched_tokens:
        return 0
    # The cheapest test that fails first (docs/PERFORMANCE.md#quiet-stretches).
    # The stretch may end with the step in which the first requests generate their last token.
    left = t.target_len[run] - t.num_output_tokens[run]
    last_in = int(left[left.argmin()])  # (argmin: docs/PERFORMANCE.md#small-arrays)
    if last_in < MIN_STEPS:
        # Those requests keep the batch from being quiet until they are gone: no need to look again before then.
        engine.quiet_retry_step = step + int(max_reduce(left[left < MIN_STEPS]))
        return 0
    limits = [engine.max_steps, step + last_in, engine.next_disconnect_step(after=step - 1)]
    d = min(x for x in limits if x is not None) - step
    if until_step is not None:
        d = min(d, until_step + 1 - step)
    if engine.snapshot_every_steps:
        if step % engine.snapshot_every_steps == 0:
            return 0
        d = min(d, -step % engine.snapshot_every_steps)
    if d < MIN_STEPS:
        return 0
    if not engine.batch_decodes():
        return 0
    shed = engine.first_shed_step(step, d)  # (the stretch ends before a step that could shed a waiting request)
    if shed is not None and shed - step < MIN_STEPS:
        return 0
    return d if shed is None else shed - step


def _block_events(engine: QuietStretchEngine, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every new block the running batch needs in the next ``d`` steps, in vLLM's order (step, then running-list
    position): (step offset, running position, k-th new block of that request)."""
    bs = engine.config.block_size
    computed = engine.table.num_computed_tokens[engine.running]
    first = (-computed) % bs  # the step at which computing token `computed + j` opens a new block
    if d <= bs:  # the usual short stretch: one new block at most per request (a stable sort keeps list order)
        pos = (first < d).nonzero()[0]
        j = first[pos]
        order = j.argsort(kind="stable")
        return j[order], pos[order], np.zeros(len(pos), dtype=np.int64)
    count = np.where(first < d, (d - 1 - first) // bs + 1, 0)
    pos = np.repeat(np.arange(len(computed)), count)
    k = np.arange(int(count.sum())) - np.repeat(_cumsum(count) - count, count)
    j = first[pos] + bs * k
    order = np.lexsort((pos, j))
    return j[order], pos[order], k[order]


def advance(engine: QuietStretchEngine, step: int, d: int) -> int:
    """Run the quiet stretch from ``step`` for up to ``d`` steps; returns the number of steps recorded (0 if not
    even the first step is quiet). It stops early where the pool runs out or an arrival could be admitted."""
    # Cheap filter: would the head start now? (free blocks only shrink from here)
    if engine.num_waiting and engine.head_refusal(engine.waiting_heads(1)[0], engine.num_free_blocks) is None:
        return 0
    j_of, pos_of, k_of = _block_events(engine, d)
    free = engine.num_free_blocks
    if len(j_of) > free:  # stop before the step whose block would not fit (that step preempts)
        d = int(j_of[free])
    free_after = free - _cumsum(np.bincount(j_of[j_of < d], minlength=d))  # [d] free after each allocation
    walked = _walk(engine, step, d, free_after)
    n = walked.num_steps
    if n == 0:
        return 0
    keep = j_of < n
    engine.decode_steps(step, n, (j_of[keep], pos_of[keep], k_of[keep]), free_after[:n], walked.num_waiting,
                        walked.totals)
    return n


class _Walked(NamedTuple):
    num_steps: int  # quiet steps
    num_waiting: list[int]  # [num_steps] queue length in each step
    totals: Totals  # the counters' charges of the steps (``charge_decode_steps``'s), in step order


def _walk(engine: QuietStretchEngine, step: int, d: int, free_after: np.ndarray) -> _Walked:
    """Step through the stretch as the step loop would, for everything but the batch's tokens and blocks:
    queue each step's arrivals (events, rejections and VTC lifts included), let the queue promote starving
    requests, log the head's refusal, and charge the step's tokens to the counters. Stops before the first step
    whose head could be admitted (its arrivals are then already queued, which the step loop repeats harmlessly).
    Between arrivals and starvation-guard promotions the head of a queue whose record says ``head_moves ==
    "arrival"`` (FCFS, priority, SJF) cannot change, so those stretches go in bulk. So do those of a "counters"
    queue (VTC, LCF): between arrivals its counters grow by the same charge each step, and the head in each step
    is read off their running sums (it may pass to another client within the stretch). Recorded sparsely, a
    "counters" walk goes step by step (each step's lifts are recorded)."""
    # Every running request generates one token a step: the charge to every client, or (recorded sparsely) to the
    # running requests' clients only.
    charge = engine.decode_charge()
    # The policy's record says how its head moves: only at an arrival or a promotion ("arrival"), or also as the
    # counters grow ("counters": its queue reads the head off them, heads_over, checked by the record)
    head_moves = spec_of(engine.config.policy).head_moves
    in_bulk = head_moves == "arrival"
    by_counter = head_moves == "counters" and not engine.sparse_clients
    refusals: dict[tuple[int, int], Refusal | None] = {}  # (row, free blocks) -> why the head cannot start
    no_room_for_anyone = engine.batch_refusal()  # the head's refusal then depends on nothing else
    num_waiting = np.empty(d, dtype=np.int64)
    totals: Totals = []
    j = 0
    while j < d:
        if j:
            engine.arrive(step + j)
            if engine.arrivals_add_disconnects:  # (the stretch ends before a client leaves)
                leaves = engine.next_disconnect_step(after=step + j - 1)
                d = d if leaves is None else min(d, leaves - step)
        engine.promote(step + j)  # the starvation guard's promotions due now (none for other orders)
        end = j + 1
        if in_bulk or by_counter:  # to the next arrival or promotion
            changes = [x - step for x in (engine.next_arrival_step(before=step + d), engine.next_promotion_step())
                       if x is not None]
            end = max(min([d, *changes]), j + 1)
        starts = False  # the head of a step in [j, end) can start: the stretch ends before that step
        if engine.num_waiting:
            heads = engine.waiting_heads(end - j, charge if by_counter else None)
            if no_room_for_anyone:
                why = [no_room_for_anyone] * (end - j)
            else:
                frees = free_after[j:end].tolist()
                for key in dict.fromkeys(zip(heads, frees, strict=True)):
                    if key not in refusals:
                        refusals[key] = engine.head_refusal(*key)
                why = [refusals[key] for key in zip(heads, frees, strict=True)]
                if None in why:  # (free blocks only shrink: a head that stays put starts in the first step or never)
                    end, starts = j + why.index(None), True
            engine.refuse(step + j, end - j, heads, why)
        num_waiting[j:end] = engine.num_waiting
        if not in_bulk and end > j:  # a "counters" queue: charge the steps walked, as the heads were read
            totals.append(engine.charge_decode_steps(step + j, end - j, charge))
        if starts:
            return _walked(engine, step, end, num_waiting, totals, charge, in_bulk)
        j = end
    return _walked(engine, step, d, num_waiting, totals, charge, in_bulk)


def _walked(engine: QuietStretchEngine, step: int, n: int, num_waiting: np.ndarray, totals: Totals,
            charge: tuple, in_bulk: bool) -> _Walked:
    """The walk's first ``n`` steps. In a bulk order (no lifts) the counters were left alone: charge all ``n``
    steps now, in one running sum."""
    if in_bulk and n:
        totals.append(engine.charge_decode_steps(step, n, charge))
    return _Walked(n, num_waiting[:n].tolist(), totals)
