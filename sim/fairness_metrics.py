"""Fairness between clients, computed from a trace: who had requests waiting, each client's service against what it
asked for, the gap in service between two clients and VTC's bound on it, the max-min fair-share index.

A client's *service* is the weighted tokens it was served (``clients["client_service"]``: ``input_weight`` per
prompt token when admitted, ``output_weight`` per generated token, divided by the client's weight); its *virtual
counter* (``clients["client_counters"]``) is that service plus VTC's lifts. Units: weighted tokens, steps. Clients
are the trace's indices (``trace.client_ids``, in order of first arrival).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .request import NO_STEP, RequestStatus
from .trace import Trace


def client_backlog(trace: Trace) -> np.ndarray:
    """[steps, clients] int: requests of each client waiting in the queue during each step (after scheduling),
    counting the wait from arrival to first scheduling and from each preemption to its resume."""
    r = trace.requests
    n, nc = trace.num_steps, len(trace.client_ids)
    diff = np.zeros((n + 1, nc), dtype=np.int64)
    # Python lists: this loop visits every request (numpy scalars, and comparing them with an IntEnum, are slow).
    rejected = (r["status"] == int(RequestStatus.REJECTED)).tolist()
    client, arrival, first, finish = (r[k].tolist() for k in ("client", "arrival_step", "first_scheduled_step",
                                                               "finish_step"))
    for i in range(trace.num_requests):
        if rejected[i]:
            continue
        c = client[i]
        starts = [arrival[i], *trace.preempted_at_steps[i]]
        ends = [first[i], *trace.resumed_at_steps[i]]
        for k, start in enumerate(starts):
            end = ends[k] if k < len(ends) and ends[k] != NO_STEP else finish[i]
            if end == NO_STEP or end < start:
                continue
            diff[start, c] += 1
            diff[min(end, n), c] -= 1
    return np.cumsum(diff[:n], axis=0)


def pending_service(trace: Trace) -> np.ndarray:
    """[steps, clients] float64: weighted tokens each client still has waiting at the end of each step (after
    scheduling), in the units of ``clients["client_service"]``: requests that arrived and were not yet admitted,
    each counted at its full VTC charge ``(input_weight * prompt_len + output_weight * output tokens) / client
    weight``. NOTE: a preempted request waiting to resume is not counted (its prompt was charged already)."""
    r, cfg = trace.requests, trace.config
    n, nc = trace.num_steps, len(trace.client_ids)
    weight = np.array([cfg.client_weight(c) for c in trace.client_ids])
    charge = request_charges(trace) / weight[r["client"]]
    start = r["arrival_step"]
    end = np.where(r["first_scheduled_step"] != NO_STEP, r["first_scheduled_step"], r["finish_step"])
    waits = (r["status"] != RequestStatus.REJECTED) & (end != NO_STEP) & (end > start) & (start < n)
    diff = np.zeros((n + 1, nc))
    np.add.at(diff, (start[waits], r["client"][waits]), charge[waits])
    np.add.at(diff, (np.minimum(end[waits], n), r["client"][waits]), -charge[waits])
    return np.cumsum(diff[:n], axis=0)


def request_charges(trace: Trace) -> np.ndarray:
    """[requests] float64: each request's full VTC charge before its client's weight, ``input_weight * prompt_len +
    output_weight * target_len``: what ``sim.vtc.VirtualCounters`` will have charged it (times the client's weight)
    once its answer is complete."""
    r, cfg = trace.requests, trace.config
    return cfg.input_weight * r["prompt_len"] + cfg.output_weight * r["target_len"]


def mean_request_charge(trace: Trace) -> dict[str, float]:
    """Client id -> the mean ``request_charges`` of its requests (clients that sent any), in tokens weighted by
    ``input_weight`` and ``output_weight`` but not by the client's weight."""
    charge, client = request_charges(trace), trace.requests["client"]
    return {cid: float(charge[client == c].mean()) for c, cid in enumerate(trace.client_ids) if (client == c).any()}


def output_token_share(trace: Trace) -> dict[str, float]:
    """Client id -> its requests' answer tokens (``target_len``) as a share of all the tokens they ask for (prompt +
    answer); clients asking for none are left out."""
    r = trace.requests
    out = {}
    for c, cid in enumerate(trace.client_ids):
        mine = r["client"] == c
        total = int(r["prompt_len"][mine].sum() + r["target_len"][mine].sum())
        if total:
            out[cid] = float(r["target_len"][mine].sum()) / total
    return out


def jain_index(x: np.ndarray) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one gets everything."""
    x = np.asarray(x, dtype=np.float64)
    if not len(x) or not (x**2).sum():
        return float("nan")
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def max_min_shares(total: float, demands: np.ndarray) -> np.ndarray:
    """Water-filling: split ``total`` so a client asking less than an equal share gets all it asked and the rest
    is shared equally among the others (max-min fairness). ``demands`` in the same units; returns the shares."""
    demands = np.asarray(demands, dtype=np.float64)
    shares = np.zeros_like(demands)
    left = float(total)
    order = np.argsort(demands, kind="stable")
    for k, i in enumerate(order):
        shares[i] = min(demands[i], left / (len(order) - k))
        left -= shares[i]
    return shares


def fair_share_index(trace: Trace, window_steps: int = 100) -> dict[str, Any]:
    """Jain's index of how close each client came to its max-min fair share of the service, window by window.

    In each window of ``window_steps`` steps, client i received ``s_i`` weighted tokens (``client_service``, so
    client weights count) and still had ``p_i`` waiting at the window's end (``pending_service``); it asked for
    ``d_i = s_i + p_i``. Its fair share ``f_i`` of the window's total is the max-min share of those demands (a
    light client is owed all it asked, the rest is split equally). Jain's index over ``x_i = s_i / f_i`` is 1 when
    every client got its fair share. Windows where fewer than two clients asked for anything are skipped; the
    result averages the others, weighted by the service in them. Returns ``{"index", "num_windows", "per_window"}``
    (``per_window`` [windows] float64, NaN where skipped); ``index`` is NaN when no window counts."""
    if window_steps < 1:
        raise ValueError(f"window_steps: must be >= 1, got {window_steps}")
    n = trace.num_steps
    service = np.vstack([np.zeros((1, len(trace.client_ids))), trace.clients["client_service"]])
    pending = pending_service(trace)
    ends = np.minimum(np.arange(window_steps, n + window_steps, window_steps), n)  # exclusive window ends
    starts = ends - np.diff(np.concatenate([[0], ends]))
    per_window = np.full(len(ends), np.nan)
    weights = np.zeros(len(ends))
    for k, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
        got = service[hi] - service[lo]
        asked = got + pending[hi - 1]
        total = got.sum()
        if total <= 0 or (asked > 1e-9).sum() < 2:
            continue
        share = max_min_shares(total, asked)
        mine = asked > 1e-9
        per_window[k] = jain_index(got[mine] / share[mine])
        weights[k] = total
    counted = np.isfinite(per_window)
    index = float(np.average(per_window[counted], weights=weights[counted])) if counted.any() else float("nan")
    return {"index": index, "num_windows": int(counted.sum()), "per_window": per_window}


def vtc_bound_parts(trace: Trace, clients: Sequence[int] | None = None) -> dict[str, Any]:
    """The VTC paper's bound on the service gap between two backlogged clients and its parts:
    2 * max(input_weight * L_input, output_weight * M) / w_min, with L_input the longest prompt that ran (all
    prompts if none ran), M the pool in tokens and w_min the smallest weight among ``clients`` (all if None).
    The paper states the bound for equal weights; here every charge is divided by its client's weight (weighted
    tokens), so one charge, and with it the bound, is at most 1 / w_min times larger."""
    cfg, r = trace.config, trace.requests
    ran = r["first_scheduled_step"] != NO_STEP
    max_input = int(r["prompt_len"][ran].max() if ran.any() else r["prompt_len"].max())
    pool_tokens = cfg.num_blocks * cfg.block_size
    ids = trace.client_ids if clients is None else [trace.client_ids[c] for c in clients]
    min_weight = min(cfg.client_weight(c) for c in ids)
    bound = 2.0 * max(cfg.input_weight * max_input, cfg.output_weight * pool_tokens) / min_weight
    return {"max_input": max_input, "pool_tokens": pool_tokens, "min_weight": min_weight, "bound": bound}


def vtc_bound(trace: Trace, clients: Sequence[int] | None = None) -> float:
    """``vtc_bound_parts(trace, clients)["bound"]``, in weighted tokens."""
    return vtc_bound_parts(trace, clients)["bound"]


def service_difference(trace: Trace, a: int = 0, b: int = 1) -> np.ndarray:
    """[steps] float64: client ``a``'s weighted service minus client ``b``'s, counted from the step before the
    current stretch in which both have requests waiting began; NaN outside such stretches. ``service_gap``'s
    ``gap`` is the largest range of this curve within one stretch."""
    backlog = client_backlog(trace)
    both = (backlog[:, a] > 0) & (backlog[:, b] > 0)
    svc = trace.clients["client_service"]
    diff = svc[:, a] - svc[:, b]
    starts = both & ~np.concatenate([[False], both[:-1]])
    base_at = np.where(starts, np.arange(len(both)) - 1, -1)
    base_at = np.maximum.accumulate(np.where(starts, base_at, -2))  # the latest stretch start so far (-2 = none)
    base = np.where(base_at >= 0, diff[np.maximum(base_at, 0)], 0.0)
    return np.where(both, diff - base, np.nan)


def service_gap(trace: Trace, a: int = 0, b: int = 1) -> dict[str, Any]:
    """Largest difference in weighted service between clients ``a`` and ``b`` over any interval in which both
    are backlogged: the largest range, within one common-backlog stretch, of ``service_difference`` (which starts
    each stretch from 0). Returns the gap, that curve (``difference``) and the paper's bound."""
    difference = service_difference(trace, a, b)
    inside = np.isfinite(difference)
    edges = np.flatnonzero(np.diff(np.concatenate([[False], inside, [False]]).astype(np.int8)))
    gap = 0.0
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):  # each stretch [lo, hi)
        seg = difference[lo:hi]
        gap = max(gap, float(max(seg.max(), 0.0) - min(seg.min(), 0.0)))
    return {"gap": gap, "difference": difference, "bound": vtc_bound(trace, (a, b))}


# ---- who waited, who was starved, who was lifted -----------------------------------------------------------------
def client_waiting(trace: Trace) -> np.ndarray:
    """[steps, clients] bool: the client had requests waiting during the step (``client_backlog`` > 0). The
    functions below take it as ``waiting`` to spare recomputing it (None: computed here)."""
    return client_backlog(trace) > 0


def served_while_all_waiting(trace: Trace, waiting: np.ndarray | None = None) -> dict[str, Any]:
    """While every client had requests waiting (never with fewer than two clients): ``step_share``, the fraction of
    steps, and ``tokens``, [clients] the tokens (prompt + output) each client was served in those steps."""
    waiting = client_waiting(trace) if waiting is None else waiting
    n, nc = trace.num_steps, len(trace.client_ids)
    everyone = waiting.all(axis=1) if nc >= 2 else np.zeros(n, dtype=bool)
    served = trace.clients["client_output_tokens"] + trace.clients["client_prefill_tokens"]
    return {"step_share": float(everyone.mean()) if n else 0.0,
            "tokens": served[everyone].sum(axis=0).astype(float).tolist()}


def longest_starvation_steps(trace: Trace, waiting: np.ndarray | None = None) -> list[int]:
    """[clients] the longest stretch of steps in which the client had requests waiting and none of its requests
    was admitted for the first time (a resume after a preemption does not count as an admission)."""
    waiting = client_waiting(trace) if waiting is None else waiting
    r = trace.requests
    out = []
    for c in range(len(trace.client_ids)):
        mine = (r["client"] == c) & (r["first_scheduled_step"] != NO_STEP)
        admitted = np.bincount(r["first_scheduled_step"][mine], minlength=trace.num_steps)[: trace.num_steps] > 0
        out.append(_longest_run(waiting[:, c] & ~admitted))
    return out


def _longest_run(mask: np.ndarray) -> int:
    """Length of the longest stretch of True."""
    if not mask.any():
        return 0
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())


def lifts(trace: Trace, waiting: np.ndarray | None = None) -> dict[str, Any]:
    """VTC's lifts (the rule: ``sim.vtc.VirtualCounters.lift``), found where a client's counter grew by more than
    the service it was charged (``counter - service`` jumps). ``{"count": 0}`` without any; else ``count`` and the
    largest: its ``step``, ``client``, ``amount``, the counter ``before`` and ``after``, and at the end of the step
    before (when the returning client's request arrived) every client's counter (``others``), whether it had
    requests ``waiting`` and ``running``: the lift goes to the lowest waiting counter, or with nobody waiting to the
    last client to leave the queue."""
    counters, service = trace.clients["client_counters"], trace.clients["client_service"]
    lifted = counters - service  # [steps, clients] cumulative lifts
    jumps = np.diff(np.vstack([np.zeros((1, lifted.shape[1])), lifted]), axis=0)
    events = np.argwhere(jumps > 1e-6)
    if not len(events):
        return {"count": 0}
    waiting = client_waiting(trace) if waiting is None else waiting
    step, client = (int(v) for v in events[np.argmax(jumps[events[:, 0], events[:, 1]])])
    before = float(counters[step - 1, client]) if step else 0.0
    n = counters.shape[1]
    was_waiting = waiting[step - 1] if step else np.zeros(n, dtype=bool)
    running = trace.clients["client_running"][step - 1] if step else np.zeros(n)
    return {"count": int(len(events)), "step": step, "client": client, "amount": float(jumps[step, client]),
            "before": before, "after": before + float(jumps[step, client]),
            "others": [float(counters[step - 1, c]) if step else 0.0 for c in range(n)],
            "waiting": [bool(w) for w in was_waiting], "running": [float(x) > 0 for x in running]}
