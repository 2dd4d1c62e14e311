"""Quiet stretches: advance many engine steps at once when all the batch does is decode.

A stretch of steps starting at ``step`` is quiet when, in each of its steps:
- no client leaves and no abort is noticed (scheduled events we can see ahead);
- every running request is decoding (one token to compute) and they all fit in the token budget;
- nobody finishes before the last step (the stretch ends with the step of the first requests' last token);
- the blocks the batch grows into fit in the free pool, so nothing is preempted;
- the head of the waiting queue is refused (there are no swapped requests and no prefix caching).
Arrivals may come: ``_walk`` goes through the stretch from one arrival (or starvation promotion) to the next for
the cheap part (arrivals, VTC lifts, promotions, the head's refusal, counter charges), exactly as the step loop
would, and stops before the first step whose head could be admitted. The batch's tokens and blocks for the whole
stretch are then computed with a few array operations, and the trace records every step of it: tests check that a
run with fast-forwarding gives a trace identical to one without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .admission import Refusal
from .npfast import add_accumulate as _cumsum
from .npfast import max_reduce
from .policies import spec_of

if TYPE_CHECKING:
    from .engine import Engine
    from .step_record import Totals
    from .vtc import VirtualCounters

MIN_STEPS = 6  # shorter stretches cost more to set up than stepping through them


def quiet_steps(engine: Engine, step: int, until_step: int | None) -> int:
    """How many steps from ``step`` (whose arrivals are already queued) may be quiet, 0 if fewer than
    MIN_STEPS. Checks the cheap conditions first; ``advance`` checks admissions step by step."""
    s, t, cfg = engine.scheduler, engine.table, engine.config
    run = s.running
    if step < engine.quiet_retry_step or not len(run) or s.swapped or cfg.enable_prefix_caching \
            or len(run) > cfg.max_num_batched_tokens:
        return 0
    # Under load somebody finishes within a few steps almost every step: the cheapest test that fails first.
    # The stretch may end with the step in which the first requests generate their last token.
    left = t.target_len[run] - t.num_output_tokens[run]
    last_in = int(left[left.argmin()])  # argmin: several times cheaper than a min reduction on small arrays
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
    if not s.all_decoding and not t.is_decoding[run].all():  # a prefill's last 1-token chunk is not a decode
        return 0
    return d


def _block_events(engine: Engine, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every new block the running batch needs in the next ``d`` steps, in vLLM's order (step, then running-list
    position): (step offset, running position, k-th new block of that request)."""
    bs = engine.kv.block_size
    computed = engine.table.num_computed_tokens[engine.scheduler.running]
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


def advance(engine: Engine, step: int, d: int) -> int:
    """Run the quiet stretch from ``step`` for up to ``d`` steps; returns the number of steps recorded (0 if not
    even the first step is quiet). It stops early where the pool runs out or an arrival could be admitted."""
    kv, s = engine.kv, engine.scheduler
    if len(s.waiting):  # cheap filter: would the head start now? (free blocks only shrink from here)
        budget = engine.config.max_num_batched_tokens - len(s.running)
        if s.admission_check(s.waiting.peek(), len(s.running), budget, kv.num_free_blocks)[0] is None:
            return 0
    j_of, pos_of, k_of = _block_events(engine, d)
    free = kv.num_free_blocks
    if len(j_of) > free:  # stop before the step whose block would not fit (that step preempts)
        d = int(j_of[free])
    free_after = free - _cumsum(np.bincount(j_of[j_of < d], minlength=d))  # [d] free after each allocation
    walked = _walk(engine, step, d, free_after)
    if walked.num_steps == 0:
        return 0
    n = walked.num_steps
    keep = j_of < n
    run = engine.scheduler.running
    _allocate(engine, run, j_of[keep], pos_of[keep], k_of[keep])
    computed = engine.table.num_computed_tokens[run]  # (a copy: before the stretch)
    wasted, finished = engine.executor.decode_steps(run, n)
    engine.writer.decode_steps(step, n, run, computed, (j_of[keep], pos_of[keep]), free_after[:n],
                               walked.num_waiting, wasted, finished, walked.totals, engine.any_disconnect)
    engine.finish(step + n - 1, finished)
    engine.scheduler.all_decoding = True  # everybody decoded in every step of the stretch
    return n


class _Walked(NamedTuple):
    num_steps: int  # quiet steps
    num_waiting: list[int]  # [num_steps] queue length in each step
    # the counters and service after each step, in step order: (first step, None or the charged and lifted clients,
    # [steps, clients or k] counters, the same of service) each (sim/step_record.py's totals)
    totals: Totals


def _walk(engine: Engine, step: int, d: int, free_after: np.ndarray) -> _Walked:
    """Step through the stretch as the step loop would, for everything but the batch's tokens and blocks:
    queue each step's arrivals (events, rejections and VTC lifts included), let the queue promote starving
    requests, log the head's refusal, and charge the step's tokens to the counters. Stops before the first step
    whose head could be admitted (its arrivals are then already queued, which the step loop repeats harmlessly).
    Between arrivals and starvation-guard promotions the head of a queue whose record says ``head_moves ==
    "arrival"`` (FCFS, priority, SJF) cannot change, so those stretches go in bulk. So do those of a "counters"
    queue (VTC, LCF): between arrivals its counters grow by the same charge each step, and the head in each step
    is read off their running sums (it may pass to another client within the stretch). Recorded sparsely, a
    "counters" walk goes step by step (each step's lifts are recorded)."""
    s, cfg, vtc = engine.scheduler, engine.config, engine.scheduler.vtc
    run = s.running
    r = len(run)
    budget = cfg.max_num_batched_tokens - r
    # Every running request generates one token a step: the charge to every client, or (recorded sparsely) to the
    # running requests' clients only, ``charged``.
    sparse = engine.recorder.sparse
    charged, charge = vtc.output_charge_by_client(run) if sparse else (None, vtc.output_charge(run))
    # The policy's record says how its head moves: only at an arrival or a promotion ("arrival"), or also as the
    # counters grow ("counters": its queue reads the head off them, heads_over, checked by the record)
    head_moves = spec_of(cfg.policy).head_moves
    in_bulk = head_moves == "arrival"
    by_counter = head_moves == "counters" and not sparse
    refusals: dict[tuple[int, int], Refusal | None] = {}  # (row, free blocks) -> why the head cannot start
    no_room_for_anyone = s.rules.slot_or_budget(r, budget)  # the head's refusal then depends on nothing else
    events = engine.recorder.events
    num_waiting = np.empty(d, dtype=np.int64)
    totals: Totals = []
    j = 0
    while j < d:
        if j:
            engine.arrive(step + j)
        # The starvation guard's promotions due now (none for other orders), logged as the step loop logs them
        promoted = s.waiting.on_step(step + j)
        if promoted:
            events.extend(s.promotion_events(step + j, promoted))
        end = j + 1
        if in_bulk or by_counter:  # to the next arrival or promotion
            changes = [x - step for x in (engine.next_arrival_step(), s.waiting.next_promotion_step())
                       if x is not None]
            end = max(min([d, *changes]), j + 1)
        running = vtc.running_totals(charge, end - j) if by_counter else None  # before and after each step
        starts = False  # the head of a step in [j, end) can start: the stretch ends before that step
        if len(s.waiting):
            if by_counter:
                heads = s.waiting.heads_over(running[0][:-1]).tolist()
            else:
                heads = [s.waiting.peek()] * (end - j)
            if no_room_for_anyone:
                why = [no_room_for_anyone] * (end - j)
            else:
                frees = free_after[j:end].tolist()
                for key in dict.fromkeys(zip(heads, frees, strict=True)):
                    if key not in refusals:
                        refusals[key] = s.admission_check(key[0], r, budget, key[1])[0]
                why = [refusals[key] for key in zip(heads, frees, strict=True)]
                if None in why:  # (free blocks only shrink: a head that stays put starts in the first step or never)
                    end, starts = j + why.index(None), True
            events.extend([refusal.event(step + i, row)
                           for i, row, refusal in zip(range(j, end), heads, why, strict=False)])  # (to ``end``)
        num_waiting[j:end] = len(s.waiting)
        if by_counter:
            n = end - j
            totals.append((step + j, None, running[0][1:n + 1], running[1][1:n + 1]))
            vtc.set_totals(running[0][n], running[1][n])
        elif not in_bulk and end > j:  # recorded sparsely, one step (end == j + 1): its changes are the charged
            # clients and those lifted by its arrivals
            vtc.charge_steps(charge, 1, charged)
            lifted = vtc.take_lifted()
            changed = np.union1d(charged, np.array(lifted, dtype=np.int32)) if lifted else charged
            totals.append((step + j, changed, vtc.counters[changed][None], vtc.service[changed][None]))
        if starts:
            return _walked(engine, step, end, num_waiting, totals, charged, charge, in_bulk)
        j = end
    return _walked(engine, step, d, num_waiting, totals, charged, charge, in_bulk)


def _walked(engine: Engine, step: int, n: int, num_waiting: np.ndarray, totals: Totals,
            charged: np.ndarray | None, charge: np.ndarray, in_bulk: bool) -> _Walked:
    """The walk's first ``n`` steps. In a bulk order (no lifts) the counters were left alone: charge all ``n``
    steps now, in one running sum (recorded sparsely: the charged clients' columns only)."""
    vtc: VirtualCounters = engine.scheduler.vtc
    if in_bulk and n:
        counters, service = vtc.charge_steps(charge, n, charged)
        totals.append((step, charged, counters, service))
    return _Walked(n, num_waiting[:n].tolist(), totals)


def _allocate(engine: Engine, run: np.ndarray, j_of: np.ndarray, pos_of: np.ndarray, k_of: np.ndarray) -> None:
    kv = engine.kv
    if not len(j_of):
        return
    blocks = kv.pool.allocate(len(j_of))
    rows = run[pos_of]
    kv.place(rows, kv.num_blocks_held[rows] + k_of, blocks)
    kv.num_blocks_held[run] += np.bincount(pos_of, minlength=len(run))
