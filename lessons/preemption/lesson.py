"""The Preemption lesson's logic: its knobs (the KV pool in GiB, block size, model, victim policy, recompute or
swap, prefix caching), the variants it compares, the victim whose cost it shows (recompute vs swap), the prefix-cache
hits on re-prefill, the sizing sweep (pool size x max_num_seqs) and the "what to notice" sentences computed from
the runs. No Streamlit calls here, so it is testable on its own. The preemption records, the KV each request held
and what a preemption costs are the simulator's (``sim.preemption_metrics``, priced by ``CostModel``); this module
words them.

Units: the pool and CPU swap space are set in GiB (memory is what a server is sized by); the engine gets whole
blocks, ``num_blocks_for_gib``. Changing the block size or the model keeps the GiB and changes the block count.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from lessons.run import Run as LessonRun
from sim import metrics
from sim.config import (
    GIB,
    MAX_CPU_BLOCKS,
    MODELS,
    CostModel,
    EngineConfig,
    cdiv,
    field_help,
    gib_for_blocks,
    model_name,
    num_blocks_for_gib,
)
from sim.engine import SimulationError, simulate
from sim.events import EventKind
from sim.preemption_metrics import Preemption, PreemptionCost, PreemptionKind, blocks_held, preemption_cost, preemptions
from sim.presets import Preset
from sim.request import RequestStatus
from sim.scenario import Scenario
from sim.trace import Trace
from ui.controls import Knob
from ui.glossary import term_link
from ui.knobs import engine_knobs as shared_engine_knobs
from ui.wording import Card, count, fmt_binary_size, fmt_fixed, fmt_gib, join_and, pct_change, safe_id

LESSON = "preemption"
QUESTION = (  # (a glossary term linked at its first use)
    f"Every running request's {term_link('KV cache')} grows by one token per step, so a batch that fitted when it "
    f"was admitted can outgrow the pool mid-answer; the scheduler then "
    f"{term_link('preemption', 'evicts')} a running request and brings it back later. Who is evicted, what does "
    f"bringing it back cost ({term_link('recompute')} or {term_link('swap')}), and how big must the server be for "
    "it to stop?"
)
COMPARED_FIELDS = ("policy", "preemption_mode", "enable_prefix_caching")  # what a preset's variants may vary
BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_SWAP_GIB = 4.0  # vLLM V0's default swap_space, used when a scenario sets no CPU swap space


@dataclass
class Run(LessonRun):
    @cached_property
    def preempted(self) -> list[Preemption]:
        """The run's preemptions (rebuilt from the trace once, then shared by the notices and charts)."""
        return preemptions(self.trace)


# ---- knobs -----------------------------------------------------------------------------------------------------------
def pool_gib(config: EngineConfig) -> float:
    return gib_for_blocks(config.num_blocks, config.model, config.block_size)


def _gib_slider(default: float, top: float) -> tuple[float, str]:
    """(step, printf format) for a GiB slider up to ``top``: a power of two (so binary GiB values stay exact)
    that divides ``default``, about 1/200 of the range."""
    step = 2.0 ** math.floor(math.log2(max(top, 2**-20) / 200))
    while step > 2**-20 and default % step:
        step /= 2
    decimals = min(max(2, math.ceil(-math.log10(step))), 5)
    return step, f"%.{decimals}f"


def model_key(config: EngineConfig) -> str:
    """The MODELS key of the config's model, or "scenario" for a model only the scenario file names."""
    return model_name(config.model) or "scenario"


def engine_knobs(config: EngineConfig) -> list[Knob]:
    """The KV pool (GiB), block size, model, and the shared max_num_seqs / token budget knobs."""
    gib = pool_gib(config)
    top = max(4 * gib, 8 * config.block_bytes / GIB)
    step, fmt = _gib_slider(gib, top)
    models = tuple(MODELS) + (("scenario",) if model_key(config) == "scenario" else ())
    labels = {k: f"{m.name} ({fmt_binary_size(m.kv_bytes_per_token)} per token)" for k, m in MODELS.items()}
    labels["scenario"] = f"{config.model.name[:60]} ({fmt_binary_size(config.model.kv_bytes_per_token)} per token)"
    sizes = tuple(sorted({*BLOCK_SIZES, config.block_size}))
    shared = [k for k in shared_engine_knobs(config) if k.key != "num_blocks"]
    return [
        Knob("pool_gib", "KV pool size (GiB)", "float", gib, min=step, max=top, step=step, fmt=fmt,
             help="GPU memory left for the KV cache; the caption below gives it in blocks. Changing the block "
                  "size or the model keeps the GiB and changes how many blocks (and tokens) fit."),
        Knob("block_size", "Block size (tokens per KV block)", "choice", config.block_size, options=sizes,
             widget="select", help=field_help(EngineConfig, "block_size") + ". Swap copies one block at a "
             "time: small blocks pay the per-copy overhead more often."),
        *shared,
        Knob("model", "Model (KV bytes per token)", "choice", model_key(config), options=models, labels=labels,
             widget="select", help="KV bytes per token = 2 (K and V) x layers x KV heads x head dim x dtype bytes. "
             "The step cost model stays the Llama 3.1 8B / H100 fit."),
    ]


def compared(preset: Preset) -> set[str]:
    """The config fields the preset's variants set to different values (each variant's run differs in them)."""
    base = preset.scenario.config
    out = set()
    for name in COMPARED_FIELDS:
        values = {str(overrides.get(name, getattr(base, name))) for _, overrides in preset.variants}
        if len(values) > 1:
            out.add(name)
    return out


def _knob_default(preset: Preset, config: EngineConfig, name: str, uploaded: bool = False) -> Any:
    """A knob's default: an uploaded scenario's setting; else the first variant's override (a one-variant preset
    states its setting there), else the scenario's config."""
    first = preset.variants[0][1] if preset.variants and not uploaded else {}
    return _plain(first.get(name, getattr(config, name)))


def _plain(value: Any) -> Any:
    """A setting as a preset writes it: an enum's value ("fcfs"), anything else as it is."""
    return getattr(value, "value", value)


def knobs(preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
    """The lesson's own knobs: variants to compare, then the policy, preemption mode and prefix caching unless
    the variants compare them, then the time axis. ``uploaded``: ``base`` is an uploaded scenario, whose settings
    come first."""
    config = base.config
    out = []
    if len(preset.variants) > 1:
        labels = tuple(label for label, _ in preset.variants)
        out.append(Knob("compare", "Runs to compare", "multi", list(labels), options=labels, widget="multiselect",
                        help="Each runs on the same requests with the same knobs."))
    axes = compared(preset)
    default = {name: _knob_default(preset, config, name, uploaded) for name in COMPARED_FIELDS}
    policies = tuple(dict.fromkeys(("fcfs", "priority", default["policy"])))
    optional = [
        Knob("policy", "Victim choice (queue policy)", "choice", default["policy"], options=policies,
             labels={"fcfs": "FCFS: evict the last of the running list", "priority": "priority: evict the lowest "
                     "priority (largest number)"}, widget="select",
             help="Who is preempted when the pool is full; also the waiting-queue order."),
        Knob("preemption_mode", "Preemption mode", "choice", default["preemption_mode"],
             options=("recompute", "swap"), widget="segmented",
             help="recompute: drop the victim's KV and prefill it again later (the only mode of vLLM's V1 "
                  "engine); swap: copy its blocks to CPU memory and back (vLLM's V0 engine, --preemption-mode "
                  "swap; falls back to recompute when the CPU swap space is full)."),
        Knob("enable_prefix_caching", "Prefix caching", "bool", bool(default["enable_prefix_caching"]),
             widget="toggle", help=field_help(EngineConfig, "enable_prefix_caching") + ": a re-admitted request "
             "reuses its blocks that are still cached."),
    ]
    out += [k for k in optional if k.key not in axes]
    out.append(Knob("unit", "Time axis", "choice", "steps", options=("steps", "ms"),
                    labels={"steps": "engine steps", "ms": "milliseconds"}, widget="segmented"))
    return out


def swap_knobs(config: EngineConfig) -> list[Knob]:
    """CPU swap space (GiB), copy bandwidth and per-block overhead: they set what swapping costs (and the
    recompute-vs-swap comparison is drawn for every run, so they always matter)."""
    cpu = gib_for_blocks(config.num_cpu_blocks, config.model, config.block_size) if config.num_cpu_blocks \
        else DEFAULT_SWAP_GIB
    top = max(16.0, 2 * cpu)
    step, fmt = _gib_slider(cpu, top)
    c = config.cost
    return [
        Knob("cpu_swap_gib", "CPU swap space (GiB)", "float", cpu, min=0.0, max=top, step=step, fmt=fmt,
             help="Pinned CPU memory for swapped-out KV blocks (vLLM V0's --swap-space). A victim that does not fit "
                  "is preempted by recompute instead."),
        Knob("swap_bandwidth_gb_s", "Swap bandwidth (GB/s)", "float", c.swap_bandwidth_gb_s, min=1.0, max=450.0,
             step=1.0, help=field_help(CostModel, "swap_bandwidth_gb_s") + "; PCIe 4 x16 ~25, PCIe 5 ~50, "
             "NVLink-C2C ~450."),
        Knob("swap_overhead_us", "Per-block copy overhead (us)", "float", c.swap_overhead_per_block_us, min=0.0,
             max=50.0, step=0.5, help=field_help(CostModel, "swap_overhead_per_block_us")
             + ": why many small copies run below the peak bandwidth."),
    ]


def apply_engine(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The engine panel's values (``engine_knobs``): the model, the block size, the pool from GiB to blocks, the
    batch slots and the token budget."""
    model = MODELS.get(values["model"], config.model)
    block_size = int(values["block_size"])
    return config.replace(model=model, block_size=block_size,
                          num_blocks=max(1, num_blocks_for_gib(float(values["pool_gib"]), model, block_size)),
                          max_num_seqs=int(values["max_num_seqs"]),
                          max_num_batched_tokens=int(values["max_num_batched_tokens"]))


def apply_swap(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The swap panel's values (``swap_knobs``): the CPU swap space from GiB to blocks (of ``config``'s model and
    block size: after ``apply_engine``), the copy bandwidth and overhead."""
    gib = float(values["cpu_swap_gib"])
    # (capped at the engine's limit: a toy model's few bytes a block make GiBs into billions of blocks, more than
    # any victim can fill)
    return config.replace(
        num_cpu_blocks=min(num_blocks_for_gib(gib, config.model, config.block_size), MAX_CPU_BLOCKS) if gib > 0 else 0,
        cost=dataclasses.replace(config.cost, swap_bandwidth_gb_s=float(values["swap_bandwidth_gb_s"]),
                                 swap_overhead_per_block_us=float(values["swap_overhead_us"])))


def apply(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The lesson's panel (``knobs``): the victim policy, the preemption mode and prefix caching where shown
    (compared fields are left to the variants)."""
    return config.replace(**{k: values[k] for k in ("policy", "preemption_mode", "enable_prefix_caching")
                             if k in values})


def variants(preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
    """The variants chosen in ``values["compare"]`` (every one when the preset has a single variant, which has no
    such knob): ``scenario`` with each variant's setting of the compared fields."""
    axes = compared(preset)
    chosen = values.get("compare")
    out = []
    for label, overrides in preset.variants:
        if chosen is not None and label not in chosen:
            continue
        run = scenario.with_config(**{k: v for k, v in overrides.items() if k in axes})
        # A setting the variant names but a knob now sets (one-variant presets): say what actually runs.
        moved = [_setting_text(k, getattr(run.config, k)) for k, v in overrides.items()
                 if k not in axes and _plain(v) != _plain(getattr(run.config, k))]
        out.append((", ".join(moved) if moved else label, run))
    return out


def _setting_text(name: str, value: Any) -> str:
    """A compared setting as a run's label: "priority", "swap", "prefix caching on"."""
    if name == "enable_prefix_caching":
        return f"prefix caching {'on' if value else 'off'}"
    text = str(_plain(value))
    return "FCFS" if text == "fcfs" else text


# ---- what each preemption cost ---------------------------------------------------------------------------------------
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


# ---- the sizing sweep ------------------------------------------------------------------------------------------------
@dataclass
class Sweep:
    """Runs of one workload over a grid: rows = max_num_seqs, columns = KV pool sizes."""

    pools_gib: tuple[float, ...]
    pools_blocks: tuple[int, ...]
    seqs: tuple[int, ...]
    preemptions: np.ndarray  # [len(seqs), len(pools)] int, preemptions per run
    finish_ms: np.ndarray  # [len(seqs), len(pools)] float, mean finish time of served requests (ms), NaN = none
    queue_ms: np.ndarray  # [len(seqs), len(pools)] float, mean queueing delay (ms)
    rejected: np.ndarray  # [len(seqs), len(pools)] int, requests too large for the pool
    num_steps: np.ndarray  # [len(seqs), len(pools)] int
    seconds: float  # wall time of the whole sweep (0 when assembled from cached points: sizing_from)
    pending: np.ndarray | None = None  # [len(seqs), len(pools)] bool, True = not run yet (sizing_from), None = all


def sweep_axes(preset: Preset) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The preset's sweep grid: pool sizes converted to GiB (at the preset's block size and model), slots."""
    c = preset.scenario.config
    pools = tuple(gib_for_blocks(b, c.model, c.block_size) for b in preset.knobs["pool_sweep_blocks"])
    return pools, tuple(int(s) for s in preset.knobs["seqs_sweep"])


def sweep_identity(scenario: Scenario) -> Scenario:
    """The scenario with the swept fields blanked: two scenarios with the same identity give the same sweep
    (so moving the pool or max_num_seqs knobs does not rerun it)."""
    return scenario.with_config(num_blocks=1, max_num_seqs=1)


def sizing_sweep(base: Scenario, pools_gib: Sequence[float], seqs: Sequence[int],
                 simulate_fn: Callable[..., Trace] = simulate) -> Sweep:
    """Run ``base`` at every (max_num_seqs, pool size) pair; the rest of its config stays as it is."""
    c = base.config
    blocks = tuple(max(1, num_blocks_for_gib(g, c.model, c.block_size)) for g in pools_gib)
    shape = (len(seqs), len(blocks))
    pre, rejected, steps = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    finish, queue = np.full(shape, np.nan), np.full(shape, np.nan)
    t0 = time.perf_counter()
    for i, s in enumerate(seqs):
        for j, b in enumerate(blocks):
            try:
                trace = simulate_fn(c.replace(num_blocks=b, max_num_seqs=int(s)), base.requests)
            except SimulationError:
                rejected[i, j] = len(base.requests)
                continue
            lat = metrics.request_latencies(trace)
            served = metrics.served_mask(trace)
            pre[i, j] = int(trace.requests["num_preemptions"].sum())
            rejected[i, j] = int((trace.requests["status"] == RequestStatus.REJECTED).sum())
            steps[i, j] = trace.num_steps
            if served.any():
                finish[i, j] = float(np.nanmean(lat["finish_ms"][served]))
                queue[i, j] = float(np.nanmean(lat["queue_ms"][served]))
    return Sweep(tuple(pools_gib), blocks, tuple(int(s) for s in seqs), pre, finish, queue, rejected, steps,
                 time.perf_counter() - t0)


def coarse_first(num_rows: int, num_cols: int, strides: Sequence[int] = (4, 2, 1)) -> list[tuple[int, int]]:
    """Every (row, column) of a grid once, coarse first: the cells on every ``strides[0]``-th row and column, then
    those on every ``strides[1]``-th, ... so the first few runs of a sweep already span the whole grid."""
    order: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for stride in (*strides, 1):
        for i in range(0, num_rows, stride):
            for j in range(0, num_cols, stride):
                if (i, j) not in seen:
                    seen.add((i, j))
                    order.append((i, j))
    return order


SizingPoint = tuple[int, int, Scenario]  # (row = max_num_seqs index, column = pool index, the run)


def sizing_points(base: Scenario, pools_gib: Sequence[float], seqs: Sequence[int]) -> list[SizingPoint]:
    """The sizing sweep's runs (``base`` at every (max_num_seqs, pool size) pair), coarse first (``coarse_first``):
    run one by one (ui.sweeps), the heatmaps show the whole grid's shape after a few of them."""
    c = base.config
    blocks = [max(1, num_blocks_for_gib(g, c.model, c.block_size)) for g in pools_gib]
    return [(i, j, base.with_config(num_blocks=blocks[j], max_num_seqs=int(seqs[i])))
            for i, j in coarse_first(len(seqs), len(blocks))]


def sizing_point(trace: Trace) -> tuple[int, float, float, int, int]:
    """One cell of the sizing sweep: (preemptions, mean finish ms, mean queueing ms of the served requests (NaN if
    none), requests rejected, engine steps). Module-level and pure: runner.measure caches it per run."""
    lat = metrics.request_latencies(trace)
    served = metrics.served_mask(trace)
    finish = float(np.nanmean(lat["finish_ms"][served])) if served.any() else float("nan")
    queue = float(np.nanmean(lat["queue_ms"][served])) if served.any() else float("nan")
    return (int(trace.requests["num_preemptions"].sum()), finish, queue,
            int((trace.requests["status"] == RequestStatus.REJECTED).sum()), int(trace.num_steps))


def sizing_from(points: Sequence[SizingPoint], pools_gib: Sequence[float], seqs: Sequence[int],
                measure: Callable[..., Any]) -> Sweep:
    """The sweep assembled from its points as far as they are run: ``measure(scenario, sizing_point)`` gives a
    cell's numbers, or None for one not run yet (``pending``)."""
    shape = (len(seqs), len(pools_gib))
    pre, rejected, steps = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    finish, queue = np.full(shape, np.nan), np.full(shape, np.nan)
    pending = np.zeros(shape, dtype=bool)
    blocks = [0] * len(pools_gib)
    for i, j, scenario in points:
        blocks[j] = scenario.config.num_blocks
        try:
            cell = measure(scenario, sizing_point)
        except SimulationError:  # (as sizing_sweep: a run that cannot finish counts every request as turned away)
            rejected[i, j] = len(scenario.requests)
            continue
        if cell is None:
            pending[i, j] = True
            continue
        pre[i, j], finish[i, j], queue[i, j], rejected[i, j], steps[i, j] = cell
    return Sweep(tuple(pools_gib), tuple(blocks), tuple(int(s) for s in seqs), pre, finish, queue, rejected, steps,
                 0.0, pending if pending.any() else None)


# ---- what to notice --------------------------------------------------------------------------------------------------
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


def _merged(per_run: Sequence[tuple[str, list[str]]]) -> list[str]:
    """Per-run sentences "label: text", said once as "a and b: text" when every run says the same thing."""
    texts = [[t.removeprefix(f"{label}: ") for t in sentences] for label, sentences in per_run]
    if len(per_run) > 1 and all(t == texts[0] for t in texts) and texts[0]:
        labels = join_and([label for label, _ in per_run])
        return [f"{labels} alike: {t}" for t in texts[0]]
    return [s for _, sentences in per_run for s in sentences]


def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """The sentences, most important first (the page shows three, the rest under "more"): what the runs compare,
    prefix caching or recompute vs swap, when they differ in it, and what bringing victims back cost; else who was
    evicted, who waited behind the victim, and the cost."""
    victims = _merged([(run.label, victim_notice(run)) for run in runs])
    requeued = [sentence for run in runs for sentence in requeue_notice(run)]
    compared = cache_notices(runs) + mode_notice(runs)
    if compared:
        return [*compared, *cost_notices(runs), *victims, *requeued]
    return [*victims, *requeued, *cost_notices(runs)]


def sweep_notices(sweep: Sweep, pool: float, seqs: int) -> list[str]:
    """Where preemption stops on the grid, for the current row and column, and what fewer slots cost."""
    out = []
    i, j, _ = nearest_cell(sweep, pool, seqs)
    row, col = sweep.preemptions[i], sweep.preemptions[:, j]
    # The pool from which on (to the right) no run preempts.
    stop = next((k for k in range(len(row)) if not row[k:].any()), None)
    if stop is None:
        out.append(f"With {sweep.seqs[i]} batch slots every pool size on the grid preempts (up to "
                   f"{count(int(row.max()), 'preemption')}); it needs a bigger pool or fewer slots.")
    elif stop == 0:
        out.append(f"With {sweep.seqs[i]} batch slots even the smallest pool on the grid "
                   f"({fmt_gib(sweep.pools_gib[0])}) never preempts.")
    else:
        out.append(f"With {sweep.seqs[i]} batch slots, preemption stops from {fmt_gib(sweep.pools_gib[stop])} "
                   f"({sweep.pools_blocks[stop]:,} blocks) of KV pool; at {fmt_gib(sweep.pools_gib[stop - 1])} "
                   f"there were {int(row[stop - 1]):,}.")
    fewer = [k for k in range(i + 1) if col[k] == 0]
    if col[i] > 0 and fewer:
        k = fewer[-1]
        a, b = sweep.finish_ms[i, j], sweep.finish_ms[k, j]
        start = (f"At {fmt_gib(sweep.pools_gib[j])}, lowering max_num_seqs from {sweep.seqs[i]} to "
                 f"{sweep.seqs[k]} stops preemption ({int(col[i]):,} to 0)")
        if abs(b - a) < 0.01 * a:  # within 1%: the slots given up cost (or save) nothing to speak of
            out.append(f"{start} and leaves the mean finish time at {a / 1e3:,.2f} s (within 1%): the slots it "
                       f"gives up were not what the run was waiting for.")
        else:
            why = "fewer slots, more queueing" if b > a else "no time lost to evictions and re-prefills"
            out.append(f"{start} and moves the mean finish time from {a / 1e3:,.2f} s to {b / 1e3:,.2f} s "
                       f"({pct_change(a, b)}): {why}.")
    elif col[i] > 0:
        out.append(f"At {fmt_gib(sweep.pools_gib[j])} every max_num_seqs on the grid preempts.")
    finite = np.where(np.isfinite(sweep.finish_ms), sweep.finish_ms, np.inf)
    bi, bj = np.unravel_index(int(np.argmin(finite)), finite.shape)
    if np.isfinite(finite[bi, bj]):
        pre = int(sweep.preemptions[bi, bj])
        out.append(f"The lowest mean finish time on the grid, {finite[bi, bj] / 1e3:,.2f} s, is at "
                   f"{fmt_gib(sweep.pools_gib[bj])} with {sweep.seqs[bi]} slots"
                   + (f", with {count(pre, 'preemption')}: a few evictions can cost less than queueing." if pre else
                      ", without preemptions."))
    if sweep.rejected.any():
        k = int((sweep.rejected > 0).sum())
        out.append(f"In {count(k, 'run')} some requests were too large for the pool and were turned away on "
                   "arrival (hover a cell: its mean covers only the requests served).")
    return out


# ---- page helpers ----------------------------------------------------------------------------------------------------
SECTIONS = ("timeline", "kv", "cost", "hits", "sweep")
_FIRST = {"recompute_vs_swap": "cost", "prefix_cache": "hits", "sizing": "sweep"}  # the preset's point first


def section_order(preset: Preset) -> tuple[str, ...]:
    first = _FIRST.get(preset.key)
    return ((first,) if first else ()) + tuple(s for s in SECTIONS if s != first)


# How the KV-over-time charts are drawn (a row of buttons above them).
KV_VIEW_KNOBS = [
    Knob("kv_by", "Stack by", "choice", "request", options=("request", "state"),
         labels={"request": "request", "state": "state (held / cached)"}, widget="segmented"),
    Knob("kv_unit", "Unit", "choice", "blocks", options=("blocks", "GiB", "%"), widget="segmented"),
]


def readmissions(preempted: Sequence[Preemption]) -> list[tuple[str, int, int]]:
    """(label, hit tokens, tokens prefilled again) per re-admission after a recompute preemption."""
    return [(f"{p.request_id} @ {p.resume_step:,}", p.num_cached_tokens, p.num_recomputed_tokens)
            for p in preempted if p.kind is not PreemptionKind.SWAP and p.resume_step >= 0]


def nearest_cell(sweep: Sweep, pool: float, seqs: int) -> tuple[int, int, bool]:
    """(row, column, exact) of the grid cell nearest the knobs' pool size and max_num_seqs."""
    i = int(np.argmin([abs(s - seqs) for s in sweep.seqs]))
    j = int(np.argmin([abs(math.log(g) - math.log(pool)) for g in sweep.pools_gib]))
    return i, j, sweep.seqs[i] == seqs and math.isclose(sweep.pools_gib[j], pool, rel_tol=1e-6)


def gantt_notes(preempted: Sequence[Preemption]) -> dict[tuple[int, int], str]:
    """Hover lines for the Gantt's resume markers: how much of each re-prefill came from the prefix cache."""
    notes = {}
    for p in preempted:
        if p.resume_step < 0:
            continue
        if p.kind is PreemptionKind.SWAP:
            notes[(p.row, p.resume_step)] = f"{p.num_blocks:,} blocks copied back from CPU memory"
        else:
            notes[(p.row, p.resume_step)] = (f"re-prefill of {p.num_resume_tokens:,} tokens, "
                                             f"{p.num_cached_tokens:,} from the prefix cache")
    return notes


def headline(run: Run, unit: str) -> Card:
    """A run's headline number: its preemptions; latency, recompute, swap and peak KV under it."""
    return Card(f"{run.label}: preemptions", f"{run.summary['num_preemptions']:,}", run_caption(run, unit),
                "Evictions of a running request because the KV pool had no free block.")


def run_caption(run: Run, unit: str) -> str:
    """One line under a run's preemption count: latency, recompute, swap, peak KV."""
    s, cfg = run.summary, run.trace.config
    key = "finish_steps" if unit == "steps" else "finish_ms"
    mean = s[key]["mean"]
    finish = f"mean finish {mean:,.0f} {unit}" if math.isfinite(mean) else "no request finished"
    parts = [finish, f"{s['recomputed_tokens']:,} tokens recomputed"]
    if cfg.preemption_mode.value == "swap":
        parts.append(f"{count(s['num_swaps'], 'swap')} ({s['swap_ms']:,.1f} ms of copies)")
    if cfg.enable_prefix_caching:
        parts.append(f"{s['cached_tokens']:,} tokens from the prefix cache")
    parts.append(f"peak KV {s['peak_used_blocks']:,} of {count(cfg.num_blocks, 'block')}")
    return " · ".join(parts)


# ---- the per-request KV chart's parts --------------------------------------------------------------------------------
TOP_REQUESTS = 6  # requests drawn one by one in the per-request KV chart; the rest are summed


def kv_parts(trace: Trace, top: int = TOP_REQUESTS) -> list[tuple[str, int, np.ndarray]]:
    """(name, request row or -1, blocks per step) for the per-request KV chart: the ``top`` requests with the
    largest peaks one by one (in arrival order), then the rest of the blocks in use summed. When prefix-cache
    sharing makes the per-request counts add up to more than the blocks in use, they are scaled down so the
    stack equals ``used_blocks``."""
    r = trace.requests
    ran = np.flatnonzero(r["first_scheduled_step"] >= 0)
    if trace.num_steps == 0 or not len(ran):
        return []
    # Candidates by the size they can grow to; rebuild those, keep the largest actual peaks.
    size = r["prompt_len"][ran] + r["target_len"][ran]
    candidates = ran[np.argsort(-size, kind="stable")[:3 * top]]
    held = blocks_held(trace, candidates)
    keep = np.argsort(-held.max(axis=0), kind="stable")[:top]
    keep = keep[np.lexsort((candidates[keep], r["arrival_step"][candidates[keep]]))]  # arrival order
    chosen = held[:, keep]
    used = trace.steps["used_blocks"].astype(np.float64)
    total = chosen.sum(axis=1)
    scale = np.divide(used, total, out=np.ones_like(used), where=total > used)
    chosen = chosen * scale[:, None]
    parts = [(trace.request_ids[int(candidates[k])], int(candidates[k]), chosen[:, i]) for i, k in enumerate(keep)]
    rest = np.maximum(used - chosen.sum(axis=1), 0.0)
    if rest.any():
        parts.append((f"{len(ran) - len(keep)} other requests", -1, rest))
    return parts
