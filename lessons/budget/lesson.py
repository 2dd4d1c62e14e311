"""The Token budget lesson's logic: its knobs (each server's budget and chunked prefill), the servers it compares,
the worked example's stall measured from the runs, the budget sweep (p99 TTFT against p99 time between tokens)
and the "what to notice" sentences. No Streamlit calls here, so it is testable on its own.

Times are ms from the cost model; time between tokens (TBT) as sim.metrics computes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from lessons.run import Run
from sim import metrics
from sim.config import EngineConfig, field_help
from sim.presets import Preset, presets_for
from sim.request import RequestSpec
from sim.scenario import Scenario
from sim.trace import Trace
from ui import knobs as shared_knobs
from ui.controls import Knob
from ui.glossary import term_link
from ui.wording import Card, count, join_and

LESSON = "budget"
QUESTION = (  # (a glossary term linked at its first use)
    f"Each {term_link('engine step')} computes at most {term_link('token budget', '`max_num_batched_tokens`')} "
    f"tokens, shared by the requests that are {term_link('decode', 'decoding')} and those still reading their "
    f"prompt ({term_link('prefill')}). A long prompt either runs in one big step, and every stream waits for it, or "
    f"is {term_link('chunked prefill', 'cut into chunks')} that share steps with the decodes. What does the budget "
    f"trade: the {term_link('TTFT', 'first token')}, or the {term_link('TBT', 'time between tokens')}?"
)
BUDGETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)  # the budget sliders' stops (tokens per step)
LETTERS = "ABCD"
KNEE_FACTOR = 1.5  # the sweep's knee: the smallest budget whose p99 TTFT is within this factor of the best


# ---- knobs and servers ----------------------------------------------------------------------------------------
def engine_knobs(config: EngineConfig) -> list[Knob]:
    """The shared engine knobs but the budget: here each server has its own (``knobs``)."""
    return [k for k in shared_knobs.engine_knobs(config) if k.key != "max_num_batched_tokens"]


def apply_engine(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    return shared_knobs.apply_engine(config, {**values, "max_num_batched_tokens": config.max_num_batched_tokens})


def server_defaults(preset: Preset, config: EngineConfig) -> list[tuple[bool, int]]:
    """(chunked prefill, budget) of each of the preset's servers, from its overrides over ``config``."""
    return [(bool(ov.get("chunked_prefill", config.chunked_prefill)),
             int(ov.get("max_num_batched_tokens", config.max_num_batched_tokens)))
            for _, ov in preset.variants[:len(LETTERS)]]


def knobs(preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
    """Per server: chunked prefill (a toggle) and the token budget (a slider over powers of two), their defaults
    the preset's servers over ``base``'s config."""
    out = []
    for letter, (chunked, budget) in zip(LETTERS, server_defaults(preset, base.config), strict=False):
        key = letter.lower()
        out += [
            Knob(f"chunked_{key}", f"Server {letter}: chunked prefill", "bool", chunked, widget="toggle",
                 help=field_help(EngineConfig, "chunked_prefill") + ". Off: a prompt runs in one step, so the "
                      "budget must hold the longest request (vLLM's rule: max_model_len <= the budget)."),
            Knob(f"budget_{key}", f"Server {letter}: token budget (tokens per step)", "choice", budget,
                 options=tuple(sorted({*BUDGETS, budget})), widget="select_slider",
                 help=field_help(EngineConfig, "max_num_batched_tokens") + ": max_num_batched_tokens, shared by "
                      "the decodes (one token each) and the prompts' chunks."),
        ]
    return out


def apply(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The servers' panel sets nothing every server shares (each server's budget and chunking are its variant's,
    ``variants``): ``config`` as it is."""
    return config


def servers(values: dict[str, Any]) -> list[tuple[str, bool, int]]:
    """(letter, chunked prefill, budget) of each server the knobs set."""
    return [(letter, bool(values[f"chunked_{letter.lower()}"]), int(values[f"budget_{letter.lower()}"]))
            for letter in LETTERS if f"budget_{letter.lower()}" in values]


def server_label(letter: str, chunked: bool, budget: int) -> str:
    return f"{letter}: {'chunked' if chunked else 'no chunking'}, {budget:,}"


def variants(preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
    """Each server the knobs set: ``scenario`` with its budget and chunked prefill."""
    return [(server_label(letter, chunked, budget),
             scenario.with_config(chunked_prefill=chunked, max_num_batched_tokens=budget))
            for letter, chunked, budget in servers(values)]


# ---- the worked example: one long prompt among streams ------------------------------------------------------------
class Stall(NamedTuple):
    """What the longest prompt did to one run."""

    label: str
    request_id: str
    prompt_len: int
    prefill_steps: int  # from its first scheduled step to the step of its first token, both counted
    ttft_ms: float
    others_max_gap_ms: float  # the longest time between two tokens of any other stream
    plain_gap_ms: float  # the run's p50 time between tokens: a plain decode step


def stalls(runs: Sequence[Run]) -> list[Stall]:
    """The longest prompt's story in each run (empty when a run did not serve it, e.g. rejected for the budget)."""
    out = []
    for run in runs:
        r = run.trace.requests
        row = _longest_prompt_row(run.trace)
        first, token = int(r["first_scheduled_step"][row]), int(r["first_token_step"][row])
        tbt = metrics.request_tbt(run.trace)["max_ms"]
        others = np.delete(tbt, row)
        if first < 0 or token < 0 or not np.isfinite(others).any():
            return []
        out.append(Stall(run.label, run.trace.request_ids[row], int(r["prompt_len"][row]), token - first + 1,
                         float(metrics.request_latencies(run.trace)["ttft_ms"][row]), float(np.nanmax(others)),
                         run.summary["tbt_ms"]["p50"]))
    return out


def worked_example(runs: Sequence[Run]) -> list[Stall]:
    """The worked example's stall in each run (``stalls``) when the runs are a worked example's: a preset's with a
    ``stall`` knob, on its own requests (whatever the engine and the servers); otherwise none (on another workload
    the longest prompt tells no such story)."""
    return stalls(runs) if runs and runs[0].scenario.requests in _worked_example_requests() else []


@functools.cache
def _worked_example_requests() -> tuple[tuple[RequestSpec, ...], ...]:
    return tuple(p.scenario.requests for p in presets_for(LESSON) if "stall" in p.knobs)


def _longest_prompt_row(trace: Trace) -> int:
    """The request with the longest prompt (the first of them): the worked example's long prompt."""
    return int(np.argmax(trace.requests["prompt_len"]))


def longest_prompt_start(trace: Trace) -> int:
    """Where the step player starts: the step the longest prompt is first scheduled (its prefill: the stall, or
    its first chunk), else step 0 (never scheduled: rejected for the budget, say)."""
    if not trace.num_requests:
        return 0
    return max(int(trace.requests["first_scheduled_step"][_longest_prompt_row(trace)]), 0)


def stall_metrics(story: Sequence[Stall]) -> list[Card]:
    """The worked example, one card per run: the streams' longest pause as the figure, the long prompt's TTFT and
    a plain decode step in the caption."""
    return [Card(f"{s.label}: streams' longest pause", f"{s.others_max_gap_ms:,.1f} ms",
             f"{s.request_id}'s first token after {s.ttft_ms:,.1f} ms (its prefill in "
             f"{count(s.prefill_steps, 'step')}) · a plain decode step {s.plain_gap_ms:,.1f} ms") for s in story]


def _stall_sentences(story: Sequence[Stall]) -> list[str]:
    if len(story) < 2:
        return []
    worst = max(story, key=lambda s: s.others_max_gap_ms)
    best = min(story, key=lambda s: s.others_max_gap_ms)
    if f"{worst.others_max_gap_ms:.1f}" == f"{best.others_max_gap_ms:.1f}":
        return []
    ratio = worst.others_max_gap_ms / worst.plain_gap_ms
    out = [f"Under {worst.label}, {worst.request_id}'s {worst.prompt_len:,}-token prefill took "
           f"{count(worst.prefill_steps, 'step')}, and the other streams waited up to "
           f"{worst.others_max_gap_ms:,.1f} ms for a token: {ratio:,.0f}x a plain decode step "
           f"({worst.plain_gap_ms:,.1f} ms)."]
    if best.prefill_steps > worst.prefill_steps:
        out.append(f"Under {best.label} the prefill took {count(best.prefill_steps, 'step')} instead and no stream "
                   f"waited more than {best.others_max_gap_ms:,.1f} ms; the price is {best.request_id}'s own first "
                   f"token, after {best.ttft_ms:,.1f} ms instead of {worst.ttft_ms:,.1f}.")
    return out


# ---- notices ----------------------------------------------------------------------------------------------------
def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Sentences about these runs (times in ms whatever ``unit``: a stall is a matter of ms): who stalls the streams
    and who gets first tokens sooner, the worked example's stall (``worked_example``), preemptions the budget
    caused, and answers cut short where the budget caps max_model_len."""
    out = _trade_sentence(runs) + _stall_sentences(worked_example(runs)) + _memory_sentence(runs)
    for run in runs:
        out += _capped_sentence(run)
    return out


def _p99(run: Run, key: str) -> float:
    return run.summary[key]["p99"]


def _trade_sentence(runs: Sequence[Run]) -> list[str]:
    ok = [r for r in runs if np.isfinite(_p99(r, "tbt_ms")) and np.isfinite(_p99(r, "ttft_ms"))]
    if len(ok) < 2:
        return []
    smooth = min(ok, key=lambda r: _p99(r, "tbt_ms"))
    rough = max(ok, key=lambda r: _p99(r, "tbt_ms"))
    a, b = _p99(smooth, "tbt_ms"), _p99(rough, "tbt_ms")
    if f"{a:.1f}" == f"{b:.1f}":
        return [f"Every server gives the same p99 time between tokens here ({a:,.1f} ms): no step is long enough "
                f"to stall the streams more under one budget than another."]
    t_smooth, t_rough = _p99(smooth, "ttft_ms"), _p99(rough, "ttft_ms")
    streams = (f"{rough.label} makes the streams stutter: p99 time between tokens {b:,.1f} ms against "
               f"{a:,.1f} ms under {smooth.label}")
    if t_rough < t_smooth:
        return [f"{streams}; in return its first tokens come sooner, p99 TTFT {t_rough:,.1f} ms against "
                f"{t_smooth:,.1f} ms. No free lunch: the budget moves the wait from the first token to the gaps "
                f"between tokens."]
    return [f"{streams}, and its p99 TTFT is no better ({t_rough:,.1f} ms against {t_smooth:,.1f} ms): here the "
            f"smaller steps cost nothing."]


def _memory_sentence(runs: Sequence[Run]) -> list[str]:
    counts = {r.label: r.summary["num_preemptions"] for r in runs}
    if len(set(counts.values())) < 2:
        return []
    parts = []
    for r in sorted(runs, key=lambda r: -r.summary["num_preemptions"]):
        s, pool = r.summary, r.scenario.config.num_blocks
        what = (f"preempted {count(s['num_preemptions'], 'request')} and computed {s['recomputed_tokens']:,} tokens "
                f"again" if s["num_preemptions"] else "preempted none")
        parts.append(f"{r.label} {what} (KV peaked at {s['peak_used_blocks']:,} of {pool:,} blocks)")
    return [f"Where the budget meets memory: {join_and(parts)}. A larger budget admits more prefill in one step "
            f"and leaves the pool no room for the streams' next blocks."]


def _capped_sentence(run: Run) -> list[str]:
    """Without chunked prefill, max_model_len is at most the budget: answers stop there."""
    cfg = run.scenario.config
    if cfg.chunked_prefill or cfg.max_model_len:
        return []
    cap = cfg.effective_max_model_len
    cut = [r for r in run.scenario.requests
           if r.prompt_len <= cap < r.prompt_len + r.generated_len(cfg.stop_check)]
    if not cut:
        return []
    return [f"Without chunked prefill the budget caps a request's length (vLLM: max_model_len <= "
            f"max_num_batched_tokens): under {run.label}, {count(len(cut), 'answer')} stopped at {cap:,} tokens "
            f"(prompt + answer) before their end."]


# ---- the budget sweep -------------------------------------------------------------------------------------------
def longest_request(base: Scenario) -> int:
    """Tokens of the longest request at its end (prompt + answer): without chunked prefill the budget must hold
    it, or vLLM would cut it (max_model_len <= max_num_batched_tokens)."""
    cfg = base.config
    return max((r.prompt_len + r.generated_len(cfg.stop_check) for r in base.requests), default=0)


def sweep_runs(base: Scenario, budgets: Sequence[int]) -> list[Scenario]:
    """The sweep's runs: chunked prefill at every budget, then without it at the budgets that hold the longest
    request."""
    longest = longest_request(base)
    return ([base.with_config(chunked_prefill=True, max_num_batched_tokens=int(b)) for b in budgets]
            + [base.with_config(chunked_prefill=False, max_num_batched_tokens=int(b)) for b in budgets
               if b >= longest])


def sweep_point(trace: Trace) -> tuple[float, float]:
    """A sweep point: (p99 TTFT ms, p99 time between tokens ms) of the served requests."""
    s = metrics.summary(trace)
    return s["ttft_ms"]["p99"], s["tbt_ms"]["p99"]


def tradeoff_sweep(base: Scenario, budgets: Sequence[int], measure: Callable[..., Any]) -> dict[str, Any]:
    """``chunked`` and ``unchunked``: lists of (budget, p99 TTFT ms, p99 TBT ms) for the points ready so far
    (``measure``: runner.measure or a ui.sweeps pass's, None for a point not run yet); ``longest``: the longest
    request; ``unchunked_budgets``: the budgets run without chunking."""
    longest = longest_request(base)
    out: dict[str, Any] = {"chunked": [], "unchunked": [], "longest": longest,
                           "unchunked_budgets": [int(b) for b in budgets if b >= longest]}
    for sc in sweep_runs(base, budgets):
        point = measure(sc, sweep_point)
        if point is not None:
            key = "chunked" if sc.config.chunked_prefill else "unchunked"
            out[key].append((sc.config.max_num_batched_tokens, *point))
    return out


def sweep_notice(sweep: dict[str, Any] | None) -> list[str]:
    """The curve in words (a complete sweep): how far each p99 moves over the budgets, and where the knee is."""
    if not sweep:
        return []
    points = [p for p in sweep["chunked"] if np.isfinite(p[1]) and np.isfinite(p[2])]
    if len(points) < 2:
        return []
    (b_lo, ttft_lo, tbt_lo), (b_hi, ttft_hi, tbt_hi) = points[0], points[-1]

    def moves(lo: float, hi: float, decimals: int, up: str, down: str, budgets: bool = False) -> str:
        """How a p99 moves from the smallest budget to the largest, in the words its printed numbers allow."""
        a, b = f"{lo:,.{decimals}f}", f"{hi:,.{decimals}f}"
        if a == b:
            return f"stays at {a} ms" + (f" from budget {b_lo:,} to {b_hi:,}" if budgets else "")
        first, last = (f" (budget {b_lo:,})", f" ({b_hi:,})") if budgets else ("", "")
        return f"{up if hi > lo else down} from {a} ms{first} to {b} ms{last}"

    out = [f"Over the sweep with chunked prefill, p99 time between tokens "
           f"{moves(tbt_lo, tbt_hi, 1, 'grows', 'shrinks', budgets=True)}, while p99 TTFT "
           f"{moves(ttft_lo, ttft_hi, 0, 'rises', 'falls')}."]
    best = min(p[1] for p in points)
    knee = next(p for p in points if p[1] <= KNEE_FACTOR * best)
    if knee is not points[0]:
        out.append(f"The knee is near a budget of {knee[0]:,}: the smallest whose p99 TTFT stays within "
                   f"{KNEE_FACTOR:g}x of the best ({best:,.0f} ms), with p99 time between tokens {knee[2]:,.1f} ms; "
                   f"below it first tokens wait longer and longer for the budget.")
    if not sweep["unchunked_budgets"]:
        out.append(f"Without chunked prefill no budget of the sweep holds the longest request ({sweep['longest']:,} "
                   f"tokens), so that curve is empty: vLLM requires max_model_len <= max_num_batched_tokens.")
    return out


def headline(run: Run, unit: str) -> Card:
    """A server's headline number: p99 time between tokens; p50, TTFT and preemptions under it (in ms whatever
    ``unit``)."""
    s = run.summary
    return Card(f"{run.label}: p99 time between tokens", f"{s['tbt_ms']['p99']:,.1f} ms",
                f"p50 {s['tbt_ms']['p50']:,.1f} ms · TTFT p50 {s['ttft_ms']['p50']:,.1f} ms, "
                f"p99 {s['ttft_ms']['p99']:,.1f} ms · {count(s['num_preemptions'], 'preemption')}",
                "The gap between two consecutive tokens of a stream; p99 of every gap of the served requests.")
