"""The Queueing lesson's logic: its knobs, the policy variants it compares, and the "what to notice" sentences
computed from the runs. No Streamlit calls here, so it is testable on its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from lessons.run import Run
from sim import metrics
from sim.config import EngineConfig, field_help
from sim.events import EventKind
from sim.presets import Preset
from sim.request import NO_STEP
from sim.scenario import Scenario
from sim.trace import Trace
from ui.controls import Knob
from ui.glossary import term_link
from ui.theme import POLICY_COLORS
from ui.wording import Card, count, join_and, pct_change, safe_id

LESSON = "queueing"
QUESTION = (  # (a glossary term linked at its first use)
    f"When more requests arrive than the {term_link('max_num_seqs', 'batch')} has room for, some must "
    f"{term_link('queueing delay', 'wait')}, and the order they wait in decides everyone's latency. Which order does "
    f"a server use, and what does a long request {term_link('head-of-line blocking', 'at the head of the line')} "
    "cost the short ones behind it?"
)


def _policies(preset: Preset) -> set[str]:
    base = preset.scenario.config.policy.value
    return {str(overrides.get("policy", base)) for _, overrides in preset.variants}


def knobs(preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
    """The lesson's own knobs; the prediction and starvation knobs only where a variant uses them. Defaults come
    from ``base``'s config (the preset's, or an uploaded scenario's)."""
    c = base.config
    policies = _policies(preset)
    chosen = [
        Knob("policies", "Policies to compare", "multi", [label for label, _ in preset.variants],
             options=tuple(label for label, _ in preset.variants), widget="multiselect",
             help="Each runs on the same requests."),
    ]
    optional = [
        Knob("sigma", "Length-prediction error (lognormal sigma)", "float", c.prediction_error_sigma, min=0.0,
             max=2.5, step=0.05, help=field_help(EngineConfig, "prediction_error_sigma")
             + "; predicted SJF only. 0 = perfect predictions."),
        Knob("guard", "Starvation guard threshold (steps, 0 = off)", "int", c.starvation_threshold_steps, min=0,
             max=2000, step=10, help=field_help(EngineConfig, "starvation_threshold_steps") + "; SJF orders only."),
        Knob("quantum", "Promotion lasts (steps of running)", "int", c.priority_quantum_steps, min=1, max=2000,
             step=10, help=field_help(EngineConfig, "priority_quantum_steps")),
    ]
    wanted = {"sigma": "sjf_predicted" in policies, "guard": bool(policies & {"sjf", "sjf_predicted"}),
              "quantum": bool(policies & {"sjf", "sjf_predicted"})}
    unit = Knob("unit", "Time axis", "choice", "steps", options=("steps", "ms"),
                labels={"steps": "engine steps", "ms": "milliseconds"}, widget="segmented")
    return chosen + [k for k in optional if wanted[k.key]] + [unit]


def apply(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The config with the prediction error, the starvation guard and the promotion's length, where shown."""
    changes = {"sigma": ("prediction_error_sigma", float), "guard": ("starvation_threshold_steps", int),
               "quantum": ("priority_quantum_steps", int)}
    return config.replace(**{field: cast(values[k]) for k, (field, cast) in changes.items() if k in values})


def variants(preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
    """The policy variants of the preset chosen in ``values["policies"]``, each ``scenario`` with its overrides."""
    return [(label, scenario.with_config(**overrides)) for label, overrides in preset.variants
            if label in values["policies"]]


class LongestWait(NamedTuple):
    """Who waited longest in the queue before its first step, and who ran meanwhile."""

    waiter: str  # request id
    wait_steps: int  # arrival to first scheduled step
    blockers: list[tuple[str, int]]  # requests that held a batch slot for most of that wait: (id, steps), longest first
    num_ran: int  # requests that ran at some point during the wait
    longest_share: float  # the largest fraction of the wait that any one of them ran
    longest_runner: str = ""  # the request that ran that fraction
    num_slots: int = 1  # max_num_seqs


def longest_wait(trace: Trace) -> LongestWait | None:
    """The longest-waiting request and what held the batch meanwhile (None when nobody waited). Head-of-line
    blockers are requests that each held a slot for more than half of the wait and together pin most of the
    batch slots: one long answer in the only slot (the article's example), or the few long answers that fill
    most slots. Otherwise ``blockers`` is empty: under SJF a long request waits behind a stream of short ones,
    and on a busy server two long answers among 16 slots are not what keeps the queue waiting."""
    r = trace.requests
    started = r["first_scheduled_step"] >= 0
    wait = np.where(started, r["first_scheduled_step"] - r["arrival_step"], -1)
    if not started.any() or wait.max() <= 0:
        return None
    w = int(np.argmax(wait))
    a, b = int(r["arrival_step"][w]), int(r["first_scheduled_step"][w])
    steps, rows, _, _ = trace.schedule_entries()
    during = (steps >= a) & (steps < b)
    if not during.any():
        return None
    counts = np.bincount(rows[during], minlength=trace.num_requests)  # [requests] steps run during the wait
    order = np.argsort(-counts, kind="stable")
    blockers = [(trace.request_ids[i], int(counts[i])) for i in order.tolist() if 2 * counts[i] > b - a]
    if 2 * len(blockers) <= trace.config.max_num_seqs:  # they leave most slots to others
        blockers = []
    return LongestWait(trace.request_ids[w], b - a, blockers, int(np.count_nonzero(counts)),
                       float(counts[order[0]]) / (b - a), trace.request_ids[int(order[0])],
                       trace.config.max_num_seqs)


def _wait_sentence(label: str, lw: LongestWait) -> str:
    """Head-of-line blocking when somebody held a slot for most of the longest wait; otherwise a stream."""
    waiter = safe_id(lw.waiter)  # (ids come from files: shown as typed, never as Markdown)
    if len(lw.blockers) == 1:
        who, steps = lw.blockers[0]
        return (f"Head-of-line blocking under {label}: {waiter} waited {lw.wait_steps:,} engine steps in the "
                f"queue, mostly behind {safe_id(who)}, which ran for {steps:,} of them.")
    if lw.blockers:
        names = [safe_id(who) for who, _ in lw.blockers]
        shown = join_and(names if len(names) <= 4 else [*names[:3], f"{len(names) - 3} more"])
        return (f"Head-of-line blocking under {label}: {waiter} waited {lw.wait_steps:,} engine steps in the "
                f"queue while {shown} each held a batch slot for most of that time.")
    head = (f"Under {label}, {waiter} waited {lw.wait_steps:,} engine steps in the queue while {lw.num_ran:,} "
            f"other requests ran")
    if lw.longest_share > 0.5:  # one long request held a slot, but the other slots served others ahead of it
        held = "all" if lw.longest_share >= 0.995 else f"{lw.longest_share:.0%}"
        runner = safe_id(lw.longest_runner)
        return (f"{head}: {runner} held one of the {lw.num_slots:,} batch slots for {held} of that time, "
                f"and the other slots served a stream of others ahead of it.")
    return (f"{head}, none for more than {lw.longest_share:.0%} of that time: no single blocker, a stream of others "
            f"served ahead of it.")


def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Sentences about these runs: the policies' mean finish times, who pays for a better average, HOL blocking.
    Times in ``unit`` ("steps" or "ms")."""
    if not runs:
        return []
    out = []
    key = f"finish_{unit}"
    means = {run.label: run.summary[key]["mean"] for run in runs}
    first = runs[0]
    for run in runs[1:]:
        a, b = means[first.label], means[run.label]
        if np.isfinite(a) and np.isfinite(b) and a > 0 and f"{a:,.0f}" == f"{b:,.0f}":
            out.append(f"{run.label} gave the same average finish time as {first.label} on this workload: "
                       f"{a:,.0f} {unit}.")
        elif np.isfinite(a) and np.isfinite(b) and a > 0:
            change = "cut" if b < a else "raised"
            out.append(f"{run.label} {change} the average finish time from {a:,.0f} to {b:,.0f} {unit} "
                       f"({pct_change(a, b)}) compared with {first.label}.")
        if means[run.label] < means[first.label]:
            out.extend(_price_sentence(first, run, unit))
    lw = longest_wait(first.trace)
    if lw:
        out.append(_wait_sentence(first.label, lw))
    out.extend(_priority_notice(runs))
    # Most important first (the page shows three): a starved request, when there is one, is the runs' point.
    return [*_starvation_notice(runs, unit), *out]


def _starvation_notice(runs: Sequence[Run], unit: str) -> list[str]:
    """With and without the guard: the longest request's wait (in steps, as the guard counts it), and everyone's
    average finish time (in ``unit``, as the metrics above show it)."""
    guarded = [r for r in runs if r.scenario.config.starvation_threshold_steps > 0
               and r.scenario.config.policy.value in ("sjf", "sjf_predicted")]
    plain = [r for r in runs if r.scenario.config.starvation_threshold_steps == 0
             and r.scenario.config.policy.value in ("sjf", "sjf_predicted")]
    if not guarded or not plain:
        return []
    g, p = guarded[0], plain[0]
    r = p.trace.requests
    longest = int(np.argmax(r["target_len"]))
    wait = lambda run: int(run.trace.requests["first_scheduled_step"][longest] - r["arrival_step"][longest])  # noqa: E731
    # (a longest request turned away on arrival, too large for the pool, never waited: nothing to say of its wait)
    ran = all(run.trace.requests["first_scheduled_step"][longest] != NO_STEP for run in (p, g))
    threshold = g.scenario.config.starvation_threshold_steps
    name = safe_id(p.trace.request_ids[longest])
    key = f"finish_{unit}"
    before, after = p.summary[key]["mean"], g.summary[key]["mean"]
    out = []
    if ran and wait(p) < threshold:  # it never waited long enough to starve, or to be promoted
        return [f"The longest request ({name}) waited {wait(p):,} steps under {p.label}, less than the guard's "
                f"{threshold:,}-step threshold: nothing starves on this workload, so the guard has nothing to "
                f"do for it."]
    if ran:
        out = [f"The longest request ({name}) waited {wait(p):,} steps under {p.label} and {wait(g):,} under "
               f"{g.label} (promoted after {threshold:,} steps); everyone's average finish went from "
               f"{before:,.0f} to {after:,.0f} {unit}."]
    # Under overload most requests wait past the threshold: the guard then promotes nearly everyone, in the order
    # they started waiting, which is FCFS's order; say so when it gave back most of SJF's gain.
    promoted = len({e.row for e in g.trace.events if e.kind is EventKind.PROMOTE})
    fcfs = next((run for run in runs if run.scenario.config.policy.value == "fcfs"), None)
    n = len(r["arrival_step"])
    if ran and promoted >= n / 2 and fcfs is not None and after > before:  # (it says the guard saved the longest)
        f = fcfs.summary[key]["mean"]
        if f > before and (after - before) >= 0.5 * (f - before):
            who = "almost every one waits" if promoted >= 0.9 * n else "most of them wait"
            out.append(f"The guard promoted {promoted:,} of the {n:,} requests: with this many requests waiting, "
                       f"{who} past the {threshold:,}-step threshold, and promotions go in the order "
                       f"requests started waiting, which is FCFS's order. So {g.label} averages {after:,.0f} {unit}, "
                       f"close to {fcfs.label}'s {f:,.0f}: the guard saved {name} at the price of "
                       f"{(after - before) / (f - before):.0%} of SJF's gain. A lighter load, or a longer threshold, "
                       f"keeps more of it.")
    return out


class Price(NamedTuple):
    """Who pays for a run's better average: a request, and its finish time under the run and under the first."""

    row: int
    now: float  # in the unit asked for
    before: float


def price_payer(first: Run, run: Run, unit: str) -> Price | None:
    """The request that pays for ``run``'s better average than ``first``'s: ``run``'s slowest request, when it
    finishes later than that same request under ``first`` (the same workload, so the same rows); None if ``run``
    is no better on average, or its slowest request did not get slower."""
    key = f"finish_{unit}"
    if not run.summary[key]["mean"] < first.summary[key]["mean"]:
        return None
    mine = metrics.request_latencies(run.trace)[key]
    theirs = metrics.request_latencies(first.trace)[key]
    if not np.isfinite(mine).any():
        return None
    row = int(np.nanargmax(mine))
    now, before = float(mine[row]), float(theirs[row])
    return Price(row, now, before) if np.isfinite(before) and f"{now:,.0f}" != f"{before:,.0f}" and now > before \
        else None


def _price_sentence(first: Run, run: Run, unit: str) -> list[str]:
    """Who pays for ``run``'s better average (``price_payer``), and whether the last request still finishes when
    it did."""
    key = f"finish_{unit}"
    last_a, last_b = first.summary[key]["max"], run.summary[key]["max"]
    same_end = f"{last_a:,.0f}" == f"{last_b:,.0f}"
    reorder = f"the last request finishes after {last_b:,.0f} {unit} either way: {run.label} only reorders who waits"
    price = price_payer(first, run, unit)
    if price is not None:
        payer = safe_id(run.trace.request_ids[price.row])
        return [f"The price of {run.label}'s better average: {payer} now finishes last, "
                f"after {price.now:,.0f} {unit} against {price.before:,.0f} under {first.label}"
                + (f"; {reorder}." if same_end else ".")]
    return [f"Under {run.label} {reorder}."] if same_end else []


def _priority_notice(runs: Sequence[Run]) -> list[str]:
    """For the priority policy: high-priority requests that still waited because every slot was busy."""
    out = []
    for run in runs:
        if run.scenario.config.policy.value != "priority":
            continue
        r = run.trace.requests
        top = r["priority"] == r["priority"].min()
        waited = top & (r["first_scheduled_step"] > r["arrival_step"])
        if waited.any() and len(np.unique(r["priority"])) > 1:
            longest = int((r["first_scheduled_step"] - r["arrival_step"])[waited].max())
            out.append(f"Under priority, {int(waited.sum())} of {int(top.sum())} top-priority requests still "
                       f"waited (up to {longest:,} steps): a new arrival never displaces a running request; "
                       f"it only goes to the head of the queue.")
    return out


def sigma_sweep_runs(base: Scenario, sigmas: tuple[float, ...]) -> list[Scenario]:
    """The runs sigma_sweep makes: SJF, FCFS, then predicted SJF at each of ``sigmas``."""
    return [base.with_config(policy="sjf"), base.with_config(policy="fcfs"),
            *(base.with_config(policy="sjf_predicted", prediction_error_sigma=float(s)) for s in sigmas)]


def sigma_notice(sweep: dict[str, Any] | None) -> list[str]:
    """How far predicted SJF slides from SJF toward FCFS as the prediction error grows (a complete sigma_sweep)."""
    if not sweep or sweep["sjf"] is None or sweep["fcfs"] is None or len(sweep["sigma"]) < 2:
        return []
    sjf, fcfs = sweep["sjf"], sweep["fcfs"]
    points = [(s, v) for s, v in zip(sweep["sigma"], sweep["predicted"], strict=True) if s > 0 and np.isfinite(v)]
    if not points or not (np.isfinite(sjf) and np.isfinite(fcfs)):
        return []
    if abs(fcfs - sjf) < 0.01 * max(fcfs, sjf):
        return [f"Here SJF and FCFS average within 1% of each other ({sjf:,.0f} and {fcfs:,.0f} steps): with little "
                f"queueing, the order matters little, and so does how well lengths are predicted."]
    if fcfs < sjf:  # (a workload where shortest-first does not pay: no slide toward FCFS to describe)
        return []

    def at(sigma: float, value: float) -> str:
        return f"{value:,.0f} steps at sigma {sigma:g}, {(value - sjf) / (fcfs - sjf):.0%} of the way"

    (low, low_v), (high, high_v) = points[0], points[-1]
    keeps = " Even a rough guess of the length keeps most of the gain." if (high_v - sjf) / (fcfs - sjf) < 0.5 else ""
    return [f"Predicted SJF slides from SJF's {sjf:,.0f} steps toward FCFS's {fcfs:,.0f} as predictions get worse: "
            f"{at(low, low_v)} (two predictions in three within x{np.exp(low):.1f} of the true length), "
            f"{at(high, high_v)} (within x{np.exp(high):.1f}).{keeps}"]


def mean_finish_steps(trace: Trace) -> float:
    """A sweep point: the run's mean finish time (steps)."""
    return metrics.summary(trace)["finish_steps"]["mean"]


# The sweep's lines in the colours the page's other charts give these policies.
SIGMA_SWEEP_COLORS = {"SJF on predicted lengths": POLICY_COLORS["sjf_predicted"],
                      "SJF, true lengths": POLICY_COLORS["sjf"], "FCFS": POLICY_COLORS["fcfs"]}


def sigma_sweep(base: Scenario, sigmas: tuple[float, ...], measure_fn: Any) -> dict[str, Any]:
    """Mean finish time (steps) of predicted SJF at each prediction error, plus the SJF and FCFS references.
    ``measure_fn(scenario, fn)``: runner.measure, or a ui.sweeps pass's, which gives None for a run not made yet:
    such a sigma is left out of ``sigma`` / ``predicted`` (``sigma_all`` keeps every one), a reference is None."""
    sjf, fcfs, *predicted = [measure_fn(sc, mean_finish_steps) for sc in sigma_sweep_runs(base, sigmas)]
    shown = [(float(s), v) for s, v in zip(sigmas, predicted, strict=True) if v is not None]
    return {"sigma": [s for s, _ in shown], "predicted": [v for _, v in shown],
            "sigma_all": [float(s) for s in sigmas], "sjf": sjf, "fcfs": fcfs}


def headline(run: Run, unit: str) -> Card:
    """A policy's headline number: its average finish time, with p99 (from 20 requests up: below that a p99 is
    only an interpolation between the two slowest), max and preemptions under it."""
    s = run.summary
    key = "finish_steps" if unit == "steps" else "finish_ms"
    finished = s[key]["count"] > 0
    p99 = f"p99 {s[key]['p99']:,.0f} · " if s[key]["count"] >= 20 else ""
    spread = f"{p99}max {s[key]['max']:,.0f} {unit} · " if finished else ""
    return Card(f"{run.label}: average finish", f"{s[key]['mean']:,.0f} {unit}" if finished else "none finished",
                f"{spread}{count(s['num_preemptions'], 'preemption')}",
                "Arrival to the end of the last token, averaged over the requests that finished.")
