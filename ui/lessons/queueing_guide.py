"""Queueing's guided path: one slot and three requests (FCFS, then SJF), predicted lengths, starvation and its
guard, vLLM's ``priority``. Each question's answer is read from the step's runs (``ui/lessons/guided.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from sim import metrics
from sim.problems import Problem, fmt

from ..glossary import term_link
from ..lesson import Run
from ..wording import count
from .guided import Step, Values, by_label, choice_question, config_setting, number_question

SLOTS = config_setting("max_num_seqs", "max_num_seqs", "Batch slots (max_num_seqs)", 1, (1, 2, 3))


def _finish(run: Run) -> float:
    return float(run.summary["finish_steps"]["mean"])


def _order(run: Run) -> str:
    """'long 0-999, then short1 1,000-1,099, ...' in the order the requests started."""
    r, ids = run.trace.requests, run.trace.request_ids
    rows = sorted(range(len(ids)), key=lambda i: int(r["first_scheduled_step"][i]))
    return ", then ".join(f"{ids[i]} steps {int(r['first_scheduled_step'][i]):,}-{int(r['finish_step'][i]):,}"
                          for i in rows)


def _ask_fcfs(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, sjf = by_label(runs, "FCFS"), by_label(runs, "SJF (true lengths)")
    lengths = [r.output_len for r in fcfs.scenario.requests]
    slots = fcfs.scenario.config.max_num_seqs
    mean = _finish(fcfs)
    return number_question(
        "fcfs", runs, f"Under FCFS with {count(slots, 'batch slot')}, what is the average finish "
                      "time of the three requests (engine steps from arrival to the last token)?",
        mean, "steps",
        f"FCFS runs them in arrival order: {_order(fcfs)}. Each finishes after the answers ahead of it plus its own, "
        f"so the average is {fmt(mean)} steps: in the Gantt chart below, the short answers' bars start only where "
        f"the long one's ends.",
        "Add up, for each request, the answers that run before it and its own length.",
        [(sum(lengths) / len(lengths), "that is the average answer length: it leaves out the wait for the slot."),
         (_finish(sjf), "that is shortest-job-first's figure; FCFS keeps the arrival order.")], tolerance=0.5)


def _ask_sjf(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, sjf = by_label(runs, "FCFS"), by_label(runs, "SJF (true lengths)")
    mean = _finish(sjf)
    return number_question(
        "sjf", runs, "Same requests, same slots, now shortest-job-first (it knows each answer's length). Average "
                     "finish time, in steps?",
        mean, "steps",
        f"SJF runs the shortest waiting answer first: {_order(sjf)}. The short answers no longer wait for the long "
        f"one, so the average falls from {fmt(_finish(fcfs))} (FCFS) to {fmt(mean)} steps; compare the two Gantt "
        f"charts: the long request now finishes last, a little later than before.",
        "Put the shortest answer first, then add up as for FCFS.",
        [(_finish(fcfs), "that is FCFS's figure; SJF puts the two short answers first.")], tolerance=0.5)


SIGMA = config_setting("sigma", "prediction_error_sigma", "Length-prediction error (lognormal sigma)", 0.5,
                       (0.0, 0.5, 1.0, 2.0))
_SAME, _BETWEEN, _WORSE = ("about the same as SJF on true lengths (within 1%)", "between SJF on true lengths and FCFS",
                           "worse than FCFS")


def _ask_predicted(runs: Sequence[Run], values: Values) -> Problem:
    true, pred, fcfs = (_finish(by_label(runs, label)) for label in ("SJF (true lengths)", "SJF (predicted)", "FCFS"))
    answer = _SAME if abs(pred - true) <= 0.01 * true else _BETWEEN if pred < fcfs else _WORSE
    sigma = values.get("sigma", SIGMA.default)
    return choice_question(
        "predicted", runs, f"With a prediction error of sigma {sigma:g}, where does SJF on predicted lengths land "
                           "(average finish time)?", (_SAME, _BETWEEN, _WORSE), answer,
        f"Average finish: SJF on true lengths {fmt(true)} steps, on predicted lengths {fmt(pred)}, FCFS {fmt(fcfs)}. "
        "A wrong prediction sometimes puts a long answer ahead of short ones, so the order slides from SJF's toward "
        "arrival order as the error grows; the finish-time curves below show how far.",
        "Think of what a noisy length estimate does to the order, compared with the true one and with arrival "
        "order.",
        {_SAME: f"with sigma {sigma:g} the predictions misorder some requests: {fmt(pred)} against {fmt(true)} steps.",
         _BETWEEN: f"with sigma {sigma:g} the predictions are good enough to keep SJF's order: {fmt(pred)} against "
                   f"{fmt(true)} steps.",
         _WORSE: f"even noisy predictions beat arrival order here: {fmt(pred)} against FCFS's {fmt(fcfs)} steps."})


GUARD = config_setting("guard", "starvation_threshold_steps", "Starvation guard threshold (steps)", 200,
                       (100, 200, 400))


def _wait_of(run: Run, request_id: str) -> int:
    """Its queueing delay (steps from arrival to its first scheduled step)."""
    return int(metrics.request_latencies(run.trace)["queue_steps"][run.trace.request_ids.index(request_id)])


def _ask_guard(runs: Sequence[Run], values: Values) -> Problem:
    guarded, bare = by_label(runs, "SJF + guard"), by_label(runs, "SJF, no guard")
    threshold = guarded.scenario.config.starvation_threshold_steps
    short = min(r.output_len for r in guarded.scenario.requests)
    wait = _wait_of(guarded, "long")
    return number_question(
        "guard", runs, f"A 600-step request waits among a stream of {short}-step ones, one slot. Pure SJF makes it "
                       f"wait {_wait_of(bare, 'long'):,} steps. With a starvation guard of {threshold:,} steps, how "
                       f"long does it wait before it starts?",
        wait, "steps",
        f"The guard promotes a request that has waited {threshold:,} steps; it then takes the slot as soon as the "
        f"short answer running there ends: {wait:,} steps in all. In the Gantt charts the long bar moves from the "
        f"end of the run to near its start.",
        "The guard promotes it after the threshold, but it does not interrupt the request already running.",
        [(_wait_of(bare, "long"), "that is the wait without a guard."),
         (0, "SJF still puts every short request first until the guard promotes the long one.")],
        tolerance=float(short))


PRIORITY_SLOTS = config_setting("max_num_seqs", "max_num_seqs", "Batch slots (max_num_seqs)", 4, (4, 8))
_FREE, _PREEMPTS, _AHEAD, _BEHIND = (
    "it starts at once: a slot is free",
    "it preempts a running batch job and starts at once",
    "it waits for the first batch job to finish, then goes ahead of the batch jobs still waiting",
    "it waits behind every batch job that arrived before it")


def _ask_priority(runs: Sequence[Run], values: Values) -> Problem:
    run = by_label(runs, "priority")
    r, ids = run.trace.requests, run.trace.request_ids
    chat = ids.index("chat0")
    arrival, start = int(r["arrival_step"][chat]), int(r["first_scheduled_step"][chat])
    jumped = [ids[i] for i in range(len(ids)) if ids[i].startswith("batch")
              and r["arrival_step"][i] < arrival and r["first_scheduled_step"][i] > start]
    if start == arrival:
        answer = _PREEMPTS if run.summary["num_preemptions"] else _FREE
    else:
        answer = _AHEAD if jumped else _BEHIND
    slots = run.scenario.config.max_num_seqs
    fcfs_start = int(by_label(runs, "FCFS").trace.requests["first_scheduled_step"][chat])
    return choice_question(
        "priority", runs, f"vLLM's `priority` policy, {slots} batch slots: six batch jobs (priority 1) arrive first, "
                          f"then chat0 (priority 0, more urgent) at step {arrival}. What happens to chat0?",
        (_FREE, _PREEMPTS, _AHEAD, _BEHIND), answer,
        f"chat0 arrives at step {arrival:,} and starts at step {start:,} (under FCFS: {fcfs_start:,}). "
        + (f"It goes ahead of {', '.join(jumped)}, which were waiting before it; " if jumped else "")
        + "a lower priority value is served first from the waiting queue, but a new arrival only preempts a running "
          "request when memory runs out, never for a slot. Compare the chat rows in the two Gantt charts.",
        "Look at how many slots the batch jobs take, and what vLLM's priority does to the waiting queue.",
        {_PREEMPTS: "priority orders the waiting queue; a full batch of slots does not make the scheduler preempt "
                    "(only a full KV pool does).",
         _BEHIND: "that is FCFS; priority lets chat0 go ahead of the waiting batch jobs.",
         _FREE: f"with {slots} slots and the batch jobs running, no slot is free when chat0 arrives.",
         _AHEAD: f"with {slots} slots there is room for chat0 the moment it arrives."})


STEPS = (
    Step("fcfs", "One slot, three requests: FCFS",
         f"One {term_link('max_num_seqs', 'batch slot')} and three requests arriving together: a 1,000-step answer "
         f"first, two 100-step answers behind it. First come, first served (FCFS) runs them in arrival order. "
         f"Predict the average finish time before you look.",
         "article_hol", ("FCFS", "SJF (true lengths)"), _ask_fcfs, ("gantt",), (SLOTS,), shown=("FCFS",)),
    Step("sjf", "Shortest job first",
         f"The short answers waited for the long one: {term_link('head-of-line blocking')}. Shortest-job-first (SJF) "
         f"picks the waiting request with the shortest answer. What does that do to the average?",
         "article_hol", ("FCFS", "SJF (true lengths)"), _ask_sjf, ("gantt",), (SLOTS,)),
    Step("predicted", "Nobody knows an answer's length",
         "A server cannot know how long an answer will be before generating it; it can only predict. On a busy "
         "server (300 requests, 16 slots), SJF orders by predicted lengths with a lognormal error.",
         "predicted_lengths", ("SJF (true lengths)", "SJF (predicted)", "FCFS"), _ask_predicted,
         ("finish_ecdf",), (SIGMA,)),
    Step("guard", "Starvation, and the guard",
         "SJF has a price: a long request keeps losing to every short one that arrives. A starvation guard promotes "
         "a request that has waited too long.",
         "starvation", ("SJF, no guard", "SJF + guard"), _ask_guard, ("gantt",), (GUARD,)),
    Step("priority", "vLLM's priority policy",
         "vLLM offers `fcfs` and `priority`: each request carries a priority, and the waiting queue is ordered by it. "
         "Interactive chat requests (priority 0) share four slots with background batch jobs (priority 1).",
         "priority_lanes", ("FCFS", "priority"), _ask_priority, ("gantt",), (PRIORITY_SLOTS,)),
)
