"""Quiet stretches: advance many engine steps at once when all that happens is every running request decoding.

A stretch of ``d`` steps starting at ``step`` is quiet when, for every step in it:
- nothing arrives, no client leaves and no abort is noticed (those are scheduled events we can see ahead);
- every running request is decoding (one token to compute) and they all fit in the token budget;
- nobody finishes before the last step (the stretch ends with the step of the first requests' last token);
- the blocks the batch grows into fit in the free pool, so nothing is preempted;
- nothing can be admitted: the head of the waiting queue is refused now, and since free blocks only shrink and
  slots and budget stay the same during the stretch, it stays refused (no swapped requests, no prefix caching,
  no starvation-guard promotions pending).
Then each step is exactly "every running request computes one token and emits one", and the whole stretch can be
computed with a few array operations. The trace records every step of it, as the step loop would have: tests
check that a run with fast-forwarding gives a trace identical to one without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .config import Policy
from .request import NO_STEP
from .trace import SCHED_DECODE, SCHED_WASTED, STEP_COLUMNS

if TYPE_CHECKING:
    from .engine import Engine

MIN_STEPS = 6  # shorter stretches cost more to set up than stepping through them
_COLUMN_INDEX = {name: i for i, name in enumerate(STEP_COLUMNS)}
_STATIC_ORDERS = (Policy.FCFS, Policy.PRIORITY, Policy.SJF, Policy.SJF_PREDICTED)


def quiet_steps(engine: Engine, step: int, until_step: int | None) -> int:
    """How many steps from ``step`` (whose arrivals are already queued) may be quiet, 0 if fewer than
    MIN_STEPS. Checks the cheap conditions first; ``advance`` checks admissions step by step."""
    s, t, cfg = engine.scheduler, engine.table, engine.config
    run = s.running
    if not len(run) or s.swapped or cfg.enable_prefix_caching or len(run) > cfg.max_num_batched_tokens:
        return 0
    if cfg.starvation_threshold_steps and len(s.waiting):
        return 0
    # Under load somebody finishes within a few steps almost every step: the cheapest test that fails first.
    # The stretch may end with the step in which the first requests generate their last token.
    last_in = int((t.target_len[run] - t.num_output_tokens[run]).min())
    if last_in < MIN_STEPS:
        return 0
    limits = [cfg.max_steps, step + last_in, engine.next_disconnect_step(after=step - 1)]
    if cfg.policy not in _STATIC_ORDERS or cfg.starvation_threshold_steps:
        # Arrivals move VTC counters (the lift), or start a starvation clock whose promotions reorder the queue.
        limits.append(engine.next_arrival_step())
    d = min(x for x in limits if x is not None) - step
    if until_step is not None:
        d = min(d, until_step + 1 - step)
    if engine.snapshot_every_steps:
        if step % engine.snapshot_every_steps == 0:
            return 0
        d = min(d, -step % engine.snapshot_every_steps)
    if d < MIN_STEPS:
        return 0
    if (t.num_tokens[run] - t.num_computed_tokens[run] != 1).any():
        return 0
    return d


def _block_events(engine: Engine, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every new block the running batch needs in the next ``d`` steps, in vLLM's order (step, then running-list
    position): (step offset, running position, k-th new block of that request)."""
    bs = engine.kv.block_size
    computed = engine.table.num_computed_tokens[engine.scheduler.running]
    first = (-computed) % bs  # the step at which computing token `computed + j` opens a new block
    count = np.where(first < d, (d - 1 - first) // bs + 1, 0)
    pos = np.repeat(np.arange(len(computed)), count)
    k = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    j = first[pos] + bs * k
    order = np.lexsort((pos, j))
    return j[order], pos[order], k[order]


def advance(engine: Engine, step: int, d: int) -> int:
    """Run the quiet stretch from ``step`` for up to ``d`` steps; returns the number of steps recorded (0 if not
    even the first step is quiet). It stops early where the pool runs out or an arrival could be admitted."""
    kv, s = engine.kv, engine.scheduler
    if len(s.waiting) and engine.config.policy in _STATIC_ORDERS:  # cheap filter: would the head start now?
        budget = engine.config.max_num_batched_tokens - len(s.running)
        if not s.admission_check(s.waiting.peek(), len(s.running), budget, kv.num_free_blocks)[0]:
            return 0
    j_of, pos_of, k_of = _block_events(engine, d)
    free = kv.num_free_blocks
    if len(j_of) > free:  # stop before the step whose block would not fit (that step preempts)
        d = int(j_of[free])
    free_after = free - np.cumsum(np.bincount(j_of[j_of < d], minlength=d))  # [d] free after each allocation
    n, num_waiting = _walk(engine, step, d, free_after)
    if n == 0:
        return 0
    keep = j_of < n
    run = engine.scheduler.running
    _allocate(engine, run, j_of[keep], pos_of[keep], k_of[keep])
    _record(engine, step, n, run, j_of[keep], pos_of[keep], free_after[:n], num_waiting)
    return n


def _walk(engine: Engine, step: int, d: int, free_after: np.ndarray) -> tuple[int, list[int]]:
    """Step through the stretch's admissions: queue each step's arrivals (as the step loop would, events and
    all), and log the waiting head's refusal. Stops at the first step whose head could be admitted.
    Returns (quiet steps, queue length in each)."""
    s = engine.scheduler
    r = len(s.running)
    budget = engine.config.max_num_batched_tokens - r
    heads = None if engine.config.policy in _STATIC_ORDERS else _heads(engine, d)
    refusals: dict[tuple[int, int], str] = {}
    events = engine.recorder.events
    num_waiting = []
    for j in range(d):
        if j:
            engine.arrive(step + j)
        if len(s.waiting):
            row = s.waiting.peek() if heads is None else int(heads[j])
            key = (row, int(free_after[j]))
            if key not in refusals:
                refusals[key] = s.admission_check(row, r, budget, key[1])[0]
            if not refusals[key]:
                return j, num_waiting
            events.append((step + j, "blocked", row, refusals[key]))
        num_waiting.append(len(s.waiting))
    return d, num_waiting


def _heads(engine: Engine, d: int) -> np.ndarray:
    """[d] the waiting queue's head at each step's admission: fixed for static orders; for VTC/LCF the head
    request of the backlogged client with the lowest counter, counters growing as the batch is charged."""
    s = engine.scheduler
    if engine.config.policy in _STATIC_ORDERS:
        return np.full(d, s.waiting.peek())
    counters = _counter_rows(engine, s.counters, d)[:-1]  # before each step's execute
    heads = np.array([q[0] if q else -1 for q in s.waiting.client_queues()], dtype=np.int64)
    key = np.where(heads[None, :] >= 0, counters, np.inf)
    best = key.min(axis=1)
    candidates = np.where(key == best[:, None], heads[None, :], np.iinfo(np.int64).max)
    return candidates.min(axis=1)


def _charge_per_step(engine: Engine) -> np.ndarray:
    """[clients] the output charge one step of this batch adds to each counter (as Scheduler.charge_output)."""
    s, cfg = engine.scheduler, engine.config
    if len(s.counters) == 1:
        return np.array([len(s.running) * cfg.output_weight / s.client_weight[0]])
    per_client = np.bincount(engine.table.client[s.running], minlength=len(s.counters))
    return per_client * (cfg.output_weight / s.client_weight)


def _counter_rows(engine: Engine, start: np.ndarray, d: int) -> np.ndarray:
    """[d + 1, clients] counters at the start and after each of ``d`` steps, added one step at a time as the
    step loop does (a cumulative sum adds in the same order, so the floats are identical)."""
    rows = np.empty((d + 1, len(start)))
    rows[0] = start
    rows[1:] = _charge_per_step(engine)
    return np.cumsum(rows, axis=0)


def _allocate(engine: Engine, run: np.ndarray, j_of: np.ndarray, pos_of: np.ndarray, k_of: np.ndarray) -> None:
    kv = engine.kv
    if not len(j_of):
        return
    blocks = kv.pool.allocate(len(j_of))
    rows = run[pos_of]
    kv.block_table[kv.slot_of_row[rows], kv.num_blocks_held[rows] + k_of] = blocks
    kv.num_blocks_held[run] += np.bincount(pos_of, minlength=len(run))


def _record(engine: Engine, step: int, d: int, run: np.ndarray, j_of: np.ndarray, pos_of: np.ndarray,
            free_after: np.ndarray, num_waiting: list[int]) -> None:
    """Append the stretch's ``d`` steps to the trace and bring request state to the end of the stretch."""
    t, s, kv, cfg = engine.table, engine.scheduler, engine.kv, engine.config
    r, nc = len(run), engine.num_clients
    ramp = np.arange(1, d + 1, dtype=np.float64)  # [d] tokens each request has added by the end of step j
    wasted = None  # [d, r] the token of request i in step j is read by nobody
    if engine.may_waste:
        gone = t.disconnect_step[run] != NO_STEP
        wasted = gone[None, :] | ((t.num_output_tokens[run][None, :] + ramp[:, None]) > t.useful_len[run][None, :])
    counters = _counter_rows(engine, s.counters, d)
    service = _counter_rows(engine, s.service, d)
    # [d, r] blocks each request holds during each step: what it held before plus the blocks opened so far.
    grown = np.bincount(j_of * r + pos_of, minlength=d * r).reshape(d, r).cumsum(axis=0)
    held = None
    if nc > 1 or engine.any_disconnect:
        held = grown + (kv.num_blocks_held[run] - grown[-1])[None, :]
    values = np.zeros((d, len(STEP_COLUMNS)))  # STEP_COLUMNS as the step loop records them (zeros: nothing)
    col = _COLUMN_INDEX
    values[:, col["step_ms"]] = cfg.cost.step_ms(0, r) + 0.0  # no prefill, r decodes, no swap
    for name in ("num_running", "num_scheduled", "num_decode_reqs", "num_output_tokens"):
        values[:, col[name]] = r
    values[:, col["num_waiting"]] = num_waiting
    values[:, col["used_blocks"]] = cfg.num_blocks - free_after
    values[:, col["free_blocks_after"]] = free_after
    # Requests whose last token comes in the stretch's last step finish there: their blocks are free after it.
    finished = run[t.target_len[run] - t.num_output_tokens[run] == d]
    if len(finished):
        values[-1, col["free_blocks_after"]] += kv.num_blocks_held[finished].sum()
        values[-1, col["num_finished"]] = len(finished)
    values[:, col["kv_tokens"]] = int(t.num_computed_tokens[run].sum()) + ramp * r
    values[:, col["cpu_blocks_used"]] = s.num_cpu_blocks_used
    if wasted is not None:
        values[:, col["num_wasted_tokens"]] = wasted.sum(axis=1)
    if engine.any_disconnect:
        orphan = t.disconnect_step[run] != NO_STEP
        values[:, col["orphan_blocks"]] = held[:, orphan].sum(axis=1)
        values[:, col["orphan_kv_tokens"]] = t.num_computed_tokens[run][orphan].sum() + ramp * int(orphan.sum())
    per_client = np.bincount(t.client[run], minlength=nc).astype(np.float64)
    if nc == 1:
        blocks = values[:, col["used_blocks"], None].copy()
    else:
        onehot = np.zeros((r, nc))
        onehot[np.arange(r), t.client[run]] = 1.0
        blocks = held @ onehot  # [d, clients] blocks held per client
    running = np.broadcast_to(per_client, (d, nc))
    client_values = [blocks, running, running, np.zeros((d, nc)), counters[1:], service[1:]]
    kinds = np.full(d * r, SCHED_DECODE, dtype=np.int8) if wasted is None else \
        np.where(wasted, SCHED_WASTED, SCHED_DECODE).astype(np.int8).reshape(-1)
    engine.recorder.append_block(values, client_values, np.tile(run, d), np.ones(d * r, dtype=np.int64), kinds,
                                 [r] * d)
    fresh = run[t.first_token_step[run] == NO_STEP]  # a prompt whose last token is computed in the first step
    t.first_token_step[fresh] = step
    t.num_computed_tokens[run] += d
    t.num_output_tokens[run] += d
    t.num_tokens[run] += d
    if wasted is not None:
        t.num_wasted_tokens[run] += wasted.sum(axis=0)
    s.counters[:] = counters[-1]
    s.service[:] = service[-1]
    s.waiting.on_scheduled_steps(run, d)
    engine.finish(step + d - 1, finished)


