"""Every preset runs for each of its variants, and shows what its lesson says it shows.

Runs are cached per (preset, variant) for this module. Invariants are checked after every step for the small
presets always; the workload presets (100+ requests, thousands of steps, 0.3-1.5 s each with checks on this 2-core
machine, ~20 s in all) are checked only in CI (CI=true) or with SCHEDLAB_SLOW_TESTS=1, and otherwise run once
without the per-step checks.
"""

from __future__ import annotations

import os
from functools import cache

import numpy as np
import pytest

from sim import Engine, RequestStatus, Trace, fairness_metrics, metrics, presets

RUN_SLOW = os.environ.get("CI") == "true" or os.environ.get("SCHEDLAB_SLOW_TESTS") == "1"
ALL = presets.all_presets()
VARIANTS = [(key, label) for key, p in ALL.items() for label, _ in p.variants]


def _is_large(key: str) -> bool:
    return len(ALL[key].scenario.requests) > 50


@cache
def trace_of(key: str, label: str, check_invariants: bool = False) -> Trace:
    p = ALL[key]
    config = p.scenario.config.replace(**dict(p.variants)[label])
    return Engine(config, p.scenario.requests, name=p.scenario.name, check_invariants=check_invariants).run()


def _distinct(variants):
    """Variants that are not the same run as an earlier one (two presets may share a scenario and an override)."""
    seen, out = set(), []
    for key, label in variants:
        p = ALL[key]
        run_key = (p.scenario.requests, p.scenario.config.replace(**dict(p.variants)[label]))
        if run_key not in seen:
            seen.add(run_key)
            out.append((key, label))
    return out


SMALL = _distinct([v for v in VARIANTS if not _is_large(v[0])])
LARGE = _distinct([v for v in VARIANTS if _is_large(v[0])])


def _ids(variants):
    return [f"{k}-{label}" for k, label in variants]


def test_presets_are_there():
    # The article's examples lead their lessons.
    assert {"article_hol", "article_fairness", "article_abandon", "toy_pool"} <= set(ALL)
    for lesson in ("queueing", "fairness", "cancellation", "preemption"):
        assert presets.presets_for(lesson), lesson
    with pytest.raises(KeyError, match="preset 'nope' is not one of: article_hol"):
        presets.get("nope")


@pytest.mark.parametrize(("key", "label"), VARIANTS, ids=_ids(VARIANTS))
def test_every_variant_runs_and_ends_every_request(key, label):
    t = trace_of(key, label)
    assert all(RequestStatus(int(s)).is_finished for s in t.requests["status"])
    assert all(t.finish_reason)
    assert metrics.summary(t)["num_served"] > 0


@pytest.mark.parametrize(("key", "label"), SMALL, ids=_ids(SMALL))
def test_small_presets_keep_the_invariants(key, label):
    checked = trace_of(key, label, check_invariants=True)
    assert checked.request_records() == trace_of(key, label).request_records()


@pytest.mark.skipif(not RUN_SLOW, reason="slow (~20 s of checks in all): set SCHEDLAB_SLOW_TESTS=1 (CI runs it)")
@pytest.mark.parametrize(("key", "label"), LARGE, ids=_ids(LARGE))
def test_workload_presets_keep_the_invariants(key, label):
    checked = trace_of(key, label, check_invariants=True)
    assert checked.request_records() == trace_of(key, label).request_records()


# ---- what each lesson claims ------------------------------------------------------------------------------------
def _rec(t: Trace, request_id: str) -> dict:
    return t.request_records()[t.request_ids.index(request_id)]


def _client(t: Trace, client: str) -> dict:
    return next(r for r in metrics.per_client(t) if r["client"] == client)


def test_starvation_preset_starves_the_long_request_without_the_guard():
    # One slot; "long" (600 tokens) and s0 arrive at step 1, then a 40-step short every 10 steps (120 of them).
    # SJF: the shorts run back to back from step 1 (120 x 40 = 4,800 steps): long starts at 4,801.
    # With the guard (200 steps) it is promoted at step 201, when s4 (161-200) has just finished. FCFS: at once.
    started = {label: _rec(trace_of("starvation", label), "long")["first_scheduled_step"]
               for label, _ in ALL["starvation"].variants}
    assert started == {"SJF, no guard": 4801, "SJF + guard": 201, "FCFS": 1}


def test_priority_lanes_let_chat_jump_the_queue_without_preempting():
    fcfs, prio = trace_of("priority_lanes", "FCFS"), trace_of("priority_lanes", "priority")
    assert _client(prio, "chat")["mean_queue_ms"] < _client(fcfs, "chat")["mean_queue_ms"]
    assert metrics.summary(prio)["num_preemptions"] == metrics.summary(fcfs)["num_preemptions"] == 0


def test_article_fairness_vtc_serves_the_trickle_client_quickly():
    fcfs, vtc = trace_of("article_fairness", "FCFS"), trace_of("article_fairness", "VTC")
    assert _client(vtc, "B")["mean_queue_ms"] < _client(fcfs, "B")["mean_queue_ms"] / 5
    limited = metrics.summary(trace_of("article_fairness", "Rate limit"))
    assert limited["num_rejected"] > 0 and set(limited["rejected_by_reason"]) == {"rate_limited"}


def test_returning_idle_client_starves_the_other_without_the_lift():
    lcf, vtc = trace_of("returning_idle", "LCF (no lift)"), trace_of("returning_idle", "VTC (lift)")
    assert _client(lcf, "B")["mean_queue_ms"] < _client(vtc, "B")["mean_queue_ms"]
    assert _client(lcf, "A")["mean_queue_ms"] > _client(vtc, "A")["mean_queue_ms"]


@pytest.mark.parametrize(("label", "ratio"), [("VTC 1:2", 2.0), ("VTC 1:1", 1.0)])
def test_weighted_vtc_gives_b_its_weight_while_both_are_backlogged(label, ratio):
    t = trace_of("weighted_vtc", label)
    both = (fairness_metrics.client_backlog(t) > 0).all(axis=1)
    tokens = (t.clients["client_output_tokens"] + t.clients["client_prefill_tokens"])[both].sum(axis=0)
    assert tokens[1] / tokens[0] == pytest.approx(ratio, rel=0.05)


def test_abort_settings_order_the_waste():
    wasted = [metrics.summary(trace_of("impatient_users", label))["wasted_tokens"]
              for label in ("abort at once", "notices after 50 steps", "no abort")]
    assert wasted[0] == 0 < wasted[1] < wasted[2]


def test_stops_preset_waste():
    # Every step: only the 12 stop-string answers generate one extra token. At max_tokens: every answer runs to 512,
    # wasting 512 - natural length, natural = 60 + (37 i mod 240).
    assert metrics.summary(trace_of("stops", "check every step"))["wasted_tokens"] == 12
    expected = sum(512 - (60 + (i * 37) % 240) for i in range(24))
    assert metrics.summary(trace_of("stops", "stop at max_tokens"))["wasted_tokens"] == expected == 8316


def test_toy_pool_victims():
    # FCFS: the requests admitted last (D at 113, C at 145) are preempted and block E until step 200 (vLLM's
    # decisions, see c_preempt_fcfs). Priority: the lowest priorities (C = 2 at 113, A = 1 at 131); E (priority 0)
    # gets in at 114.
    fcfs, prio = trace_of("toy_pool", "FCFS victim"), trace_of("toy_pool", "priority victim")
    assert {r["id"]: r["preempted_at_steps"] for r in fcfs.request_records() if r["preempted_at_steps"]} == {
        "C": [145], "D": [113]}
    assert _rec(fcfs, "E")["first_scheduled_step"] == 200
    assert {r["id"]: r["preempted_at_steps"] for r in prio.request_records() if r["preempted_at_steps"]} == {
        "A": [131], "C": [113]}
    assert _rec(prio, "E")["first_scheduled_step"] == 114


def test_prefix_cache_preset():
    off, on = trace_of("prefix_cache", "prefix caching off"), trace_of("prefix_cache", "prefix caching on")
    assert metrics.summary(off)["num_preemptions"] > 0 and metrics.summary(off)["cached_tokens"] == 0
    assert metrics.summary(on)["cached_tokens"] > 0
    assert metrics.summary(on)["finish_steps"]["mean"] < metrics.summary(off)["finish_steps"]["mean"]


def test_sizing_sweep_endpoints():
    # 1,200 blocks and 32 slots preempt; 1,600 blocks (what 32 slots grow into) or 16 slots do not.
    p = ALL["sizing"]
    sc = p.scenario

    def preemptions(**changes):
        t = Engine(sc.config.replace(**changes), sc.requests).run()
        return int(np.sum(t.requests["num_preemptions"]))

    assert preemptions() > 0
    assert preemptions(num_blocks=1600) == 0
    assert preemptions(max_num_seqs=16) == 0
    assert p.knobs["pool_sweep_blocks"][0] < 1600 < p.knobs["pool_sweep_blocks"][-1]


def test_each_preset_is_filed_under_its_own_key():
    # get() builds only the preset it is asked for, from the builder filed under that key.
    assert list(ALL) == [p.key for p in ALL.values()]
    for key in ALL:
        assert presets.get(key) == ALL[key]
    with pytest.raises(KeyError, match="preset 'nope' is not one of: article_hol, busy_server"):
        presets.get("nope")
