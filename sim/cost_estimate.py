"""What a scenario will cost, decided before it is generated or run, and the limits a run must stay within.

``of_requests(config, requests)`` and ``of_workload(config, workload)`` (before ``generate``) give a
``CostEstimate``: requests, clients, tokens, block-table cells, estimated engine steps and estimated peak bytes.
``check(estimate, limits)`` raises ``ScenarioError`` with one line naming the field, the figure and the limit;
the CLI turns it into exit code 2, a page into a message. ``max_recorded_steps`` is the run-time side of the same
budget: the most steps whose trace fits in ``limits.max_bytes`` (the engine's step guard stops there; a run of more
than DENSE_CLIENTS_MAX clients, recorded sparsely, is held to what it has recorded so far).

Units: tokens, steps, bytes, cells (one int32 entry of the block table). The byte figures are calibrated on
tracemalloc peaks of the engine (see tests/adversarial/test_properties.py, which checks that the estimate bounds
the real peak of small runs), with room to spare; they are meant to refuse a run that would exhaust the machine,
not to predict its size to the byte.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .config import EngineConfig, ScenarioError, cdiv
from .request import RequestSpec
from .workload import WorkloadSpec, client_rates

# Bytes, from tracemalloc peaks (20,000 short requests: ~1.7 KB each; a busy step ~0.9 KB; a step's per-client
# columns ~130 B a client while recorded, in lists of arrays, then as [steps, clients] arrays), plus a margin.
BYTES_PER_REQUEST = 6_000  # the spec, its row of the request table, its events and step lists (~5.3 KB in
# load_20k_tight, whose requests are preempted, resumed and refused many times)
BYTES_PER_STEP = 1_300  # one recorded step: the per-step tuple, the schedule's arrays, the final columns
BYTES_PER_STEP_CLIENT = 200  # one client's six per-step values, recorded and then stacked
# Past this many clients a run records per-client values sparsely (sim/recorder.py, SparseClientRecorder): per step,
# an entry for each client with a request running and one for each whose totals changed. Up to it, every client
# every step: the pages' charts read whole columns, and the dense path is the faster one there (the pages allow
# this many).
DENSE_CLIENTS_MAX = 100
BYTES_PER_CLIENT_ENTRY = 50  # one sparse entry (~24 B held, ~20 more while recorded; ~33 B at the peak of
# 1,000-client runs, where nearly every entry has its twin: a client charged for the step it ran)
BYTES_PER_CELL = 4  # one int32 entry of the block table
BYTES_PER_CLIENT = 500  # a client's id and index entries, its counters, its ClientSpec in a workload (~220 B held
# a client of a 100,000-client workload)
BYTES_FIXED = 2_000_000  # the engine's fixed arrays and the pool's per-block arrays start from here
BYTES_PER_BLOCK = 40  # the pool's per-block arrays (ref count, hash, free queue of twice the blocks, positions)


@dataclass(frozen=True)
class Limits:
    """The most a run may take. ``who`` says whose limits they are, in messages ("this app", "the CLI")."""

    who: str
    max_requests: int
    max_clients: int
    max_tokens: int  # prompt tokens + tokens to generate, over all requests
    max_block_table_cells: int  # block tables: the blocks of the min(max_num_seqs, requests) longest requests
    max_steps: int  # estimated engine steps
    max_bytes: int  # estimated peak memory of one run
    advice: str = ""  # what to do instead, appended to a refusal


# The CLI's clients: 100,000 with one request each (a file of 100,000 requests, one client each) ran in ~5 s at a peak
# RSS of ~640 MB (VTC ~6 s); each client costs only its id, counters and entries for what it did (sparse, past
# DENSE_CLIENTS_MAX). Twice as many would need twice the requests, whose estimate alone (6,000 B each) passes 1 GiB.
CLI_LIMITS = Limits(who="the CLI", max_requests=200_000, max_clients=100_000, max_tokens=2_000_000_000,
                    max_block_table_cells=64_000_000, max_steps=10_000_000, max_bytes=2**30,
                    advice="shorten the workload or split it into several files")
PAGE_LIMITS = Limits(who="this app", max_requests=20_000, max_clients=100, max_tokens=8_000_000,
                     max_block_table_cells=16_000_000, max_steps=200_000, max_bytes=512 * 2**20,
                     advice="run it with `python -m sim run FILE` instead")


@dataclass(frozen=True)
class CostEstimate:
    num_requests: int
    num_clients: int
    num_tokens: int  # prompt tokens + tokens to generate, over all requests
    num_slots: int  # batch slots with a block table: min(max_num_seqs, requests)
    longest_blocks: int  # KV blocks of the longest request that fits the pool
    block_table_cells: int  # the blocks of the num_slots longest requests that fit the pool (a table a slot)
    last_arrival_step: int
    num_steps: int  # estimated engine steps (arrivals, then the work at the batch's and the pool's pace)
    num_client_entries: int  # per-client entries at most, when recorded sparsely (0: dense, steps x clients)
    peak_bytes: int  # estimated peak memory of the run and its trace
    # the latest time a request arrives by the clock (arrival_ms; None: none does): its step is last_arrival_step at
    # the latest (every step one base step)
    last_arrival_ms: float | None = None


def active_clients(num_clients: int, max_num_seqs: int, num_requests: int) -> int:
    """The most clients with a request running in one step: a sparse step's activity entries at most."""
    return max(1, min(num_clients, max_num_seqs, num_requests))


def bytes_per_step(num_clients: int, num_active: int | None = None) -> int:
    """Bytes one recorded step costs at most: every client's values (a single client's are plain numbers, not
    arrays), or with ``num_active`` (a sparse run: ``active_clients``) two entries for each of that many (its activity
    and a change of its totals)."""
    if num_active is not None:
        return BYTES_PER_STEP + 2 * BYTES_PER_CLIENT_ENTRY * num_active
    return BYTES_PER_STEP + (BYTES_PER_STEP_CLIENT * num_clients if num_clients > 1 else 0)


def max_recorded_steps(num_clients: int, limits: Limits = CLI_LIMITS, num_active: int | None = None,
                       num_steps: int = 0, num_entries: int = 0, num_idle: int = 0) -> int:
    """The most steps a run of ``num_clients`` clients may record within ``limits.max_bytes`` (``num_active``: as
    ``bytes_per_step``). A sparse run that has recorded ``num_steps`` steps and ``num_entries`` entries so far, then
    ``num_idle`` steps with nothing running (no entries), may go on for as many more steps as the budget left allows
    at the most a step costs."""
    left = limits.max_bytes - BYTES_PER_STEP * (num_steps + num_idle) - BYTES_PER_CLIENT_ENTRY * num_entries
    return max(1, num_steps + num_idle + max(left, 0) // bytes_per_step(num_clients, num_active))


class StepLimit(int):
    """A run's step limit, as the step guard's message says it: formats as ``max_steps=N`` (``{:,}`` too), or as a
    plain number (``prefix`` '') when the memory budget set it."""

    def __new__(cls, value: int, prefix: str):
        self = super().__new__(cls, value)
        self.prefix = prefix
        return self

    def __format__(self, spec: str) -> str:
        return self.prefix + format(int(self), spec)


def client_entries(config: EngineConfig, num_clients: int, num_requests: int, num_steps: int, num_tokens: int,
                   num_request_steps: int) -> int:
    """The entries a sparse run records, at most: a client with a request running costs an activity entry and a
    change of its totals each step, so twice the requests in the batch, summed over the steps: at most the active
    clients each step, and at most the steps each request runs (``num_request_steps``: one per token it generates
    and per prefill chunk, the re-prefills of preempted requests aside) plus the steps it waits in the batch while
    the budget goes to others (only in a step that uses the whole budget: ``num_tokens`` / budget of them)."""
    active = active_clients(num_clients, config.max_num_seqs, num_requests)
    waits = active * cdiv(num_tokens, config.max_num_batched_tokens)
    return 2 * min(num_steps * active, num_request_steps + waits)


def _estimate(config: EngineConfig, num_requests: int, num_clients: int, prompt: np.ndarray, answer: np.ndarray,
              last_arrival: int, next_longest_blocks: int | None = None) -> CostEstimate:
    """The estimate from per-request token counts (``prompt`` and ``answer`` lengths, int64 arrays, or
    representative ones for a workload whose requests are not drawn yet: scaled to ``num_requests``).
    ``next_longest_blocks``: for a workload, the mean blocks of the requests after the longest that take the other
    batch slots (its long tail, which the representative arrays do not show)."""
    scale = num_requests / max(len(prompt), 1)
    num_prompt = int(prompt.sum() * scale)
    num_answer = int(answer.sum() * scale)
    blocks = cdiv(prompt + answer, config.block_size)
    fits = blocks <= config.num_blocks
    longest = int(blocks[fits].max()) if fits.any() else 1
    slots = min(config.max_num_seqs, num_requests)
    # Each slot's table is as long as the longest request it has held: the `slots` longest that fit.
    if next_longest_blocks is not None:
        cells = longest + (slots - 1) * min(longest, next_longest_blocks)
    else:
        fitting = blocks[fits]
        k = min(slots, len(fitting))
        cells = int(np.partition(fitting, len(fitting) - k)[len(fitting) - k:].sum()) if k else longest
    # Steps: arrivals, then every prompt at one step's token budget and every answer token at the pace of the
    # requests that can run at once (batch slots, or the pool shared by requests of the mean size), plus the
    # longest answer (it cannot go faster than a token a step). An over-estimate when arrivals overlap the work.
    mean_blocks = max(float(blocks.mean()) if len(blocks) else 1.0, 1.0)
    at_once = max(1, min(config.max_num_seqs, num_requests, int(config.num_blocks // mean_blocks)))
    longest_answer = int(answer.max()) if len(answer) else 0
    steps = (last_arrival + cdiv(num_prompt, config.max_num_batched_tokens) + cdiv(num_answer, at_once)
             + longest_answer + 1)
    steps = min(steps, config.max_steps)
    entries = 0
    if num_clients > DENSE_CLIENTS_MAX:
        num_chunks = int(cdiv(prompt, config.max_num_batched_tokens).sum() * scale)
        entries = client_entries(config, num_clients, num_requests, steps, num_prompt + num_answer,
                                 num_answer + num_chunks)
        recorded = BYTES_PER_STEP * steps + BYTES_PER_CLIENT_ENTRY * entries
    else:
        recorded = bytes_per_step(num_clients) * steps
    peak = (BYTES_FIXED + BYTES_PER_BLOCK * config.num_blocks + BYTES_PER_REQUEST * num_requests
            + BYTES_PER_CLIENT * num_clients + BYTES_PER_CELL * cells + recorded)
    return CostEstimate(num_requests, num_clients, num_prompt + num_answer, slots, longest, cells, last_arrival,
                        steps, entries, peak)


def of_requests(config: EngineConfig, requests: Sequence[RequestSpec]) -> CostEstimate:
    """The cost of running ``requests`` on ``config``: one pass over the specs (~30 ms for 200,000)."""
    stop, max_model_len = config.stop_check, config.effective_max_model_len
    prompt = np.fromiter((r.prompt_len for r in requests), dtype=np.int64, count=len(requests))
    answer = np.fromiter((r.generated_len(stop, max_model_len) for r in requests), dtype=np.int64,
                         count=len(requests))
    steps = [r.arrival_step for r in requests]
    last_ms = None
    if None in steps:  # (some arrive by the clock: at the latest, every step before them one base step)
        last_ms = max(r.arrival_ms for r in requests if r.arrival_ms is not None)
        steps = [s for s in steps if s is not None] + [latest_step_at(config, last_ms)]
    last = max(steps, default=0)
    clients = len({r.client_id for r in requests})
    return dataclasses.replace(_estimate(config, len(requests), clients, prompt, answer, last), last_arrival_ms=last_ms)


def latest_step_at(config: EngineConfig, ms: float) -> int:
    """The latest step at which the clock can reach ``ms`` (every step before it one base step, the shortest)."""
    return math.ceil(ms / config.cost.step_base_ms)


# z of the longest of ~100,000 lognormal draws (a standard normal passes 4.5 once in ~300,000)
_Z_LONGEST = 4.5


def of_workload(config: EngineConfig, workload: WorkloadSpec) -> CostEstimate:
    """The cost of ``workload`` (a ``sim.workload.WorkloadSpec``) before its requests are drawn: lengths at their
    clipped lognormal means (a long tail raises them), the longest at 4.5 sigma (or the cap), arrivals at the
    clients' total rate (on/off windows make them later: the drawn requests are checked again)."""
    rates = client_rates(workload)
    share = rates / rates.sum()
    prompt_medians = np.array([c.prompt_median or workload.prompt_median for c in workload.clients], float)
    output_medians = np.array([c.output_median or workload.output_median for c in workload.clients], float)

    def mean_len(medians: np.ndarray, sigma: float, cap: int) -> float:
        return float((np.minimum(medians * math.exp(sigma * sigma / 2), cap) * share).sum())

    def longest_len(medians: np.ndarray, sigma: float, cap: int) -> int:
        return int(min(cap, math.ceil(float(medians.max()) * math.exp(_Z_LONGEST * sigma))))

    prompt = np.array([round(mean_len(prompt_medians, workload.prompt_sigma, workload.prompt_max)),
                       longest_len(prompt_medians, workload.prompt_sigma, workload.prompt_max)], dtype=np.int64)
    answer = np.array([round(mean_len(output_medians, workload.output_sigma, workload.output_max)),
                       longest_len(output_medians, workload.output_sigma, workload.output_max)], dtype=np.int64)
    prompt += workload.prefix_len
    # (two representative requests: the mean one, counted num_requests - 1 times, and the longest)
    n = workload.num_requests
    # The block tables: a slot each for the longest and the next min(max_num_seqs, n) - 1 (their mean: the top
    # fraction of each lognormal, at the largest median: a bound)
    fraction = (min(config.max_num_seqs, n) - 1) / (n - 1) if n > 1 else 1.0
    top = (_top_mean_len(prompt_medians, workload.prompt_sigma, workload.prompt_max, fraction)
           + _top_mean_len(output_medians, workload.output_sigma, workload.output_max, fraction) + workload.prefix_len)
    weights = np.array([n - 1, 1]) if n > 1 else np.array([0, 1])
    last_ms = None
    if workload.on_clock:  # (its mean span on the clock, at the latest step that reaches it)
        last_ms = 1000.0 * n / rates.sum()
        last = latest_step_at(config, last_ms)
    else:
        start = min(c.start_step for c in workload.clients)
        last = start + math.ceil(n / rates.sum())
    estimate = _estimate(config, n, len(workload.clients), np.repeat(prompt, weights), np.repeat(answer, weights),
                         last, cdiv(math.ceil(top), config.block_size))
    return estimate if last_ms is None else dataclasses.replace(estimate, last_arrival_ms=round(last_ms, 3))


def _top_mean_len(medians: np.ndarray, sigma: float, cap: int, fraction: float) -> float:
    """The mean of the longest ``fraction`` (0 to 1) of lognormal lengths of the largest of ``medians`` and spread
    ``sigma``, clipped at ``cap``: m e^(s^2/2) Phi(s - z) / p, z the standard normal's (1 - p) quantile (a bound
    for several clients' mixture, each with its own median)."""
    m = float(medians.max())
    if fraction <= 0 or sigma == 0:
        return float(min(m, cap))
    mean = m * math.exp(sigma * sigma / 2)
    if fraction < 1:  # the top fraction's share of the mean, over the fraction
        normal = statistics.NormalDist()
        mean *= normal.cdf(sigma - normal.inv_cdf(1 - fraction)) / fraction
    return float(min(cap, mean))


def check(estimate: CostEstimate, limits: Limits, advice: str | None = None) -> None:
    """Raise ``ScenarioError`` naming the first figure past its limit: one line with the field, the figure and the
    limit, then ``advice`` (default: the limits' own)."""
    e, who = estimate, limits.who
    figures = (
        ("requests", e.num_requests, limits.max_requests,
         f"it has {e.num_requests:,} requests, and {who} runs at most {limits.max_requests:,}"),
        ("clients", e.num_clients, limits.max_clients,
         f"it has {e.num_clients:,} distinct client ids, and {who} runs at most {limits.max_clients:,}"),
        ("tokens", e.num_tokens, limits.max_tokens,
         f"its requests hold {e.num_tokens:,} tokens (prompts plus answers), and {who} runs at most "
         f"{limits.max_tokens:,} a scenario"),
        ("arrival_step", e.last_arrival_step, limits.max_steps - 1,
         f"its requests arrive until step {e.last_arrival_step:,}"
         + ("" if e.last_arrival_ms is None else f" (the last at {e.last_arrival_ms:,} ms on the run's clock: that "
            f"step when every step is a base step, the shortest)")
         + f", and {who} simulates at most {limits.max_steps:,} steps a run"),
        ("block table", e.block_table_cells, limits.max_block_table_cells,
         f"its block tables need {e.block_table_cells:,} cells (a cell a block of its {e.num_slots:,} longest "
         f"requests, one a batch slot; the longest {e.longest_blocks:,} blocks), and {who} allows at most "
         f"{limits.max_block_table_cells:,}"),
        ("steps", e.num_steps, limits.max_steps,
         f"it needs about {e.num_steps:,} engine steps (estimated), and {who} simulates at most "
         f"{limits.max_steps:,}"),
        ("memory", e.peak_bytes, limits.max_bytes,
         f"it needs about {e.peak_bytes / 2**20:,.0f} MiB of memory (estimated: {e.num_requests:,} requests, "
         + (f"{e.num_steps:,} steps, {e.num_client_entries:,} entries for {e.num_clients:,} clients"
            if e.num_client_entries else f"{e.num_steps:,} steps x {e.num_clients:,} client(s)")
         + f"), and {who} allows at most {limits.max_bytes / 2**20:,.0f} MiB"),
    )
    for field, figure, limit, sentence in figures:
        if figure > limit:
            advice = limits.advice if advice is None else advice
            raise ScenarioError(f"{field}: {sentence}" + (f"; {advice}" if advice else ""))
