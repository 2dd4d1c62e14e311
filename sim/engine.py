"""The step loop: arrivals, disconnects, schedule, execute, finish, record (docs/ENGINE.md#the-step-loop).

``simulate(config, requests)`` runs until every request has ended (finished, aborted or rejected with a reason)
and returns a ``Trace``. Stretches with nothing to do are recorded in bulk: the clock ticks one base step each.

The engine holds the parts and the loop; the steps' work is theirs: the scheduler decides (sim/scheduler.py), the
executor runs the schedule (sim/execute.py), the one writer records every step (sim/step_record.py), and quiet
stretches go through sim/fast_forward.py, which reaches the engine only through the quiet-stretch interface below.
The invariant checks are sim/invariants.py's.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from . import cost_estimate, events, fast_forward, invariants
from .admission import Refusal, rejection_reasons
from .arrivals import Arrivals, Leaving
from .clock import Clock
from .config import EngineConfig
from .door import Door
from .events import EventKind, FinishReason, RejectReason, describe
from .execute import Executor
from .kv_cache_manager import KVCacheManager
from .recorder import TraceRecorder
from .request import NO_STEP, RequestSpec, RequestStatus, RequestTable
from .scheduler import Scheduler
from .shedding import Shedder
from .step_record import StepWriter, Totals
from .trace import Trace


class SimulationError(RuntimeError):
    """A run that cannot finish (the step guard tripped, or no request can ever make progress)."""


class StepLimitError(SimulationError):
    """The step guard tripped: ``num_unfinished`` of ``num_requests`` requests were not done by ``max_steps``. (The
    app, where max_steps is no setting, words its own advice from these.)"""

    def __init__(self, message: str, max_steps: int, num_unfinished: int, num_requests: int):
        super().__init__(message)
        self.max_steps, self.num_unfinished, self.num_requests = max_steps, num_unfinished, num_requests

    def __reduce__(self):  # (a prefetch worker's error comes back pickled: keep the figures)
        return type(self), (str(self), self.max_steps, self.num_unfinished, self.num_requests)


def client_ids_of(requests: Sequence[RequestSpec]) -> list[str]:
    """Client ids in order of first appearance."""
    return list(dict.fromkeys(r.client_id for r in requests))


class Engine:
    def __init__(self, config: EngineConfig, requests: Sequence[RequestSpec], *, name: str = "",
                 snapshot_every_steps: int = 0, check_invariants: bool = False, fast_forward: bool = True,
                 limits: cost_estimate.Limits = cost_estimate.CLI_LIMITS, sparse_clients: bool | None = None):
        if not requests:
            raise ValueError("requests: a scenario needs at least one request")
        ids = [r.request_id for r in requests]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))  # (set.add returns None)
            raise ValueError(f"requests: duplicate request id {dup!r}")
        self.config = config
        self.name = name
        self.specs = list(requests)
        self.table = t = RequestTable(self.specs, config, client_ids_of(self.specs))
        self.num_clients = len(t.client_ids)
        groups = {g: i for i, g in enumerate(dict.fromkeys(r.prefix_group for r in requests if r.prefix_group))}
        prefix_group = np.array([groups.get(r.prefix_group, -1) for r in requests], dtype=np.int64)
        self.rejection = rejection_reasons(t, config)  # [rows] RejectReason, None for a request that can run
        # (no more batch slots than requests: a slot is taken lowest first, so the slots used are the same)
        self.kv = KVCacheManager(config.num_blocks, config.block_size, min(config.max_num_seqs, len(t)), t.max_blocks,
                                 len(t), prefix_group, t.prefix_len, config.enable_prefix_caching)
        self.scheduler = Scheduler(config, t, self.kv)
        # Per-client values every step for every client (what the pages' charts read), or past
        # DENSE_CLIENTS_MAX clients only for those that did something (the same trace; tests force both ways)
        self.sparse_clients = (self.num_clients > cost_estimate.DENSE_CLIENTS_MAX if sparse_clients is None
                               else bool(sparse_clients))
        self.recorder = TraceRecorder(self.num_clients, sparse=self.sparse_clients)
        self.writer = StepWriter(config, t, self.scheduler, self.kv, self.recorder)  # the one writer of the steps
        if self.sparse_clients:
            self.scheduler.vtc.lifted = []  # (lifts are the changes of a counter outside a scheduled client's step)
        # The step guard: max_steps, or fewer when the trace of that many steps would pass the memory budget (at the
        # most a step can cost; a sparse run goes on while what it has recorded leaves room: _more_steps)
        self.limits = limits
        self._num_active = (cost_estimate.active_clients(self.num_clients, config.max_num_seqs, len(t))
                            if self.sparse_clients else None)
        self.max_steps = min(config.max_steps,
                             cost_estimate.max_recorded_steps(self.num_clients, limits, self._num_active))
        self.snapshot_every_steps = snapshot_every_steps
        self.check_invariants = check_invariants
        self.fast_forward = fast_forward  # skip through quiet stretches (same trace; tests compare both ways)
        self.quiet_retry_step = 0  # the fast-forward need not look for a quiet stretch before this step
        # What comes when (sim/arrivals.py): clients leaving, and arrivals (below). An arrival may add a client leaving
        # ahead (a timed arrival's timeout): a quiet stretch then ends before it
        self.leaving = Leaving(self.specs, config)
        self.arrivals_add_disconnects = t.arrival_ms is not None and config.timeout_steps > 0
        self._disconnect_reason: dict[int, FinishReason] = {}
        self.door = Door.of(config, t)  # the rate limit and vLLM's caps at arrival (None: neither is on)
        # The run's clock as the record goes (sim/clock.py), if timed arrivals or shedding read it: the writer feeds it
        self.clock = Clock() if t.arrival_ms is not None or Shedder.wanted(config) else None
        self.writer.clock = self.clock
        self.arrivals = Arrivals(t, self.clock, config.max_steps)
        self.shedder = Shedder.of(config, t, self.clock)  # deadline-aware shedding (None: off)
        self._on_enter = [part.enter for part in (self.door, self.shedder) if part is not None]
        self.num_done = 0
        self._next_step = 0
        # Tokens can be wasted only if some client leaves or some answer runs past what is read.
        may_waste = (bool(self.leaving.at) or self.arrivals_add_disconnects
                     or bool((t.target_len > t.useful_len).any()))
        self.executor = Executor(t, self.scheduler, may_waste=may_waste, sparse_clients=self.sparse_clients)
        self.executor.door = self.door if self.door is not None and self.door.counts else None  # (first tokens)
        self.any_disconnect = False
        self._prev_counters = np.zeros(self.num_clients)

    # ---- the loop -------------------------------------------------------------------------------------------
    def run(self, until_step: int | None = None) -> Trace:
        """Run to the end (or through step ``until_step``, then stop and return the partial trace)."""
        self.advance(until_step)
        return self.recorder.finish(self.config, self.table, self.name)

    def advance(self, until_step: int | None = None) -> None:
        """Step the engine to the end, or through step ``until_step`` (the state can then be inspected)."""
        with gc_paused():
            self._advance(until_step)

    def _advance(self, until_step: int | None) -> None:
        n, step = len(self.table), self._next_step
        while self.num_done < n and (until_step is None or step <= until_step):
            if step >= self.max_steps and not self._more_steps(step):
                raise self._step_limit_error("stopped after {limit} steps with {left}")
            if self._is_idle():
                next_step = self.next_event_step()
                if next_step is None:
                    raise SimulationError(f"no request can make progress at step {step}")
                if next_step >= self.max_steps and not self._more_steps(next_step - 1, next_step - step):  # say
                    # so now, not after recording the idle steps first
                    raise self._step_limit_error(f"the engine is idle until step {next_step:,}, past "
                                                 "{limit:,}, with {left}")
                if next_step > step:
                    last = next_step - 1 if until_step is None else min(next_step - 1, until_step)
                    self.writer.idle_steps(step, last)
                    step = self._next_step = last + 1
                    continue
            self.arrive(step)  # arrivals come first in every step; the fast-forward decides after them
            # (quiet_steps itself says when to look again: skip the call until then)
            quiet = (fast_forward.quiet_steps(self, step, until_step)
                     if self.fast_forward and step >= self.quiet_retry_step else 0)
            done = fast_forward.advance(self, step, quiet) if quiet else 0
            if done:
                step = self._next_step = step + done
                if self.check_invariants:
                    self._check_invariants()
                continue
            self.step(step)
            step = self._next_step = step + 1

    def _more_steps(self, step: int, num_idle: int = 0) -> bool:
        """The step guard at ``step``: a sparse run held back by the most a step can cost may go on as far as the
        budget left by what it has recorded (and ``num_idle`` idle steps to record next) allows. True if that is
        past ``step`` (``max_steps`` moves there)."""
        sparse = self.recorder.sparse
        if sparse is None or self.max_steps >= self.config.max_steps:
            return False
        self.max_steps = min(self.config.max_steps, cost_estimate.max_recorded_steps(
            self.num_clients, self.limits, self._num_active, self.recorder.num_steps, sparse.num_entries, num_idle))
        return self.max_steps > step

    def _step_limit_error(self, what: str) -> StepLimitError:
        """The step guard's error, ``what`` with ``{limit}`` for the limit and ``{left}`` for the requests left:
        max_steps, or the memory budget of the trace when that stops the run first."""
        n = len(self.table)
        by_memory = self.max_steps < self.config.max_steps
        limit = cost_estimate.StepLimit(self.max_steps, "" if by_memory else "max_steps=")
        what = what.format(limit=limit, left=f"{n - self.num_done} of {n} requests unfinished")
        if by_memory:
            message = (f"{what}: the trace of more steps with {self.num_clients:,} client(s) would pass "
                       f"{self.limits.who}'s memory budget of {self.limits.max_bytes:,} bytes; shorten the workload "
                       f"or use fewer clients")
        else:
            message = f"{what}; raise max_steps or shorten the workload"
        return StepLimitError(message, self.max_steps, n - self.num_done, n)

    def queue_view(self) -> dict[str, list[str]]:
        """Request ids in the waiting queue (admission order), the running list and the swapped queue, now."""
        ids, s = self.table.ids, self.scheduler
        return {"waiting": [ids[r] for r in s.waiting.order()], "running": [ids[r] for r in s.running.tolist()],
                "swapped": [ids[r] for r in s.swapped]}

    def step(self, step: int) -> None:
        """One engine step, after ``advance`` has queued the step's arrivals."""
        num_aborted = self._disconnect(step)
        if self.shedder is not None:
            num_aborted += self._shed(step)
        out = self.scheduler.schedule(step)
        if out.events:
            self.recorder.events.extend(out.events)
        done = self.executor.step(step, out)
        # Everybody in the running list ran and generated a token: next step each needs exactly one.
        self.scheduler.all_decoding = out.all_emit and len(out.rows) == len(self.scheduler.running)
        self.writer.busy_step(step, out, done, num_aborted, self.any_disconnect,
                              self._snapshot_and_finish if self.snapshot_every_steps else self.finish)
        if not len(out.rows) and self._is_stuck(step):
            this_step = itertools.takewhile(lambda e: e.step == step,
                                            map(events.record, reversed(self.recorder.events)))
            why = next((describe(e, self.table.ids, self.config) for e in this_step if e.kind is EventKind.BLOCKED), "")
            raise SimulationError(f"no request can make progress at step {step}: {why}")
        if self.check_invariants:
            self._check_invariants()

    def _is_idle(self) -> bool:
        s = self.scheduler
        return not len(s.running) and not len(s.waiting) and not s.swapped

    def _is_stuck(self, step: int) -> bool:
        s = self.scheduler
        return (not len(s.running) and not s.swapped and len(s.waiting) > 0
                and self.next_event_step(after=step) is None)

    def next_arrival_step(self, before: int | None = None) -> int | None:
        """The step of the next arrival not yet in the waiting queue. Given ``before``, a step at or past ``before``
        may stand for any arrival that late (``Arrivals.next_step``)."""
        a = self.arrivals
        if not a.timed_left:  # (every request still to come gives its step)
            return a.steps[a.next] if a.next < len(a.steps) else None
        return a.next_step(self._ahead_ms(), before)

    def _ahead_ms(self) -> float:
        """How long each step not yet recorded lasts: the step loop reads the clock at the step it runs (recorded);
        only idle stretches (nobody runs: a base step each) and quiet stretches (sim/fast_forward.py: the batch
        decodes) look further, and either way it is a step of ``len(running)`` decodes, as ``StepWriter`` records."""
        return self.config.cost.step_ms(0, len(self.scheduler.running)) + 0.0

    def next_disconnect_step(self, after: int) -> int | None:
        """The first step after ``after`` when a client leaves or the server notices one that left."""
        return self.leaving.next_step(after)

    def next_event_step(self, after: int = -1) -> int | None:
        """The first step after ``after`` with an arrival, a client leaving or an abort being noticed."""
        candidates = [s for s in (self.next_disconnect_step(after), self.next_arrival_step()) if s is not None]
        return min(candidates) if candidates else None

    # ---- arrivals and disconnects ---------------------------------------------------------------------------
    def arrive(self, step: int) -> None:
        """The arrivals of ``step``, in file order: those given the step, and those whose time the clock has reached
        at its start (docs/ENGINE.md#arrivals-on-the-clock)."""
        a = self.arrivals
        if a.timed_left:
            timed = a.take_timed(step, self._ahead_ms())
            if timed:
                self.leaving.add_timeouts(timed, step)
                for row in sorted(timed + a.take_given(step)):
                    self._arrive_row(row, step)
                return
        steps = a.steps
        while a.next < len(steps) and steps[a.next] == step:
            row = a.rows[a.next]
            a.next += 1
            self._arrive_row(row, step)

    def _arrive_row(self, row: int, step: int) -> None:
        """Request ``row`` arrives at ``step``: rejected, or it joins the waiting queue."""
        why = self.rejection[row] or (self.door.refusal(row, step) if self.door is not None else None)
        if why:
            self._end(row, step, RequestStatus.REJECTED, why)
            self.recorder.events.append(events.rejected(step, row, why))
            return
        for enter in self._on_enter:  # (the door's counts, shedding's candidates)
            enter(row, step)
        t = self.table
        t.status[row] = RequestStatus.WAITING
        t.wait_start_step[row] = step
        self.scheduler.waiting.add(row)
        self.recorder.events.append(events.arrived(step, row))

    def _disconnect(self, step: int) -> int:
        """Mark clients that left at ``step``; abort those the server notices now. Returns how many aborted."""
        leaving = self.leaving
        if not leaving.at and not leaving.noticed:  # nobody leaves in this run (or nobody is left)
            return 0
        t, cfg = self.table, self.config
        num_aborted = 0
        for row, reason in leaving.at.pop(step, []):
            if RequestStatus(t.status[row]).is_finished or t.disconnect_step[row] != NO_STEP:
                continue
            t.disconnect_step[row] = step
            self.any_disconnect = True
            self._disconnect_reason[row] = reason
            if cfg.abort_on_disconnect:
                leaving.notice(row, step + cfg.disconnect_detect_delay_steps)
            self.recorder.events.append(events.disconnected(step, row, reason))
        for row in leaving.noticed.pop(step, []):
            if not RequestStatus(t.status[row]).is_finished:
                num_blocks = self.kv.num_blocks_held.item(row) if t.status[row] == RequestStatus.RUNNING else 0
                self.scheduler.remove(row)
                self._end(row, step, RequestStatus.FINISHED_ABORTED, self._disconnect_reason[row])
                self.recorder.events.append(events.aborted(step, row, self._disconnect_reason[row], num_blocks))
                num_aborted += 1
        return num_aborted

    def _shed(self, step: int) -> int:
        """Shed the waiting requests whose TTFT target has passed (sim/shedding.py). Returns how many."""
        rows = self.shedder.due(step)
        for row in rows:
            self.scheduler.remove(row)
            self._end(row, step, RequestStatus.FINISHED_ABORTED, FinishReason.DEADLINE_PASSED)
            self.recorder.events.append(events.aborted(step, row, FinishReason.DEADLINE_PASSED, 0))
        return len(rows)

    def _end(self, row: int, step: int, status: RequestStatus, reason: RejectReason | FinishReason) -> None:
        if self.door is not None and status != RequestStatus.REJECTED:
            self.door.leave(row)
        self.table.status[row] = status
        self.table.finish_step[row] = step
        self.table.finish_reason[row] = reason
        self.num_done += 1

    # ---- finish -------------------------------------------------------------------------------------------
    def finish(self, step: int, finished: np.ndarray) -> None:
        if not len(finished):
            return
        t = self.table
        for row in finished.tolist():
            if t.stops_on_stop.item(row):
                status, reason = RequestStatus.FINISHED_STOPPED, FinishReason.STOP
            else:
                status, reason = RequestStatus.FINISHED_LENGTH_CAPPED, FinishReason.LENGTH
            self._end(row, step, status, reason)
            self.recorder.events.append(events.finished(step, row, reason, t.num_output_tokens.item(row)))
        self.scheduler.remove_finished(finished)

    def _snapshot_and_finish(self, step: int, finished: np.ndarray) -> None:
        """A busy step, once measured: the block map's snapshot if one is due, then the finished leave."""
        if step % self.snapshot_every_steps == 0:
            self.recorder.snapshots[step] = (self.kv.owner_map(), self._cached_free_mask())
        self.finish(step, finished)

    def _cached_free_mask(self) -> np.ndarray:
        return self.kv.pool.cached_free_mask()

    # ---- the quiet-stretch interface: all sim/fast_forward.py reads and does (its QuietStretchEngine) ----------
    @property
    def running(self) -> np.ndarray:
        """[r] the running list's rows, in order (read only)."""
        return self.scheduler.running

    @property
    def num_waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def num_swapped(self) -> int:
        return len(self.scheduler.swapped)

    @property
    def num_free_blocks(self) -> int:
        return self.kv.num_free_blocks

    def batch_decodes(self) -> bool:
        """Every running request decodes next step: one token each, the one it generated last (a prefill's last
        chunk of one token is no decode)."""
        return self.scheduler.all_decoding or bool(self.table.is_decoding[self.scheduler.running].all())

    def first_shed_step(self, first_step: int, num_steps: int) -> int | None:
        """The first of ``num_steps`` steps from ``first_step`` that could shed a waiting request while the batch
        decodes (None: none, or shedding is off)."""
        s = self.shedder
        return None if s is None else s.first_due(first_step, num_steps, len(self.running),
                                                  self.next_arrival_step(before=first_step + num_steps))

    def next_promotion_step(self) -> int | None:
        """The first step at which the waiting queue's starvation guard may promote (None: none is due)."""
        return self.scheduler.waiting.next_promotion_step()

    def waiting_heads(self, num_steps: int, charge: tuple | None = None) -> list[int]:
        """The head of the waiting queue in each of the next ``num_steps`` steps, nothing arriving or promoted
        meanwhile: the head now, in each; or, given ``charge`` (``decode_charge``'s, for a queue ordered by the
        clients' counters, ``head_moves="counters"``, recorded densely), read off the counters' running sums as
        each step charges it."""
        waiting = self.scheduler.waiting
        if charge is None:
            return [waiting.peek()] * num_steps
        counters, _ = self.scheduler.vtc.running_totals(charge[1], num_steps)
        return waiting.heads_over(counters[:-1]).tolist()

    def head_refusal(self, row: int, free_blocks: int) -> Refusal | None:
        """Why waiting request ``row`` could not start in a step in which the running batch decodes one token each
        and ``free_blocks`` blocks are free (None: it could). The scheduler's admission check."""
        s = self.scheduler
        num_running = len(s.running)
        return s.admission_check(row, num_running, self.config.max_num_batched_tokens - num_running, free_blocks)[0]

    def batch_refusal(self) -> Refusal | None:
        """The refusal every waiting request gets while the running batch decodes (no batch slot or no token budget
        left for it), or None if that leaves room."""
        num_running = len(self.scheduler.running)
        return self.scheduler.rules.slot_or_budget(num_running, self.config.max_num_batched_tokens - num_running)

    def decode_charge(self) -> tuple[np.ndarray | None, np.ndarray]:
        """What one token for each running request adds to the counters, for ``charge_decode_steps`` and
        ``waiting_heads``: (None, [clients]), or recorded sparsely (the running requests' clients ascending, [k])."""
        vtc, run = self.scheduler.vtc, self.scheduler.running
        return vtc.output_charge_by_client(run) if self.sparse_clients else (None, vtc.output_charge(run))

    def promote(self, step: int) -> None:
        """The starvation guard's promotions due at ``step``, made and logged (the scheduler's ``promote``)."""
        promoted = self.scheduler.promote(step)
        if promoted:
            self.recorder.events.extend(promoted)

    def refuse(self, first_step: int, num_steps: int, rows: list[int], refusals: list[Refusal]) -> None:
        """Log the waiting queue's head ``rows[i]`` refused (``refusals[i]``) in step ``first_step + i``, for each
        of the first ``num_steps`` steps."""
        self.recorder.events.extend([refusal.event(first_step + i, row)
                                     for i, row, refusal in zip(range(num_steps), rows, refusals, strict=False)])

    def charge_decode_steps(self, first_step: int, num_steps: int,
                            charge: tuple[np.ndarray | None, np.ndarray]) -> tuple:
        """Charge ``charge`` (``decode_charge``'s) to the counters once a step, for steps ``first_step`` to
        ``first_step + num_steps - 1``: each running request's token, in the step loop's order (the same floats).
        Returns the totals after each step for the record, to pass to ``decode_steps``: (first_step, None, [steps,
        clients] counters, the same of service); recorded sparsely, of the charged clients and of those lifted
        since the last record (their lift is recorded in the first step)."""
        vtc = self.scheduler.vtc
        clients, per_step = charge
        counters, service = vtc.charge_steps(per_step, num_steps, clients)
        lifted = vtc.take_lifted() if clients is not None else None
        if lifted:
            changed = np.union1d(clients, np.array(lifted, dtype=np.int32))
            at = np.searchsorted(changed, clients)
            counters_now = np.repeat(vtc.counters[changed][None, :], num_steps, axis=0)
            service_now = np.repeat(vtc.service[changed][None, :], num_steps, axis=0)
            counters_now[:, at], service_now[:, at] = counters, service
            return first_step, changed, counters_now, service_now
        return first_step, clients, counters, service

    def decode_steps(self, first_step: int, num_steps: int, new_blocks: tuple[np.ndarray, np.ndarray, np.ndarray],
                     free_after: np.ndarray, num_waiting: list[int], totals: Totals) -> None:
        """Run and record a quiet stretch: every running request decodes one token a step for ``num_steps`` steps
        from ``first_step``, and those whose last token comes in the last step finish there. ``new_blocks``: (step
        offset, running-list position, k-th new block of that request) of each block the batch opens, in vLLM's
        order; ``free_after``: [steps] free blocks after each step's allocation; ``num_waiting``: [steps] the
        waiting queue's length; ``totals``: ``charge_decode_steps``'s, in step order."""
        run = self.scheduler.running
        j_of, pos_of, k_of = new_blocks
        self.kv.append_blocks(run, pos_of, k_of)
        computed = self.table.num_computed_tokens[run]  # (a copy: before the stretch)
        wasted, finished = self.executor.decode_steps(run, num_steps)
        self.writer.decode_steps(first_step, num_steps, run, computed, (j_of, pos_of), free_after, num_waiting,
                                 wasted, finished, totals, self.any_disconnect)
        self.finish(first_step + num_steps - 1, finished)
        self.scheduler.all_decoding = True  # everybody decoded in every step of the stretch

    # ---- invariants -----------------------------------------------------------------------------------------
    def _check_invariants(self) -> None:
        """docs/ENGINE.md#invariants (sim/invariants.py); raises AssertionError on a broken state."""
        self._prev_counters = invariants.check(self, self._prev_counters)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that makes many containers and no reference cycles (a
    run; why: docs/PERFORMANCE.md#the-garbage-collector). Only a caller that found it on turns it back on, so
    overlapping runs in several threads leave it as they found it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def queues_after_step(config: EngineConfig, requests: Sequence[RequestSpec], step: int) -> dict[str, list[str]]:
    """Re-run up to the end of ``step`` and return the queues then (for the step inspector)."""
    engine = Engine(config, requests)
    engine.advance(until_step=step)
    return engine.queue_view()


def simulate(config: EngineConfig, requests: Sequence[RequestSpec], *, name: str = "",
             snapshot_every_steps: int = 0, check_invariants: bool = False, fast_forward: bool = True,
             limits: cost_estimate.Limits = cost_estimate.CLI_LIMITS, sparse_clients: bool | None = None) -> Trace:
    """Run ``requests`` on an engine configured by ``config`` and return the trace. ``limits.max_bytes`` bounds
    the trace: the run stops (``StepLimitError``) before it records more steps than fit. ``sparse_clients``: record
    per-client values sparsely (True), densely (False), or by the number of clients (None: past
    ``cost_estimate.DENSE_CLIENTS_MAX``); the trace reads the same."""
    with gc_paused():  # (the engine's set-up and the trace's assembly too)
        engine = Engine(config, requests, name=name, snapshot_every_steps=snapshot_every_steps,
                        check_invariants=check_invariants, fast_forward=fast_forward, limits=limits,
                        sparse_clients=sparse_clients)
        return engine.run()
