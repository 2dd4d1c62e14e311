"""The per-step record: what the trace keeps of each step, measured and written in one place
(docs/ENGINE.md#the-step-loop, steps 5 and 7).

Three paths run steps, and each measures its steps here:
- ``busy_step``: one step of the step loop, measured as it ran (before the requests that finished leave), written
  once the finished have freed their blocks;
- ``idle_steps``: a stretch with nothing to run, the clock ticking one base step each;
- ``decode_steps``: a quiet stretch (sim/fast_forward.py), every running request decoding one token a step.

Each hands its steps to ``StepWriter.write``, the one writer of the per-step record: the per-step columns
(``StepRecord``), the per-client columns (``ClientRecord``: plain numbers for one client holding every used block, a
[clients] row for up to ``cost_estimate.DENSE_CLIENTS_MAX`` clients, or sparse entries past that) and the schedule.
Nothing else appends a step to the recorder (tests/sim/test_engine_steps.py checks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .clock import Clock
from .config import EngineConfig
from .execute import Executed
from .kv_cache_manager import KVCacheManager
from .npfast import add_reduce as _sum
from .npfast import distinct
from .recorder import TraceRecorder
from .request import NO_STEP, RequestTable
from .scheduler import Scheduler, SchedulerOutput
from .trace import SCHED_DECODE, SCHED_WASTED, STEP_COLUMNS, ClientRecord, StepRecord

_COLUMN = {name: i for i, name in enumerate(StepRecord._fields)}  # a StepRecord field's place (column) in a step
_PREFILL, _OUTPUT, _USED = _COLUMN["num_prefill_tokens"], _COLUMN["num_output_tokens"], _COLUMN["used_blocks"]
_STEP_MS = _COLUMN["step_ms"]

# Per-client inputs of ``StepWriter.write``:
# - output: tokens generated per client, as the step's counter charge returned them ([clients], or for a sparse
#   record (clients ascending, [k] tokens)); None when every running request generated one token in each step;
# - prefill: (rows, [rows] prompt tokens computed) of the rows that computed prefill tokens; None: no prefill;
# - totals: the counters and service after each step, as ``Engine.charge_decode_steps`` returned them, in step
#   order: (first step, None or the clients ascending, [steps, clients or k] counters, the same of service) each;
#   None: as they are now, in every step (a busy step; an idle stretch).
Output = np.ndarray | tuple[np.ndarray, np.ndarray] | None
Prefill = tuple[np.ndarray, np.ndarray] | None
Totals = list[tuple[int, np.ndarray | None, np.ndarray, np.ndarray]] | None


class StepWriter:
    def __init__(self, config: EngineConfig, table: RequestTable, scheduler: Scheduler, kv: KVCacheManager,
                 recorder: TraceRecorder):
        self.config, self.table, self.scheduler, self.kv, self.recorder = config, table, scheduler, kv, recorder
        self.sparse = recorder.sparse
        self.num_clients = recorder.num_clients
        self.clock: Clock | None = None  # told every step's duration, when a part reads the clock mid-run
        # One client and no shared blocks, recorded densely: per-client step values are plain numbers (the client
        # holds every used block; docs/PERFORMANCE.md#the-busy-step). Busy and idle steps must record the same
        # shapes, or the trace's per-client columns cannot be stacked.
        self.scalar_client_values = (self.num_clients == 1 and not config.enable_prefix_caching
                                     and self.sparse is None)

    # ---- the one writer -------------------------------------------------------------------------------------
    def write(self, first_step: int, num_steps: int, values: tuple | np.ndarray, running: np.ndarray,
              held: np.ndarray | None, output: Output, prefill: Prefill, totals: Totals,
              schedule: tuple | None) -> None:
        """Append steps ``first_step`` to ``first_step + num_steps - 1`` to the trace.

        ``values``: StepRecord's fields in field order, a tuple of numbers alike in every step, or a
        [num_steps, len(STEP_COLUMNS)] array of each step's own. ``running``: [r] the rows in the running list
        during the steps (before the finished leave). ``held``: the blocks each of them holds, [r] or [num_steps, r];
        None when the one client holds every used block (no shared blocks: the ``used_blocks`` column). ``output``,
        ``prefill``, ``totals``: the per-client inputs above. ``schedule``: None (nothing scheduled), (rows, tokens,
        kind) of one step, or (rows, tokens, kind, [num_steps] entries a step) of a stretch with values of its own."""
        block = type(values) is np.ndarray
        if self.sparse is not None:
            self._write_sparse_clients(first_step, num_steps, values, running, held, output, prefill, totals, block)
            client_values = None
        elif self.scalar_client_values and not block:
            vtc = self.scheduler.vtc
            client_blocks, client_running, client_output_tokens = values[_USED], len(running), values[_OUTPUT]
            client_prefill_tokens, client_counters, client_service = (values[_PREFILL], vtc.counters.item(0),
                                                                      vtc.service.item(0))
            client_values = (client_blocks, client_running, client_output_tokens, client_prefill_tokens,
                             client_counters, client_service)  # (ClientRecord's fields, as a plain tuple)
        else:
            client_values = self._dense_clients(num_steps, values, running, held, output, prefill, totals, block)
        if self.clock is not None:
            self.clock.record(values[:, _STEP_MS] if block else values[_STEP_MS], num_steps)
        if block:
            self.recorder.append_block(values, client_values, *schedule)
        elif schedule is None:
            self.recorder.append_idle(num_steps, values, client_values)
        else:
            self.recorder.append(values, client_values, *schedule)

    def _dense_clients(self, num_steps: int, values: tuple | np.ndarray, running: np.ndarray,
                       held: np.ndarray | None, output: Output, prefill: Prefill, totals: Totals,
                       block: bool) -> ClientRecord:
        """The steps' per-client values: [clients] arrays alike in every step, or (``block``) [steps, clients]."""
        t, nc = self.table, self.num_clients
        client_run = t.client[running]
        running_per_client = np.bincount(client_run, minlength=nc)
        if held is None:  # one client holds every used block
            blocks = values[:, _USED][:, None].copy() if block else np.array([values[_USED]])
        elif held.ndim == 2:  # [steps, running]
            onehot = np.zeros((len(running), nc))
            onehot[np.arange(len(running)), client_run] = 1.0
            blocks = held @ onehot
        else:
            blocks = np.bincount(client_run, weights=held, minlength=nc)
        if nc == 1:  # the one client's tokens are the step's
            output_tokens = values[:, _OUTPUT][:, None] if block else np.array([values[_OUTPUT]])
        else:
            output_tokens = running_per_client if output is None else output
        if prefill is None:
            prefill_tokens = np.zeros((num_steps, nc) if block else nc)
        else:
            rows, tokens = prefill
            prefill_tokens = np.bincount(t.client[rows], weights=tokens, minlength=nc)
        if totals is None:
            vtc = self.scheduler.vtc
            counters, service = vtc.counters.copy(), vtc.service.copy()
        else:
            counters = np.concatenate([part[2] for part in totals])
            service = np.concatenate([part[3] for part in totals])
        if block:  # a stretch's per-step arrays: the values alike in every step, repeated
            running_per_client = np.repeat(running_per_client[None, :].astype(np.float64), num_steps, axis=0)
            if output is None and nc > 1:
                output_tokens = running_per_client
        return ClientRecord(client_blocks=blocks, client_running=running_per_client,
                            client_output_tokens=output_tokens, client_prefill_tokens=prefill_tokens,
                            client_counters=counters, client_service=service)

    def _write_sparse_clients(self, first_step: int, num_steps: int, values: tuple | np.ndarray,
                              running: np.ndarray, held: np.ndarray | None, output: Output, prefill: Prefill,
                              totals: Totals, block: bool) -> None:
        """The steps' per-client values, sparsely: activity entries for the clients with a request running, and
        the totals of those whose totals changed (charged for a request that ran, or lifted)."""
        t, sparse = self.table, self.sparse
        clients = None
        if len(running):
            client_run = t.client[running]
            clients = distinct(client_run)  # [k] the clients with a request running, ascending
            at = np.searchsorted(clients, client_run)  # [running] each request's client's place in clients
            k = len(clients)
            per_client = np.bincount(at, minlength=k)
            if block:
                activity = np.zeros((num_steps, k, 4))  # ACTIVITY_COLUMNS; no prefill in a stretch
                if held is None:
                    activity[:, :, 0] = values[:, _USED][:, None]
                else:
                    onehot = np.zeros((len(running), k))
                    onehot[np.arange(len(running)), at] = 1.0
                    activity[:, :, 0] = held @ onehot
                activity[:, :, 1] = activity[:, :, 2] = per_client  # (output None: one token a running request)
                sparse.activity_block(first_step, clients, activity)
            else:
                activity = np.zeros((k, 4), dtype=np.int32)  # ACTIVITY_COLUMNS
                activity[:, 0] = values[_USED] if held is None else np.bincount(at, weights=held, minlength=k)
                activity[:, 1] = per_client
                if output is None:
                    activity[:, 2] = per_client
                else:
                    emitted_clients, num_emitted = output
                    if len(emitted_clients):
                        activity[np.searchsorted(clients, emitted_clients), 2] = num_emitted
                if prefill is not None:
                    rows, tokens = prefill
                    activity[:, 3] = np.bincount(np.searchsorted(clients, t.client[rows]), weights=tokens,
                                                 minlength=k)
                if num_steps == 1:
                    sparse.activity(first_step, clients, activity)
                else:
                    sparse.activity_block(first_step, clients, np.repeat(activity[None], num_steps, axis=0))
        if totals is not None:
            for first, changed, counters, service in totals:
                if len(counters) == 1:
                    sparse.changes(first, changed, counters[0], service[0])
                else:
                    sparse.changes_block(first, changed, counters, service)
            return
        vtc = self.scheduler.vtc
        lifted = vtc.take_lifted()
        if clients is not None:  # (the clients charged this step have a request that ran, so a running one)
            changed = np.union1d(clients, np.array(lifted, dtype=np.int32)) if lifted else clients
        elif lifted:
            changed = distinct(np.array(lifted, dtype=np.int32))
        else:
            return
        sparse.changes(first_step, changed, vtc.counters[changed], vtc.service[changed])

    # ---- the three paths' measures --------------------------------------------------------------------------
    def busy_step(self, step: int, out: SchedulerOutput, done: Executed, num_aborted: int, any_disconnect: bool,
                  finish: Callable[[int, np.ndarray], None]) -> None:
        """Measure step ``step`` as it ran, call ``finish(step, done.finished)`` (the requests that finished leave;
        their blocks are free for the next step), and write the step."""
        t, s, kv, cfg = self.table, self.scheduler, self.kv, self.config
        run = s.running  # (before the finished leave it)
        num_running, num_waiting, num_swapped, num_scheduled = len(run), len(s.waiting), len(s.swapped), len(out.rows)
        num_decode_reqs = done.num_decode
        num_prefill_tokens = out.num_scheduled_tokens - num_decode_reqs
        swap_ms = cfg.cost.swap_ms(out.num_swap_blocks, cfg.block_bytes) if out.num_swap_blocks else 0.0
        step_ms = cfg.cost.step_ms(num_prefill_tokens, num_decode_reqs) + swap_ms
        num_output_tokens, num_wasted_tokens = len(done.emitted), done.num_wasted
        if num_scheduled == num_running:  # everybody ran: their KV is what they computed
            kv_tokens = done.kv_tokens_scheduled
        else:
            kv_tokens = int(_sum(t.num_computed_tokens[run]))
        orphan_blocks = orphan_kv_tokens = 0
        if any_disconnect:
            orphans = run[t.disconnect_step[run] != NO_STEP]
            orphan_blocks = int(_sum(kv.num_blocks_held[orphans]))
            orphan_kv_tokens = int(_sum(t.num_computed_tokens[orphans]))
        used_blocks, cpu_blocks_used = kv.pool.num_used, s.num_cpu_blocks_used
        num_preempted, num_admitted = out.num_preempted, out.num_admitted
        held = None if self.scalar_client_values else kv.num_blocks_held[run]
        prefill = None
        if num_prefill_tokens:
            is_prefill = ~done.decode
            prefill = (out.rows[is_prefill], out.num_tokens[is_prefill])
        finish(step, done.finished)
        free_blocks_after, num_finished = kv.num_free_blocks, num_aborted + len(done.finished)
        cached_free_blocks = self.num_cached_free_blocks()
        # StepRecord's fields as a plain tuple of the locals named after them, in field order (a test checks the
        # names; why not StepRecord(...): docs/PERFORMANCE.md#the-busy-step)
        record = (step_ms, swap_ms, num_running, num_waiting, num_swapped, num_scheduled, num_prefill_tokens,
                  num_decode_reqs, num_output_tokens, num_wasted_tokens, used_blocks, kv_tokens, orphan_blocks,
                  orphan_kv_tokens, cpu_blocks_used, num_preempted, num_admitted, free_blocks_after, num_finished,
                  cached_free_blocks)
        self.write(step, 1, record, run, held, done.client_output_tokens, prefill, None,
                   (out.rows, out.num_tokens, done.kind))

    def idle_steps(self, first: int, last: int) -> None:
        """Steps ``first`` to ``last`` with nothing to run: the clock ticks one base step each."""
        s, kv = self.scheduler, self.kv
        record = StepRecord(
            step_ms=self.config.cost.step_base_ms, swap_ms=0.0, num_running=0, num_waiting=0,
            num_swapped=len(s.swapped), num_scheduled=0, num_prefill_tokens=0, num_decode_reqs=0, num_output_tokens=0,
            num_wasted_tokens=0, used_blocks=kv.pool.num_used, kv_tokens=0, orphan_blocks=0, orphan_kv_tokens=0,
            cpu_blocks_used=s.num_cpu_blocks_used, num_preempted=0, num_admitted=0,
            free_blocks_after=kv.num_free_blocks, num_finished=0,
            cached_free_blocks=self.num_cached_free_blocks())
        run = s.running  # (empty)
        self.write(first, last - first + 1, record, run, kv.num_blocks_held[run], None, None, None, None)

    def decode_steps(self, first_step: int, num_steps: int, running: np.ndarray, computed: np.ndarray,
                     new_blocks: tuple[np.ndarray, np.ndarray], free_after: np.ndarray, num_waiting: list[int],
                     wasted: np.ndarray | None, finished: np.ndarray, totals: Totals, any_disconnect: bool) -> None:
        """Write a quiet stretch's ``num_steps`` steps from ``first_step``: every request of ``running`` decodes one
        token a step. ``computed``: [r] their computed tokens before the stretch; ``new_blocks``: (step offset,
        position in ``running``) of each block they were given for it (already theirs); ``free_after``: [steps] free
        blocks after each step's allocation; ``num_waiting``: [steps] the waiting queue's length; ``wasted``:
        [steps, r] the tokens nobody reads (None: none); ``finished``: the rows that finish in the last step (their
        blocks are free after it); ``totals``: the counters' charges (``Engine.charge_decode_steps``)."""
        t, kv, cfg = self.table, self.kv, self.config
        d, r = num_steps, len(running)
        j_of, pos_of = new_blocks
        ramp = np.arange(1, d + 1, dtype=np.float64)  # [d] tokens each request has added by the end of step j
        held = None  # [d, r] blocks each request holds during each step (needed per client or per orphan only)
        if self.num_clients > 1 or any_disconnect:  # what it holds at the end less the blocks still to open
            grown = np.bincount(j_of * r + pos_of, minlength=d * r).reshape(d, r).cumsum(axis=0)
            held = grown + (kv.num_blocks_held[running] - grown[-1])[None, :]
        values = np.zeros((d, len(STEP_COLUMNS)))  # a StepRecord a step, by field name (zeros: nothing)
        col = _COLUMN
        values[:, col["step_ms"]] = cfg.cost.step_ms(0, r) + 0.0  # no prefill, r decodes, no swap
        for name in ("num_running", "num_scheduled", "num_decode_reqs", "num_output_tokens"):
            values[:, col[name]] = r
        values[:, col["num_waiting"]] = num_waiting
        values[:, col["used_blocks"]] = cfg.num_blocks - free_after
        values[:, col["free_blocks_after"]] = free_after
        if len(finished):  # their blocks are free after the last step
            values[-1, col["free_blocks_after"]] += kv.num_blocks_held[finished].sum()
            values[-1, col["num_finished"]] = len(finished)
        values[:, col["kv_tokens"]] = int(computed.sum()) + ramp * r
        values[:, col["cpu_blocks_used"]] = self.scheduler.num_cpu_blocks_used
        if wasted is not None:
            values[:, col["num_wasted_tokens"]] = wasted.sum(axis=1)
        if any_disconnect:
            orphan = t.disconnect_step[running] != NO_STEP
            values[:, col["orphan_blocks"]] = held[:, orphan].sum(axis=1)
            values[:, col["orphan_kv_tokens"]] = computed[orphan].sum() + ramp * int(orphan.sum())
        kinds = np.full(d * r, SCHED_DECODE, dtype=np.int8) if wasted is None else \
            np.where(wasted, SCHED_WASTED, SCHED_DECODE).astype(np.int8).reshape(-1)
        rows = np.repeat(running[None, :], d, axis=0).ravel()  # the running list once a step
        self.write(first_step, d, values, running, held, None, None, totals,
                   (rows, np.ones(d * r, dtype=np.int64), kinds, [r] * d))

    def num_cached_free_blocks(self) -> int:
        """Free blocks still holding prefix-cache content (0 without prefix caching)."""
        return int(self.kv.pool.cached_free_mask().sum()) if self.config.enable_prefix_caching else 0
