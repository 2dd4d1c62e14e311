"""Seeded problems of the cancellation lesson (cancellation: a user leaves mid-answer, another request waits for the
slot); the format and the helpers are ``lessons/problems.py``."""

from __future__ import annotations

import random

from sim.config import EngineConfig, cdiv
from sim.request import RequestSpec

from ..problems import (
    MB,
    Problem,
    number_problem,
    problem_scenario,
    row_of,
    run_trace,
    start_steps,
)


def _abandoned(rng: random.Random) -> tuple[list[RequestSpec], int, int]:
    length = rng.randrange(200, 1050, 50)
    leave = rng.randrange(50, length - 50, 10)  # (at least 60 tokens before the end: a late abort still comes first)
    requests = [RequestSpec("long", 0, 1, length, abort_step=leave), RequestSpec("next", 1, 1, 100)]
    return requests, length, leave


def _cancel_config(**changes: object) -> EngineConfig:
    return EngineConfig(num_blocks=999, max_num_seqs=1).replace(**changes)


def _cancellation_wasted(rng: random.Random, seed: int) -> Problem:
    requests, length, leave = _abandoned(rng)
    config = _cancel_config(abort_on_disconnect=False)
    trace = run_trace(config, requests)
    row = row_of(trace, "long")
    answer = int(trace.requests["num_wasted_tokens"][row])
    reasoning = (f"The user read {leave:,} tokens (one a step, steps 0-{leave - 1:,}) and left at step {leave:,}. "
                 f"Without an abort the engine generates to the answer's end, token {length:,}: {length:,} - "
                 f"{leave:,} = {answer:,} tokens nobody reads, while 'next' waits for the slot until step "
                 f"{start_steps(trace)[row_of(trace, 'next')]:,}.")
    return number_problem(
        "cancellation", seed, "wasted_tokens",
        problem_scenario("cancellation", seed, "wasted_tokens", config, requests,
                  "Compare with \"abort_on_disconnect\": true."),
        f"One batch slot; the server does not abort when a client disconnects. 'long' (a {length:,}-token answer) "
        f"starts at step 0 and its user closes the tab at step {leave:,}. How many tokens are generated for nobody?",
        answer, "tokens", reasoning, "Count the tokens generated after the user left, up to the answer's end.",
        [(leave, "that is what the user read before leaving."),
         (length, "that is the whole answer: the user read the first part.")])


def _cancellation_freed_mb(rng: random.Random, seed: int) -> Problem:
    requests, length, leave = _abandoned(rng)
    config = _cancel_config()
    trace, keeping = run_trace(config, requests), run_trace(config.replace(abort_on_disconnect=False), requests)
    row = row_of(trace, "long")
    tokens = int(trace.requests["num_computed_tokens"][row])
    per_token = config.model.kv_bytes_per_token
    answer = tokens * per_token / MB
    end_tokens = int(keeping.requests["num_computed_tokens"][row])
    blocks = cdiv(tokens, config.block_size)
    reasoning = (f"When the server aborts at step {int(trace.requests['finish_step'][row]):,} 'long' has KV for "
                 f"{tokens:,} tokens: its 1-token prompt and the first {tokens - 1:,} answer tokens (the newest has "
                 f"not been fed back yet). {tokens:,} x {per_token:,} B = {answer:,.1f} MB, freed at once; "
                 f"without the abort it would grow to {end_tokens:,} tokens, {end_tokens * per_token / MB:,.1f} MB.")
    return number_problem(
        "cancellation", seed, "freed_mb",
        problem_scenario("cancellation", seed, "freed_mb", config, requests,
                  "Compare with \"abort_on_disconnect\": false."),
        f"One batch slot, {config.model.name} ({per_token:,} bytes of KV per token); the server aborts as soon as a "
        f"client disconnects. 'long' (1-token prompt, {length:,}-token answer) starts at step 0; its user leaves at "
        f"step {leave:,}, after reading {leave:,} tokens. How many MB (10^6 bytes) of KV does the abort free?",
        answer, "MB", reasoning, "Count the tokens whose KV it holds, times the bytes per token.",
        [(end_tokens * per_token / MB, "that is its KV at the end of the whole answer, without an abort."),
         (blocks * config.block_bytes / MB, f"that counts whole {config.block_size}-token blocks "
                                            f"({blocks:,}); the question asks for its tokens' KV.")],
        tolerance=0.1)


def _cancellation_next_start(rng: random.Random, seed: int) -> Problem:
    requests, length, leave = _abandoned(rng)
    delay = rng.choice([0, 0, rng.randrange(5, 55, 5), -1])  # -1: the server never aborts
    servers = {"at once": _cancel_config(), "late": _cancel_config(disconnect_detect_delay_steps=max(delay, 5)),
               "never": _cancel_config(abort_on_disconnect=False)}
    asked = "never" if delay < 0 else "late" if delay else "at once"
    starts = {k: start_steps(run_trace(c, requests))[1] for k, c in servers.items()}
    config = servers[asked]
    server = {"at once": "aborts a request as soon as its client disconnects",
              "late": f"notices a disconnect {config.disconnect_detect_delay_steps} steps late",
              "never": "does not abort when a client disconnects"}[asked]
    why = {"at once": f"the server aborts 'long' at step {leave:,}, before scheduling, so 'next' takes the slot in "
                      f"that very step",
           "late": f"the server notices at step {leave:,} + {config.disconnect_detect_delay_steps} = "
                   f"{starts['late']:,} and aborts 'long' then; 'next' takes the slot in that step",
           "never": f"'long' keeps the slot to the end of its answer (step {length - 1:,}), so 'next' starts at "
                    f"step {length:,}"}
    reasoning = (f"'next' needs the only slot, which 'long' holds. Its user leaves at step {leave:,}; "
                 f"{why[asked]}. (At once: step {starts['at once']:,}; never: step {starts['never']:,}.)")
    said = {"at once": "aborts at once", "late": "notices late", "never": "never aborts"}
    mistakes = [(starts[k], f"that is when it starts if the server {said[k]}.") for k in servers if k != asked]
    return number_problem(
        "cancellation", seed, "next_start",
        problem_scenario("cancellation", seed, "next_start", config, requests, "Compare the server settings."),
        f"One batch slot; the server {server}. 'long' (a {length:,}-token answer) starts at step 0; 'next' arrives at "
        f"step 1. The user of 'long' leaves at step {leave:,}. At which step does 'next' start?",
        starts[asked], "step", reasoning,
        "'next' starts in the step the slot is free: when 'long' is aborted, or after its last token.", mistakes)


# the problem kinds, in the order consecutive seeds cycle through them (seed % len)
KINDS = (_cancellation_wasted, _cancellation_freed_mb, _cancellation_next_start)
