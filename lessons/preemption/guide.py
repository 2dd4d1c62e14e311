"""Preemption's guided path: the toy pool (who is evicted), recompute vs swap for a 2,000-token victim, prefix-cache
hits on a re-prefill, and sizing. Each question's answer is read from the step's runs (``lessons/guided.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lessons.problems import Problem, fmt
from lessons.run import Run
from sim.events import join_and
from sim.preemption_metrics import preemption_cost, preemptions
from sim.scenario import Scenario
from sim.trace import Trace
from ui.glossary import term_link
from ui.wording import count

from ..guided import Setting, Step, Values, choice_question, config_setting

VICTIM_POLICY = config_setting("policy", "policy", "Policy", "fcfs", ("fcfs", "priority"),
                               {"fcfs": "FCFS victim", "priority": "priority victim"}, names_run=True)
_VICTIM_RULE = {"fcfs": "FCFS evicts the last request of the running list (the one admitted last)",
                "priority": "priority evicts the running request with the largest priority value (the least urgent)"}
_REQUEUED = {"fcfs": "at its front", "priority": "in priority order"}  # (vLLM: prepend; a priority heap re-sorts)


def _pool_scene(scenario: Scenario) -> tuple[list[str], str]:
    """The ids of the requests that start together, and the scene as the question says it (read from the
    scenario): 'A, B, C and D (priorities 1, 0, 2, 0) start together and grow 200-token answers in a pool ...'."""
    config = scenario.config
    first = [r for r in scenario.requests if r.arrival_step == 0]
    later = [r for r in scenario.requests if r.arrival_step > 0]
    ids = [r.request_id for r in first]
    lengths = "- or ".join(f"{n:,}" for n in sorted({r.output_len for r in first}))
    scene = (f"{join_and(ids)} (priorities {', '.join(str(r.priority) for r in first)}) start together and grow "
             f"{lengths}-token answers in a pool of {config.num_blocks} blocks of {config.block_size} tokens"
             + "".join(f"; {r.request_id} arrives at step {r.arrival_step:,}" for r in later)
             + (f" and waits: the {config.max_num_seqs} batch slots are taken"
                if later and len(first) >= config.max_num_seqs else ""))
    return ids, scene


def _ask_victim(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    first = preemptions(run.trace)[0]
    policy = run.scenario.config.policy.value
    needer = run.trace.request_ids[first.needed_by_row]
    ids, scene = _pool_scene(run.scenario)
    rule = _VICTIM_RULE[policy]
    mistakes = {rid: f"{rule}: {first.request_id}." for rid in ids}
    if needer != first.request_id:
        mistakes[needer] = f"{needer} is the one that needed a block; the victim is chosen by the rule: {rule}."
    return choice_question(
        "victim", runs, f"Policy {run.label.split()[0]}. {scene}. When the pool is full, which request is preempted "
                        f"first?", ids, first.request_id,
        f"At step {first.step:,} {needer} needs a new block and none is free; {rule}: {first.request_id}. It goes back "
        f"to the waiting queue, {_REQUEUED[policy]}, and its KV is freed (the triangle in the Gantt and KV charts).",
        "Who was admitted last? Who is least urgent?", mistakes)


def _bandwidth(scenario: Scenario, gb_s: float) -> Scenario:
    cost = dataclasses.replace(scenario.config.cost, swap_bandwidth_gb_s=gb_s)
    return scenario.with_config(cost=cost)


BANDWIDTH = Setting("swap_gb_s", "PCIe bandwidth for a swap (GB/s)", 50.0, (5.0, 25.0, 50.0), _bandwidth)
_RECOMPUTE, _SWAP, _EVEN = ("recompute is faster", "swap is faster", "about the same (within 20%)")


def _ask_cost(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    victim = preemptions(run.trace)[0]
    config = run.scenario.config
    cost = preemption_cost(victim.num_tokens, config)
    swap_ms = 2 * cost.swap_ms  # out and back in: the swap bar of the chart below
    ratio = cost.recompute_ms / swap_ms
    answer = _EVEN if 1 / 1.2 <= ratio <= 1.2 else _SWAP if ratio > 1 else _RECOMPUTE
    gb_s = config.cost.swap_bandwidth_gb_s
    return choice_question(
        "cost", runs, f"In the run below a pool of {config.num_blocks:,} blocks runs out at step {victim.step:,} and "
                      f'request "{victim.request_id}" is preempted, holding {victim.num_tokens:,} tokens of KV. '
                      "Bringing it back: "
                      f"{term_link('recompute')} prefills them again "
                      f"({fmt(config.cost.prefill_token_us)} us a token plus a "
                      f"{fmt(config.cost.step_base_ms, 2)}-ms step), {term_link('swap')} copies its blocks to CPU "
                      f"memory and back ({config.model.kv_bytes_per_token // 1024} KiB a token, {gb_s:g} GB/s). "
                      f"Which is faster?", (_RECOMPUTE, _SWAP, _EVEN), answer,
        f"Recompute: {fmt(cost.recompute_ms)} ms of GPU work. Swap: {cost.swap_bytes / 1e6:,.0f} MB each way, "
        f"{fmt(cost.swap_ms, 2)} ms each way at {gb_s:g} GB/s with the per-block overhead, {fmt(swap_ms, 1)} ms out "
        "and back, and the CPU RAM held meanwhile. vLLM V1 only recomputes: simpler, and a prefix cache can make it "
        "cheaper. The bars below compare them.",
        "Work out both: tokens x time per token, and bytes / bandwidth (out and back).",
        {c: f"recompute takes {fmt(cost.recompute_ms)} ms and swap {fmt(swap_ms, 1)} ms out and back at {gb_s:g} GB/s."
         for c in (_RECOMPUTE, _SWAP, _EVEN)})


CACHING = config_setting("caching", "enable_prefix_caching", "Prefix caching", True, (False, True),
                         {False: "prefix caching off", True: "prefix caching on"}, names_run=True)
_NONE, _UNDER, _OVER = ("none of them", "some, under half", "more than half")


def _ask_hits(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    back = [p for p in preemptions(run.trace) if p.resume_step >= 0]
    resumed = sum(p.num_resume_tokens for p in back)
    hits = sum(p.num_cached_tokens for p in back)
    share = hits / resumed if resumed else 0.0
    answer = _NONE if hits == 0 else _UNDER if share < 0.5 else _OVER
    on = run.scenario.config.enable_prefix_caching
    shared = run.scenario.workload.prefix_len if run.scenario.workload is not None else 0
    found = (f"{hits:,} of them ({share:.0%}) found in the {term_link('prefix cache')}: the shared prompt's blocks, "
             "and the victim's own freed blocks that nobody reused yet. Without the cache every token is computed "
             "again." if on else
             f"none of them from a cache: with prefix caching off, a re-admitted request computes all its tokens "
             f"again, the shared {shared:,}-token prompt included.")
    return choice_question(
        "hits", runs, f"Every request starts with the same {shared:,}-token system prompt; the pool is too small, so "
                      f"requests are preempted and recomputed. With prefix caching {'on' if on else 'off'}, how many "
                      "of the re-prefilled tokens are cache hits?", (_NONE, _UNDER, _OVER), answer,
        f"{count(len(back), 're-admission')} prefilled {resumed:,} tokens, {found}",
        "What stays in a freed block until another request takes it?",
        {c: f"{hits:,} of {resumed:,} re-prefilled tokens ({share:.0%}) were hits." for c in (_NONE, _UNDER, _OVER)})


POOL = config_setting("num_blocks", "num_blocks", "KV pool (blocks)", 1200, (1200, 1600, 2000))
SEQS = config_setting("max_num_seqs", "max_num_seqs", "Batch slots (max_num_seqs)", 32, (16, 32))
_YES, _NO = "yes, some are preempted", "no preemption"


def _ask_sizing(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    c, requests = run.scenario.config, run.scenario.requests
    longest = max(r.prompt_len + r.output_len for r in requests)
    num = int(run.summary["num_preemptions"])
    peak = int(run.trace.steps["used_blocks"].max())
    held = f"at the busiest step the running requests held {peak:,} of the pool's {c.num_blocks:,} blocks"
    reasoning = (
        f"{count(num, 'preemption')}: {held}. A request is admitted when its prompt fits; then every running answer "
        f"grows a token a step, and a request is preempted when the {c.max_num_seqs} answers growing at once need a "
        "block that is not free: "
        + ("it happened here. A larger pool, or fewer slots (more queueing), leaves more room for each growing "
           "answer" if num else "here the pool always had one")
        + ". Preemptions step after step would mean the engine is sized wrong.")
    return choice_question(
        "sizing", runs, f"{len(requests)} requests of up to {longest:,} tokens (prompt + answer) arrive within "
                        f"{max(r.arrival_step for r in requests) + 1:,} steps. The engine has {c.max_num_seqs} batch "
                        f"slots and a pool of {c.num_blocks:,} blocks of {c.block_size} tokens. Are requests "
                        f"preempted?", (_YES, _NO), _YES if num else _NO, reasoning,
        "Compare what the slots can grow into with the pool.",
        {_YES: f"{held}: every answer could grow to its end, no preemption.",
         _NO: f"the {c.max_num_seqs} answers growing at once ran the pool out: {count(num, 'preemption')}."})


def _first_preemption(trace: Trace) -> int:
    """The player starts at the step the victim is preempted."""
    found = preemptions(trace)
    return found[0].step if found else 0


STEPS = (
    Step("victim", "The toy pool: who is evicted?",
         f"Four answers grow together in a {term_link('pool', 'KV pool')} of 32 {term_link('KV block', 'blocks')} "
         f"of 16 tokens. When a request needs a block and none is free, the scheduler must "
         f"{term_link('preemption', 'preempt')} someone.",
         "toy_pool", ("FCFS victim",), _ask_victim, ("gantt", "kv_requests"), (VICTIM_POLICY,),
         start_step=_first_preemption),
    Step("cost", "Recompute or swap?",
         "A preempted request has lost its place, not its text. It can come back two ways: compute its KV again, or "
         "have kept a copy in CPU memory.",
         "recompute_vs_swap", ("recompute",), _ask_cost, ("cost", "gantt"), (BANDWIDTH,),
         start_step=_first_preemption),
    Step("hits", "Prefix caching softens recompute",
         "Full blocks are hashed by their tokens. A freed block keeps its KV until it is reused, so a re-prefill can "
         "find part of itself still there.",
         "prefix_cache", ("prefix caching on",), _ask_hits, ("hits",), (CACHING,),
         start_step=_first_preemption),
    Step("sizing", "Preemption all the time is a sizing problem",
         "Preemptions cost work every time. If they happen all the time, the engine is sized wrong: the pool, or "
         f"the number of batch slots ({term_link('max_num_seqs')}).",
         "sizing", ("FCFS",), _ask_sizing, ("kv",), (POOL, SEQS)),
)
