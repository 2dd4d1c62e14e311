"""The knobs every lesson shares: the engine (KV pool, max_num_seqs, token budget) and the generated workload.

Defaults come from the preset, so a preset's numbers are what the sliders start at. ``apply_*`` turns knob
values back into a config or a workload spec.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import streamlit as st

from sim import cost_estimate
from sim.config import EngineConfig, FieldError, field_help, gib_for_blocks
from sim.scenario import Scenario
from sim.workload import TooFewArrivals, WorkloadSpec, generate

from .controls import Knob
from .runner import SLIDER_ADVICE, charge_cache
from .wording import count, fmt_binary_size, fmt_gib, plain, safe_id

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
        Knob("rate_s", "Arrival rate (requests per second)", "float", workload.rate_per_s, min=0.1,
             max=max(200.0, workload.rate_per_s), step=0.1,
             help="Average arrivals per second of the run's clock (Poisson, open loop)") if workload.on_clock else
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


# The workload generator's settings the Workload panel's knobs set: the knob's key by the setting's name.
_WORKLOAD_KNOB_KEYS = {"num_requests": "num_requests", "rate_per_step": "rate", "rate_per_s": "rate_s",
                       "prompt_median": "prompt_median", "output_median": "output_median",
                       "output_sigma": "output_sigma", "seed": "seed"}


def apply_workload(workload: WorkloadSpec, values: dict[str, Any]) -> WorkloadSpec:
    with in_sidebar_terms():
        rate = ({"rate_per_s": float(values["rate_s"])} if workload.on_clock
                else {"rate_per_step": float(values["rate"])})
        return workload.replace(num_requests=int(values["num_requests"]), **rate,
                                prompt_median=int(values["prompt_median"]), output_median=int(values["output_median"]),
                                output_sigma=float(values["output_sigma"]), seed=int(values["seed"]))


def scenario_with(scenario: Scenario, config: EngineConfig, workload: WorkloadSpec | None) -> Scenario:
    """The preset's scenario with new engine settings and, for generated workloads, a regenerated request list."""
    if workload is None:
        return dataclasses.replace(scenario, config=config)
    # (before drawing it: a slider may take an uploaded workload past the app's limits; the runner checks the
    # requests drawn again)
    cost_estimate.check(cost_estimate.of_workload(config, workload), cost_estimate.PAGE_LIMITS, SLIDER_ADVICE)
    with in_sidebar_terms():
        key = repr(workload)
        requests = _generate(key, workload)
        charge_cache(_generate, (key, None), SPEC_BYTES * len(requests))
    return dataclasses.replace(scenario, config=config, workload=workload, requests=requests)


# ---- the generator's errors in the sidebar's words -------------------------------------------------------------
# The generator names its settings as a scenario file does (``FieldError``: workload.num_requests); the sidebar
# knows them by its knobs' labels: the Workload panel's (``workload_knobs``), a client's panel on the Fairness page
# (lessons/fairness/lesson.py's ``client_knobs``, whose labels begin with these) and the Cancellation page's
# (lessons/cancellation/lesson.py).
WORKLOAD_PANEL = "Workload"
CLIENT_LABELS = {"share": "Share of the arrivals (%)", "start_step": "Starts sending at step",
                 "stop_step": "Stops sending at step", "on_steps": "Sends in bursts: on for",
                 "off_steps": "...then off for", "prompt_median": "Prompt length, median (tokens)",
                 "output_median": "Answer length, median (tokens)"}
LESSON_WORKLOAD_LABELS = {"abandon_rate": "Users who leave early (fraction)", "abandon_point": "When they leave"}


def workload_labels() -> dict[str, str]:
    """The Workload panel's label of each setting it sets (``workload_knobs``'s own)."""
    labels = {knob.key: knob.label for spec in (WorkloadSpec(), WorkloadSpec(rate_per_step=None, rate_per_s=1.0))
              for knob in workload_knobs(spec)}
    return {name: labels[key] for name, key in _WORKLOAD_KNOB_KEYS.items()}


@contextlib.contextmanager
def in_sidebar_terms() -> Iterator[None]:
    """Inside: a ``FieldError`` of the generator becomes a ``ValueError`` in the sidebar's words (``page.guarded``
    shows it as a bad setting)."""
    try:
        yield
    except FieldError as e:
        raise ValueError(in_sidebar_words(e)) from None


def in_sidebar_words(error: FieldError) -> str:
    """What went wrong, naming the knob that sets the field and what it allows, from the error's fields (never its
    text); a setting no knob sets keeps the scenario file's name for it."""
    if isinstance(error, TooFewArrivals):
        return _too_few_arrivals(error)
    label = _label(error)
    if label is None:
        return str(error)
    allowed = _allowed(error)
    if allowed is None:
        return f"{label}: {error.problem}"
    return f"{label} must be {allowed}, got {_number(error.value)}"


def _label(error: FieldError) -> str | None:
    """'Requests' (Workload), client B's 'Stops sending at step'; None for a setting no knob sets."""
    if error.item is not None:  # (a client's setting)
        label = CLIENT_LABELS.get(error.name)
        return None if label is None else f"client {safe_id(error.item)}'s '{label}'"
    labels = workload_labels()
    if error.name in labels:
        return f"'{labels[error.name]}' ({WORKLOAD_PANEL})"
    label = LESSON_WORKLOAD_LABELS.get(error.name)
    return None if label is None else f"'{label}'"


def _allowed(error: FieldError) -> str | None:
    """'from 1 to 200,000', 'at least 11', 'one of: uniform, early, late' (None: the error gives no range)."""
    if error.choices:
        return f"one of: {', '.join(error.choices)}"
    lo, hi = error.lo, error.hi
    if lo is not None and hi is not None and not (error.lo_open or error.hi_open):
        return f"from {_number(lo)} to {_number(hi)}"
    low = None if lo is None else f"more than {_number(lo)}" if error.lo_open else f"at least {_number(lo)}"
    high = None if hi is None else f"less than {_number(hi)}" if error.hi_open else f"at most {_number(hi)}"
    return " and ".join(bound for bound in (low, high) if bound) or None


def _number(value: Any) -> str:
    """12,000; 0.25; 1e-06 (a value that is no number as Python writes it)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return f"{int(value):,}" if value == int(value) else f"{value:g}"
    return repr(value)


def _too_few_arrivals(error: TooFewArrivals) -> str:
    got = f"{error.num_arrived} of {error.num_requests} requests"
    fewer = f"lower '{workload_labels()['num_requests']}' ({WORKLOAD_PANEL})"
    if error.closed:
        return (f"the clients' windows close by step {error.until_step:,} ('{CLIENT_LABELS['stop_step']}') after "
                f"only {got}; move a stop later (or to 0 for never), give a client that is still sending a larger "
                f"share, or {fewer}")
    windows = f"the clients' on/off windows ('{CLIENT_LABELS['on_steps']}', '{CLIENT_LABELS['off_steps']}')"
    if error.num_drawn is not None:
        what = f"let through only {got} in {error.num_drawn:,} Poisson arrivals (up to step {error.until_step:,})"
    else:
        what = f"gave only {got} in {error.until_step:,} steps"
    return f"{windows} {what}; make them send for longer or pause for less, or {fewer}"


SPEC_BYTES = 300  # one generated RequestSpec held in the cache (tracemalloc: 5.5 MiB for 20,000)


@st.cache_resource(max_entries=64, show_spinner=False)
def _generate(key: str, _workload: WorkloadSpec) -> tuple:
    """The request list of ``_workload`` (``key``: its repr). A resource, not a copy per caller: a tuple of frozen
    RequestSpecs cannot be changed, and the same tuple object on every rerun lets the runner's key reuse its
    digest (unpickling 300 specs and hashing them again took ~5 ms a rerun)."""
    return tuple(generate(_workload))
