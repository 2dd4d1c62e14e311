"""The Overload lesson's guided path: past the knee, a request cap at the door, a burst of long prompts (tokens, not
requests), and two classes of traffic under the priority policy. Each question is built from the step's runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from lessons.guided import Setting, Step, Values, by_label, choice_question, config_setting, number_question
from lessons.problems import Problem
from lessons.run import Run
from sim import metrics
from sim.scenario import Scenario
from sim.workload import generate
from ui.glossary import term_link
from ui.wording import count

from .lesson import at_load, classes, outcome, while_offered

_DURATION_S = 20


def _at(scenario: Scenario, load: int) -> Scenario:
    workload = at_load(scenario.workload, float(load), _DURATION_S)
    return dataclasses.replace(scenario, workload=workload, requests=tuple(generate(workload)))


LOAD = Setting("load", "Offered load (requests/s)", 40, (30, 40, 60), _at)
CLASSES_LOAD = Setting("load", "Offered load, both classes (requests/s)", 35, (15, 35, 50), _at)


def _share(run: Run) -> float:
    o = outcome(run.trace, run.summary)
    return 100.0 * o.num_met / o.num_requests


def _knee_text(values: Values) -> str:
    return (f"Clients send {values['load']} requests a second for {_DURATION_S} s, prompts of ~400 tokens and "
            f"answers of ~120. Every request should get its first token within 1 s ({term_link('TTFT')}) and no "
            f"gap between tokens over 100 ms: its {term_link('SLO', 'targets')}. Nothing is turned away.")


def _ask_knee(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    o = outcome(run.trace, run.summary)
    share = _share(run)
    return number_question(
        "knee", runs, f"The server serves about {o.throughput_req_s:,.0f} requests/s when it is full. What share "
                      f"of the {o.num_requests:,} requests meet both targets (%)?",
        share, "%",
        f"{o.num_met:,} of {o.num_requests:,} met them: {share:,.0f}%. Goodput is {o.goodput_req_s:,.1f} "
        f"requests/s while throughput is {o.throughput_req_s:,.1f}. "
        + ("Past the server's capacity the queue grows for as long as the traffic lasts, so each request waits "
           "behind all the earlier ones: only those that came before the queue built up are on time (the first-"
           "token chart below climbs with arrival time)."
           if share < 90 else "At this load the server keeps up: the queue stays short and the first tokens come "
                              "in time."),
        "Requests arrive faster than they finish: how long is the queue after 10 s, and how long does a request "
        "at its end wait?",
        [(100.0, "that would be a server that keeps up; the first-token chart shows who waited.")],
        tolerance=8.0, decimals=0)


CAP = config_setting("cap", "max_num_queued_reqs", "Request cap (max_num_queued_reqs)", 48, (32, 48, 96, 200),
                     runs=("request cap",))
_MORE, _SAME, _LESS = "more goodput", "about the same (within 1 request/s)", "less goodput"


def _ask_cap(runs: Sequence[Run], values: Values) -> Problem:
    plain, capped = by_label(runs, "no admission control"), by_label(runs, "request cap")
    a, b = outcome(plain.trace, plain.summary), outcome(capped.trace, capped.summary)
    diff = b.goodput_req_s - a.goodput_req_s
    answer = _SAME if abs(diff) <= 1.0 else _MORE if diff > 0 else _LESS
    cap = capped.scenario.config.max_num_queued_reqs
    return choice_question(
        "cap", runs, f"Same traffic, now with {term_link('admission control', '`max_num_queued_reqs`')} at {cap}: "
                     f"an arrival is refused when {cap} requests are already waiting or running. Against no "
                     "admission control, does the server get:", (_MORE, _SAME, _LESS), answer,
        f"Goodput {b.goodput_req_s:,.1f} requests/s with the cap against {a.goodput_req_s:,.1f} without; "
        f"{b.num_refused:,} requests refused at the door, p99 TTFT {b.ttft_p99_ms:,.0f} ms against "
        f"{a.ttft_p99_ms:,.0f} ms. A request let in waits behind at most {cap} others, "
        + ("so it is served in time." if b.ttft_p99_ms <= capped.scenario.config.ttft_slo_ms else
           "still too many for the 1 s target: a smaller cap would refuse more and keep the rest on time."),
        f"How long does a request wait behind the cap's worth of others, at ~{a.throughput_req_s:,.0f} served a "
        "second?",
        {_MORE: f"goodput is {b.goodput_req_s:,.1f} with the cap and {a.goodput_req_s:,.1f} without.",
         _SAME: f"goodput is {b.goodput_req_s:,.1f} with the cap and {a.goodput_req_s:,.1f} without.",
         _LESS: f"goodput is {b.goodput_req_s:,.1f} with the cap and {a.goodput_req_s:,.1f} without."})


TOKEN_CAP = config_setting("token_cap", "max_num_queued_tokens", "Token cap (max_num_queued_tokens)", 8000,
                           (4000, 8000, 100_000), runs=("token cap",))
_REQUEST, _TOKEN, _TIE = "the request cap", "the token cap", "the same (within 50 ms)"


def _chat_ttft_p99(run: Run) -> float:
    ttft = metrics.request_latencies(run.trace)["ttft_ms"]
    t = run.trace
    chat = (t.requests["client"] == t.client_ids.index("chat")) & metrics.served_mask(t)
    return float(np.percentile(ttft[chat], 99)) if chat.any() else float("nan")


def _refused(run: Run) -> int:
    return outcome(run.trace, run.summary).num_refused


def _ask_burst(runs: Sequence[Run], values: Values) -> Problem:
    req, tok = by_label(runs, "request cap"), by_label(runs, "token cap")
    a, b = _chat_ttft_p99(req), _chat_ttft_p99(tok)
    answer = _TIE if abs(a - b) <= 50 else _TOKEN if b < a else _REQUEST
    cap = tok.scenario.config.max_num_queued_tokens
    return choice_question(
        "burst", runs, f"Chats arrive steadily; then a burst of documents with ~4,000-token prompts. One server "
                       f"caps requests at {req.scenario.config.max_num_queued_reqs:,}, the other caps the prompt "
                       f"tokens still to prefill at {cap:,}. Which keeps the chats' p99 TTFT lower?",
        (_REQUEST, _TOKEN, _TIE), answer,
        f"The chats' p99 TTFT: {a:,.0f} ms under the request cap, {b:,.0f} ms under the token cap. The request cap "
        f"counts a 4,000-token document as one request, like a chat; the token cap counts its prompt"
        + (f", so once a few documents are waiting it refuses the rest ({count(_refused(tok), 'request')} refused "
           "at the door), and the chats "
           "behind them are not stuck behind their prefills." if _refused(tok) else
           f", but {cap:,} tokens hold the whole burst: it refused none, and the chats waited behind every "
           "document's prefill."),
        "What does a chat queued behind ten documents wait for?",
        {c: f"the chats' p99 TTFT is {a:,.0f} ms under the request cap and {b:,.0f} ms under the token cap."
         for c in (_REQUEST, _TOKEN, _TIE)})


_SOONER, _LATER, _EVEN = "sooner", "later", "about the same (within 10%)"


def _ask_classes(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, prio = (classes(by_label(runs, label).trace) for label in ("FCFS", "priority"))
    a, b = fcfs.batch_finish_p50_ms, prio.batch_finish_p50_ms
    answer = _EVEN if abs(b - a) <= 0.1 * a else _LATER if b > a else _SOONER
    offered, served, _ = while_offered(runs[0].trace)
    load = ("more than the server can serve" if served < 0.9 * offered else
            "within what the server can serve")
    return choice_question(
        "classes", runs, f"Interactive requests have targets; batch requests (priority 1) have none. Together they "
                         f"are {load}. Under vLLM's `priority` policy the interactive requests go first. Do the "
                         "batch requests finish sooner or later than under FCFS?",
        (_SOONER, _LATER, _EVEN), answer,
        f"The batch requests' median time from arrival to last token: {a:,.0f} ms under FCFS, "
        f"{b:,.0f} ms under priority. The interactive requests that met their targets: "
        f"{fcfs.num_met:,} of {fcfs.num_with_targets:,} under FCFS, {prio.num_met:,} under priority. The server "
        "serves as much either way; priority decides who waits.",
        "The server's capacity does not change with the policy: somebody still waits.",
        {c: f"the batch requests' median finish is {a:,.0f} ms under FCFS and {b:,.0f} ms under priority."
         for c in (_SOONER, _LATER, _EVEN)})


STEPS = (
    Step("knee", "Past the knee", _knee_text, "past_the_knee", ("no admission control",), _ask_knee,
         ("ttft_arrival", "queue"), (LOAD,), unit="ms"),
    Step("cap", "A request cap at the door",
         "vLLM can refuse a request at the door (HTTP 503) so that those it lets in stay on time.",
         "request_cap", ("no admission control", "request cap"), _ask_cap, ("ttft_arrival", "queue"), (CAP,),
         unit="ms"),
    Step("burst", "A burst of long prompts",
         "A cap on requests treats a 4,000-token document like a 200-token chat. The work waiting is in tokens.",
         "burst", ("request cap", "token cap"), _ask_burst, ("ttft_arrival", "queue"), (TOKEN_CAP,), unit="ms"),
    Step("classes", "Interactive and batch traffic",
         "Not every request has a latency target. The priority policy can put those that do first.",
         "two_classes", ("FCFS", "priority"), _ask_classes, ("ttft_arrival", "queue"), (CLASSES_LOAD,),
         unit="ms"),
)
