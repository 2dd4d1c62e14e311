"""Admission at the door: whether an arriving request may join the waiting queue, once the rules on what it asks for
(sim/admission.py: a request that can never run) have passed it (docs/ENGINE.md#admission-at-the-door).

In this order:
1. the per-client rate limit (the simulator's own): ``rate_limit_max_requests`` of the client's requests accepted
   in the last ``rate_limit_window_steps`` steps (``RejectReason.RATE_LIMITED``);
2. vLLM 0.32's caps, as ``AsyncLLM.check_admission`` (vllm/v1/engine/async_llm.py) applies them, the request cap
   first:
   - ``max_num_queued_reqs``: refused when the unfinished requests plus the request's ``n`` would pass the cap
     (``current_requests + n > max_num_reqs``). Unfinished: accepted and not ended, waiting, running, preempted
     or swapped (vLLM counts the output processor's ``request_states``, ``get_num_unfinished_requests``);
   - ``max_num_queued_tokens``: refused when the prompts of the unfinished requests still in prefill add up to the
     cap or more (``current_tokens >= max_queued_tokens``): each counts its whole ``prompt_len`` (chunks computed
     and prefix-cache hits are not subtracted) until its first token comes out (vLLM's output processor clears
     ``is_prefilling`` at a request's first output, ``OutputProcessor.get_num_queued_tokens``).
   The request being checked is not counted in either; once accepted it counts at once (vLLM registers it with the
   output processor before its first await), so a later arrival of the same step sees it.

A request's ``n`` is always 1 here: the simulator has no parallel sampling (docs/ENGINE.md#admission-at-the-door says
why); ``over_request_cap`` takes it as vLLM's comparison does.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING

import numpy as np

from .events import RejectReason
from .request import NO_STEP

if TYPE_CHECKING:
    from .config import EngineConfig
    from .request import RequestTable

N = 1  # sequences a request occupies (vLLM's SamplingParams.n): always 1, the simulator has no parallel sampling


def over_request_cap(num_unfinished: int, n: int, max_num_queued_reqs: int) -> bool:
    """vLLM's request cap: ``current_requests + n > max_num_reqs`` (a request with ``n`` samples counts ``n``)."""
    return num_unfinished + n > max_num_queued_reqs


def over_token_cap(num_prefill_tokens: int, max_num_queued_tokens: int) -> bool:
    """vLLM's token cap: ``current_tokens >= max_queued_tokens``, whatever the new request's own prompt."""
    return num_prefill_tokens >= max_num_queued_tokens


class Door:
    """The rate limit's per-client windows and the counts vLLM's caps read: unfinished requests and the prompt tokens
    of those still in prefill. The engine tells it who enters (``enter``), who generates a first token
    (``first_tokens``, from execute) and who ends after entering (``leave``)."""

    def __init__(self, config: EngineConfig, table: RequestTable):
        self.table = table
        self.rate_limit, self.window_steps = config.rate_limit_max_requests, config.rate_limit_window_steps
        self.max_reqs, self.max_tokens = config.max_num_queued_reqs, config.max_num_queued_tokens
        self.counts = self.max_reqs is not None or self.max_tokens is not None  # (vLLM's caps are on)
        # client -> the steps of its accepted arrivals in the window (made at a client's first arrival: a run may
        # have thousands of clients)
        self._windows: defaultdict[int, deque[int]] = defaultdict(deque)
        self.num_unfinished = 0  # accepted and not ended
        self.num_prefill_tokens = 0  # prompt tokens of those without a first token yet

    @classmethod
    def of(cls, config: EngineConfig, table: RequestTable) -> Door | None:
        """The engine's door, or None when nothing is checked there (no rate limit, no cap)."""
        on = config.rate_limit_max_requests or config.max_num_queued_reqs is not None \
            or config.max_num_queued_tokens is not None
        return cls(config, table) if on else None

    def refusal(self, row: int, step: int) -> RejectReason | None:
        """Why request ``row``, arriving at ``step``, is turned away at the door (None: it may enter)."""
        if self.rate_limit:
            window = self._windows[self.table.client.item(row)]
            while window and window[0] <= step - self.window_steps:
                window.popleft()
            if len(window) >= self.rate_limit:
                return RejectReason.RATE_LIMITED
        if self.max_reqs is not None and over_request_cap(self.num_unfinished, N, self.max_reqs):
            return RejectReason.MAX_NUM_QUEUED_REQS
        if self.max_tokens is not None and over_token_cap(self.num_prefill_tokens, self.max_tokens):
            return RejectReason.MAX_NUM_QUEUED_TOKENS
        return None

    def enter(self, row: int, step: int) -> None:
        """Request ``row`` was accepted at ``step``: it joins its client's window and the counts."""
        if self.rate_limit:
            self._windows[self.table.client.item(row)].append(step)
        if self.counts:
            self.num_unfinished += 1
            self.num_prefill_tokens += self.table.prompt_len.item(row)

    def first_tokens(self, rows: np.ndarray) -> None:
        """``rows`` generated their first token this step: their prefill is over (for good: a preempted request that
        recomputes is not prefilling again, as vLLM's ``is_prefilling`` stays off)."""
        self.num_prefill_tokens -= int(self.table.prompt_len[rows].sum())

    def leave(self, row: int) -> None:
        """Request ``row``, accepted earlier, ended (finished, aborted or shed)."""
        if self.counts:
            self.num_unfinished -= 1
            if self.table.first_token_step.item(row) == NO_STEP:
                self.num_prefill_tokens -= self.table.prompt_len.item(row)
