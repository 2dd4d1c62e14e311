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
from .npfast import distinct, max_reduce
from .policies import spec_of
from .request import NO_STEP
from .trace import SCHED_DECODE, SCHED_WASTED, ClientRecord, StepRecord

if TYPE_CHECKING:
    from .engine import Engine
    from .vtc import VirtualCounters

MIN_STEPS = 6  # shorter stretches cost more to set up than stepping through them
_COLUMN_INDEX = {name: i for i, name in enumerate(StepRecord._fields)}


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
    _record(engine, step, n, run, j_of[keep], pos_of[keep], free_after[:n], walked)
    engine.scheduler.all_decoding = True  # everybody decoded in every step of the stretch
    return n


class _Walked(NamedTuple):
    num_steps: int  # quiet steps
    num_waiting: list[int]  # [num_steps] queue length in each step
    counters: np.ndarray | None  # [num_steps, clients] virtual counters after each step (None: recorded sparsely)
    service: np.ndarray | None  # [num_steps, clients] weighted service after each step


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
    counters = service = None  # [d, clients] after each step (filled here in a walk step by step, unless sparse)
    if not sparse:
        counters, service = np.empty((d, len(vtc.counters))), np.empty((d, len(vtc.counters)))
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
        totals = vtc.running_totals(charge, end - j) if by_counter else None  # before and after each step
        starts = False  # the head of a step in [j, end) can start: the stretch ends before that step
        if len(s.waiting):
            if by_counter:
                heads = s.waiting.heads_over(totals[0][:-1]).tolist()
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
            counters[j:end], service[j:end] = totals[0][1:n + 1], totals[1][1:n + 1]
            vtc.set_totals(totals[0][n], totals[1][n])
        elif not in_bulk and end > j:  # recorded sparsely, one step (end == j + 1): its changes are the charged
            # clients and those lifted by its arrivals
            vtc.charge_steps(charge, 1, charged)
            lifted = vtc.take_lifted()
            sparse.changes(step + j, np.union1d(charged, np.array(lifted, dtype=np.int32)) if lifted else charged,
                           vtc.counters, vtc.service)
        if starts:
            return _walked(engine, step, end, num_waiting, counters, service, charged, charge, in_bulk)
        j = end
    return _walked(engine, step, d, num_waiting, counters, service, charged, charge, in_bulk)


def _walked(engine: Engine, step: int, n: int, num_waiting: np.ndarray, counters: np.ndarray | None,
            service: np.ndarray | None, charged: np.ndarray | None, charge: np.ndarray, in_bulk: bool) -> _Walked:
    """The walk's first ``n`` steps. In a bulk order (no lifts) the counters were left alone: charge all ``n``
    steps now, in one running sum (recorded here when sparse: the charged clients' columns only)."""
    vtc: VirtualCounters = engine.scheduler.vtc
    if in_bulk and n:
        counters, service = vtc.charge_steps(charge, n, charged)
        if charged is not None:
            engine.recorder.sparse.changes_block(step, charged, counters, service)
    if charged is not None:
        return _Walked(n, num_waiting[:n].tolist(), None, None)
    return _Walked(n, num_waiting[:n].tolist(), counters[:n], service[:n])


def _allocate(engine: Engine, run: np.ndarray, j_of: np.ndarray, pos_of: np.ndarray, k_of: np.ndarray) -> None:
    kv = engine.kv
    if not len(j_of):
        return
    blocks = kv.pool.allocate(len(j_of))
    rows = run[pos_of]
    kv.place(rows, kv.num_blocks_held[rows] + k_of, blocks)
    kv.num_blocks_held[run] += np.bincount(pos_of, minlength=len(run))


def _record(engine: Engine, step: int, d: int, run: np.ndarray, j_of: np.ndarray, pos_of: np.ndarray,
            free_after: np.ndarray, walked: _Walked) -> None:
    """Append the stretch's ``d`` steps to the trace and bring request state to the end of the stretch."""
    t, s, kv, cfg = engine.table, engine.scheduler, engine.kv, engine.config
    r, nc = len(run), engine.num_clients
    ramp = np.arange(1, d + 1, dtype=np.float64)  # [d] tokens each request has added by the end of step j
    computed = t.num_computed_tokens[run]  # (a copy: before the stretch)
    # [d, r] the token of request i in step j is read by nobody (None: none can be); the requests' tokens advanced
    wasted, finished = engine.executor.decode_steps(run, d)
    held = None  # [d, r] blocks each request holds during each step (needed per client or per orphan only)
    if nc > 1 or engine.any_disconnect:  # what it held before plus the blocks opened so far
        grown = np.bincount(j_of * r + pos_of, minlength=d * r).reshape(d, r).cumsum(axis=0)
        held = grown + (kv.num_blocks_held[run] - grown[-1])[None, :]
    values = np.zeros((d, len(StepRecord._fields)))  # a StepRecord a step, by field name (zeros: nothing)
    col = _COLUMN_INDEX
    values[:, col["step_ms"]] = cfg.cost.step_ms(0, r) + 0.0  # no prefill, r decodes, no swap
    for name in ("num_running", "num_scheduled", "num_decode_reqs", "num_output_tokens"):
        values[:, col[name]] = r
    values[:, col["num_waiting"]] = walked.num_waiting
    values[:, col["used_blocks"]] = cfg.num_blocks - free_after
    values[:, col["free_blocks_after"]] = free_after
    # Requests whose last token comes in the stretch's last step finish there: their blocks are free after it.
    if len(finished):
        values[-1, col["free_blocks_after"]] += kv.num_blocks_held[finished].sum()
        values[-1, col["num_finished"]] = len(finished)
    values[:, col["kv_tokens"]] = int(computed.sum()) + ramp * r
    values[:, col["cpu_blocks_used"]] = s.num_cpu_blocks_used
    if wasted is not None:
        values[:, col["num_wasted_tokens"]] = wasted.sum(axis=1)
    if engine.any_disconnect:
        orphan = t.disconnect_step[run] != NO_STEP
        values[:, col["orphan_blocks"]] = held[:, orphan].sum(axis=1)
        values[:, col["orphan_kv_tokens"]] = computed[orphan].sum() + ramp * int(orphan.sum())
    client_values = _client_values(engine, step, d, run, held, values[:, col["used_blocks"]], walked)
    kinds = np.full(d * r, SCHED_DECODE, dtype=np.int8) if wasted is None else \
        np.where(wasted, SCHED_WASTED, SCHED_DECODE).astype(np.int8).reshape(-1)
    rows = np.repeat(run[None, :], d, axis=0).ravel()  # the running list once a step (np.tile, minus its wrapper)
    engine.recorder.append_block(values, client_values, rows, np.ones(d * r, dtype=np.int64), kinds, [r] * d)
    engine.finish(step + d - 1, finished)


def _client_values(engine: Engine, step: int, d: int, run: np.ndarray, held: np.ndarray | None,
                   used_blocks: np.ndarray, walked: _Walked) -> ClientRecord | None:
    """The stretch's per-client values: a ClientRecord of [d, clients] arrays, or (recorded sparsely) None, the
    running requests' clients' activity recorded here (their totals were recorded by the walk)."""
    t, nc = engine.table, engine.num_clients
    sparse = engine.recorder.sparse
    client_run = t.client[run]
    clients = distinct(client_run) if sparse else np.arange(nc)  # the columns: the running clients, or all
    at = np.searchsorted(clients, client_run) if sparse else client_run  # [r] each request's column
    k = len(clients)
    if nc == 1:
        blocks = used_blocks[:, None].copy()
    else:
        onehot = np.zeros((len(run), k))
        onehot[np.arange(len(run)), at] = 1.0
        blocks = held @ onehot  # [d, k] blocks held per client
    per_client = np.bincount(at, minlength=k).astype(np.float64)
    running = np.repeat(per_client[None, :], d, axis=0)  # [d, k] (np.broadcast_to costs ~20 us a call)
    if sparse is not None:
        values = np.zeros((d, k, 4))  # ACTIVITY_COLUMNS: no prefill in a quiet stretch
        values[:, :, 0], values[:, :, 1], values[:, :, 2] = blocks, running, running
        sparse.activity_block(step, clients, values)
        return None
    return ClientRecord(client_blocks=blocks, client_running=running, client_output_tokens=running,
                        client_prefill_tokens=np.zeros((d, nc)), client_counters=walked.counters,
                        client_service=walked.service)  # each [d, clients]
