"""Seeded problems of the queueing lesson (queueing: one batch slot, FCFS against shortest-job-first); the format and
the helpers are ``lessons/problems.py``."""

from __future__ import annotations

import random

from sim.config import EngineConfig
from sim.events import join_and
from sim.request import RequestSpec
from sim.trace import Trace

from ..problems import (
    POLICY_NAME,
    Problem,
    choice_problem,
    finish_steps,
    fmt,
    number_problem,
    problem_scenario,
    run_trace,
    start_steps,
)

_ORDER_RULE = {"fcfs": "FCFS runs them in arrival order",
               "sjf": "SJF runs the shortest waiting answer first"}


def _one_slot_lengths(rng: random.Random) -> list[int]:
    """Three distinct answer lengths, never already shortest first (then FCFS would be SJF)."""
    lengths = rng.sample(range(20, 410, 10), 3)
    return lengths[::-1] if lengths == sorted(lengths) else lengths


def _one_slot(policy: str) -> EngineConfig:
    return EngineConfig(num_blocks=999, max_num_seqs=1, policy=policy)


def _timeline(trace: Trace) -> str:
    """'b runs steps 0-49, then c 50-169, then a 170-469' (in the order they ran)."""
    starts, finish = start_steps(trace), trace.requests["finish_step"]
    order = sorted(range(trace.num_requests), key=lambda i: starts[i])
    parts = [f"{trace.request_ids[i]} {starts[i]:,}-{int(finish[i]):,}" for i in order]
    return "the slot runs " + ", then ".join(parts) + " (steps)"


def _queueing_average(rng: random.Random, seed: int) -> Problem:
    lengths = _one_slot_lengths(rng)
    policy, other = rng.choice([("fcfs", "sjf"), ("sjf", "fcfs")])
    requests = [RequestSpec(rid, 0, 4, n) for rid, n in zip("abc", lengths, strict=True)]
    trace, other_trace = run_trace(_one_slot(policy), requests), run_trace(_one_slot(other), requests)
    finish, other_finish = finish_steps(trace), finish_steps(other_trace)
    mean, other_mean = sum(finish) / 3, sum(other_finish) / 3
    sums = " + ".join(fmt(f) for f in sorted(finish))
    reasoning = (f"{_ORDER_RULE[policy]}: {_timeline(trace)}. Each finishes after the answers run before it plus "
                 f"its own, so the finish times are {sums} steps, average {fmt(mean)}. "
                 f"{_ORDER_RULE[other]}, average {fmt(other_mean)} steps.")
    return number_problem(
        "queueing", seed, "average_finish",
        problem_scenario("queueing", seed, "average_finish", _one_slot(policy), requests,
                  f"One slot, three requests at step 0; compare with \"policy\": \"{other}\"."),
        f"One batch slot; a, b and c arrive together at step 0, in that order. Under {POLICY_NAME[policy]}, what is "
        f"the average finish time (steps from arrival to the last token)?", mean, "steps", reasoning,
        "With one slot, each request waits for every answer run before it, then runs its own length.",
        [(other_mean, f"that is the {POLICY_NAME[other]} figure; {_ORDER_RULE[policy]}."),
         (sum(lengths) / 3, "that is the average answer length: it leaves out the waiting for the slot.")],
        tolerance=0.5)


def _queueing_finish_of(rng: random.Random, seed: int) -> Problem:
    lengths = _one_slot_lengths(rng)
    policy, other = rng.choice([("fcfs", "sjf"), ("sjf", "fcfs")])
    requests = [RequestSpec(rid, 0, 4, n) for rid, n in zip("abc", lengths, strict=True)]
    trace, other_trace = run_trace(_one_slot(policy), requests), run_trace(_one_slot(other), requests)
    target = rng.choice([i for i in range(3) if start_steps(trace)[i] > 0])  # (one that waits: the question's point)
    rid = requests[target].request_id
    answer, start = finish_steps(trace)[target], start_steps(trace)[target]
    before = [trace.request_ids[i] for i in range(3) if start_steps(trace)[i] < start]
    waited = f"waits for {join_and(before)} until step {start:,}" if before else "starts at once, at step 0"
    reasoning = (f"{_ORDER_RULE[policy]}: {_timeline(trace)}. So {rid} {waited}, then runs its "
                 f"{lengths[target]:,} steps: it finishes {fmt(answer)} steps after arriving.")
    return number_problem(
        "queueing", seed, "finish_of",
        problem_scenario("queueing", seed, "finish_of", _one_slot(policy), requests,
                  f"One slot, three requests at step 0; compare with \"policy\": \"{other}\"."),
        f"One batch slot; a, b and c arrive together at step 0, in that order. Under {POLICY_NAME[policy]}, how many "
        f"steps after arriving does {rid} finish?", answer, "steps", reasoning,
        "Find where it goes in the order, add up the answers run before it, then its own length.",
        [(lengths[target], "that is its own length only: it also waits for the slot."),
         (finish_steps(other_trace)[target], f"that is its finish under {POLICY_NAME[other]}; "
                                               f"{_ORDER_RULE[policy]}.")])


def _queueing_longest_wait(rng: random.Random, seed: int) -> Problem:
    policy = rng.choice(["fcfs", "sjf"])
    for _ in range(100):  # (redraw until one request waits strictly longest: the question has one answer)
        lengths = rng.sample(range(20, 310, 10), 3)
        arrivals = [0, *sorted(rng.sample(range(1, lengths[0], 5), 2))] if lengths[0] > 11 else [0, 1, 6]
        requests = [RequestSpec(rid, a, 4, n) for rid, a, n in zip("abc", arrivals, lengths, strict=True)]
        trace = run_trace(_one_slot(policy), requests)
        waits = [s - a for s, a in zip(start_steps(trace), arrivals, strict=True)]
        if waits.count(max(waits)) == 1:
            break
    answer = "abc"[waits.index(max(waits))]
    said = [f"{r.request_id} arrives at step {r.arrival_step:,}, starts at {s:,}: waits {w:,}"
            for r, s, w in zip(requests, start_steps(trace), waits, strict=True)]
    reasoning = (f"{_ORDER_RULE[policy]} whenever the slot frees: {_timeline(trace)}. So {'; '.join(said)} "
                 f"steps.")
    mistakes = {r.request_id: f"{r.request_id} waits {w:,} steps, {answer} waits {max(waits):,}."
                for r, w in zip(requests, waits, strict=True)}
    return choice_problem(
        "queueing", seed, "longest_wait",
        problem_scenario("queueing", seed, "longest_wait", _one_slot(policy), requests,
                  "One slot, requests arriving a few steps apart."),
        f"One batch slot, policy {POLICY_NAME[policy]}. Which request waits longest (steps from arrival until "
        f"it starts)?", list("abc"), answer, reasoning,
        "The first arrival finds the slot free; the others wait for it, in the policy's order.", mistakes)


# the problem kinds, in the order consecutive seeds cycle through them (seed % len)
KINDS = (_queueing_average, _queueing_finish_of, _queueing_longest_wait)
