"""Every sentence a guided step shows is true for what is on screen (issue 31): a sweep over every step x every value
of its knobs x every answer a student can give (the right one, each listed wrong one, "show the answer").

For each case the step's runs are simulated afresh here (``simulate_step``: the engine, no cache) and checked:
- every number the step quotes (its text, question, feedback and explanation) is a figure of those fresh runs: the
  settings, the scenario, the runs' metrics and trace columns, or a figure derived from them that this file derives
  independently (``_derived``), rounded as printed;
- the runs a step draws side by side are different runs (no two with the same trace digest);
- what the explanation says about the data agrees with the data (``CLAIMS``: each sentence the code picks from the
  data, checked against the fresh runs by a rule written here).
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from lessons.guided import Step, simulate_step
from lessons.problems import Problem
from lessons.run import Run
from sim import metrics
from sim.fairness_metrics import lifts, longest_starvation_steps
from sim.preemption_metrics import preemption_cost, preemptions
from ui.guide import paths

pytestmark = pytest.mark.slow  # (seconds each: CI runs them, the fast loop leaves them out)

PATHS = paths()  # lesson id -> its guided path, every lesson of the course

_SPEC = importlib.util.spec_from_file_location(
    "trace_digests", Path(__file__).resolve().parents[2] / "scripts" / "trace_digests.py")
assert _SPEC is not None and _SPEC.loader is not None
_DIGESTS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_DIGESTS)
digest: Callable = _DIGESTS.digest


def _cases() -> Iterator[tuple[str, Step, dict]]:
    for lesson, steps in PATHS.items():
        for step in steps:
            for combo in itertools.product(*(s.options for s in step.settings)):
                yield lesson, step, {s.key: v for s, v in zip(step.settings, combo, strict=True)}


CASES = list(_cases())


@functools.cache
def _fresh_runs(lesson: str, key: str, values: tuple) -> list[Run]:
    """The step's runs for ``values`` (sorted items), simulated once per test process for the three checks below
    (each still a fresh engine run: ``simulate_step`` does not use the app's cache)."""
    step = next(s for s in PATHS[lesson] if s.key == key)
    return simulate_step(step, dict(values))


def fresh(lesson: str, step: Step, values: dict) -> list[Run]:
    return _fresh_runs(lesson, step.key, tuple(sorted(values.items())))
IDS = [f"{lesson}.{step.key}-" + ",".join(f"{k}={v}" for k, v in values.items()) for lesson, step, values in CASES]


def _screens(step: Step, problem: Problem, values: dict) -> dict[str, str]:
    """Every text a student can bring on screen for this step and these values: the step's text and question, the
    feedback for the right answer and for each listed wrong one (and each other option), and the revealed answer."""
    out = {"text": step.intro(values), "question": problem.question, "hint": problem.hint,
           "right": problem.check(problem.answer)[1], "reveal": f"Answer: {problem.answer_text}. {problem.reasoning}"}
    wrong = [m for m, _ in problem.mistakes]
    if problem.is_multiple_choice:
        wrong += [c for c in problem.choices if c != problem.answer]
    for i, answer in enumerate(wrong):
        feedback = problem.check(answer)[1]
        assert feedback.startswith("Not ")
        out[f"wrong {i}: {answer}"] = feedback.split(": ", 1)[1]  # (after "Not <the student's own answer>: ")
    return out


# ---- the numbers ------------------------------------------------------------------------------------------------
_NUMBER = re.compile(r"(?<![\w.,^#])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%?)(?![\w^])")
_NOT_FIGURES = (
    re.compile(r"\]\([^)]*\)"),  # a Markdown link's target
    re.compile(r"\d+\^\d+"),  # 10^6, 2^20: units' definitions
    re.compile(r"Llama \d[\d.]* \d+B"),  # the model's name
)


def quoted_numbers(text: str) -> list[tuple[float, int, bool]]:
    """(value, decimals printed, is a percent) of each number in ``text`` (a number inside a word, an id like
    short1 or doc2.3, is none)."""
    for pattern in _NOT_FIGURES:
        text = pattern.sub(" ", text)
    out = []
    for m in _NUMBER.finditer(text):
        whole, frac, pct = m.groups()
        out.append((float(whole.replace(",", "") + (frac or "")), len(frac) - 1 if frac else 0, pct == "%"))
    return out


def _scalars(obj, out: list[float]) -> None:
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float | np.integer | np.floating):
        if math.isfinite(float(obj)):
            out.append(float(obj))
    elif isinstance(obj, dict):
        for v in obj.values():
            _scalars(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _scalars(v, out)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            _scalars(getattr(obj, name), out)


def _derived(runs: list[Run]) -> list[float]:
    """Figures a step may quote that are not a column of the runs: derived here, independently of the step's code."""
    out: list[float] = []
    for run in runs:
        t, c = run.trace, run.scenario.config
        r = t.requests
        lat = metrics.request_latencies(t)
        out += [t.num_steps, t.num_requests, len(t.client_ids), t.num_requests - 1]
        specs = run.scenario.requests
        out += [q.prompt_len + q.output_len for q in specs] + [float(np.mean([q.output_len for q in specs]))]
        out += [float(np.nanmean(lat[k])) for k in lat if np.isfinite(lat[k]).any()]
        out += [c.model.kv_bytes_per_token // 1024, c.max_num_batched_tokens - sum(
            1 for q in run.scenario.requests if q.request_id != "long")]
        out += [c.cost.step_ms(0, n) for n in range(1, 17)]
        # waits, and how many requests started before each one
        starts = r["first_scheduled_step"]
        out += [int((starts < s).sum()) for s in starts]
        out += list(lat["queue_steps"])
        # steps with free batch slots while requests kept arriving
        last = int(r["arrival_step"].max())
        out.append(int((t.steps["num_running"][: last + 1] < c.max_num_seqs).sum()))
        out.append(int(t.steps["used_blocks"].max()))
        # a guard's wait past the promotion; the arrival of each client's first request
        out += [w - c.starvation_threshold_steps for w in lat["queue_steps"]]
        for ci in range(len(t.client_ids)):
            mine = r["arrival_step"][r["client"] == ci]
            if len(mine):
                first = int(mine.min())
                out.append(first)
                if first:
                    out += list(t.clients["client_counters"][first - 1])
        served = metrics.served_mask(t)  # per client: p99 TTFT and median finish of those served (Overload)
        for ci in range(len(t.client_ids)):
            mine = served & (r["client"] == ci)
            if mine.any():
                out += [float(np.percentile(lat["ttft_ms"][mine], 99)), float(np.median(lat["finish_ms"][mine]))]
        lift = lifts(t)
        if lift["count"]:
            out += [lift["after"], lift["before"]]
        out += longest_starvation_steps(t) if len(t.client_ids) > 1 else []
        # preemptions: what bringing the first victim back costs, the re-prefills and their cache hits
        found = preemptions(t)
        for p in found:
            out += [p.step, p.num_tokens, p.num_blocks, p.resume_step]
        if found:
            cost = preemption_cost(found[0].num_tokens, c)
            out += [cost.recompute_ms, cost.swap_ms, 2 * cost.swap_ms, cost.swap_bytes / 1e6]
            back = [p for p in found if p.resume_step >= 0]
            out += [len(back), sum(p.num_resume_tokens for p in back), sum(p.num_cached_tokens for p in back)]
            out += [len(found)]
        # KV held at the end by each request, in tokens and MB / MiB
        computed = r["num_computed_tokens"]
        out += [x * c.model.kv_bytes_per_token / d for x in computed for d in (1e6, 2**20)]
        # the documents prefilling in one step (Token budget's memory step), stop strings caught late
        steps, rows, _, _ = t.schedule_entries()
        docs = np.array([rid.startswith("doc") for rid in t.request_ids])
        if docs.any():
            pre = docs[rows] & (steps <= r["first_token_step"][rows])
            out.append(int(np.bincount(steps[pre]).max()) if pre.any() else 0)
            out.append(sum(1 for q in run.scenario.requests if q.arrival_step == 30))
        out.append(int((r["num_wasted_tokens"] > 0).sum()))
        # each stream's longest pause
        tbt = metrics.request_tbt(t)
        out += [float(np.nanmax(tbt["max_ms"])) if np.isfinite(tbt["max_ms"]).any() else 0.0]
        for row in range(t.num_requests):
            out.append(float(np.nanmax(np.delete(tbt["max_ms"], row))) if t.num_requests > 1 else 0.0)
    return out


def universe(runs: list[Run], values: dict) -> tuple[np.ndarray, np.ndarray]:
    """(figures, percents): every figure of the fresh runs and their scenarios, and the ratios between the runs'
    headline figures as percents."""
    figures: list[float] = []
    _scalars(list(values.values()), figures)
    headline: list[float] = []
    for run in runs:
        _scalars(run.scenario.config, figures)
        for q in run.scenario.requests:
            _scalars(q, figures)
        if run.scenario.workload is not None:
            _scalars(run.scenario.workload, figures)
        _scalars(run.summary, headline)
        for row in metrics.per_client(run.trace):
            _scalars(row, headline)
        for column in run.trace.requests.values():
            if np.asarray(column).dtype.kind in "iuf":
                figures += [float(v) for v in np.asarray(column) if math.isfinite(float(v))]
        figures += [float(v) for v in run.trace.steps["step_ms"]]
        for name in ("num_preemptions", "num_rejected", "wasted_tokens"):
            _scalars(run.summary.get(name), headline)
    figures += headline + _derived(runs)
    figures = np.unique(np.asarray(figures, dtype=float))
    h = np.unique(np.asarray([v for v in headline + _derived(runs) if v > 0], dtype=float))
    percents = np.unique((h[:, None] / h[None, :] * 100).ravel())
    return figures, percents


def _matches(value: float, decimals: int, pool: np.ndarray) -> bool:
    tolerance = 0.5 * 10.0**-decimals + 1e-9
    return bool(np.any(np.abs(pool - value) <= tolerance)) or bool(np.any(np.abs(np.abs(pool) - value) <= tolerance))


@pytest.mark.parametrize(("lesson", "step", "values"), CASES, ids=IDS)
def test_every_number_on_screen_is_a_figure_of_a_fresh_run(lesson, step, values):
    runs = fresh(lesson, step, values)
    problem = step.ask(runs, values)
    figures, percents = universe(runs, values)
    wrong = []
    for where, text in _screens(step, problem, values).items():
        for value, decimals, pct in quoted_numbers(text):
            if not _matches(value, decimals, percents if pct else figures):
                wrong.append(f"{where}: {value:g}{'%' if pct else ''} in {text!r}")
    assert not wrong, "numbers that are no figure of the runs on screen:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("lesson", "step", "values"), CASES, ids=IDS)
def test_the_runs_a_step_compares_are_different_runs(lesson, step, values):
    shown = step.shown_runs(fresh(lesson, step, values))
    digests = {run.label: digest(run.trace) for run in shown}
    assert len(set(digests.values())) == len(digests), f"the same run under two names: {digests}"
    assert len({run.label for run in shown}) == len(shown)


def test_the_number_reader_reads_what_a_student_reads():
    text = ("short1 steps 1,000-1,099 wait 433.3 steps (42%) at 5.75-ms [TTFT](Glossary#ttft) doc2.3 "
            "(128 KiB, Llama 3.1 8B) MB (10^6 bytes)")
    assert quoted_numbers(text) == [(1000.0, 0, False), (1099.0, 0, False), (433.3, 1, False), (42.0, 0, True),
                                    (5.75, 2, False), (128.0, 0, False)]


def test_the_sweep_catches_a_number_from_another_setting():
    # The bug it exists for: a step's words written for its default value. At a budget of 256 the chunks step
    # quotes 256 and 248; the default's "504 tokens" is no figure of that run.
    step = next(s for s in PATHS["budget"] if s.key == "chunks")
    figures, _ = universe(simulate_step(step, {"budget": 256}), {"budget": 256})
    assert _matches(248, 0, figures) and _matches(33, 0, figures)
    assert not _matches(504, 0, figures)
    assert _matches(504, 0, universe(simulate_step(step, {"budget": 512}), {"budget": 512})[0])


# ---- what the words say about the data ---------------------------------------------------------------------------
def _by_label(runs: list[Run], label: str) -> Run:
    return next(r for r in runs if r.label == label)


def _row(run: Run, request_id: str) -> int:
    return run.trace.request_ids.index(request_id)


def _start(run: Run, request_id: str) -> int:
    return int(run.trace.requests["first_scheduled_step"][_row(run, request_id)])


def _finish(run: Run, request_id: str) -> int:
    return int(run.trace.requests["finish_step"][_row(run, request_id)])


def _check_fcfs(runs, problem, values):
    fcfs = _by_label(runs, "FCFS")
    pairs = re.findall(r"(\w+)'s bar starts only where (\w+)'s ends", problem.reasoning)
    for waiter, blocker in pairs:
        assert _start(fcfs, waiter) == _finish(fcfs, blocker) + 1
    nobody = (fcfs.trace.requests["first_scheduled_step"] == fcfs.trace.requests["arrival_step"]).all()
    assert ("all start at step 0" in problem.reasoning) == bool(nobody)
    assert bool(pairs) != bool(nobody)


def _check_sjf(runs, problem, values):
    fcfs, sjf = _by_label(runs, "FCFS"), _by_label(runs, "SJF (true lengths)")
    a, b = fcfs.summary["finish_steps"]["mean"], sjf.summary["finish_steps"]["mean"]
    said = re.search(r"the average (falls|rises|stays)", problem.reasoning).group(1)
    assert said == ("stays" if abs(a - b) < 0.05 else "falls" if b < a else "rises")
    last = _finish(sjf, "long") == int(sjf.trace.requests["finish_step"].max())
    assert ("long finishes last" in problem.reasoning) == last


def _check_guard(runs, problem, values):
    bare, guarded = _by_label(runs, "SJF, no guard"), _by_label(runs, "SJF + guard")
    wait_bare = _start(bare, "long") - 1
    wait_guarded = _start(guarded, "long") - 1
    assert wait_bare > wait_guarded >= values["guard"]  # the check: the unguarded long request waits longer
    assert f"Pure SJF makes it wait {wait_bare:,} steps" in problem.question
    assert problem.answer == wait_guarded
    assert f"starts at step {_start(bare, 'long'):,} without the guard" in problem.reasoning
    assert f"at step {_start(guarded, 'long'):,} with it" in problem.reasoning


def _check_priority(runs, problem, values):
    run = _by_label(runs, "priority")
    chat = _start(run, "chat0")
    m = re.search(r"It goes ahead of (.+?), which", problem.reasoning)
    for name in re.split(r", | and ", m.group(1)) if m else []:
        assert _start(run, name) > chat  # it started after chat0 ...
        assert run.trace.requests["arrival_step"][_row(run, name)] < run.trace.requests["arrival_step"][_row(
            run, "chat0")]  # ... though it arrived before
    if problem.answer.startswith("it waits for the first batch job"):
        first_done = min(_finish(run, f"batch{i}") for i in range(6))
        assert chat == first_done + 1 and m


def _queue_ms(run: Run) -> dict[str, float]:
    return {row["client"]: row["mean_queue_ms"] for row in metrics.per_client(run.trace)}


def _check_who_waits(runs, problem, values):
    q = _queue_ms(runs[0])
    if "B's few requests go ahead of A's queue" in problem.reasoning:
        assert q["B"] < q["A"]
    if "like everyone else's" in problem.reasoning:
        assert abs(q["A"] - q["B"]) <= 0.2 * max(q.values())


def _check_rate_limit(runs, problem, values):
    limited = _by_label(runs, "Rate limit")
    assert limited.scenario.config.rate_limit_max_requests == values["limit"]
    assert _by_label(runs, "FCFS").scenario.config.rate_limit_max_requests == 0  # the limit reaches its run only
    if "not by sharing the GPU" in problem.reasoning:
        assert limited.summary["num_rejected"] > 0


def _check_lift(runs, problem, values):
    lifted = "VTC [lifts]" in problem.reasoning
    assert lifted == (lifts(runs[0].trace)["count"] > 0)
    assert lifted == (runs[0].scenario.config.policy.value == "vtc")


def _check_wasted(runs, problem, values):
    keeping = _by_label(runs, "no abort")
    if "waits for the only slot" in problem.reasoning:
        assert keeping.scenario.config.max_num_seqs == 1
        assert _start(keeping, "waiting") > _finish(keeping, "long")


def _check_delay(runs, problem, values):
    start, left = _start(runs[0], "waiting"), 300
    if "as soon as the user leaves" in problem.reasoning:
        assert start == left
    else:
        assert f"{start - left:,} steps after the user left" in problem.reasoning


def _check_victim(runs, problem, values):
    policy = runs[0].scenario.config.policy.value
    assert ("at its front" in problem.reasoning) == (policy == "fcfs")


def _check_hits(runs, problem, values):
    on = runs[0].scenario.config.enable_prefix_caching
    assert ("found in the [prefix cache]" in problem.reasoning) == on
    assert runs[0].label == f"prefix caching {'on' if on else 'off'}"


def _check_chunks(runs, problem, values):
    tbt = metrics.request_tbt(runs[0].trace)["max_steps"]
    smooth = bool(np.all(np.nan_to_num(np.delete(tbt, _row(runs[0], "long")), nan=1.0) <= 1))
    assert ("keep a token every step" in problem.reasoning) == smooth


def _check_tradeoff(runs, problem, values):
    plain, chunked = _by_label(runs, "no chunking"), _by_label(runs, "chunked prefill")
    assert plain.scenario.config.max_num_batched_tokens == 8192  # the budget setting reaches the chunked run only
    assert chunked.scenario.config.max_num_batched_tokens == values["budget"]
    ttft = {run.label: metrics.request_latencies(run.trace)["ttft_ms"][_row(run, "long")] for run in runs}
    if "so the prompt waits longer" in problem.reasoning:
        assert ttft["chunked prefill"] > ttft["no chunking"]


def _check_memory(runs, problem, values):
    run = runs[0]
    peak = int(run.trace.steps["used_blocks"].max())
    assert ("to its last block" in problem.reasoning) == (peak >= run.scenario.config.num_blocks)
    found = preemptions(run.trace)
    if found:
        assert f"{found[0].request_id} is preempted" in problem.reasoning or "is preempted itself" in problem.reasoning


CLAIMS: dict[tuple[str, str], Callable] = {
    ("queueing", "fcfs"): _check_fcfs, ("queueing", "sjf"): _check_sjf, ("queueing", "guard"): _check_guard,
    ("queueing", "priority"): _check_priority, ("fairness", "who_waits"): _check_who_waits,
    ("fairness", "rate_limit"): _check_rate_limit, ("fairness", "lift"): _check_lift,
    ("cancellation", "wasted"): _check_wasted, ("cancellation", "delay"): _check_delay,
    ("preemption", "victim"): _check_victim, ("preemption", "hits"): _check_hits,
    ("budget", "chunks"): _check_chunks, ("budget", "tradeoff"): _check_tradeoff, ("budget", "memory"): _check_memory,
}


CLAIM_CASES = [(i, c) for i, c in zip(IDS, CASES, strict=True) if (c[0], c[1].key) in CLAIMS]


@pytest.mark.parametrize(("lesson", "step", "values"), [c for _, c in CLAIM_CASES], ids=[i for i, _ in CLAIM_CASES])
def test_what_the_explanation_says_about_the_data_is_so(lesson, step, values):
    runs = fresh(lesson, step, values)
    CLAIMS[(lesson, step.key)](runs, step.ask(runs, values), values)
