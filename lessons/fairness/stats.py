"""The Fairness lesson's numbers of a run: the fairness statistics the notices and tables read (``fairness_stats``,
once per run through the page's cache: ``Run``, ``run_maker``), the light client, the sweeps (a rate limit's, the
output weight's) and the metrics tables. The statistics themselves are the simulator's (``sim.fairness_metrics``,
``sim.metrics``); this module picks which clients and windows the page shows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lessons.run import Run as LessonRun
from sim import fairness_metrics, metrics
from sim.config import EngineConfig, Policy
from sim.presets import Preset
from sim.scenario import Scenario
from sim.trace import Trace

FAIRNESS_WINDOW_STEPS = 100  # windows of sim.fairness_metrics.fair_share_index
LIGHT_SHARE = 0.2  # a client sending less than this share of the requests is "the light client" of a run
VTC_LIKE = (Policy.VTC, Policy.LCF)
MeasureFn = Callable[..., Any]  # (scenario, fn, *args) -> fn(trace of scenario, *args), cached


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


def light_client(run: Run) -> int | None:
    """Index of the client sending the fewest requests, if it sends under LIGHT_SHARE of them."""
    counts = np.array([c["num_requests"] for c in run.clients])
    if len(counts) < 2 or not counts.sum():
        return None
    c = int(np.argmin(counts[::-1]))  # the last of equals: "B" rather than "A"
    c = len(counts) - 1 - c
    return c if counts[c] < LIGHT_SHARE * counts.sum() else None


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
