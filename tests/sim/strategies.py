"""Hypothesis strategies: small random workloads and engine configurations covering every knob.

Pools are tiny (8..32 blocks of 1..8 tokens) so preemption, swapping, prefix-cache reuse and rejections all happen
often; requests that can never fit are rejected by the engine with a reason, which the properties check too. vLLM's
admission caps and deadline-aware shedding are drawn too (short targets, so that waiting requests are shed).
With ``timed``, some requests arrive by the clock (``arrival_ms``) instead of at a step: times on the scale of a few
steps, some of them exact multiples of the default base step (an idle stretch's step boundaries).
"""

from __future__ import annotations

from hypothesis import strategies as st

from sim import EngineConfig, RequestSpec
from sim.config import Policy

ALL_POLICIES = tuple(p.value for p in Policy)


BASE_STEP_MS = 5.75  # the default cost model's step_base_ms: an idle step


def arrival_times(max_ms: float) -> st.SearchStrategy[float]:
    """A time on the run's clock, ms: anywhere from 0 to ``max_ms`` (to the microsecond, as the generator writes
    them), or exactly k idle steps (a boundary of an idle stretch), or 0."""
    return st.one_of(st.integers(0, round(max_ms * 1000)).map(lambda us: us / 1000),
                     st.integers(0, int(max_ms / BASE_STEP_MS)).map(lambda k: k * BASE_STEP_MS), st.just(0.0))


@st.composite
def requests(draw, max_requests: int = 10, max_arrival: int = 6, clients: str = "abc",
             timed: bool = False) -> list[RequestSpec]:
    """``timed``: each request arrives by the clock or at a step, drawn one by one (all, none or some of each)."""
    n = draw(st.integers(1, max_requests))
    share_timed = draw(st.sampled_from([0.0, 0.5, 1.0])) if timed else 0.0
    out = []
    for i in range(n):
        arrival = draw(st.integers(0, max_arrival))
        at_ms = draw(arrival_times(12.0 * max_arrival)) if share_timed and (
            share_timed == 1.0 or draw(st.booleans())) else None
        prompt = draw(st.integers(1, 24))
        group = draw(st.sampled_from([None, "g1", "g1", "g2"]))
        out.append(RequestSpec(
            request_id=f"r{i}",
            arrival_step=None if at_ms is not None else arrival,
            arrival_ms=at_ms,
            prompt_len=prompt,
            output_len=draw(st.integers(1, 24)),
            client_id=draw(st.sampled_from(clients)),
            priority=draw(st.integers(0, 2)),
            abort_step=None if at_ms is not None else draw(st.one_of(st.none(), st.integers(arrival, arrival + 30))),
            prefix_group=group,
            prefix_len=draw(st.integers(prompt // 2, prompt)) if group else 0,
            max_tokens=draw(st.one_of(st.none(), st.integers(1, 30))),
            stop_type=draw(st.sampled_from(["token", "string"])),
            slo=draw(st.sampled_from([True, True, True, False])),
        ))
    return out


@st.composite
def configs(draw, policies: tuple[str, ...] = ALL_POLICIES) -> EngineConfig:
    chunked_prefill = draw(st.booleans())
    # Without chunked prefill a prompt over the budget is rejected: keep most budgets above the longest prompt (24).
    budget = draw(st.one_of(st.integers(1, 8), st.integers(8, 64)) if chunked_prefill else st.integers(4, 64))
    # Mostly the default (the budget without chunked prefill: some answers stop there); sometimes shorter, so that
    # requests stop at max_model_len, or prompts over it are rejected, with chunked prefill too.
    max_model_len = draw(st.sampled_from([0, 0, 0, 12, 30]))
    return EngineConfig(
        num_blocks=draw(st.integers(8, 32)),
        block_size=draw(st.sampled_from([1, 2, 4, 4, 8])),
        max_num_seqs=draw(st.sampled_from([1, 2, 3, 4, 6, 8])),
        max_num_batched_tokens=budget,
        max_model_len=max_model_len if chunked_prefill else min(max_model_len, budget),
        policy=draw(st.sampled_from(policies)),
        enable_prefix_caching=draw(st.booleans()),
        chunked_prefill=chunked_prefill,
        watermark=draw(st.sampled_from([0.0, 0.0, 0.1, 0.25])),
        preemption_mode=draw(st.sampled_from(["recompute", "swap"])),
        num_cpu_blocks=draw(st.one_of(st.integers(0, 4), st.integers(8, 64))),
        abort_on_disconnect=draw(st.booleans()),
        disconnect_detect_delay_steps=draw(st.integers(0, 3)),
        timeout_steps=draw(st.sampled_from([0, 0, 8, 30])),
        stop_check=draw(st.sampled_from(["every_step", "at_max_tokens"])),
        prediction_error_sigma=draw(st.sampled_from([0.0, 0.5, 1.5])),
        starvation_threshold_steps=draw(st.sampled_from([0, 4, 20])),
        priority_quantum_steps=draw(st.integers(1, 8)),
        input_weight=draw(st.sampled_from([0.5, 1.0, 2.0])),
        output_weight=draw(st.sampled_from([1.0, 2.0])),
        client_weights=draw(st.sampled_from([(), (("a", 2.0),), (("b", 0.5), ("c", 3.0))])),
        rate_limit_max_requests=draw(st.sampled_from([0, 0, 0, 1, 3])),
        rate_limit_window_steps=draw(st.integers(1, 20)),
        # vLLM's caps at the door (often off), SLO targets in ms (a step is ~6 ms with the default costs) and shedding
        max_num_queued_reqs=draw(st.sampled_from([None, None, None, 0, 1, 2, 4, 8])),
        max_num_queued_tokens=draw(st.sampled_from([None, None, None, 1, 12, 40])),
        ttft_slo_ms=draw(st.sampled_from([0.0, 0.0, 15.0, 40.0, 120.0])),
        tbt_slo_ms=draw(st.sampled_from([0.0, 0.0, 8.0, 30.0])),
        shed_past_ttft_slo=draw(st.booleans()),
        seed=draw(st.integers(0, 3)),
        max_steps=5000,
    )


@st.composite
def scenarios(draw, policies: tuple[str, ...] = ALL_POLICIES,
              timed: bool = False) -> tuple[EngineConfig, list[RequestSpec]]:
    """A workload and a configuration; usually the pool is sized under pressure: big enough for the largest request
    alone, at most half of what all of them need together, so preemptions are frequent. ``timed``: some requests
    may arrive by the clock (``requests``)."""
    reqs = draw(requests(timed=timed))
    cfg = draw(configs(policies))
    if draw(st.integers(0, 3)):  # 3 times in 4
        need = [r.max_blocks(cfg) for r in reqs]
        lo = max(need)
        cfg = cfg.replace(num_blocks=draw(st.integers(lo, max(lo, sum(need) // 2))))
    return cfg, reqs
