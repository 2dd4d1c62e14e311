"""The Fairness lesson's logic, the interface every lesson has (``lessons/interface.py``): its knobs (rate limit,
VTC charges, lift), the variants it compares, the headline cards and the "what to notice" sentences in the page's
order. No Streamlit calls here, so it is testable on its own. Its parts: the clients (``clients.py``), the
statistics, sweeps and tables of the runs (``stats.py``), the sentences (``notices.py``).

Fairness here is per client (customer), not per request: a client's *service* is the weighted tokens it was
served (VTC's charge: ``input_weight`` per prompt token, ``output_weight`` per output token, divided by the
client's weight); its *virtual counter* is that service plus any lifts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sim.config import EngineConfig, Policy, field_help
from sim.presets import Preset
from sim.scenario import Scenario
from ui.controls import Knob
from ui.glossary import term_link
from ui.wording import Card, safe_id

from . import notices as sentences
from .stats import VTC_LIKE, Run

LESSON = "fairness"
QUESTION = (  # (a glossary term linked at its first use)
    "A server that takes requests first come, first served is fair to *requests*, not to *customers*: a client "
    "that sends nine requests in ten gets nine tenths of the GPU, and everyone else waits behind it. How do you "
    f"share a GPU fairly between clients without leaving it idle: a {term_link('rate limit')} per client, or a "
    f"scheduler that counts each client's service ({term_link('VTC')})?"
)


COUNTERS_CAPTION = (
    "A client's virtual counter is the weighted tokens it has been served (input_weight per prompt token when a "
    "request is admitted, output_weight per generated token, divided by the client's weight) plus VTC's lifts "
    "(triangles). VTC admits the waiting client with the lowest counter next; FCFS ignores the counters, so under "
    "FCFS they only record who got served."
)
BOUND_CAPTION = (
    "While two clients both have requests waiting, VTC keeps the difference in their service under "
    "2 x max(input_weight x L_input, output_weight x M), with L_input the longest prompt and M the KV pool in "
    "tokens, on a server that never preempts (the paper's reserves memory for each answer's full length; one "
    "that preempts, as vLLM does, can break it). Each line is the first client's service minus the second's, "
    "counted from the moment both began waiting; it breaks where one of them had nothing waiting. The bound "
    "limits how far a line rises or falls between any two of its moments (the gap in the table), so a line "
    "may stray past the dashed lines and still keep it."
)


# ---- knobs ------------------------------------------------------------------------------------------------------
def _variant_configs(preset: Preset, config: EngineConfig) -> list[EngineConfig]:
    return [config.replace(**overrides) for _, overrides in preset.variants]


def knobs(preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
    """The lesson's own knobs, each shown only where a variant of this preset responds to it; defaults from
    ``base``'s config."""
    config = base.config
    labels = [label for label, _ in preset.variants]
    configs = _variant_configs(preset, config)
    policies = {c.policy for c in configs}
    uses_limit = any(c.rate_limit_max_requests for c in configs) or "limit_sweep" in preset.knobs
    out = [Knob("policies", "Policies to compare", "multi", labels, options=tuple(labels), widget="multiselect",
                help="Each runs on the same requests.")]
    if uses_limit:
        out += [
            Knob("limit", "Rate limit (requests per client per window)", "int",
                 config.rate_limit_max_requests or 10, min=1, max=100, step=1,
                 help=field_help(EngineConfig, "rate_limit_max_requests") + "; requests over it are rejected on "
                 "arrival. Applies to the 'Rate limit' policy."),
            Knob("limit_window", "Rate-limit window (steps)", "int", config.rate_limit_window_steps, min=10,
                 max=2000, step=10, help=field_help(EngineConfig, "rate_limit_window_steps")
                 + " (sliding: the last this many steps)"),
        ]
    if policies & set(VTC_LIKE) or "output_weight_sweep" in preset.knobs:
        out += [
            Knob("w_in", "VTC charge per prompt token (input_weight)", "float", config.input_weight, min=0.0,
                 max=8.0, step=0.25, help=field_help(EngineConfig, "input_weight")
                 + ". The paper's default is 1."),
            Knob("w_out", "VTC charge per output token (output_weight)", "float", config.output_weight, min=0.0,
                 max=16.0, step=0.25, help=field_help(EngineConfig, "output_weight")
                 + ". The paper's default is 2: an output token costs about twice a prompt token."),
        ]
    if Policy.VTC in policies and Policy.LCF not in policies:
        out.append(Knob("lift", "Lift a returning client's counter (off = LCF)", "bool", True, widget="toggle",
                        help="VTC's lift: when a client's queue goes from empty to non-empty, its counter is "
                             "raised to the lowest counter of the clients still waiting (with nobody waiting, to "
                             "the counter of the last client to leave the queue), so credit saved while idle "
                             "cannot be spent later. Off runs least-counter-first (LCF) instead."))
    out += [
        Knob("window", "Tokens/s chart: sliding window (steps)", "int", 100, min=10, max=1000, step=10,
             help="Each point of the tokens/s charts averages the last this many steps."),
        Knob("unit", "Time axis", "choice", "steps", options=("steps", "ms"),
             labels={"steps": "engine steps", "ms": "milliseconds"}, widget="segmented"),
    ]
    return out


def apply(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The engine config with the lesson's knobs (rate limit, VTC charges) applied."""
    changes = {"limit": ("rate_limit_max_requests", int), "limit_window": ("rate_limit_window_steps", int),
               "w_in": ("input_weight", float), "w_out": ("output_weight", float)}
    return config.replace(**{field: cast(values[k]) for k, (field, cast) in changes.items() if k in values})


# ---- variants -------------------------------------------------------------------------------------------------
def variants(preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
    """The variants chosen in ``values["policies"]`` on ``scenario`` (knobs applied); VTC runs as LCF when the lift
    toggle is off. A label whose numbers the knobs changed from the preset's says what it runs now ("VTC 1:2
    (weights A 1 : B 3)")."""
    ids = [c.client_id for c in scenario.workload.clients] if scenario.workload else \
        sorted({r.client_id for r in scenario.requests})
    reference, lift = preset.scenario.config, values.get("lift", True)  # (the config before the knobs)
    out = []
    for label, overrides in preset.variants:
        if label not in values["policies"]:
            continue
        run = scenario.with_config(**overrides)
        if not lift and run.config.policy is Policy.VTC:
            run = run.with_config(policy=Policy.LCF)
        change = _vtc_change(reference.replace(**overrides), run.config, ids)
        out.append((f"{label} ({change})" if change else label, run))
    return out


def _weights_text(config: EngineConfig, ids: Sequence[str]) -> str:
    weights = [config.client_weight(c) for c in ids]
    if len(set(weights)) <= 1:
        return "equal weights"
    return "weights " + " : ".join(f"{c} {w:g}" for c, w in zip(ids, weights, strict=True))


def _vtc_change(default: EngineConfig, actual: EngineConfig, ids: Sequence[str]) -> str:
    """What the knobs changed in a VTC/LCF variant's charges, as a label suffix ('' when nothing did)."""
    if actual.policy not in VTC_LIKE:
        return ""
    parts = []
    if default.policy is Policy.VTC and actual.policy is Policy.LCF:
        parts.append("no lift")
    if [default.client_weight(c) for c in ids] != [actual.client_weight(c) for c in ids]:
        parts.append(_weights_text(actual, ids))
    if (default.input_weight, default.output_weight) != (actual.input_weight, actual.output_weight):
        parts.append(f"in {actual.input_weight:g} : out {actual.output_weight:g}")
    return ", ".join(parts)


# ---- headline and notices -------------------------------------------------------------------------------------
def headline(run: Run, unit: str) -> Card:
    """A policy's headline number: its total throughput, and the clients' finish times (ms) and fairness under
    it."""
    return Card(f"{run.label}: total throughput", f"{run.summary['throughput_tok_s']:,.0f} tokens/s",
                run_caption(run), "Output tokens generated over the whole run, per second of simulated GPU time.")


def run_caption(run: Run) -> str:
    """The line under a policy's headline number: each client's mean finish time, fairness, rejections."""
    finish = " · ".join(f"{safe_id(c['client'])} {sentences.fmt_ms(c['mean_finish_ms'])}" for c in run.clients)
    index = run.stats["fair_index"]
    fair = f"fair-share index (Jain) {index:.2f}" if np.isfinite(index) else "fair-share index (Jain) —"
    return f"mean finish: {finish} · {fair} · {run.summary['num_rejected']:,} rejected"


def sweep_notices(runs: Sequence[Run], limit_sweep_: dict | None, weight_sweep_: dict | None) -> list[str]:
    """The sweeps' sentences (a complete sweep, or None), which go before ``notices``': a preset with a sweep makes
    its point there, and the page shows three sentences before "more"."""
    if not runs:
        return []
    out: list[str] = []
    if limit_sweep_:
        out += sentences.limit_sweep_notice(limit_sweep_, runs)
    if weight_sweep_:
        out += sentences.weight_sweep_notice(weight_sweep_, runs)
    return out


def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Sentences about these runs, each computed from the numbers on the page (times in ms whatever ``unit``: the
    clients' finish times are compared in ms)."""
    if not runs:
        return []
    out: list[str] = []
    out += sentences.light_client_notice(runs)
    out += sentences.throughput_notice(runs)
    out += sentences.lift_notice(runs)
    out += sentences.weights_notice(runs)
    out += sentences.gap_notice(runs)
    out += sentences.fair_index_notice(runs)
    return out
