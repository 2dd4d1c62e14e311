"""``schedule()``: who runs this step and with how many tokens (vLLM V1's algorithm, DESIGN.md section 2).

Phases, in order:
1. running requests, in running-list order, within the token budget; when the pool has too few free blocks,
   preempt victims (``fcfs``: the tail of the running list; ``priority``: the largest ``(priority, arrival)``)
   until the request fits or has preempted itself;
2. swapped requests (swap mode), oldest first, once their blocks fit;
3. waiting requests in queue order, stopping at the first that cannot be admitted. Nothing is admitted in a step
   that preempted, nor while swapped requests wait to come back.

The scheduler changes request and block state but never sees the trace: it reports what it did in a
``SchedulerOutput`` and the engine records it.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .config import EngineConfig, Policy, PreemptionMode
from .kv_cache_manager import KVCacheManager
from .npfast import ONE
from .npfast import add_accumulate as _cumsum
from .npfast import add_reduce as _sum
from .request import NO_STEP, RequestStatus, RequestTable
from .request_queue import make_queue

Event = tuple[int, str, int, str]  # (step, kind, row, why), as the trace records it
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
    events: list[Event] = field(default_factory=list)


# Event wording runs ~15,000 times a run, mostly on the same few hundred counts: memoised, a call is a dict lookup.
@functools.lru_cache(maxsize=4096)
def with_commas(n: int) -> str:
    """'512', '2,048': ``f"{n:,}"``."""
    return f"{n:,}"


@functools.lru_cache(maxsize=4096)
def counted(n: int, noun: str) -> str:
    """'1 block', '2,048 blocks': a count in an event's words."""
    return f"1 {noun}" if n == 1 else f"{n:,} {noun}s"


class Scheduler:
    def __init__(self, config: EngineConfig, table: RequestTable, kv: KVCacheManager, num_clients: int):
        self.config = config
        self.table = table
        self.kv = kv
        self.counters = np.zeros(num_clients, dtype=np.float64)  # [clients] virtual token counters (with lifts)
        self.service = np.zeros(num_clients, dtype=np.float64)  # [clients] weighted tokens served (no lifts)
        weights = [float(config.client_weight(c)) for c in table.client_ids]
        self.client_weight = np.array(weights, dtype=np.float64)  # [clients]
        self._client_weights = weights  # the same, as Python floats: same arithmetic, no numpy scalar overhead
        self._output_charge_per_token = config.output_weight / self.client_weight  # [clients]
        # [rows] what a request's first admission adds to its client's counter: its prompt, weighted (VTC)
        self._admission_charge = config.input_weight * table.prompt_len / self.client_weight[table.client]
        self.waiting = make_queue(config, table, self.counters, self._admission_charge)
        self.running = np.empty(0, dtype=np.int64)  # [num_running] rows in running-list order
        self.swapped: deque[int] = deque()
        self.swapped_blocks = np.zeros(len(table), dtype=np.int64)  # [rows] blocks parked in CPU memory
        self.num_cpu_blocks_used = 0
        self._is_leaving = np.zeros(len(table), dtype=bool)  # [rows] scratch mask for remove_finished
        self._watermark_blocks = config.watermark_blocks
        self.use_fast_path = True  # tests turn this off to check the vectorised path against the plain loop
        # Every running request generated a token in the last step, so each needs exactly one token now. The
        # engine sets it after each step; it lets the running phase skip working out what everyone needs.
        self.all_decoding = False
        self._ones = np.ones(config.max_num_seqs, dtype=np.int64)  # [max_num_seqs] a decode step's num_tokens
        self._ones.flags.writeable = False  # handed out as views: nobody may change them
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
                self._blocked(out, "a preemption happened this step, so nothing is admitted")
        else:
            if self.swapped:
                budget = self._schedule_swapped(budget, out, parts)
            if self.swapped and len(self.waiting):  # the waiting head is held back (a swapped one said why)
                self._blocked(out, "swapped requests resume before any waiting request", self.waiting.peek())
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

    def _blocked(self, out: SchedulerOutput, why: str, row: int | None = None) -> None:
        """Log that request ``row`` (default: the next in line, a swapped one first) cannot start this step."""
        if row is None:
            row = self.swapped[0] if self.swapped else self.waiting.peek()
        out.events.append((self._step, "blocked", row, why))

    # ---- phase 1: running ------------------------------------------------------------------------------------
    def _schedule_running(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        if not len(self.running):
            return budget
        if not self.use_fast_path:
            return self._schedule_running_loop(budget, out, parts)
        t, kv = self.table, self.kv
        run = self.running
        if self.all_decoding and len(run) <= budget and not kv.enable_caching and self._schedule_decoders(out, parts):
            return budget - len(self.running)  # (what is left of the running list after any preemption all ran)
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
            if self.config.policy is Policy.PRIORITY:  # victims may come from anywhere in the list
                return self._schedule_running_loop(budget, out, parts)
            cum_blocks = _cumsum(new_blocks)
            k = self._preempt_from_tail(cum_blocks, k, out)
            total = int(cum_blocks[k - 1]) if k else 0
            sched, computed, seq_len, after, new_blocks, held = (
                sched[:k], computed[:k], seq_len[:k], after[:k], new_blocks[:k], held[:k])
            rows = self.running[:k]
            used = int(_sum(sched))
        kv.grow_many(rows, new_blocks, held, total, np.minimum(after, seq_len) if kv.enable_caching else None)
        parts.append((rows, sched, after, all_emit, False))
        return budget - used

    def _schedule_decoders(self, out: SchedulerOutput, parts: list) -> bool:
        """The running phase when every running request decodes (``all_decoding``) and the budget covers them:
        one token each, and one more block for each whose KV fills its last block; when the pool cannot give all
        of those a block, victims from the tail of the running list, as the general path. Returns False, having
        done nothing, when victims may come from anywhere in the list (``priority``: the general path's loop)."""
        kv, run = self.kv, self.running
        computed = self.table.num_computed_tokens[run]
        fills = kv.fills_its_blocks(computed)
        growing = fills.nonzero()[0]  # (np.flatnonzero adds two Python wrappers)
        if len(growing) > kv.pool.num_free:
            if self.config.policy is Policy.PRIORITY:
                return False
            k = self._preempt_from_tail(_cumsum(fills), len(run), out)  # (a bool cumsum counts in int64)
            run, computed = self.running, computed[:k]  # the first k run: all that is left of the list
            growing = growing[: growing.searchsorted(k)]
        if len(growing):
            kv.grow_by_one_block(run[growing], computed[growing])
        parts.append((run, self._ones[:len(run)], computed + ONE, True, True))
        return True

    def _preempt_from_tail(self, cum_blocks: np.ndarray, k: int, out: SchedulerOutput) -> int:
        """vLLM's loop, vectorised: find the first running request whose blocks do not fit, preempt the tail of
        the running list, and repeat; returns how many leading requests get scheduled."""
        run = self.running
        n, start = len(run), 0
        while True:
            lim = min(k, n)
            # (searchsorted as a method, side given positionally: the function and the keyword cost ~0.7 us)
            i = start + int(cum_blocks[start:lim].searchsorted(self.kv.num_free_blocks, "right"))
            if i >= lim:
                break
            n -= 1
            self._preempt(int(run[n]), out, needed_by=int(run[i]))
            if n == i:  # the request preempted itself: nothing after it runs this step
                k = i
                break
            start = i
        self.running = run[:n]
        return min(k, n)

    def _schedule_running_loop(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        """The plain per-request loop of vLLM's scheduler (used for ``priority`` victims and as a reference)."""
        t, kv = self.table, self.kv
        running = self.running.tolist()
        scheduled: dict[int, int] = {}
        i = 0
        while i < len(running) and budget > 0:
            row = running[i]
            computed = t.num_computed_tokens.item(row)
            num_new = min(t.num_tokens.item(row) - computed, budget)
            fits = True
            while -(-(computed + num_new) // kv.block_size) - kv.num_blocks_held[row] > kv.num_free_blocks:
                victim = self._victim(running)
                if victim in scheduled:  # undo its scheduling this step: its budget comes back
                    budget += scheduled.pop(victim)
                    i -= 1
                running.remove(victim)
                self._preempt(victim, out, needed_by=row)
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

    def _victim(self, running: list[int]) -> int:
        if self.config.policy is Policy.PRIORITY:
            t = self.table
            # NOTE: vLLM takes the largest (priority, arrival_time); its arrival times are distinct. Ours are whole
            # steps, so a tie goes to the later row: within a step rows arrive in file order, so it is the later
            # arrival, as vLLM's clock would have it.
            return max(running, key=lambda r: (t.priority[r], t.arrival_step[r], r))
        return running[-1]

    # ---- preemption -----------------------------------------------------------------------------------------
    def _preempt(self, row: int, out: SchedulerOutput, needed_by: int) -> None:
        t, cfg = self.table, self.config
        held = self.kv.num_blocks_held.item(row)
        # A victim scheduled earlier in this step (priority) also holds the block just allocated for this step's
        # token, which it will not compute: a swap copies only the blocks holding computed KV.
        kv_blocks = -(-t.num_computed_tokens.item(row) // self.kv.block_size)
        who = "itself" if needed_by == row else t.ids[needed_by]
        why = (
            f"KV pool full: {who} needed a new block and none was free; "
            + ("victim = lowest priority (largest priority, arrival)" if cfg.policy is Policy.PRIORITY
               else "victim = last request in the running list")
        )
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
            out.events.append((self._step, "swap_out", row,
                               f"{why}; {counted(kv_blocks, 'block')} copied to CPU memory"))
            return
        if cfg.preemption_mode is PreemptionMode.SWAP:
            why += f"; CPU swap space full ({swap_room} of {kv_blocks} blocks free), fell back to recompute"
        t.status[row] = RequestStatus.PREEMPTED
        t.is_decoding[row] = False  # it prefills everything again
        t.computed_at_preemption[row] = t.num_computed_tokens[row]
        t.num_computed_tokens[row] = 0
        t.wait_start_step[row] = self._step
        self.waiting.prepend(row)
        out.events.append((self._step, "preempt", row, f"{why}; {counted(held, 'block')} freed, KV will be recomputed"))

    # ---- phase 2: swapped -----------------------------------------------------------------------------------
    def _schedule_swapped(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        t, kv = self.table, self.kv
        rows: list[int] = []
        toks: list[int] = []
        after: list[int] = []
        all_emit = True
        while self.swapped and budget > 0:
            row = self.swapped[0]
            computed, seq_len = t.num_computed_tokens.item(row), t.num_tokens.item(row)
            num_new = min(seq_len - computed, budget)
            need = -(-(computed + num_new) // kv.block_size)
            why = self._no_slot() or self._no_room(need)
            if why:
                out.events.append((self._step, "blocked", row, why))
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
            out.events.append((self._step, "swap_in", row, f"{counted(blocks, 'block')} copied back from CPU memory"))
        if rows:
            parts.append((np.array(rows, np.int64), np.array(toks, np.int64), np.array(after, np.int64), all_emit,
                          False))
        return budget

    def _no_slot(self, num_running: int | None = None) -> str:
        if (len(self.running) if num_running is None else num_running) >= self.config.max_num_seqs:
            n = self.config.max_num_seqs
            return "the only batch slot (max_num_seqs = 1) is taken" if n == 1 else \
                f"all {n} batch slots (max_num_seqs) are taken"
        return ""

    def _no_room(self, blocks_needed: int, num_running: int | None = None, free: int | None = None) -> str:
        """Why a request needing ``blocks_needed`` free blocks cannot start now ('' if it can)."""
        free = self.kv.pool.num_free if free is None else free
        if blocks_needed > free:
            return f"needs {counted(blocks_needed, 'KV block')} for its whole sequence, only {with_commas(free)} free"
        num_running = len(self.running) if num_running is None else num_running
        watermark = self._watermark_blocks  # (vLLM's allocate_slots: for waiting and preempted requests only)
        if watermark and num_running and free - blocks_needed < watermark:
            return f"would leave {counted(free - blocks_needed, 'free block')}, below the watermark of {watermark:,}"
        return ""

    def no_slot_or_budget(self, num_running: int, budget: int) -> str:
        """Why no waiting request can start, whatever its size ('' if one may): the first two admission rules."""
        if budget <= 0:
            return "the step's token budget is used up"
        return self._no_slot(num_running)

    def admission_check(self, row: int, num_running: int, budget: int, free: int) -> tuple[str, np.ndarray, int]:
        """Can waiting request ``row`` start now? Returns (why not, or ''; its prefix-cache hits; first chunk).
        The rules of DESIGN.md section 2, step 5, with ``free`` free blocks and ``budget`` tokens left."""
        kv, cfg = self.kv, self.config
        if budget <= 0 or num_running >= cfg.max_num_seqs:  # (no_slot_or_budget's rules: its words only if refused,
            return self.no_slot_or_budget(num_running, budget), _NO_BLOCKS, 0  # two calls saved on each check)
        num_tokens = self.table.num_tokens.item(row)
        if kv.enable_caching:
            hits = kv.find_cached_blocks(row, num_tokens)
            num_new = num_tokens - len(hits) * kv.block_size
            # Cached blocks nobody holds sit in the free queue: taking them uses up free blocks too.
            num_evictable_hits = int(np.count_nonzero(kv.pool.ref_cnt[hits] == 0)) if len(hits) else 0
            need = -(-num_tokens // kv.block_size) - len(hits) + num_evictable_hits
        else:
            hits, num_new, need = _NO_BLOCKS, num_tokens, -(-num_tokens // kv.block_size)
        # Without chunked prefill max_model_len <= max_num_batched_tokens (config), and a request stops at
        # max_model_len tokens, so its prefill (a resumed one's too) always fits a whole step's budget.
        if not cfg.chunked_prefill and budget < num_new:
            return (f"its prefill of {counted(num_new, 'token')} exceeds the {counted(budget, 'token')} left "
                    f"(chunked prefill is off)", hits, 0)
        return self._no_room(need, num_running, free), hits, min(num_new, budget)

    # ---- phase 3: waiting -----------------------------------------------------------------------------------
    def _schedule_waiting(self, budget: int, out: SchedulerOutput, parts: list) -> int:
        t, kv, queue = self.table, self.kv, self.waiting
        promoted = queue.on_step(self._step)  # (a starvation guard's promotions: usually none)
        if promoted:
            out.events.extend(self.promotion_events(self._step, promoted))
        rows: list[int] = []
        toks: list[int] = []
        after: list[int] = []
        all_emit = True
        num_running = len(self.running)
        while len(queue):
            row = queue.peek()
            why, hits, chunk = self.admission_check(row, num_running, budget, kv.pool.num_free)
            if why:
                out.events.append((self._step, "blocked", row, why))
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
            # (three conversions: cheaper than one of a nested list)
            r, num_tokens, num_computed = np.array(rows, np.int64), np.array(toks, np.int64), np.array(after, np.int64)
            self.running = np.concatenate([self.running, r])
            parts.append((r, num_tokens, num_computed, all_emit, False))
        return budget

    def promotion_events(self, step: int, rows: list[int]) -> list[Event]:
        """The starvation guard's promotions of ``rows`` at ``step``, with why (the fast-forward logs them too)."""
        cfg, wait_start = self.config, self.table.wait_start_step
        lasts = (f"for {cfg.priority_quantum_steps:,} steps of running" if cfg.priority_quantum_steps
                 else "until it is admitted")
        return [(step, "promote", row, f"waited {step - wait_start.item(row):,} steps (starvation guard threshold: "
                                       f"{cfg.starvation_threshold_steps:,}): moved ahead of every request not "
                                       f"promoted, {lasts}")
                for row in rows]

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
            c = t.client.item(row)
            charge = self._admission_charge.item(row)
            self.counters[c] += charge
            self.service[c] += charge
        hit = f", {counted(num_hit_tokens, 'token')} from the prefix cache" if num_hit_tokens else ""
        if is_resume:
            t.resumed_at_steps[row].append(self._step)
            t.num_recomputed_tokens[row] += max(t.computed_at_preemption.item(row) - num_hit_tokens, 0)
            total = t.num_tokens.item(row)
            out.events.append((self._step, "resume", row,
                               f"re-prefill of {counted(total, 'token')}{hit}; first chunk {with_commas(chunk)}"))
        else:
            out.events.append((self._step, "admit", row,
                               f"admitted with a first chunk of {counted(chunk, 'token')}{hit}"))

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

    def _output_tokens_and_charge(self, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | float]:
        """One generated token for each of ``rows``: (tokens per client, what they add to the counters), the
        charge being ``output_weight`` per token (the first included) divided by the client's weight. With one
        client: (None, a plain float), which the hot path adds to the counters without numpy's array overhead."""
        if len(self._client_weights) == 1:
            return None, len(rows) * self.config.output_weight / self._client_weights[0]
        per_client = np.bincount(self.table.client[rows], minlength=len(self.counters))
        return per_client, per_client * self._output_charge_per_token

    def output_charge(self, rows: np.ndarray) -> np.ndarray:
        """[clients] what one token for each of ``rows`` adds to the counters (charged later by the caller)."""
        per_client, charge = self._output_tokens_and_charge(rows)
        return np.array([charge]) if per_client is None else charge

    def charge_output(self, rows: np.ndarray) -> np.ndarray | None:
        """Charge one generated token for each of ``rows``; returns the [clients] token counts (None with one
        client)."""
        per_client, charge = self._output_tokens_and_charge(rows)
        if per_client is None:
            self.counters[0] += charge
            self.service[0] += charge
        elif len(rows):
            self.counters += charge
            self.service += charge
        return per_client
