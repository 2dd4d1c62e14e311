"""Named scenarios for the lessons, the article's examples first. Presets are data: a scenario plus the policy
variants a lesson compares side by side on that same workload.

Article numbers these reproduce (tests pin them):
- one slot, answers of 1,000/100/100 steps: FCFS average finish 1,100 steps, SJF 500;
- a 1,000-token answer abandoned at token 300: 700 tokens wasted without an abort, KV would reach 131 MB
  (Llama 3.1 8B, 128 KiB per token), the abort frees 39 MB on the next step;
- a 2,000-token victim: recompute ~32 ms of prefill, swap ~262 MB each way, ~5 ms at 50 GB/s;
- an 8,000-token prompt among eight decoding streams: one step of ~134 ms without chunked prefill (every stream
  pauses that long), or 16 chunks of ~13.9 ms under a 512-token budget (``stall_figures`` computes them).
"""

# Over 500 lines: every lesson's presets, one small builder each; data read top to bottom, one lesson after another.

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .config import CostModel, EngineConfig, cdiv
from .request import RequestSpec
from .scenario import Scenario
from .workload import ClientSpec, WorkloadSpec, generate


@dataclass(frozen=True)
class Preset:
    key: str
    lesson: str  # a lesson's id (lessons.IDS)
    title: str
    description: str
    scenario: Scenario
    variants: tuple[tuple[str, dict[str, Any]], ...]  # (label, config overrides) compared side by side
    knobs: dict[str, Any] = field(default_factory=dict)  # lesson-specific settings the page starts from


def _workload_scenario(name: str, config: EngineConfig, workload: WorkloadSpec, description: str = "") -> Scenario:
    return Scenario(name=name, config=config, requests=tuple(generate(workload)), description=description,
                    workload=workload)


# ---- queueing ---------------------------------------------------------------------------------------------------
def _article_hol() -> Preset:
    requests = (
        RequestSpec("long", 0, 4, 1000),
        RequestSpec("short1", 0, 4, 100),
        RequestSpec("short2", 0, 4, 100),
    )
    config = EngineConfig(num_blocks=999, max_num_seqs=1)
    return Preset(
        "article_hol", "queueing", "Article: one slot, answers of 1,000/100/100 steps",
        "One batch slot and three requests arriving together: a 1,000-step answer first, two 100-step answers "
        "behind it. FCFS makes both short ones wait for the long one; shortest-job-first runs them first.",
        Scenario("Head-of-line blocking: one slot, 1,000/100/100 steps", config, requests),
        (("FCFS", {"policy": "fcfs"}), ("SJF (true lengths)", {"policy": "sjf"})),
    )


def _busy_server() -> Preset:
    workload = WorkloadSpec(num_requests=300, rate_per_step=0.25, prompt_median=300, prompt_sigma=0.8,
                            output_median=120, output_sigma=1.1, output_max=2000, seed=7)
    config = EngineConfig(num_blocks=2000, max_num_seqs=16, prediction_error_sigma=0.5)
    return Preset(
        "busy_server", "queueing", "Busy server: Poisson arrivals, long-tailed answers",
        "300 requests arriving at random, answer lengths with a long tail, 16 batch slots. Long answers hold "
        "slots while short ones queue behind them.",
        _workload_scenario("Busy server", config, workload),
        (("FCFS", {"policy": "fcfs"}), ("SJF (true lengths)", {"policy": "sjf"}),
         ("SJF (predicted)", {"policy": "sjf_predicted"})),
    )


def _predicted_lengths() -> Preset:
    p = _busy_server()
    return Preset(
        "predicted_lengths", "queueing", "Predicted lengths: SJF with noisy predictions",
        "Nobody knows an answer's length before generating it. SJF on predicted lengths degrades from the "
        "oracle toward FCFS as the prediction error grows.",
        p.scenario,
        (("SJF (true lengths)", {"policy": "sjf"}), ("SJF (predicted)", {"policy": "sjf_predicted"}),
         ("FCFS", {"policy": "fcfs"})),
        {"sigma_sweep": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0)},
    )


def _starvation() -> Preset:
    # "long" arrives with the first short one: alone at step 0 it would take the free slot before any competition.
    requests = [RequestSpec("long", 1, 64, 600)]
    requests += [RequestSpec(f"s{i}", 1 + 10 * i, 64, 40) for i in range(120)]
    config = EngineConfig(num_blocks=999, max_num_seqs=4, starvation_threshold_steps=200, priority_quantum_steps=600)
    return Preset(
        "starvation", "queueing", "Starvation: a long request under SJF",
        "A long request arrives with a steady stream of short ones. Pure SJF keeps choosing the short ones; a "
        "starvation guard promotes a request that has waited too long.",
        Scenario("Starvation under SJF", config.replace(max_num_seqs=1), tuple(requests)),
        (("SJF, no guard", {"policy": "sjf", "starvation_threshold_steps": 0}),
         ("SJF + guard", {"policy": "sjf"}), ("FCFS", {"policy": "fcfs"})),
    )


def _priority_lanes() -> Preset:
    requests = [RequestSpec(f"batch{i}", i * 5, 64, 300, client_id="batch", priority=1) for i in range(6)]
    requests += [RequestSpec(f"chat{i}", 40 + i * 60, 64, 60, client_id="chat", priority=0) for i in range(8)]
    config = EngineConfig(num_blocks=999, max_num_seqs=4)
    return Preset(
        "priority_lanes", "queueing", "Priority lanes: vLLM's priority policy",
        "Interactive 'chat' requests (priority 0) and background 'batch' jobs (priority 1). Waiting chat "
        "requests jump the queue, but a chat arrival never displaces a running batch job when slots are full.",
        Scenario("Priority lanes", config, tuple(requests)),
        (("FCFS", {"policy": "fcfs"}), ("priority", {"policy": "priority"})),
    )


# ---- fairness ---------------------------------------------------------------------------------------------------
# Every fairness workload gives its clients shares of one Poisson arrival rate (a client's rate while it is on is
# rate_per_step x its share), so the page's per-client share sliders map one to one onto the presets. 32 batch
# slots serve about 0.3 requests of 200 + 100 tokens per step (~4,100 output tokens/s): rates above that overload
# the server, which is when fairness matters.
_TWO_CLIENTS_90_10 = (ClientSpec("A", share=0.9), ClientSpec("B", share=0.1))


def _article_fairness() -> Preset:
    # 0.5 requests/step is ~1.7x what the batch can serve, so a queue builds. B's trickle is 0.05/step, ~10 per
    # 200-step window: a limit of 10 per window barely touches B but admits A at B's rate, which is ~40% of the
    # capacity - the VTC paper's shape (~780 -> ~340 tokens/s: lessons.fairness.notices.PAPER_RATE_LIMIT, which the page
    # sets beside this preset's own figures).
    workload = WorkloadSpec(num_requests=300, rate_per_step=0.5, prompt_median=200, prompt_sigma=0.5,
                            output_median=100, output_sigma=0.6, clients=_TWO_CLIENTS_90_10, seed=3)
    config = EngineConfig(num_blocks=1000, max_num_seqs=32, rate_limit_max_requests=10, rate_limit_window_steps=200)
    return Preset(
        "article_fairness", "fairness", "Article: client A sends 90% of the traffic, B a trickle",
        "Client A floods the server; client B sends a request now and then. FCFS serves requests, not "
        "customers: B's requests wait behind A's wall. A per-client rate limit protects B by turning A away; "
        "VTC serves the customer with the least service first and still lets A use every slot B leaves free.",
        _workload_scenario("A 90%, B 10%", config, workload),
        (("FCFS", {"policy": "fcfs", "rate_limit_max_requests": 0}),
         ("Rate limit", {"policy": "fcfs"}),
         ("VTC", {"policy": "vtc", "rate_limit_max_requests": 0})),
    )


def _rate_limit_sweep() -> Preset:
    p = _article_fairness()
    return Preset(
        "rate_limits", "fairness", "Rate limits leave the GPU idle",
        "A per-client rate limit protects B by turning A away, even when the GPU has room to spare. Sweep the "
        "limit: total throughput against the requests each client may send per window, with FCFS and VTC "
        "(no limit) as references, and the requests turned away.",
        p.scenario,
        (("FCFS", {"policy": "fcfs", "rate_limit_max_requests": 0}),
         ("Rate limit", {"policy": "fcfs"}),
         ("VTC", {"policy": "vtc", "rate_limit_max_requests": 0})),
        {"limit_sweep": (2, 4, 6, 10, 15, 25, 40, 60)},
    )


def _returning_idle() -> Preset:
    # A alone already fills the batch (0.35 requests/step); B says nothing until step 300, then sends as much as
    # A for 180 steps, after which A has the server to itself again. At step 300 A's counter is ~37,000 weighted
    # tokens and B's is 0. (300 requests, ~1,200 steps per run: three runs rerun in well under a second.)
    clients = (ClientSpec("A", share=0.5), ClientSpec("B", share=0.5, start_step=300, stop_step=480))
    workload = WorkloadSpec(num_requests=300, rate_per_step=0.7, prompt_median=200, prompt_sigma=0.4,
                            output_median=100, output_sigma=0.4, clients=clients, seed=5)
    config = EngineConfig(num_blocks=800, max_num_seqs=32)
    return Preset(
        "returning_idle", "fairness", "Returning from idle: why the lift",
        "B stays away for 300 steps, then sends a burst as large as A's traffic. Least-counter-first (no lift) "
        "lets B spend the credit it 'banked' while idle and starve A; VTC lifts B's counter to the lowest "
        "active one, so the two share the GPU from the moment B returns.",
        _workload_scenario("B returns from idle", config, workload),
        (("LCF (no lift)", {"policy": "lcf"}), ("VTC (lift)", {"policy": "vtc"}), ("FCFS", {"policy": "fcfs"})),
    )


def _weighted_vtc() -> Preset:
    clients = (ClientSpec("A", share=0.5), ClientSpec("B", share=0.5))
    workload = WorkloadSpec(num_requests=300, rate_per_step=0.7, prompt_median=150, prompt_sigma=0.4,
                            output_median=100, output_sigma=0.4, clients=clients, seed=11)
    config = EngineConfig(num_blocks=800, max_num_seqs=32, client_weights=(("A", 1.0), ("B", 2.0)))
    return Preset(
        "weighted_vtc", "fairness", "Weighted VTC: weights 1:2",
        "Both clients send the same traffic, more than the server can take. With weights 1:2, VTC charges B "
        "half as much per token, so while both are backlogged B receives twice A's service.",
        _workload_scenario("Weighted VTC", config, workload),
        (("VTC 1:2", {"policy": "vtc"}), ("VTC 1:1", {"policy": "vtc", "client_weights": ()}),
         ("FCFS", {"policy": "fcfs"})),
    )


def _prefill_vs_decode() -> Preset:
    # A: 1,200-token documents, 40-token answers (1,280 weighted tokens each at in 1 : out 2). B: 60-token
    # questions, 300-token answers (660 each). The output weight moves who looks expensive.
    clients = (ClientSpec("A", share=0.5, prompt_median=1200, output_median=40),
               ClientSpec("B", share=0.5, prompt_median=60, output_median=300))
    workload = WorkloadSpec(num_requests=220, rate_per_step=0.6, prompt_sigma=0.3, output_sigma=0.3,
                            clients=clients, seed=13)
    config = EngineConfig(num_blocks=1600, max_num_seqs=32)
    return Preset(
        "prefill_vs_decode", "fairness", "Prefill-heavy vs decode-heavy clients",
        "A sends long documents and asks for short answers; B sends short questions and asks for long answers. "
        "VTC's input and output weights decide which of them counts as having been served more, and so who "
        "waits. Sweep the output weight to watch the waiting move from one client to the other.",
        _workload_scenario("Prefill-heavy A, decode-heavy B", config, workload),
        (("VTC", {"policy": "vtc"}), ("FCFS", {"policy": "fcfs"})),
        {"output_weight_sweep": (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)},
    )


# ---- cancellation -----------------------------------------------------------------------------------------------
def _article_abandon() -> Preset:
    requests = (
        RequestSpec("long", 0, 1, 1000, abort_step=300),
        RequestSpec("waiting", 1, 1, 100),
    )
    config = EngineConfig(num_blocks=999, max_num_seqs=1)
    return Preset(
        "article_abandon", "cancellation", "Article: a 1,000-token answer abandoned at token 300",
        "The user closes the tab after reading 300 of 1,000 tokens while another request waits for the only "
        "slot. Without an abort the engine generates 700 tokens for nobody; with one, the slot and KV are freed "
        "on the very next step.",
        Scenario("Abandoned at token 300", config, requests),
        (("abort on disconnect", {"abort_on_disconnect": True}),
         ("no abort", {"abort_on_disconnect": False})),
        {"answer_tokens": 1000, "leave_after_tokens": 300},
    )


def _impatient_users() -> Preset:
    # 200 requests at 0.2 per step on 16 slots: the slots, not the 1,000-block pool, are the bottleneck, so a
    # queue builds and every slot held for nobody delays the users who stay. ~2,000 steps: quick to rerun.
    workload = WorkloadSpec(num_requests=200, rate_per_step=0.2, prompt_median=200, prompt_sigma=0.6,
                            output_median=120, output_sigma=0.8, output_max=1500, abandon_rate=0.3, seed=17)
    config = EngineConfig(num_blocks=1000, max_num_seqs=16, timeout_steps=0)
    return Preset(
        "impatient_users", "cancellation", "Impatient users under load",
        "200 requests on 16 batch slots, and 30% of users leave before their answer is done (some while still "
        "queued). Aborting at once frees their slots and KV for the others; a server that notices late, or "
        "never, keeps generating for nobody while the queue grows.",
        _workload_scenario("Impatient users", config, workload),
        (("abort at once", {"abort_on_disconnect": True, "disconnect_detect_delay_steps": 0}),
         ("notices after 50 steps", {"abort_on_disconnect": True, "disconnect_detect_delay_steps": 50}),
         ("no abort", {"abort_on_disconnect": False})),
    )


def _stops() -> Preset:
    requests = []
    for i in range(24):
        natural = 60 + (i * 37) % 240
        requests.append(RequestSpec(f"r{i}", i * 8, 100, natural, max_tokens=512,
                                    stop_type="string" if i % 2 else "token"))
    config = EngineConfig(num_blocks=800, max_num_seqs=4)
    return Preset(
        "stops", "cancellation", "Stop sequences and length limits",
        "Answers end on their own well before max_tokens=512. A server that checks for the stop every step "
        "frees the slot at once (a stop string is caught one step after a stop token); one that only stops "
        "at max_tokens generates the rest for nobody.",
        Scenario("Stop checks", config, tuple(requests)),
        (("check every step", {"stop_check": "every_step"}), ("stop at max_tokens", {"stop_check": "at_max_tokens"})),
        {"max_tokens": 512, "stop_marker": "mixed"},  # odd requests end on a stop string, even ones on a token
    )


# ---- preemption -------------------------------------------------------------------------------------------------
def _toy_pool() -> Preset:
    requests = (
        RequestSpec("A", 0, 16, 200, priority=1),
        RequestSpec("B", 0, 16, 200, priority=0),
        RequestSpec("C", 0, 16, 200, priority=2),
        RequestSpec("D", 0, 16, 200, priority=0),
        RequestSpec("E", 5, 16, 50, priority=0),
    )
    config = EngineConfig(num_blocks=32, max_num_seqs=4)
    return Preset(
        "toy_pool", "preemption", "Toy pool: memory fills while everyone is mid-answer",
        "32 blocks of 16 tokens, four answers of 200 tokens growing together. When the pool is full the "
        "scheduler preempts: FCFS evicts the last of the running list (the request admitted last) and puts it "
        "back at the front of the "
        "queue, where it blocks the small request E; the priority policy evicts the lowest priority.",
        Scenario("Toy pool", config, requests),
        (("FCFS victim", {"policy": "fcfs"}), ("priority victim", {"policy": "priority"})),
    )


def _recompute_vs_swap() -> Preset:
    requests = (
        RequestSpec("victim", 0, 1900, 400, priority=1),
        RequestSpec("grower", 0, 200, 500, priority=0),
    )
    # 144 blocks = 2,304 tokens: the pool runs out at step 102, when the victim holds 1,900 + 100 = 2,000 tokens
    # (125 blocks) and the grower 301 (19); the priority policy picks the victim (priority 1) to preempt.
    config = EngineConfig(num_blocks=144, max_num_seqs=4, num_cpu_blocks=400, max_num_batched_tokens=2048,
                          policy="priority")
    return Preset(
        "recompute_vs_swap", "preemption", "Recompute vs swap for a 2,000-token victim",
        "A request holding about 2,000 tokens of KV is preempted. Recompute throws its KV away and prefills "
        "it again later (~32 ms of GPU math); swap copies ~262 MB to CPU memory and back (~5 ms each way at "
        "50 GB/s) and parks it in CPU RAM meanwhile. vLLM's V1 engine only recomputes; swap was V0's option.",
        Scenario("2,000-token victim", config, requests),
        (("recompute", {"preemption_mode": "recompute"}), ("swap", {"preemption_mode": "swap"})),
    )


def _prefix_cache() -> Preset:
    # 330 blocks = 5,280 tokens for 16 slots of ~860-token requests (512 shared): preemptions with caching on too,
    # so the re-prefills show their cache hits (the shared 512 tokens plus the victim's own blocks not yet reused).
    # Since freed blocks without a hash go to the head of the free queue (vLLM's order; before, every freed block
    # went to the tail), one more of r28's own blocks survives to its second re-prefill: 25,296 cached tokens in
    # all (was 25,280), 1,245 recomputed (was 1,261); steps, preemptions and finish steps are unchanged.
    workload = WorkloadSpec(num_requests=40, rate_per_step=0.5, prompt_median=200, prompt_sigma=0.3,
                            output_median=150, output_sigma=0.5, prefix_len=512, seed=23)
    config = EngineConfig(num_blocks=330, max_num_seqs=16)
    return Preset(
        "prefix_cache", "preemption", "Prefix caching softens recompute",
        "Every request starts with the same 512-token system prompt, and the pool is too small for 16 "
        "growing answers. With prefix caching a preempted request's freed full blocks stay cached until reused, so "
        "part of its re-prefill is a cache hit. As in vLLM, a freed block no request can hit (a partial last "
        "block) is reused first, so the cached ones last longer.",
        _workload_scenario("Shared system prompt", config, workload),
        (("prefix caching off", {"enable_prefix_caching": False}),
         ("prefix caching on", {"enable_prefix_caching": True})),
    )


def _sizing() -> Preset:
    # Small on purpose: the page runs it 100 times for the sweep (~48,000 engine steps in all). 40 requests of
    # ~730 tokens at their longest arrive within 40 steps: 32 slots grow into ~1,450 blocks.
    workload = WorkloadSpec(num_requests=40, rate_per_step=1.0, prompt_median=640, prompt_sigma=0.25,
                            output_median=90, output_sigma=0.3, output_max=200, seed=29)
    config = EngineConfig(num_blocks=1200, max_num_seqs=32)
    return Preset(
        "sizing", "preemption", "Preemptions all the time are a sizing problem",
        "Sweep the KV pool size and max_num_seqs: preemption stops once the pool holds what the batch slots "
        "can grow into; fewer slots stop it too, at the price of queueing.",
        _workload_scenario("Sizing sweep", config, workload),
        (("FCFS", {"policy": "fcfs"}),),
        {"pool_sweep_blocks": (300, 400, 500, 600, 800, 1000, 1200, 1400, 1600, 2000),
         "seqs_sweep": (4, 8, 12, 16, 20, 24, 28, 32, 36, 40)},
    )


# ---- token budget -----------------------------------------------------------------------------------------------
# The budget sweep: max_num_batched_tokens from 64 to 8,192, chunked prefill on and off (off only where the budget
# holds the longest request, as vLLM requires: max_model_len <= max_num_batched_tokens).
BUDGET_SWEEP = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


class StallFigures(NamedTuple):
    """A long prompt arriving among decoding requests, worked out from the cost model (ms per step)."""

    decode_step_ms: float  # a step of the decodes alone
    one_step_ms: float  # without chunked prefill: the whole prompt and the decodes in one step
    chunk_tokens: int  # with chunked prefill: the prompt's tokens per step (the budget left after the decodes)
    num_chunks: int  # steps its prefill takes
    chunk_step_ms: float  # a step with a full chunk and the decodes
    chunked_ttft_ms: float  # the prompt's time to first token when chunked: its chunks' steps, back to back


def stall_figures(cost: CostModel, prompt_len: int, num_decoding: int, budget: int) -> StallFigures:
    """What the article computes: each running request decodes one token a step and is scheduled first, so a
    chunk gets the budget left after the decodes; the last chunk is the remainder."""
    chunk = budget - num_decoding
    if chunk <= 0:
        raise ValueError(f"budget: must exceed the {num_decoding} decoding requests' tokens, got {budget}")
    num_chunks = cdiv(prompt_len, chunk)
    last = prompt_len - (num_chunks - 1) * chunk
    ttft = (num_chunks - 1) * cost.step_ms(chunk, num_decoding) + cost.step_ms(last, num_decoding)
    return StallFigures(cost.step_ms(0, num_decoding), cost.step_ms(prompt_len, num_decoding), chunk, num_chunks,
                        cost.step_ms(chunk, num_decoding), ttft)


def _long_prompt() -> Preset:
    # Eight chat streams decode from step 0; at step 20 an 8,000-token prompt arrives. Without chunking the budget
    # must hold it (8,192); chunked, 512 tokens a step: 8 for the decodes, 504 for the prompt.
    num_decoding, prompt_len, arrival_step = 8, 8000, 20
    requests = [RequestSpec(f"chat{i}", 0, 100, 60) for i in range(num_decoding)]
    requests.append(RequestSpec("long", arrival_step, prompt_len, 16))
    config = EngineConfig(num_blocks=2000, max_num_seqs=16, max_num_batched_tokens=512)
    f = stall_figures(config.cost, prompt_len, num_decoding, 512)
    return Preset(
        "long_prompt", "budget", "Article: an 8,000-token prompt among eight decoding streams",
        f"Eight requests are decoding, a step every {f.decode_step_ms:.1f} ms, when an {prompt_len:,}-token prompt "
        f"arrives. Without chunked prefill its prefill is one step of {config.cost.step_base_ms:g} ms + "
        f"{prompt_len:,} x {config.cost.prefill_token_us:g} us + {num_decoding} decodes x "
        f"{config.cost.decode_request_us:g} us = {f.one_step_ms:.1f} ms, and every stream pauses "
        f"that long. With a 512-token budget the decodes take {num_decoding} tokens of each step and the prompt "
        f"the other {f.chunk_tokens}: {f.num_chunks} chunks in steps of {f.chunk_step_ms:.1f} ms, so the streams "
        f"keep flowing while the prompt's first token comes after ~{f.chunked_ttft_ms:.0f} ms instead of "
        f"~{f.one_step_ms:.0f}.",
        Scenario("An 8,000-token prompt among eight streams", config, tuple(requests)),
        (("no chunking", {"chunked_prefill": False, "max_num_batched_tokens": 8192}),
         ("chunked prefill", {"chunked_prefill": True, "max_num_batched_tokens": 512})),
        {"budget_sweep": BUDGET_SWEEP, "stall": (prompt_len, num_decoding)},
    )


def _busy_budget() -> Preset:
    # 300 requests, ~0.15 a step, prompts with a long tail (median 500, up to 3,500 tokens): at most ~22 run at
    # once, so the budget, not the slots or the pool, decides how a step is shared. Chunked, p99 time between
    # tokens grows from ~7 ms (budget 64) to ~48 ms (8,192) while p99 TTFT falls from seconds to ~60 ms.
    workload = WorkloadSpec(num_requests=300, rate_per_step=0.15, prompt_median=500, prompt_sigma=1.0,
                            prompt_max=3500, output_median=150, output_sigma=0.6, output_max=500, seed=31)
    config = EngineConfig(num_blocks=6000, max_num_seqs=64, max_num_batched_tokens=2048)
    return Preset(
        "busy_budget", "budget", "Busy server: the budget trades TTFT for smooth streams",
        "300 requests arriving at random, prompts from a few dozen to 3,500 tokens. A large budget lets a long "
        "prompt finish its prefill in one or two big steps (low TTFT) while every stream waits for them; a small "
        "one keeps each step short (steady tokens) and makes prompts queue for the budget. The sweep shows the "
        "whole curve.",
        _workload_scenario("Busy server, long-tailed prompts", config, workload),
        (("no chunking", {"chunked_prefill": False, "max_num_batched_tokens": 8192}),
         ("chunked, 2,048", {"chunked_prefill": True, "max_num_batched_tokens": 2048}),
         ("chunked, 256", {"chunked_prefill": True, "max_num_batched_tokens": 256})),
        {"budget_sweep": BUDGET_SWEEP},
    )


def _budget_memory() -> Preset:
    # Eight chat streams (200-token prompts, 600-token answers) and six bursts of four 2,000-token documents with
    # 12-token answers, in a 680-block pool. With a budget of 8,192 a burst's documents are admitted in one step
    # (each passes the free-block check on its own), filling the pool to its last block; the chats' next blocks
    # are then missing and the scheduler preempts the last document admitted, whose 2,000 tokens are computed
    # again. With 512 the documents come in one after another and the pool peaks below its size.
    requests = [RequestSpec(f"chat{i}", 0, 200, 600) for i in range(8)]
    requests += [RequestSpec(f"doc{burst}.{i}", 30 + 60 * burst, 2000, 12) for burst in range(6) for i in range(4)]
    config = EngineConfig(num_blocks=680, max_num_seqs=16, max_num_batched_tokens=512)
    return Preset(
        "budget_memory", "budget", "Where the budget meets memory: a small pool",
        "Chat streams share a small KV pool with bursts of long documents. A large budget admits a whole burst's "
        "prefill in one step and fills the pool to the brim, so the streams' next blocks are missing and the "
        "scheduler preempts a document, whose prompt is computed again; a small budget admits them one by one.",
        Scenario("Chats and document bursts in a small pool", config, tuple(requests)),
        (("budget 8,192", {"chunked_prefill": True, "max_num_batched_tokens": 8192}),
         ("budget 512", {"chunked_prefill": True, "max_num_batched_tokens": 512})),
        {"budget_sweep": BUDGET_SWEEP},
    )


# ---- overload ---------------------------------------------------------------------------------------------------
# Chat traffic at an offered load in requests per second, for a duration: 32 slots serve ~25 requests/s of these
# (prompts ~400 tokens, answers ~120), so past ~25 the queue grows for as long as the traffic lasts.
OVERLOAD_LOADS = (10, 20, 25, 30, 40, 60, 90)  # the load sweep's offered loads, requests/s
OVERLOAD_SLO = {"ttft_slo_ms": 1000.0, "tbt_slo_ms": 100.0}  # the presets' targets (DistServe's kind of SLO)
NO_ADMISSION = {"max_num_queued_reqs": None, "max_num_queued_tokens": None, "shed_past_ttft_slo": False}


def overload_traffic(load_rps: float, duration_s: float, *, prompt_median: int = 400, output_median: int = 120,
                     seed: int = 7, clients: tuple[ClientSpec, ...] = (ClientSpec(),)) -> WorkloadSpec:
    """``load_rps`` requests a second (Poisson) for ``duration_s`` seconds: ``load_rps x duration_s`` requests."""
    return WorkloadSpec(num_requests=max(1, round(load_rps * duration_s)), rate_per_step=None,
                        rate_per_s=float(load_rps), prompt_median=prompt_median, prompt_sigma=0.6,
                        output_median=output_median, output_sigma=0.6, output_max=600, clients=clients, seed=seed)


# The burst's arrivals are clocked by steps (a client's on/off window is in steps, and windows have no per-second
# form yet): ~7.9 ms a step at a full batch, so 18 requests/s is ~0.14 a step.
_BURST_STEP_S = 0.0079


def _overload_config(**changes: Any) -> EngineConfig:
    return EngineConfig(num_blocks=4000, max_num_seqs=32, **{**OVERLOAD_SLO, **changes})


def _past_the_knee() -> Preset:
    load, duration = 40, 20
    return Preset(
        "past_the_knee", "overload", "Past the knee: no admission control",
        f"{load} requests a second for {duration} s, where the server can serve about 25. Nothing is turned away: "
        "the waiting queue grows for as long as the traffic lasts, and every request waits behind all the earlier "
        "ones. The server is never idle, yet few requests meet their targets. Beside it, a server that drops a "
        "waiting request once its TTFT target has passed (the simulator's teaching policy, not vLLM's).",
        _workload_scenario("Chat traffic past the server's capacity", _overload_config(),
                           overload_traffic(load, duration)),
        (("no admission control", NO_ADMISSION),
         ("shed late requests", {**NO_ADMISSION, "shed_past_ttft_slo": True})),
        {"load_rps": load, "duration_s": duration, "load_sweep": OVERLOAD_LOADS},
    )


def _request_cap() -> Preset:
    load, duration, cap = 40, 20, 48
    return Preset(
        "request_cap", "overload", "A request cap at the door",
        f"The same traffic, with vLLM's max_num_queued_reqs at {cap}: an arrival is refused (HTTP 503) when the "
        f"requests already waiting or running would pass {cap}. A refused client can retry elsewhere at once; "
        "those let in wait behind at most the cap.",
        _workload_scenario("Chat traffic past the server's capacity", _overload_config(),
                           overload_traffic(load, duration)),
        (("no admission control", NO_ADMISSION),
         ("request cap", {**NO_ADMISSION, "max_num_queued_reqs": cap})),
        {"load_rps": load, "duration_s": duration, "load_sweep": OVERLOAD_LOADS},
    )


def _burst() -> Preset:
    # Chat at ~18 requests/s (prompts ~200 tokens) and, from ~5 s, a burst of ~45 documents of ~4,000 tokens in
    # under a second. A request cap lets a queue of documents in, and the chats behind their prefills miss the
    # target; a token cap counts the documents' prompts and refuses them first.
    clients = (ClientSpec("chat", rate_per_step=18 * _BURST_STEP_S, prompt_median=200),
               ClientSpec("docs", rate_per_step=60 * _BURST_STEP_S, prompt_median=4000, start_step=600, stop_step=700))
    workload = WorkloadSpec(num_requests=420, rate_per_step=18 * _BURST_STEP_S, prompt_median=200, prompt_sigma=0.5,
                            output_median=120, output_sigma=0.6, output_max=600, clients=clients, seed=11)
    return Preset(
        "burst", "overload", "A burst of long prompts: count tokens, not requests",
        "Chat traffic within the server's capacity, then a burst of long documents (~4,000-token prompts). A cap on "
        "requests lets in as many documents as chats, and every chat behind their prefills waits; vLLM's "
        "max_num_queued_tokens counts the prompts still to be prefilled, so it refuses the documents once their "
        "tokens fill it.",
        _workload_scenario("Chat traffic and a burst of documents", _overload_config(), workload),
        (("request cap", {**NO_ADMISSION, "max_num_queued_reqs": 48}),
         ("token cap", {**NO_ADMISSION, "max_num_queued_tokens": 8000})),
        {"load_sweep": OVERLOAD_LOADS},
    )


def _two_classes() -> Preset:
    # Interactive traffic with SLO targets (priority 0) and batch traffic without (priority 1: later in vLLM's
    # priority order), 35 requests/s together against ~26 served.
    clients = (ClientSpec("interactive", share=20), ClientSpec("batch", share=15, priority=1, slo=False))
    return Preset(
        "two_classes", "overload", "Interactive and batch traffic: priority keeps the targets",
        "Interactive requests with latency targets and batch requests without, more than the server can serve "
        "together. First come, first served makes everyone wait; vLLM's priority policy serves the interactive "
        "requests first, and the batch requests absorb the delay (they finish later, nobody is refused).",
        _workload_scenario("Interactive and batch traffic", _overload_config(),
                           overload_traffic(35, 20, seed=13, clients=clients)),
        (("FCFS", {**NO_ADMISSION, "policy": "fcfs"}), ("priority", {**NO_ADMISSION, "policy": "priority"})),
        # (its sweep stops at 60 requests/s: two clients' records make each run dearer, and the knee is well past)
        {"load_rps": 35, "duration_s": 20, "load_sweep": OVERLOAD_LOADS[:-1]},
    )


# key -> builder, in lesson order (the article's example first in each lesson). A key must be its preset's own.
_BUILDERS: dict[str, Callable[[], Preset]] = {
    "article_hol": _article_hol, "busy_server": _busy_server, "predicted_lengths": _predicted_lengths,
    "starvation": _starvation, "priority_lanes": _priority_lanes,
    "article_fairness": _article_fairness, "rate_limits": _rate_limit_sweep, "returning_idle": _returning_idle,
    "weighted_vtc": _weighted_vtc, "prefill_vs_decode": _prefill_vs_decode,
    "article_abandon": _article_abandon, "impatient_users": _impatient_users, "stops": _stops,
    "toy_pool": _toy_pool, "recompute_vs_swap": _recompute_vs_swap, "prefix_cache": _prefix_cache,
    "sizing": _sizing,
    "long_prompt": _long_prompt, "busy_budget": _busy_budget, "budget_memory": _budget_memory,
    "past_the_knee": _past_the_knee, "request_cap": _request_cap, "burst": _burst, "two_classes": _two_classes,
}


def all_presets() -> dict[str, Preset]:
    """Every preset by key, in lesson order (the article's example first in each lesson)."""
    return {key: build() for key, build in _BUILDERS.items()}


def presets_for(lesson: str) -> list[Preset]:
    return [p for p in all_presets().values() if p.lesson == lesson]


def get(key: str) -> Preset:
    """One preset, built alone (building all of them generates every workload: ~20 ms)."""
    if key not in _BUILDERS:
        raise KeyError(f"preset {key!r} is not one of: {', '.join(_BUILDERS)}")
    return _BUILDERS[key]()
