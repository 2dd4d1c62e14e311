"""Seeded problems of the fairness lesson (fairness: one slot, client A's queue against B's request); the format and the
helpers are ``lessons/problems.py``."""

from __future__ import annotations

import random
from collections.abc import Sequence

from sim.config import EngineConfig
from sim.request import RequestSpec
from sim.trace import Trace

from ..problems import (
    POLICY_NAME,
    Problem,
    choice_problem,
    fmt,
    number_problem,
    problem_scenario,
    row_of,
    run_trace,
    start_steps,
)


def _fairness_requests(rng: random.Random, num_a: int, num_b: int = 1) -> list[RequestSpec]:
    """A's ``num_a`` and B's ``num_b`` requests, all at step 0 (``_b_arriving_at`` moves B's)."""
    prompt_a, out_a = rng.randrange(10, 60, 10), rng.randrange(20, 90, 10)
    prompt_b, out_b = rng.randrange(10, 60, 10), rng.randrange(20, 90, 10)
    a = [RequestSpec(f"A{i + 1}", 0, prompt_a, out_a, client_id="A") for i in range(num_a)]
    b = [RequestSpec(f"B{i + 1}", 0, prompt_b, out_b, client_id="B") for i in range(num_b)]
    return a + b


def _b_arriving_at(requests: Sequence[RequestSpec], arrival_step: int) -> list[RequestSpec]:
    return [r if r.client_id == "A" else RequestSpec(r.request_id, arrival_step, r.prompt_len, r.output_len, "B")
            for r in requests]


def _fair_config(policy: str, output_weight: float = 2.0) -> EngineConfig:
    return EngineConfig(num_blocks=999, max_num_seqs=1, policy=policy, output_weight=output_weight)


def _charges(config: EngineConfig) -> str:
    return (f"VTC charges {fmt(config.input_weight)} per prompt token at admission and {fmt(config.output_weight)} "
            f"per generated token")


def _fairness_b_wait(rng: random.Random, seed: int) -> Problem:
    num_a = rng.randrange(2, 4)
    requests = _fairness_requests(rng, num_a)
    s = rng.randrange(1, requests[0].output_len)
    requests = _b_arriving_at(requests, s)
    config = _fair_config("vtc")
    trace, fcfs = run_trace(config, requests), run_trace(config.replace(policy="fcfs"), requests)
    b, a_id = row_of(trace, "B1"), trace.client_ids.index("A")
    start = start_steps(trace)[b]
    answer, fcfs_wait = start - s, start_steps(fcfs)[b] - s
    counters = trace.clients["client_counters"]
    reasoning = (f"{_charges(config)}. When B arrives at step {s:,}, its counter is lifted to A's, "
                 f"{fmt(counters[s, trace.client_ids.index('B')])}; A's keeps growing while A1 runs, to "
                 f"{fmt(counters[start - 1, a_id])} when the slot frees at step {start:,}. B has the lower counter "
                 f"and goes next: it waits {answer:,} steps (under FCFS it would wait for all {num_a} of A's "
                 f"requests: {fcfs_wait:,}).")
    return number_problem(
        "fairness", seed, "b_wait",
        problem_scenario("fairness", seed, "b_wait", config, requests, "Compare with \"policy\": \"fcfs\"."),
        f"One batch slot, policy VTC (input weight {fmt(config.input_weight)}, output weight "
        f"{fmt(config.output_weight)}). Client A sends {num_a} requests at step 0; B sends one at step {s:,}. How "
        f"many steps does B's request wait before it starts?", answer, "steps", reasoning,
        "Compare the two clients' counters when the slot frees: the lower one goes next.",
        [(fcfs_wait, "that is the FCFS figure: B behind all of A's requests. VTC serves the client with the lower "
                     "counter first.")])


def _fairness_b_tokens(rng: random.Random, seed: int) -> Problem:
    num_a = rng.randrange(2, 4)
    requests = _fairness_requests(rng, num_a)
    config = _fair_config("vtc")
    trace, fcfs = run_trace(config, requests), run_trace(config.replace(policy="fcfs"), requests)
    b, bc = row_of(trace, "B1"), trace.client_ids.index("B")
    start, finish = start_steps(trace)[b], int(trace.requests["finish_step"][b])
    step = rng.randrange(start, finish)
    answer = int(trace.clients["client_output_tokens"][: step + 1, bc].sum())
    fcfs_tokens = int(fcfs.clients["client_output_tokens"][: step + 1, bc].sum())
    first = "A1" if start else "B1"
    reasoning = (f"At step 0 both counters are 0 and {first} is first in line (ties go in arrival order). "
                 f"{_charges(config)}, so once A has been served B's counter is the lower: B1 runs from step "
                 f"{start:,}, one token a step, {answer:,} tokens by the end of step {step:,}. Under FCFS B1 "
                 f"starts only at step {start_steps(fcfs)[b]:,}: {fcfs_tokens:,} tokens by then.")
    return number_problem(
        "fairness", seed, "b_tokens",
        problem_scenario("fairness", seed, "b_tokens", config, requests, "Compare with \"policy\": \"fcfs\"."),
        f"One batch slot, policy VTC. Client A sends {num_a} requests and B one, all at step 0 (A's first). How many "
        f"output tokens has B received by the end of step {step:,}?", answer, "tokens", reasoning,
        "Work out when B's request starts; from then it gets one token a step.",
        [(fcfs_tokens, "that is the FCFS figure: B behind all of A's requests. VTC serves the client with the lower "
                       "counter first.")])


def _fairness_counter(rng: random.Random, seed: int) -> Problem:
    config = _fair_config("vtc", output_weight=float(rng.choice([1, 2, 4])))
    requests = _fairness_requests(rng, 2)
    trace = run_trace(config, requests)
    a1, ac = row_of(trace, "A1"), trace.client_ids.index("A")
    finish = int(trace.requests["finish_step"][a1])
    answer = float(trace.clients["client_counters"][finish, ac])
    p, n = requests[0].prompt_len, requests[0].output_len
    reasoning = (f"{_charges(config)} (the first included). A1 has a {p:,}-token prompt and a {n:,}-token answer: "
                 f"{fmt(config.input_weight)} x {p:,} + {fmt(config.output_weight)} x {n:,} = {fmt(answer)}. "
                 f"Nothing else of A's has run by the end of step {finish:,}.")
    return number_problem(
        "fairness", seed, "counter",
        problem_scenario("fairness", seed, "counter", config, requests, "VTC's counters: the Fairness lesson's chart."),
        f"One batch slot, policy VTC with input weight {fmt(config.input_weight)} and output weight "
        f"{fmt(config.output_weight)}. What is client A's virtual counter at the end of step {finish:,}, when A1 "
        f"finishes?", answer, "weighted tokens", reasoning,
        "Add the prompt's charge (at admission) and one output charge per generated token.",
        [(p + n, "that counts tokens without their weights."),
         (config.output_weight * n, "that leaves out the prompt, charged when A1 is admitted."),
         (config.input_weight * p, "that is the prompt's charge only: every generated token is charged too.")])


def _fairness_lift(rng: random.Random, seed: int) -> Problem:
    policy = rng.choice(["vtc", "lcf"])
    for _ in range(100):  # (redraw until the lift changes who goes after B1: the question is about it)
        requests = _fairness_requests(rng, 4, num_b=2)
        s = rng.randrange(requests[0].output_len + 1, 2 * requests[0].output_len)
        requests = _b_arriving_at(requests, s)
        runs = {p: run_trace(_fair_config(p), requests) for p in ("vtc", "lcf")}
        nexts = {p: _next_after(t, "B1") for p, t in runs.items()}
        if nexts["vtc"] != nexts["lcf"]:
            break
    trace, other = runs[policy], "lcf" if policy == "vtc" else "vtc"
    b1 = row_of(trace, "B1")
    start_b1, end_b1 = start_steps(trace)[b1], int(trace.requests["finish_step"][b1])
    c = trace.clients["client_counters"]
    ac, bc = trace.client_ids.index("A"), trace.client_ids.index("B")
    starts = start_steps(trace)
    a_next = next(r.request_id for r in requests
                  if r.client_id == "A" and starts[row_of(trace, r.request_id)] > start_b1)
    lifted = (f"VTC lifts B's counter at step {s:,} to A's, {fmt(c[s, bc])}" if policy == "vtc"
              else "LCF does not lift B's counter: it is 0 when B arrives")
    reasoning = (f"{lifted}. B1 runs from step {start_b1:,} to {end_b1:,}; then B's counter is {fmt(c[end_b1, bc])} "
                 f"and A's {fmt(c[end_b1, ac])}, so the lower, {'B' if nexts[policy] == 'B2' else 'A'}, goes next: "
                 f"{nexts[policy]}. Under {POLICY_NAME[other]} it would be {nexts[other]}.")
    choices = ["B2", a_next]
    why_other = (f"that is what {POLICY_NAME[other]} does: "
                 + ("without the lift B's counter starts at 0, credit 'banked' while away." if other == "lcf"
                    else "its lift starts B at A's counter, not at 0."))
    return choice_problem(
        "fairness", seed, "lift",
        problem_scenario("fairness", seed, "lift", _fair_config(policy), requests,
                  f"Compare with \"policy\": \"{other}\"."),
        f"One batch slot, policy {POLICY_NAME[policy]} (input weight 1, output weight 2). A sends 4 requests at step "
        f"0; B stays away until step {s:,}, then sends 2. Which request starts right after B1 finishes?",
        choices, nexts[policy], reasoning, "Compare the two counters when B1 finishes: the lower client goes next.",
        {nexts[other]: why_other})


def _next_after(trace: Trace, request_id: str) -> str:
    """The request that starts first after ``request_id`` starts."""
    start = start_steps(trace)[row_of(trace, request_id)]
    later = [(s, rid) for s, rid in zip(start_steps(trace), trace.request_ids, strict=True) if s > start]
    return min(later)[1]


# the problem kinds, in the order consecutive seeds cycle through them (seed % len)
KINDS = (_fairness_b_wait, _fairness_b_tokens, _fairness_counter, _fairness_lift)
