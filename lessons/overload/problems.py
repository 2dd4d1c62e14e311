"""Seeded problems of the overload lesson (vLLM 0.32's admission caps at the door); the format and the helpers are
``lessons/problems.py``."""

from __future__ import annotations

import random

import numpy as np

from sim.config import EngineConfig
from sim.request import RequestSpec, RequestStatus
from sim.trace import Trace

from ..problems import Problem, number_problem, problem_scenario, run_trace


def _refused(trace: Trace) -> list[str]:
    """The ids refused at the door, in arrival order."""
    rows = np.flatnonzero(trace.requests["status"] == RequestStatus.REJECTED)
    return [trace.request_ids[i] for i in sorted(rows, key=lambda i: (trace.requests["arrival_step"][i], i))]


def _request_cap(rng: random.Random, seed: int) -> Problem:
    slots, cap = rng.choice([1, 2]), rng.randrange(2, 5)
    answer_len = rng.choice([20, 30, 40])
    gap = rng.choice([3, 5, 8])
    n = rng.randrange(6, 10)
    cap = max(cap, slots + 1)
    requests = [RequestSpec(f"r{i + 1}", i * gap, 4, answer_len) for i in range(n)]
    config = EngineConfig(num_blocks=999, max_num_seqs=slots, max_num_queued_reqs=cap)
    trace = run_trace(config, requests)
    refused = _refused(trace)
    finish = trace.requests["finish_step"]
    done = ", ".join(f"{trace.request_ids[i]} at step {int(finish[i]):,}" for i in range(n)
                     if trace.requests["status"][i] != RequestStatus.REJECTED)
    reasoning = (f"An arrival is refused when the unfinished requests (waiting or running) plus itself would pass "
                 f"{cap}. Each answer takes {answer_len} steps and {slots} run at a time; those let in finish: "
                 f"{done}. So {len(refused)} are refused"
                 + (f": {', '.join(refused)}." if refused else "."))
    return number_problem(
        "overload", seed, "request_cap",
        problem_scenario("overload", seed, "request_cap", config, requests,
                         "vLLM's request cap at the door; compare other caps."),
        f"max_num_queued_reqs = {cap}, {slots} batch slot{'s' if slots > 1 else ''}. Requests r1 to r{n} arrive "
        f"every {gap} steps from step 0, each with a {answer_len}-token answer (one token a step once running). "
        f"How many are refused at the door?", len(refused), "requests", reasoning,
        "Count the unfinished requests at each arrival: those running and those waiting, not yet finished.",
        [(max(n - cap, 0), f"that counts only the first {cap} as let in; requests finish and make room.")])


def _token_cap(rng: random.Random, seed: int) -> Problem:
    cap = rng.choice([1000, 1500, 2000])
    prompts = [rng.randrange(200, 900, 100) for _ in range(rng.randrange(5, 8))]
    requests = [RequestSpec(f"r{i + 1}", 0, p, 10) for i, p in enumerate(prompts)]
    config = EngineConfig(num_blocks=999, max_num_seqs=8, max_num_queued_tokens=cap)
    trace = run_trace(config, requests)
    refused = _refused(trace)
    total, parts = 0, []
    for spec in requests:
        if total >= cap:
            parts.append(f"{spec.request_id} refused ({total:,} >= {cap:,})")
        else:
            parts.append(f"{spec.request_id} in ({total:,} < {cap:,})")
            total += spec.prompt_len
    reasoning = (f"All arrive in step 0, in order; each is refused while the prompts of the requests let in and "
                 f"still in prefill add up to {cap:,} or more (its own prompt not counted): {'; '.join(parts)}. "
                 f"So {len(refused)} are refused.")
    listed = ", ".join(f"{s.request_id} {s.prompt_len}" for s in requests)
    return number_problem(
        "overload", seed, "token_cap",
        problem_scenario("overload", seed, "token_cap", config, requests,
                         "vLLM's token cap at the door; compare other caps."),
        f"max_num_queued_tokens = {cap:,}. In step 0 these requests arrive, in this order, with their prompt "
        f"lengths (tokens): {listed}. How many are refused at the door?", len(refused), "requests", reasoning,
        "vLLM compares the prompts already let in (still in prefill) with the cap, not the new one's.",
        [(sum(1 for i in range(len(prompts)) if sum(prompts[: i + 1]) > cap),
          "that counts each request's own prompt too; vLLM checks only those already let in.")])


# the problem kinds, in the order consecutive seeds cycle through them (seed % len)
KINDS = (_request_cap, _token_cap)
