"""Token budget's guided path: an 8,000-token prompt among eight decoding streams (the stall without chunking),
its chunks under a 512-token budget, the trade-off between TTFT and smooth streams, and where the budget meets
memory. Each question's answer is read from the step's runs (``ui/lessons/guided.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from sim import metrics
from sim.config import cdiv
from sim.problems import Problem, fmt
from sim.scenario import Scenario

from ..glossary import term_link
from ..lesson import Run
from ..wording import count
from .guided import Setting, Step, Values, by_label, choice_question, config_setting, number_question


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
        "stall", runs, f"Eight streams decode one token a step ({fmt(plain, 2)} ms a step). A {prompt:,}-token prompt "
                       f"arrives; without chunked prefill it is prefilled in one step. A step costs "
                       f"{fmt(cost.step_base_ms, 2)} ms + {fmt(cost.prefill_token_us)} us per prefill token + "
                       f"{fmt(cost.decode_request_us)} us per decoding request. How long is that step (ms)?",
        ms, "ms",
        f"{fmt(cost.step_base_ms, 2)} + {prompt:,} x {fmt(cost.prefill_token_us)} us + {decoding} x "
        f"{fmt(cost.decode_request_us)} us = {fmt(ms, 1)} ms. Every stream waits that long for its next token: the "
        "gap in each row of the chart below.",
        "The step computes the whole prompt and the eight decodes together.",
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
    return number_question(
        "chunks", runs, f"With {term_link('chunked prefill')} and a budget of {budget:,} tokens a step, the eight "
                        f"decoding streams take their 8 tokens first. In how many steps is the {prompt:,}-token prompt "
                        f"prefilled?",
        steps, "steps",
        f"Each step gives the prompt {budget:,} - 8 = {budget - 8:,} tokens: {prompt:,} / {budget - 8:,} rounded up = "
        f"{steps} chunks, and the streams keep a token every step throughout (the even combs below).",
        "The running streams are scheduled first; the prompt gets what is left of the budget.",
        [(cdiv(prompt, budget), "that divides by the whole budget; the decoding streams take theirs first."),
         (1, "that is without chunking.")])


def _chunked_budget(scenario: Scenario, value: int) -> Scenario:
    # (the chunked run only: without chunking the budget must hold the whole prompt)
    return scenario.with_config(max_num_batched_tokens=value) if scenario.config.chunked_prefill else scenario


CHUNKED_BUDGET = Setting("budget", "Chunked run's budget (tokens)", 512, (256, 512, 8192), _chunked_budget)
_PLAIN, _CHUNKED, _TIE = "without chunking", "with chunked prefill", "the same (within 1 ms)"


def _ask_tradeoff(runs: Sequence[Run], values: Values) -> Problem:
    plain, chunked = by_label(runs, "no chunking"), by_label(runs, "chunked prefill")
    ttft = {run.label: float(metrics.request_latencies(run.trace)["ttft_ms"][_row(run)]) for run in runs}
    gap = {run.label: float(np.nanmax(np.delete(metrics.request_tbt(run.trace)["max_ms"], _row(run))))
           for run in runs}
    diff = ttft[plain.label] - ttft[chunked.label]
    answer = _TIE if abs(diff) <= 1.0 else _CHUNKED if diff > 0 else _PLAIN
    budget = chunked.scenario.config.max_num_batched_tokens
    return choice_question(
        "tradeoff", runs, f"Chunking (budget {budget:,}) keeps the streams smooth. When does the long prompt get its "
                          f"first token sooner ({term_link('TTFT')})?", (_PLAIN, _CHUNKED, _TIE), answer,
        f"TTFT: {fmt(ttft[plain.label])} ms without chunking, {fmt(ttft[chunked.label])} ms chunked. The streams' "
        f"longest pause: {fmt(gap[plain.label])} ms against {fmt(gap[chunked.label])} ms. Each chunk pays the step's "
        "fixed cost again, so the prompt waits longer; the budget sets the trade between its TTFT and every "
        f"stream's {term_link('TBT', 'time between tokens')}.",
        "Count the steps each way, and what each step costs.",
        {c: f"TTFT is {fmt(ttft[plain.label])} ms without chunking and {fmt(ttft[chunked.label])} ms chunked."
         for c in (_PLAIN, _CHUNKED, _TIE)})


MEMORY_BUDGET = config_setting("budget", "max_num_batched_tokens", "Token budget (tokens)", 8192, (512, 2048, 8192),
                               {b: f"budget {b:,}" for b in (512, 2048, 8192)}, names_run=True)
_YES, _NO = "yes: a document is preempted", "no preemption"


def _ask_memory(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    budget = run.scenario.config.max_num_batched_tokens
    num_preemptions = int(run.summary["num_preemptions"])
    return choice_question(
        "memory", runs, f"Eight chats stream in a 680-block pool; bursts of four 2,000-token documents arrive. With a "
                        f"budget of {budget:,} tokens a step, is anything preempted?", (_YES, _NO),
        _YES if num_preemptions else _NO,
        f"{count(num_preemptions, 'preemption')}. A budget of {budget:,} admits "
        + ("a whole burst in one step, filling the pool to its last block, so the chats' next blocks are missing"
           if num_preemptions else "the documents one by one, so the pool never fills")
        + ". The budget also decides how fast memory is taken.",
        "How many documents can one step's budget admit at once?",
        {_YES: f"with a budget of {budget:,} the documents come in one by one and the pool never runs out.",
         _NO: f"with a budget of {budget:,} a whole burst is admitted at once and the pool runs out: "
              f"{num_preemptions:,} preemption(s)."})


STEPS = (
    Step("stall", "One long prompt, eight streams",
         f"Eight users are reading streamed answers, a token every {term_link('engine step')}. An 8,000-token "
         f"prompt arrives. Without chunking its whole {term_link('prefill')} goes in one step.",
         "long_prompt", ("no chunking",), _ask_stall, ("streams",), (PROMPT,), unit="ms"),
    Step("chunks", "Chunked prefill under a 512-token budget",
         f"The {term_link('token budget')} caps the tokens one step computes. Chunked prefill splits the prompt "
         "into pieces that fit beside the decodes.",
         "long_prompt", ("chunked prefill",), _ask_chunks, ("streams",), (BUDGET,), unit="ms"),
    Step("tradeoff", "The trade-off",
         "Chunking stops the streams from stalling. Does the long prompt pay for it?",
         "long_prompt", ("no chunking", "chunked prefill"), _ask_tradeoff, ("tbt", "streams"), (CHUNKED_BUDGET,),
         unit="ms"),
    Step("memory", "Where the budget meets memory",
         "A large budget admits many prompts in one step. In a small KV pool that matters.",
         "budget_memory", ("budget 8,192",), _ask_memory, ("kv",), (MEMORY_BUDGET,)),
)
