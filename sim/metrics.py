"""Summaries computed from a trace: latency statistics, throughput, waste, one row per client (fairness between
clients: sim/fairness_metrics.py; preemptions and KV per request: sim/preemption_metrics.py).

Conventions (steps are whole engine steps, ms come from the cost model):
- finish time = steps from the start of the arrival step to the end of the finish step: a request that arrives
  at step 0 and finishes at the end of step 999 took 1,000 steps;
- queueing delay = steps from arrival to the first step the request was scheduled;
- TTFT = steps from arrival to the end of the step that produced the first token;
- time between tokens (TBT, inter-token latency) = from the end of the step that produced one output token of a
  request to the end of the step that produced its next (1 step while it decodes every step; a stall, a long step
  or a preemption between two tokens shows as a larger gap).
Latency statistics cover *served* requests: finished (stop or length) with the client still there.

SLOs (the config's ``ttft_slo_ms`` and ``tbt_slo_ms``, 0 = no target; ``request_slo``): a request meets the TTFT
target when it is served with its TTFT at most the target, the TBT target when it is served with its largest time
between two tokens at most the target; goodput (DistServe's) counts the requests that meet both, per second of the
run, and their tokens read.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .events import FinishReason
from .request import NO_STEP, RequestStatus
from .trace import SCHED_DECODE, SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_WASTED, Trace

_SERVED = (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED)


def served_mask(trace: Trace) -> np.ndarray:
    """[requests] bool: finished normally and somebody was there to read the answer."""
    r = trace.requests
    return np.isin(r["status"], _SERVED) & (r["disconnect_step"] == NO_STEP)


def request_latencies(trace: Trace) -> dict[str, np.ndarray]:
    """Per-request latencies, NaN where the event never happened. Keys: finish/queue/ttft x steps/ms."""
    r = trace.requests
    arrival = r["arrival_step"]
    out: dict[str, np.ndarray] = {}
    for key, col, end_of_step in (("finish", "finish_step", True), ("queue", "first_scheduled_step", False),
                                  ("ttft", "first_token_step", True)):
        step = r[col]
        ok = step != NO_STEP
        steps = np.full(len(step), np.nan)
        ms = np.full(len(step), np.nan)
        steps[ok] = step[ok] - arrival[ok] + (1 if end_of_step else 0)
        end = trace.end_ms(step[ok]) if end_of_step else trace.start_ms(step[ok])
        ms[ok] = end - trace.start_ms(arrival[ok])
        out[f"{key}_steps"], out[f"{key}_ms"] = steps, ms
    done = np.isin(r["status"], _SERVED)
    out["finish_steps"][~done] = np.nan  # aborted and rejected requests did not finish
    out["finish_ms"][~done] = np.nan
    return out


def stats(values: np.ndarray) -> dict[str, float]:
    """mean / p50 / p99 / max of the finite values (NaN when there are none)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return {"count": 0, "mean": float("nan"), "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    p50, p99 = percentiles(v, (50, 99))
    return {"count": int(len(v)), "mean": float(v.mean()), "p50": p50, "p99": p99, "max": float(v.max())}


def percentiles(values: np.ndarray, percents: tuple[float, ...]) -> list[float]:
    """``np.percentile(values, percents).tolist()`` for finite 1-D ``values``: numpy's default ('linear') method
    step by step, so the same floats (a test compares). NOTE: not np.percentile itself, whose first call in a
    process imports numpy.ma (~7 ms, through np.unique): a command-line run makes exactly one first call."""
    n = len(values)
    virtual = (n - 1) * (np.asarray(percents) / 100)  # fractional positions in the sorted values
    previous, after = np.floor(virtual), np.floor(virtual) + 1
    at_end = virtual >= n - 1
    previous[at_end] = after[at_end] = -1  # (the last value; numpy's gamma then exceeds 1, which changes nothing)
    previous_i, after_i = previous.astype(np.intp), after.astype(np.intp)
    gamma = virtual - previous_i
    ordered = np.sort(values)
    a, b = ordered[previous_i], ordered[after_i]
    diff = b - a
    result = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=result, where=gamma >= 0.5)  # (numpy's lerp from the nearer end)
    return result.tolist()


class TokenGaps(NamedTuple):
    """Every gap between two consecutive output tokens of one request, grouped by request (rows ascending) and in
    step order within a request. Each is [gaps]."""

    rows: np.ndarray  # int64, the request
    steps: np.ndarray  # int64, engine steps between the two tokens' steps (>= 1)
    ms: np.ndarray  # float64, clock between the ends of those steps
    after: np.ndarray  # int64, the step of the later token


def token_gaps(trace: Trace) -> TokenGaps:
    """The gaps between consecutive tokens somebody reads (a completed prefill's token and each decode; tokens
    past the answer's end or for a client who left are not counted), from the trace's schedule."""
    steps, rows, _, kinds = trace.schedule_entries()
    emits = (kinds == SCHED_PREFILL_DONE) | (kinds == SCHED_DECODE)
    steps, rows = steps[emits], rows[emits]
    order = np.argsort(rows, kind="stable")  # entries are in step order, so each request's stay sorted
    steps, rows = steps[order], rows[order]
    same = rows[1:] == rows[:-1]  # [tokens - 1] the next token is the same request's
    before, after = steps[:-1][same], steps[1:][same]
    end = trace.steps["time_ms"]
    return TokenGaps(rows[1:][same], after - before, end[after] - end[before], after)


def request_tbt(trace: Trace, gaps: TokenGaps | None = None) -> dict[str, np.ndarray]:
    """Per request, [requests] float64: ``mean_steps``, ``max_steps``, ``mean_ms``, ``max_ms`` of its time between
    tokens; NaN for a request with fewer than two tokens read."""
    g = token_gaps(trace) if gaps is None else gaps
    n = trace.num_requests
    num = np.bincount(g.rows, minlength=n)
    has = num > 0
    # each request's gaps are one run of g.rows (ascending): its max is a reduceat over the run (np.maximum.at,
    # unbuffered, took ~5 ms for 45,000 gaps)
    firsts = np.flatnonzero(np.diff(g.rows, prepend=-1))  # [requests with a gap] where each one's gaps start
    out: dict[str, np.ndarray] = {}
    for unit, values in (("steps", g.steps), ("ms", g.ms)):
        mean = np.full(n, np.nan)
        mean[has] = np.bincount(g.rows, weights=values, minlength=n)[has] / num[has]
        peak = np.full(n, np.nan)
        if len(firsts):
            peak[g.rows[firsts]] = np.maximum.reduceat(values, firsts)
        out[f"mean_{unit}"], out[f"max_{unit}"] = mean, peak
    return out


def request_slo(trace: Trace, latencies: dict[str, np.ndarray] | None = None,
                gaps: TokenGaps | None = None) -> dict[str, np.ndarray]:
    """Per request, [requests] bool, against the config's SLO targets (``ttft_slo_ms``, ``tbt_slo_ms``):

    - ``slo``: the targets apply to it (its ``slo``; false for traffic without a latency target, batch);
    - ``ttft_slo_met``: served, with its TTFT in ms (``request_latencies``: from the start of its arrival step to the
      end of its first token's step) at most ``ttft_slo_ms``;
    - ``tbt_max_slo_met``: served, with its largest time between two tokens read in ms (``request_tbt``'s
      ``max_ms``; the max of its gaps, not a percentile) at most ``tbt_slo_ms``; with fewer than two tokens read it
      has no gap, and meets it;
    - ``slo_met``: both: what goodput counts.

    A target of 0, or a request the targets do not apply to, is met by being served. A request not served (rejected
    at arrival, shed, aborted, its client gone) meets none. ``latencies``, ``gaps``: already computed, if at hand."""
    cfg, n = trace.config, trace.num_requests
    served = served_mask(trace)
    applies = np.ones(n, dtype=bool) if trace.slo is None else trace.slo
    ttft_met, tbt_met = served.copy(), served.copy()
    if cfg.ttft_slo_ms:
        ttft = (request_latencies(trace) if latencies is None else latencies)["ttft_ms"]
        ttft_met &= ~applies | (ttft <= cfg.ttft_slo_ms)
    if cfg.tbt_slo_ms:
        largest = request_tbt(trace, gaps)["max_ms"]
        tbt_met &= ~applies | ~(largest > cfg.tbt_slo_ms)  # (NaN, no gap: not above the target)
    return {"slo": applies, "ttft_slo_met": ttft_met, "tbt_max_slo_met": tbt_met, "slo_met": ttft_met & tbt_met}


def slo_summary(trace: Trace, latencies: dict[str, np.ndarray] | None = None,
                gaps: TokenGaps | None = None) -> dict[str, Any]:
    """The run's SLO figures (``request_slo``): requests the targets apply to, how many met the TTFT target, the TBT
    target and both, each as a count and a share of all requests (those rejected or shed included), and goodput:
    the requests meeting both per second of the run (``slo_goodput_req_s``) and their tokens read per second
    (``slo_goodput_tok_s``), beside the served requests per second (``throughput_req_s``)."""
    r, n = trace.requests, trace.num_requests
    met = request_slo(trace, latencies, gaps)
    makespan_ms = float(trace.steps["time_ms"][-1]) if trace.num_steps else 0.0
    seconds = makespan_ms / 1000.0 if makespan_ms else float("nan")
    tokens_read = r["num_output_tokens"] - r["num_wasted_tokens"]
    counts = {key: int(met[key].sum()) for key in ("ttft_slo_met", "tbt_max_slo_met", "slo_met")}
    return {
        "num_slo_requests": int(met["slo"].sum()),
        "num_ttft_slo_met": counts["ttft_slo_met"],
        "num_tbt_max_slo_met": counts["tbt_max_slo_met"],
        "num_slo_met": counts["slo_met"],
        "ttft_slo_share": counts["ttft_slo_met"] / n,
        "tbt_max_slo_share": counts["tbt_max_slo_met"] / n,
        "slo_share": counts["slo_met"] / n,
        "throughput_req_s": int(served_mask(trace).sum()) / seconds,
        "slo_goodput_req_s": counts["slo_met"] / seconds,
        "slo_goodput_tok_s": int(tokens_read[met["slo_met"]].sum()) / seconds,
    }


def tbt_stats(trace: Trace, gaps: TokenGaps | None = None) -> dict[str, dict[str, float]]:
    """``tbt_steps`` and ``tbt_ms``: ``stats`` over every gap of the served requests (p50 and p99 of all gaps
    pooled, not of per-request means: one stall in eight streams is eight gaps)."""
    g = token_gaps(trace) if gaps is None else gaps
    mine = served_mask(trace)[g.rows]
    return {"tbt_steps": stats(g.steps[mine]), "tbt_ms": stats(g.ms[mine])}


def wasted_gpu_ms(trace: Trace) -> float:
    """GPU time spent on work nobody reads: each step's time shared out over the step's work as the cost model
    prices it (``prefill_token_us`` a prefill token, ``decode_request_us`` a decode), and the share done for
    nobody summed. For nobody: everything computed for a request whose client has left (a prefill too, when the
    server does not abort), and every token generated past the answer's end."""
    for_nobody = trace.sched_kind == SCHED_WASTED
    gone_at = trace.requests["disconnect_step"]
    anyone_left = bool((gone_at != NO_STEP).any())
    if not (anyone_left or for_nobody.any()):
        return 0.0  # (most runs: no client left and no token past an answer's end; the sharing out costs ~5 ms)
    steps, rows, tokens, kinds = trace.schedule_entries()
    if anyone_left:
        gone = gone_at[rows]
        for_nobody |= (gone != NO_STEP) & (steps >= gone)
    cost = trace.config.cost
    # A generating 1-token entry is a decode (a wasted one included); anything else is prefill.
    decode = (tokens == 1) & ((kinds == SCHED_DECODE) | (kinds == SCHED_WASTED))
    work_us = np.where(decode, cost.decode_request_us, tokens * cost.prefill_token_us)
    n = trace.num_steps
    work = np.bincount(steps, weights=work_us, minlength=n)
    wasted = np.bincount(steps[for_nobody], weights=work_us[for_nobody], minlength=n)
    share = np.divide(wasted, work, out=np.zeros(n), where=work > 0)
    return float((trace.steps["step_ms"] * share).sum())


def summary(trace: Trace) -> dict[str, Any]:
    r, s = trace.requests, trace.steps
    lat = request_latencies(trace)
    served = served_mask(trace)
    status = r["status"]
    makespan_ms = float(s["time_ms"][-1]) if trace.num_steps else 0.0
    seconds = makespan_ms / 1000.0 if makespan_ms else float("nan")
    output_tokens = int(r["num_output_tokens"].sum())
    wasted = int(r["num_wasted_tokens"].sum())
    rejected = status == RequestStatus.REJECTED
    gaps = token_gaps(trace)
    reasons: dict[str, int] = {}
    for i in np.flatnonzero(rejected):
        reasons[trace.finish_reason[i]] = reasons.get(trace.finish_reason[i], 0) + 1
    return {
        "num_requests": trace.num_requests,
        "num_served": int(served.sum()),
        "num_finished": int(np.isin(status, _SERVED).sum()),
        "num_aborted": int((status == RequestStatus.FINISHED_ABORTED).sum()),
        "num_rejected": int(rejected.sum()),
        "rejected_by_reason": reasons,
        "num_shed": trace.finish_reason.count(FinishReason.DEADLINE_PASSED),
        "num_preemptions": int(r["num_preemptions"].sum()),
        "num_swaps": sum(map(len, trace.swapped_out_at_steps)),
        "num_steps": trace.num_steps,
        "makespan_ms": makespan_ms,
        "finish_steps": stats(lat["finish_steps"][served]),
        "finish_ms": stats(lat["finish_ms"][served]),
        "queue_steps": stats(lat["queue_steps"][served]),
        "queue_ms": stats(lat["queue_ms"][served]),
        "ttft_steps": stats(lat["ttft_steps"][served]),
        "ttft_ms": stats(lat["ttft_ms"][served]),
        **tbt_stats(trace, gaps),
        "output_tokens": output_tokens,
        "wasted_tokens": wasted,
        "useful_tokens": output_tokens - wasted,
        "wasted_gpu_ms": wasted_gpu_ms(trace),
        "throughput_tok_s": output_tokens / seconds,
        "read_tok_s": (output_tokens - wasted) / seconds,
        **slo_summary(trace, lat, gaps),
        "recomputed_tokens": int(r["num_recomputed_tokens"].sum()),
        "cached_tokens": int(r["num_cached_tokens"].sum()),
        "swap_ms": float(s["swap_ms"].sum()),
        "peak_used_blocks": int(s["used_blocks"].max()) if trace.num_steps else 0,
        "mean_kv_occupancy": float(s["used_blocks"].mean() / trace.config.num_blocks) if trace.num_steps else 0.0,
    }


def mean_num_running(trace: Trace) -> float:
    """Requests running per step (the batch, after scheduling), on average over the run; 0 for an empty run."""
    return float(trace.steps["num_running"].mean()) if trace.num_steps else 0.0


def idle_slot_share(trace: Trace) -> float:
    """Fraction of steps with a free batch slot (fewer than ``max_num_seqs`` running) while a request waited:
    0 = work-conserving. A request may wait with a slot free for want of KV blocks or token budget."""
    s = trace.steps
    if not trace.num_steps:
        return 0.0
    return float(((s["num_running"] < trace.config.max_num_seqs) & (s["num_waiting"] > 0)).mean())


def per_client(trace: Trace) -> list[dict[str, Any]]:
    """One row per client: requests, service, throughput and latency. A client's throughput is its output tokens
    per second of its own span, from its first arrival to the end of its last request: over the whole run, a policy
    that turns the other clients away (and so ends sooner) would seem to serve this one faster."""
    r = trace.requests
    lat = request_latencies(trace)
    served = served_mask(trace)
    ended = np.where(r["finish_step"] != NO_STEP, r["finish_step"], trace.num_steps - 1)  # (a run cut short)
    service = trace.final_client_values("client_service").tolist()  # (the last step only: no whole column)
    rows = []
    for c, client_id in enumerate(trace.client_ids):
        mine = r["client"] == c
        ok = mine & served
        finish = stats(lat["finish_ms"][ok])
        tokens = int(r["num_output_tokens"][mine].sum())
        span_ms = (float(trace.end_ms(int(ended[mine].max())) - trace.start_ms(int(r["arrival_step"][mine].min())))
                   if mine.any() and trace.num_steps else 0.0)
        rows.append({
            "client": client_id,
            "num_requests": int(mine.sum()),
            "num_served": int(ok.sum()),
            "num_rejected": int((mine & (r["status"] == RequestStatus.REJECTED)).sum()),
            "output_tokens": tokens,
            "prompt_tokens_served": int(r["prompt_len"][mine & (r["first_scheduled_step"] != NO_STEP)].sum()),
            "throughput_tok_s": tokens / (span_ms / 1000.0) if span_ms > 0 else 0.0,
            "weighted_service": service[c],
            "mean_finish_ms": finish["mean"],
            "p99_finish_ms": finish["p99"],
            "mean_queue_ms": stats(lat["queue_ms"][ok])["mean"],
            "mean_ttft_ms": stats(lat["ttft_ms"][ok])["mean"],
        })
    return rows


def past_end_kv_tokens(trace: Trace) -> np.ndarray:
    """[steps] int64: KV tokens held during each step by requests generating past the end of their answer (a stop
    the server does not check for, or a stop string caught a step late) while their client is still there.

    Rebuilt from the schedule: a request that emits its k-th token (k counted from 0) in a step holds
    ``prompt_len + k`` tokens of KV after it, and a token is past the end when the trace marks it wasted before any
    disconnect (after a disconnect the KV is counted in ``steps["orphan_kv_tokens"]``). A request that stalls for a
    step (scheduled no tokens) is not counted in that step.
    """
    steps, rows, _, kinds = trace.schedule_entries()
    emitting = kinds != SCHED_PREFILL
    steps, rows, kinds = steps[emitting], rows[emitting], kinds[emitting]
    order = np.argsort(rows, kind="stable")  # entries are in step order, so each request's stay sorted
    rows_sorted = rows[order]
    tokens_before = np.empty(len(rows), dtype=np.int64)
    tokens_before[order] = np.arange(len(rows)) - np.searchsorted(rows_sorted, rows_sorted, side="left")
    disconnect = trace.requests["disconnect_step"][rows]
    past_end = (kinds == SCHED_WASTED) & ((disconnect == NO_STEP) | (steps < disconnect))
    kv = trace.requests["prompt_len"][rows[past_end]] + tokens_before[past_end]
    return np.bincount(steps[past_end], weights=kv, minlength=trace.num_steps).astype(np.int64)
