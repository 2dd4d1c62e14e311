"""The knobs every lesson shares: the engine (KV pool, max_num_seqs, token budget) and the generated workload.

Defaults come from the preset, so a preset's numbers are what the sliders start at. ``apply_*`` turns knob
values back into a config or a workload spec.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import streamlit as st

from sim import cost_estimate
from sim.config import EngineConfig, field_help, gib_for_blocks
from sim.scenario import Scenario
from sim.workload import WorkloadSpec, generate

from .controls import Knob
from .runner import SLIDER_ADVICE, charge_cache
from .wording import count, fmt_binary_size, fmt_gib, plain

_BUDGETS = (256, 512, 1024, 2048, 4096, 8192, 16384)


def engine_knobs(config: EngineConfig) -> list[Knob]:
    top_blocks = max(64, 4 * config.num_blocks)
    top_seqs = max(16, min(512, 4 * config.max_num_seqs))
    return [
        Knob("num_blocks", "KV pool size (blocks)", "int", config.num_blocks, min=8, max=top_blocks, step=1,
             help=field_help(EngineConfig, "num_blocks") + f"; one block holds {config.block_size} tokens"),
        Knob("max_num_seqs", "max_num_seqs (batch slots)", "int", config.max_num_seqs, min=1, max=top_seqs, step=1,
             help=field_help(EngineConfig, "max_num_seqs")),
        Knob("max_num_batched_tokens", "max_num_batched_tokens (token budget per step)", "choice",
             config.max_num_batched_tokens, options=tuple(sorted({*_BUDGETS, config.max_num_batched_tokens})),
             widget="select", help=field_help(EngineConfig, "max_num_batched_tokens")),
    ]


def apply_engine(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    return config.replace(num_blocks=int(values["num_blocks"]), max_num_seqs=int(values["max_num_seqs"]),
                          max_num_batched_tokens=int(values["max_num_batched_tokens"]))


def pool_caption(config: EngineConfig) -> str:
    gib = gib_for_blocks(config.num_blocks, config.model, config.block_size)
    return (f"KV pool: **{count(config.num_blocks, 'block')} = {fmt_gib(gib)}** "
            f"({fmt_binary_size(config.block_bytes)} per block of {count(config.block_size, 'token')}, "
            f"{plain(config.model.name, 60)}: "
            f"{fmt_binary_size(config.model.kv_bytes_per_token)} per token)")


def workload_knobs(workload: WorkloadSpec) -> list[Knob]:
    return [
        Knob("num_requests", "Requests", "int", workload.num_requests, min=10, max=max(500, workload.num_requests),
             step=10, help="How many requests the workload generates"),
        Knob("rate", "Arrival rate (requests per step)", "float", workload.rate_per_step, min=0.02, max=2.0,
             step=0.01, help="Average arrivals per engine step (Poisson)"),
        Knob("prompt_median", "Prompt length, median (tokens)", "int", workload.prompt_median, min=8, max=4000,
             step=8),
        Knob("output_median", "Answer length, median (tokens)", "int", workload.output_median, min=4, max=2000,
             step=4),
        Knob("output_sigma", "Answer length spread (lognormal sigma)", "float", workload.output_sigma, min=0.0,
             max=2.0, step=0.05, help="0 = every answer the median length; larger = a longer tail"),
        Knob("seed", "Random seed", "int", workload.seed, min=0, max=10_000, step=1, widget="number",
             help="Same seed, same workload"),
    ]


def apply_workload(workload: WorkloadSpec, values: dict[str, Any]) -> WorkloadSpec:
    return workload.replace(num_requests=int(values["num_requests"]), rate_per_step=float(values["rate"]),
                            prompt_median=int(values["prompt_median"]), output_median=int(values["output_median"]),
                            output_sigma=float(values["output_sigma"]), seed=int(values["seed"]))


def scenario_with(scenario: Scenario, config: EngineConfig, workload: WorkloadSpec | None) -> Scenario:
    """The preset's scenario with new engine settings and, for generated workloads, a regenerated request list."""
    if workload is None:
        return dataclasses.replace(scenario, config=config)
    # (before drawing it: a slider may take an uploaded workload past the app's limits; the runner checks the
    # requests drawn again)
    cost_estimate.check(cost_estimate.of_workload(config, workload), cost_estimate.PAGE_LIMITS, SLIDER_ADVICE)
    try:
        key = repr(workload)
        requests = _generate(key, workload)
        charge_cache(_generate, (key, None), SPEC_BYTES * len(requests))
    except ValueError as e:  # the generator names its own fields: say it in the sidebar's words
        raise ValueError(in_sidebar_words(str(e))) from None
    return dataclasses.replace(scenario, config=config, workload=workload, requests=requests)


_SIDEBAR_WORDS = (("workload.clients: the clients'", "the clients'"),
                  ("(stop_step)", "('Stops sending at step')"),
                  ("widen them or lower num_requests", "move a stop later (or to 0 for never), give a client that is "
                                                       "still sending a larger share, or lower 'Requests' (Workload)"))


def in_sidebar_words(message: str) -> str:
    """A workload generator's message with its field names replaced by the sidebar's labels."""
    for field_words, sidebar in _SIDEBAR_WORDS:
        message = message.replace(field_words, sidebar)
    return message


SPEC_BYTES = 300  # one generated RequestSpec held in the cache (tracemalloc: 5.5 MiB for 20,000)


@st.cache_resource(max_entries=64, show_spinner=False)
def _generate(key: str, _workload: WorkloadSpec) -> tuple:
    """The request list of ``_workload`` (``key``: its repr). A resource, not a copy per caller: a tuple of frozen
    RequestSpecs cannot be changed, and the same tuple object on every rerun lets the runner's key reuse its
    digest (unpickling 300 specs and hashing them again took ~5 ms a rerun)."""
    return tuple(generate(_workload))
