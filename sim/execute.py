"""Execute: the scheduled requests compute their tokens, and those that computed all of theirs generate one
(docs/ENGINE.md#execute). ``Executor.step`` runs one engine step's schedule; ``Executor.decode_steps`` a quiet
stretch's, every running request decoding one token a step (sim/fast_forward.py).

The waste rule has its one home here, ``is_wasted``: a generated token is wasted when its client has disconnected or
it lies past the answer's useful length. Both kinds of execute apply it; the trace records its verdict in the
``num_wasted_tokens`` column and as ``SCHED_WASTED`` in the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .npfast import ONE, ONE_I8
from .npfast import add_reduce as _sum
from .request import NO_STEP, RequestTable
from .scheduler import Scheduler, SchedulerOutput
from .trace import SCHED_DECODE, SCHED_WASTED

if TYPE_CHECKING:
    from .door import Door

_NO_KIND = np.empty(0, dtype=np.int8)


def is_wasted(table: RequestTable, rows: np.ndarray, num_output: np.ndarray) -> np.ndarray:
    """bool, ``num_output``'s shape: the token that brings request ``rows[i]`` to ``num_output[..., i]`` output tokens
    is read by nobody (its client is gone, or it is past the answer's useful length). ``num_output`` is [k] (one step)
    or [steps, k] (a stretch of steps)."""
    return (table.disconnect_step[rows] != NO_STEP) | (num_output > table.useful_len[rows])


@dataclass(slots=True)
class Executed:  # (not a NamedTuple: docs/PERFORMANCE.md#the-busy-step)
    """What one step's execute did."""
    emitted: np.ndarray  # rows that generated a token this step
    finished: np.ndarray  # rows that generated their last token
    decode: np.ndarray  # [len(out.rows)] bool: decoded one token (else prefill)
    kind: np.ndarray  # [len(out.rows)] int8 SCHED_* per scheduled row
    num_decode: int  # rows that decoded one token
    num_wasted: int  # tokens generated that nobody reads
    kv_tokens_scheduled: int  # KV tokens held by the scheduled rows after the step
    # [clients] tokens generated per client (None with one client); for sparse per-client values, (the clients
    # that generated, ascending; [k] their tokens): what the counters' charge returned
    client_output_tokens: np.ndarray | tuple[np.ndarray, np.ndarray] | None


class Executor:
    """Advances the scheduled requests' token counts, charges the generated tokens to their clients' counters and
    tells the waiting queue who ran (the starvation guard's quantum)."""

    def __init__(self, table: RequestTable, scheduler: Scheduler, *, may_waste: bool, sparse_clients: bool):
        self.table = table
        self.scheduler = scheduler
        self.may_waste = may_waste  # some client leaves or some answer runs past what is read: look for waste
        self.sparse_clients = sparse_clients  # charge only the clients that generated (what a sparse record reads)
        self.door: Door | None = None  # told of first tokens when vLLM's caps count prefills (sim/door.py)
        num_clients = len(table.client_ids)
        self._no_client_tokens = None if num_clients == 1 else np.zeros(num_clients, dtype=np.int64)
        if sparse_clients:  # (charge_output_by_client's answer for no rows)
            self._no_client_tokens = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64))
        # Read-only per-step arrays of a step in which everybody decodes, handed out as views
        # (docs/PERFORMANCE.md#the-busy-step).
        max_num_seqs = scheduler.config.max_num_seqs
        self._decode_kind = np.full(max_num_seqs, SCHED_DECODE, dtype=np.int8)
        self._all_true = np.ones(max_num_seqs, dtype=bool)
        self._decode_kind.flags.writeable = self._all_true.flags.writeable = False

    def step(self, step: int, out: SchedulerOutput) -> Executed:
        """Advance every scheduled request; each that has computed all its tokens emits one new token."""
        t, rows, after = self.table, out.rows, out.num_computed_after
        if not len(rows):
            return Executed(rows, rows, np.zeros(0, dtype=bool), _NO_KIND, 0, 0, 0, self._no_client_tokens)
        t.num_computed_tokens[rows] = after
        if out.all_decode:  # the commonest step: everybody decodes a token that is not its first
            n = len(rows)
            t.num_tokens[rows] = after + ONE
            num_output = t.num_output_tokens[rows] + ONE
            t.num_output_tokens[rows] = num_output
            kind = np.full(n, SCHED_DECODE, dtype=np.int8) if self.may_waste else self._decode_kind[:n]
            return self._emitted(rows, rows, num_output, self._all_true[:n], kind, n, after)
        # A decode computes exactly the one token generated last step (costed per request, not per token); it
        # always completes, so it emits. A prefill's last chunk of one token is still prefill.
        decode = t.is_decoding[rows]
        if out.all_emit:  # the common step: no row-selection needed
            emitted, is_emitting = rows, None
            t.num_tokens[rows] = after + ONE
        else:
            is_emitting = after == t.num_tokens[rows]
            emitted = rows[is_emitting]
            t.num_tokens[emitted] += 1
        num_output = t.num_output_tokens[emitted] + ONE
        t.num_output_tokens[emitted] = num_output
        num_decode = int(np.count_nonzero(decode))
        if num_decode < len(emitted):  # prefills that finished this step decode from the next one
            t.is_decoding[emitted] = True
        if len(num_output) and num_output[num_output.argmin()] == 1:  # a first token (a recomputed request keeps
            # its first token's step); argmin: docs/PERFORMANCE.md#small-arrays
            first = emitted[num_output == 1]
            t.first_token_step[first] = step
            if self.door is not None:
                self.door.first_tokens(first)
        if is_emitting is None:
            kind = decode.view(np.int8) + ONE_I8  # SCHED_PREFILL_DONE / _DECODE
        else:
            kind = is_emitting.view(np.int8) + decode.view(np.int8)  # SCHED_PREFILL / _PREFILL_DONE / _DECODE
        return self._emitted(rows, emitted, num_output, decode, kind, num_decode, after, is_emitting)

    def _emitted(self, rows: np.ndarray, emitted: np.ndarray, num_output: np.ndarray, decode: np.ndarray,
                 kind: np.ndarray, num_decode: int, after: np.ndarray,
                 is_emitting: np.ndarray | None = None) -> Executed:
        """The rest of ``step`` once the tokens are counted: wasted tokens, counter charges, who finished.
        ``is_emitting`` (None: every scheduled row emitted) maps ``emitted`` back to positions in ``rows``."""
        t = self.table
        num_wasted = 0
        if self.may_waste:
            wasted_mask = is_wasted(t, emitted, num_output)
            wasted = emitted[wasted_mask]
            t.num_wasted_tokens[wasted] += 1
            num_wasted = len(wasted)
            kind[wasted_mask if is_emitting is None else is_emitting.nonzero()[0][wasted_mask]] = SCHED_WASTED
        if self.sparse_clients:
            client_output_tokens = self.scheduler.vtc.charge_output_by_client(emitted)
        else:
            client_output_tokens = self.scheduler.vtc.charge_output(emitted)
        self.scheduler.waiting.on_scheduled(rows)
        finished = emitted[num_output >= t.target_len[emitted]]
        return Executed(emitted, finished, decode, kind, num_decode, num_wasted, int(_sum(after)), client_output_tokens)

    def decode_steps(self, running: np.ndarray, num_steps: int) -> tuple[np.ndarray | None, np.ndarray]:
        """A quiet stretch's execute: every request of ``running`` decodes one token (not its first) in each of
        ``num_steps`` steps, and none reaches its target length before the last. Returns which of those tokens are
        wasted ([num_steps, running] bool, None when no token can be) and the rows that finish in the last step. The
        tokens' counter charges are the fast-forward's (``Engine.charge_decode_steps``), made as it walks the
        stretch."""
        t = self.table
        num_output = t.num_output_tokens[running]
        wasted = None
        if self.may_waste:
            wasted = is_wasted(t, running, num_output + np.arange(1, num_steps + 1)[:, None])
            t.num_wasted_tokens[running] += wasted.sum(axis=0)
        finished = running[num_output + num_steps >= t.target_len[running]]
        t.num_computed_tokens[running] += num_steps
        t.num_output_tokens[running] += num_steps
        t.num_tokens[running] += num_steps
        self.scheduler.waiting.on_scheduled_steps(running, num_steps)
        return wasted, finished
