"""The recorders the engine writes during a run, and the trace they make at its end (``finish``).

``TraceRecorder`` collects the per-step values (plain tuples a step, or whole arrays a stretch), the schedule, the
events and the block-map snapshots; per-client values go to its rows for a run of up to a hundred clients, or to
``SparseClientRecorder`` past that (only the clients that did something, so memory grows with the work, not with
steps x clients). ``finish`` joins everything into a ``Trace`` (sim/trace.py, the read side).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

import numpy as np

from .config import EngineConfig
from .events import RawEvent
from .request import RequestTable
from .trace import (
    CLIENT_COLUMNS,
    STEP_COLUMNS,
    ClientRecord,
    SparseClients,
    StepRecord,
    Trace,
)


class TraceRecorder:
    """Collects the trace as the run goes. The one writer (sim/step_record.py) appends one StepRecord and one
    ClientRecord a step, or plain tuples of their fields in order (docs/PERFORMANCE.md#the-busy-step); a quiet
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
        # Each request's steps as a tuple: a copy the table's lists cannot change, and one the garbage collector
        # stops tracking (docs/PERFORMANCE.md#the-garbage-collector).
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
            slo=table.slo.copy(),
            arrival_ms=None if table.arrival_ms is None else table.arrival_ms.copy(),
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
        """Record, of ``clients`` [k] (each once), those whose ``counters`` or ``service`` ([k] each, theirs) is not
        what was last recorded."""
        now = np.empty((len(clients), 2))
        now[:, 0], now[:, 1] = counters, service
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


def _request_arrays(t: RequestTable) -> dict[str, np.ndarray]:
    names = ("arrival_step", "prompt_len", "useful_len", "target_len", "client", "priority", "status",
             "num_computed_tokens", "num_output_tokens", "num_preemptions", "first_scheduled_step",
             "first_token_step", "finish_step", "disconnect_step", "num_cached_tokens", "num_recomputed_tokens",
             "num_wasted_tokens", "predicted_len", "prefix_len")
    return {name: getattr(t, name).copy() for name in names}

