"""Cancellation's guided path: a 1,000-token answer abandoned at token 300 (the tokens and the KV wasted without an
abort), a server that notices late, and stop checks. Each question's answer is read from the step's runs
(``lessons/guided.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from lessons.problems import Problem, fmt
from lessons.run import Run
from sim.scenario import Scenario
from sim.trace import Trace
from ui.glossary import term_link
from ui.wording import count

from ..guided import Setting, Step, Values, by_label, config_setting, number_question
from . import lesson, measures

ANSWER_TOKENS, LEAVE_AFTER = 1000, 300  # the article's example (the preset's knobs)
HELD_FOR_NOBODY = "held by abandoned requests"  # the KV chart's legend entry for it (dotted black: KV_PARTS)


def _leave_after(scenario: Scenario, value: int) -> Scenario:
    answer = next(r.output_len for r in scenario.requests if r.abort_step is not None)
    return lesson.apply_requests(scenario, {"answer_tokens": answer, "leave_after_tokens": value})


def _answer_tokens(scenario: Scenario, value: int) -> Scenario:
    leave = next(r.abort_step - r.arrival_step for r in scenario.requests if r.abort_step is not None)
    return lesson.apply_requests(scenario, {"answer_tokens": value, "leave_after_tokens": leave})


LEAVE = Setting("leave_after_tokens", "The user leaves after token", LEAVE_AFTER, (300, 500, 800), _leave_after)
ANSWER = Setting("answer_tokens", "Answer length (tokens)", ANSWER_TOKENS, (500, 1000, 2000), _answer_tokens)


def _leaver(run: Run) -> int:
    return next(i for i, r in enumerate(run.scenario.requests) if r.abort_step is not None)


def _ask_wasted(runs: Sequence[Run], values: Values) -> Problem:
    keeping = by_label(runs, "no abort")
    row = _leaver(keeping)
    spec = keeping.scenario.requests[row]
    read = spec.abort_step - spec.arrival_step
    wasted = int(keeping.trace.requests["num_wasted_tokens"][row])
    r = keeping.trace.requests
    other = 1 - row
    waited = (keeping.scenario.config.max_num_seqs == 1
              and int(r["first_scheduled_step"][other]) > int(r["finish_step"][row]))
    meanwhile = (f", while the other request waits for the only slot until step "
                 f"{int(r['first_scheduled_step'][other]):,}" if waited else "")
    return number_question(
        "wasted", runs, f"The user of a {spec.output_len:,}-token answer closes the tab after token {read:,}. A server "
                        f"that never notices keeps generating: how many tokens does it generate for nobody?",
        wasted, "tokens",
        f"Everything after token {read:,} is read by nobody: {spec.output_len:,} - {read:,} = {wasted:,} tokens, one "
        f"per engine step{meanwhile}. In the KV chart below, the dotted area "
        f"(\"{HELD_FOR_NOBODY}\") is KV held for nobody.",
        "Which tokens does the user never read?",
        [(read, "that is what the user read; the question asks for what nobody reads."),
         (spec.output_len, "the user read the first part of the answer.")])


def _ask_kv(runs: Sequence[Run], values: Values) -> Problem:
    story = measures.abandon_story(list(runs))
    assert story is not None  # (the step's scenario: one user leaves, both servers ran)
    held, freed = measures.mb(story.end_kv_tokens, story.config), measures.mb(story.freed_kv_tokens, story.config)
    per_token = story.config.model.kv_bytes_per_token
    return number_question(
        "kv", runs, f"Each token's KV takes {per_token:,} bytes ({per_token // 1024} KiB, Llama 3.1 8B). Without an "
                    f"abort, how much KV memory (MB, 10^6 bytes) does the abandoned request hold when its answer is "
                    f"done?",
        held, "MB",
        f"At its last step it holds {story.end_kv_tokens:,} tokens of KV: {story.end_kv_tokens:,} x {per_token:,} B = "
        f"{fmt(held)} MB, all of it for nobody. A server that aborts at once frees {fmt(freed)} MB "
        f"({story.freed_kv_tokens:,} tokens) on the step after the user leaves.",
        "Tokens held times bytes per token; the answer keeps growing after the user leaves.",
        [(freed, "that is what it holds when the user leaves (what an abort frees); without one it keeps growing."),
         (story.end_kv_tokens * per_token / 2**20, "that is in MiB (2^20 bytes); the question asks for MB.")],
        tolerance=1.0)


DELAY = config_setting("delay", "disconnect_detect_delay_steps", "The server notices after (steps)", 50, (0, 50, 200))


def _ask_delay(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    row = _leaver(run)
    delay = run.scenario.config.disconnect_detect_delay_steps
    wasted = int(run.trace.requests["num_wasted_tokens"][row])
    spec = run.scenario.requests[row]
    waiter = 1 - row
    start = int(run.trace.requests["first_scheduled_step"][waiter])
    left = spec.abort_step
    late = (f"{delay:,} steps late (a proxy buffers, a health check polls)" if delay else
            "at once")
    after = (f"{start - left:,} steps after the user left" if start > left else "as soon as the user leaves")
    return number_question(
        "delay", runs, f"Now the server aborts, and notices the disconnect {late}. How many tokens does it generate "
                       "for nobody?",
        wasted, "tokens",
        f"Until it notices, the answer keeps growing by one token a step: {wasted:,} tokens for nobody, and "
        f"the other request, waiting for the slot, starts at step {start:,}, {after} (step {left:,}).",
        "One token per step while nobody has noticed.",
        [(0, "the abort comes only once the server notices."),
         (spec.output_len - (spec.abort_step - spec.arrival_step), "the server does abort, only late.")])


MAX_TOKENS = Setting("max_tokens", "max_tokens", 512, (256, 512, 1024),
                     lambda sc, v: lesson.apply_requests(sc, {"max_tokens": v, "stop_marker": "mixed"}))


def _ask_stops(runs: Sequence[Run], values: Values) -> Problem:
    run = by_label(runs, "stop at max_tokens")
    spec = run.scenario.requests[0]
    wasted = int(run.trace.requests["num_wasted_tokens"][0])
    total = int(run.summary["wasted_tokens"])
    checked = by_label(runs, "check every step")
    late = checked.trace.requests["num_wasted_tokens"]
    strings = sum(1 for i, r in enumerate(checked.scenario.requests) if r.stop_type == "string" and late[i] > 0)
    how = (f"{count(strings, 'answer')} ending on a stop string, each caught one step late"
           if int(late.sum()) == strings else "a stop string is caught one step late")
    return number_question(
        "stops", runs, f"Request r0's answer ends at token {spec.output_len} (a stop token) with max_tokens "
                       f"{spec.max_tokens:,}. A server that only stops at max_tokens: how many tokens does it generate "
                       f"for r0 past the answer's end?",
        wasted, "tokens",
        f"It runs to max_tokens: {spec.max_tokens:,} - {spec.output_len} = {wasted:,} tokens past the end, and "
        f"{total:,} over all {len(run.scenario.requests)} requests, against {int(late.sum()):,} for a server that "
        f"checks every step ({how}). Compare the Gantt charts.",
        "The answer is done at its stop token; count what comes after it.",
        [(spec.max_tokens, "the first tokens up to the stop are the answer itself.")])


def _user_leaves(trace: Trace) -> int:
    """The step the user closes the tab: where the steps' players start."""
    left = trace.requests["disconnect_step"]
    return int(left[left >= 0].min()) if (left >= 0).any() else 0


def _wasted_text(values: Values) -> str:
    return (f"One slot: a {ANSWER_TOKENS:,}-token answer is streaming while a second request waits. The user reads "
            f"{values['leave_after_tokens']:,} tokens, then leaves. A server that does not {term_link('abort')} "
            "keeps going.")


STEPS = (
    Step("wasted", "A user closes the tab", _wasted_text,
         "article_abandon", ("abort on disconnect", "no abort"), _ask_wasted, ("kv_for_nobody", "gantt"), (LEAVE,),
         start_step=_user_leaves),
    Step("kv", "The memory it holds",
         f"Every generated token adds to the request's {term_link('KV cache')}, and the memory stays taken until the "
         "request ends, whoever is reading.",
         "article_abandon", ("abort on disconnect", "no abort"), _ask_kv, ("kv_for_nobody",), (ANSWER,),
         start_step=_user_leaves),
    Step("delay", "Noticing late",
         "A server only learns of a disconnect when it writes to the closed connection, or when a proxy tells it; "
         "in between it generates for nobody.",
         "article_abandon", ("abort on disconnect",), _ask_delay, ("gantt", "kv_for_nobody"), (DELAY,),
         start_step=_user_leaves),
    Step("stops", "Stop checks",
         f"Answers usually end on their own, long before max_tokens. A {term_link('stop check')} after every step "
         "frees the slot at once; a server that only stops at max_tokens generates the rest.",
         "stops", ("check every step", "stop at max_tokens"), _ask_stops, ("gantt",), (MAX_TOKENS,)),
)
