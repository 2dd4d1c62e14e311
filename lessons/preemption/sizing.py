"""The Preemption lesson's sizing sweep: one workload over a grid of KV pool sizes x max_num_seqs, its points run
coarse first (one by one through ``ui/sweeps.py``: the heatmaps show the whole grid's shape after a few), the grid
assembled from the points run so far, the reader's cell, and the sweep's sentences."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim import metrics
from sim.config import gib_for_blocks, num_blocks_for_gib
from sim.engine import SimulationError, simulate
from sim.presets import Preset
from sim.request import RequestStatus
from sim.scenario import Scenario
from sim.trace import Trace
from ui.wording import count, fmt_gib, pct_change


@dataclass
class Sweep:
    """Runs of one workload over a grid: rows = max_num_seqs, columns = KV pool sizes."""

    pools_gib: tuple[float, ...]
    pools_blocks: tuple[int, ...]
    seqs: tuple[int, ...]
    preemptions: np.ndarray  # [len(seqs), len(pools)] int, preemptions per run
    finish_ms: np.ndarray  # [len(seqs), len(pools)] float, mean finish time of served requests (ms), NaN = none
    queue_ms: np.ndarray  # [len(seqs), len(pools)] float, mean queueing delay (ms)
    rejected: np.ndarray  # [len(seqs), len(pools)] int, requests too large for the pool
    num_steps: np.ndarray  # [len(seqs), len(pools)] int
    seconds: float  # wall time of the whole sweep (0 when assembled from cached points: sizing_from)
    pending: np.ndarray | None = None  # [len(seqs), len(pools)] bool, True = not run yet (sizing_from), None = all


def sweep_axes(preset: Preset) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """The preset's sweep grid: pool sizes converted to GiB (at the preset's block size and model), slots."""
    c = preset.scenario.config
    pools = tuple(gib_for_blocks(b, c.model, c.block_size) for b in preset.knobs["pool_sweep_blocks"])
    return pools, tuple(int(s) for s in preset.knobs["seqs_sweep"])


def sweep_identity(scenario: Scenario) -> Scenario:
    """The scenario with the swept fields blanked: two scenarios with the same identity give the same sweep
    (so moving the pool or max_num_seqs knobs does not rerun it)."""
    return scenario.with_config(num_blocks=1, max_num_seqs=1)


def sizing_sweep(base: Scenario, pools_gib: Sequence[float], seqs: Sequence[int],
                 simulate_fn: Callable[..., Trace] = simulate) -> Sweep:
    """Run ``base`` at every (max_num_seqs, pool size) pair; the rest of its config stays as it is."""
    c = base.config
    blocks = tuple(max(1, num_blocks_for_gib(g, c.model, c.block_size)) for g in pools_gib)
    shape = (len(seqs), len(blocks))
    pre, rejected, steps = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    finish, queue = np.full(shape, np.nan), np.full(shape, np.nan)
    t0 = time.perf_counter()
    for i, s in enumerate(seqs):
        for j, b in enumerate(blocks):
            try:
                trace = simulate_fn(c.replace(num_blocks=b, max_num_seqs=int(s)), base.requests)
            except SimulationError:
                rejected[i, j] = len(base.requests)
                continue
            lat = metrics.request_latencies(trace)
            served = metrics.served_mask(trace)
            pre[i, j] = int(trace.requests["num_preemptions"].sum())
            rejected[i, j] = int((trace.requests["status"] == RequestStatus.REJECTED).sum())
            steps[i, j] = trace.num_steps
            if served.any():
                finish[i, j] = float(np.nanmean(lat["finish_ms"][served]))
                queue[i, j] = float(np.nanmean(lat["queue_ms"][served]))
    return Sweep(tuple(pools_gib), blocks, tuple(int(s) for s in seqs), pre, finish, queue, rejected, steps,
                 time.perf_counter() - t0)


def coarse_first(num_rows: int, num_cols: int, strides: Sequence[int] = (4, 2, 1)) -> list[tuple[int, int]]:
    """Every (row, column) of a grid once, coarse first: the cells on every ``strides[0]``-th row and column, then
    those on every ``strides[1]``-th, ... so the first few runs of a sweep already span the whole grid."""
    order: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for stride in (*strides, 1):
        for i in range(0, num_rows, stride):
            for j in range(0, num_cols, stride):
                if (i, j) not in seen:
                    seen.add((i, j))
                    order.append((i, j))
    return order


SizingPoint = tuple[int, int, Scenario]  # (row = max_num_seqs index, column = pool index, the run)


def sizing_points(base: Scenario, pools_gib: Sequence[float], seqs: Sequence[int]) -> list[SizingPoint]:
    """The sizing sweep's runs (``base`` at every (max_num_seqs, pool size) pair), coarse first (``coarse_first``):
    run one by one (ui.sweeps), the heatmaps show the whole grid's shape after a few of them."""
    c = base.config
    blocks = [max(1, num_blocks_for_gib(g, c.model, c.block_size)) for g in pools_gib]
    return [(i, j, base.with_config(num_blocks=blocks[j], max_num_seqs=int(seqs[i])))
            for i, j in coarse_first(len(seqs), len(blocks))]


def sizing_point(trace: Trace) -> tuple[int, float, float, int, int]:
    """One cell of the sizing sweep: (preemptions, mean finish ms, mean queueing ms of the served requests (NaN if
    none), requests rejected, engine steps). Module-level and pure: runner.measure caches it per run."""
    lat = metrics.request_latencies(trace)
    served = metrics.served_mask(trace)
    finish = float(np.nanmean(lat["finish_ms"][served])) if served.any() else float("nan")
    queue = float(np.nanmean(lat["queue_ms"][served])) if served.any() else float("nan")
    return (int(trace.requests["num_preemptions"].sum()), finish, queue,
            int((trace.requests["status"] == RequestStatus.REJECTED).sum()), int(trace.num_steps))


def sizing_from(points: Sequence[SizingPoint], pools_gib: Sequence[float], seqs: Sequence[int],
                measure: Callable[..., Any]) -> Sweep:
    """The sweep assembled from its points as far as they are run: ``measure(scenario, sizing_point)`` gives a
    cell's numbers, or None for one not run yet (``pending``)."""
    shape = (len(seqs), len(pools_gib))
    pre, rejected, steps = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    finish, queue = np.full(shape, np.nan), np.full(shape, np.nan)
    pending = np.zeros(shape, dtype=bool)
    blocks = [0] * len(pools_gib)
    for i, j, scenario in points:
        blocks[j] = scenario.config.num_blocks
        try:
            cell = measure(scenario, sizing_point)
        except SimulationError:  # (as sizing_sweep: a run that cannot finish counts every request as turned away)
            rejected[i, j] = len(scenario.requests)
            continue
        if cell is None:
            pending[i, j] = True
            continue
        pre[i, j], finish[i, j], queue[i, j], rejected[i, j], steps[i, j] = cell
    return Sweep(tuple(pools_gib), tuple(blocks), tuple(int(s) for s in seqs), pre, finish, queue, rejected, steps,
                 0.0, pending if pending.any() else None)


def nearest_cell(sweep: Sweep, pool: float, seqs: int) -> tuple[int, int, bool]:
    """(row, column, exact) of the grid cell nearest the knobs' pool size and max_num_seqs."""
    i = int(np.argmin([abs(s - seqs) for s in sweep.seqs]))
    j = int(np.argmin([abs(math.log(g) - math.log(pool)) for g in sweep.pools_gib]))
    return i, j, sweep.seqs[i] == seqs and math.isclose(sweep.pools_gib[j], pool, rel_tol=1e-6)


def sweep_notices(sweep: Sweep, pool: float, seqs: int) -> list[str]:
    """Where preemption stops on the grid, for the current row and column, and what fewer slots cost."""
    out = []
    i, j, _ = nearest_cell(sweep, pool, seqs)
    row, col = sweep.preemptions[i], sweep.preemptions[:, j]
    # The pool from which on (to the right) no run preempts.
    stop = next((k for k in range(len(row)) if not row[k:].any()), None)
    if stop is None:
        out.append(f"With {sweep.seqs[i]} batch slots every pool size on the grid preempts (up to "
                   f"{count(int(row.max()), 'preemption')}); it needs a bigger pool or fewer slots.")
    elif stop == 0:
        out.append(f"With {sweep.seqs[i]} batch slots even the smallest pool on the grid "
                   f"({fmt_gib(sweep.pools_gib[0])}) never preempts.")
    else:
        out.append(f"With {sweep.seqs[i]} batch slots, preemption stops from {fmt_gib(sweep.pools_gib[stop])} "
                   f"({sweep.pools_blocks[stop]:,} blocks) of KV pool; at {fmt_gib(sweep.pools_gib[stop - 1])} "
                   f"there were {int(row[stop - 1]):,}.")
    fewer = [k for k in range(i + 1) if col[k] == 0]
    if col[i] > 0 and fewer:
        k = fewer[-1]
        a, b = sweep.finish_ms[i, j], sweep.finish_ms[k, j]
        start = (f"At {fmt_gib(sweep.pools_gib[j])}, lowering max_num_seqs from {sweep.seqs[i]} to "
                 f"{sweep.seqs[k]} stops preemption ({int(col[i]):,} to 0)")
        if abs(b - a) < 0.01 * a:  # within 1%: the slots given up cost (or save) nothing to speak of
            out.append(f"{start} and leaves the mean finish time at {a / 1e3:,.2f} s (within 1%): the slots it "
                       f"gives up were not what the run was waiting for.")
        else:
            why = "fewer slots, more queueing" if b > a else "no time lost to evictions and re-prefills"
            out.append(f"{start} and moves the mean finish time from {a / 1e3:,.2f} s to {b / 1e3:,.2f} s "
                       f"({pct_change(a, b)}): {why}.")
    elif col[i] > 0:
        out.append(f"At {fmt_gib(sweep.pools_gib[j])} every max_num_seqs on the grid preempts.")
    finite = np.where(np.isfinite(sweep.finish_ms), sweep.finish_ms, np.inf)
    bi, bj = np.unravel_index(int(np.argmin(finite)), finite.shape)
    if np.isfinite(finite[bi, bj]):
        pre = int(sweep.preemptions[bi, bj])
        out.append(f"The lowest mean finish time on the grid, {finite[bi, bj] / 1e3:,.2f} s, is at "
                   f"{fmt_gib(sweep.pools_gib[bj])} with {sweep.seqs[bi]} slots"
                   + (f", with {count(pre, 'preemption')}: a few evictions can cost less than queueing." if pre else
                      ", without preemptions."))
    if sweep.rejected.any():
        k = int((sweep.rejected > 0).sum())
        out.append(f"In {count(k, 'run')} some requests were too large for the pool and were turned away on "
                   "arrival (hover a cell: its mean covers only the requests served).")
    return out
