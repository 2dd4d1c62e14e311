"""The trace of a run: per-step arrays, per-step-per-client arrays, per-request records and events.

Per-client columns are recorded densely (every client every step: ``TraceRecorder``'s rows) for a run of up to a
hundred clients, or sparsely past that (``SparseClientRecorder``: only the clients that did something, so memory
grows with the work, not with steps x clients); ``Trace.clients`` reads the same either way.

Steps are numbered from 0; ``time_ms[t]`` is the clock at the *end* of step ``t`` (so a request that arrived at
step ``a`` and finished at step ``f`` took ``time_ms[f] - start_ms(a)``). The recorder collects plain tuples
during the run; ``Trace`` is what metrics, the CLI and the charts read. pandas is imported only in ``to_frames()``.
"""

from __future__ import annotations

import bisect
import functools
import typing
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from .config import EngineConfig
from .events import Event, EventKind, RawEvent, describe, record
from .request import NO_STEP, RequestStatus, RequestTable

_KIND_FIELD = Event._fields.index("kind")  # where a RawEvent holds its kind (sim/events.py)


class StepRecord(NamedTuple):
    """One engine step as the trace records it: the one declaration of the per-step columns (``Trace.steps``).
    Each field is a column, of the dtype its annotation names. Values describe the step as it ran (after
    scheduling, before finished requests free their blocks) unless the name says "after". Every path fills it by
    name: idle stretches by keyword, the busy step as a plain tuple of locals named after the fields (a test checks
    the names), the fast-forward a [steps, fields] array indexed by ``StepRecord._fields``."""
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
    array, or a plain number when the run has one client and no shared blocks (the cheaper common case). The first
    four are zero for a client with no request running (``ACTIVITY_COLUMNS``); the last two only grow
    (``CUMULATIVE_COLUMNS``)."""
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


class TraceRecorder:
    """Collects the trace as the run goes. The step loop appends one StepRecord and one ClientRecord per step, or
    plain tuples of their fields in order (appending to a list is the cheapest thing a Python loop can do); a quiet
    stretch appends whole arrays (``append_block``). ``finish`` joins everything into arrays. With ``sparse``, the
    per-client values go to ``self.sparse`` instead (the ClientRecords are then None)."""

    def __init__(self, num_clients: int, sparse: bool = False):
        self.num_clients = num_clients
        self.num_steps = 0
        self._rows: list[tuple] = []  # per-step tuples of the steps not in a block, in step order
        self._client_rows: list[tuple] = []  # (dense only)
        self._blocks: list[tuple[int, np.ndarray, ClientRecord | None]] = []  # (first step, values, client values)
        self.sparse = SparseClientRecorder(num_clients) if sparse else None
        self.events: list[RawEvent] = []  # in step order (sim/events.py)
        self._sched_rows: list[np.ndarray] = []
        self._sched_tokens: list[np.ndarray] = []
        self._sched_kind: list[np.ndarray] = []
        self._sched_counts: list[int] = []
        self.snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def append(self, values: tuple, client_values: tuple | None, sched_rows: np.ndarray, sched_tokens: np.ndarray,
               sched_kind: np.ndarray) -> None:
        self._rows.append(values)
        if client_values is not None:
            self._client_rows.append(client_values)
        self._sched_rows.append(sched_rows)
        self._sched_tokens.append(sched_tokens)
        self._sched_kind.append(sched_kind)
        self._sched_counts.append(len(sched_rows))
        self.num_steps += 1

    def last_step_rows(self) -> np.ndarray:
        """The rows the last recorded step scheduled (empty if it scheduled none): the step just run, when the
        engine advances one step at a time (sim/playback.py)."""
        if not self._sched_counts or not self._sched_counts[-1]:
            return np.zeros(0, dtype=np.int64)
        return self._sched_rows[-1][-self._sched_counts[-1]:]

    def append_idle(self, num_steps: int, values: StepRecord, client_values: ClientRecord | None) -> None:
        """``num_steps`` steps in which nothing ran (the clock ticks one base step each)."""
        self._rows.extend([values] * num_steps)
        if client_values is not None:
            self._client_rows.extend([client_values] * num_steps)
        self._sched_counts.extend([0] * num_steps)
        self.num_steps += num_steps

    def append_block(self, values: np.ndarray, client_values: ClientRecord | None, sched_rows: np.ndarray,
                     sched_tokens: np.ndarray, sched_kind: np.ndarray, sched_counts: list[int]) -> None:
        """Several steps at once: ``values`` [steps, len(STEP_COLUMNS)] (StepRecord's fields as columns), a
        ClientRecord of [steps, clients] arrays (None when sparse), and the steps' schedule entries concatenated with
        their per-step counts."""
        self._blocks.append((self.num_steps, values, client_values))
        self._sched_rows.append(sched_rows)
        self._sched_tokens.append(sched_tokens)
        self._sched_kind.append(sched_kind)
        self._sched_counts.extend(sched_counts)
        self.num_steps += len(values)

    def _columns(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The [steps, len(STEP_COLUMNS)] table and one [steps, clients] array per client column (none when
        sparse): the blocks in place, the per-step tuples (converted in one go) in the steps between them."""
        n, nc, ncols, nclient = self.num_steps, self.num_clients, len(STEP_COLUMNS), len(CLIENT_COLUMNS)
        table = np.empty((n, ncols))
        clients = [] if self.sparse else [np.empty((n, nc)) for _ in range(nclient)]
        in_block = np.zeros(n, dtype=bool)
        for start, values, client_values in self._blocks:
            end = start + len(values)
            table[start:end] = values
            for col, block in zip(clients, client_values or (), strict=True):
                col[start:end] = block
            in_block[start:end] = True
        m = len(self._rows)
        if m:
            table[~in_block] = np.fromiter(chain.from_iterable(self._rows), dtype=np.float64,
                                           count=m * ncols).reshape(m, ncols)
        if m and clients:
            # Per-client values are all scalars (one client) or all [clients] arrays: one conversion either way.
            rest = np.array(self._client_rows, dtype=np.float64).reshape(m, nclient, nc)
            for i, col in enumerate(clients):
                col[~in_block] = rest[:, i, :]
        return table, clients

    def finish(self, config: EngineConfig, table: RequestTable, scenario_name: str) -> Trace:
        """The trace so far (of every step recorded: a partial run's too)."""
        # Each request's steps as a tuple: a tuple of ints is one Python's garbage collector stops tracking, while
        # a list is walked by every full collection for as long as the cached trace lives (sim/events.py says why
        # that matters to a server), and a tuple is a copy the table's lists cannot change.
        lists = lambda xs: list(map(tuple, xs))  # noqa: E731
        n = self.num_steps
        table_, client_cols = self._columns()
        steps = {name: table_[:, i].astype(dt) for i, (name, dt) in enumerate(STEP_COLUMNS.items())}
        steps["time_ms"] = np.cumsum(steps["step_ms"])
        clients: Mapping[str, np.ndarray]
        if self.sparse is not None:
            clients = self.sparse.finish(n)
        else:
            clients = {name: col.astype(dtype, copy=False)
                       for (name, dtype), col in zip(CLIENT_COLUMNS.items(), client_cols, strict=True)}
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(self._sched_counts, out=offsets[1:])
        join = lambda parts, dtype: (  # noqa: E731
            np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype))
        return Trace(
            name=scenario_name,
            config=config,
            request_ids=list(table.ids),
            client_ids=list(table.client_ids),
            steps=steps,
            clients=clients,
            requests=_request_arrays(table),
            preempted_at_steps=lists(table.preempted_at_steps),
            resumed_at_steps=lists(table.resumed_at_steps),
            swapped_out_at_steps=lists(table.swapped_out_at_steps),
            swapped_in_at_steps=lists(table.swapped_in_at_steps),
            finish_reason=list(table.finish_reason),
            raw_events=self.events,
            sched_rows=join(self._sched_rows, np.int64),
            sched_tokens=join(self._sched_tokens, np.int64),
            sched_kind=join(self._sched_kind, np.int8),
            sched_offsets=offsets,
            snapshots=self.snapshots,
        )


class SparseClientRecorder:
    """The per-client columns of a run with many clients, kept as entries instead of [steps, clients] rows. Per
    step: an *activity* entry (client, ACTIVITY_COLUMNS) for each client with a request running, and a *change*
    entry (client, CUMULATIVE_COLUMNS) for each client whose counter or service changed (a charge for what it was
    served, or VTC's lift). What is not recorded is known: no activity, totals as they were. An idle stretch
    records nothing. Each kind is kept as per-step arrays with the steps run-length coded (a step and its number
    of entries), in step order: appending is all a step costs; ``finish`` joins them."""

    def __init__(self, num_clients: int):
        self.num_clients = num_clients
        self._activity_runs: list[int] = []  # step, number of entries, step, number, ...
        self._activity_clients: list[np.ndarray] = []  # [k] int32 each
        # [k, 4] int32 each, ACTIVITY_COLUMNS (a client's blocks fit: a run's block table has fewer cells than 2**31,
        # or it would not fit in memory; the int64 columns are made from them)
        self._activity_values: list[np.ndarray] = []
        self._change_runs: list[int] = []
        self._change_clients: list[np.ndarray] = []
        self._change_values: list[np.ndarray] = []  # [k, 2] float64 each, CUMULATIVE_COLUMNS
        self.num_entries = 0  # entries of both kinds so far
        self.last_counters = np.zeros(num_clients)  # [clients] the counters after the last recorded step
        self.last_service = np.zeros(num_clients)  # [clients]

    def activity(self, step: int, clients: np.ndarray, values: np.ndarray) -> None:
        """Step ``step``'s activity: ``clients`` [k] int32 (each once), ``values`` [k, 4] int32 ACTIVITY_COLUMNS."""
        self._activity_runs += (step, len(clients))
        self.num_entries += len(clients)
        self._activity_clients.append(clients)
        self._activity_values.append(values)

    def activity_block(self, first_step: int, clients: np.ndarray, values: np.ndarray) -> None:
        """Steps ``first_step`` on, the same ``clients`` [k] active in each: ``values`` [steps, k, 4]."""
        d, k = values.shape[:2]
        for step in range(first_step, first_step + d):
            self._activity_runs += (step, k)
        self.num_entries += d * k
        self._activity_clients.append(np.tile(clients, d))
        self._activity_values.append(values.reshape(d * k, 4).astype(np.int32))

    def changes(self, step: int, clients: np.ndarray, counters: np.ndarray, service: np.ndarray) -> None:
        """Record, of ``clients`` [k] (each once), those whose ``counters`` or ``service`` ([all clients] each) is
        not what was last recorded."""
        now = np.empty((len(clients), 2))
        now[:, 0], now[:, 1] = counters[clients], service[clients]
        changed = now[:, 0] != self.last_counters[clients]
        changed |= now[:, 1] != self.last_service[clients]
        num_changed = int(np.count_nonzero(changed))
        if not num_changed:
            return
        if num_changed < len(clients):
            clients, now = clients[changed], now[changed]
        self.last_counters[clients], self.last_service[clients] = now[:, 0], now[:, 1]
        self._change_runs += (step, num_changed)
        self.num_entries += num_changed
        self._change_clients.append(clients)
        self._change_values.append(now)

    def changes_block(self, first_step: int, clients: np.ndarray, counters: np.ndarray, service: np.ndarray) -> None:
        """Steps ``first_step`` on: ``counters`` and ``service`` [steps, k] of ``clients`` [k] after each step;
        only the changes are recorded."""
        now = np.stack([counters, service], axis=-1)  # [steps, k, 2]
        before = np.empty_like(now)
        before[0, :, 0], before[0, :, 1], before[1:] = self.last_counters[clients], self.last_service[clients], now[:-1]
        j, i = np.nonzero((now != before).any(axis=-1))  # (step by step, then in clients' order)
        for step, count in enumerate(np.bincount(j, minlength=len(now)).tolist(), start=first_step):
            if count:
                self._change_runs += (step, count)
        self.num_entries += len(i)
        self._change_clients.append(clients[i])
        self._change_values.append(now[j, i])
        self.last_counters[clients], self.last_service[clients] = counters[-1], service[-1]

    def finish(self, num_steps: int) -> SparseClients:
        """The entries so far as a ``SparseClients``. Each list of per-step arrays is joined into one array, which
        then replaces the list's parts (the recorder may go on; the trace shares the array): the parts go as soon as
        their array is made, so joining needs room for one more array at a time, not for all of them."""

        def join(parts: list[np.ndarray], empty: np.ndarray) -> np.ndarray:
            joined = np.concatenate(parts).astype(empty.dtype, copy=False) if parts else empty
            parts[:] = [joined] if parts else []
            return joined

        def steps(runs: list[int]) -> np.ndarray:
            return np.repeat(np.array(runs[0::2], dtype=np.int32), runs[1::2])

        no_clients = np.empty(0, dtype=np.int32)
        activity = (steps(self._activity_runs), join(self._activity_clients, no_clients),
                    join(self._activity_values, np.empty((0, 4), dtype=np.int32)))
        changes = (steps(self._change_runs), join(self._change_clients, no_clients),
                   join(self._change_values, np.empty((0, 2))))
        return SparseClients(num_steps, self.num_clients, activity, changes,
                             np.stack([self.last_counters, self.last_service], axis=1))


class SparseClients(Mapping[str, np.ndarray]):
    """``Trace.clients`` of a run recorded sparsely (``SparseClientRecorder``): the same mapping of CLIENT_COLUMNS
    to [num_steps, num_clients] arrays, each made from the entries the first time it is read (then kept, read-only
    if the trace is frozen). A reader that needs only the last step asks ``final``, which makes no column."""

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


def _request_arrays(t: RequestTable) -> dict[str, np.ndarray]:
    names = ("arrival_step", "prompt_len", "useful_len", "target_len", "client", "priority", "status",
             "num_computed_tokens", "num_output_tokens", "num_preemptions", "first_scheduled_step",
             "first_token_step", "finish_step", "disconnect_step", "num_cached_tokens", "num_recomputed_tokens",
             "num_wasted_tokens", "predicted_len", "prefix_len")
    return {name: getattr(t, name).copy() for name in names}


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
        (no records made; a run's ~2,000 events in ~0.1 ms where ``events_of`` takes ~2)."""
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
                *(a for snapshot in self.snapshots.values() for a in snapshot)]

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
        """One dict per request (the CLI's ``requests`` list). Each array becomes a list in one ``tolist`` (Python
        ints at once, not an ``int()`` per value): 2,000 requests in ~3 ms instead of ~8."""
        r = {k: v.tolist() for k, v in self.requests.items()}
        client = [self.client_ids[c] for c in r["client"]]
        status = [_STATUS_NAMES[s] for s in r["status"]]
        first_scheduled, first_token, finish, disconnect = (
            _opt(r[k]) for k in ("first_scheduled_step", "first_token_step", "finish_step", "disconnect_step"))
        return [{
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

