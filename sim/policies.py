"""Waiting-queue policies, one record each: everything the simulator and the Workbench need to know about a policy
is its ``PolicySpec`` in ``POLICIES`` (docs/ARCHITECTURE.md, "Add a policy", says how to add one).

A record holds the policy's name (a ``Policy`` value), its label, the factory of its waiting queue, how the queue's
head moves (what the fast-forward may skip), whether a returning client's counter is lifted, whom a full pool
preempts, the ``EngineConfig`` fields it reads (its knobs), whether vLLM has it and whether the Workbench offers it.
The consumers read the record: ``make_queue`` (below), the fast-forward's bulk decision,
``VirtualCounters.has_lift``, the scheduler's victim choice (and ``sim.events``' wording of it), the step player's
per-step reading of the queue, the Workbench's run picker and its per-run settings.

``EngineConfig.policy`` takes a ``Policy`` member, or the name of a record registered here under another name (a
policy added by its record alone, e.g. a test's toy: ``POLICIES[name] = record``; the built-in names stay
``Policy`` members, so ``config.policy is Policy.VTC`` keeps working).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .config import POLICIES, EngineConfig, FieldError, Policy, policy_name, policy_names  # noqa: F401 (re-exported)
from .request_queue import KeyedQueue, RequestQueue, VTCQueue, predicted_lengths

if TYPE_CHECKING:
    from .request import RequestTable
    from .vtc import VirtualCounters

HeadMoves = Literal["arrival", "counters"]
Victim = Literal["last", "lowest_priority"]
QueueFactory = Callable[["EngineConfig", "RequestTable", "VirtualCounters"], RequestQueue]

# The knobs of each kind of order (EngineConfig field names)
GUARD_KNOBS = ("starvation_threshold_steps", "priority_quantum_steps")
COUNTER_KNOBS = ("client_weights", "input_weight", "output_weight")


@dataclass(frozen=True)
class PolicySpec:
    """One waiting-queue policy.

    ``head_moves``: ``"arrival"``, the queue's head changes only when a request arrives or the queue promotes one
    (``next_promotion_step`` says when), so the fast-forward may take a quiet stretch in bulk between them;
    ``"counters"``, the head also changes as the clients' counters grow, so the queue must read it off counters it
    is given (``heads_over``), and the step player reads the queue every step.

    ``victim``: ``"last"``, a full pool preempts the last request of the running list (vLLM's FCFS); with
    ``"lowest_priority"`` the largest (priority, arrival) anywhere in it (vLLM's priority policy).
    """

    name: str  # a Policy value (or a registered extension's name)
    label: str  # the name the Workbench shows
    make_queue: QueueFactory  # (config, table, vtc) -> the waiting queue
    queue: type[RequestQueue]  # the class make_queue returns
    head_moves: HeadMoves = "arrival"
    lifts: bool = False  # a client whose queue goes from empty to non-empty has its counter lifted (VTC)
    victim: Victim = "last"  # whom a full pool preempts: the running list's last, or (vLLM's priority) the lowest
    knobs: tuple[str, ...] = ()  # the EngineConfig fields the policy reads
    vllm: bool = False  # vLLM's own policy (else a teaching extension)
    workbench: bool = True  # the Workbench's run picker offers it

    def __post_init__(self) -> None:
        if self.head_moves not in ("arrival", "counters"):
            raise ValueError(f"{self.name}: head_moves must be 'arrival' or 'counters', got {self.head_moves!r}")
        if self.victim not in ("last", "lowest_priority"):
            raise ValueError(f"{self.name}: victim must be 'last' or 'lowest_priority', got {self.victim!r}")
        if self.head_moves == "counters" and not callable(getattr(self.queue, "heads_over", None)):
            raise ValueError(f"{self.name}: a queue whose head moves with the counters needs heads_over(counters) "
                             f"(the fast-forward reads each step's head with it); {self.queue.__name__} has none")
        fields = EngineConfig.__dataclass_fields__
        unknown = [k for k in self.knobs if k not in fields]
        if unknown:
            raise ValueError(f"{self.name}: knobs {unknown} are not EngineConfig fields")


def _fcfs(config: EngineConfig, table: RequestTable, vtc: VirtualCounters) -> RequestQueue:
    return RequestQueue()


def _priority(config: EngineConfig, table: RequestTable, vtc: VirtualCounters) -> RequestQueue:
    t = table
    # The row breaks ties in arrival order (file order within a step), as vLLM's arrival_time does: a preempted
    # request goes back ahead of a same-priority request that arrived after it, not behind it.
    return KeyedQueue(lambda r: (t.priority.item(r), t.arrival_step.item(r), r), len(t))


def _guard(config: EngineConfig, table: RequestTable) -> dict:
    return {"wait_start_step": table.wait_start_step,
            "starvation_threshold_steps": config.starvation_threshold_steps,
            "priority_quantum_steps": config.priority_quantum_steps}


def _sjf(config: EngineConfig, table: RequestTable, vtc: VirtualCounters) -> RequestQueue:
    t = table
    return KeyedQueue(lambda r: (int(t.target_len[r] - t.num_output_tokens[r]), t.arrival_step.item(r)), len(t),
                      **_guard(config, t))


def _sjf_predicted(config: EngineConfig, table: RequestTable, vtc: VirtualCounters) -> RequestQueue:
    t = table
    predicted = predicted_lengths(t, config.prediction_error_sigma, config.seed)
    t.predicted_len[:] = predicted
    return KeyedQueue(lambda r: (max(int(predicted[r] - t.num_output_tokens[r]), 0), t.arrival_step.item(r)), len(t),
                      **_guard(config, t))


def _by_counter(config: EngineConfig, table: RequestTable, vtc: VirtualCounters) -> RequestQueue:
    return VTCQueue(table, vtc)  # (VTC or LCF: whether a joining client is lifted is vtc.has_lift, the record's)


# The built-in policies, in the order the Workbench offers them.
_BUILT_IN = (
    PolicySpec(Policy.FCFS, "FCFS", _fcfs, RequestQueue, vllm=True),
    PolicySpec(Policy.SJF, "SJF (true lengths)", _sjf, KeyedQueue, knobs=GUARD_KNOBS),
    PolicySpec(Policy.SJF_PREDICTED, "SJF (predicted)", _sjf_predicted, KeyedQueue,
               knobs=("prediction_error_sigma", "seed", *GUARD_KNOBS)),
    PolicySpec(Policy.PRIORITY, "Priority", _priority, KeyedQueue, victim="lowest_priority", vllm=True),
    PolicySpec(Policy.VTC, "VTC", _by_counter, VTCQueue, head_moves="counters", lifts=True, knobs=COUNTER_KNOBS),
    PolicySpec(Policy.LCF, "LCF", _by_counter, VTCQueue, head_moves="counters", knobs=COUNTER_KNOBS),
)

POLICIES.update({spec.name: spec for spec in _BUILT_IN})  # by name (a Policy member is its str)


names = policy_names  # the registered policies' names: the Policy values in their order, then any others


def spec_of(policy: str) -> PolicySpec:
    """The record of ``policy`` (a Policy member or a registered name); ValueError lists the registered names."""
    try:
        return POLICIES[policy]
    except KeyError:
        raise FieldError("policy", f"{policy!r} is not one of: {', '.join(names())}", value=policy,
                         choices=tuple(names())) from None


def make_queue(config: EngineConfig, table: RequestTable, vtc: VirtualCounters) -> RequestQueue:
    """The waiting queue for ``config.policy``, built by its record. VTC/LCF order clients by
    ``vtc``'s counters (the scheduler's)."""
    spec = spec_of(config.policy)
    queue = spec.make_queue(config, table, vtc)
    if not isinstance(queue, spec.queue):  # (the record's head_moves was checked against this class)
        raise TypeError(f"policy {spec.name}: make_queue gave a {type(queue).__name__}, its record says "
                        f"{spec.queue.__name__}")
    return queue
