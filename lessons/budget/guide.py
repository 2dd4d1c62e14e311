"""Token budget's guided path: an 8,000-token prompt among eight decoding streams (the stall without chunking),
its chunks under a 512-token budget, the trade-off between TTFT and smooth streams, and where the budget meets
memory. Each question's answer is read from the step's runs (``lessons/guided.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from lessons.problems import Problem, fmt
from lessons.run import Run
from sim import metrics
from sim.config import cdiv
from sim.preemption_metrics import preemptions
from sim.scenario import Scenario
from sim.trace import Trace
from ui.glossary import term_link
from ui.wording import a_number, count, number_word, sentence_case

from ..guided import Setting, Step, Values, by_label, choice_question, config_setting, number_question


def _streams(n: int) -> str:
    """'Eight streams' (a sentence's start)."""
    return sentence_case(f"{number_word(n)} stream{'s' if n != 1 else ''}")


def _row(run: Run, request_id: str = "long") -> int:
    return run.trace.request_ids.index(request_id)


def _prompt(scenario: Scenario, value: int) -> Scenario:
    requests = tuple(dataclasses.replace(r, prompt_len=value) if r.request_id == "long" else r
                     for r in scenario.requests)
    return dataclasses.replace(scenario, requests=requests)


PROMPT = Setting("prompt", "The long prompt (tokens)", 8000, (2000, 4000, 8000), _prompt)


def _ask_stall(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    row = _row(run)
    step = int(run.trace.requests["first_scheduled_step"][row])
    ms = float(run.trace.steps["step_ms"][step])
    cost, prompt = run.scenario.config.cost, run.scenario.requests[row].prompt_len
    decoding = sum(1 for r in run.scenario.requests if r.request_id != "long")
    plain = cost.step_ms(0, decoding)
    return number_question(
        "stall", runs, f"{_streams(decoding)} decode one token a step ({fmt(plain, 2)} ms a step). "
                       f"{sentence_case(a_number(prompt))}-token prompt "
                       f"arrives; without chunked prefill it is prefilled in one step. A step costs "
                       f"{fmt(cost.step_base_ms, 2)} ms + {fmt(cost.prefill_token_us)} us per prefill token + "
                       f"{fmt(cost.decode_request_us)} us per decoding request. How long is that step (ms)?",
        ms, "ms",
        f"{fmt(cost.step_base_ms, 2)} + {prompt:,} x {fmt(cost.prefill_token_us)} us + {decoding} x "
        f"{fmt(cost.decode_request_us)} us = {fmt(ms, 1)} ms. Every stream waits that long for its next token: the "
        "gap in each row of the chart below.",
        f"The step computes the whole prompt and the {decoding} decodes together.",
        [(plain, "that is a step of the decodes alone; this one also prefills the whole prompt.")],
        tolerance=1.0)


BUDGET = config_setting("budget", "max_num_batched_tokens", "Token budget (max_num_batched_tokens)", 512,
                        (256, 512, 1024))


def _prefill_steps(run: Run) -> int:
    r, row = run.trace.requests, _row(run)
    return int(r["first_token_step"][row] - r["first_scheduled_step"][row] + 1)


def _ask_chunks(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    budget = run.scenario.config.max_num_batched_tokens
    prompt = run.scenario.requests[_row(run)].prompt_len
    steps = _prefill_steps(run)
    n = sum(1 for r in run.scenario.requests if r.request_id != "long")
    left = budget - n
    smooth = _streams_smooth(run)
    return number_question(
        "chunks", runs, f"With {term_link('chunked prefill')} and a budget of {budget:,} tokens a step, the {n} "
                        f"decoding streams take their {n} tokens first. In how many steps is the {prompt:,}-token "
                        "prompt prefilled?",
        steps, "steps",
        f"Each step gives the prompt {budget:,} - {n} = {left:,} tokens: {prompt:,} / {left:,} rounded up = "
        f"{steps} chunks"
        + (", and the streams keep a token every step throughout (the even combs below)." if smooth else
           "; meanwhile some streams miss a step (the gaps in their rows below)."),
        "The running streams are scheduled first; the prompt gets what is left of the budget.",
        [(cdiv(prompt, budget), "that divides by the whole budget; the decoding streams take theirs first."),
         (1, "that is without chunking.")])


def _streams_smooth(run: Run) -> bool:
    """Every stream (all but the long prompt) got a token in every step from its first token to its last."""
    gaps = np.delete(metrics.request_tbt(run.trace)["max_steps"], _row(run))
    return bool(np.all(np.nan_to_num(gaps, nan=1.0) <= 1.0))


# (the chunked run only: without chunking the budget must hold the whole prompt. Not 8,192: a budget that holds the
# whole prompt chunks nothing, and the two runs would be the same)
CHUNKED_BUDGET = config_setting("budget", "max_num_batched_tokens", "Chunked run's budget (tokens)", 512,
                                (256, 512, 2048), runs=("chunked prefill",))
_PLAIN, _CHUNKED, _TIE = "without chunking", "with chunked prefill", "the same (within 1 ms)"


def _ask_tradeoff(runs: Sequence[Run], values: Values) -> Problem:
    plain, chunked = by_label(runs, "no chunking"), by_label(runs, "chunked prefill")
    ttft = {run.label: float(metrics.request_latencies(run.trace)["ttft_ms"][_row(run)]) for run in runs}
    gap = {run.label: float(np.nanmax(np.delete(metrics.request_tbt(run.trace)["max_ms"], _row(run))))
           for run in runs}
    diff = ttft[plain.label] - ttft[chunked.label]
    answer = _TIE if abs(diff) <= 1.0 else _CHUNKED if diff > 0 else _PLAIN
    budget = chunked.scenario.config.max_num_batched_tokens
    why = ("Each chunk pays the step's fixed cost again, so the prompt waits longer" if diff < -1.0 else
           "Here chunking cost the prompt no time" if abs(diff) <= 1.0 else "Here the chunked prompt came first")
    return choice_question(
        "tradeoff", runs, f"Chunked prefill (budget {budget:,}) cuts the long prompt into pieces that share each step "
                          "with the streams. When does the long prompt get its first token sooner "
                          f"({term_link('TTFT')})?", (_PLAIN, _CHUNKED, _TIE), answer,
        f"TTFT: {fmt(ttft[plain.label])} ms without chunking, {fmt(ttft[chunked.label])} ms chunked. The streams' "
        f"longest pause: {fmt(gap[plain.label])} ms against {fmt(gap[chunked.label])} ms. {why}; the budget sets "
        f"the trade between its TTFT and every stream's {term_link('TBT', 'time between tokens')}.",
        "Count the steps each way, and what each step costs.",
        {c: f"TTFT is {fmt(ttft[plain.label])} ms without chunking and {fmt(ttft[chunked.label])} ms chunked."
         for c in (_PLAIN, _CHUNKED, _TIE)})


MEMORY_BUDGET = config_setting("budget", "max_num_batched_tokens", "Token budget (tokens)", 8192, (512, 2048, 8192),
                               {b: f"budget {b:,}" for b in (512, 2048, 8192)}, names_run=True)
_YES, _NO = "yes, a request is preempted", "no preemption"


def _most_docs_prefilling(run: Run) -> int:
    """The most documents (requests whose id starts with 'doc') prefilling in one step."""
    steps, rows, _, _ = run.trace.schedule_entries()
    r = run.trace.requests
    docs = np.array([rid.startswith("doc") for rid in run.trace.request_ids])
    prefilling = docs[rows] & (steps <= r["first_token_step"][rows])  # (up to the step of its first token)
    return int(np.bincount(steps[prefilling]).max()) if prefilling.any() else 0


def _ask_memory(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    config, requests = run.scenario.config, run.scenario.requests
    budget = config.max_num_batched_tokens
    chats = [q for q in requests if q.request_id.startswith("chat")]
    docs = [q for q in requests if q.request_id.startswith("doc")]
    burst = sum(1 for q in docs if q.arrival_step == docs[0].arrival_step)
    victims = preemptions(run.trace)
    peak = int(run.trace.steps["used_blocks"].max())
    together = _most_docs_prefilling(run)
    pool = ("filling the pool to its last block" if peak >= config.num_blocks else
            f"and at the end of a step the pool holds at most {peak:,} of its {config.num_blocks:,} blocks")
    if victims:
        first = victims[0]
        needer = run.trace.request_ids[first.needed_by_row]
        who = ("and, the last of the running list, is preempted itself" if needer == first.request_id else
               f"and {first.request_id} is preempted")
        outcome = (f"At step {first.step:,} {needer} needs more KV blocks than are free {who}, its "
                   f"{first.num_tokens:,} tokens to be computed again")
    else:
        outcome = "Every running request finds a free block when it needs one"
    return choice_question(
        "memory", runs, f"{len(chats)} chat streams share {a_number(config.num_blocks)}-block pool; bursts of "
                        f"{burst} documents of {docs[0].prompt_len:,} tokens arrive. With a budget of {budget:,} "
                        "tokens a step, is anything preempted?", (_YES, _NO), _YES if victims else _NO,
        f"{count(len(victims), 'preemption')}. With a budget of {budget:,}, up to {together} of a burst's "
        f"{burst} documents prefill in the same step, {pool}. {outcome}. The budget also decides how fast memory is "
        "taken.",
        "How many documents can one step's budget take at once?",
        {_YES: f"with a budget of {budget:,} nothing is preempted: {pool.removeprefix('and ')}.",
         _NO: f"with a budget of {budget:,} the pool runs out: {count(len(victims), 'preemption')}."})


def _long_arrives(trace: Trace) -> int:
    """The step the long prompt arrives: where the players of the first three steps start."""
    return int(trace.requests["arrival_step"][trace.request_ids.index("long")])


def _first_preemption_or_burst(trace: Trace) -> int:
    """Token budget's memory step: the player starts at the first preemption, else where the first document
    arrives."""
    found = preemptions(trace)
    if found:
        return found[0].step
    docs = [int(a) for a, rid in zip(trace.requests["arrival_step"], trace.request_ids, strict=True)
            if rid.startswith("doc")]
    return min(docs, default=0)


def _stall_text(values: Values) -> str:
    return (f"Eight users are reading streamed answers, a token every {term_link('engine step')}. "
            f"{sentence_case(a_number(values['prompt']))}-token prompt arrives. Without chunking its whole "
            f"{term_link('prefill')} goes in one step.")


STEPS = (
    Step("stall", "One long prompt among the streams", _stall_text,
         "long_prompt", ("no chunking",), _ask_stall, ("streams",), (PROMPT,), unit="ms",
         start_step=_long_arrives),
    Step("chunks", "Chunked prefill under a token budget",
         f"The {term_link('token budget')} caps the tokens one step computes. Chunked prefill splits the prompt "
         "into pieces that fit beside the decodes.",
         "long_prompt", ("chunked prefill",), _ask_chunks, ("streams",), (BUDGET,), unit="ms",
         start_step=_long_arrives),
    Step("tradeoff", "The trade-off",
         "Chunking stops the streams from stalling. Does the long prompt pay for it?",
         "long_prompt", ("no chunking", "chunked prefill"), _ask_tradeoff, ("tbt", "streams"), (CHUNKED_BUDGET,),
         unit="ms", start_step=_long_arrives),
    Step("memory", "Where the budget meets memory",
         "A large budget admits many prompts in one step. In a small KV pool that matters.",
         "budget_memory", ("budget 8,192",), _ask_memory, ("kv",), (MEMORY_BUDGET,),
         start_step=_first_preemption_or_burst),
)
