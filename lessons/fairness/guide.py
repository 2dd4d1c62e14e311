"""Fairness's guided path: a 90/10 client split under FCFS (who waits), a per-client rate limit (what it costs in
throughput), VTC (what it does for the light client), and the lift for a client returning from idle. Each
question's answer is read from the step's runs (``lessons/guided.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lessons.problems import Problem, fmt
from lessons.run import Run
from sim import metrics
from sim.fairness_metrics import lifts, longest_starvation_steps
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import ClientSpec, generate
from ui.glossary import term_link

from ..guided import Setting, Step, Values, by_label, choice_question, config_setting

POLICY = config_setting("policy", "policy", "Policy", "fcfs", ("fcfs", "vtc"), {"fcfs": "FCFS", "vtc": "VTC"},
                        names_run=True)


def _queue_ms(run: Run) -> dict[str, float]:
    """Client -> its served requests' mean queueing delay (ms)."""
    return {row["client"]: float(row["mean_queue_ms"]) for row in metrics.per_client(run.trace)}


_A, _B, _SAME = "A's (it sends 90% of the requests)", "B's (it sends 10%)", "about the same (within 20%)"


def _ask_who_waits(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    q = _queue_ms(run)
    answer = _SAME if abs(q["A"] - q["B"]) <= 0.2 * max(q["A"], q["B"]) else _A if q["A"] > q["B"] else _B
    policy = run.scenario.config.policy.value
    if policy == "fcfs":
        why = ("FCFS serves requests in arrival order and never looks at who sent them"
               + (": B's few requests queue behind A's wall like everyone else's" if answer == _SAME else
                  "; the difference comes from when each client's requests happened to arrive"))
    else:
        why = ("VTC serves the client with the least service first"
               + (": B's few requests go ahead of A's queue" if answer == _A else
                  ", and here that did not put B's requests ahead of A's"))
    return choice_question(
        "who_waits", runs, f"Client A sends 90% of the requests, B the other 10%, more than the server can take. Under "
                           f"{run.label}, whose requests wait longer in the queue, on average?", (_A, _B, _SAME),
        answer, f"Mean queueing delay: A {fmt(q['A'], 0)} ms, B {fmt(q['B'], 0)} ms. {why}. The boxes below show each "
                "client's queueing delays (the dashed line in a box is its mean).",
        "Think about what the policy looks at when it picks the next request: its arrival, or its client.",
        {_A: f"A's requests wait {fmt(q['A'], 0)} ms on average and B's {fmt(q['B'], 0)} ms.",
         _B: f"B's requests wait {fmt(q['B'], 0)} ms on average and A's {fmt(q['A'], 0)} ms.",
         _SAME: f"A's requests wait {fmt(q['A'], 0)} ms and B's {fmt(q['B'], 0)} ms: not the same."})


LIMIT = config_setting("limit", "rate_limit_max_requests", "Requests per client per 200-step window", 10, (10, 25, 60),
                       runs=("Rate limit",))  # (FCFS's own run stays without a limit)
_HALF, _SOME, _KEPT = ("it falls below 60% of FCFS's", "it falls to between 60% and 90% of FCFS's",
                       "about the same (90% or more of FCFS's)")


def _throughput(run: Run) -> float:
    return float(run.summary["throughput_tok_s"])


def _steps_with_free_slots(run: Run) -> int:
    """Steps, before the last request arrives, in which fewer requests ran than there are batch slots."""
    last_arrival = int(run.trace.requests["arrival_step"].max())
    running = run.trace.steps["num_running"][: last_arrival + 1]
    return int((running < run.scenario.config.max_num_seqs).sum())


def _ask_rate_limit(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, limited = by_label(runs, "FCFS"), by_label(runs, "Rate limit")
    share = _throughput(limited) / _throughput(fcfs)
    answer = _HALF if share < 0.6 else _SOME if share < 0.9 else _KEPT
    config = limited.scenario.config
    limit, window = config.rate_limit_max_requests, config.rate_limit_window_steps
    turned = int(limited.summary["num_rejected"])
    idle, fcfs_idle = _steps_with_free_slots(limited), _steps_with_free_slots(fcfs)
    if turned and idle > fcfs_idle:
        refused = (f"The limit turned {turned:,} requests away, and while requests kept arriving fewer than all "
                   f"{config.max_num_seqs} batch slots were in use in {idle:,} steps (under FCFS: {fcfs_idle:,}): it "
                   "protects B by refusing A, not by sharing the GPU.")
    elif turned:
        refused = (f"The limit turned {turned:,} requests away, yet the batch slots stood empty no more often than "
                   f"under FCFS ({idle:,} steps against {fcfs_idle:,}): the requests it refused were the queue's.")
    else:
        refused = "The limit turned nobody away here, so it changed nothing."
    return choice_question(
        "rate_limit", runs, f"A gateway lets each client send at most {limit} requests per {window} steps and turns "
                            "the rest away. What happens to the server's total throughput (output tokens/s)?",
        (_HALF, _SOME, _KEPT), answer,
        f"Throughput: FCFS {fmt(_throughput(fcfs), 0)} tokens/s, with the limit {fmt(_throughput(limited), 0)} "
        f"({share:.0%}). {refused} The throughput chart shows the gap.",
        "The limit applies whether or not the GPU has room to spare.",
        {c: f"with this limit the server keeps {share:.0%} of FCFS's throughput." for c in (_HALF, _SOME, _KEPT)})


def _b_share(scenario: Scenario, share: float) -> Scenario:
    spec = scenario.workload
    assert spec is not None  # (the preset's workload is generated)
    workload = spec.replace(clients=(ClientSpec("A", share=1 - share), ClientSpec("B", share=share)))
    return dataclasses.replace(scenario, workload=workload, requests=tuple(generate(workload)))


B_SHARE = Setting("b_share", "Client B's share of the requests", 0.1, (0.1, 0.5), _b_share,
                  {0.1: "10%", 0.5: "50%"})
_TENTH, _SHORTER, _ABOUT, _LONGER = ("less than a tenth of it", "shorter, but more than a tenth of it",
                                     "about the same (within 25%)", "longer")


def _ask_vtc(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, vtc = _queue_ms(by_label(runs, "FCFS")), _queue_ms(by_label(runs, "VTC"))
    ratio = vtc["B"] / fcfs["B"] if fcfs["B"] > 0 else 1.0
    answer = (_LONGER if ratio > 1.25 else _ABOUT if ratio >= 0.75 else _SHORTER if ratio >= 0.1 else _TENTH)
    share = values.get("b_share", B_SHARE.default)
    return choice_question(
        "vtc", runs, f"VTC keeps a {term_link('VTC', 'virtual token counter')} per client and serves the waiting "
                     f"client with the lowest. B sends {share:.0%} of the requests; under FCFS its requests wait "
                     f"{fmt(fcfs['B'], 0)} ms on average. Under VTC?", (_TENTH, _SHORTER, _ABOUT, _LONGER), answer,
        f"B's mean queueing delay: FCFS {fmt(fcfs['B'], 0)} ms, VTC {fmt(vtc['B'], 0)} ms ({ratio:.0%}); A's: "
        f"{fmt(fcfs['A'], 0)} -> {fmt(vtc['A'], 0)} ms. A client that asks for less than its share has the lowest "
        "counter, so its requests go first; one asking as much as the other gets no head start. The counters "
        "chart shows who is behind.",
        "Who has the lowest counter when both clients have requests waiting?",
        {c: f"B's wait goes from {fmt(fcfs['B'], 0)} to {fmt(vtc['B'], 0)} ms ({ratio:.0%})."
         for c in (_TENTH, _SHORTER, _ABOUT, _LONGER)})


LIFT_POLICY = config_setting("policy", "policy", "Policy", "lcf", ("lcf", "vtc"),
                             {"lcf": "LCF (no lift)", "vtc": "VTC (lift)"}, names_run=True)
_SHUT, _SHARE = ("A is not admitted for over 100 steps: B spends its banked credit",
                 "A keeps being admitted alongside B (no gap over 100 steps)")


def _b_returns(trace: Trace) -> int:
    """The step B's first request arrives (B stays away until then): where the lift step's player starts."""
    r = trace.requests
    return int(r["arrival_step"][r["client"] == trace.client_ids.index("B")].min())


def _ask_lift(runs: Sequence[Run], values: Values) -> Problem:
    run = runs[0]
    ids = run.trace.client_ids
    a, b = ids.index("A"), ids.index("B")
    starved = longest_starvation_steps(run.trace)[a]
    answer = _SHUT if starved > 100 else _SHARE
    back = _b_returns(run.trace)
    counters = run.trace.clients["client_counters"]
    ca, cb = float(counters[back - 1, a]), float(counters[back - 1, b])
    lift = lifts(run.trace)
    if lift["count"] and lift["client"] == b and lift["step"] <= back + 1:
        rule = (f"VTC {term_link('counter lift', 'lifts')} B's counter to {fmt(lift['after'], 0)}, the lowest active "
                "counter, so B banks nothing from its idle stretch and the two clients share the slots from the "
                "start")
    else:
        rule = (f"Without a {term_link('counter lift', 'lift')} B keeps its low counter, so B's requests go first "
                "until its counter catches up with A's")
    return choice_question(
        "lift", runs, f"B is idle for {back:,} steps while A uses the server, then sends a burst. Under {run.label}, "
                      f"what happens to A when B returns?", (_SHUT, _SHARE), answer,
        f"When B's first request arrives (step {back:,}), A's counter is {fmt(ca, 0)} and B's {fmt(cb, 0)}. {rule}: "
        f"A's longest stretch with requests waiting and none admitted is {starved:,} steps. See the counters and "
        "each client's tokens/s below.",
        "Compare the two counters at the moment B returns.",
        {_SHUT: f"A's longest wait without an admission is only {starved:,} steps.",
         _SHARE: f"A waits {starved:,} steps in a row without an admission."})


STEPS = (
    Step("who_waits", "One busy client, one light client",
         "Client A floods the server with 90% of the requests; client B sends a trickle. The server is overloaded, "
         f"so a queue builds and each request's {term_link('queueing delay')} grows.",
         "article_fairness", ("FCFS",), _ask_who_waits, ("client_queue",), (POLICY,)),
    Step("rate_limit", "A per-client rate limit",
         f"A common fix in front of the server: a {term_link('rate limit')} per client per time window. It stops A "
         "from crowding B out. What does it cost?",
         "article_fairness", ("FCFS", "Rate limit"), _ask_rate_limit, ("throughput",), (LIMIT,)),
    Step("vtc", "VTC: serve the least-served client first",
         "The Virtual Token Counter counts the weighted tokens each client has been served and always admits from "
         "the client with the lowest count, without turning anyone away.",
         "article_fairness", ("FCFS", "VTC"), _ask_vtc, ("client_latency", "counters"), (B_SHARE,)),
    Step("lift", "Returning from idle: the lift",
         "A counter that only grows has a loophole: a client that stays away banks credit. Least counter first "
         f"({term_link('LCF')}) has no rule against it; VTC lifts a returning client's counter.",
         "returning_idle", ("LCF (no lift)",), _ask_lift, ("counters", "client_rates"), (LIFT_POLICY,),
         start_step=_b_returns),
)
