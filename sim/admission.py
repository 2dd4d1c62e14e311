"""Who may run: the rules that reject a request at arrival and the rules that keep a waiting one out this step.

Rejection (at arrival, for good; vLLM refuses such a request when it is added; docs/ENGINE.md#rejection-at-arrival):
its prompt exceeds the step's token budget with chunked prefill off, or exceeds max_model_len, or it needs more KV
blocks at its longest than the whole pool. A client over its rate limit is rejected by the engine
(``RejectReason.RATE_LIMITED``), which keeps the per-client windows.

Refusal (this step only; docs/ENGINE.md#admission): no free slot (``max_num_seqs``), no budget left, a prefill
too large for the budget left with chunked prefill off, too few free blocks for its whole sequence, or free blocks
that would fall below the watermark. The scheduler works out what a request needs (cache hits, blocks); the rules
here only compare numbers, so the fast-forward and the step loop refuse alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .events import RawEvent, RejectReason, WaitReason, blocked, refusal

if TYPE_CHECKING:
    from .config import EngineConfig
    from .request import RequestSpec, RequestTable


# ---- rejection at arrival ------------------------------------------------------------------------------------
# The reasons of the rules below: a request rejected for one can never run on this engine, whenever it comes. (The
# engine's other rejection, a client over its rate limit, is about when the request came, not what it asks.)
NEVER_RUNS = (RejectReason.EXCEEDS_KV_POOL, RejectReason.EXCEEDS_TOKEN_BUDGET, RejectReason.EXCEEDS_MAX_MODEL_LEN)


def rejection_reason(spec: RequestSpec, config: EngineConfig) -> RejectReason | None:
    """Why a request can never run on this engine (None if it can). Its prompt's length first, as vLLM checks it
    on arrival (without chunked prefill max_model_len is at most the budget: a prompt over it is said so)."""
    if not config.chunked_prefill and spec.prompt_len > config.max_num_batched_tokens:
        return RejectReason.EXCEEDS_TOKEN_BUDGET
    if spec.prompt_len > config.effective_max_model_len:
        return RejectReason.EXCEEDS_MAX_MODEL_LEN
    if spec.max_blocks(config) > config.num_blocks:
        return RejectReason.EXCEEDS_KV_POOL
    return None


def rejection_reasons(t: RequestTable, config: EngineConfig) -> list[RejectReason | None]:
    """``rejection_reason`` of every request in the table, computed on its arrays (a later rule overwrites an
    earlier one, so they are listed from the last checked to the first)."""
    reasons: list[RejectReason | None] = [None] * len(t)
    rules = [(t.max_blocks > config.num_blocks, RejectReason.EXCEEDS_KV_POOL),
             (t.prompt_len > config.effective_max_model_len, RejectReason.EXCEEDS_MAX_MODEL_LEN)]
    if not config.chunked_prefill:
        rules.append((t.prompt_len > config.max_num_batched_tokens, RejectReason.EXCEEDS_TOKEN_BUDGET))
    for applies, reason in rules:
        for row in np.flatnonzero(applies).tolist():
            reasons[row] = reason
    return reasons


def rejection_message(spec: RequestSpec, config: EngineConfig, *, who: str = "it") -> str:
    """``rejection_reason`` in words, with the request's figures ('' if it can run): ``sim.events.refusal``'s
    sentence, "it needs 13 KV blocks at its longest (prompt 100 + answer 99 tokens), more than the whole KV pool
    (...)". ``who``: its subject."""
    reason = rejection_reason(spec, config)
    if reason is None:
        return ""
    answer = spec.generated_len(config.stop_check, config.effective_max_model_len)  # (at its longest)
    return refusal(reason, config, num_blocks=spec.max_blocks(config), prompt_len=spec.prompt_len,
                   output_len=answer, who=who)


# ---- refusal this step ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class Refusal:
    """Why a request cannot start now: a ``blocked`` event without its step and row (the fast-forward keeps one
    and logs it at several steps). Fields as in ``Event``. (A slotted class: ~2,000 are made a run, and a
    NamedTuple costs three times as much to make.)"""
    reason: WaitReason
    num_tokens: int = 0
    num_blocks: int = 0
    num_free_blocks: int = 0
    num_budget_tokens: int = 0

    def event(self, step: int, row: int) -> RawEvent:
        return blocked(step, row, self.reason, self.num_tokens, self.num_blocks, self.num_free_blocks,
                       self.num_budget_tokens)


NO_SLOT = Refusal(WaitReason.NO_SLOT)
BUDGET_USED = Refusal(WaitReason.BUDGET_USED)


class AdmissionRules:
    """The refusal rules, with the config's numbers looked up once: they run thousands of times a run."""

    def __init__(self, config: EngineConfig):
        self.max_num_seqs = config.max_num_seqs
        self.chunked_prefill = config.chunked_prefill
        # (vLLM's allocate_slots: only for waiting and preempted requests, and only while something runs)
        self.watermark_blocks = config.watermark_blocks

    def slot_or_budget(self, num_running: int, budget_tokens: int) -> Refusal | None:
        """The rules no request can pass, whatever its size: budget left, a free slot."""
        if budget_tokens <= 0:
            return BUDGET_USED
        if num_running >= self.max_num_seqs:
            return NO_SLOT
        return None

    def prefill_or_room(self, num_prefill_tokens: int, budget_tokens: int, blocks_needed: int, num_free_blocks: int,
                        num_running: int) -> Refusal | None:
        """The rules on the request's size, once it has a slot and budget: without chunked prefill its prefill
        must fit the budget left (a prompt over the whole budget was rejected at arrival); its whole sequence must
        fit in the free blocks; and, while something runs, it must leave at least the watermark free."""
        # Without chunked prefill max_model_len <= max_num_batched_tokens (config), and a request stops at
        # max_model_len tokens, so its prefill (a resumed one's too) always fits a whole step's budget.
        if not self.chunked_prefill and budget_tokens < num_prefill_tokens:
            return Refusal(WaitReason.PREFILL_OVER_BUDGET, num_prefill_tokens, 0, 0, budget_tokens)
        if blocks_needed > num_free_blocks:
            return Refusal(WaitReason.NO_KV_BLOCKS, 0, blocks_needed, num_free_blocks, 0)
        if self.watermark_blocks and num_running and num_free_blocks - blocks_needed < self.watermark_blocks:
            return Refusal(WaitReason.WATERMARK, 0, blocks_needed, num_free_blocks, 0)
        return None
