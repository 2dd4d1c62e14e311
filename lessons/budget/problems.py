"""Seeded problems of the budget lesson (budget: the token budget and chunked prefill); the format and the helpers are
``lessons/problems.py``."""

from __future__ import annotations

import random

from sim.config import EngineConfig, cdiv
from sim.metrics import request_latencies
from sim.request import RequestSpec

from ..problems import (
    Problem,
    fmt,
    number_problem,
    problem_scenario,
    row_of,
    run_trace,
    start_steps,
)


def _decoders(rng: random.Random) -> list[RequestSpec]:
    return [RequestSpec(f"d{i + 1}", 0, 8, 200) for i in range(rng.randrange(1, 4))]


def _decoding(d: int) -> str:
    return "the one decoding request" if d == 1 else f"the {d} decoding requests"


def _budget_ttft(rng: random.Random, seed: int) -> Problem:
    decoders = _decoders(rng)
    budget, prompt = rng.choice([32, 64, 128]), rng.randrange(150, 610, 10)
    requests = [*decoders, RequestSpec("long", 5, prompt, 10)]
    config = EngineConfig(num_blocks=999, max_num_seqs=4, max_num_batched_tokens=budget)
    trace = run_trace(config, requests)
    answer = int(request_latencies(trace)["ttft_steps"][row_of(trace, "long")])
    d = len(decoders)
    reasoning = (f"Running requests are scheduled first: each step {_decoding(d)} {'takes' if d == 1 else 'take'} "
                 f"{d} of the {budget} tokens, leaving {budget - d} for the prompt's chunk. {prompt:,} / "
                 f"{budget - d} rounded up = {answer} steps; the step of the last chunk also yields the first token.")
    return number_problem(
        "budget", seed, "ttft_steps",
        problem_scenario("budget", seed, "ttft_steps", config, requests, "Chunked prefill on; compare other budgets."),
        f"Token budget (max_num_batched_tokens) {budget}, chunked prefill on, 4 batch slots. "
        f"{_decoding(d).capitalize()} {'decodes' if d == 1 else 'decode'} one token a step; 'long', a {prompt:,}-token "
        f"prompt, arrives at step 5. How "
        f"many steps from its arrival to its first token (TTFT, in steps)?", answer, "steps", reasoning,
        "Work out how many prompt tokens fit in a step once the decodes have taken theirs.",
        [(cdiv(prompt, budget), "that divides by the whole budget; the decoding requests take theirs first."),
         (1, "the prompt is larger than one step's budget: chunked prefill spreads it over several steps.")])


def _budget_stall(rng: random.Random, seed: int) -> Problem:
    decoders = _decoders(rng)
    prompt = rng.randrange(500, 1600, 100)
    requests = [*decoders, RequestSpec("long", 5, prompt, 10)]
    config = EngineConfig(num_blocks=999, max_num_seqs=4, chunked_prefill=False)
    trace = run_trace(config, requests)
    step = start_steps(trace)[row_of(trace, "long")]
    answer = float(trace.steps["step_ms"][step])
    cost, d = config.cost, len(decoders)
    plain = cost.step_ms(0, d)
    reasoning = (f"Without chunking 'long' prefills its whole prompt in step {step:,}, with {_decoding(d)}: "
                 f"{fmt(cost.step_base_ms, 2)} + {prompt:,} x {fmt(cost.prefill_token_us)} us + {d} x "
                 f"{fmt(cost.decode_request_us)} us = {answer:,.2f} ms, against {plain:,.3f} ms for a step of "
                 f"decodes alone. Every decoding request waits that long for its next token.")
    return number_problem(
        "budget", seed, "stall_ms",
        problem_scenario("budget", seed, "stall_ms", config, requests, "Chunked prefill off; compare it on."),
        f"Chunked prefill off, token budget {config.max_num_batched_tokens:,}. {_decoding(d).capitalize()} "
        f"{'decodes' if d == 1 else 'decode'} one token a step; 'long', a {prompt:,}-token prompt, arrives at step 5. "
        f"A step costs "
        f"{fmt(cost.step_base_ms, 2)} ms + {fmt(cost.prefill_token_us)} us per prefill token + "
        f"{fmt(cost.decode_request_us)} us per decoding request. How long (ms) do the decoding requests wait "
        f"between two tokens in the step that prefills 'long'?", answer, "ms", reasoning,
        "That step computes the whole prompt and the decodes together.",
        [(plain, "that is a step of decodes alone; this step also prefills the whole prompt.")],
        tolerance=0.05, decimals=2)


# the problem kinds, in the order consecutive seeds cycle through them (seed % len)
KINDS = (_budget_ttft, _budget_stall)
