"""What bringing the Preemption lesson's victim back costs: the victim whose cost the page shows (the largest of the
runs, or a what-if), recompute against swap priced by the cost model (``sim.preemption_metrics``), as cards and a
caption that says how each is worked out; the CPU swap space and byte sizes for sentences."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.config import EngineConfig, gib_for_blocks
from sim.preemption_metrics import PreemptionCost, preemption_cost
from sim.request import RequestStatus
from ui.wording import Card, count, fmt_binary_size, fmt_fixed, fmt_gib, safe_id

if TYPE_CHECKING:  # (lesson.py imports this module: the type only)
    from .lesson import Run


def largest_victim_tokens(runs: Sequence[Run]) -> tuple[int, str] | None:
    """(tokens, what) for the cost comparison: the largest victim of these runs, or, without any preemption,
    the longest request that could run (not one rejected as too big for the pool) at its full context, as a
    what-if. None when every request was rejected."""
    victims = [(p.num_tokens, f"{safe_id(p.request_id)} (preempted at step {p.step:,} under {run.label})")
               for run in runs for p in run.preempted]
    if victims:
        return max(victims)
    r = runs[0].trace.requests
    context = np.where(r["status"] != RequestStatus.REJECTED, r["prompt_len"] + r["target_len"], -1)
    if context.max() < 0:
        return None
    i = int(np.argmax(context))
    name = safe_id(runs[0].trace.request_ids[i])
    return int(context[i] - 1), f"{name} at its longest (nothing was preempted: a what-if)"


def victim_cost(runs: Sequence[Run], config: EngineConfig) -> tuple[PreemptionCost, str] | None:
    """(cost, what) for the cost comparison: ``largest_victim_tokens`` priced by ``config``'s cost model (the
    knobs' config: the swap bandwidth and overhead knobs apply). None when every request was rejected."""
    victim = largest_victim_tokens(runs)
    return None if victim is None else (preemption_cost(victim[0], config), victim[1])


def fmt_bytes(num_bytes: float) -> str:
    """Decimal units, as the article counts them: 262,144,000 B -> "262 MB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if num_bytes >= scale:
            value = num_bytes / scale
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.1f} {unit}"
    return f"{num_bytes:,.0f} B"


def _swap_fits(cost: PreemptionCost, config: EngineConfig) -> bool:
    """Would the victim's blocks fit in the (empty) CPU swap space? Else a swap-mode server recomputes it."""
    return cost.num_blocks <= config.num_cpu_blocks


def cost_cards(cost: PreemptionCost, config: EngineConfig) -> list[Card]:
    """The four numbers above the recompute-vs-swap chart, each with how it is worked out as its tooltip."""
    c = config.cost
    fits = _swap_fits(cost, config)
    return [
        Card("Recompute: GPU time", f"{cost.recompute_ms:,.1f} ms",
             help=f"{cost.num_tokens:,} tokens x {c.prefill_token_us:g} us per prefill token"),
        Card("Swap: copied each way", fmt_bytes(cost.swap_bytes),
             help=f"{cost.num_blocks:,} blocks x {fmt_binary_size(config.block_bytes)}"),
        Card("Swap: time each way", f"{fmt_fixed(cost.swap_ms)} ms",
             help=f"{fmt_fixed(cost.swap_transfer_ms)} ms at {c.swap_bandwidth_gb_s:g} GB/s + "
                  f"{fmt_fixed(cost.swap_overhead_ms)} ms for {cost.num_blocks:,} block copies"),
        Card("Swap: CPU RAM parked" if fits else "Swap: CPU RAM needed", fmt_bytes(cost.swap_bytes),
             help=f"{cost.num_blocks:,} blocks; the CPU swap space holds {config.num_cpu_blocks:,}"),
    ]


def cost_caption(cost: PreemptionCost, config: EngineConfig, what: str) -> str:
    """How the two costs are worked out for ``what`` (the victim), and where real servers pay more."""
    c = config.cost
    no_room = "" if _swap_fits(cost, config) else (
        f" The CPU swap space ({cpu_swap_space(config)}) cannot hold these {cost.num_blocks:,} blocks: in swap mode "
        "this victim falls back to recompute.")
    per_layer = 2 * config.model.num_layers  # K and V of every layer: one copy each per block in vLLM V0
    per_copy = fmt_binary_size(config.block_bytes / per_layer)
    return (
        f"For {what}: {cost.num_tokens:,} tokens of KV at {fmt_binary_size(config.model.kv_bytes_per_token)} per "
        f"token. Swap copies whole blocks, {cost.num_blocks:,} copies of {fmt_binary_size(config.block_bytes)} each "
        f"way: "
        f"{fmt_fixed(cost.swap_transfer_ms)} ms at the peak {c.swap_bandwidth_gb_s:g} GB/s plus "
        f"{fmt_fixed(cost.swap_overhead_ms)} ms of per-copy overhead, an effective {cost.effective_gb_s:,.1f} GB/s "
        f"(smaller blocks, lower). vLLM's V0 engine, which had swap, copied each block layer by layer with K and V "
        f"apart ({cost.num_blocks * per_layer:,} copies of {per_copy} here), so its "
        f"real overhead was higher than this model charges. Recompute is charged {c.prefill_token_us:g} us per "
        "token whatever the context (the article's figure, an H100's peak compute for an 8B model: real prefills "
        "run at half that speed or less, and attention makes each token of a long context cost more), so real "
        "recomputes cost more than this." + no_room)


def cpu_swap_space(config: EngineConfig) -> str:
    """The CPU swap space for a sentence: "0.12 GiB, 64 blocks"."""
    gib = gib_for_blocks(config.num_cpu_blocks, config.model, config.block_size)
    return f"{fmt_gib(gib)}, {count(config.num_cpu_blocks, 'block')}"
