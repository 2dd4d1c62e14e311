"""Seeded problems of the preemption lesson (preemption: a 16-block pool, three answers growing together); the format
and the helpers are ``lessons/problems.py``."""

from __future__ import annotations

import random
from collections.abc import Sequence

from sim.config import EngineConfig, cdiv
from sim.events import join_and, with_commas
from sim.preemption_metrics import Preemption, preemption_cost, preemptions
from sim.request import RequestSpec
from sim.trace import Trace

from ..problems import (
    MB,
    POLICY_NAME,
    Problem,
    choice_problem,
    fmt,
    number_problem,
    problem_scenario,
    run_trace,
)


def _pool_requests(rng: random.Random) -> list[RequestSpec]:
    """A, B and C in a drawn order (the running list's order under FCFS: its last is FCFS's victim)."""
    priorities = rng.sample([0, 1, 2], 3)
    requests = [RequestSpec(rid, 0, rng.randrange(8, 56, 8), rng.randrange(100, 210, 10), priority=p)
                for rid, p in zip("ABC", priorities, strict=True)]
    return rng.sample(requests, 3)


def _listed(requests: Sequence[RequestSpec]) -> str:
    return join_and([r.request_id for r in requests])


def _pool_config(policy: str = "fcfs") -> EngineConfig:
    return EngineConfig(num_blocks=16, block_size=16, max_num_seqs=4, policy=policy)


def _first_preemption(rng: random.Random) -> tuple[list[RequestSpec], EngineConfig, Trace, Preemption]:
    """Drawn requests on the FCFS pool, their run and its first preemption."""
    requests, config = _pool_requests(rng), _pool_config()
    trace = run_trace(config, requests)
    return requests, config, trace, preemptions(trace)[0]


def _pool_full(trace: Trace, step: int) -> str:
    """'in step 48 A, B and C hold 56, 80 and 96 tokens of KV: 4 + 5 + 6 = 15 blocks; in step 49 each grows by one
    token and they would need 4 + 6 + 7 = 17, more than the pool's 16' (every request has run since step 0, and
    ``step`` is the first preemption's)."""
    steps, rows, tokens, _ = trace.schedule_entries()
    size = trace.config.block_size
    held = [int(tokens[(rows == i) & (steps < step)].sum()) for i in range(trace.num_requests)]
    before = [cdiv(t, size) for t in held]
    after = [cdiv(t + 1, size) for t in held]
    return (f"in step {step - 1:,} {join_and(trace.request_ids)} hold {join_and([with_commas(t) for t in held])} "
            f"tokens of KV: {' + '.join(map(str, before))} = {sum(before)} blocks; in step {step:,} each grows by "
            f"one token and they would need {' + '.join(map(str, after))} = {sum(after)}, more than the pool's "
            f"{trace.config.num_blocks}")


def _victim_rule(policy: str) -> str:
    return ("FCFS evicts the last request of the running list (the one admitted last)" if policy == "fcfs" else
            "the priority policy evicts the running request with the largest priority value (ties: the later "
            "arrival)")


def _preemption_victim(rng: random.Random, seed: int) -> Problem:
    policy, other = rng.choice([("fcfs", "priority"), ("priority", "fcfs")])
    requests = _pool_requests(rng)
    trace, other_trace = run_trace(_pool_config(policy), requests), run_trace(_pool_config(other), requests)
    first, other_first = preemptions(trace)[0], preemptions(other_trace)[0]
    needer = trace.request_ids[first.needed_by_row]
    reasoning = (f"Every answer grows by one token a step: {_pool_full(trace, first.step)}. {needer} is the one "
                 f"that finds no free block, and {_victim_rule(policy)}: {first.request_id}.")
    mistakes = {rid: f"{_victim_rule(policy)}, {first.request_id}." for rid in "ABC"}
    if needer != first.request_id:
        mistakes[needer] = (f"{needer} is the one that needed a block; the victim is chosen by the rule: "
                            f"{_victim_rule(policy)}.")
    if other_first.request_id != first.request_id:
        mistakes[other_first.request_id] = f"that is the {POLICY_NAME[other]} victim; {_victim_rule(policy)}."
    return choice_problem(
        "preemption", seed, "victim",
        problem_scenario("preemption", seed, "victim", _pool_config(policy), requests,
                  f"Compare with \"policy\": \"{other}\"."),
        f"A pool of 16 KV blocks of 16 tokens, policy {POLICY_NAME[policy]}; {_listed(requests)} arrive at step 0, "
        f"in that order, and all start at once. Which request is preempted first?", list("ABC"), first.request_id,
        reasoning,
        "Find the step the pool runs out, then apply the policy's victim rule.", mistakes)


def _preemption_step(rng: random.Random, seed: int) -> Problem:
    requests, config, trace, first = _first_preemption(rng)
    needer = trace.request_ids[first.needed_by_row]
    reasoning = (f"In step t a request with a p-token prompt computes its (p + t)-th token and needs ceil((p + t) / "
                 f"16) blocks: {_pool_full(trace, first.step)}. {needer} finds no free block, so "
                 f"{_victim_rule('fcfs')}: {first.request_id}.")
    return number_problem(
        "preemption", seed, "first_step",
        problem_scenario("preemption", seed, "first_step", config, requests, "FCFS on a 16-block pool."),
        f"A pool of 16 KV blocks of 16 tokens, policy FCFS; {_listed(requests)} arrive at step 0, in that order, and "
        f"all start at once (their prompts are prefilled in step 0). In which step is the first request preempted?",
        first.step, "step", reasoning, "Add up the blocks the three need step by step until one needs a 17th.",
        [(first.step - 1, f"in step {first.step - 1:,} every request still fits in the pool; the preemption comes in "
                          f"the first step in which they need more blocks than it has.")])


def _preemption_resume(rng: random.Random, seed: int) -> Problem:
    requests, config, _, first = _first_preemption(rng)
    spec = requests[first.row]
    generated = first.num_resume_tokens - spec.prompt_len
    reasoning = (f"{first.request_id} is preempted in step {first.step:,}, after generating {generated:,} tokens "
                 f"(steps 0-{first.step - 1:,}). Recompute frees its KV but keeps its tokens: when it is re-admitted "
                 f"(step {first.resume_step:,}) it prefills its {spec.prompt_len:,}-token prompt and its "
                 f"{generated:,} generated tokens, {first.num_resume_tokens:,} in all.")
    return number_problem(
        "preemption", seed, "resume_tokens",
        problem_scenario("preemption", seed, "resume_tokens", config, requests, "FCFS on a 16-block pool, recompute."),
        f"A pool of 16 KV blocks of 16 tokens, policy FCFS, preemption by recompute; {_listed(requests)} arrive at "
        f"step 0 and all start at once. The first victim is {first.request_id}, in step {first.step:,}. How many "
        f"tokens does it prefill when it resumes?", first.num_resume_tokens, "tokens", reasoning,
        "Recompute keeps the generated text, not its KV: the prompt and everything generated are prefilled again.",
        [(first.num_tokens, "that is the KV it held; its newest token was never fed back, so the re-prefill "
                            "computes it too."),
         (spec.prompt_len, "recompute keeps the generated tokens, and their KV must be computed again too.")])


def _preemption_swap_mb(rng: random.Random, seed: int) -> Problem:
    requests, config, _, first = _first_preemption(rng)
    cost = preemption_cost(first.num_tokens, config)
    answer = cost.swap_bytes / MB
    per_token = config.model.kv_bytes_per_token
    reasoning = (f"{first.request_id} held {first.num_tokens:,} tokens of KV when preempted in step "
                 f"{first.step:,}: {cost.num_blocks} blocks of {config.block_size} (a swap copies whole blocks). "
                 f"A block holds {config.block_size} x {per_token:,} B = {config.block_bytes:,} B, so "
                 f"{cost.num_blocks} x {config.block_bytes:,} B = {answer:,.1f} MB each way "
                 f"({cost.swap_ms:,.2f} ms at {fmt(config.cost.swap_bandwidth_gb_s)} GB/s with the per-block cost).")
    return number_problem(
        "preemption", seed, "swap_mb",
        problem_scenario("preemption", seed, "swap_mb", config, requests, "FCFS on a 16-block pool; try swap."),
        f"A pool of 16 KV blocks of 16 tokens ({config.model.name}, {per_token:,} bytes of KV per token), policy "
        f"FCFS; {_listed(requests)} arrive at step 0. The first victim, {first.request_id} in step {first.step:,}, "
        f"holds {first.num_tokens:,} tokens of KV. Had it been swapped out, how many MB (10^6 bytes) would be copied "
        f"to CPU memory?", answer, "MB", reasoning, "A swap copies the victim's whole blocks.",
        [(first.num_tokens * per_token / MB, "that counts its tokens; a swap copies whole blocks."),
         (cost.swap_bytes / 2**20, "that is in MiB (2^20 bytes); the question asks for MB (10^6).")],
        tolerance=0.1)


# the problem kinds, in the order consecutive seeds cycle through them (seed % len)
KINDS = (_preemption_victim, _preemption_step, _preemption_resume, _preemption_swap_mb)
