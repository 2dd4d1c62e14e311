"""``schedule()``: who runs this step and with how many tokens (vLLM V1's algorithm, docs/ENGINE.md#schedule).

Read top to bottom, as vLLM's ``Scheduler.schedule()``:
1. running requests (``_schedule_running``), in running-list order, within the token budget; when the pool has too
   few free blocks, preempt victims (``_victim``: ``fcfs`` the tail of the running list, ``priority`` the largest
   ``(priority, arrival)``; ``preempt``) until the request fits or has preempted itself;
2. swapped requests (swap mode), oldest first, once their blocks fit;
3. waiting requests in queue order, stopping at the first that cannot be admitted. Nothing is admitted in a step
   that preempted, nor while swapped requests wait to come back.

The running phase here is the plain per-request loop. ``sim/scheduler_fast.py`` makes the same decisions with array
operations on the whole running list and is tried first (one call, while ``use_fast_path`` is on); tests run both
and compare the traces. Quiet stretches of many steps are ``sim/fast_forward.py``'s, called by the engine.

Virtual token counters (their charges and the lift) are ``sim/vtc.py``'s: the scheduler charges prompts at
admission, the engine charges generated tokens.

The scheduler changes request and block state but never sees the trace: it reports what it did in a
``SchedulerOutput`` (its decisions as events, see ``sim.events``) and the engine records it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from . import admission, events, scheduler_fast
from .config import EngineConfig, PreemptionMode, cdiv
from .events import RawEvent, WaitReason
from .kv_cache_manager import KVCacheManager
from .policies import make_queue, spec_of
from .request import NO_STEP, RequestStatus, RequestTable
from .vtc import VirtualCounters

# What one phase scheduled: rows, tokens each, num_computed_tokens each after the step, whether all of them emit,
# whether all of them decode (one token each, not their first).
_Part = tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool]
_NO_BLOCKS = np.empty(0, dtype=np.int32)
_NO_ROWS = np.empty(0, dtype=np.int64)
_RUNNING = int(RequestStatus.RUNNING)  # a plain int: numpy stores it without converting an IntEnum first


@dataclass(slots=True)
class SchedulerOutput:
    rows: np.ndarray  # [k] int64 scheduled rows: running-list order, then swapped-in, then admitted
    num_tokens: np.ndarray  # [k] int64 tokens scheduled for each row (on top of its num_computed_tokens)
    num_computed_after: np.ndarray  # [k] int64 each row's num_computed_tokens once the step has run
    all_emit: bool = True  # every scheduled row computes all its tokens, so each generates one (a common step)
    all_decode: bool = False  # every scheduled row decodes one token, and none is its first (the commonest step)
    num_preempted: int = 0
    num_admitted: int = 0
    num_swap_blocks: int = 0  # blocks copied between GPU and CPU this step (both directions)
    num_scheduled_tokens: int = 0  # sum(num_tokens)
    events: list[RawEvent] = field(default_factory=list)  # sim/events.py


class Scheduler:
    def __init__(self, config: EngineConfig, table: RequestTable, kv: KVCacheManager):
        self.config = config
        self.table = table
        self.kv = kv
        self.vtc = VirtualCounters(config, table)  # per-client counters: charged under every policy, read by VTC/LCF
        self.rules = admission.AdmissionRules(config)
        self.waiting = make_queue(config, table, self.vtc)
        # whom a full pool preempts (the policy's record): the running list's last, or the lowest priority anywhere
        self.victim_by_priority = spec_of(config.policy).victim == "lowest_priority"
        self.running = np.empty(0, dtype=np.int64)  # [num_running] rows in running-list order
        self.swapped: deque[int] = deque()
        self.swapped_blocks = np.zeros(len(table), dtype=np.int64)  # [rows] blocks parked in CPU memory
        self.num_cpu_blocks_used = 0
        self._is_leaving = np.zeros(len(table), dtype=bool)  # [rows] scratch mask for remove_finished
        self.use_fast_path = True  # sim/scheduler_fast.py first; tests turn it off to compare with the plain loop
        # Every running request generated a token in the last step, so each needs exactly one token now. The
        # engine sets it after each step; it lets the fast path skip working out what everyone needs.
        self.all_decoding = False
        # [max_num_seqs] int64 ones, read-only: a decode step's num_tokens, handed out as views by the fast path
        self.decode_num_tokens = np.ones(config.max_num_seqs, dtype=np.int64)
        self.decode_num_tokens.flags.writeable = False
        self._step = 0

    # ---- the step --------------------------------------------------------------------------------------------
    def schedule(self, step: int) -> SchedulerOutput:
        self._step = step
        out = SchedulerOutput(_NO_ROWS, _NO_ROWS, _NO_ROWS)
        budget = self.config.max_num_batched_tokens
        parts: list[_Part] = []  # one per phase that scheduled something
        budget = self._schedule_running(budget, out, parts)
        if out.num_preempted:
            if len(self.waiting) or self.swapped:
                self._blocked(out, WaitReason.PREEMPTED_THIS_STEP)
        else:
            if self.swapped:
                budget = self._schedule_swapped(budget, out, parts)
            if self.swapped and len(self.waiting):  # the waiting head is held back (a swapped one said why)
                self._blocked(out, WaitReason.SWAPPED_FIRST, self.waiting.peek())
            elif not self.swapped:
                budget = self._schedule_waiting(budget, out, parts)
        out.num_scheduled_tokens = int(self.config.max_num_batched_tokens - budget)
        if len(parts) == 1:
            out.rows, out.num_tokens, out.num_computed_after, out.all_emit, out.all_decode = parts[0]
        elif parts:
            rows, num_tokens, after, emit, decode = zip(*parts, strict=True)  # (a tuple a field, no generators)
            out.num_tokens = np.concatenate(num_tokens)
            out.num_computed_after = np.concatenate(after)
            out.all_emit, out.all_decode = all(emit), all(decode)
            # Each phase schedules a prefix of what it appends to the running list, so when everybody runs the
            # scheduled rows are the running list itself.
            same = len(out.num_tokens) == len(self.running)
            out.rows = self.running if same else np.concatenate(rows)
        return out

    def _blocked(self, out: SchedulerOutput, why: WaitReason, row: int | None = None) -> None:
        """Log that request ``row`` (default: the next in line, a swapped one first) cannot start this step."""
        if row is None:
            row = self.swapped[0] if self.swapped else self.waiting.peek()
        out.events.append(events.blocked(self._step, row, why))

    # ---- phase 1: running ------------------------------------------------------------------------------------
    def _schedule_running(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        """vLLM's loop over the running list: each request gets the tokens it still needs, as far as the budget
        goes; when the pool has too few free blocks for them, preempt victims until it fits or it preempted itself.
        Returns the budget left. The fast path makes the same decisions with array operations."""
        if not len(self.running):
            return budget
        if self.use_fast_path:
            left = scheduler_fast.schedule_running(self, budget, out, parts)
            if left is not None:  # (None: a case it leaves to this loop; it changed nothing)
                return left
        t, kv = self.table, self.kv
        running = self.running.tolist()
        scheduled: dict[int, int] = {}
        i = 0
        while i < len(running) and budget > 0:
            row = running[i]
            computed = t.num_computed_tokens.item(row)
            num_new = min(t.num_tokens.item(row) - computed, budget)
            fits = True
            while cdiv(computed + num_new, kv.block_size) - kv.num_blocks_held[row] > kv.num_free_blocks:
                victim = self._victim(running)
                if victim in scheduled:  # undo its scheduling this step: its budget comes back
                    budget += scheduled.pop(victim)
                    i -= 1
                running.remove(victim)
                self.preempt(victim, out, needed_by=row)
                if victim == row:
                    fits = False
                    break
            if not fits:
                break
            kv.grow(row, computed + num_new, min(computed + num_new, t.num_tokens.item(row)))
            scheduled[row] = num_new
            budget -= num_new
            i += 1
        self.running = np.array(running, dtype=np.int64)
        rows = np.array(list(scheduled), dtype=np.int64)
        num_new = np.array(list(scheduled.values()), dtype=np.int64)
        after = t.num_computed_tokens[rows] + num_new
        parts.append((rows, num_new, after, bool((after == t.num_tokens[rows]).all()), False))
        return budget

    # ---- phase 2: swapped -----------------------------------------------------------------------------------
    def _schedule_swapped(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        """Swap preempted requests back in, oldest first, while their blocks fit (swap mode; no prefill to check:
        they computed their prompts). Returns the budget left."""
        t, kv = self.table, self.kv
        rows: list[int] = []
        toks: list[int] = []
        after: list[int] = []
        all_emit = True
        while self.swapped and budget > 0:
            row = self.swapped[0]
            computed, seq_len = t.num_computed_tokens.item(row), t.num_tokens.item(row)
            num_new = min(seq_len - computed, budget)
            need = cdiv(computed + num_new, kv.block_size)
            # (its prefill is not checked against the budget: a swapped request has computed its prompt)
            refusal = (self.rules.slot_or_budget(len(self.running), budget)
                       or self.rules.prefill_or_room(0, budget, need, kv.pool.num_free, len(self.running)))
            if refusal:
                out.events.append(refusal.event(self._step, row))
                break
            self.swapped.popleft()
            kv.admit(row, _NO_BLOCKS, computed + num_new, min(computed + num_new, seq_len))
            blocks = self.swapped_blocks.item(row)
            self.swapped_blocks[row] = 0
            self.num_cpu_blocks_used -= blocks
            out.num_swap_blocks += blocks
            t.status[row] = RequestStatus.RUNNING
            t.resumed_at_steps[row].append(self._step)
            t.swapped_in_at_steps[row].append(self._step)
            self.running = np.append(self.running, row)
            rows.append(row)
            toks.append(num_new)
            after.append(computed + num_new)
            all_emit = all_emit and computed + num_new == seq_len
            budget -= num_new
            out.events.append(events.swapped_in(self._step, row, blocks))
        if rows:
            parts.append((np.array(rows, np.int64), np.array(toks, np.int64), np.array(after, np.int64), all_emit,
                          False))
        return budget

    # ---- phase 3: waiting -----------------------------------------------------------------------------------
    def _schedule_waiting(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        """Admit waiting requests in queue order, stopping at the first that cannot start (its refusal is logged).
        Returns the budget left."""
        t, kv, queue = self.table, self.kv, self.waiting
        promoted = self.promote(self._step)  # (a starvation guard's promotions: usually none)
        if promoted:
            out.events.extend(promoted)
        rows: list[int] = []
        toks: list[int] = []
        after: list[int] = []
        all_emit = True
        num_running = len(self.running)
        while len(queue):
            row = queue.peek()
            refusal, hits, chunk = self.admission_check(row, num_running, budget, kv.pool.num_free)
            if refusal:
                out.events.append(refusal.event(self._step, row))
                break
            queue.pop()
            num_tokens, num_hit_tokens = t.num_tokens.item(row), len(hits) * kv.block_size
            computed = num_hit_tokens + chunk
            kv.admit(row, hits, computed, min(computed, num_tokens))
            self._start_running(row, num_hit_tokens, chunk, out)
            num_running += 1
            rows.append(row)
            toks.append(chunk)
            after.append(computed)
            all_emit = all_emit and computed == num_tokens
            budget -= chunk
        if rows:
            # (three conversions: docs/PERFORMANCE.md#small-arrays)
            r, num_tokens, num_computed = np.array(rows, np.int64), np.array(toks, np.int64), np.array(after, np.int64)
            self.running = np.concatenate([self.running, r])
            parts.append((r, num_tokens, num_computed, all_emit, False))
        return budget

    def admission_check(self, row: int, num_running: int, budget: int,
                        free: int) -> tuple[admission.Refusal | None, np.ndarray, int]:
        """Can waiting request ``row`` start now? Returns (why not, or None; its prefix-cache hits; first chunk):
        the rules of ``sim.admission`` with ``free`` free blocks and ``budget`` tokens left, on what the request
        needs once its cached blocks are found."""
        kv, rules = self.kv, self.rules
        # (slot_or_budget's test, inline: docs/PERFORMANCE.md#admission-checks)
        if budget <= 0 or num_running >= rules.max_num_seqs:
            return rules.slot_or_budget(num_running, budget), _NO_BLOCKS, 0
        num_tokens = self.table.num_tokens.item(row)
        if kv.enable_caching:
            hits = kv.find_cached_blocks(row, num_tokens)
            num_new = num_tokens - len(hits) * kv.block_size
            # Cached blocks nobody holds sit in the free queue: taking them uses up free blocks too.
            num_evictable_hits = int(np.count_nonzero(kv.pool.ref_cnt[hits] == 0)) if len(hits) else 0
            need = cdiv(num_tokens, kv.block_size) - len(hits) + num_evictable_hits
        else:
            hits, num_new, need = _NO_BLOCKS, num_tokens, cdiv(num_tokens, kv.block_size)
        refusal = rules.prefill_or_room(num_new, budget, need, free, num_running)
        return refusal, hits, (0 if refusal else min(num_new, budget))

    def _start_running(self, row: int, num_hit_tokens: int, chunk: int, out: SchedulerOutput) -> None:
        t = self.table
        is_resume = t.num_preemptions.item(row) > 0  # (.item: Python ints compare faster than numpy scalars)
        t.num_computed_tokens[row] = num_hit_tokens
        if num_hit_tokens:
            t.num_cached_tokens[row] += num_hit_tokens
        t.status[row] = _RUNNING
        out.num_admitted += 1
        if t.first_scheduled_step.item(row) == NO_STEP:
            t.first_scheduled_step[row] = self._step
            self.vtc.charge_prompt(row)
        if is_resume:
            t.resumed_at_steps[row].append(self._step)
            t.num_recomputed_tokens[row] += max(t.computed_at_preemption.item(row) - num_hit_tokens, 0)
        out.events.append(events.admitted(self._step, row, is_resume, t.num_tokens.item(row), chunk, num_hit_tokens))

    def promote(self, step: int) -> list[RawEvent]:
        """Let the waiting queue promote the requests its starvation guard says are due at ``step`` (none for other
        orders), and return the promotions as events, with how long each waited (the step loop's waiting phase and
        the fast-forward's walk both promote here)."""
        rows = self.waiting.on_step(step)
        if not rows:
            return rows
        wait_start = self.table.wait_start_step
        return [events.promoted(step, row, step - wait_start.item(row)) for row in rows]

    # ---- victim choice and preemption ------------------------------------------------------------------------
    def _victim(self, running: list[int]) -> int:
        """The request to preempt, as the policy's record says: the tail of the running list (``fcfs`` and the
        others), or the largest (priority, arrival) (``priority``: ``victim="lowest_priority"``)."""
        if self.victim_by_priority:
            t = self.table
            # NOTE: vLLM takes the largest (priority, arrival_time); its arrival times are distinct. Ours are whole
            # steps, so a tie goes to the later row: within a step rows arrive in file order, so it is the later
            # arrival, as vLLM's clock would have it.
            return max(running, key=lambda r: (t.priority[r], t.arrival_step[r], r))
        return running[-1]

    def preempt(self, row: int, out: SchedulerOutput, needed_by: int) -> None:
        """Preempt running request ``row`` (to make room for ``needed_by``): free its blocks and swap it out, or send
        it back to the waiting queue to recompute."""
        t, cfg = self.table, self.config
        held = self.kv.num_blocks_held.item(row)
        # A victim scheduled earlier in this step (priority) also holds the block just allocated for this step's
        # token, which it will not compute: a swap copies only the blocks holding computed KV.
        kv_blocks = cdiv(t.num_computed_tokens.item(row), self.kv.block_size)
        self.kv.free(row)
        out.num_preempted += 1
        t.num_preemptions[row] += 1
        t.preempted_at_steps[row].append(self._step)
        swap_room = cfg.num_cpu_blocks - self.num_cpu_blocks_used
        # NOTE: vLLM V1 only recomputes; swap is V0's option (its victims resumed before any waiting request), and
        # its copy is costed per block here (config.CostModel.swap_ms), not per layer as V0 copied.
        if cfg.preemption_mode is PreemptionMode.SWAP and kv_blocks <= swap_room:
            t.status[row] = RequestStatus.SWAPPED
            t.swapped_out_at_steps[row].append(self._step)
            self.swapped_blocks[row] = kv_blocks
            self.num_cpu_blocks_used += kv_blocks
            out.num_swap_blocks += kv_blocks
            self.swapped.append(row)
            out.events.append(events.swapped_out(self._step, row, needed_by, kv_blocks))
            return
        if cfg.preemption_mode is PreemptionMode.SWAP:  # no room in CPU memory: recompute instead
            event = events.preempted(self._step, row, needed_by, held, kv_blocks, swap_room)
        else:
            event = events.preempted(self._step, row, needed_by, held)
        t.status[row] = RequestStatus.PREEMPTED
        t.is_decoding[row] = False  # it prefills everything again
        t.computed_at_preemption[row] = t.num_computed_tokens[row]
        t.num_computed_tokens[row] = 0
        t.wait_start_step[row] = self._step
        self.waiting.prepend(row)
        out.events.append(event)

    # ---- removal (finish, abort) ----------------------------------------------------------------------------
    def remove(self, row: int) -> None:
        """Take a request out of whichever queue holds it and free its blocks (finish or abort)."""
        status = self.table.status.item(row)  # a Python int: numpy scalars compare slowly with an IntEnum
        if status == RequestStatus.RUNNING:
            self.kv.free(row)
            self.running = self.running[self.running != row]
        elif status in (RequestStatus.WAITING, RequestStatus.PREEMPTED):
            self.waiting.remove(row)
        elif status == RequestStatus.SWAPPED:
            self.swapped.remove(row)
            self.num_cpu_blocks_used -= self.swapped_blocks.item(row)
            self.swapped_blocks[row] = 0

    def remove_finished(self, rows: np.ndarray) -> None:
        """Free the blocks of requests that finished this step (vectorised removal from the running list)."""
        for row in rows.tolist():
            self.kv.free(row)
        if len(rows) == 1:
            self.running = self.running[self.running != rows[:1]]  # (a 1-element array: no scalar to convert)
            return
        self._is_leaving[rows] = True
        self.running = self.running[~self._is_leaving[self.running]]
        self._is_leaving[rows] = False
