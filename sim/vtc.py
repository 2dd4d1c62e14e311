"""Virtual token counters (VTC, Sheng et al., OSDI '24): per-client counters, their charges and the lift, one class.

A client's counter grows by what it is served (docs/ENGINE.md#virtual-token-counters):
- ``input_weight`` x prompt tokens at a request's first admission (a preempted request is not charged again);
- ``output_weight`` per generated token, the first included (recomputed tokens are not charged again);
each divided by the client's weight, so a client of weight 2 is charged half and gets twice the service.
``service`` adds the same charges and nothing else; ``counters`` add the lifts too: when a client's queue goes from
empty to non-empty (VTC; LCF has no lift) its counter becomes max(own, the lowest counter among the other clients
with waiting requests), or, with nobody waiting, max(own, the counter of the last client to leave the queue): the
paper's Algorithm 2.

Who calls: the scheduler charges prompts at admission, the executor (sim/execute.py) charges each step's tokens, the
engine a quiet stretch's in bulk (``Engine.charge_decode_steps``, as the fast-forward walks it), and the VTC/LCF
queue asks for the lift and orders clients by ``counters``. Every policy keeps the counters (the Fairness lesson
draws FCFS's too); only VTC and LCF read them.

Invariants: counters and service only grow, and ``counters - service`` is the sum of the lifts. The arrays are
updated in place, never replaced (the queue holds ``counters``). Float arithmetic: one addition per charge, in the
step loop's order, so the fast-forward's bulk charges give the step loop's floats bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .config import POLICIES, EngineConfig
from .npfast import add_accumulate as _cumsum
from .npfast import distinct_counts
from .request import RequestTable


class VirtualCounters:
    def __init__(self, config: EngineConfig, table: RequestTable):
        num_clients = len(table.client_ids)
        self.counters = np.zeros(num_clients, dtype=np.float64)  # [clients] virtual token counters (with lifts)
        self.service = np.zeros(num_clients, dtype=np.float64)  # [clients] weighted tokens served (no lifts)
        # VTC lifts a returning client's counter, LCF does not: the policy's record says (declared in sim/policies.py,
        # which imports this module through the queues; the records' table is sim.config's)
        self.has_lift = POLICIES[config.policy].lifts
        weights = [float(config.client_weight(c)) for c in table.client_ids]
        self.client_weight = np.array(weights, dtype=np.float64)  # [clients]
        self._client = table.client  # [rows] int64 client index, shared with the request table
        self._output_weight = config.output_weight
        # With one client the charges are plain floats: the same arithmetic, without numpy's per-call overhead.
        self._only_weight = weights[0] if num_clients == 1 else None
        self._output_charge_per_token = config.output_weight / self.client_weight  # [clients]
        # [rows] what a request's first admission adds to its client's counter: its prompt, weighted
        self.prompt_charge = config.input_weight * table.prompt_len / self.client_weight[table.client]
        # The clients lifted since the engine last asked (``take_lifted``): kept only for an engine that records
        # per-client values sparsely (None: nobody asks). Every other change of a counter is a charge to a client
        # with a request scheduled in that step.
        self.lifted: list[int] | None = None

    # ---- charges --------------------------------------------------------------------------------------------
    def charge_prompt(self, row: int) -> None:
        """Charge request ``row``'s prompt to its client: call at its first admission only."""
        c = self._client.item(row)
        charge = self.prompt_charge.item(row)
        self.counters[c] += charge
        self.service[c] += charge

    def charge_output(self, rows: np.ndarray) -> np.ndarray | None:
        """Charge one generated token for each of ``rows`` (every step, the engine); returns the [clients] int64
        token counts (None with one client)."""
        if self._only_weight is not None:
            charge = len(rows) * self._output_weight / self._only_weight
            self.counters[0] += charge
            self.service[0] += charge
            return None
        per_client = np.bincount(self._client[rows], minlength=len(self.counters))
        if len(rows):
            charge = per_client * self._output_charge_per_token
            self.counters += charge
            self.service += charge
        return per_client

    def charge_output_by_client(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``charge_output`` touching only the clients of ``rows`` (an engine with thousands of clients): returns
        those clients (ascending) and their token counts. The same additions, so the same floats."""
        if self._only_weight is not None:
            self.charge_output(rows)
            return np.zeros(min(len(rows), 1), dtype=np.int32), np.full(min(len(rows), 1), len(rows), dtype=np.int64)
        clients, counts = distinct_counts(self._client[rows])
        if len(rows):
            charge = counts * self._output_charge_per_token[clients]
            self.counters[clients] += charge
            self.service[clients] += charge
        return clients, counts

    def output_charge(self, rows: np.ndarray) -> np.ndarray:
        """[clients] what one token for each of ``rows`` would add to the counters (``charge_steps`` adds it)."""
        if self._only_weight is not None:
            return np.array([len(rows) * self._output_weight / self._only_weight])
        return np.bincount(self._client[rows], minlength=len(self.counters)) * self._output_charge_per_token

    def output_charge_by_client(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``output_charge`` of only the clients of ``rows``: (those clients ascending, [k] their charges)."""
        if self._only_weight is not None:
            return np.zeros(1, dtype=np.int32), self.output_charge(rows)
        clients, counts = distinct_counts(self._client[rows])
        return clients, counts * self._output_charge_per_token[clients]

    def charge_steps(self, charge: np.ndarray, num_steps: int,
                     clients: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Add ``charge`` ([clients], from ``output_charge``) once a step for ``num_steps`` steps, one addition a step
        in order (a running sum: the step loop's floats exactly). Returns the counters and the service after each
        step, [num_steps, clients] float64 each. With ``clients`` (from ``output_charge_by_client``), ``charge`` is
        theirs and only their columns are charged and returned: [num_steps, len(clients)]."""
        if clients is None:
            counters, service = self.running_totals(charge, num_steps)
            self.set_totals(counters[-1], service[-1])
            return counters[1:], service[1:]
        after = []
        for total in (self.counters, self.service):
            steps = np.empty((num_steps + 1, len(clients)))
            steps[0], steps[1:] = total[clients], charge
            _cumsum(steps, axis=0, out=steps)
            total[clients] = steps[-1]
            after.append(steps[1:])
        return after[0], after[1]

    def running_totals(self, charge: np.ndarray, num_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """What ``charge_steps(charge, num_steps)`` would make of the counters and the service, without changing
        them: [num_steps + 1, clients] float64 each, row 0 the totals now and row i those after i steps. The
        fast-forward reads who is lowest in each step before it knows how many of the steps it will take."""
        after = []
        for total in (self.counters, self.service):
            steps = np.empty((num_steps + 1, len(total)))
            steps[0], steps[1:] = total, charge
            _cumsum(steps, axis=0, out=steps)
            after.append(steps)
        return after[0], after[1]

    def set_totals(self, counters: np.ndarray, service: np.ndarray) -> None:
        """Take a row of ``running_totals`` as the counters and the service now (in place: the queue holds them)."""
        self.counters[:] = counters
        self.service[:] = service

    # ---- the lift -------------------------------------------------------------------------------------------
    def lift(self, client: int, waiting_clients: Iterable[int], last_left: int | None) -> None:
        """``client``'s queue goes from empty to non-empty: lift its counter to the lowest of ``waiting_clients``
        (the others with waiting requests), or with none, to that of ``last_left`` (the client whose last waiting
        request left the queue most recently; None: nobody yet). Only VTC lifts."""
        if not self.has_lift:
            return
        counters = self.counters
        others = [counters[o] for o in waiting_clients if o != client]
        if others:
            counters[client] = max(counters[client], min(others))
        elif last_left is not None:
            counters[client] = max(counters[client], counters[last_left])
        if self.lifted is not None:
            self.lifted.append(client)

    def take_lifted(self) -> list[int]:
        """The clients lifted since the last call (possibly to the value they had; kept only when ``lifted`` is a
        list)."""
        lifted = self.lifted
        if not lifted:
            return []
        self.lifted = []
        return lifted
