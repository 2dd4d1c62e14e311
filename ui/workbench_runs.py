"""The Workbench's runs, without Streamlit: the run picker's choices (every queue policy ``sim/policies.py`` marks
for the Workbench, and the rate limit), ``RunChoice`` (a policy and its settings -> ``EngineConfig``), unique run
labels, the workbench's engine, the run nearest a scenario file's config (and what it cannot hold), and the
scenarios run side by side."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim import policies as policy_records
from sim.config import MODELS, EngineConfig, Policy, PreemptionMode, model_name
from sim.request import RequestSpec
from sim.scenario import Scenario
from sim.untrusted import decimal_number

from .workbench_table import MAX_STEPS

DEFAULT_MODEL = "llama-3.1-8b"  # the engine's model when a file's is not one of MODELS

# The run picker's choices, label and the config each sets: every queue policy whose record (sim/policies.py) is
# marked for the Workbench, then the rate limit, FCFS with a per-client limit (a Workbench choice, not a queue policy).
POLICIES = {
    **{str(spec.name): (spec.label, {"policy": spec.name}) for spec in policy_records.POLICIES.values()
       if spec.workbench},
    "rate_limit": ("Rate limit", {"policy": Policy.FCFS}),
}
MAX_RUNS = 4


@dataclass(frozen=True)
class RunChoice:
    """One run the student picked: a policy and its settings, on the workbench's engine."""

    policy: str  # a key of POLICIES
    preemption_mode: str = "recompute"
    prefix_caching: bool = False
    # A policy's own settings, used when its record's knobs hold the EngineConfig field each sets:
    sigma: float = 0.5  # prediction_error_sigma (SJF predicted): the lognormal error of the predicted lengths
    guard_steps: int = 0  # starvation_threshold_steps (SJF): the starvation guard (0 = off)
    weights: str = ""  # client_weights (VTC, LCF): "A:2, B:1" (unnamed clients weigh 1)
    rate_limit: int = 2  # rate limit: requests a client may start per window
    window_steps: int = 100

    @property
    def knobs(self) -> tuple[str, ...]:
        """The EngineConfig fields this run's queue policy reads (its record's knobs; the rate limit runs FCFS)."""
        return policy_records.spec_of(POLICIES[self.policy][1]["policy"]).knobs

    def config(self, engine: EngineConfig) -> EngineConfig:
        """``engine`` with this run's policy and settings (swap gets CPU space as large as the GPU pool)."""
        changes: dict[str, Any] = dict(POLICIES[self.policy][1])
        changes["preemption_mode"] = PreemptionMode(self.preemption_mode)
        changes["num_cpu_blocks"] = engine.num_blocks if self.preemption_mode == "swap" else 0
        changes["enable_prefix_caching"] = self.prefix_caching
        knobs = self.knobs
        if "prediction_error_sigma" in knobs:
            changes["prediction_error_sigma"] = self.sigma
        if "starvation_threshold_steps" in knobs:
            changes["starvation_threshold_steps"] = self.guard_steps
        if "client_weights" in knobs:
            changes["client_weights"] = parse_weights(self.weights)
        if self.policy == "rate_limit":
            changes["rate_limit_max_requests"] = self.rate_limit
            changes["rate_limit_window_steps"] = self.window_steps
        return engine.replace(**changes)

    def label(self) -> str:
        name, knobs = POLICIES[self.policy][0], self.knobs
        extra = ""
        if "prediction_error_sigma" in knobs:
            extra = f"σ {self.sigma:g}"
        elif "client_weights" in knobs and parse_weights(self.weights):
            extra = ",".join(f"{label_name(name)}:{weight:g}" for name, weight in parse_weights(self.weights))
        elif self.policy == "rate_limit":
            extra = f"{self.rate_limit}/{self.window_steps} steps"
        parts = [f"{name} {extra}".strip()]
        if "starvation_threshold_steps" in knobs and self.guard_steps:
            parts.append(f"guard {self.guard_steps}")
        if self.preemption_mode == "swap":
            parts.append("swap")
        if self.prefix_caching:
            parts.append("prefix cache")
        return " · ".join(parts)


def run_labels(choices: Sequence[RunChoice]) -> list[str]:
    """Each run's label, made unique by its slot number where two runs are the same ("FCFS (run 3)")."""
    labels = [c.label() for c in choices]
    return [f"{lab} (run {i + 1})" if labels.count(lab) > 1 else lab for i, lab in enumerate(labels)]


_LABEL_NAME = re.compile(r"[\w.-]{1,16}")


def label_name(client: str) -> str:
    """A client's name as a run's label shows it: as typed when it is letters, digits, '.', '_' and '-' (16 at
    most), else with '?' for every other character and cut to 16. A label is a chart's title and legend (plotly
    reads tags, entities and %{...} there) and a Markdown caption's text (drawn through ``plain``)."""
    return client if _LABEL_NAME.fullmatch(client) else re.sub(r"[^\w.-]", "?", client[:16])


def parse_weights(raw: str) -> tuple[tuple[str, float], ...]:
    """VTC weights typed as "A:2, B:1" (or "A=2"); ValueError names the piece that is not a client and a weight."""
    pairs = []
    for piece in (p.strip() for p in raw.split(",")):
        if not piece:
            continue
        name, sep, weight = piece.replace("=", ":").rpartition(":")
        try:
            value = decimal_number(weight, 0.001, 1000)  # (ASCII digits: sim/untrusted.py)
        except ValueError:
            value = None
        if not sep or not name.strip() or value is None:
            raise ValueError(f"VTC weights: {piece[:30]!r} is not client:weight with a weight from 0.001 to 1,000 "
                             f"(e.g. A:2, B:1)")
        pairs.append((name.strip(), value))
    if len({n for n, _ in pairs}) < len(pairs):
        raise ValueError("VTC weights: a client is given two weights; give each client one")
    return tuple(pairs)


def run_choice_of(config: EngineConfig) -> RunChoice:
    """The run that comes nearest to ``config`` (a scenario file's), within the pickers' ranges (FCFS for a policy
    the Workbench does not offer)."""
    policy = str(config.policy) if str(config.policy) in POLICIES else "fcfs"
    return RunChoice("rate_limit" if config.rate_limit_max_requests else policy,
                     config.preemption_mode.value, config.enable_prefix_caching,
                     min(config.prediction_error_sigma, MAX_SIGMA), min(config.starvation_threshold_steps, MAX_GUARD),
                     ", ".join(f"{c}:{w:g}" for c, w in config.client_weights),
                     min(config.rate_limit_max_requests, MAX_RATE_LIMIT) or RunChoice.rate_limit,
                     min(config.rate_limit_window_steps, MAX_WINDOW))


def engine_of(config: EngineConfig) -> EngineConfig:
    """The workbench engine nearest to ``config``: its pool, slots, budget, chunking, watermark (at most
    MAX_WATERMARK) and named model (else the default one)."""
    model = model_name(config.model) or DEFAULT_MODEL
    return engine_config(config.num_blocks, config.block_size, config.max_num_seqs, config.max_num_batched_tokens,
                         config.chunked_prefill, min(config.watermark, MAX_WATERMARK), model)


def config_not_kept(config: EngineConfig) -> list[str]:
    """The settings of ``config`` the workbench cannot hold (run 1 on its engine differs there), by field name."""
    ours = run_choice_of(config).config(engine_of(config))
    return [f.name for f in dataclasses.fields(EngineConfig)
            if f.name != "max_steps" and getattr(ours, f.name) != getattr(config, f.name)]


MAX_SIGMA, MAX_GUARD, MAX_RATE_LIMIT, MAX_WINDOW, MAX_WATERMARK = 2.5, 100_000, 10_000, 100_000, 0.5


def engine_config(num_blocks: int, block_size: int, max_num_seqs: int, max_num_batched_tokens: int,
                  chunked_prefill: bool, watermark: float, model: str) -> EngineConfig:
    """The workbench's engine: every run shares it (the page's settings; ValueError names a bad one)."""
    if model not in MODELS:
        raise ValueError(f"model: {model!r} is not one of: {', '.join(MODELS)}")
    return EngineConfig(num_blocks=num_blocks, block_size=block_size, max_num_seqs=max_num_seqs,
                        max_num_batched_tokens=max_num_batched_tokens, chunked_prefill=chunked_prefill,
                        watermark=watermark, model=MODELS[model], max_steps=MAX_STEPS)


def scenarios(specs: Sequence[RequestSpec], engine: EngineConfig,
              choices: Sequence[RunChoice]) -> list[tuple[str, Scenario]]:
    """(label, scenario) of each run: the same requests and engine, each run's policy and settings."""
    return [(label, Scenario(f"Workbench: {label}", choice.config(engine), tuple(specs),
                             f"{len(specs):,} requests built on the Scheduler Lab workbench, run with {label}"))
            for label, choice in zip(run_labels(choices), choices, strict=True)]
