"""The Fairness lesson's logic: its knobs (clients, VTC charges, rate limit, lift), the variants it compares, the
statistics and sweeps it shows, and the "what to notice" sentences computed from the runs. No Streamlit calls
here, so it is testable on its own; the page passes in the cached runner (``run_fn``, ``measure_fn``). The
statistics themselves are the simulator's (``sim.fairness_metrics``, ``sim.metrics``); this module picks which
clients and windows the page shows, and words them.

Fairness here is per client (customer), not per request: a client's *service* is the weighted tokens it was
served (VTC's charge: ``input_weight`` per prompt token, ``output_weight`` per output token, divided by the
client's weight); its *virtual counter* is that service plus any lifts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from lessons.run import Run as LessonRun
from sim import fairness_metrics, metrics, presets
from sim.config import EngineConfig, Policy, field_help
from sim.presets import Preset
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import ClientSpec, WorkloadSpec, client_rates
from ui.controls import Knob
from ui.glossary import term_link
from ui.wording import Card, count, join_and, pct_change, safe_id, safe_ids

LESSON = "fairness"
QUESTION = (  # (a glossary term linked at its first use)
    "A server that takes requests first come, first served is fair to *requests*, not to *customers*: a client "
    "that sends nine requests in ten gets nine tenths of the GPU, and everyone else waits behind it. How do you "
    f"share a GPU fairly between clients without leaving it idle: a {term_link('rate limit')} per client, or a "
    f"scheduler that counts each client's service ({term_link('VTC')})?"
)
CLIENT_IDS = ("A", "B", "C", "D")
MAX_CLIENTS = len(CLIENT_IDS)
FAIRNESS_WINDOW_STEPS = 100  # windows of sim.fairness_metrics.fair_share_index
LIGHT_SHARE = 0.2  # a client sending less than this share of the requests is "the light client" of a run
LIFT_NOTICE_SHARE = 0.05  # a lift worth a sentence: at least this share of the largest counter
_VTC_LIKE = (Policy.VTC, Policy.LCF)

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

MeasureFn = Callable[..., Any]  # (scenario, fn, *args) -> fn(trace of scenario, *args), cached


class PaperRateLimit(NamedTuple):
    """Total throughput a paper measured without and with a per-client rate limit (tokens/s, read off its figure)."""

    unlimited_tok_s: float
    limited_tok_s: float

    @property
    def kept(self) -> float:
        """The share of the throughput the limit kept."""
        return self.limited_tok_s / self.unlimited_tok_s


# The VTC paper's rate-limit figure (Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024): ~780
# tokens/s without a limit, ~340 with one, ~44% kept, on the paper's own model and GPU. The article_fairness
# preset reproduces its shape, not its tokens/s (its step costs are sim.config.CostModel's: a fit of vLLM serving
# Llama 3.1 8B on one H100).
PAPER_RATE_LIMIT = PaperRateLimit(unlimited_tok_s=780.0, limited_tok_s=340.0)
PAPER_PRESET = "article_fairness"  # the preset whose FCFS and "Rate limit" runs the paper's figure is compared with


@dataclass
class Run(LessonRun):
    clients: list[dict[str, Any]]  # sim.metrics.per_client rows
    stats: dict[str, Any]  # fairness_stats

    @property
    def config(self) -> EngineConfig:
        return self.scenario.config

    @property
    def is_limited(self) -> bool:
        return self.config.rate_limit_max_requests > 0


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
    if policies & set(_VTC_LIKE) or "output_weight_sweep" in preset.knobs:
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


# ---- clients ----------------------------------------------------------------------------------------------------
def as_shares(workload: WorkloadSpec) -> WorkloadSpec:
    """The same arrivals with every client given as a share of one total rate (what the page's sliders show).
    Workloads whose clients already use shares come back unchanged."""
    if all(c.rate_per_step is None for c in workload.clients):
        return workload
    rates = client_rates(workload)
    total = float(rates.sum())
    clients = tuple(dataclasses.replace(c, share=float(r / total), rate_per_step=None)
                    for c, r in zip(workload.clients, rates, strict=True))
    return workload.replace(clients=clients, rate_per_step=total)


def num_clients_knob(workload: WorkloadSpec) -> Knob:
    n = len(workload.clients)
    return Knob("clients", "Number of clients", "int", n, min=1, max=max(MAX_CLIENTS, n), step=1,
                help="Clients added here start as copies of the last one (always on).")


def client_specs(workload: WorkloadSpec, num_clients: int) -> list[ClientSpec]:
    """The first ``num_clients`` clients; missing ones copy the last client's share and lengths, always on."""
    specs = list(workload.clients[:num_clients])
    used = {c.client_id for c in specs}
    spare = [c for c in CLIENT_IDS if c not in used] + [f"C{i}" for i in range(num_clients)]
    while len(specs) < num_clients:
        new_id = next(c for c in spare if c not in used)
        used.add(new_id)
        specs.append(dataclasses.replace(specs[-1], client_id=new_id, start_step=0, stop_step=None, on_steps=0,
                                         off_steps=0))
    return specs


def _share_pct(spec: ClientSpec, workload: WorkloadSpec) -> int:
    total = sum(c.share for c in workload.clients) or 1.0
    return int(round(100 * spec.share / total))


def client_knobs(spec: ClientSpec, workload: WorkloadSpec, config: EngineConfig) -> list[Knob]:
    """One client's knobs; URL keys are prefixed with its id (``B_share``) so clients never collide."""
    p = spec.client_id
    out = [
        Knob(f"{p}_share", "Share of the arrivals (%)", "int", _share_pct(spec, workload), min=0, max=100, step=1,
             help="This client's part of the total arrival rate (shares are normalised if they do not add up "
                  "to 100)."),
        Knob(f"{p}_start", "Starts sending at step", "int", spec.start_step, min=0, max=max(3000, spec.start_step),
             step=10),
        Knob(f"{p}_stop", "Stops sending at step (0 = never)", "int", spec.stop_step or 0, min=0,
             max=max(5000, spec.stop_step or 0), step=10),
        Knob(f"{p}_on", "Sends in bursts: on for (steps, 0 = always on)", "int", spec.on_steps, min=0,
             max=max(2000, spec.on_steps), step=10),
        Knob(f"{p}_off", "...then off for (steps)", "int", spec.off_steps, min=0, max=max(2000, spec.off_steps),
             step=10),
    ]
    if spec.prompt_median is not None or spec.output_median is not None:
        out += [
            Knob(f"{p}_prompt", "Prompt length, median (tokens)", "int", spec.prompt_median or workload.prompt_median,
                 min=8, max=4000, step=8),
            Knob(f"{p}_output", "Answer length, median (tokens)", "int", spec.output_median or workload.output_median,
                 min=4, max=2000, step=4),
        ]
    out.append(Knob(f"{p}_weight", "VTC weight (its share of the service)", "float", config.client_weight(p),
                    min=0.25, max=8.0, step=0.25,
                    help="Weighted VTC: a client with weight 2 is charged half per token, so it gets twice the "
                         "service of a weight-1 client while both wait."))
    return out


MAX_CLIENT_PANELS = 8  # past this many clients, one table of their settings instead of a panel of sliders each


def client_settings_table(specs: Sequence[ClientSpec], workload: WorkloadSpec, config: EngineConfig) -> pd.DataFrame:
    """The clients' knobs as one table, a row per client and a column per setting (named by its label): what the
    page shows instead of a panel per client when there are more than MAX_CLIENT_PANELS (2,000 clients made
    12,000 sliders). A setting a client has no knob for is blank."""
    rows = []
    for spec in specs:
        row: dict[str, Any] = {"client": spec.client_id}
        for knob in client_knobs(spec, workload, config):
            row[knob.label] = knob.default
        rows.append(row)
    return pd.DataFrame(rows)


def client_values_from_table(table: pd.DataFrame, specs: Sequence[ClientSpec], workload: WorkloadSpec,
                             config: EngineConfig) -> dict[str, dict[str, Any]]:
    """``values[client_id][knob key]`` (what ``apply_clients`` and ``apply_client_weights`` read) from an edited
    ``client_settings_table``: each value clipped to its knob's range, a blank cell the knob's default."""
    values: dict[str, dict[str, Any]] = {}
    for spec, (_, row) in zip(specs, table.iterrows(), strict=True):
        mine = values[spec.client_id] = {}
        for knob in client_knobs(spec, workload, config):
            cell = row.get(knob.label)
            value = knob.default if cell is None or pd.isna(cell) else float(cell)
            value = min(max(value, knob.min), knob.max)
            mine[knob.key] = int(round(value)) if knob.kind == "int" else float(value)
    return values


def apply_clients(workload: WorkloadSpec, specs: Sequence[ClientSpec],
                  values: dict[str, dict[str, Any]]) -> WorkloadSpec:
    """The workload with the clients' knob values (``values[client_id][knob key]``). Shares are rewritten only
    when one of them moved, so an untouched preset generates exactly its own requests."""
    base_pcts = [_share_pct(s, workload) for s in specs]
    pcts = [int(values[s.client_id][f"{s.client_id}_share"]) for s in specs]
    new_shares = pcts != base_pcts or len(specs) != len(workload.clients)
    if new_shares and not any(pcts):  # say it in the sidebar's words, not the workload's field names
        raise ValueError(f"every client's 'Share of the arrivals (%)' is 0, so nobody sends a request; give "
                         f"{'a client' if len(specs) > 1 else 'the client'} a share above 0")
    clients = []
    for spec, pct in zip(specs, pcts, strict=True):
        v, p = values[spec.client_id], spec.client_id
        start, stop = int(v[f"{p}_start"]), int(v[f"{p}_stop"]) or None
        if stop is not None and stop <= start:  # say it in the sidebar's words, not the workload's field names
            raise ValueError(f"client {p}: 'Stops sending at step' ({stop:,}) must come after 'Starts sending at "
                             f"step' ({start:,}); move it later, or to 0 for never")
        changes: dict[str, Any] = {
            "start_step": start, "stop_step": stop,
            "on_steps": int(v[f"{p}_on"]), "off_steps": int(v[f"{p}_off"]),
        }
        if new_shares:
            changes.update(share=pct / 100, rate_per_step=None)
        if f"{p}_prompt" in v:
            changes.update(prompt_median=int(v[f"{p}_prompt"]), output_median=int(v[f"{p}_output"]))
        clients.append(dataclasses.replace(spec, **changes))
    return workload.replace(clients=tuple(clients))


def apply_client_weights(config: EngineConfig, specs: Sequence[ClientSpec],
                         values: dict[str, dict[str, Any]]) -> EngineConfig:
    """``client_weights`` from the clients' weight knobs; unchanged when every weight is what the config says."""
    weights = {s.client_id: float(values[s.client_id][f"{s.client_id}_weight"]) for s in specs}
    if all(w == config.client_weight(c) for c, w in weights.items()):
        return config
    return config.replace(client_weights=tuple((c, w) for c, w in weights.items() if w != 1.0))


def describe_clients(workload: WorkloadSpec) -> str:
    """One line: each client's share of the arrivals and its rate while it sends."""
    rates = client_rates(workload)
    total = sum(c.share for c in workload.clients) or 1.0
    parts = []
    for c, rate in zip(workload.clients, rates, strict=True):
        when = ""
        if c.start_step or c.stop_step is not None:
            when = (f", steps {c.start_step:,} to {c.stop_step - 1:,}" if c.stop_step
                    else f", from step {c.start_step:,}")
        if c.on_steps and c.off_steps:
            when += f", {c.on_steps:,} on / {c.off_steps:,} off"
        per_step = f"{rate:.3g} request{'' if f'{rate:.3g}' == '1' else 's'}/step"
        parts.append(f"**{safe_id(c.client_id)}** {100 * c.share / total:.0f}% ({per_step}{when})")
    return "Arrivals: " + " · ".join(parts)


def in_client_order(scenario: Scenario) -> Scenario:
    """The scenario with each client's first request moved to the front, in name order (A, B, C, ...): a trace
    numbers clients by first appearance and charts colour them by that number, so this keeps B orange on every
    chart even when C happens to send first. Unchanged (the same object) when the order is already right.
    NOTE: arrivals are processed by step, then list order, so only ties within one arrival step can change."""
    first: dict[str, int] = {}
    for i, r in enumerate(scenario.requests):
        first.setdefault(r.client_id, i)
    names = sorted(first)
    if list(first) == names:
        return scenario
    leaders = [first[c] for c in names]
    moved = set(leaders)
    order = leaders + [i for i in range(len(scenario.requests)) if i not in moved]
    return dataclasses.replace(scenario, requests=tuple(scenario.requests[i] for i in order))


# ---- variants and runs ------------------------------------------------------------------------------------------
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
    if actual.policy not in _VTC_LIKE:
        return ""
    parts = []
    if default.policy is Policy.VTC and actual.policy is Policy.LCF:
        parts.append("no lift")
    if [default.client_weight(c) for c in ids] != [actual.client_weight(c) for c in ids]:
        parts.append(_weights_text(actual, ids))
    if (default.input_weight, default.output_weight) != (actual.input_weight, actual.output_weight):
        parts.append(f"in {actual.input_weight:g} : out {actual.output_weight:g}")
    return ", ".join(parts)


def run_maker(measure_fn: MeasureFn) -> Callable[[str, Scenario, Trace, dict[str, Any]], Run]:
    """What ui.lesson.run_variants calls to wrap each run: adds the per-client rows and the fairness statistics
    (computed once per run, through the page's cache)."""
    def make(label: str, scenario: Scenario, trace: Trace, summary: dict[str, Any]) -> Run:
        return Run(label, scenario, trace, summary, measure_fn(scenario, metrics.per_client, trace=trace),
                   measure_fn(scenario, fairness_stats, trace=trace))
    return make


# ---- statistics of one run (cached by the page through measure_fn) ----------------------------------------------
def fairness_stats(trace: Trace) -> dict[str, Any]:
    """Everything the notices and tables need from one run, computed once (``sim.fairness_metrics`` and
    ``sim.metrics`` with the lesson's choices: the two clients of ``gap_pair``, ``FAIRNESS_WINDOW_STEPS``).

    - ``fair_index``: fair_share_index (1 = every client got its max-min fair share, window by window);
    - ``gap``/``bound``: service gap between the ``gap_clients`` while both waited, and VTC's bound;
      ``difference``: service_difference of those two (the gap chart's line);
    - ``all_waiting_share``: fraction of steps in which every client had requests waiting;
      ``tokens_all_waiting``: tokens (prompt + output) each client was served in those steps;
    - ``longest_starvation_steps``: per client, the longest stretch with requests waiting and none admitted;
    - ``mean_batch``: requests running per step; ``idle_slot_share``: fraction of steps with a free batch slot
      while a request waited (0 = work-conserving); ``max_counter``: the largest virtual counter at the end;
    - ``lifts``: number of lifts and the largest one (step, client, amount, counter before, counter lifted to).
    """
    ids, n = trace.client_ids, trace.num_steps
    waiting = fairness_metrics.client_waiting(trace)  # [steps, clients], shared by the statistics below
    pair = gap_pair(ids)
    gap = fairness_metrics.service_gap(trace, *pair) if pair else {
        "gap": float("nan"), "difference": np.full(n, np.nan), "bound": fairness_metrics.vtc_bound(trace)}
    fair = fairness_metrics.fair_share_index(trace, FAIRNESS_WINDOW_STEPS)
    everyone = fairness_metrics.served_while_all_waiting(trace, waiting)
    return {
        "client_ids": list(ids),
        "fair_index": fair["index"],
        "fair_windows": fair["num_windows"],
        "gap_clients": [ids[i] for i in pair] if pair else [],
        "gap": float(gap["gap"]),
        "bound": float(gap["bound"]),
        "difference": gap["difference"],
        "all_waiting_share": everyone["step_share"],
        "tokens_all_waiting": everyone["tokens"],
        "longest_starvation_steps": fairness_metrics.longest_starvation_steps(trace, waiting),
        "mean_batch": metrics.mean_num_running(trace),
        "idle_slot_share": metrics.idle_slot_share(trace),
        "max_counter": float(trace.final_client_values("client_counters").max()) if n else 0.0,
        "lifts": fairness_metrics.lifts(trace, waiting),
    }


def gap_pair(client_ids: Sequence[str]) -> tuple[int, int] | None:
    """The two clients whose service gap the lesson shows: the first two by name (A and B), as trace indices
    (a trace numbers clients in order of first arrival, which need not be A, B, C)."""
    if len(client_ids) < 2:
        return None
    first, second = sorted(client_ids)[:2]
    return client_ids.index(first), client_ids.index(second)


# ---- sweeps -----------------------------------------------------------------------------------------------------
def sweep_point(trace: Trace) -> dict[str, Any]:
    """The few numbers a sweep plots from one run: total throughput, and per client the requests rejected and the
    mean finish time (ms) of the served ones."""
    s = metrics.summary(trace)
    rows = metrics.per_client(trace)
    return {"throughput": s["throughput_tok_s"], "num_rejected": s["num_rejected"],
            "client_ids": [row["client"] for row in rows], "rejected": [row["num_rejected"] for row in rows],
            "mean_finish_ms": [row["mean_finish_ms"] for row in rows], "mean_batch": metrics.mean_num_running(trace)}


def limit_sweep_runs(base: Scenario, limits: Sequence[int]) -> list[Scenario]:
    """The runs limit_sweep makes: FCFS with each limit, smallest first."""
    return [base.with_config(policy=Policy.FCFS, rate_limit_max_requests=v) for v in sorted({int(v) for v in limits})]


def _sweep(x: list[float], runs: list[Scenario], measure_fn: MeasureFn) -> dict[str, Any]:
    """``x`` and the sweep_point of each run; a point ``measure_fn`` gives as None (a ui.sweeps pass: not run yet)
    is left out of ``x`` and ``points``, and ``x_all`` keeps every swept value."""
    shown = [(v, p) for v, p in zip(x, [measure_fn(sc, sweep_point) for sc in runs], strict=True) if p is not None]
    return {"x": [v for v, _ in shown], "points": [p for _, p in shown], "x_all": x}


def limit_sweep(base: Scenario, limits: Sequence[int], measure_fn: MeasureFn) -> dict[str, Any]:
    """FCFS with a per-client rate limit of each of ``limits`` requests per window (the window from ``base``)."""
    runs = limit_sweep_runs(base, limits)
    return {**_sweep([sc.config.rate_limit_max_requests for sc in runs], runs, measure_fn),
            "window_steps": base.config.rate_limit_window_steps}


def weight_sweep_runs(vtc: Scenario, output_weights: Sequence[float]) -> list[Scenario]:
    """The runs weight_sweep makes: ``vtc`` with each output weight, smallest first."""
    return [vtc.with_config(output_weight=w) for w in sorted({float(w) for w in output_weights})]


def weight_sweep(vtc: Scenario, output_weights: Sequence[float], measure_fn: MeasureFn) -> dict[str, Any]:
    """The VTC run ``vtc`` again with each of ``output_weights`` (its input weight kept)."""
    runs = weight_sweep_runs(vtc, output_weights)
    return {**_sweep([sc.config.output_weight for sc in runs], runs, measure_fn),
            "input_weight": vtc.config.input_weight}


def sweep_values(preset: Preset, key: str, chosen: float) -> list[float]:
    """The preset's sweep values plus the knob's current value, so the chosen setting is a point on the curve (not
    a value of 0: the sweeps are drawn on a log axis)."""
    return sorted({*preset.knobs.get(key, ()), *([chosen] if chosen > 0 else [])})


def sweep_references(runs: Sequence[Run], measure_fn: MeasureFn,
                     policies: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Sweep points of the runs without a rate limit (optionally only ``policies``): the flat reference lines."""
    return {run.label: measure_fn(run.scenario, sweep_point) for run in runs
            if not run.is_limited and (policies is None or run.config.policy.value in policies)}


def gap_inputs(runs: Sequence[Run]) -> dict[str, tuple[np.ndarray, float, float]]:
    """label -> (service difference, gap, bound) of the first two clients: the gap chart's precomputed lines."""
    return {run.label: (run.stats["difference"], run.stats["gap"], run.stats["bound"]) for run in runs}


def headline(run: Run, unit: str) -> Card:
    """A policy's headline number: its total throughput, and the clients' finish times (ms) and fairness under
    it."""
    return Card(f"{run.label}: total throughput", f"{run.summary['throughput_tok_s']:,.0f} tokens/s",
                run_caption(run), "Output tokens generated over the whole run, per second of simulated GPU time.")


def run_caption(run: Run) -> str:
    """The line under a policy's headline number: each client's mean finish time, fairness, rejections."""
    finish = " · ".join(f"{safe_id(c['client'])} {_ms(c['mean_finish_ms'])}" for c in run.clients)
    index = run.stats["fair_index"]
    fair = f"fair-share index (Jain) {index:.2f}" if np.isfinite(index) else "fair-share index (Jain) —"
    return f"mean finish: {finish} · {fair} · {run.summary['num_rejected']:,} rejected"


# ---- tables -----------------------------------------------------------------------------------------------------
def client_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per (policy, client): requests, rejected, throughput and latency."""
    rows = []
    for run in runs:
        for c in sorted(run.clients, key=lambda c: c["client"]):
            rows.append({
                "policy": run.label, "client": c["client"], "requests": c["num_requests"],
                "served": c["num_served"], "rejected": c["num_rejected"],
                "output tokens": c["output_tokens"],
                "tokens/s while sending": round(c["throughput_tok_s"]),
                "mean finish (ms)": _round(c["mean_finish_ms"]), "p99 finish (ms)": _round(c["p99_finish_ms"]),
                "mean queueing (ms)": _round(c["mean_queue_ms"]),
            })
    return pd.DataFrame(rows)


def policy_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One column per policy, one row per measure: totals and fairness."""
    ids = runs[0].stats["gap_clients"] if runs else []
    pair = f"{ids[0]} vs {ids[1]}" if len(ids) == 2 else "two clients"
    rows = []
    for run in runs:
        stats = run.stats
        rows.append({
            "policy": run.label,
            "total throughput (tokens/s)": round(run.summary["throughput_tok_s"]),
            "Jain's index vs fair share": _round(stats["fair_index"], 3),
            f"service gap {pair} (weighted tokens)": _round(stats["gap"], 0),
            "VTC bound (weighted tokens)": _round(stats["bound"], 0),
            "rejected (requests)": run.summary["num_rejected"],
            "mean batch (requests running)": _round(stats["mean_batch"], 1),
        })
    table = pd.DataFrame(rows).set_index("policy").T.astype(float)
    table.index.name = "measure"
    return table


def _round(value: float, decimals: int = 0) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), decimals)


# ---- what to notice ---------------------------------------------------------------------------------------------
def light_client(run: Run) -> int | None:
    """Index of the client sending the fewest requests, if it sends under LIGHT_SHARE of them."""
    counts = np.array([c["num_requests"] for c in run.clients])
    if len(counts) < 2 or not counts.sum():
        return None
    c = int(np.argmin(counts[::-1]))  # the last of equals: "B" rather than "A"
    c = len(counts) - 1 - c
    return c if counts[c] < LIGHT_SHARE * counts.sum() else None


def limit_text(config: EngineConfig) -> str:
    n = config.rate_limit_max_requests
    return f"{n} request{'s' if n != 1 else ''} per client per {config.rate_limit_window_steps:,} steps"


def _fcfs_baseline(runs: Sequence[Run]) -> Run | None:
    return next((r for r in runs if r.config.policy is Policy.FCFS and not r.is_limited), None)


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if np.isfinite(value) else "—"


def _pct_change(a: float, b: float) -> str:
    return pct_change(a, b) if np.isfinite(a) and np.isfinite(b) and a > 0 else ""


def sweep_notices(runs: Sequence[Run], limit_sweep_: dict | None, weight_sweep_: dict | None) -> list[str]:
    """The sweeps' sentences (a complete sweep, or None), which go before ``notices``': a preset with a sweep makes
    its point there, and the page shows three sentences before "more"."""
    if not runs:
        return []
    out: list[str] = []
    if limit_sweep_:
        out += _limit_sweep_notice(limit_sweep_, runs)
    if weight_sweep_:
        out += _weight_sweep_notice(weight_sweep_, runs)
    return out


def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Sentences about these runs, each computed from the numbers on the page (times in ms whatever ``unit``: the
    clients' finish times are compared in ms)."""
    if not runs:
        return []
    out: list[str] = []
    out += _light_client_notice(runs)
    out += _throughput_notice(runs)
    out += _lift_notice(runs)
    out += _weights_notice(runs)
    out += _gap_notice(runs)
    out += _fair_index_notice(runs)
    return out


def _light_client_notice(runs: Sequence[Run]) -> list[str]:
    base = _fcfs_baseline(runs)
    if base is None:
        return []
    c = light_client(base)
    if c is None:
        return []
    name = safe_id(base.clients[c]["client"])  # (an uploaded file's id: Markdown shown as typed)
    share = base.clients[c]["num_requests"] / sum(row["num_requests"] for row in base.clients)
    a = base.clients[c]["mean_finish_ms"]
    if not np.isfinite(a):  # none of its requests was served (each too large for the pool, say): no time to compare
        return []
    if len(base.clients) == 2:
        heavy = safe_id(base.clients[1 - c]["client"])
        theirs, behind = f"{heavy}'s", f"the {heavy} requests that arrived before it"
    else:
        theirs, behind = "the other clients'", "the other clients' requests that arrived before it"
    out = [f"Under {base.label}, {name} sends only {share:.0%} of the requests"
           + _light_client_wait(base, c, a, _others_mean_finish_ms(base.trace, c), theirs, behind)]
    for run in runs:
        if run is base or c >= len(run.clients):
            continue
        b = run.clients[c]["mean_finish_ms"]
        change = _pct_change(a, b)
        rejected = run.clients[c]["num_rejected"]
        tail = ("." if not run.is_limited else f", with {rejected:,} of {name}'s requests rejected." if rejected
                else f", with none of {name}'s requests rejected.")
        if not np.isfinite(b):
            out.append(f"{run.label}: none of {name}'s requests was served{tail}")
        elif _ms(a) == _ms(b):
            out.append(f"{run.label}: {name}'s mean finish time stayed at {_ms(a)}{tail}")
        else:
            out.append(f"{run.label}: {name}'s mean finish time {'fell' if b < a else 'rose'} from {_ms(a)} to "
                       f"{_ms(b)} ({change}){tail}")
    return out


def _others_mean_finish_ms(trace: Trace, c: int) -> float:
    """The mean finish time (ms) of the served requests of every client but ``c``, pooled: how long "the other
    clients'" requests took. (Not the mean of their means, which weighs a light client's few requests like a heavy
    one's many; with two clients the same as the other client's own mean.)"""
    served = metrics.served_mask(trace) & (trace.requests["client"] != c)
    finish = metrics.request_latencies(trace)["finish_ms"][served]
    return float(finish.mean()) if len(finish) else float("nan")


def _light_client_wait(base: Run, c: int, mine_ms: float, theirs_ms: float, theirs: str, behind: str) -> str:
    """The rest of the light-client sentence: how its wait compares with the others', and why, by the run."""
    r = base.trace.requests
    light = r["client"] == c
    queued = light & (r["first_scheduled_step"] > r["arrival_step"])
    # Queued behind the others only if some other client's request arrived before one that queued.
    behind_others = queued.any() and (r["arrival_step"][~light] <= r["arrival_step"][queued].max()).any()
    why = (f"each one queues behind {behind}" if behind_others else
           "they queued only behind each other" if queued.any() else
           "none of them queues here, so this is simply how long such answers take")
    p99 = _ms(base.clients[c]["p99_finish_ms"])
    if not np.isfinite(theirs_ms):  # the others had nothing served: nothing to compare with
        return f", and they took {_ms(mine_ms)} on average (p99 {p99}), while none of {theirs} requests was served."
    if mine_ms >= 0.8 * theirs_ms:  # the article's point: a trickle waits as long as the flood
        how = "as long as" if mine_ms <= 1.25 * theirs_ms else "longer than"
        return f", yet they took {_ms(mine_ms)} on average (p99 {p99}), {how} {theirs} ({_ms(theirs_ms)}): {why}."
    return f"; they took {_ms(mine_ms)} on average (p99 {p99}) against {theirs} {_ms(theirs_ms)}: {why}."


def _throughput_notice(runs: Sequence[Run]) -> list[str]:
    base = _fcfs_baseline(runs)
    if base is None:
        return []
    t0 = base.summary["throughput_tok_s"]
    if not t0 > 0:  # the baseline served nothing (every request too big for the pool): nothing to compare with
        return []
    seqs = base.config.max_num_seqs
    out = []
    for run in runs:
        if run is base:
            continue
        t = run.summary["throughput_tok_s"]
        if run.is_limited:
            rejected = ", ".join(f"{c['num_rejected']:,} of {safe_id(c['client'])}'s"
                                 for c in sorted(run.clients, key=lambda c: c["client"]))
            turned_away = count(run.summary["num_rejected"], "request")
            head = f"The rate limit ({limit_text(run.config)}) turned away {turned_away} ({rejected})"
            if not run.summary["num_rejected"]:
                out.append(f"The rate limit ({limit_text(run.config)}) never turned a request away: at this limit "
                           f"nobody sends faster than allowed, and it changes nothing ({t:,.0f} tokens/s, "
                           f"{t / t0:.0%} of {base.label}'s).")
            elif t < 0.95 * t0:
                kv = run.summary["mean_kv_occupancy"]
                spare = (f" while the GPU had room to spare (the KV pool {kv:.0%} full on average)" if kv < 0.75
                         else "")
                out.append(f"{head} and kept only {run.stats['mean_batch']:.1f} of {count(seqs, 'batch slot')} busy "
                           f"on average: throughput fell from {t0:,.0f} to {t:,.0f} tokens/s ({t / t0:.0%} of "
                           f"{base.label}'s){spare}.")
                out += _paper_notice(base, run)
            else:
                out.append(f"{head}, yet throughput stayed at {t:,.0f} tokens/s ({t / t0:.0%} of {base.label}'s): "
                           f"what holds the server back is {_bottleneck(base)}, not the limit.")
        elif run.config.policy in _VTC_LIKE and any(r.is_limited for r in runs):
            line = (f"{run.label} kept {t:,.0f} tokens/s ({t / t0:.0%} of {base.label}'s {t0:,.0f}) and rejected "
                    f"nothing")
            c = light_client(run)
            if c is not None:
                tokens = [row["output_tokens"] for row in run.clients]
                heavy = 1 - sum(tokens[c:c + 1]) / max(sum(tokens), 1)
                line += (f": {run.clients[c]['client']} got all it asked for and the others used the rest "
                         f"({heavy:.0%} of the tokens)")
                if run.stats["idle_slot_share"] < 0.01:
                    line += "; it never left a batch slot empty while a request waited"
            out.append(line + ".")
    return out


def _paper_notice(base: Run, limited: Run) -> list[str]:
    """The VTC paper's rate-limit figure beside the simulator's, when ``base`` (FCFS) and ``limited`` are the
    paper preset's own two runs (``is_paper_setting``); otherwise nothing: the paper's figure is not comparable."""
    if not is_paper_setting(base, limited):
        return []
    t0, t = base.summary["throughput_tok_s"], limited.summary["throughput_tok_s"]
    paper = PAPER_RATE_LIMIT
    return [f"The VTC paper measured a fall from ~{paper.unlimited_tok_s:,.0f} to ~{paper.limited_tok_s:,.0f} "
            f"tokens/s with its rate limit; the simulator's {t0:,.0f} and {t:,.0f} tokens/s come from its own cost "
            f"model (per-step ms costs fitted to Llama 3.1 8B on one H100), not the paper's model and GPU: compare "
            f"the share kept ({t / t0:.0%} here, ~{paper.kept:.0%} in the paper), not the tokens/s."]


def is_paper_setting(base: Run, limited: Run) -> bool:
    """Whether ``base`` and ``limited`` run the paper preset's FCFS and "Rate limit" settings: the same requests
    and the same engine config (pool, slots, budget, costs, the rate limit and its window), VTC's charges aside
    (neither run is ordered by them). Knobs that move any of these away from the preset make it False."""
    ref = _paper_setting()
    return all(run.scenario.requests == ref.requests and _without_charges(run.config) == config
               for run, config in ((base, ref.unlimited), (limited, ref.limited)))


class _PaperSetting(NamedTuple):
    requests: tuple
    unlimited: EngineConfig  # the preset's FCFS run, VTC's charges reset
    limited: EngineConfig  # its "Rate limit" run, likewise


@functools.cache
def _paper_setting() -> _PaperSetting:
    p = presets.get(PAPER_PRESET)
    configs = {label: _without_charges(p.scenario.config.replace(**ov)) for label, ov in p.variants}
    return _PaperSetting(p.scenario.requests, configs["FCFS"], configs["Rate limit"])


def _without_charges(config: EngineConfig) -> EngineConfig:
    default = EngineConfig()
    return config.replace(input_weight=default.input_weight, output_weight=default.output_weight,
                          client_weights=default.client_weights)


def _bottleneck(run: Run) -> str:
    """What limits ``run``'s throughput, for a sentence: its batch slots, its KV pool, or the load."""
    seqs, busy, kv = run.config.max_num_seqs, run.stats["mean_batch"], run.summary["mean_kv_occupancy"]
    if busy >= 0.9 * seqs:
        return f"the batch slots ({busy:.1f} of {count(seqs, 'slot')} busy on average even under {run.label})"
    if kv >= 0.8:
        return f"the KV pool ({kv:.0%} full on average even under {run.label})"
    return (f"the load (under {run.label} itself only {busy:.1f} of {count(seqs, 'slot')} were busy and the KV pool "
            f"{kv:.0%} full on average)")


def _lift_notice(runs: Sequence[Run]) -> list[str]:
    vtc = next((r for r in runs if r.config.policy is Policy.VTC and r.stats["lifts"]["count"]
                and r.stats["lifts"]["amount"] >= LIFT_NOTICE_SHARE * r.stats["max_counter"]), None)
    lcf = next((r for r in runs if r.config.policy is Policy.LCF), None)
    out = []
    if vtc is not None:
        lift = vtc.stats["lifts"]
        ids = safe_ids(vtc.stats["client_ids"])
        who, after = ids[lift["client"]], lift["after"]
        # The lift's target: the lowest counter among the clients with requests waiting then (name that client,
        # and any whose counter was lower still but had nothing waiting, so did not count), or, with nobody
        # waiting, the counter of the last client whose requests left the queue (the paper's Algorithm 2).
        tol = 1e-6 * max(1.0, abs(after))
        me = lift["client"]
        others = [(ids[c], v, lift["waiting"][c]) for c, v in enumerate(lift["others"]) if c != me]
        target = join_and([name for name, v, _ in others if abs(v - after) <= tol])
        anyone_waiting = any(w for _, _, w in others)
        idle = join_and([name for name, v, _ in others if v < after - tol]) if anyone_waiting else ""
        if not target:
            rule = ""
        elif anyone_waiting:
            rule = f", {target}'s, the lowest among the clients with requests waiting"
        else:
            rule = f", {target}'s: nobody else was waiting, and {target} was the last client to leave the queue"
        # Its counter was low because it had been idle, or (its queue had only just emptied, with requests still
        # running) because its charges came in more slowly (per token) than the others' (per prompt).
        why = (f"the credit {who} 'saved' while idle" if not lift["running"][me] else
               f"{who}'s lower counter (its queue had only just emptied, with requests still running)")
        out.append(f"{vtc.label} lifted a returning client's counter {count(lift['count'], 'time')}. The largest: "
                   f"at step {lift['step']:,} {who}'s counter went from {lift['before']:,.0f} to {after:,.0f}"
                   + rule + (f" ({idle}, lower, had none waiting)" if idle else "")
                   + f", so {why} could not be spent at "
                   + (f"{ids[1 - me]}'s" if len(ids) == 2 else "the others'") + " expense.")
    if vtc is not None and lcf is not None:
        ids = safe_ids(vtc.stats["client_ids"])
        who = vtc.stats["lifts"]["client"]
        victims = [c for c in range(len(ids)) if c != who]
        worst = max(victims, key=lambda c: lcf.stats["longest_starvation_steps"][c])
        head = lcf.trace.clients["client_counters"]
        step = vtc.stats["lifts"]["step"]
        if step < lcf.trace.num_steps:
            lead = float(head[max(step - 1, 0), worst] - head[max(step - 1, 0), who])
            out.append(f"Without the lift ({lcf.label}) {ids[who]} came back {lead:,.0f} weighted tokens 'behind' "
                       f"and was served first until it caught up: {ids[worst]} had requests waiting and none "
                       f"admitted for up to {lcf.stats['longest_starvation_steps'][worst]:,} steps, against "
                       f"{vtc.stats['longest_starvation_steps'][worst]:,} under {vtc.label}.")
    return out


def _weights_notice(runs: Sequence[Run]) -> list[str]:
    weighted = [r for r in runs if len({r.config.client_weight(c) for c in r.stats["client_ids"]}) > 1]
    if not weighted or len(runs[0].stats["client_ids"]) != 2:
        return []
    a, b = safe_ids(runs[0].stats["client_ids"])
    ratios = []
    for run in runs:
        tokens = run.stats["tokens_all_waiting"]
        if run.stats["all_waiting_share"] >= 0.05 and tokens[0]:
            ratios.append((tokens[1] / tokens[0], run.label))
    if not ratios:
        return []
    (first, label), rest = ratios[0], [f"{r:.2f}x under {lab}" for r, lab in ratios[1:]]
    listed = join_and([f"{first:.2f}x the tokens (prompt + output) {a} was under {label}", *rest])
    return [f"While both {a} and {b} had requests waiting, {b} was served {listed}: weighted VTC splits the service "
            f"by the weights; FCFS by who sent more."]


def _gap_notice(runs: Sequence[Run]) -> list[str]:
    ids = runs[0].stats["gap_clients"]
    if len(ids) < 2:
        return []
    a, b = safe_ids(ids[:2])  # (for the sentences; ids stay as the trace has them)
    measured = [r for r in runs if r.stats["gap"] > 0]
    if not measured:
        return [f"{a} and {b} never had requests waiting at the same time, so no service gap arises."]
    cfg = measured[0].config
    trace = measured[0].trace
    parts = fairness_metrics.vtc_bound_parts(trace, [trace.client_ids.index(c) for c in ids[:2]])
    gaps = ", ".join(f"{r.label} {r.stats['gap']:,.0f}" for r in measured)
    over = [r for r in measured if r.stats["gap"] > r.stats["bound"]]
    tail = (f"; {', '.join(r.label for r in over)} went past it" if over else "")
    # The paper's server reserves memory for every admitted request's whole answer, so nothing is preempted; a
    # server that preempts (as vLLM does, the newest admission first: often the least-served client's) can break it.
    vtc_over = [r for r in over if r.config.policy in _VTC_LIKE and r.summary["num_preemptions"]]
    if vtc_over:
        n = vtc_over[0].summary["num_preemptions"]
        tail += (f" ({vtc_over[0].label} preempted {count(n, 'request')}: the paper's bound assumes a server that "
                 f"never preempts, reserving memory for each answer's full length)")
    formula, numbers = "2 x max(w_in x L_input, w_out x M)", (f"2 x max({cfg.input_weight:g} x "
                                                            f"{parts['max_input']:,}, {cfg.output_weight:g} x "
                                                            f"{parts['pool_tokens']:,})")
    if parts["min_weight"] != 1:  # charges are divided by the client's weight: so is one charge's largest size
        formula += " / w_min"
        numbers += f" / {parts['min_weight']:g}"
    return [f"Largest service gap between {a} and {b} while both waited (weighted tokens): {gaps}. "
            f"VTC guarantees at most {formula} = {numbers} = {parts['bound']:,.0f}{tail}."]


def _fair_index_notice(runs: Sequence[Run]) -> list[str]:
    values = [(r.label, r.stats["fair_index"]) for r in runs if np.isfinite(r.stats["fair_index"])]
    if len(values) < 2:
        return []
    text = ", ".join(f"{label} {v:.2f}" for label, v in values)
    base = _fcfs_baseline(runs)
    floor = base.stats["fair_index"] if base is not None and np.isfinite(base.stats["fair_index"]) else 1.0
    limited = [r.label for r in runs if r.is_limited and np.isfinite(r.stats["fair_index"])
               and r.stats["fair_index"] > 0.95 and r.stats["fair_index"] > floor + 0.02
               and r.summary["num_rejected"]]
    tail = (f" {limited[0]} scores well only because it turned the extra work away." if limited else "")
    return [f"Jain's index against each client's max-min fair share (1 = everyone got their share, "
            f"{FAIRNESS_WINDOW_STEPS}-step windows): {text}.{tail}"]


def _limit_sweep_notice(sweep: dict, runs: Sequence[Run]) -> list[str]:
    base = _fcfs_baseline(runs)
    if base is None or not sweep["points"] or not base.summary["throughput_tok_s"] > 0:  # (it served nothing)
        return []
    t0 = base.summary["throughput_tok_s"]
    x, pts = sweep["x"], sweep["points"]
    tightest = pts[0]
    n = x[0]
    out = [f"At the tightest limit ({n} request{'s' if n != 1 else ''} per client per {sweep['window_steps']:,} "
           f"steps) throughput is "
           f"{tightest['throughput']:,.0f} tokens/s, {tightest['throughput'] / t0:.0%} of {base.label}'s "
           f"{t0:,.0f}, with {tightest['num_rejected']:,} requests rejected."]
    near = next((v for v, p in zip(x, pts, strict=True) if p["throughput"] >= 0.9 * t0), None)
    if near is not None:
        p = pts[x.index(near)]
        total = base.summary["num_requests"]
        if p["num_rejected"] <= 0.05 * total:
            out.append(f"Only from {near} requests per window does throughput get within 10% of {base.label}'s; by "
                       f"then the limit barely holds anyone back ({p['num_rejected']:,} of {total:,} rejected), so "
                       f"it no longer protects the light client either.")
        else:
            out.append(f"Only from {near} requests per window does throughput get within 10% of {base.label}'s, "
                       f"and even there it rejects {p['num_rejected']:,} of {total:,} requests.")
    else:
        out.append(f"No limit tried gets within 10% of {base.label}'s throughput: every one of them turns work away "
                   f"while slots sit empty.")
    return out


def _weight_sweep_notice(sweep: dict, runs: Sequence[Run]) -> list[str]:
    pts, x = sweep["points"], sweep["x"]
    if len(pts) < 2 or len(pts[0]["client_ids"]) < 2:
        return []
    ids = safe_ids(pts[0]["client_ids"])
    first, last = pts[0]["mean_finish_ms"], pts[-1]["mean_finish_ms"]
    raising = f"Raising the output weight from {x[0]:g} to {x[-1]:g} (input weight {sweep['input_weight']:g})"
    out = []
    comparable = bool(np.isfinite([*first, *last]).all())  # (a client with nothing served: no times to compare)
    if comparable and all(_ms(a) == _ms(b) for a, b in zip(first, last, strict=True)):
        stay = ", ".join(f"{c} {_ms(first[i])}" for i, c in enumerate(ids))
        out = [f"{raising} changes nothing here: every client's mean finish time stays the same ({stay}). VTC "
               f"reorders requests only while clients wait for each other, and here the order did not change."]
    elif comparable:
        moves = "; ".join(f"{c}'s mean finish time goes from {_ms(first[i])} to {_ms(last[i])}"
                          for i, c in enumerate(ids))
        # The lesson's point holds when the client that waits longer is the one with the most output per token.
        rose = max(range(len(ids)), key=lambda i: last[i] - first[i])
        shares = fairness_metrics.output_token_share(runs[0].trace) if runs else {}
        holds = last[rose] > first[rose] and shares and max(shares, key=shares.get) == ids[rose]
        out = [f"{raising} moves the waiting between clients: {moves}."
               + (" Whoever consumes the expensive kind of token counts as served sooner and waits longer."
                  if holds else "")]
    vtc = next((r for r in runs if r.config.policy in _VTC_LIKE), None)
    if vtc is not None and len(vtc.clients) >= 2:
        cost = fairness_metrics.mean_request_charge(vtc.trace)
        cfg = vtc.config
        out.append(f"Mean charge per request at your weights (in {cfg.input_weight:g} : out {cfg.output_weight:g}): "
                   + ", ".join(f"{safe_id(c)} {v:,.0f} weighted tokens" for c, v in cost.items()) + ".")
    return out
