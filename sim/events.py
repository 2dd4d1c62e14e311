"""What the engine did, as data: event kinds, the reasons behind them, and the ``Event`` record.

The engine and the scheduler emit only events (``RawEvent`` tuples, which ``Trace.events`` turns into ``Event``
records); nobody parses words back out of them. ``describe`` turns one into the sentence the CLI, the CSV export
and the app's step explanations show, so an event is worded in exactly one place. Reasons are ``StrEnum``
members: their values are the strings the result JSON and the ``finish_reason`` column have always held
("length", "rate_limited", ...), and they compare equal to them.

Each kind has a constructor (``arrived``, ``blocked``, ``preempted``, ...) whose arguments are the fields that
kind fills; the rest keep their defaults. ``blocked`` events carry a ``WaitReason``, ``reject`` a ``RejectReason``,
``finish``, ``disconnect`` and ``abort`` a ``FinishReason``, ``preempt`` and ``swap_out`` a ``PreemptReason``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .config import EngineConfig


class EventKind(StrEnum):
    ARRIVE = "arrive"  # joined the waiting queue
    REJECT = "reject"  # refused at arrival, never queued
    DISCONNECT = "disconnect"  # its client left (closed the tab, timed out)
    ABORT = "abort"  # the server noticed and removed it: slot and KV freed
    PROMOTE = "promote"  # the starvation guard moved it ahead of the queue
    BLOCKED = "blocked"  # next in line but could not start this step
    ADMIT = "admit"  # started running (first chunk of its prefill)
    RESUME = "resume"  # re-admitted after a recompute preemption (re-prefill)
    PREEMPT = "preempt"  # evicted, KV freed, to be recomputed
    SWAP_OUT = "swap_out"  # evicted, KV copied to CPU memory
    SWAP_IN = "swap_in"  # KV copied back from CPU memory, running again
    FINISH = "finish"  # generated its last token


class RejectReason(StrEnum):
    EXCEEDS_KV_POOL = "exceeds_kv_pool"  # needs more blocks at its longest than the whole pool
    EXCEEDS_TOKEN_BUDGET = "exceeds_token_budget"  # prompt over max_num_batched_tokens, chunked prefill off
    EXCEEDS_MAX_MODEL_LEN = "exceeds_max_model_len"  # prompt longer than max_model_len
    RATE_LIMITED = "rate_limited"  # its client is over the per-client rate limit
    # vLLM's admission control at the door (async_llm.py, check_admission; both answer HTTP 503), named as vLLM's
    # rejection counter names them
    MAX_NUM_QUEUED_REQS = "max_num_queued_reqs"  # unfinished requests (waiting + running) at the cap
    MAX_NUM_QUEUED_TOKENS = "max_num_queued_tokens"  # prompts of the requests still in prefill at the cap


class FinishReason(StrEnum):
    STOP = "stop"  # ended on a stop token (or string) before max_tokens
    LENGTH = "length"  # reached its length limit
    CLIENT_DISCONNECTED = "client_disconnected"  # aborted: the client closed the connection
    TIMEOUT = "timeout"  # aborted: the client's timeout ran out
    DEADLINE_PASSED = "deadline_passed"  # shed: its TTFT target passed while it waited (the simulator's own)


class WaitReason(StrEnum):
    """Why the next request in line cannot start this step (a ``blocked`` event)."""
    NO_SLOT = "no_slot"  # max_num_seqs requests are running
    BUDGET_USED = "budget_used"  # the step's token budget is spent
    NO_KV_BLOCKS = "no_kv_blocks"  # its whole sequence does not fit in the free blocks
    WATERMARK = "watermark"  # it would leave fewer free blocks than the watermark
    PREFILL_OVER_BUDGET = "prefill_over_budget"  # chunked prefill off, its prefill exceeds the budget left
    PREEMPTED_THIS_STEP = "preempted_this_step"  # a step that preempted admits nobody
    SWAPPED_FIRST = "swapped_first"  # swapped requests come back before any waiting one


class PreemptReason(StrEnum):
    KV_POOL_FULL = "kv_pool_full"  # a running request needed a block and none was free
    SWAP_SPACE_FULL = "swap_space_full"  # as above, and the CPU swap space had no room: recomputed instead


Reason = RejectReason | FinishReason | WaitReason | PreemptReason


class Event(NamedTuple):
    """One thing that happened to one request (``row``) in one engine step. Make one with the constructor of its
    kind below (``arrived``, ``admitted``, ...), which says which fields that kind fills; the others keep their
    defaults (0, or -1 for ``other_row``: no other request)."""
    step: int
    kind: EventKind
    row: int
    reason: Reason | None = None
    num_tokens: int = 0
    num_scheduled_tokens: int = 0
    num_cached_tokens: int = 0
    num_blocks: int = 0
    num_free_blocks: int = 0
    num_cpu_blocks: int = 0
    num_free_cpu_blocks: int = 0
    num_budget_tokens: int = 0
    num_waited_steps: int = 0
    other_row: int = -1


# ---- one constructor per kind ----------------------------------------------------------------------------------
# The engine records an event as a plain tuple of Event's fields, in order (a RawEvent); Trace.events makes the
# records when they are first read (``record``). A run makes ~5 events a request, and making each an Event at once
# cost ~2% of a run (callgrind), paid again by every sweep run that never reads one. The constructors below and
# ``record`` are the only places that know the field order.
#
# A RawEvent holds its kind and reason as plain strings, the members' values, not the members: a tuple of numbers,
# strings and None is one Python's garbage collector stops tracking, while one holding an enum member (an object
# with a __dict__) is traversed by every full collection for as long as it lives. A server keeps hundreds of traces
# cached, up to ~40,000 events each: with members, a full collection took 0.2-0.4 s, holding the interpreter lock
# that every page in the process needs. A kind still compares equal to its member (``raw[1] in {EventKind.ADMIT}``).
RawEvent = tuple  # Event's fields in order, kind and reason as their values; record(raw) is the Event

_ARRIVE, _REJECT, _BLOCKED, _ADMIT, _RESUME, _FINISH = (EventKind.ARRIVE.value, EventKind.REJECT.value,
                                                         EventKind.BLOCKED.value, EventKind.ADMIT.value,
                                                         EventKind.RESUME.value, EventKind.FINISH.value)
_KINDS = {kind.value: kind for kind in EventKind}
_REASONS = {reason.value: reason for reasons in (RejectReason, FinishReason, WaitReason, PreemptReason)
            for reason in reasons}
assert len(_REASONS) == sum(map(len, (RejectReason, FinishReason, WaitReason, PreemptReason))), "reason values clash"
_make = Event._make


def record(raw: RawEvent) -> Event:
    """The ``Event`` of a raw event (its kind and reason as members again)."""
    step, kind, row, reason, *rest = raw
    return _make((step, _KINDS[kind], row, _REASONS.get(reason), *rest))


def _value(reason: Reason | None) -> str | None:
    return None if reason is None else reason.value


def _raw(step: int, kind: EventKind, row: int, reason: Reason | None = None, **fields: int) -> RawEvent:
    """A rare kind's fields by name (Event's defaults for the rest), as a plain tuple."""
    return tuple(Event(step, kind.value, row, _value(reason), **fields))


def arrived(step: int, row: int) -> RawEvent:
    return (step, _ARRIVE, row, None, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1)


def rejected(step: int, row: int, reason: RejectReason) -> RawEvent:
    return (step, _REJECT, row, reason._value_, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1)


def blocked(step: int, row: int, reason: WaitReason, num_tokens: int = 0, num_blocks: int = 0,
            num_free_blocks: int = 0, num_budget_tokens: int = 0) -> RawEvent:
    """Next in line but not started: ``num_blocks`` needed of ``num_free_blocks`` free (no_kv_blocks, watermark);
    a prefill of ``num_tokens`` over the ``num_budget_tokens`` left (prefill_over_budget)."""
    return (step, _BLOCKED, row, reason._value_, num_tokens, 0, 0, num_blocks, num_free_blocks, 0, 0, num_budget_tokens,
            0, -1)


def admitted(step: int, row: int, is_resume: bool, num_tokens: int, num_scheduled_tokens: int,
             num_cached_tokens: int) -> RawEvent:
    """Started (or, ``is_resume``, restarted after a recompute preemption) with a prefill of ``num_tokens``, of which
    ``num_cached_tokens`` came from the prefix cache and ``num_scheduled_tokens`` run this step."""
    return (step, _RESUME if is_resume else _ADMIT, row, None, num_tokens, num_scheduled_tokens, num_cached_tokens,
            0, 0, 0, 0, 0, 0, -1)


def finished(step: int, row: int, reason: FinishReason, num_tokens: int) -> RawEvent:
    """Generated its last token, ``num_tokens`` in all."""
    return (step, _FINISH, row, reason._value_, num_tokens, 0, 0, 0, 0, 0, 0, 0, 0, -1)


def disconnected(step: int, row: int, reason: FinishReason) -> RawEvent:
    """Its client left (``client_disconnected`` or ``timeout``); the config says whether and when the server
    notices."""
    return _raw(step, EventKind.DISCONNECT, row, reason)


def aborted(step: int, row: int, reason: FinishReason, num_blocks: int) -> RawEvent:
    """Removed by the server after its client left: ``num_blocks`` KV blocks freed."""
    return _raw(step, EventKind.ABORT, row, reason, num_blocks=num_blocks)


def promoted(step: int, row: int, num_waited_steps: int) -> RawEvent:
    return _raw(step, EventKind.PROMOTE, row, num_waited_steps=num_waited_steps)


def preempted(step: int, row: int, needed_by: int, num_blocks: int, num_cpu_blocks: int = 0,
              num_free_cpu_blocks: int = -1) -> RawEvent:
    """Evicted to be recomputed because ``needed_by`` (maybe itself) needed a block: ``num_blocks`` freed. With
    ``num_free_cpu_blocks`` >= 0 it was meant to be swapped out but the CPU swap space had only that many free of the
    ``num_cpu_blocks`` its KV needed."""
    if num_free_cpu_blocks < 0:
        return _raw(step, EventKind.PREEMPT, row, PreemptReason.KV_POOL_FULL, num_blocks=num_blocks,
                     other_row=needed_by)
    return _raw(step, EventKind.PREEMPT, row, PreemptReason.SWAP_SPACE_FULL, num_blocks=num_blocks,
                 num_cpu_blocks=num_cpu_blocks, num_free_cpu_blocks=num_free_cpu_blocks, other_row=needed_by)


def swapped_out(step: int, row: int, needed_by: int, num_cpu_blocks: int) -> RawEvent:
    """Evicted because ``needed_by`` needed a block; its KV, ``num_cpu_blocks`` blocks, copied to CPU memory."""
    return _raw(step, EventKind.SWAP_OUT, row, PreemptReason.KV_POOL_FULL, num_cpu_blocks=num_cpu_blocks,
                 other_row=needed_by)


def swapped_in(step: int, row: int, num_cpu_blocks: int) -> RawEvent:
    """Running again: ``num_cpu_blocks`` blocks copied back from CPU memory."""
    return _raw(step, EventKind.SWAP_IN, row, num_cpu_blocks=num_cpu_blocks)


# ---- words ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def with_commas(n: int) -> str:
    """'512', '2,048'."""
    return f"{n:,}"


@functools.lru_cache(maxsize=4096)
def counted(n: int, noun: str) -> str:
    """'1 block', '2,048 blocks'."""
    return f"1 {noun}" if n == 1 else f"{with_commas(n)} {noun}s"


def join_and(items: Sequence[str]) -> str:
    """'x', 'x and y', 'x, y and z' ('' for none)."""
    items = list(items)
    return " and ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else "".join(items)


# ---- refusals: why a request was rejected on arrival --------------------------------------------------------
# One sentence per RejectReason, said alike by every surface that gives the reason: ``describe`` (the CLI, the CSV
# export, the step explanations), a scenario file's error (``sim.admission.rejection_message``), the workbench's
# cell problems and the lesson pages' warning. Each caller adds its own lead-in ("rejected: ", "requests[3] (id
# 'a'): ") and advice (which setting to change); the reason's words are these. The engine's figures come from
# ``config``; the request's are optional, as not every caller has them (a ``reject`` event carries none): a
# sentence without them says the same rule. ``who`` is its subject ("it", "they", "2 requests"); ``many``: it is
# about several requests, and the figures given are the largest of theirs ("up to"). The sentence of a waiting
# request shed past its TTFT target (``shed``, an abort's) lives here too.
def _verb(many: bool, one: str, several: str) -> str:
    return several if many else one


def over_kv_pool(config: EngineConfig, num_blocks: int | None = None, prompt_len: int | None = None,
                 output_len: int | None = None, *, who: str = "it", many: bool = False) -> str:
    """``exceeds_kv_pool``: at its longest (prompt + the answer it would generate) the request needs
    ``num_blocks`` KV blocks, more than the whole pool: it could never run even alone."""
    pool = (f"the whole KV pool (num_blocks: {counted(config.num_blocks, 'block')} of "
            f"{counted(config.block_size, 'token')} = {counted(config.num_blocks * config.block_size, 'token')})")
    its = _verb(many, "its", "their")
    lengths = "prompt + answer"
    if prompt_len is not None and output_len is not None:
        lengths = f"prompt {with_commas(prompt_len)} + answer {counted(output_len, 'token')}"
    if num_blocks is None:
        return f"{who} {_verb(many, 'needs', 'need')} more KV blocks at {its} longest ({lengths}) than {pool}"
    up_to = "up to " if many else ""
    return (f"{who} {_verb(many, 'needs', 'need')} {up_to}{counted(num_blocks, 'KV block')} at {its} longest "
            f"({lengths}), more than {pool}")


def _prompt_over(limit: str, prompt_len: int | None, who: str, many: bool) -> str:
    has = _verb(many, "has a prompt", "have prompts")
    if prompt_len is None:
        return f"{who} {has} longer than {limit}"
    of = _verb(many, "of", "of up to")
    return f"{who} {has} {of} {counted(prompt_len, 'token')}, longer than {limit}"


def over_token_budget(config: EngineConfig, prompt_len: int | None = None, *, who: str = "it",
                      many: bool = False) -> str:
    """``exceeds_token_budget``: chunked prefill is off, so a prompt is computed in one step, and this one is
    longer than a step's whole budget."""
    budget = f"one step's token budget (max_num_batched_tokens: {counted(config.max_num_batched_tokens, 'token')})"
    return _prompt_over(budget, prompt_len, who, many) + ", and chunked prefill is off"


def over_max_model_len(config: EngineConfig, prompt_len: int | None = None, *, who: str = "it",
                       many: bool = False) -> str:
    """``exceeds_max_model_len``: the prompt alone is longer than the longest sequence the engine accepts."""
    limit = (f"the longest sequence the engine accepts (max_model_len: "
             f"{counted(config.effective_max_model_len, 'token')})")
    return _prompt_over(limit, prompt_len, who, many)


def over_rate_limit() -> str:
    """``rate_limited``: its client had sent its ``rate_limit_max_requests`` in the window already. (Without
    figures: the sentence is part of every rate-limited run's events, which reference digests pin.)"""
    return "the client is over its rate limit"


def over_queued_reqs(config: EngineConfig) -> str:
    """``max_num_queued_reqs``: the unfinished requests (waiting or running) already fill vLLM's cap."""
    cap = config.max_num_queued_reqs or 0
    return (f"the server's unfinished requests (waiting or running) are at its cap (max_num_queued_reqs: "
            f"{counted(cap, 'request')}): HTTP 503, for a load balancer to retry it elsewhere")


def over_queued_tokens(config: EngineConfig) -> str:
    """``max_num_queued_tokens``: the prompts of the requests still in prefill already fill vLLM's cap."""
    cap = config.max_num_queued_tokens or 0
    return (f"the prompts of the requests still in prefill add up to its cap or more (max_num_queued_tokens: "
            f"{counted(cap, 'token')}): HTTP 503, for a load balancer to retry it elsewhere")


def shed(config: EngineConfig) -> str:
    """``deadline_passed``: a waiting request dropped because its TTFT target had passed (the simulator's own)."""
    return (f"shed: its time-to-first-token target (ttft_slo_ms: {config.ttft_slo_ms:,g} ms) passed while it waited, "
            f"so it left the waiting queue")


def refusal(reason: RejectReason, config: EngineConfig, *, num_blocks: int | None = None,
            prompt_len: int | None = None, output_len: int | None = None, who: str = "it",
            many: bool = False) -> str:
    """The sentence of ``reason`` (above) with the figures it uses: "it has a prompt of 120 tokens, longer than
    the longest sequence the engine accepts (max_model_len: 100 tokens)"."""
    if reason is RejectReason.EXCEEDS_KV_POOL:
        return over_kv_pool(config, num_blocks, prompt_len, output_len, who=who, many=many)
    if reason is RejectReason.EXCEEDS_TOKEN_BUDGET:
        return over_token_budget(config, prompt_len, who=who, many=many)
    if reason is RejectReason.EXCEEDS_MAX_MODEL_LEN:
        return over_max_model_len(config, prompt_len, who=who, many=many)
    if reason is RejectReason.MAX_NUM_QUEUED_REQS:
        return over_queued_reqs(config)
    if reason is RejectReason.MAX_NUM_QUEUED_TOKENS:
        return over_queued_tokens(config)
    return over_rate_limit()


def _blocked(e: Event, config: EngineConfig) -> str:
    reason = e.reason
    if reason is WaitReason.NO_SLOT:
        n = config.max_num_seqs
        return "the only batch slot (max_num_seqs = 1) is taken" if n == 1 else \
            f"all {n} batch slots (max_num_seqs) are taken"
    if reason is WaitReason.NO_KV_BLOCKS:
        return (f"needs {counted(e.num_blocks, 'KV block')} for its whole sequence, only "
                f"{with_commas(e.num_free_blocks)} free")
    if reason is WaitReason.WATERMARK:
        return (f"would leave {counted(e.num_free_blocks - e.num_blocks, 'free block')}, below the watermark of "
                f"{config.watermark_blocks:,}")
    if reason is WaitReason.PREFILL_OVER_BUDGET:
        return (f"its prefill of {counted(e.num_tokens, 'token')} exceeds the {counted(e.num_budget_tokens, 'token')}"
                f" left (chunked prefill is off)")
    return {
        WaitReason.BUDGET_USED: "the step's token budget is used up",
        WaitReason.PREEMPTED_THIS_STEP: "a preemption happened this step, so nothing is admitted",
        WaitReason.SWAPPED_FIRST: "swapped requests resume before any waiting request",
    }[reason]


def _preempted(e: Event, request_ids: Sequence[str], config: EngineConfig) -> str:
    who = "itself" if e.other_row == e.row else request_ids[e.other_row]
    from .policies import spec_of  # (late: the records pull in the queues and numpy; this module needs neither)

    rule = ("victim = lowest priority (largest priority, arrival)" if spec_of(config.policy).victim == "lowest_priority"
            else "victim = last request in the running list")
    why = f"KV pool full: {who} needed a new block and none was free; {rule}"
    if e.kind is EventKind.SWAP_OUT:
        return f"{why}; {counted(e.num_cpu_blocks, 'block')} copied to CPU memory"
    if e.reason is PreemptReason.SWAP_SPACE_FULL:
        why += (f"; CPU swap space full ({e.num_free_cpu_blocks} of {e.num_cpu_blocks} blocks free), fell back to "
                f"recompute")
    return f"{why}; {counted(e.num_blocks, 'block')} freed, KV will be recomputed"


def _admitted(e: Event) -> str:
    hit = f", {counted(e.num_cached_tokens, 'token')} from the prefix cache" if e.num_cached_tokens else ""
    whole = e.num_scheduled_tokens + e.num_cached_tokens >= e.num_tokens  # (not a chunk: all of it, this step)
    if e.kind is EventKind.RESUME:
        rest = ", all in this step" if whole else f"; first chunk {with_commas(e.num_scheduled_tokens)}"
        return f"re-prefill of {counted(e.num_tokens, 'token')}{hit}{rest}"
    if whole:
        return f"admitted with its whole prompt of {counted(e.num_tokens, 'token')}{hit}"
    return f"admitted with a first chunk of {counted(e.num_scheduled_tokens, 'token')}{hit}"


def _disconnected(e: Event, config: EngineConfig) -> str:
    what = "client timed out" if e.reason is FinishReason.TIMEOUT else "client disconnected"
    if not config.abort_on_disconnect:
        return what + "; the server keeps generating for nobody"
    delay = config.disconnect_detect_delay_steps
    return what + (f"; the server notices in {delay} steps" if delay else "")


def _promoted(e: Event, config: EngineConfig) -> str:
    return (f"waited {e.num_waited_steps:,} steps (starvation guard threshold: {config.starvation_threshold_steps:,}):"
            f" moved ahead of every request not promoted, for {config.priority_quantum_steps:,} steps of running")


def describe(event: Event, request_ids: Sequence[str], config: EngineConfig) -> str:
    """The event in plain words, without the request's id: "needs 12 KV blocks for its whole sequence, only 3
    free". ``request_ids`` names the other request of a preemption; ``config`` is the run's (the rule behind a
    victim, the batch size, the watermark)."""
    kind = event.kind
    if kind is EventKind.BLOCKED:
        return _blocked(event, config)
    if kind is EventKind.PREEMPT or kind is EventKind.SWAP_OUT:
        return _preempted(event, request_ids, config)
    if kind is EventKind.ADMIT or kind is EventKind.RESUME:
        return _admitted(event)
    if kind is EventKind.FINISH:
        return f"finished ({event.reason}) after {counted(event.num_tokens, 'token')}"
    if kind is EventKind.SWAP_IN:
        return f"{counted(event.num_cpu_blocks, 'block')} copied back from CPU memory"
    if kind is EventKind.REJECT:  # (the event holds no figures of the request: the sentence says the rule)
        return "rejected: " + refusal(event.reason, config)
    if kind is EventKind.DISCONNECT:
        return _disconnected(event, config)
    if kind is EventKind.PROMOTE:
        return _promoted(event, config)
    if kind is EventKind.ABORT:
        return shed(config) if event.reason is FinishReason.DEADLINE_PASSED else "aborted: slot and KV blocks freed now"
    return "joined the waiting queue"  # arrive
