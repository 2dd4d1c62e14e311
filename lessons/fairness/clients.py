"""The Fairness lesson's clients, for a generated workload: how many, and each one's share of the arrivals, its
pattern (start, stop, bursts), its lengths and its VTC weight, as knobs (a panel per client, or one table past
``MAX_CLIENT_PANELS``) and back into the workload and the config (``ui/clients.py`` lays them out)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from sim.config import EngineConfig
from sim.scenario import Scenario
from sim.workload import ClientSpec, WorkloadSpec, client_rates
from ui.controls import Knob
from ui.wording import safe_id

CLIENT_IDS = ("A", "B", "C", "D")
MAX_CLIENTS = len(CLIENT_IDS)
MAX_CLIENT_PANELS = 8  # past this many clients, one table of their settings instead of a panel of sliders each


def as_shares(workload: WorkloadSpec) -> WorkloadSpec:
    """The same arrivals with every client given as a share of one total rate (what the page's sliders show).
    Workloads whose clients already use shares come back unchanged. (Rates per second, on the clock, stay so.)"""
    own = "rate_per_s" if workload.on_clock else "rate_per_step"
    if all(getattr(c, own) is None for c in workload.clients):
        return workload
    rates = client_rates(workload)
    total = float(rates.sum())
    clients = tuple(dataclasses.replace(c, share=float(r / total), **{own: None})
                    for c, r in zip(workload.clients, rates, strict=True))
    return workload.replace(clients=clients, **{own: total})


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
