"""Preemptions rebuilt from a trace, the KV blocks each request held step by step, and what bringing a victim back
costs by recompute or by swap.

Everything here reads a trace (its schedule and its events, ``sim/events.py``) or a config, never the engine: the
numbers the Preemption lesson shows, for any run. Units: tokens, blocks of the run's ``block_size``, bytes, and ms
from the run's ``CostModel`` (which prices every part, so a page never redoes the arithmetic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from .config import EngineConfig, cdiv
from .events import Event, EventKind, PreemptReason
from .request import NO_STEP
from .trace import Trace


class PreemptionKind(StrEnum):
    RECOMPUTE = "recompute"  # KV freed, prefilled again when the request is re-admitted
    SWAP = "swap"  # KV copied to CPU memory, copied back when it resumes
    FALLBACK = "fallback"  # meant to be swapped, but the CPU swap space was full: recomputed instead


@dataclass(frozen=True)
class Preemption:
    """One eviction, rebuilt from the trace: who, when, how, how much KV it held, and how it came back."""

    request_id: str
    row: int
    step: int
    kind: PreemptionKind
    needed_by_row: int  # the request that needed a block and found none free (the victim itself, maybe)
    num_tokens: int  # tokens of KV it held (computed) when evicted
    num_blocks: int  # blocks it held (a swap: the blocks copied to CPU memory)
    resume_step: int  # NO_STEP (-1) = never came back
    num_resume_tokens: int  # sequence re-prefilled on a recompute resume (prompt + generated so far); 0 for a swap
    num_cached_tokens: int  # of those, found in the prefix cache

    @property
    def num_recomputed_tokens(self) -> int:
        """Tokens prefilled again on resume (the lost KV that was not in the cache, plus the newest token)."""
        return max(self.num_resume_tokens - self.num_cached_tokens, 0) if self.kind != PreemptionKind.SWAP else 0


_ADMISSIONS = (EventKind.ADMIT, EventKind.RESUME)
_RETURNS = (EventKind.RESUME, EventKind.SWAP_IN)
_EVICTIONS = (EventKind.PREEMPT, EventKind.SWAP_OUT)


def preemptions(trace: Trace) -> list[Preemption]:
    """Every preemption of the run, in order. Tokens held are rebuilt from the schedule: the cache hits of the
    request's last (re)admission plus every token scheduled for it since (a swap-in keeps counting)."""
    steps, rows, tokens, _ = trace.schedule_entries()
    starts: dict[int, list[tuple[int, int]]] = {}  # row -> [(admission step, cache-hit tokens)]
    returns: dict[int, list[Event]] = {}  # row -> its recompute resumes and swap-ins
    for e in trace.events:
        if e.kind in _ADMISSIONS:
            starts.setdefault(e.row, []).append((e.step, e.num_cached_tokens))
        if e.kind in _RETURNS:
            returns.setdefault(e.row, []).append(e)
    out = []
    for e in trace.events:
        if e.kind not in _EVICTIONS:
            continue
        start, hits = max((s for s in starts.get(e.row, []) if s[0] < e.step), default=(0, 0))
        mine = (rows == e.row) & (steps >= start) & (steps < e.step)
        swapped = e.kind is EventKind.SWAP_OUT
        back = next((r for r in returns.get(e.row, []) if r.step > e.step), None)
        resumed = back is not None and back.kind is EventKind.RESUME
        out.append(Preemption(
            trace.request_ids[e.row], e.row, e.step, _kind(e), e.other_row, hits + int(tokens[mine].sum()),
            e.num_cpu_blocks if swapped else e.num_blocks,
            back.step if back else NO_STEP,
            back.num_tokens if resumed else 0,
            back.num_cached_tokens if resumed else 0))
    return out


def _kind(event: Event) -> PreemptionKind:
    if event.kind is EventKind.SWAP_OUT:
        return PreemptionKind.SWAP
    return PreemptionKind.FALLBACK if event.reason is PreemptReason.SWAP_SPACE_FULL else PreemptionKind.RECOMPUTE


# ---- KV held per request, rebuilt from the schedule ------------------------------------------------------------
_STARTS_HOLDING = (EventKind.ADMIT, EventKind.RESUME, EventKind.SWAP_IN)
_HOLD_CHANGES = (*_STARTS_HOLDING, EventKind.PREEMPT, EventKind.SWAP_OUT, EventKind.FINISH, EventKind.ABORT)


def blocks_held(trace: Trace, rows: Sequence[int]) -> np.ndarray:
    """[num_steps, len(rows)] float64: the KV blocks each request held during each step (counted as the trace's
    ``used_blocks`` counts them: after scheduling, before finished requests free theirs).

    Rebuilt from the schedule and the events, no block-map snapshots needed: from each admission (the prefix-cache
    hits of the admit/resume event, plus every token scheduled since) or swap-in (the tokens it left with) until a
    preemption, swap-out or abort (exclusive) or its finish step (inclusive), the request holds
    ceil(computed tokens / block_size) blocks. A block shared through the prefix cache counts for each holder."""
    n = trace.num_steps
    steps, srows, stoks, _ = trace.schedule_entries()
    wanted = {int(r): k for k, r in enumerate(rows)}
    tokens = np.zeros((n, len(rows)))  # [steps, len(rows)] tokens scheduled for each request in each step
    pick = np.isin(srows, list(wanted))
    np.add.at(tokens, (steps[pick], [wanted[int(r)] for r in srows[pick]]), stoks[pick])
    timeline: dict[int, list[Event]] = {r: [] for r in wanted}
    for e in trace.events:
        if e.row in wanted and e.kind in _HOLD_CHANGES:
            timeline[e.row].append(e)
    out = np.zeros((n, len(rows)))
    for row, k in wanted.items():
        _fill_held(out[:, k], tokens[:, k], timeline[row], trace.config.block_size)
    return out


def _fill_held(held: np.ndarray, tokens: np.ndarray, timeline: Sequence[Event], block_size: int) -> None:
    """One request's column of ``blocks_held``: ``held`` [steps] filled in place from ``tokens`` [steps] (tokens
    scheduled for it each step) and its ``timeline`` of admissions, evictions and its finish, in step order."""
    start, base, left_with = -1, 0.0, 0.0
    for e in timeline:
        if e.kind in _STARTS_HOLDING:
            start, base = e.step, (left_with if e.kind is EventKind.SWAP_IN else float(e.num_cached_tokens))
            continue
        if start < 0:
            continue  # e.g. aborted while waiting: it held nothing
        end = e.step + 1 if e.kind is EventKind.FINISH else e.step
        computed = base + np.cumsum(tokens[start:end])
        held[start:end] = np.ceil(computed / block_size)
        left_with = float(computed[-1]) if len(computed) else base
        start = -1
    if start >= 0:  # still running when the run ended
        held[start:] = np.ceil((base + np.cumsum(tokens[start:])) / block_size)


# ---- what bringing a victim back costs -------------------------------------------------------------------------
@dataclass(frozen=True)
class PreemptionCost:
    """Bringing back a victim that held ``num_tokens`` tokens of KV: by recompute, or by swap (each way)."""

    num_tokens: int
    num_blocks: int  # whole blocks a swap copies
    swap_bytes: int  # blocks x block bytes: what a swap copies each way and parks in CPU RAM
    recompute_ms: float  # GPU time to prefill the lost tokens again
    swap_transfer_ms: float  # one way, at the peak bandwidth
    swap_overhead_ms: float  # one way, the per-block copy overhead
    swap_ms: float  # one way, in all: what the engine charges

    @property
    def effective_gb_s(self) -> float:
        """The bandwidth a swap achieves once the per-block overhead is counted, GB/s (NaN for an empty victim)."""
        return self.swap_bytes / (self.swap_ms * 1e6) if self.swap_ms else float("nan")


def preemption_cost(num_tokens: int, config: EngineConfig) -> PreemptionCost:
    """What the run's cost model charges to bring back ``num_tokens`` tokens of KV. E.g. 2,000 tokens of Llama 3.1
    8B: recompute 2,000 x 16 us = 32 ms; swap 125 blocks x 2 MiB = 262 MB, 5.24 ms at 50 GB/s plus 125 x 5 us =
    5.87 ms each way."""
    cost = config.cost
    num_blocks = cdiv(num_tokens, config.block_size)
    swap_bytes = cost.swap_bytes(num_blocks, config.block_bytes)
    return PreemptionCost(num_tokens, num_blocks, swap_bytes, cost.recompute_ms(num_tokens),
                          cost.swap_transfer_ms(swap_bytes), cost.swap_overhead_ms(num_blocks),
                          cost.swap_ms(num_blocks, config.block_bytes))
