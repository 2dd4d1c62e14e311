"""The Preemption lesson's "what to notice" sentences, computed from the runs' preemption records
(``sim.preemption_metrics``, one list per run: ``Run.preempted``): who was evicted first and why, where a recomputed
victim went in the queue, what the evictions cost, recompute against swap, prefix-cache hits on re-prefill.
``lesson.notices`` puts them in the page's order; the sizing sweep's are ``sizing.sweep_notices``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.config import cdiv
from sim.events import EventKind
from sim.preemption_metrics import Preemption, PreemptionKind
from sim.trace import Trace
from ui.wording import count, join_and, safe_id

from .costs import cpu_swap_space, fmt_bytes

if TYPE_CHECKING:  # (lesson.py imports this module: the type only)
    from .lesson import Run


def _victim_reason(trace: Trace, p: Preemption) -> str:
    cfg, r = trace.config, trace.requests
    if cfg.policy.value == "priority":
        return f"the running request with the lowest priority (priority {int(r['priority'][p.row])}: the largest " \
               f"number, as in vLLM, where smaller runs first; arrived at step {int(r['arrival_step'][p.row]):,})"
    return "the last request in the running list, i.e. the one admitted last"


def victim_notice(run: Run) -> list[str]:
    """Who was evicted first, why it was that one, and how many evictions the run had."""
    trace, ps = run.trace, run.preempted
    if not ps:
        peak = int(trace.steps["used_blocks"].max()) if trace.num_steps else 0
        return [f"{run.label}: nothing was preempted: at its fullest the running requests held {peak:,} of the "
                f"pool's {count(trace.config.num_blocks, 'block')} ({peak / trace.config.num_blocks:.0%})."]
    p = ps[0]
    victim = safe_id(p.request_id)  # (ids come from files: shown as typed, never as Markdown)
    needer = f"{victim} itself" if p.needed_by_row == p.row else safe_id(trace.request_ids[p.needed_by_row])
    rows = {q.row for q in ps}
    tail = f" In all: {count(len(ps), 'preemption')} of {count(len(rows), 'request')}." if len(ps) > 1 else ""
    return [f"{run.label}: the pool filled at step {p.step:,}: {needer} needed a new block and none was free, so "
            f"the scheduler evicted {victim}, {_victim_reason(trace, p)}, holding {p.num_tokens:,} tokens "
            f"({p.num_blocks:,} blocks).{tail}"]


def _waiting_at(trace: Trace, step: int, exclude: int) -> list[int]:
    """Rows waiting for their first admission during ``step`` (arrived, not yet scheduled), except ``exclude``."""
    r = trace.requests
    first = np.where(r["first_scheduled_step"] < 0, np.iinfo(np.int64).max, r["first_scheduled_step"])
    rows = np.flatnonzero((r["arrival_step"] <= step) & (first > step))
    return [int(x) for x in rows if x != exclude]


def requeue_notice(run: Run) -> list[str]:
    """Where a recomputed victim went in the queue: at the head, blocking smaller requests (FCFS), or behind
    higher priorities (priority)."""
    trace = run.trace
    r, bs = trace.requests, trace.config.block_size
    for p in run.preempted:
        if p.kind is PreemptionKind.SWAP:
            continue
        end = p.resume_step if p.resume_step >= 0 else trace.num_steps
        head_steps = sorted({e.step for e in trace.events if e.kind is EventKind.BLOCKED and e.row == p.row
                             and p.step < e.step < end})
        behind = sorted({w for s in head_steps for w in _waiting_at(trace, s, p.row)})
        first = r["first_scheduled_step"]
        ahead = [int(w) for w in np.flatnonzero((first > p.step) & (first < end)) if w != p.row]
        if behind and not ahead:
            need = {w: cdiv(int(r["prompt_len"][w]), bs) for w in behind}
            mine = cdiv(p.num_resume_tokens, bs) if p.num_resume_tokens else p.num_blocks
            small = join_and([f"{safe_id(trace.request_ids[w])} ({count(need[w], 'block')})" for w in behind[:4]]
                          + ([f"{len(behind) - 4} more"] if len(behind) > 4 else []))
            they = "it" if len(behind) == 1 else "they"
            less = f" although {they} needed far fewer blocks" if max(need.values()) * 2 <= mine else ""
            # Its whole wait, from the preemption to the re-admission; a later victim may have gone in front of it
            # for part of that time (FCFS puts each at the head), so its steps at the head can be fewer.
            waited = end - p.step
            wait = (f"it waited {count(waited, 'step')} to be re-admitted" if p.resume_step >= 0
                    else f"it was not re-admitted in the {count(waited, 'step')} left")
            at_head = ("" if len(head_steps) >= waited - 1 else
                       f" ({len(head_steps):,} of them at the head of the queue)")
            return [f"{run.label}: {safe_id(p.request_id)} went back to the head of the waiting queue. Needing "
                    f"{count(mine, 'block')} to re-prefill, {wait}{at_head}, and {small} waited behind it{less}: "
                    f"a preempted request at the head of the queue blocks the requests behind it."]
        if ahead:
            names = join_and([f"{safe_id(trace.request_ids[w])} (priority {int(r['priority'][w])})" for w in ahead[:4]])
            victim = safe_id(p.request_id)
            return [f"{run.label}: {victim} (priority {int(r['priority'][p.row])}) was re-inserted into the "
                    f"queue by priority, so {names} went ahead of it while it waited to be recomputed"
                    + (f" (back at step {p.resume_step:,})." if p.resume_step >= 0 else ".")]
    return []


def cost_notices(runs: Sequence[Run]) -> list[str]:
    """What the run's preemptions cost: swap fallbacks first (a swap that did not happen explains the rest), then
    GPU time re-prefilling, copy time, CPU RAM."""
    out, fallbacks = [], []
    for run in runs:
        ps, cfg = run.preempted, run.trace.config
        if not ps:
            continue
        recomputed = [p for p in ps if p.kind is not PreemptionKind.SWAP]
        swapped = [p for p in ps if p.kind is PreemptionKind.SWAP]
        if recomputed:
            tokens = int(run.summary["recomputed_tokens"])
            out.append(f"{run.label}: {count(len(recomputed), 'eviction')} by recompute threw away KV that "
                       f"cost {tokens:,} tokens of prefill to rebuild: {cfg.cost.recompute_ms(tokens):,.1f} "
                       f"ms of GPU time spent on work already done once.")
        if swapped:
            moved = cfg.cost.swap_bytes(sum(p.num_blocks for p in swapped), cfg.block_bytes)
            peak_cpu = cfg.cost.swap_bytes(int(run.trace.steps["cpu_blocks_used"].max()), cfg.block_bytes)
            out.append(f"{run.label}: {count(len(swapped), 'swap')} copied {fmt_bytes(moved)} to CPU memory "
                       f"(and back), {run.summary['swap_ms']:,.1f} ms of copies in all, and parked up to "
                       f"{fmt_bytes(peak_cpu)} in CPU RAM; no token was recomputed.")
        fallback = [p for p in ps if p.kind is PreemptionKind.FALLBACK]
        if fallback:
            fallbacks.append(f"{run.label}: {count(len(fallback), 'swap')} fell back to recompute: the CPU swap "
                             f"space ({cpu_swap_space(cfg)}) had no room for the victim's {fallback[0].num_blocks:,} "
                             "blocks.")
    return fallbacks + out


def mode_notice(runs: Sequence[Run]) -> list[str]:
    """Recompute vs swap on the same workload: when the victims finished, in steps and in ms."""
    modes = {run.trace.config.preemption_mode.value: run for run in runs}
    if set(modes) != {"recompute", "swap"}:
        return []
    rec, swp = modes["recompute"], modes["swap"]
    if not (rec.preempted or swp.preempted):  # no victim: the mode had nothing to do (the victim notice says so)
        return []
    a, b = rec.summary["finish_ms"]["mean"], swp.summary["finish_ms"]["mean"]
    sa, sb = rec.summary["finish_steps"]["mean"], swp.summary["finish_steps"]["mean"]
    if not (np.isfinite(a) and np.isfinite(b)):
        return []
    same = "the same number of steps" if abs(sa - sb) < 0.5 else f"{sa:,.0f} vs {sb:,.0f} steps"
    return [f"Mean finish time: {a:,.1f} ms with recompute, {b:,.1f} ms with swap ({same}). A victim waits for "
            f"free blocks either way; the mode only changes what coming back costs."]


def cache_notices(runs: Sequence[Run]) -> list[str]:
    """Prefix-cache hits on re-prefill, per run that recomputed anything (runs without caching only when another
    run has it on, for the comparison)."""
    out = []
    any_caching = any(run.trace.config.enable_prefix_caching for run in runs)
    for run in runs:
        back = [p for p in run.preempted if p.kind is not PreemptionKind.SWAP and p.resume_step >= 0]
        if not back:
            continue
        total = sum(p.num_resume_tokens for p in back)
        hits = sum(p.num_cached_tokens for p in back)
        # A re-admission prefills its newest token too (generated, never computed): one more than the preemption
        # threw away, which is what the cost sentence counts.
        whose = "its" if len(back) == 1 else "each one's"
        newest = (f", {count(len(back), 'token')} more than the preemption{'s' if len(back) > 1 else ''} threw away: "
                  f"{whose} newest token, generated but never computed")
        if run.trace.config.enable_prefix_caching:
            out.append(f"{run.label}: the {count(len(back), 're-admission')} found {hits:,} of "
                       f"{'its' if len(back) == 1 else 'their'} {total:,} "
                       f"tokens in the prefix cache ({hits / max(total, 1):.0%}): blocks shared with others and "
                       f"the victim's own freed blocks that nobody had taken yet; only {total - hits:,} were "
                       f"prefilled again.")
        elif any_caching:
            out.append(f"{run.label}: the {count(len(back), 're-admission')} prefilled all {total:,} of "
                       f"{'its' if len(back) == 1 else 'their'} tokens again (no prefix cache){newest}.")
    return out


def merged(per_run: Sequence[tuple[str, list[str]]]) -> list[str]:
    """Per-run sentences "label: text", said once as "a and b: text" when every run says the same thing."""
    texts = [[t.removeprefix(f"{label}: ") for t in sentences] for label, sentences in per_run]
    if len(per_run) > 1 and all(t == texts[0] for t in texts) and texts[0]:
        labels = join_and([label for label, _ in per_run])
        return [f"{labels} alike: {t}" for t in texts[0]]
    return [s for _, sentences in per_run for s in sentences]
