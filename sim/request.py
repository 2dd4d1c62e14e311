"""Requests: the input record (``RequestSpec``) and the engine's per-request state as numpy arrays.

Each request gets a row (its index in the scenario's request list). Token counts follow vLLM: a request has
``num_tokens = prompt_len + num_output_tokens`` tokens, of which ``num_computed_tokens`` have KV in the cache; there
is no prefill or decode phase, only ``num_computed_tokens`` catching up with ``num_tokens``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import MAX_VALUE, EngineConfig, FieldError, StopCheck, cdiv, check_float, check_int

NO_STEP = -1  # sentinel in every *_step array: "has not happened"
MAX_LEN_TOKENS = 10_000_000  # the longest prompt, answer or max_tokens a request may state
MAX_PRIORITY = 10**9  # priorities run from -MAX_PRIORITY to MAX_PRIORITY


class RequestStatus(enum.IntEnum):
    NOT_ARRIVED = 0
    WAITING = 1
    RUNNING = 2
    SWAPPED = 3
    PREEMPTED = 4  # waiting again after a recompute preemption (vLLM's PREEMPTED)
    FINISHED_STOPPED = 5
    FINISHED_LENGTH_CAPPED = 6
    FINISHED_ABORTED = 7
    REJECTED = 8

    @property
    def is_finished(self) -> bool:
        return self >= RequestStatus.FINISHED_STOPPED


FINISHED_STATUSES = (
    RequestStatus.FINISHED_STOPPED,
    RequestStatus.FINISHED_LENGTH_CAPPED,
    RequestStatus.FINISHED_ABORTED,
    RequestStatus.REJECTED,
)


class StopType(enum.StrEnum):
    """How the answer's end is marked: a stop token is seen on its own step; a stop string (matched on
    detokenized text, after the step's output) is caught one step later, so one extra token is generated."""

    TOKEN = "token"
    STRING = "string"


@dataclass(frozen=True)
class RequestSpec:
    """One request as a scenario file states it.

    ``output_len`` is the natural length of the answer. ``max_tokens`` (default: ``output_len``) is the length
    limit. When ``max_tokens > output_len`` the answer ends on a stop token (``FINISHED_STOPPED``); otherwise it is
    cut at ``max_tokens`` (``FINISHED_LENGTH_CAPPED``).
    """

    request_id: str
    arrival_step: int | None  # the step at which it arrives; None when it gives ``arrival_ms`` instead
    prompt_len: int
    output_len: int
    client_id: str = "default"
    priority: int = 0
    abort_step: int | None = None  # step at which the client disconnects (closes the tab)
    prefix_group: str | None = None  # requests of one group share their first ``prefix_len`` prompt tokens
    prefix_len: int = 0
    max_tokens: int | None = None
    stop_type: StopType = StopType.TOKEN
    slo: bool = True  # the config's SLO targets apply to it (False: batch traffic, no target; never shed)
    # When it arrives on the run's clock, ms (the trace's time_ms), instead of ``arrival_step``: at the first step
    # whose start is at or past it (docs/ENGINE.md#the-step-loop)
    arrival_ms: float | None = None

    def __post_init__(self) -> None:
        # (specs_from_columns checks these rules a column at a time for scenario files: change both together)
        where = f"request {self.request_id!r}"
        if not isinstance(self.request_id, str) or not self.request_id:
            raise ValueError(f"request id: must be a non-empty string, got {self.request_id!r}")
        if (self.arrival_step is None) == (self.arrival_ms is None):
            both = self.arrival_ms is not None
            raise FieldError(f"{where}: {'arrival_ms' if both else 'arrival_step'}", "give exactly one of arrival_step "
                             "(a step) and arrival_ms (a time on the run's clock, ms); it gives "
                             + ("both" if both else "neither"), value=self.arrival_ms)
        if self.arrival_ms is None:
            check_int(f"{where}: arrival_step", self.arrival_step, 0)
        else:
            check_float(f"{where}: arrival_ms", self.arrival_ms, 0.0)
            object.__setattr__(self, "arrival_ms", float(self.arrival_ms))
            if self.abort_step is not None:
                raise FieldError(f"{where}: abort_step", "a request that arrives by the clock (arrival_ms) cannot give "
                                 "abort_step, a step known only once it arrives; use config.timeout_steps (counted "
                                 "from its arrival step)", value=self.abort_step)
        check_int(f"{where}: prompt_len", self.prompt_len, 1, MAX_LEN_TOKENS)
        check_int(f"{where}: output_len", self.output_len, 1, MAX_LEN_TOKENS)
        if not isinstance(self.client_id, str) or not self.client_id:
            raise ValueError(f"{where}: client must be a non-empty string, got {self.client_id!r}")
        check_int(f"{where}: priority", self.priority, -MAX_PRIORITY, MAX_PRIORITY)
        if self.abort_step is not None:
            check_int(f"{where}: abort_step", self.abort_step, self.arrival_step)
        if self.prefix_group is not None and (not isinstance(self.prefix_group, str) or not self.prefix_group):
            raise ValueError(f"{where}: prefix_group must be a non-empty string, got {self.prefix_group!r}")
        check_int(f"{where}: prefix_len", self.prefix_len, 0, self.prompt_len)
        if self.prefix_len and self.prefix_group is None:
            raise ValueError(f"{where}: prefix_len needs a prefix_group naming the shared prefix")
        if self.max_tokens is not None:
            check_int(f"{where}: max_tokens", self.max_tokens, 1, MAX_LEN_TOKENS)
        try:
            object.__setattr__(self, "stop_type", StopType(self.stop_type))
        except ValueError:
            raise ValueError(f"{where}: stop_type must be 'token' or 'string', got {self.stop_type!r}") from None
        if not isinstance(self.slo, bool):
            raise ValueError(f"{where}: slo must be true or false, got {self.slo!r}")

    @property
    def limit_tokens(self) -> int:
        return self.output_len if self.max_tokens is None else self.max_tokens

    @property
    def ends_on_stop(self) -> bool:
        return self.limit_tokens > self.output_len

    @property
    def useful_len(self) -> int:
        """Tokens somebody reads if the client stays: the answer up to its stop or the length limit."""
        return min(self.output_len, self.limit_tokens)

    def generated_len(self, stop_check: StopCheck, max_model_len: int | None = None) -> int:
        """Tokens the engine generates if never aborted (and, given ``max_model_len``, stopped there)."""
        if not self.ends_on_stop or stop_check is StopCheck.AT_MAX_TOKENS:
            n = self.limit_tokens
        else:
            extra = 1 if self.stop_type is StopType.STRING else 0
            n = min(self.output_len + extra, self.limit_tokens)
        return n if max_model_len is None else min(n, self.max_model_len_cap(max_model_len))

    def max_model_len_cap(self, max_model_len: int) -> int:
        """Output tokens at most, when a request stops once it holds ``max_model_len`` tokens: vLLM checks after
        each token, so even a prompt of ``max_model_len`` tokens gets its first one."""
        return max(max_model_len - self.prompt_len, 1)

    def stops_on_stop(self, config: EngineConfig) -> bool:
        """Its answer ends on its stop (a stop token or string), before the length limit or max_model_len cut it."""
        return (config.stop_check is StopCheck.EVERY_STEP and self.ends_on_stop
                and self.output_len <= self.max_model_len_cap(config.effective_max_model_len))

    def max_blocks(self, config: EngineConfig) -> int:
        """Blocks the request holds at its longest: the last token generated is never fed back."""
        max_kv_tokens = self.prompt_len + self.generated_len(config.stop_check, config.effective_max_model_len) - 1
        return cdiv(max_kv_tokens, config.block_size)


FIELD_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(RequestSpec)
                                  if f.default is not dataclasses.MISSING}
_FIELDS = tuple(f.name for f in dataclasses.fields(RequestSpec))
_STOP_TYPES = {t.value: t for t in StopType}


def specs_from_columns(num_requests: int, columns: dict[str, list[Any]]) -> list[RequestSpec] | None:
    """``num_requests`` specs from one list per field (a field without a list takes its default in every spec), the
    values checked a column at a time: ~1 us a spec where ``__post_init__`` takes ~3 (scenario files of thousands).

    None when any value is not plainly valid: the caller then builds the specs one by one and ``__post_init__``
    words the problem. So these checks decide and never explain; they may refuse more than ``__post_init__`` (an
    int subclass, say) but never less (a test tries each of its rules on both)."""
    n = num_requests
    c = {"arrival_step": [None] * n, **{name: [default] * n for name, default in FIELD_DEFAULTS.items()}, **columns}
    arrival, prompt, prefix_len, group = c["arrival_step"], c["prompt_len"], c["prefix_len"], c["prefix_group"]
    stop = [s if type(s) is StopType else _STOP_TYPES.get(s) if type(s) is str else None for s in c["stop_type"]]
    timed = "arrival_ms" in columns  # (some requests may arrive by the clock: each gives one of the two)
    plain = (
        n > 0 and _texts(c["request_id"]) and _texts(c["client_id"])
        and (_arrivals(arrival, c["arrival_ms"], c["abort_step"]) if timed else _ints(arrival, 0, MAX_VALUE))
        and _ints(prompt, 1, MAX_LEN_TOKENS) and _ints(c["output_len"], 1, MAX_LEN_TOKENS)
        and _ints(c["priority"], -MAX_PRIORITY, MAX_PRIORITY)
        and _ints(prefix_len, 0, MAX_LEN_TOKENS) and all(map(operator.le, prefix_len, prompt))
        and all(g is None or (type(g) is str and g) for g in group)
        and all(g is not None for g, p in zip(group, prefix_len, strict=True) if p)
        and all(a is None or (type(a) is int and s is not None and s <= a <= MAX_VALUE)
                for a, s in zip(c["abort_step"], arrival, strict=True))
        and all(m is None or (type(m) is int and 1 <= m <= MAX_LEN_TOKENS) for m in c["max_tokens"])
        and None not in stop and set(map(type, c["slo"])) <= {bool}
    )
    if not plain:
        return None
    c["stop_type"] = stop
    if timed:
        c["arrival_ms"] = [m if m is None else float(m) for m in c["arrival_ms"]]
    specs = []
    new, set_field = object.__new__, object.__setattr__
    for values in zip(*(c[name] for name in _FIELDS), strict=True):
        spec = new(RequestSpec)
        # (past the frozen __setattr__, as __init__ does: one field at a time keeps the instance's compact layout,
        # which the engine's ~60,000 attribute reads a 2,000-request run are fast on; __dict__.update lost it)
        for name, value in zip(_FIELDS, values, strict=True):
            set_field(spec, name, value)
        specs.append(spec)
    return specs


def _arrivals(steps: list[Any], times: list[Any], aborts: list[Any]) -> bool:
    """Each request gives one of an arrival step (an int from 0) and an arrival time (a finite number from 0, no
    bool), and no abort step with a time."""
    return all(
        (m is None and type(a) is int and 0 <= a <= MAX_VALUE)
        or (a is None and x is None and type(m) in (int, float) and 0 <= m <= MAX_VALUE)  # (NaN fails the compare)
        for a, m, x in zip(steps, times, aborts, strict=True))


def _texts(values: list[Any]) -> bool:
    """Every value a non-empty string."""
    return set(map(type, values)) <= {str} and all(values)


def _ints(values: list[Any], lo: int, hi: int) -> bool:
    """Every value an int (not a bool: its type is not int) from ``lo`` to ``hi``."""
    return set(map(type, values)) <= {int} and lo <= min(values) and max(values) <= hi


class RequestTable:
    """Struct-of-arrays state of every request, indexed by row. Built once per run from the specs."""

    def __init__(self, specs: Sequence[RequestSpec], config: EngineConfig, client_ids: Sequence[str]):
        n = len(specs)
        self.specs = list(specs)
        self.ids = [s.request_id for s in specs]
        self.client_ids = list(client_ids)
        client_index = {c: i for i, c in enumerate(client_ids)}
        # [n] float64 the arrival time of each request that arrives by the clock (NaN for one given a step), or None
        # when none does; such a request's arrival_step is NO_STEP until it arrives (the engine fills it in)
        ms = [s.arrival_ms for s in specs]
        self.arrival_ms = np.array([math.nan if m is None else m for m in ms]) if ms.count(None) < n else None
        # Static, [n] int64 unless noted. RequestSpec's length rules, for all requests at once (tests compare).
        fields = np.array([(NO_STEP if s.arrival_step is None else s.arrival_step, s.prompt_len, s.output_len,
                            -1 if s.max_tokens is None else s.max_tokens, s.priority, s.prefix_len,
                            s.stop_type is StopType.STRING, s.slo) for s in specs], dtype=np.int64).reshape(n, 8)
        self.arrival_step, self.prompt_len, output_len, max_tokens, self.priority, self.prefix_len, is_string, slo = (
            np.ascontiguousarray(col) for col in fields.T)
        self.slo = slo.astype(bool)  # [n] bool: the config's SLO targets apply to it
        limit_tokens = np.where(max_tokens < 0, output_len, max_tokens)
        self.ends_on_stop = limit_tokens > output_len  # [n] bool
        self.useful_len = np.minimum(output_len, limit_tokens)
        # Tokens generated if never aborted (RequestSpec.generated_len): to the stop or the length limit, and at most
        # to max_model_len tokens in all (RequestSpec.max_model_len_cap).
        cap = np.maximum(config.effective_max_model_len - self.prompt_len, 1)
        if config.stop_check is StopCheck.AT_MAX_TOKENS:
            self.target_len = np.minimum(limit_tokens, cap)
            self.stops_on_stop = np.zeros(n, dtype=bool)  # [n] bool: finishes on its stop (RequestSpec.stops_on_stop)
        else:
            self.target_len = np.minimum(np.where(self.ends_on_stop, np.minimum(output_len + is_string, limit_tokens),
                                                  limit_tokens), cap)
            self.stops_on_stop = self.ends_on_stop & (output_len <= cap)
        # Blocks held at the longest (RequestSpec.max_blocks): the last token generated is never fed back.
        self.max_blocks = cdiv(self.prompt_len + self.target_len - 1, config.block_size)
        self.client = np.array([client_index[s.client_id] for s in specs], dtype=np.int32)  # [n] int32
        self.predicted_len = self.target_len.copy()  # what sjf_predicted believes; set by the queue
        # Dynamic.
        self.status = np.full(n, RequestStatus.NOT_ARRIVED, dtype=np.int8)  # [n] RequestStatus
        self.num_computed_tokens = np.zeros(n, dtype=np.int64)
        self.num_output_tokens = np.zeros(n, dtype=np.int64)
        self.num_tokens = self.prompt_len.copy()  # prompt + output so far
        # [n] bool: has generated a token since its last (re)admission, so each step it computes exactly the token
        # it generated last (a decode, costed per request). A 1-token prompt or a prefill's last 1-token chunk is
        # prefill. Cleared by a recompute preemption; a swapped-out request keeps its KV and stays decoding.
        self.is_decoding = np.zeros(n, dtype=bool)
        self.num_preemptions = np.zeros(n, dtype=np.int32)
        self.first_scheduled_step = np.full(n, NO_STEP, dtype=np.int64)
        self.first_token_step = np.full(n, NO_STEP, dtype=np.int64)
        self.finish_step = np.full(n, NO_STEP, dtype=np.int64)
        self.disconnect_step = np.full(n, NO_STEP, dtype=np.int64)  # client gone (abort_step or timeout)
        self.wait_start_step = self.arrival_step.copy()  # when it last joined the waiting queue
        self.num_cached_tokens = np.zeros(n, dtype=np.int64)  # prefix-cache hit tokens, summed over admissions
        self.num_recomputed_tokens = np.zeros(n, dtype=np.int64)  # prefill tokens spent re-computing
        self.computed_at_preemption = np.zeros(n, dtype=np.int64)  # KV tokens lost at the last recompute
        self.num_wasted_tokens = np.zeros(n, dtype=np.int64)  # generated after disconnect or past the stop
        self.finish_reason: list[str] = [""] * n
        self.preempted_at_steps: list[list[int]] = [[] for _ in range(n)]
        self.resumed_at_steps: list[list[int]] = [[] for _ in range(n)]
        self.swapped_out_at_steps: list[list[int]] = [[] for _ in range(n)]
        self.swapped_in_at_steps: list[list[int]] = [[] for _ in range(n)]

    def __len__(self) -> int:
        return len(self.ids)
