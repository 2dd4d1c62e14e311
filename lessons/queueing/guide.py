"""Queueing's guided path: one slot and three requests (FCFS, then SJF), predicted lengths, starvation and its
guard, vLLM's ``priority``. Each question's answer is read from the step's runs (``lessons/guided.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from lessons.problems import Problem, fmt
from lessons.run import Run
from sim import metrics
from sim.events import join_and
from sim.presets import get
from ui.glossary import term_link
from ui.wording import count, number_word, sentence_case

from ..guided import Step, Values, by_label, choice_question, config_setting, number_question

SLOTS = config_setting("max_num_seqs", "max_num_seqs", "Batch slots (max_num_seqs)", 1, (1, 2, 3))
# SJF against FCFS: with three slots nobody waits and the two runs are the same, so the step compares one and two.
SJF_SLOTS = config_setting("max_num_seqs", "max_num_seqs", "Batch slots (max_num_seqs)", 1, (1, 2))


def _finish(run: Run) -> float:
    return float(run.summary["finish_steps"]["mean"])


def _rows_by_start(run: Run) -> list[int]:
    r = run.trace.requests
    return sorted(range(run.trace.num_requests), key=lambda i: (int(r["first_scheduled_step"][i]), i))


def _order(run: Run) -> str:
    """'long steps 0-999, then short1 steps 1,000-1,099, ...' in the order the requests started."""
    r, ids = run.trace.requests, run.trace.request_ids
    return ", then ".join(f"{ids[i]} steps {int(r['first_scheduled_step'][i]):,}-{int(r['finish_step'][i]):,}"
                          for i in _rows_by_start(run))


def waits(run: Run) -> list[tuple[str, int, str]]:
    """(waiter, steps waited, the request whose slot it took when that one finished) for each request that waited
    for a slot, in the order they started."""
    r, ids = run.trace.requests, run.trace.request_ids
    out = []
    for i in _rows_by_start(run):
        start, arrival = int(r["first_scheduled_step"][i]), int(r["arrival_step"][i])
        if start > arrival:
            freed = next((ids[j] for j in range(len(ids)) if int(r["finish_step"][j]) == start - 1), "")
            out.append((ids[i], start - arrival, freed))
    return out


def _waits_text(run: Run) -> str:
    """'short1 waits 1,000 steps and short2 1,100' or 'nobody waits'."""
    got = waits(run)
    if not got:
        return "nobody waits"
    first, *rest = got
    return (f"{first[0]} waits {first[1]:,} steps" + "".join(f", {w} {n:,}" for w, n, _ in rest[:-1])
            + (f" and {rest[-1][0]} {rest[-1][1]:,}" if rest else ""))


def _bars_text(run: Run) -> str:
    """Where the waiting requests' Gantt bars start: 'short1's bar starts only where long's ends; ...'."""
    parts = [f"{w}'s bar starts only where {b}'s ends" for w, _, b in waits(run) if b]
    return "; ".join(parts)


def _ask_fcfs(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, sjf = by_label(runs, "FCFS"), by_label(runs, "SJF (true lengths)")
    lengths = [r.output_len for r in fcfs.scenario.requests]
    slots = fcfs.scenario.config.max_num_seqs
    mean = _finish(fcfs)
    if waits(fcfs):
        why = (f"Each finishes after its wait for a slot plus its own answer ({_waits_text(fcfs)}), so the average is "
               f"{fmt(mean)} steps: in the Gantt chart below, {_bars_text(fcfs)}.")
    else:
        why = (f"With {count(slots, 'batch slot')} all {number_word(len(lengths))} start at once and nobody waits, so "
               f"the average finish time is the average answer length, {fmt(mean)} steps: the bars in the Gantt chart "
               "below all start at step 0.")
    return number_question(
        "fcfs", runs, f"Under FCFS with {count(slots, 'batch slot')}, what is the average finish "
                      "time of the three requests (engine steps from arrival to the last token)?",
        mean, "steps", f"FCFS runs them in arrival order: {_order(fcfs)}. {why}",
        "Add up, for each request, the wait for a slot and its own length.",
        [(sum(lengths) / len(lengths), "that is the average answer length: it leaves out the wait for the slot."),
         (_finish(sjf), "that is shortest-job-first's figure; FCFS keeps the arrival order.")], tolerance=0.5)


def _ask_sjf(runs: Sequence[Run], values: Values) -> Problem:
    fcfs, sjf = by_label(runs, "FCFS"), by_label(runs, "SJF (true lengths)")
    slots = sjf.scenario.config.max_num_seqs
    before, mean = _finish(fcfs), _finish(sjf)
    if abs(mean - before) < 0.05:
        change = f"the average stays at {fmt(mean)} steps: SJF only changes who waits"
    else:
        change = (f"the average {'falls' if mean < before else 'rises'} from {fmt(before)} steps (FCFS) to "
                  f"{fmt(mean)}")
    r_f, r_s = fcfs.trace.requests, sjf.trace.requests
    longest = max(range(sjf.trace.num_requests), key=lambda i: sjf.scenario.requests[i].output_len)
    name = sjf.trace.request_ids[longest]
    late = int(r_s["finish_step"][longest]) - int(r_f["finish_step"][longest])
    last = int(r_s["finish_step"][longest]) == int(r_s["finish_step"].max())
    long_text = (f"{name} {'finishes last, ' if last else 'finishes '}"
                 + (f"{late:,} steps later than under FCFS" if late > 0 else "no later than under FCFS"))
    return number_question(
        "sjf", runs, f"Same requests, {count(slots, 'batch slot')}, now shortest-job-first (it knows each answer's "
                     "length). Average finish time, in steps?",
        mean, "steps",
        f"SJF runs the shortest waiting answer first: {_order(sjf)}. Under FCFS {_waits_text(fcfs)}; under SJF "
        f"{_waits_text(sjf)}. So {change}. Compare the two Gantt charts: {long_text}.",
        "Put the shortest answers first, then add up each one's wait for a slot and its own length.",
        [(before, "that is FCFS's figure; SJF puts the short answers first.")], tolerance=0.5)


# (not 0: exact predictions make the predicted run the true-lengths one)
SIGMA = config_setting("sigma", "prediction_error_sigma", "Length-prediction error (lognormal sigma)", 0.5,
                       (0.1, 0.5, 1.0, 2.0), runs=("SJF (predicted)",))
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
                       (100, 200, 400), runs=("SJF + guard",))  # (the "no guard" run keeps no guard)


def _wait_of(run: Run, request_id: str) -> int:
    """Its queueing delay (steps from arrival to its first scheduled step)."""
    return int(metrics.request_latencies(run.trace)["queue_steps"][run.trace.request_ids.index(request_id)])


def _started_before(run: Run, request_id: str) -> int:
    """How many requests started before it."""
    r = run.trace.requests
    start = int(r["first_scheduled_step"][run.trace.request_ids.index(request_id)])
    return int((r["first_scheduled_step"] < start).sum())


def _ask_guard(runs: Sequence[Run], values: Values) -> Problem:
    guarded, bare = by_label(runs, "SJF + guard"), by_label(runs, "SJF, no guard")
    threshold = guarded.scenario.config.starvation_threshold_steps
    long_spec = next(r for r in guarded.scenario.requests if r.request_id == "long")
    short = min(r.output_len for r in guarded.scenario.requests)
    wait, bare_wait = _wait_of(guarded, "long"), _wait_of(bare, "long")
    start = long_spec.arrival_step + wait
    blocker = next((freed for rid, _, freed in waits(guarded) if rid == "long"), "")
    if not blocker:
        then = f"it takes the free slot at once: {wait:,} steps in all"
    elif wait == threshold:
        then = f"the short answer in the slot ({blocker}) ends just then, so it starts at once: {wait:,} steps in all"
    else:
        then = (f"it then takes the slot as soon as the short answer running there ({blocker}) ends: {wait:,} steps "
                f"in all, {wait - threshold:,} after the promotion")
    n = guarded.trace.num_requests
    return number_question(
        "guard", runs, f"A {long_spec.output_len:,}-step request waits among a stream of {short}-step ones, "
                       f"on {count(guarded.scenario.config.max_num_seqs, 'slot')}. Pure SJF makes it wait "
                       f"{bare_wait:,} steps. With a starvation guard of {threshold:,} steps, how long does it wait "
                       "before it starts?",
        wait, "steps",
        f"The guard promotes a request that has waited {threshold:,} steps; {then}. In the Gantt charts the long "
        f"bar starts at step {long_spec.arrival_step + bare_wait:,} without the guard, after "
        f"{_started_before(bare, 'long'):,} of the other {n - 1:,} requests, and at step {start:,} with it, after "
        f"{_started_before(guarded, 'long'):,}.",
        "The guard promotes it after the threshold, but it does not interrupt the request already running.",
        [(bare_wait, "that is the wait without a guard."),
         (threshold, "that is when the guard promotes it; it still waits for the short answer in the slot to end."),
         (0, "SJF still puts every short request first until the guard promotes the long one.")],
        tolerance=float(short))


# 2, 4 or 5 slots: the batch jobs leave some of them waiting, which chat0 can pass (with 6 or more nobody but the
# chats waits, and the two policies run the same schedule).
PRIORITY_SLOTS = config_setting("max_num_seqs", "max_num_seqs", "Batch slots (max_num_seqs)", 4, (2, 4, 5))
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
    batch = [i for i in range(len(ids)) if ids[i].startswith("batch")]
    jumped = [ids[i] for i in batch if r["arrival_step"][i] < arrival and r["first_scheduled_step"][i] > start]
    first_done = min(int(r["finish_step"][i]) for i in batch)
    if start == arrival:
        answer = _PREEMPTS if run.summary["num_preemptions"] else _FREE
    else:
        answer = _AHEAD if jumped and start == first_done + 1 else _BEHIND
    slots = run.scenario.config.max_num_seqs
    fcfs_start = int(by_label(runs, "FCFS").trace.requests["first_scheduled_step"][chat])
    early = sum(1 for i in batch if r["arrival_step"][i] < arrival)
    running = sum(1 for i in batch if r["first_scheduled_step"][i] <= arrival <= r["finish_step"][i])
    specs = run.scenario.requests
    return choice_question(
        "priority", runs, f"vLLM's `priority` policy, {slots} batch slots: {len(batch)} batch jobs (priority "
                          f"{specs[batch[0]].priority}) arrive first, then chat0 (priority {specs[chat].priority}, "
                          f"more urgent) at step {arrival}. What happens to chat0?",
        (_FREE, _PREEMPTS, _AHEAD, _BEHIND), answer,
        f"chat0 arrives at step {arrival:,}, when {early} batch jobs have arrived and {running} of them run, and "
        f"starts at step {start:,} (under FCFS: {fcfs_start:,}). "
        + (f"It goes ahead of {join_and(jumped)}, which {'were' if len(jumped) > 1 else 'was'} waiting before it. "
           if jumped else "")
        + "A lower priority value is served first from the waiting queue, but a new arrival only preempts a running "
          "request when memory runs out, never for a slot. Compare the chat rows in the two Gantt charts.",
        "Look at how many slots the batch jobs take, and what vLLM's priority does to the waiting queue.",
        {_PREEMPTS: "priority orders the waiting queue; a full batch of slots does not make the scheduler preempt "
                    "(only a full KV pool does).",
         _BEHIND: f"that is FCFS (chat0 would start at step {fcfs_start:,}); priority lets chat0 go ahead of the "
                  "waiting batch jobs.",
         _FREE: f"with {slots} slots and the batch jobs running, no slot is free when chat0 arrives.",
         _AHEAD: f"with {slots} slots there is room for chat0 the moment it arrives."})


def _fcfs_text(values: Values) -> str:
    """The scene, for the step's number of slots (the requests are the preset's)."""
    slots = values["max_num_seqs"]
    lengths = [r.output_len for r in get("article_hol").scenario.requests]
    slot_words = term_link("max_num_seqs", "batch slot" if slots == 1 else "batch slots")
    return (f"{sentence_case(number_word(slots))} {slot_words} and three requests arriving "
            f"together: a {lengths[0]:,}-step answer first, two {lengths[1]:,}-step answers behind it. First come, "
            "first served (FCFS) runs them in arrival order. Predict the average finish time before you look.")


STEPS = (
    Step("fcfs", "First come, first served", _fcfs_text,
         "article_hol", ("FCFS", "SJF (true lengths)"), _ask_fcfs, ("gantt",), (SLOTS,), shown=("FCFS",)),
    Step("sjf", "Shortest job first",
         f"Under FCFS a request waits for the answers ahead of it in the slots: {term_link('head-of-line blocking')}. "
         "Shortest-job-first (SJF) picks the waiting request with the shortest answer. What does that do to the "
         "average?",
         "article_hol", ("FCFS", "SJF (true lengths)"), _ask_sjf, ("gantt",), (SJF_SLOTS,)),
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
         "Interactive chat requests (priority 0) share the batch slots with background batch jobs (priority 1).",
         "priority_lanes", ("FCFS", "priority"), _ask_priority, ("gantt",), (PRIORITY_SLOTS,)),
)
