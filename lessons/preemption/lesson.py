"""The Preemption lesson's logic, the interface every lesson has (``lessons/interface.py``): its knobs (the KV pool in
GiB, block size, model, victim policy, recompute or swap, prefix caching, the swap space), the variants it compares,
the headline cards and the "what to notice" sentences in the page's order, and the page's helpers (its sections'
order, the per-request KV chart's parts, the Gantt's notes). No Streamlit calls here, so it is testable on its own.
Its parts: what bringing a victim back costs (``costs.py``), the sentences (``notices.py``), the sizing sweep
(``sizing.py``). The preemption records, the KV each request held and what a preemption costs are the simulator's
(``sim.preemption_metrics``, priced by ``CostModel``); these modules word them.

Units: the pool and CPU swap space are set in GiB (memory is what a server is sized by); the engine gets whole
blocks, ``num_blocks_for_gib``. Changing the block size or the model keeps the GiB and changes the block count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from lessons.run import Run as LessonRun
from sim.config import (
    GIB,
    MAX_CPU_BLOCKS,
    MODELS,
    CostModel,
    EngineConfig,
    field_help,
    gib_for_blocks,
    model_name,
    num_blocks_for_gib,
)
from sim.preemption_metrics import Preemption, PreemptionKind, blocks_held, preemptions
from sim.presets import Preset
from sim.scenario import Scenario
from sim.trace import Trace
from ui.controls import Knob
from ui.glossary import term_link
from ui.knobs import engine_knobs as shared_engine_knobs
from ui.wording import Card, count, fmt_binary_size

from . import notices as sentences

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


# ---- headline and notices ----------------------------------------------------------------------------------------
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


def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """The sentences, most important first (the page shows three, the rest under "more"): what the runs compare,
    prefix caching or recompute vs swap, when they differ in it, and what bringing victims back cost; else who was
    evicted, who waited behind the victim, and the cost."""
    victims = sentences.merged([(run.label, sentences.victim_notice(run)) for run in runs])
    requeued = [sentence for run in runs for sentence in sentences.requeue_notice(run)]
    compared = sentences.cache_notices(runs) + sentences.mode_notice(runs)
    if compared:
        return [*compared, *sentences.cost_notices(runs), *victims, *requeued]
    return [*victims, *requeued, *sentences.cost_notices(runs)]


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
