"""The trace of a run, the read side: per-step arrays, per-step-per-client arrays, per-request records and events.

``StepRecord`` and ``ClientRecord`` declare the per-step and per-client columns once (the recorders in
sim/recorder.py collect them during the run and make the ``Trace`` at its end). Per-client columns are recorded
densely (every client every step) for a run of up to a hundred clients, or sparsely past that (only the clients that
did something, read through ``SparseClients``); ``Trace.clients`` reads the same either way.

Steps are numbered from 0; ``time_ms[t]`` is the clock at the *end* of step ``t`` (so a request that arrived at
step ``a`` and finished at step ``f`` took ``time_ms[f] - start_ms(a)``). ``Trace`` is what metrics, the CLI and the
charts read. pandas is imported only in ``to_frames()``.
"""

from __future__ import annotations

import bisect
import functools
import math
import typing
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .config import EngineConfig
from .events import Event, EventKind, RawEvent, describe, record
from .request import NO_STEP, RequestStatus

_KIND_FIELD = Event._fields.index("kind")  # where a RawEvent holds its kind (sim/events.py)


class StepRecord(NamedTuple):
    """One engine step as the trace records it: the one declaration of the per-step columns (``Trace.steps``).
    Each field is a column, of the dtype its annotation names. Values describe the step as it ran (after
    scheduling, before finished requests free their blocks) unless the name says "after". Every path fills it by
    name (sim/step_record.py): idle stretches by keyword, the busy step as a plain tuple of locals named after the
    fields (a test checks the names), a quiet stretch a [steps, fields] array indexed by ``StepRecord._fields``."""
    step_ms: np.float64  # duration of the step (cost model), swap transfers included
    swap_ms: np.float64  # part of step_ms spent copying blocks to or from CPU memory
    num_running: np.int32  # requests in the running batch
    num_waiting: np.int32  # requests in the waiting queue (after scheduling)
    num_swapped: np.int32  # requests parked in CPU memory
    num_scheduled: np.int32  # requests that computed tokens this step
    num_prefill_tokens: np.int32  # prompt (or recomputed) tokens computed
    num_decode_reqs: np.int32  # requests that decoded one token
    num_output_tokens: np.int32  # tokens generated
    num_wasted_tokens: np.int32  # tokens generated that nobody reads
    used_blocks: np.int32  # blocks in use
    kv_tokens: np.int64  # tokens whose KV is held in GPU memory
    orphan_blocks: np.int32  # blocks held by requests whose client is gone
    orphan_kv_tokens: np.int64  # KV tokens held by requests whose client is gone
    cpu_blocks_used: np.int32  # swap space in use
    num_preempted: np.int32  # requests preempted (recompute or swap) this step
    num_admitted: np.int32  # requests admitted or re-admitted (a recompute resume) this step
    free_blocks_after: np.int32  # free blocks at the end of the step
    num_finished: np.int32  # requests that finished or were aborted this step
    cached_free_blocks: np.int32  # free blocks still holding prefix-cache content (after the step)


class ClientRecord(NamedTuple):
    """One step's per-client columns (``Trace.clients``, each [num_steps, num_clients]): each field a [clients]
    array, or a plain number when the run has one client and no shared blocks (the common case;
    docs/PERFORMANCE.md#the-busy-step). The first four are zero for a client with no request running
    (``ACTIVITY_COLUMNS``); the last two only grow (``CUMULATIVE_COLUMNS``)."""
    client_blocks: np.int64  # KV blocks the client's running requests hold (a shared block counts per holder)
    client_running: np.int64  # the client's requests in the running batch
    client_output_tokens: np.int64  # tokens generated for the client
    client_prefill_tokens: np.int64  # prompt (or recomputed) tokens computed for the client
    client_counters: np.float64  # virtual token counters, lifts included (VTC)
    client_service: np.float64  # weighted tokens served, no lifts


STEP_COLUMNS: dict[str, type] = typing.get_type_hints(StepRecord)  # name -> dtype, in record order
CLIENT_COLUMNS: dict[str, type] = typing.get_type_hints(ClientRecord)
ACTIVITY_COLUMNS = ClientRecord._fields[:4]  # zero for a client with no request running in the step
CUMULATIVE_COLUMNS = ClientRecord._fields[4:]  # totals so far: a client's value stays until it changes (0 at first)

# What a scheduled request did in a step (Trace.sched_kind), for the Gantt chart.
SCHED_PREFILL = 0  # computed a prefill chunk; no token yet
SCHED_PREFILL_DONE = 1  # finished its prefill (or re-prefill) and generated a token
SCHED_DECODE = 2  # decoded one token
SCHED_WASTED = 3  # generated a token nobody reads (client gone, or past the answer's end)


class SparseClients(Mapping[str, np.ndarray]):
    """``Trace.clients`` of a run recorded sparsely (sim/recorder.py, ``SparseClientRecorder``): the same mapping of
    CLIENT_COLUMNS to [num_steps, num_clients] arrays, each made from the entries the first time it is read (then
    kept, read-only if the trace is frozen). A reader that needs only the last step asks ``final``, which makes no
    column."""

    def __init__(self, num_steps: int, num_clients: int, activity: tuple[np.ndarray, np.ndarray, np.ndarray],
                 changes: tuple[np.ndarray, np.ndarray, np.ndarray], last: np.ndarray):
        self.num_steps, self.num_clients = num_steps, num_clients
        # [k] int32 step, [k] int32 client, [k, 4] int32 ACTIVITY_COLUMNS: clients with a request running
        self.activity_step, self.activity_client, self.activity_values = activity
        # [k] int32 step, [k] int32 client, [k, 2] float64 CUMULATIVE_COLUMNS: where a client's totals changed
        self.change_step, self.change_client, self.change_values = changes
        self.last = last  # [clients, 2] CUMULATIVE_COLUMNS at the last step
        self._dense: dict[str, np.ndarray] = {}  # the columns made so far
        self._frozen = False

    def __getitem__(self, name: str) -> np.ndarray:
        column = self._dense.get(name)
        if column is None:
            column = self._densify(name)
            column.flags.writeable = not self._frozen
            self._dense[name] = column
        return column

    def __iter__(self) -> Iterator[str]:
        return iter(CLIENT_COLUMNS)

    def __len__(self) -> int:
        return len(CLIENT_COLUMNS)

    def __contains__(self, name: object) -> bool:
        return name in CLIENT_COLUMNS  # (Mapping's own reads the column)

    def _densify(self, name: str) -> np.ndarray:
        n, nc, dtype = self.num_steps, self.num_clients, CLIENT_COLUMNS[name]
        if name in ACTIVITY_COLUMNS:
            column = np.zeros((n, nc), dtype=dtype)
            column[self.activity_step, self.activity_client] = self.activity_values[:, ACTIVITY_COLUMNS.index(name)]
            return column
        # Each client's value from its last change at or before the step: the index of that change, carried
        # down the steps by a running maximum (entries are in step order), 0 before the first.
        last_change = np.zeros((n, nc), dtype=np.int64)
        last_change[self.change_step, self.change_client] = np.arange(1, len(self.change_step) + 1)
        np.maximum.accumulate(last_change, axis=0, out=last_change)
        values = np.concatenate([[0.0], self.change_values[:, CUMULATIVE_COLUMNS.index(name)]])
        return values[last_change].astype(dtype, copy=False)

    def final(self, name: str) -> np.ndarray:
        """[clients] column ``name`` at the last step (zeros for a run of no steps)."""
        if name in CUMULATIVE_COLUMNS:
            return self.last[:, CUMULATIVE_COLUMNS.index(name)].astype(CLIENT_COLUMNS[name])
        out = np.zeros(self.num_clients, dtype=CLIENT_COLUMNS[name])
        at_last = slice(np.searchsorted(self.activity_step, self.num_steps - 1), None)  # (entries in step order)
        out[self.activity_client[at_last]] = self.activity_values[at_last, ACTIVITY_COLUMNS.index(name)]
        return out

    def arrays(self) -> list[np.ndarray]:
        """The arrays held: the entries and the columns made so far."""
        return [self.activity_step, self.activity_client, self.activity_values, self.change_step, self.change_client,
                self.change_values, self.last, *self._dense.values()]

    def freeze(self) -> None:
        self._frozen = True
        for a in self.arrays():
            a.flags.writeable = False

    def entries(self) -> dict[str, np.ndarray]:
        """Every (step, client) with an entry of either kind, in step then client order, with all six columns'
        values there (``to_frames``'s clients frame): ``step``, ``client`` (index) and CLIENT_COLUMNS."""
        n = max(self.num_steps, 1)
        act_key = self.activity_client.astype(np.int64) * n + self.activity_step  # (client, step) order
        chg_key = self.change_client.astype(np.int64) * n + self.change_step
        keys = np.union1d(act_key, chg_key)
        out: dict[str, np.ndarray] = {"step": (keys % n).astype(np.int64), "client": keys // n}
        at = np.searchsorted(keys, act_key)
        for i, name in enumerate(ACTIVITY_COLUMNS):
            out[name] = np.zeros(len(keys), dtype=CLIENT_COLUMNS[name])
            out[name][at] = self.activity_values[:, i]
        # Each key's totals: its client's last change at or before it (the change keys sorted; padded in front
        # with a key of no client, so that 0 means none).
        order = np.argsort(chg_key, kind="stable")
        sorted_keys = np.concatenate([[-1], chg_key[order]])
        j = np.searchsorted(sorted_keys, keys, side="right") - 1
        j[sorted_keys[j] // n != out["client"]] = 0
        for i, name in enumerate(CUMULATIVE_COLUMNS):
            values = np.concatenate([[0.0], self.change_values[order, i]])
            out[name] = values[j].astype(CLIENT_COLUMNS[name], copy=False)
        by_step = np.lexsort((out["client"], out["step"]))
        return {k: v[by_step] for k, v in out.items()}


@dataclass
class Trace:
    name: str
    config: EngineConfig
    request_ids: list[str]
    client_ids: list[str]
    steps: dict[str, np.ndarray]  # STEP_COLUMNS and time_ms (clock at the end of each step), each [num_steps]
    # CLIENT_COLUMNS, each [num_steps, num_clients]: a dict, or SparseClients (made column by column when read)
    clients: Mapping[str, np.ndarray]
    requests: dict[str, np.ndarray]  # per-request arrays, each [num_requests]
    preempted_at_steps: list[tuple[int, ...]]  # per request, the steps it was preempted at (in order)
    resumed_at_steps: list[tuple[int, ...]]
    swapped_out_at_steps: list[tuple[int, ...]]
    swapped_in_at_steps: list[tuple[int, ...]]
    finish_reason: list[str]
    raw_events: list[RawEvent]  # what happened to which request, in step order: read them as ``events``
    sched_rows: np.ndarray  # all steps' scheduled rows, concatenated (CSR with sched_offsets)
    sched_tokens: np.ndarray
    sched_kind: np.ndarray  # SCHED_* per entry
    sched_offsets: np.ndarray  # [num_steps + 1]
    snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # step -> (owner, cached)
    # [requests] bool: the config's SLO targets apply to it (a request's ``slo``); None: to every request (a
    # hand-made trace). Beside ``requests`` rather than in it, so that its set of arrays (which the reference digests
    # of scripts/trace_digests.py hash) stays what it was before SLOs.
    slo: np.ndarray | None = None
    # [requests] float64 the time each request that arrives by the clock was given, ms (NaN: a request given its
    # step); None when every request gives a step. Beside ``requests`` for the same reason; ``arrival_step`` holds
    # the step each arrived at.
    arrival_ms: np.ndarray | None = None

    @functools.cached_property
    def events(self) -> list[Event]:
        """What happened to which request, in step order (``sim.events.Event`` records)."""
        return list(map(record, self.raw_events))

    def events_of(self, kinds: Collection[EventKind]) -> list[Event]:
        """The events of these kinds, in step order (only those are made into records: a reader looking for a few
        kinds does not pay for all of ``events``)."""
        return [record(raw) for raw in self.raw_events if raw[_KIND_FIELD] in kinds]

    def first_step_of(self, kinds: Collection[EventKind]) -> int | None:
        """The step of the first event of these kinds, or None: a scan of the raw events that stops at the first
        (no records made: docs/PERFORMANCE.md#reading-a-trace)."""
        return next((raw[0] for raw in self.raw_events if raw[_KIND_FIELD] in kinds), None)

    @property
    def num_steps(self) -> int:
        return len(self.steps["time_ms"])

    @property
    def num_requests(self) -> int:
        return len(self.request_ids)

    def freeze(self) -> Trace:
        """Make every array read-only and return the trace: one trace shared by many readers (the app's cache hands
        the same object to every session) raises on an accidental write instead of changing what others see."""
        for a in self._arrays():
            a.flags.writeable = False
        if isinstance(self.clients, SparseClients):
            self.clients.freeze()  # (and the columns it makes later)
        return self

    def _arrays(self) -> list[np.ndarray]:
        clients = self.clients.arrays() if isinstance(self.clients, SparseClients) else [*self.clients.values()]
        return [*self.steps.values(), *clients, *self.requests.values(), self.sched_rows,
                self.sched_tokens, self.sched_kind, self.sched_offsets,
                *(a for snapshot in self.snapshots.values() for a in snapshot),
                *([] if self.slo is None else [self.slo]), *([] if self.arrival_ms is None else [self.arrival_ms])]

    @property
    def is_sparse(self) -> bool:
        """The per-client columns were recorded sparsely (a run of many clients): reading one makes it."""
        return isinstance(self.clients, SparseClients)

    def final_client_values(self, name: str) -> np.ndarray:
        """[clients] per-client column ``name`` at the last step (zeros for a run of no steps): for a reader that
        needs only the end of the run, without making the whole column of a sparse trace."""
        if isinstance(self.clients, SparseClients):
            return self.clients.final(name)
        column = self.clients[name]
        return column[-1] if len(column) else np.zeros(len(self.client_ids), dtype=column.dtype)

    def nbytes(self) -> int:
        """About how many bytes the trace holds (its arrays, a sparse trace's entries and the columns made from them
        so far, and ~100 bytes a request id, step list or event): what a cache of traces counts against its
        budget."""
        lists = 5 * len(self.request_ids) + len(self.client_ids) + len(self.raw_events)
        return sum(a.nbytes for a in self._arrays()) + 100 * lists

    def start_ms(self, step: np.ndarray | int) -> np.ndarray:
        """Clock at the start of ``step`` (the end of the step before)."""
        ends = np.concatenate([[0.0], self.steps["time_ms"]])
        return ends[np.asarray(step)]

    def end_ms(self, step: np.ndarray | int) -> np.ndarray:
        return self.steps["time_ms"][np.asarray(step)]

    def scheduled_at(self, step: int) -> list[tuple[str, int]]:
        lo, hi = self.sched_offsets[step], self.sched_offsets[step + 1]
        return [(self.request_ids[r], int(n)) for r, n in zip(self.sched_rows[lo:hi], self.sched_tokens[lo:hi],
                                                              strict=True)]

    def schedule_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every (step, row, num_tokens, kind) a request was scheduled, as flat arrays in step order."""
        steps = np.repeat(np.arange(self.num_steps), np.diff(self.sched_offsets))
        return steps, self.sched_rows, self.sched_tokens, self.sched_kind

    def events_at(self, step: int) -> list[Event]:
        """The events of ``step``, in the order they happened."""
        return self.events_between(step, step + 1)

    def events_between(self, first_step: int, end_step: int) -> list[Event]:
        """The events of steps ``first_step`` to ``end_step - 1``, in the order they happened (a binary search over
        the raw events, which are in step order; only these are made into records)."""
        raw = self.raw_events
        lo = bisect.bisect_left(raw, first_step, key=_event_step)
        hi = bisect.bisect_left(raw, end_step, lo=lo, key=_event_step)
        return [record(r) for r in raw[lo:hi]]

    def describe(self, event: Event) -> str:
        """The event in plain words (``sim.events.describe`` with this run's request ids and config)."""
        return describe(event, self.request_ids, self.config)

    def request_records(self) -> list[dict[str, Any]]:
        """One dict per request (the CLI's ``requests`` list). Each array becomes a list in one ``tolist``
        (docs/PERFORMANCE.md#reading-a-trace)."""
        r = {k: v.tolist() for k, v in self.requests.items()}
        client = [self.client_ids[c] for c in r["client"]]
        status = [_STATUS_NAMES[s] for s in r["status"]]
        first_scheduled, first_token, finish, disconnect = (
            _opt(r[k]) for k in ("first_scheduled_step", "first_token_step", "finish_step", "disconnect_step"))
        records = [{
            "id": rid,
            "client": client[i],
            "arrival_step": r["arrival_step"][i],
            "first_scheduled_step": first_scheduled[i],
            "first_token_step": first_token[i],
            "finish_step": finish[i],
            "num_output_tokens": r["num_output_tokens"][i],
            "num_preemptions": r["num_preemptions"][i],
            "preempted_at_steps": list(self.preempted_at_steps[i]),
            "resumed_at_steps": list(self.resumed_at_steps[i]),
            "final_status": status[i],
            "finish_reason": self.finish_reason[i],
            "wasted_tokens": r["num_wasted_tokens"][i],
            "prompt_len": r["prompt_len"][i],
            "priority": r["priority"][i],
            "cached_tokens": r["num_cached_tokens"][i],
            "recomputed_tokens": r["num_recomputed_tokens"][i],
            "swapped_out_at_steps": list(self.swapped_out_at_steps[i]),
            "disconnect_step": disconnect[i],
        } for i, rid in enumerate(self.request_ids)]
        if self.arrival_ms is not None:  # (some arrived by the clock: the time each was given, after its step)
            times = [None if math.isnan(m) else m for m in self.arrival_ms.tolist()]
            records = [{"id": rec.pop("id"), "client": rec.pop("client"), "arrival_step": rec.pop("arrival_step"),
                        "arrival_ms": ms, **rec} for rec, ms in zip(records, times, strict=True)]
        return records

    def step_records(self) -> list[dict[str, Any]]:
        """One dict per step (the CLI's ``steps`` list), built from whole columns as ``request_records`` is."""
        s = self.steps
        by_step: dict[int, dict[str, list[str]]] = {}
        for e in self.events:
            if e.kind in _LEAVES_RUNNING:
                key = "preempted" if e.kind in _PREEMPTIONS else "finished"
                by_step.setdefault(e.step, {}).setdefault(key, []).append(self.request_ids[e.row])
        ids = self.request_ids
        scheduled = [[ids[r], n] for r, n in zip(self.sched_rows.tolist(), self.sched_tokens.tolist(), strict=True)]
        bounds = self.sched_offsets.tolist()
        time_ms = [round(t, 4) for t in s["time_ms"].tolist()]
        free, waiting, running = (s[k].tolist() for k in ("free_blocks_after", "num_waiting", "num_running"))
        out = []
        for t in range(self.num_steps):
            ev = by_step.get(t, {})
            out.append({
                "step": t,
                "time_ms": time_ms[t],
                "scheduled": scheduled[bounds[t]:bounds[t + 1]],
                "preempted": ev.get("preempted", []),
                "finished": ev.get("finished", []),
                "free_blocks": free[t],
                "num_waiting": waiting[t],
                "num_running": running[t],
            })
        return out

    def to_frames(self) -> dict[str, Any]:
        """Tidy pandas frames: ``steps`` (one row a step), ``clients`` (a row per step and client), ``requests``,
        ``events``. For a sparse trace (``is_sparse``) ``clients`` has a row only where the run recorded one: a client
        with a request running in the step, or whose counter or service changed; every other (step, client) has no
        activity and the totals of the client's row before it (0 before its first)."""
        import pandas as pd

        steps = pd.DataFrame({"step": np.arange(self.num_steps), **self.steps})
        nc = len(self.client_ids)
        ids = np.array(self.client_ids, dtype=object)
        if isinstance(self.clients, SparseClients):
            entries = self.clients.entries()
            client_columns = {"step": entries.pop("step"), "client": ids[entries.pop("client")], **entries}
        else:
            client_columns = {"step": np.repeat(np.arange(self.num_steps), nc), "client": np.tile(ids, self.num_steps),
                              **{k: v.reshape(-1) for k, v in self.clients.items()}}
        clients = pd.DataFrame({k.removeprefix("client_"): v for k, v in client_columns.items()})
        requests = pd.DataFrame(self.request_records())
        events = pd.DataFrame(
            [(e.step, str(e.kind), self.request_ids[e.row], self.describe(e)) for e in self.events],
            columns=["step", "kind", "request_id", "why"],
        )
        return {"steps": steps, "clients": clients, "requests": requests, "events": events}


_PREEMPTIONS = (EventKind.PREEMPT, EventKind.SWAP_OUT)
_LEAVES_RUNNING = (*_PREEMPTIONS, EventKind.FINISH, EventKind.ABORT)


def _event_step(event: RawEvent) -> int:
    return event[0]  # (Event's first field, step)


def _opt(steps: list[int]) -> list[int | None]:
    """None for NO_STEP (it never happened)."""
    return [None if v == NO_STEP else v for v in steps]


_STATUS_NAMES = {s.value: s.name for s in RequestStatus}

