"""The glossary: the serving terms the lessons use, each in one or two plain sentences with its vLLM name (V1) where
it has one, and a Markdown link to its entry on the Glossary page (``term_link``), for a lesson's first use.

Data and text only (no Streamlit calls): ``pages/9_Glossary.py`` draws the entries, ``matching`` filters them for
its search box.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PAGE_PATH = "Glossary"  # the Glossary page's URL path (Streamlit's name for pages/9_Glossary.py), relative


@dataclass(frozen=True)
class Term:
    name: str  # as the page heads it
    text: str  # one or two plain sentences (Markdown)
    vllm: str = ""  # its name in vLLM (V1), Markdown; "" when vLLM has none
    aliases: tuple[str, ...] = ()  # other names term_link and the search accept

    @property
    def anchor(self) -> str:
        """The entry's anchor on the Glossary page: 'token-budget', 'ttft'."""
        return re.sub(r"[^a-z0-9]+", "-", self.name.split(" (")[0].lower()).strip("-")

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name.split(" (")[0], *self.aliases)


TERMS: tuple[Term, ...] = (
    Term("Prefill",
         "Computing the KV cache of a request's prompt (or, after a recompute preemption, of its whole sequence "
         "again), in one step or in chunks over several; the step that completes it also yields the first output "
         "token.",
         "no separate phase in V1: a request prefills while `num_computed_tokens` is below its prompt length"),
    Term("Decode",
         "Generating an answer one token per engine step, once the prompt's KV is in the cache; each decode adds "
         "one token of KV.",
         "V1 schedules decodes and prefill chunks in the same step (a decoding request is scheduled 1 token)"),
    Term("Engine step",
         "One forward pass of the model over the batch the scheduler chose: the lab's unit of time. Every request "
         "in the batch advances by its scheduled tokens.",
         "`EngineCore.step()`: `Scheduler.schedule()`, the model runner, then `update_from_output()`",
         ("step", "iteration")),
    Term("KV block",
         "A fixed-size piece of KV cache memory holding the keys and values of `block_size` tokens (16 by "
         "default) in every layer; a request holds ceil(tokens / block_size) blocks.",
         "`KVCacheBlock`; size set by `--block-size`", ("block", "block_size")),
    Term("Block table",
         "A request's list of block ids in token order: where its KV lives in the pool, which need not be "
         "contiguous (as a page table maps virtual pages).",
         "`req_to_blocks` in the KV cache manager; the `BlockTable` the model runner reads", ("block_table",)),
    Term("Pool (KV block pool)",
         "Every KV block the GPU has room for after the weights, shared by all running requests; when none is "
         "free for a running request's next token, a request is preempted.",
         "`BlockPool`; its size follows `--gpu-memory-utilization` (or `num_gpu_blocks_override`)",
         ("pool", "KV pool", "KV cache", "num_blocks")),
    Term("max_num_seqs",
         "The most requests running at once (the batch slots); a waiting request cannot start while all are "
         "taken, however much memory is free.",
         "`--max-num-seqs`", ("batch slots", "slot")),
    Term("Token budget (max_num_batched_tokens)",
         "The most tokens one engine step may compute, prefill and decode together; running requests take theirs "
         "first, waiting ones get what is left.",
         "`--max-num-batched-tokens`; `token_budget` inside `schedule()`", ("max_num_batched_tokens", "budget")),
    Term("Chunked prefill",
         "Splitting a long prompt's prefill over several steps, each chunk what the token budget leaves after the "
         "decodes, so one long prompt does not stall every stream for one long step.",
         "`--enable-chunked-prefill`, on by default in V1", ("chunking",)),
    Term("Head-of-line blocking",
         "Requests stuck behind the one at the front of the queue: short answers waiting for a long one to free "
         "the only slot, or a preempted request at the head that does not fit while smaller ones would.",
         "", ("HOL blocking",)),
    Term("TTFT (time to first token)",
         "Time from a request's arrival to the end of the step that produced its first token: its queueing delay "
         "plus its prefill.",
         "metric `vllm:time_to_first_token_seconds`", ("time to first token",)),
    Term("TBT (time between tokens)",
         "Time between two consecutive tokens of one answer: one engine step while it decodes, longer when a long "
         "prefill shares the step.",
         "metric `vllm:inter_token_latency_seconds` (inter-token latency, ITL)",
         ("time between tokens", "inter-token latency", "ITL")),
    Term("Queueing delay",
         "Time from a request's arrival until it is first scheduled (its first prefill chunk runs).",
         "metric `vllm:request_queue_time_seconds`", ("queue time", "queueing time")),
    Term("Goodput",
         "Requests per second that meet their latency targets (their SLOs, such as TTFT within 1 s and every gap "
         "between tokens within 100 ms): the work users count. Throughput counts every request served, late or "
         "not.",
         "vLLM's benchmark: `--goodput ttft:1000 tpot:100` (DistServe's definition)", ("SLO goodput",)),
    Term("SLO (service-level objective)",
         "A latency target a request should meet, such as its first token within 1 s (TTFT) or every gap between "
         "two tokens within 100 ms (TBT). Batch traffic may have none.",
         "not a scheduler setting: targets of the serving system, used by vLLM's benchmark (`--goodput`)",
         ("SLO", "SLOs", "latency target")),
    Term("Useful throughput",
         "Output tokens per second that somebody reads: throughput without the tokens generated for a client who "
         "has left or past the answer's end.",
         "", ("tokens read per second",)),
    Term("Admission control",
         "Refusing a request at the door when the server already has too much to do, so those let in can still "
         "meet their targets; the refused client can retry elsewhere (HTTP 503).",
         "`--max-num-queued-reqs` and `--max-num-queued-tokens` (vLLM 0.32)",
         ("max_num_queued_reqs", "max_num_queued_tokens", "request cap", "token cap")),
    Term("Offered load",
         "The requests a second that clients send, whether or not the server keeps up; past the server's capacity "
         "the waiting queue grows for as long as the load lasts.",
         "", ("load", "arrival rate")),
    Term("VTC (virtual token counter)",
         "A fair scheduler (Sheng et al., OSDI '24): one counter per client adds up the weighted prompt and output "
         "tokens it was served, and the next request comes from the waiting client with the lowest counter.",
         "not in vLLM, whose policies are `fcfs` and `priority`: a teaching extension here",
         ("virtual token counter", "virtual counter")),
    Term("Counter lift",
         "VTC's rule for a client whose queue was empty: when it sends again, its counter is raised to the lowest "
         "counter among the clients waiting, so it cannot spend credit 'banked' while away.",
         "", ("lift",)),
    Term("LCF (least counter first)",
         "VTC without the counter lift: a client returning from idle keeps its low counter and is served alone "
         "until it catches up with the others.",
         "", ("least counter first",)),
    Term("Rate limit",
         "A cap on the requests each client may send per time window; the rest are turned away at arrival, even "
         "when the GPU has room to spare.",
         "not vLLM's scheduler: done in front of it (an API gateway or proxy)", ("rate limiting",)),
    Term("Abort",
         "Removing a request whose client has gone (closed the tab, timed out): its batch slot and KV blocks are "
         "freed at once.",
         "`abort_request`, status `FINISHED_ABORTED`; the OpenAI server aborts when the client disconnects",
         ("cancellation",)),
    Term("Stop check",
         "After each step, checking whether the new token ends the answer (a stop token, `max_tokens`, the model "
         "length, or a stop string), so the slot is freed at once.",
         "`check_stop` in `vllm/v1/core/sched/utils.py`; stop strings are matched on detokenized text in the "
         "front end, which then aborts the request", ("stop", "stop token", "stop string")),
    Term("Preemption",
         "Evicting a running request when the pool has no free block for another's next token: FCFS evicts the "
         "last of the running list, `priority` the lowest priority; the victim goes back to the waiting queue.",
         "status `PREEMPTED`; metric `vllm:num_preemptions`", ("preempt", "victim")),
    Term("Recompute",
         "Bringing a preempted request back by prefilling its prompt and generated tokens again when it is "
         "re-admitted (blocks still in the prefix cache are not recomputed).",
         "V1's only preemption mode", ("recomputation",)),
    Term("Swap",
         "Bringing a preempted request back by copying its KV blocks to CPU memory and later back: a PCIe transfer "
         "instead of GPU work, at the price of CPU RAM.",
         "vLLM V0's `preemption_mode=\"swap\"` with `--swap-space`; V1 does not swap", ("swapping", "swap space")),
    Term("Prefix cache",
         "Reusing the KV of full blocks whose tokens, from the start, match blocks already computed (a shared "
         "system prompt, a preempted request's own blocks), found by a chained hash of each block's tokens.",
         "`--enable-prefix-caching`, on by default in V1", ("prefix caching", "automatic prefix caching")),
)


def _key(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name).strip().casefold()


_BY_NAME: dict[str, Term] = {_key(n): t for t in TERMS for n in t.names}


def sorted_terms() -> list[Term]:
    """Every term, alphabetically (case and underscores ignored: 'max_num_seqs' sorts as 'max num seqs')."""
    return sorted(TERMS, key=lambda t: _key(t.name))


def term(name: str) -> Term:
    """The term called ``name`` (or one of its aliases), whatever its case: 'TTFT', 'max_num_batched_tokens'. A
    ValueError lists the terms when there is none."""
    found = _BY_NAME.get(_key(name))
    if found is None:
        raise ValueError(f"term {name!r} is not in the glossary; its terms: "
                         f"{', '.join(t.name for t in sorted_terms())}")
    return found


def term_link(name: str, label: str | None = None) -> str:
    """A Markdown link to the term's entry on the Glossary page, worded ``label`` (default: ``name`` as given):
    ``term_link("TTFT")`` -> '[TTFT](Glossary#ttft)'. The link is relative, so it works under any base URL."""
    t = term(name)
    text = (label or name).replace("[", "\\[").replace("]", "\\]")
    return f"[{text}]({PAGE_PATH}#{t.anchor})"


def matching(query: str) -> list[Term]:
    """The terms (alphabetically) whose name, aliases, text or vLLM name hold every word of ``query`` (case
    ignored); all of them for an empty query."""
    words = _key(query).split()
    return [t for t in sorted_terms()
            if all(w in _key(" ".join([*t.names, t.name, t.text, t.vllm])) for w in words)]
