"""Per-request lifecycle segments for the Gantt chart, derived from a trace.

Every step of a request's life, from its arrival step to the end of its last step, belongs to exactly one state:
- scheduled steps (from the schedule CSR): SCHED_PREFILL and SCHED_PREFILL_DONE are ``prefill``, SCHED_DECODE is
  ``decode``, SCHED_WASTED is ``wasted``;
- ``waiting`` from arrival to the first scheduled step; ``preempted`` (or ``swapped``, when the preemption was a
  swap-out) from each preemption to its resume;
- ``stalled``: any other step of its life, i.e. it was running but the step gave it no tokens.
A life ends at the end of the finish step for a finished request, at the start of the abort step for an aborted
one (the engine drops it before scheduling), at the end of the run for one that never finished. Rejected requests
have no segments. Segments are half-open step ranges ``[start_step, end_step)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.request import NO_STEP, RequestStatus
from sim.trace import SCHED_DECODE, SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_WASTED, Trace

STATES = ("waiting", "prefill", "decode", "preempted", "swapped", "stalled", "wasted")  # state code = index
WAITING, PREFILL, DECODE, PREEMPTED, SWAPPED, STALLED, WASTED = range(len(STATES))
_KIND_TO_STATE = np.zeros(4, dtype=np.int8)  # SCHED_* kind -> state code
_KIND_TO_STATE[[SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_DECODE, SCHED_WASTED]] = [PREFILL, PREFILL, DECODE, WASTED]
SEGMENT_COLUMNS = ("row", "request_id", "client", "state", "start_step", "end_step", "start_ms", "end_ms")

# A set of segments as parallel arrays: (row, start_step, end_step, state code), each [num_segments] int64.
Intervals = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def life_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """[requests] arrival step and end of life (exclusive); end == arrival for rejected requests."""
    r = trace.requests
    status, finish = r["status"], r["finish_step"]
    finished = np.isin(status, (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED))
    end = np.where(finish == NO_STEP, trace.num_steps, np.where(finished, finish + 1, finish))
    end = np.where(status == RequestStatus.REJECTED, r["arrival_step"], end)
    return r["arrival_step"].astype(np.int64), end.astype(np.int64)


def scheduled_runs(trace: Trace) -> Intervals:
    """Run-length encode the schedule: one interval per run of consecutive steps in one state of one request."""
    steps, rows, _, kinds = trace.schedule_entries()
    if not len(steps):
        return _empty()
    # Entries are in step order, so a stable sort keeps each row's steps sorted. Sorting 16-bit keys is a radix sort,
    # about 3x faster than sorting the int64 rows (tens of thousands of entries on every page rerun).
    keys = rows.astype(np.uint16) if trace.num_requests <= 1 << 16 else rows
    order = np.argsort(keys, kind="stable")
    row, step, state = rows[order], steps[order], _KIND_TO_STATE[kinds[order]]
    new = np.ones(len(row), dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (step[1:] != step[:-1] + 1) | (state[1:] != state[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(row) - 1)
    return row[first].astype(np.int64), step[first].astype(np.int64), step[last] + 1, state[first].astype(np.int64)


def parked_intervals(trace: Trace, life_end: np.ndarray) -> Intervals:
    """Waiting before the first schedule, and preempted/swapped from each preemption to its resume."""
    r = trace.requests
    arrival, first = r["arrival_step"], r["first_scheduled_step"]
    wait_end = np.where(first == NO_STEP, life_end, first)
    rows = [np.arange(trace.num_requests)]
    starts, ends, states = [arrival], [wait_end], [np.full(trace.num_requests, WAITING)]
    for i, preempted in enumerate(trace.preempted_at_steps):  # preemptions are few: a plain loop is fine
        resumed, swapped = trace.resumed_at_steps[i], set(trace.swapped_out_at_steps[i])
        for k, step in enumerate(preempted):
            rows.append([i])
            starts.append([step])
            ends.append([resumed[k] if k < len(resumed) else life_end[i]])
            states.append([SWAPPED if step in swapped else PREEMPTED])
    out = tuple(np.concatenate(a).astype(np.int64) for a in (rows, starts, ends, states))
    keep = out[2] > out[1]
    return tuple(a[keep] for a in out)  # type: ignore[return-value]


def stalled_holes(spans: Intervals, life_start: np.ndarray, life_end: np.ndarray) -> Intervals:
    """The steps of each life covered by no interval of ``spans`` (sorted by row, then start): ``stalled``."""
    row, start, end, _ = spans
    if not len(row):
        return _empty()
    same = row[1:] == row[:-1]
    inner = same & (start[1:] > end[:-1])
    is_first, is_last = np.append(True, ~same), np.append(~same, True)
    lead = is_first & (start > life_start[row])
    trail = is_last & (life_end[row] > end)
    h_row = np.concatenate([row[1:][inner], row[lead], row[trail]])
    h_start = np.concatenate([end[:-1][inner], life_start[row[lead]], end[trail]])
    h_end = np.concatenate([start[1:][inner], start[lead], life_end[row[trail]]])
    return h_row, h_start, h_end, np.full(len(h_row), STALLED, dtype=np.int64)


def request_segments(trace: Trace) -> pd.DataFrame:
    """One row per contiguous segment: SEGMENT_COLUMNS, sorted by request row then start step."""
    row, start, end, state = segment_intervals(trace)
    clients = np.asarray(trace.client_ids, dtype=object)[trace.requests["client"][row]]
    return pd.DataFrame({
        "row": row,
        "request_id": np.asarray(trace.request_ids, dtype=object)[row],
        "client": clients,
        "state": np.asarray(STATES, dtype=object)[state],
        "start_step": start,
        "end_step": end,
        "start_ms": trace.start_ms(start),
        "end_ms": trace.start_ms(end),  # the clock at the start of end_step = the end of the segment's last step
    })


def segment_intervals(trace: Trace) -> Intervals:
    """The segments of request_segments() as bare arrays (row, start_step, end_step, state code), in the same order:
    for builders that only index them, a data frame is overhead."""
    life_start, life_end = life_spans(trace)
    runs = scheduled_runs(trace)
    life_end = _extend_to_runs(life_end, runs)
    spans = _sorted(_concat(runs, parked_intervals(trace, life_end)))
    return _merge_adjacent(_sorted(_concat(spans, stalled_holes(spans, life_start, life_end))))


def _extend_to_runs(life_end: np.ndarray, runs: Intervals) -> np.ndarray:
    """A life lasts at least until the request's last scheduled step (guards the abort-timing convention)."""
    out = life_end.copy()
    np.maximum.at(out, runs[0], runs[2])
    return out


def _merge_adjacent(spans: Intervals) -> Intervals:
    row, start, end, state = spans
    if not len(row):
        return spans
    joined = (row[1:] == row[:-1]) & (state[1:] == state[:-1]) & (start[1:] == end[:-1])
    first = np.flatnonzero(np.append(True, ~joined))
    return row[first], start[first], np.maximum.reduceat(end, first), state[first]


def _sorted(spans: Intervals) -> Intervals:
    order = np.lexsort((spans[1], spans[0]))
    return tuple(a[order] for a in spans)  # type: ignore[return-value]


def _concat(a: Intervals, b: Intervals) -> Intervals:
    return tuple(np.concatenate([x, y]).astype(np.int64) for x, y in zip(a, b, strict=True))  # type: ignore


def _empty() -> Intervals:
    return tuple(np.empty(0, dtype=np.int64) for _ in range(4))  # type: ignore[return-value]
