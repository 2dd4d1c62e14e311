"""The scheduler's running phase, vectorised: the decisions of vLLM's per-request loop (``Scheduler._schedule_running``
in sim/scheduler.py, the reference) made with a few array operations on the whole running list.

``schedule_running`` is the one way in: the scheduler calls it first when ``use_fast_path`` is on (tests turn it
off). It either does the whole running phase and returns the budget left, or returns None having changed nothing,
and the plain loop decides: that is when the pool is short and victims may come from anywhere in the running list
(``priority``).

Invariant: the plain loop's decisions exactly (rows scheduled and their token counts, victims and the order they
are preempted in, blocks allocated): tests/sim/test_fast_path.py runs both on random scenarios,
tests/sim/test_vllm_scenarios.py on vLLM's own examples.

The paths, commonest first:
- every running request decodes and the budget covers them all (``all_decoding``, no prefix caching): one token
  each, and one more block for each whose KV fills the blocks it holds;
- otherwise each request needs ``num_tokens - num_computed_tokens``: the budget is handed down the running list with
  a cumulative sum, and the blocks the scheduled tokens need are summed.
When the pool is short, ``fcfs`` victims come from the tail of the running list: ``_preempt_from_tail`` finds, with a
search in the cumulative block counts, the first request whose blocks do not fit, preempts the tail, and repeats.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .npfast import ONE
from .npfast import add_accumulate as _cumsum
from .npfast import add_reduce as _sum

if TYPE_CHECKING:
    from .scheduler import Scheduler, SchedulerOutput


def schedule_running(s: Scheduler, budget: int, out: SchedulerOutput, parts: list) -> int | None:
    """Phase 1 of ``s.schedule()`` for a non-empty running list, vectorised: returns the budget left, or None (having
    done nothing) when the plain loop must choose the victims."""
    t, kv = s.table, s.kv
    run = s.running
    if s.all_decoding and len(run) <= budget and not kv.enable_caching:
        return _schedule_decoders(s, budget, out, parts)
    seq_len = t.num_tokens[run]
    computed = t.num_computed_tokens[run]
    need = seq_len - computed  # >= 1 for every running request
    k = len(run)
    used = int(_sum(need))  # tokens scheduled: sum(sched)
    all_emit = used <= budget
    if all_emit:  # the common case: everybody gets all it needs
        sched, after = need, seq_len
    else:  # the budget runs out part-way down the running list
        cum = _cumsum(need)
        sched = np.minimum(need, np.maximum(budget - (cum - need), 0))
        k = int(np.count_nonzero(sched))
        sched, computed, seq_len = sched[:k], computed[:k], seq_len[:k]
        after = computed + sched
        used = budget
    rows = run[:k]
    held = kv.num_blocks_held[rows]
    new_blocks = kv.blocks_for(after) - held
    total = int(_sum(new_blocks))
    if total > kv.pool.num_free:
        if s.victim_by_priority:  # victims may come from anywhere in the list
            return None
        cum_blocks = _cumsum(new_blocks)
        k = _preempt_from_tail(s, cum_blocks, k, out)
        total = int(cum_blocks[k - 1]) if k else 0
        sched, computed, seq_len, after, new_blocks, held = (
            sched[:k], computed[:k], seq_len[:k], after[:k], new_blocks[:k], held[:k])
        rows = s.running[:k]
        used = int(_sum(sched))
    kv.grow_many(rows, new_blocks, held, total, np.minimum(after, seq_len) if kv.enable_caching else None)
    parts.append((rows, sched, after, all_emit, False))
    return budget - used


def _schedule_decoders(s: Scheduler, budget: int, out: SchedulerOutput, parts: list) -> int | None:
    """The running phase when every running request decodes (``all_decoding``) and the budget covers them: one
    token each, and one more block for each whose KV fills its last block; when the pool cannot give all of those
    a block, victims from the tail of the running list, as the general path. Returns None, having done nothing,
    when victims may come from anywhere in the list (``priority``: the plain loop)."""
    kv, run = s.kv, s.running
    computed = s.table.num_computed_tokens[run]
    fills = kv.fills_its_blocks(computed)
    growing = fills.nonzero()[0]  # (np.flatnonzero adds two Python wrappers)
    if len(growing) > kv.pool.num_free:
        if s.victim_by_priority:
            return None
        k = _preempt_from_tail(s, _cumsum(fills), len(run), out)  # (a bool cumsum counts in int64)
        run, computed = s.running, computed[:k]  # the first k run: all that is left of the list
        growing = growing[: growing.searchsorted(k)]
    if len(growing):
        kv.grow_by_one_block(run[growing], computed[growing])
    parts.append((run, s.decode_num_tokens[:len(run)], computed + ONE, True, True))
    return budget - len(run)


def _preempt_from_tail(s: Scheduler, cum_blocks: np.ndarray, k: int, out: SchedulerOutput) -> int:
    """vLLM's victim loop (``fcfs``), vectorised: find the first of the ``k`` leading running requests whose blocks
    (``cum_blocks``: cumulative new blocks down the list) do not fit, preempt the tail of the running list, and
    repeat; returns how many leading requests get scheduled."""
    run = s.running
    n, start = len(run), 0
    while True:
        lim = min(k, n)
        # (searchsorted as a method, side given positionally: the function and the keyword cost ~0.7 us)
        i = start + int(cum_blocks[start:lim].searchsorted(s.kv.num_free_blocks, "right"))
        if i >= lim:
            break
        n -= 1
        s.preempt(int(run[n]), out, needed_by=int(run[i]))
        if n == i:  # the request preempted itself: nothing after it runs this step
            k = i
            break
        start = i
    s.running = run[:n]
    return min(k, n)
