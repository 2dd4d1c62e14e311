"""Seeded problems with answers, for instructors (``python -m sim problems``) and for the app's problem links.

A problem is a small scenario (a few requests on a small engine), a question (multiple choice, or a number with a
tolerance and a unit), the answer and the reasoning. The numbers are drawn from ``random.Random(seed)`` (the same
draws on every machine and Python version: integer seeds, ``randrange``/``choice``/``sample`` only); the answer,
the reasoning's figures and the likely wrong answers are read from the simulator's runs of the scenario, never
written in. ``problem_for(lesson, seed)`` makes one: ``seed % len(kinds)`` picks the kind, so consecutive seeds
(a sheet of ``--count K``) go through every kind of a lesson, and the seed's draws pick the numbers.

Small on purpose, so a student can solve each by hand: one batch slot, or a 16-block pool of 16-token blocks, a few
requests with answers of tens to hundreds of tokens. ``scenario.config`` is the setting the question asks about:
a fresh run of the scenario gives the answer (a test checks every kind). Units: engine steps, tokens, MB (10^6
bytes), ms (the config's cost model).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .config import EngineConfig, cdiv
from .engine import simulate
from .events import join_and, with_commas
from .metrics import request_latencies
from .preemption_metrics import Preemption, preemption_cost, preemptions
from .request import RequestSpec
from .scenario import Scenario, config_to_dict
from .trace import Trace

LESSONS = ("queueing", "fairness", "cancellation", "preemption", "budget")
MAX_SEED = 2**31 - 1
MB = 1e6  # bytes; decimal, as the Cancellation lesson counts


@dataclass(frozen=True)
class Problem:
    """One problem. A multiple-choice problem has ``choices`` and ``answer`` is one of them; a number problem has no
    choices, ``answer`` is the number, right within ``tolerance`` of it, in ``unit``. ``mistakes`` pairs likely
    wrong answers (an option, or a figure another setting gives) with why they are wrong; ``hint`` is said for any
    other wrong answer (it gives no figure away)."""

    lesson: str
    seed: int
    kind: str
    scenario: Scenario
    question: str
    answer_text: str  # the answer as a sentence's worth: "500 steps", "C"
    reasoning: str  # the why, with the numbers, in 2-4 sentences
    choices: tuple[str, ...] = ()
    answer: str | float = 0.0
    tolerance: float = 0.0
    unit: str = ""
    mistakes: tuple[tuple[str | float, str], ...] = ()
    hint: str = ""

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.choices)

    @property
    def unit_phrase(self) -> str:
        """What a number answer is: 'a step number', 'a number of steps', 'a number of MB'."""
        return "a step number" if self.unit == "step" else f"a number of {self.unit}"

    def check(self, answer: str | float) -> tuple[bool, str]:
        """(correct, feedback). Right: the reasoning. Wrong: why that answer is wrong (a known mistake's reason, or
        too high / too low and the hint). An answer that is not an option, or not a number, says what is expected."""
        if self.is_multiple_choice:
            return self._check_choice(answer)
        return self._check_number(answer)

    def _check_choice(self, answer: str | float) -> tuple[bool, str]:
        picked = self._option(answer)
        if picked is None:
            options = ", ".join(f"{_letter(i)}. {c}" for i, c in enumerate(self.choices))
            return False, f"{str(answer)!r} is not one of the options: {options}."
        if picked == self.answer:
            return True, f"Right: {self.answer_text}. {self.reasoning}"
        why = dict(self.mistakes).get(picked, self.hint)
        return False, f"Not {picked}: {why}"

    def _option(self, answer: str | float) -> str | None:
        text = str(answer).strip()
        for i, choice in enumerate(self.choices):
            if text.casefold() in (choice.casefold(), _letter(i).casefold(), f"{_letter(i)}.".casefold()):
                return choice
        return None

    def _check_number(self, answer: str | float) -> tuple[bool, str]:
        value = parse_number(answer)
        if value is None:
            return False, f"{str(answer)!r} is not a number: give {self.unit_phrase}, e.g. 120."
        assert isinstance(self.answer, float)
        if abs(value - self.answer) <= self.tolerance:
            return True, f"Right: {self.answer_text}. {self.reasoning}"
        for figure, why in self.mistakes:
            if isinstance(figure, float) and abs(value - figure) <= max(self.tolerance, 1e-9):
                return False, f"Not {fmt(value)}: {why}"
        side = "too high" if value > self.answer else "too low"
        return False, f"Not {fmt(value)}: that is {side}. {self.hint}"


_NUMBER = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*[a-zA-Z/% ]*\s*")


def parse_number(answer: str | float) -> float | None:
    """A typed answer as a number: 1100, "1,100", "1100 steps", "39.3 MB"; None when it is none (or not finite)."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int | float):
        value = float(answer)
    else:
        m = _NUMBER.fullmatch(str(answer).replace(",", "").replace("_", ""))
        if m is None:
            return None
        value = float(m.group(1))
    return value if math.isfinite(value) else None


def _letter(i: int) -> str:
    return "ABCDEFGHIJ"[i]


def fmt(value: float, decimals: int = 1) -> str:
    """1100 -> '1,100'; 371.666 -> '371.7' (``decimals`` places when not whole)."""
    return with_commas(int(value)) if float(value).is_integer() else f"{value:,.{decimals}f}"


def number_problem(lesson: str, seed: int, kind: str, scenario: Scenario, question: str, answer: float,
                   unit: str, reasoning: str, hint: str, mistakes: Sequence[tuple[float, str]] = (),
                   tolerance: float = 0.0, decimals: int = 1) -> Problem:
    """A number problem; mistakes that equal the answer (within the tolerance) or an earlier mistake are dropped,
    so each wrong figure has one reason and the right one none."""
    kept: list[tuple[float, str]] = []
    for figure, why in mistakes:
        figure = float(figure)
        if abs(figure - answer) > tolerance and all(abs(figure - f) > tolerance for f, _ in kept):
            kept.append((figure, why))
    text = f"step {fmt(answer)}" if unit == "step" else f"{fmt(answer, decimals)} {unit}"
    return Problem(lesson, seed, kind, scenario, question, text, reasoning,
                   answer=float(answer), tolerance=tolerance, unit=unit, mistakes=tuple(kept), hint=hint)


def choice_problem(lesson: str, seed: int, kind: str, scenario: Scenario, question: str, choices: Sequence[str],
                   answer: str, reasoning: str, hint: str, mistakes: Mapping[str, str]) -> Problem:
    """A multiple-choice problem; ``mistakes`` says why each wrong option is wrong (``hint`` for the others)."""
    return Problem(lesson, seed, kind, scenario, question, answer, reasoning, choices=tuple(choices), answer=answer,
                   mistakes=tuple((c, mistakes[c]) for c in choices if c != answer and c in mistakes), hint=hint)


def _run(config: EngineConfig, requests: Sequence[RequestSpec]) -> Trace:
    return simulate(config, list(requests))


def _scenario(lesson: str, seed: int, kind: str, config: EngineConfig, requests: Sequence[RequestSpec],
              description: str) -> Scenario:
    return Scenario(f"{lesson.capitalize()} problem, seed {seed} ({kind})", config, tuple(requests), description)


def _row(trace: Trace, request_id: str) -> int:
    return trace.request_ids.index(request_id)


def _finish_steps(trace: Trace) -> list[int]:
    """Per request: steps from its arrival to the end of its finish step."""
    return [int(v) for v in request_latencies(trace)["finish_steps"]]


def _starts(trace: Trace) -> list[int]:
    return [int(v) for v in trace.requests["first_scheduled_step"]]


# ---- queueing: one batch slot, FCFS against shortest-job-first ------------------------------------------------
_POLICY_NAME = {"fcfs": "FCFS", "sjf": "SJF (shortest answer first)", "vtc": "VTC", "lcf": "LCF",
                "priority": "priority"}
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
    starts, finish = _starts(trace), trace.requests["finish_step"]
    order = sorted(range(trace.num_requests), key=lambda i: starts[i])
    parts = [f"{trace.request_ids[i]} {starts[i]:,}-{int(finish[i]):,}" for i in order]
    return "the slot runs " + ", then ".join(parts) + " (steps)"


def _queueing_average(rng: random.Random, seed: int) -> Problem:
    lengths = _one_slot_lengths(rng)
    policy, other = rng.choice([("fcfs", "sjf"), ("sjf", "fcfs")])
    requests = [RequestSpec(rid, 0, 4, n) for rid, n in zip("abc", lengths, strict=True)]
    trace, other_trace = _run(_one_slot(policy), requests), _run(_one_slot(other), requests)
    finish, other_finish = _finish_steps(trace), _finish_steps(other_trace)
    mean, other_mean = sum(finish) / 3, sum(other_finish) / 3
    sums = " + ".join(fmt(f) for f in sorted(finish))
    reasoning = (f"{_ORDER_RULE[policy]}: {_timeline(trace)}. Each finishes after the answers run before it plus "
                 f"its own, so the finish times are {sums} steps, average {fmt(mean)}. "
                 f"{_ORDER_RULE[other]}, average {fmt(other_mean)} steps.")
    return number_problem(
        "queueing", seed, "average_finish",
        _scenario("queueing", seed, "average_finish", _one_slot(policy), requests,
                  f"One slot, three requests at step 0; compare with \"policy\": \"{other}\"."),
        f"One batch slot; a, b and c arrive together at step 0, in that order. Under {_POLICY_NAME[policy]}, what is "
        f"the average finish time (steps from arrival to the last token)?", mean, "steps", reasoning,
        "With one slot, each request waits for every answer run before it, then runs its own length.",
        [(other_mean, f"that is the {_POLICY_NAME[other]} figure; {_ORDER_RULE[policy]}."),
         (sum(lengths) / 3, "that is the average answer length: it leaves out the waiting for the slot.")],
        tolerance=0.5)


def _queueing_finish_of(rng: random.Random, seed: int) -> Problem:
    lengths = _one_slot_lengths(rng)
    policy, other = rng.choice([("fcfs", "sjf"), ("sjf", "fcfs")])
    requests = [RequestSpec(rid, 0, 4, n) for rid, n in zip("abc", lengths, strict=True)]
    trace, other_trace = _run(_one_slot(policy), requests), _run(_one_slot(other), requests)
    target = rng.choice([i for i in range(3) if _starts(trace)[i] > 0])  # (one that waits: the question's point)
    rid = requests[target].request_id
    answer, start = _finish_steps(trace)[target], _starts(trace)[target]
    before = [trace.request_ids[i] for i in range(3) if _starts(trace)[i] < start]
    waited = f"waits for {join_and(before)} until step {start:,}" if before else "starts at once, at step 0"
    reasoning = (f"{_ORDER_RULE[policy]}: {_timeline(trace)}. So {rid} {waited}, then runs its "
                 f"{lengths[target]:,} steps: it finishes {fmt(answer)} steps after arriving.")
    return number_problem(
        "queueing", seed, "finish_of",
        _scenario("queueing", seed, "finish_of", _one_slot(policy), requests,
                  f"One slot, three requests at step 0; compare with \"policy\": \"{other}\"."),
        f"One batch slot; a, b and c arrive together at step 0, in that order. Under {_POLICY_NAME[policy]}, how many "
        f"steps after arriving does {rid} finish?", answer, "steps", reasoning,
        "Find where it goes in the order, add up the answers run before it, then its own length.",
        [(lengths[target], "that is its own length only: it also waits for the slot."),
         (_finish_steps(other_trace)[target], f"that is its finish under {_POLICY_NAME[other]}; "
                                               f"{_ORDER_RULE[policy]}.")])


def _queueing_longest_wait(rng: random.Random, seed: int) -> Problem:
    policy = rng.choice(["fcfs", "sjf"])
    for _ in range(100):  # (redraw until one request waits strictly longest: the question has one answer)
        lengths = rng.sample(range(20, 310, 10), 3)
        arrivals = [0, *sorted(rng.sample(range(1, lengths[0], 5), 2))] if lengths[0] > 11 else [0, 1, 6]
        requests = [RequestSpec(rid, a, 4, n) for rid, a, n in zip("abc", arrivals, lengths, strict=True)]
        trace = _run(_one_slot(policy), requests)
        waits = [s - a for s, a in zip(_starts(trace), arrivals, strict=True)]
        if waits.count(max(waits)) == 1:
            break
    answer = "abc"[waits.index(max(waits))]
    said = [f"{r.request_id} arrives at step {r.arrival_step:,}, starts at {s:,}: waits {w:,}"
            for r, s, w in zip(requests, _starts(trace), waits, strict=True)]
    reasoning = (f"{_ORDER_RULE[policy]} whenever the slot frees: {_timeline(trace)}. So {'; '.join(said)} "
                 f"steps.")
    mistakes = {r.request_id: f"{r.request_id} waits {w:,} steps, {answer} waits {max(waits):,}."
                for r, w in zip(requests, waits, strict=True)}
    return choice_problem(
        "queueing", seed, "longest_wait",
        _scenario("queueing", seed, "longest_wait", _one_slot(policy), requests,
                  "One slot, requests arriving a few steps apart."),
        f"One batch slot, policy {_POLICY_NAME[policy]}. Which request waits longest (steps from arrival until "
        f"it starts)?", list("abc"), answer, reasoning,
        "The first arrival finds the slot free; the others wait for it, in the policy's order.", mistakes)


# ---- fairness: one slot, client A's queue against B's request ------------------------------------------------
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
    trace, fcfs = _run(config, requests), _run(config.replace(policy="fcfs"), requests)
    b, a_id = _row(trace, "B1"), trace.client_ids.index("A")
    start = _starts(trace)[b]
    answer, fcfs_wait = start - s, _starts(fcfs)[b] - s
    counters = trace.clients["client_counters"]
    reasoning = (f"{_charges(config)}. When B arrives at step {s:,}, its counter is lifted to A's, "
                 f"{fmt(counters[s, trace.client_ids.index('B')])}; A's keeps growing while A1 runs, to "
                 f"{fmt(counters[start - 1, a_id])} when the slot frees at step {start:,}. B has the lower counter "
                 f"and goes next: it waits {answer:,} steps (under FCFS it would wait for all {num_a} of A's "
                 f"requests: {fcfs_wait:,}).")
    return number_problem(
        "fairness", seed, "b_wait",
        _scenario("fairness", seed, "b_wait", config, requests, "Compare with \"policy\": \"fcfs\"."),
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
    trace, fcfs = _run(config, requests), _run(config.replace(policy="fcfs"), requests)
    b, bc = _row(trace, "B1"), trace.client_ids.index("B")
    start, finish = _starts(trace)[b], int(trace.requests["finish_step"][b])
    step = rng.randrange(start, finish)
    answer = int(trace.clients["client_output_tokens"][: step + 1, bc].sum())
    fcfs_tokens = int(fcfs.clients["client_output_tokens"][: step + 1, bc].sum())
    first = "A1" if start else "B1"
    reasoning = (f"At step 0 both counters are 0 and {first} is first in line (ties go in arrival order). "
                 f"{_charges(config)}, so once A has been served B's counter is the lower: B1 runs from step "
                 f"{start:,}, one token a step, {answer:,} tokens by the end of step {step:,}. Under FCFS B1 "
                 f"starts only at step {_starts(fcfs)[b]:,}: {fcfs_tokens:,} tokens by then.")
    return number_problem(
        "fairness", seed, "b_tokens",
        _scenario("fairness", seed, "b_tokens", config, requests, "Compare with \"policy\": \"fcfs\"."),
        f"One batch slot, policy VTC. Client A sends {num_a} requests and B one, all at step 0 (A's first). How many "
        f"output tokens has B received by the end of step {step:,}?", answer, "tokens", reasoning,
        "Work out when B's request starts; from then it gets one token a step.",
        [(fcfs_tokens, "that is the FCFS figure: B behind all of A's requests. VTC serves the client with the lower "
                       "counter first.")])


def _fairness_counter(rng: random.Random, seed: int) -> Problem:
    config = _fair_config("vtc", output_weight=float(rng.choice([1, 2, 4])))
    requests = _fairness_requests(rng, 2)
    trace = _run(config, requests)
    a1, ac = _row(trace, "A1"), trace.client_ids.index("A")
    finish = int(trace.requests["finish_step"][a1])
    answer = float(trace.clients["client_counters"][finish, ac])
    p, n = requests[0].prompt_len, requests[0].output_len
    reasoning = (f"{_charges(config)} (the first included). A1 has a {p:,}-token prompt and a {n:,}-token answer: "
                 f"{fmt(config.input_weight)} x {p:,} + {fmt(config.output_weight)} x {n:,} = {fmt(answer)}. "
                 f"Nothing else of A's has run by the end of step {finish:,}.")
    return number_problem(
        "fairness", seed, "counter",
        _scenario("fairness", seed, "counter", config, requests, "VTC's counters: the Fairness lesson's chart."),
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
        runs = {p: _run(_fair_config(p), requests) for p in ("vtc", "lcf")}
        nexts = {p: _next_after(t, "B1") for p, t in runs.items()}
        if nexts["vtc"] != nexts["lcf"]:
            break
    trace, other = runs[policy], "lcf" if policy == "vtc" else "vtc"
    b1 = _row(trace, "B1")
    start_b1, end_b1 = _starts(trace)[b1], int(trace.requests["finish_step"][b1])
    c = trace.clients["client_counters"]
    ac, bc = trace.client_ids.index("A"), trace.client_ids.index("B")
    a_next = next(r.request_id for r in requests if r.client_id == "A" and _starts(trace)[_row(trace, r.request_id)]
                  > start_b1)
    lifted = (f"VTC lifts B's counter at step {s:,} to A's, {fmt(c[s, bc])}" if policy == "vtc"
              else "LCF does not lift B's counter: it is 0 when B arrives")
    reasoning = (f"{lifted}. B1 runs from step {start_b1:,} to {end_b1:,}; then B's counter is {fmt(c[end_b1, bc])} "
                 f"and A's {fmt(c[end_b1, ac])}, so the lower, {'B' if nexts[policy] == 'B2' else 'A'}, goes next: "
                 f"{nexts[policy]}. Under {_POLICY_NAME[other]} it would be {nexts[other]}.")
    choices = ["B2", a_next]
    why_other = (f"that is what {_POLICY_NAME[other]} does: "
                 + ("without the lift B's counter starts at 0, credit 'banked' while away." if other == "lcf"
                    else "its lift starts B at A's counter, not at 0."))
    return choice_problem(
        "fairness", seed, "lift",
        _scenario("fairness", seed, "lift", _fair_config(policy), requests,
                  f"Compare with \"policy\": \"{other}\"."),
        f"One batch slot, policy {_POLICY_NAME[policy]} (input weight 1, output weight 2). A sends 4 requests at step "
        f"0; B stays away until step {s:,}, then sends 2. Which request starts right after B1 finishes?",
        choices, nexts[policy], reasoning, "Compare the two counters when B1 finishes: the lower client goes next.",
        {nexts[other]: why_other})


def _next_after(trace: Trace, request_id: str) -> str:
    """The request that starts first after ``request_id`` starts."""
    start = _starts(trace)[_row(trace, request_id)]
    later = [(s, rid) for s, rid in zip(_starts(trace), trace.request_ids, strict=True) if s > start]
    return min(later)[1]


# ---- cancellation: a user leaves mid-answer, another request waits for the slot -----------------------------
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
    trace = _run(config, requests)
    row = _row(trace, "long")
    answer = int(trace.requests["num_wasted_tokens"][row])
    reasoning = (f"The user read {leave:,} tokens (one a step, steps 0-{leave - 1:,}) and left at step {leave:,}. "
                 f"Without an abort the engine generates to the answer's end, token {length:,}: {length:,} - "
                 f"{leave:,} = {answer:,} tokens nobody reads, while 'next' waits for the slot until step "
                 f"{_starts(trace)[_row(trace, 'next')]:,}.")
    return number_problem(
        "cancellation", seed, "wasted_tokens",
        _scenario("cancellation", seed, "wasted_tokens", config, requests,
                  "Compare with \"abort_on_disconnect\": true."),
        f"One batch slot; the server does not abort when a client disconnects. 'long' (a {length:,}-token answer) "
        f"starts at step 0 and its user closes the tab at step {leave:,}. How many tokens are generated for nobody?",
        answer, "tokens", reasoning, "Count the tokens generated after the user left, up to the answer's end.",
        [(leave, "that is what the user read before leaving."),
         (length, "that is the whole answer: the user read the first part.")])


def _cancellation_freed_mb(rng: random.Random, seed: int) -> Problem:
    requests, length, leave = _abandoned(rng)
    config = _cancel_config()
    trace, keeping = _run(config, requests), _run(config.replace(abort_on_disconnect=False), requests)
    row = _row(trace, "long")
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
        _scenario("cancellation", seed, "freed_mb", config, requests,
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
    starts = {k: _starts(_run(c, requests))[1] for k, c in servers.items()}
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
        _scenario("cancellation", seed, "next_start", config, requests, "Compare the server settings."),
        f"One batch slot; the server {server}. 'long' (a {length:,}-token answer) starts at step 0; 'next' arrives at "
        f"step 1. The user of 'long' leaves at step {leave:,}. At which step does 'next' start?",
        starts[asked], "step", reasoning,
        "'next' starts in the step the slot is free: when 'long' is aborted, or after its last token.", mistakes)


# ---- preemption: a 16-block pool, three answers growing together ---------------------------------------------
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
    trace = _run(config, requests)
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
    trace, other_trace = _run(_pool_config(policy), requests), _run(_pool_config(other), requests)
    first, other_first = preemptions(trace)[0], preemptions(other_trace)[0]
    needer = trace.request_ids[first.needed_by_row]
    reasoning = (f"Every answer grows by one token a step: {_pool_full(trace, first.step)}. {needer} is the one "
                 f"that finds no free block, and {_victim_rule(policy)}: {first.request_id}.")
    mistakes = {rid: f"{_victim_rule(policy)}, {first.request_id}." for rid in "ABC"}
    if needer != first.request_id:
        mistakes[needer] = (f"{needer} is the one that needed a block; the victim is chosen by the rule: "
                            f"{_victim_rule(policy)}.")
    if other_first.request_id != first.request_id:
        mistakes[other_first.request_id] = f"that is the {_POLICY_NAME[other]} victim; {_victim_rule(policy)}."
    return choice_problem(
        "preemption", seed, "victim",
        _scenario("preemption", seed, "victim", _pool_config(policy), requests,
                  f"Compare with \"policy\": \"{other}\"."),
        f"A pool of 16 KV blocks of 16 tokens, policy {_POLICY_NAME[policy]}; {_listed(requests)} arrive at step 0, "
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
        _scenario("preemption", seed, "first_step", config, requests, "FCFS on a 16-block pool."),
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
        _scenario("preemption", seed, "resume_tokens", config, requests, "FCFS on a 16-block pool, recompute."),
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
        _scenario("preemption", seed, "swap_mb", config, requests, "FCFS on a 16-block pool; try swap."),
        f"A pool of 16 KV blocks of 16 tokens ({config.model.name}, {per_token:,} bytes of KV per token), policy "
        f"FCFS; {_listed(requests)} arrive at step 0. The first victim, {first.request_id} in step {first.step:,}, "
        f"holds {first.num_tokens:,} tokens of KV. Had it been swapped out, how many MB (10^6 bytes) would be copied "
        f"to CPU memory?", answer, "MB", reasoning, "A swap copies the victim's whole blocks.",
        [(first.num_tokens * per_token / MB, "that counts its tokens; a swap copies whole blocks."),
         (cost.swap_bytes / 2**20, "that is in MiB (2^20 bytes); the question asks for MB (10^6).")],
        tolerance=0.1)


# ---- budget: the token budget and chunked prefill ------------------------------------------------------------
def _decoders(rng: random.Random) -> list[RequestSpec]:
    return [RequestSpec(f"d{i + 1}", 0, 8, 200) for i in range(rng.randrange(1, 4))]


def _decoding(d: int) -> str:
    return "the one decoding request" if d == 1 else f"the {d} decoding requests"


def _budget_ttft(rng: random.Random, seed: int) -> Problem:
    decoders = _decoders(rng)
    budget, prompt = rng.choice([32, 64, 128]), rng.randrange(150, 610, 10)
    requests = [*decoders, RequestSpec("long", 5, prompt, 10)]
    config = EngineConfig(num_blocks=999, max_num_seqs=4, max_num_batched_tokens=budget)
    trace = _run(config, requests)
    answer = int(request_latencies(trace)["ttft_steps"][_row(trace, "long")])
    d = len(decoders)
    reasoning = (f"Running requests are scheduled first: each step {_decoding(d)} {'takes' if d == 1 else 'take'} "
                 f"{d} of the {budget} tokens, leaving {budget - d} for the prompt's chunk. {prompt:,} / "
                 f"{budget - d} rounded up = {answer} steps; the step of the last chunk also yields the first token.")
    return number_problem(
        "budget", seed, "ttft_steps",
        _scenario("budget", seed, "ttft_steps", config, requests, "Chunked prefill on; compare other budgets."),
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
    trace = _run(config, requests)
    step = _starts(trace)[_row(trace, "long")]
    answer = float(trace.steps["step_ms"][step])
    cost, d = config.cost, len(decoders)
    plain = cost.step_ms(0, d)
    reasoning = (f"Without chunking 'long' prefills its whole prompt in step {step:,}, with {_decoding(d)}: "
                 f"{fmt(cost.step_base_ms, 2)} + {prompt:,} x {fmt(cost.prefill_token_us)} us + {d} x "
                 f"{fmt(cost.decode_request_us)} us = {answer:,.2f} ms, against {plain:,.3f} ms for a step of "
                 f"decodes alone. Every decoding request waits that long for its next token.")
    return number_problem(
        "budget", seed, "stall_ms",
        _scenario("budget", seed, "stall_ms", config, requests, "Chunked prefill off; compare it on."),
        f"Chunked prefill off, token budget {config.max_num_batched_tokens:,}. {_decoding(d).capitalize()} "
        f"{'decodes' if d == 1 else 'decode'} one token a step; 'long', a {prompt:,}-token prompt, arrives at step 5. "
        f"A step costs "
        f"{fmt(cost.step_base_ms, 2)} ms + {fmt(cost.prefill_token_us)} us per prefill token + "
        f"{fmt(cost.decode_request_us)} us per decoding request. How long (ms) do the decoding requests wait "
        f"between two tokens in the step that prefills 'long'?", answer, "ms", reasoning,
        "That step computes the whole prompt and the decodes together.",
        [(plain, "that is a step of decodes alone; this step also prefills the whole prompt.")],
        tolerance=0.05, decimals=2)


# lesson -> its problem kinds, in the order seeds cycle through them (seed % len)
_KINDS: dict[str, tuple[Callable[[random.Random, int], Problem], ...]] = {
    "queueing": (_queueing_average, _queueing_finish_of, _queueing_longest_wait),
    "fairness": (_fairness_b_wait, _fairness_b_tokens, _fairness_counter, _fairness_lift),
    "cancellation": (_cancellation_wasted, _cancellation_freed_mb, _cancellation_next_start),
    "preemption": (_preemption_victim, _preemption_step, _preemption_resume, _preemption_swap_mb),
    "budget": (_budget_ttft, _budget_stall),
}


def check_lesson(lesson: object) -> str:
    if lesson not in LESSONS:
        raise ValueError(f"lesson: {lesson!r} is not one of: {', '.join(LESSONS)}")
    return str(lesson)


def check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed: must be a whole number from 0 to {MAX_SEED:,}, got {seed!r}")
    return seed


def problem_for(lesson: str, seed: int) -> Problem:
    """The problem ``seed`` of ``lesson`` (one of ``LESSONS``): the same on every machine. A ValueError names a bad
    lesson (and the allowed ones) or a bad seed."""
    kinds = _KINDS[check_lesson(lesson)]
    seed = check_seed(seed)
    return kinds[seed % len(kinds)](random.Random(seed), seed)


def problems(lesson: str, seed: int, count: int) -> list[Problem]:
    """``count`` problems: seeds ``seed``, ``seed + 1``, ... (consecutive seeds cycle through the lesson's kinds)."""
    return [problem_for(lesson, s) for s in range(seed, min(seed + count, MAX_SEED + 1))]


# ---- Markdown ------------------------------------------------------------------------------------------------
_REQUEST_COLUMNS = (  # (header, value of a RequestSpec, shown only when some request differs from the default)
    ("client", lambda r: r.client_id, "default"),
    ("arrives at step", lambda r: with_commas(r.arrival_step), None),
    ("prompt tokens", lambda r: with_commas(r.prompt_len), None),
    ("answer tokens", lambda r: with_commas(r.output_len), None),
    ("priority", lambda r: str(r.priority), "0"),
    ("user leaves at step", lambda r: "" if r.abort_step is None else with_commas(r.abort_step), ""),
)


def requests_table(requests: Sequence[RequestSpec]) -> str:
    """The requests as a Markdown table, with only the columns that say something."""
    columns = [(h, f) for h, f, default in _REQUEST_COLUMNS
               if default is None or any(f(r) != default for r in requests)]
    lines = ["| request | " + " | ".join(h for h, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    lines += [f"| {r.request_id} | " + " | ".join(f(r) for _, f in columns) + " |" for r in requests]
    return "\n".join(lines)


def engine_line(config: EngineConfig) -> str:
    """The engine's settings as the scenario file states them: '`num_blocks` = 999, `max_num_seqs` = 1, ...'."""
    settings = config_to_dict(config)
    settings.pop("cost", None)  # (the default cost model's numbers are in the question where it matters)
    return ", ".join(f"`{k}` = {with_commas(v) if isinstance(v, int) and not isinstance(v, bool) else v}"
                     for k, v in settings.items())


def to_markdown(problem: Problem, number: int, answers: bool = False, scenario_file: str = "") -> str:
    """The problem as Markdown: a heading, the engine, the requests, the question (and its options), and with
    ``answers`` the answer and the reasoning."""
    p = problem
    parts = [f"## Problem {number}: {p.lesson}, seed {p.seed} ({p.kind.replace('_', ' ')})",
             f"**Engine.** {engine_line(p.scenario.config)}", requests_table(p.scenario.requests),
             f"**Question.** {p.question}" + ("" if p.is_multiple_choice else f" (answer: {p.unit_phrase})")]
    if p.is_multiple_choice:
        parts.append("\n".join(f"- {_letter(i)}. {c}" for i, c in enumerate(p.choices)))
    if scenario_file:
        parts.append(f"Scenario file: `{scenario_file}` (run it: `python -m sim run {scenario_file}`).")
    if answers:
        tolerance = f" (within {p.tolerance:g})" if p.tolerance else ""
        parts += [f"**Answer.** {p.answer_text}{tolerance}", f"**Why.** {p.reasoning}"]
    return "\n\n".join(parts)

