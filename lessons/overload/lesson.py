"""The Overload lesson's logic: its knobs (the traffic's offered load, the admission caps at the door, the SLO
targets), the admission settings it compares, the load sweep (throughput and goodput against offered load, one line
per setting), the headline cards and the "what to notice" sentences. No Streamlit calls here.

Goodput is DistServe's, as ``sim.metrics.slo_summary`` counts it: the requests that met both targets (TTFT, and the
largest gap between two of their tokens) per second of the run, beside the throughput of every request served.
Both are per second of the whole run, the drain after the last arrival included, as vLLM's benchmark measures them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from lessons.run import Run
from sim import metrics
from sim.config import EngineConfig, field_help
from sim.events import RejectReason
from sim.presets import NO_ADMISSION, Preset, overload_traffic
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import WorkloadSpec
from ui import knobs as shared_knobs
from ui.controls import Knob
from ui.glossary import term_link
from ui.wording import Card, count, join_and

LESSON = "overload"
QUESTION = (  # (a glossary term linked at its first use)
    f"A server has a capacity. Past it, requests arrive faster than they finish, and the waiting queue grows for "
    f"as long as the {term_link('offered load', 'load')} lasts. The server stays busy, so its throughput holds; "
    f"but users count {term_link('goodput')}, the requests that meet their {term_link('SLO', 'latency targets')}. "
    f"Where is the knee, and does {term_link('admission control', 'refusing some requests at the door')} save the "
    f"rest?"
)
REQUEST_CAP, TOKEN_CAP = "max_num_queued_reqs", "max_num_queued_tokens"
CAP_LABELS = {REQUEST_CAP: "request cap", TOKEN_CAP: "token cap"}  # a capped setting's label, before its value
DEFAULT_DURATION_S = 20
WARM_UP = 0.25  # the first part of the traffic's time a sweep point leaves out (``while_offered``)
SWEEP_MAX_DURATION_S = 10  # a sweep point's traffic lasts at most this long (the knee shows; a sweep stays quick)


# ---- traffic ----------------------------------------------------------------------------------------------------
def load_of(preset: Preset) -> tuple[float, float] | None:
    """The preset's (offered load in requests/s, duration in s), None when its traffic is not one steady load."""
    if "load_rps" not in preset.knobs:
        return None
    return float(preset.knobs["load_rps"]), float(preset.knobs.get("duration_s", DEFAULT_DURATION_S))


def traffic_knobs(preset: Preset, workload: WorkloadSpec) -> list[Knob]:
    """The Traffic panel: the offered load and how long it lasts (a preset with one steady load), the lengths and
    the seed."""
    out = []
    load = load_of(preset)
    if load is not None:
        out += [
            Knob("load_rps", "Offered load (requests/s)", "int", int(load[0]), min=1, max=150, step=1,
                 help="Requests a second the clients send (Poisson arrivals), whether or not the server keeps up"),
            Knob("duration_s", "Traffic lasts (s)", "int", int(load[1]), min=5, max=60, step=5,
                 help="How long the clients send: the offered load times this is the number of requests"),
        ]
    out += [
        Knob("prompt_median", "Prompt length, median (tokens)", "int", workload.prompt_median, min=8, max=4000,
             step=8),
        Knob("output_median", "Answer length, median (tokens)", "int", workload.output_median, min=4, max=600,
             step=4),
        Knob("seed", "Random seed", "int", workload.seed, min=0, max=10_000, step=1, widget="number",
             help="Same seed, same workload"),
    ]
    return out


def apply_traffic(workload: WorkloadSpec, values: dict[str, Any]) -> WorkloadSpec:
    """The Traffic panel's values onto ``workload`` (its clients and their shares kept)."""
    lengths = {"prompt_median": int(values["prompt_median"]), "output_median": int(values["output_median"]),
               "seed": int(values["seed"])}
    if "load_rps" not in values:
        return workload.replace(**lengths)
    return at_load(workload, float(values["load_rps"]), float(values["duration_s"])).replace(**lengths)


def at_load(workload: WorkloadSpec, load_rps: float, duration_s: float) -> WorkloadSpec:
    """``workload`` at ``load_rps`` requests/s for ``duration_s`` s (its clients, lengths and seed kept)."""
    traffic = overload_traffic(load_rps, duration_s)  # (on the clock: a workload clocked by steps moves onto it,
    # or the generator says which of its settings has no per-second form)
    return workload.replace(num_requests=traffic.num_requests, rate_per_step=None, rate_per_s=traffic.rate_per_s)


# ---- admission settings and targets ----------------------------------------------------------------------------
def _cap_default(preset: Preset, key: str) -> int | None:
    return next((int(over[key]) for _, over in preset.variants if over.get(key) is not None), None)


def knobs(preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
    """The Admission panel: each cap a compared setting uses (its value), and the two SLO targets."""
    cfg = base.config
    out = []
    request_cap = _cap_default(preset, REQUEST_CAP)
    if request_cap is not None:
        out.append(Knob("request_cap", "Request cap, max_num_queued_reqs (requests)", "int", request_cap, min=1,
                        max=max(512, request_cap), step=1,
                        help=field_help(EngineConfig, REQUEST_CAP) + ". The runs labelled 'request cap' use it."))
    token_cap = _cap_default(preset, TOKEN_CAP)
    if token_cap is not None:
        out.append(Knob("token_cap", "Token cap, max_num_queued_tokens (tokens)", "int", token_cap, min=500,
                        max=max(64_000, token_cap), step=500,
                        help=field_help(EngineConfig, TOKEN_CAP) + ". The runs labelled 'token cap' use it."))
    out += [
        Knob("ttft_slo_ms", "TTFT target (ms)", "int", int(cfg.ttft_slo_ms or 1000), min=100, max=10_000, step=100,
             help="A request meets it when its first token comes within this long of its arrival"),
        Knob("tbt_slo_ms", "Target for every gap between tokens (ms)", "int", int(cfg.tbt_slo_ms or 100), min=10,
             max=1000, step=10, help="A request meets it when no two of its tokens are further apart than this"),
    ]
    return out


def apply(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The SLO targets every run shares (the caps are each setting's own: ``variants``)."""
    return config.replace(ttft_slo_ms=float(values["ttft_slo_ms"]), tbt_slo_ms=float(values["tbt_slo_ms"]))


def setting_label(label: str, overrides: dict[str, Any]) -> str:
    """A compared setting's label with its cap's value: "request cap 48", "token cap 8,000"."""
    for key, name in CAP_LABELS.items():
        if label == name and overrides.get(key) is not None:
            return f"{name} {int(overrides[key]):,}"
    return label


def settings(preset: Preset, values: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The admission settings compared, (label, config overrides): the preset's, each cap set to its knob's value
    (only where that setting has the cap: "no admission control" never gets one)."""
    caps = {REQUEST_CAP: values.get("request_cap"), TOKEN_CAP: values.get("token_cap")}
    out = []
    for label, overrides in preset.variants:
        over = {**NO_ADMISSION, **overrides}
        for key, value in caps.items():
            if over.get(key) is not None and value is not None:
                over[key] = int(value)
        out.append((setting_label(label, over), over))
    return out


def variants(preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
    return [(label, scenario.with_config(**over)) for label, over in settings(preset, values)]


# ---- figures of a run ------------------------------------------------------------------------------------------
class Outcome(NamedTuple):
    """What one run did with its traffic."""

    num_requests: int
    num_met: int  # met both targets
    num_served: int
    num_refused: int  # at the door (vLLM's caps)
    num_shed: int
    goodput_req_s: float
    throughput_req_s: float
    ttft_p99_ms: float  # of the served requests with targets (all of them when every request has targets)
    mixed: bool  # some requests have no targets (batch traffic): they count in goodput once served


def traffic_span_ms(trace: Trace) -> tuple[float, float] | None:
    """When the traffic lasted: the clock at the start of the first arrival's step and of the last one's (ms);
    None with fewer than two requests or all of them in one step."""
    arrival = trace.requests["arrival_step"]
    if len(arrival) < 2:
        return None
    start = trace.steps["time_ms"] - trace.steps["step_ms"]  # the clock at each step's start
    lo, hi = float(start[arrival.min()]), float(start[arrival.max()])
    return (lo, hi) if hi > lo else None


def offered_req_s(trace: Trace) -> float:
    """Requests per second the clients sent: arrivals over the time the traffic lasted (``traffic_span_ms``)."""
    span = traffic_span_ms(trace)
    return (trace.num_requests - 1) / ((span[1] - span[0]) / 1000.0) if span else float("nan")


def _num_refused(summary: dict[str, Any]) -> int:
    by = summary["rejected_by_reason"]
    return sum(n for reason, n in by.items()
               if reason in (RejectReason.MAX_NUM_QUEUED_REQS, RejectReason.MAX_NUM_QUEUED_TOKENS))


def outcome(trace: Trace, summary: dict[str, Any] | None = None) -> Outcome:
    s = metrics.summary(trace) if summary is None else summary
    mixed = trace.slo is not None and not trace.slo.all()
    ttft_p99 = s["ttft_ms"]["p99"]
    if mixed:
        ttft = metrics.request_latencies(trace)["ttft_ms"][metrics.served_mask(trace) & trace.slo]
        ttft_p99 = float(np.percentile(ttft, 99)) if len(ttft) else float("nan")
    return Outcome(s["num_requests"], s["num_slo_met"], s["num_served"], _num_refused(s), s.get("num_shed", 0),
                   s["slo_goodput_req_s"], s["throughput_req_s"], ttft_p99, mixed)


def _of(run: Run) -> Outcome:
    return outcome(run.trace, run.summary)


def _ms(value: float) -> str:
    return f"{value / 1000:,.1f} s" if value >= 1000 else f"{value:,.0f} ms"


def headline(run: Run, unit: str) -> Card:
    """Goodput as the figure; what met the targets, the throughput and who was turned away under it."""
    o, cfg = _of(run), run.scenario.config
    turned = []
    if o.num_refused:
        turned.append(f"{o.num_refused:,} refused at the door")
    if o.num_shed:
        turned.append(f"{o.num_shed:,} shed")
    met = (f"{o.num_met:,} of {o.num_requests:,} requests met their targets or had none" if o.mixed else
           f"{o.num_met:,} of {o.num_requests:,} requests met both targets")
    return Card(f"{run.label}: goodput", f"{o.goodput_req_s:,.1f} requests/s",
                f"{met} · throughput {o.throughput_req_s:,.1f} requests/s"
                + (f" · {join_and(turned)}" if turned else "")
                + f" · p99 TTFT{' with targets' if o.mixed else ''} {_ms(o.ttft_p99_ms)}",
                f"Goodput: requests that got their first token within {_ms(cfg.ttft_slo_ms)} and no gap between "
                f"tokens over {_ms(cfg.tbt_slo_ms)}, per second of the run"
                + (" (a request without targets, batch, counts once served)" if o.mixed else "")
                + ". Throughput: every request served, per second.")


# ---- notices ----------------------------------------------------------------------------------------------------
def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Per run, goodput against throughput and where the others went; then the settings compared."""
    outcomes = [_of(run) for run in runs]  # (once: each sentence below reads them)
    out = []
    for run, o in zip(runs, outcomes, strict=True):
        out += _run_sentences(run, o)
    out += _comparison(runs, outcomes)
    out += _classes(runs)
    out += _cap_below_slots(runs, outcomes)
    return out


def _cap_below_slots(runs: Sequence[Run], outcomes: Sequence[Outcome]) -> list[str]:
    """A request cap under max_num_seqs keeps batch slots empty: the cap, not the GPU, then sets the throughput."""
    out = []
    for run, o in zip(runs, outcomes, strict=True):
        cfg = run.scenario.config
        cap = cfg.max_num_queued_reqs
        if cap is not None and cap < cfg.max_num_seqs:
            peak = int(run.trace.steps["num_running"].max()) if run.trace.num_steps else 0
            out.append(f"{run.label} is below max_num_seqs ({cfg.max_num_seqs}): at most {cap} requests are in the "
                       f"server at once (the most running in a step: {peak}), so batch slots stay empty and "
                       f"throughput falls to {o.throughput_req_s:,.1f} requests/s.")
    return out


def _run_sentences(run: Run, o: Outcome) -> list[str]:
    cfg = run.scenario.config
    if not o.num_requests or not np.isfinite(o.throughput_req_s):
        return []
    late = o.num_served - o.num_met
    if o.num_met == o.num_requests:
        who = ("every request with targets met them and every batch request was served" if o.mixed else
               f"every one of the {o.num_requests:,} requests met both targets")
        return [f"{run.label}: {who}; goodput equals throughput, {o.goodput_req_s:,.1f} requests/s."]
    parts = []
    if late:
        parts.append(f"{count(late, 'request')} served too late (a first token after {_ms(cfg.ttft_slo_ms)}, or "
                     f"a gap between tokens over {_ms(cfg.tbt_slo_ms)})")
    if o.num_refused:
        parts.append(f"{o.num_refused:,} refused at the door")
    if o.num_shed:
        parts.append(f"{o.num_shed:,} shed once their target had passed")
    others = o.num_requests - o.num_met - late - o.num_refused - o.num_shed
    if others > 0:
        parts.append(f"{count(others, 'request')} not served for another reason")
    met = "met their targets or had none" if o.mixed else "met both targets"
    return [f"{run.label}: {o.num_met:,} of {o.num_requests:,} requests {met}, so goodput is "
            f"{o.goodput_req_s:,.1f} requests/s while throughput is {o.throughput_req_s:,.1f}; the rest: "
            f"{join_and(parts)}."]


def _comparison(runs: Sequence[Run], by_run: Sequence[Outcome]) -> list[str]:
    if len(runs) < 2:
        return []
    outcomes = {run.label: o for run, o in zip(runs, by_run, strict=True)}
    best = max(outcomes, key=lambda label: outcomes[label].goodput_req_s)
    worst = min(outcomes, key=lambda label: outcomes[label].goodput_req_s)
    b, w = outcomes[best], outcomes[worst]
    if f"{b.goodput_req_s:.1f}" == f"{w.goodput_req_s:.1f}":
        return [f"Every setting gives the same goodput here ({b.goodput_req_s:,.1f} requests/s)."]
    whose = " of the requests with targets" if b.mixed else ""
    out = [f"{best} has the most goodput: {b.goodput_req_s:,.1f} requests/s against {w.goodput_req_s:,.1f} "
           f"under {worst}, with p99 TTFT{whose} {_ms(b.ttft_p99_ms)} against {_ms(w.ttft_p99_ms)}."]
    if b.num_refused > w.num_refused:
        more = (f", and still {b.num_met - w.num_met:,} more requests met their targets" if b.num_met > w.num_met
                else "")
        out.append(f"It refused {count(b.num_refused - w.num_refused, 'request')} more at the door{more}: a refused "
                   f"client can try another server at once, while a request let in too late only waits.")
    return out


class Classes(NamedTuple):
    """A run's two classes of traffic: requests with targets (interactive) and without (batch)."""

    num_met: int  # requests with targets that met them
    num_with_targets: int
    num_batch: int
    batch_finish_p50_ms: float  # the served batch requests' median time from arrival to last token (NaN: none)


def classes(trace: Trace) -> Classes | None:
    """The two classes' figures, None unless the run has both (a request's ``slo`` false is batch)."""
    if trace.slo is None or trace.slo.all() or not trace.slo.any():
        return None
    met = metrics.request_slo(trace)["slo_met"]
    batch = ~trace.slo
    finish = metrics.request_latencies(trace)["finish_ms"][metrics.served_mask(trace) & batch]
    return Classes(int(met[trace.slo].sum()), int(trace.slo.sum()), int(batch.sum()),
                   float(np.median(finish)) if len(finish) else float("nan"))


def _classes(runs: Sequence[Run]) -> list[str]:
    """With traffic without targets beside traffic with them: who kept the targets, and when batch finished."""
    out = []
    for run in runs:
        c = classes(run.trace)
        if c is None:
            continue
        finished = _ms(c.batch_finish_p50_ms) if np.isfinite(c.batch_finish_p50_ms) else "never"
        out.append(f"{run.label}: {c.num_met:,} of {c.num_with_targets:,} requests with targets met them; the "
                   f"{c.num_batch:,} without targets (batch) finished {finished} after arriving, at the median.")
    return out


# ---- the load sweep ---------------------------------------------------------------------------------------------
def sweep_duration(duration_s: float) -> float:
    """How long each sweep point's traffic lasts: the slider's, up to ``SWEEP_MAX_DURATION_S``."""
    return min(float(duration_s), SWEEP_MAX_DURATION_S)


def sweep_runs(preset: Preset, scenario: Scenario, values: dict[str, Any],
               loads: Sequence[float], duration_s: float) -> list[Scenario]:
    """Each setting compared at each offered load, in setting order (a sweep's progressive fill draws a whole line
    first)."""
    workload = scenario.workload
    if workload is None:
        return []
    out = []
    for _, over in settings(preset, values):
        for load in loads:
            spec = at_load(workload, float(load), duration_s)  # (one request list per load, cached: ui.knobs)
            out.append(shared_knobs.scenario_with(scenario, scenario.config.replace(**over), spec))
    return out


def while_offered(trace: Trace) -> tuple[float, float, float]:
    """(offered, throughput, goodput) in requests/s while the traffic lasted, a steady-state measure. The traffic
    lasts from the start of the first arrival's step to the start of the last one's; offered: the arrivals over it.
    Throughput and goodput: the requests served (and of those, the ones that met both targets) whose last token came
    in its last ``1 - WARM_UP`` part, per second of that part: the ramp-up (nobody has finished yet) and the drain
    after the last arrival are left out, so a server that keeps up serves what is offered, and one past its
    capacity serves its capacity."""
    span = traffic_span_ms(trace)
    if span is None:
        return float("nan"), float("nan"), float("nan")
    lo, hi = span
    counted_from = lo + WARM_UP * (hi - lo)
    seconds = (hi - counted_from) / 1000.0
    served = metrics.served_mask(trace)
    done_ms = np.full(trace.num_requests, np.inf)
    done_ms[served] = trace.steps["time_ms"][trace.requests["finish_step"][served]]  # the end of its last token's step
    inside = (done_ms >= counted_from) & (done_ms <= hi)
    met = metrics.request_slo(trace)["slo_met"]
    return offered_req_s(trace), int(inside.sum()) / seconds, int((inside & met).sum()) / seconds


def sweep_point(trace: Trace) -> tuple[float, float, float]:
    """A point of the load sweep: ``while_offered``'s (offered, throughput, goodput) requests/s."""
    return while_offered(trace)


def load_sweep(preset: Preset, scenario: Scenario, values: dict[str, Any], loads: Sequence[float],
               duration_s: float, measure: Callable[..., Any]) -> dict[str, list[tuple[float, float, float, float]]]:
    """Per setting label: (load asked, offered, throughput, goodput) of each point ready (``measure``: a sweep's,
    None for a point not run yet)."""
    labels = [label for label, _ in settings(preset, values)]
    runs = sweep_runs(preset, scenario, values, loads, duration_s)
    out: dict[str, list[tuple[float, float, float, float]]] = {label: [] for label in labels}
    for i, sc in enumerate(runs):
        point = measure(sc, sweep_point)
        if point is not None:
            out[labels[i // len(loads)]].append((float(loads[i % len(loads)]), *point))
    return out


def capacity(sweep: dict[str, list[tuple[float, float, float, float]]]) -> float:
    """The server's measured capacity: the most requests/s any point of the sweep served."""
    return max((p[2] for points in sweep.values() for p in points), default=float("nan"))


def knee(points: Sequence[tuple[float, float, float, float]]) -> tuple[float, float] | None:
    """Where a setting's goodput peaks: (offered requests/s, goodput requests/s) of its best point."""
    good = [p for p in points if np.isfinite(p[3])]
    if not good:
        return None
    best = max(good, key=lambda p: p[3])
    return best[1], best[3]


def sweep_notice(sweep: dict[str, list[tuple[float, float, float, float]]] | None) -> list[str]:
    """The curve in words (a complete sweep): the capacity, each setting's knee and its goodput at the top load."""
    if not sweep or not any(sweep.values()):
        return []
    cap = capacity(sweep)
    out = [f"The load sweep: while the traffic lasts, this server serves at most {cap:,.1f} requests/s, whatever "
           f"is offered."]
    for label, points in sweep.items():
        top = knee(points)
        if top is None or not points:
            continue
        last = points[-1]
        collapse = last[3] < 0.5 * top[1]
        out.append(f"{label}: goodput peaks at {top[1]:,.1f} requests/s (offered {top[0]:,.0f}) and is "
                   f"{last[3]:,.1f} at {last[1]:,.0f} offered"
                   + (f", while throughput holds at {last[2]:,.1f}: the knee." if collapse else "."))
    return out
