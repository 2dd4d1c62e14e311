"""The engine's invariants, checked after every step in the tests (docs/ENGINE.md#invariants): block accounting and
ownership, one block per ``block_size`` computed tokens, the batch size, queue lengths against statuses, no request
lost, swap space, counters that only grow, the door's counts (sim/door.py), and a sparse trace that recorded every
change of the totals."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .config import cdiv
from .request import FINISHED_STATUSES, NO_STEP, RequestStatus

if TYPE_CHECKING:
    from .engine import Engine


def check(engine: Engine, prev_counters: np.ndarray) -> np.ndarray:
    """Raise AssertionError if ``engine``'s state breaks an invariant; ``prev_counters``: the clients' counters at the
    last check. Returns the counters now (for the next check)."""
    t, s, kv = engine.table, engine.scheduler, engine.kv
    kv.check_integrity()
    run = s.running
    if len(np.unique(run)) != len(run) or (t.status[run] != RequestStatus.RUNNING).any():
        raise AssertionError("running list has duplicates or rows not RUNNING")
    expected = cdiv(t.num_computed_tokens[run], kv.block_size)
    if not np.array_equal(expected, kv.num_blocks_held[run]):
        raise AssertionError("a running request holds a block count other than ceil(computed / block_size)")
    if len(run) > engine.config.max_num_seqs:
        raise AssertionError("more running requests than max_num_seqs")
    counts = np.bincount(t.status, minlength=len(RequestStatus))
    waiting = counts[RequestStatus.WAITING] + counts[RequestStatus.PREEMPTED]
    if (counts[RequestStatus.RUNNING] != len(run) or waiting != len(s.waiting)
            or counts[RequestStatus.SWAPPED] != len(s.swapped)):
        raise AssertionError("queue lengths (running, waiting, swapped) disagree with request statuses")
    if counts[list(FINISHED_STATUSES)].sum() != engine.num_done:
        raise AssertionError("a request was lost")
    if s.num_cpu_blocks_used != int(s.swapped_blocks.sum()) or s.num_cpu_blocks_used > engine.config.num_cpu_blocks:
        raise AssertionError("CPU swap space accounting is off")
    door = engine.door
    if door is not None and door.counts:
        unfinished = (t.status >= RequestStatus.WAITING) & (t.status <= RequestStatus.PREEMPTED)
        prefilling = unfinished & (t.first_token_step == NO_STEP)
        tokens = int(t.prompt_len[prefilling].sum())
        if door.num_unfinished != int(unfinished.sum()) or door.num_prefill_tokens != tokens:
            raise AssertionError("the door's counts (unfinished requests, prompt tokens in prefill) are off")
    if (s.vtc.counters < prev_counters - 1e-9).any():
        raise AssertionError("a virtual counter decreased")
    sparse = engine.recorder.sparse
    if sparse is not None:
        # (a lift by the arrivals of the step after a quiet stretch is recorded by that step)
        recorded = np.ones(engine.num_clients, dtype=bool)
        recorded[s.vtc.lifted] = False
        if not (np.array_equal(sparse.last_counters[recorded], s.vtc.counters[recorded])
                and np.array_equal(sparse.last_service, s.vtc.service)):
            raise AssertionError("a client's counter or service changed without a sparse trace recording it")
    return s.vtc.counters.copy()
