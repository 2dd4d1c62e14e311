"""The Fairness lesson without Streamlit: VTC's charges and lift checked by hand on a one-slot engine, the article's
rate-limit claim, the lesson's knobs, variants, sweeps and notices, and its chart builders. (The fairness metrics
themselves: tests/sim/test_fairness_metrics.py.)"""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys

import plotly.graph_objects as go
import pytest

from lessons.fairness import clients as fairness_clients
from lessons.fairness import lesson, notices, stats
from sim import metrics, presets, simulate
from sim.config import Policy
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import ClientSpec, WorkloadSpec, generate
from tests.sim.factories import RETURNING, one_slot
from tests.trace_checks import assert_trace_unchanged
from ui import theme
from ui.charts import fairness as fc
from ui.theme import ChartStyle

STYLE = ChartStyle()
THEME_COLORS = {v for k, v in vars(theme).items() if k.isupper() and isinstance(v, str) and v.startswith("#")}


def first_scheduled(trace: Trace) -> dict[str, int]:
    return dict(zip(trace.request_ids, trace.requests["first_scheduled_step"].tolist(), strict=True))


# ---- the counter charges (their arithmetic: tests/sim/test_policies.py) ------------------------------------------
def test_fcfs_keeps_the_counters_too_without_using_them():
    # The lift example under FCFS: arrival order (a2 before b1, which VTC reverses: see the lift test below),
    # yet both clients' counters are charged as under VTC, and b returns from idle without a lift.
    t = simulate(one_slot(policy="fcfs"), RETURNING)
    assert first_scheduled(t) == {"a1": 0, "a2": 6, "b1": 8, "b2": 10}
    counters = t.clients["client_counters"]
    assert counters[3].tolist() == [12, 0]  # b has arrived, its counter stays at 0
    assert counters[-1].tolist() == [24, 16]  # a: 4 + 6 * 2 + 4 + 2 * 2; b: 2 * (4 + 2 * 2)


# ---- the lift -----------------------------------------------------------------------------------------------------
def test_lift_raises_a_returning_client_to_the_lowest_waiting_counter():
    # a's counter: 4 + 2 = 6 at step 0, +2 a step -> 10 after step 2. b arrives at step 3 with a2 still waiting:
    # b's counter is lifted from 0 to a's 10 before the step's charges. At step 6 b (10) goes before a2 (16):
    # b1 -> 10 + 4 + 2 = 16, 18. Step 8: a2 (16) before b2 (18). Step 10: b2.
    t = simulate(one_slot(), RETURNING)
    counters = t.clients["client_counters"]
    assert counters[2].tolist() == [10, 0] and counters[3].tolist() == [12, 10]
    assert t.clients["client_service"][3].tolist() == [12, 0]  # the lift is not service
    assert first_scheduled(t) == {"a1": 0, "a2": 8, "b1": 6, "b2": 10}


def test_without_the_lift_the_returning_client_spends_its_banked_credit():
    # LCF: b stays at 0, so both of b's requests go first (b1 at 6 -> 6, 8; b2 at 8 -> 14, 16), a2 waits to 10.
    t = simulate(one_slot(policy="lcf"), RETURNING)
    assert t.clients["client_counters"][3].tolist() == [12, 0]
    assert first_scheduled(t) == {"a1": 0, "a2": 10, "b1": 6, "b2": 8}


def test_with_nobody_else_waiting_the_lift_goes_to_the_last_client_to_leave():
    # a1 alone (a2 dropped): when b arrives at step 3 no other client has a request waiting; a left the queue last
    # (a1's admission), so b rises to a's counter as it was then (10), as the VTC paper's Algorithm 2 does.
    t = simulate(one_slot(), [r for r in RETURNING if r.request_id != "a2"])
    assert t.clients["client_counters"][3].tolist() == [12, 10]


def test_lesson_finds_the_lift_and_the_starvation():
    vtc, lcf = simulate(one_slot(), RETURNING), simulate(one_slot(policy="lcf"), RETURNING)
    lift = stats.fairness_stats(vtc)["lifts"]
    assert (lift["count"], lift["step"], lift["client"], lift["amount"], lift["before"]) == (1, 3, 1, 10.0, 0.0)
    assert stats.fairness_stats(lcf)["lifts"] == {"count": 0}
    # a2 waits from step 0 with nothing of a's admitted: to step 8 under VTC, to step 10 under LCF (a1 was admitted
    # at step 0, so the stretch starts at step 1).
    assert stats.fairness_stats(vtc)["longest_starvation_steps"][0] == 7
    assert stats.fairness_stats(lcf)["longest_starvation_steps"][0] == 9


# ---- the article's claims -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def article() -> dict[str, stats.Run]:
    p = presets.get("article_fairness")
    return {r.label: r for r in _runs(p, p.scenario)}


def _runs(preset, scenario, chosen=None, lift=True) -> list[stats.Run]:
    chosen = chosen or [label for label, _ in preset.variants]
    variants = lesson.variants(preset, scenario, {"policies": chosen, "lift": lift})
    make = stats.run_maker(_measure)  # the records the page builds, without Streamlit
    return [make(label, sc, _run(sc), _measure(sc, metrics.summary)) for label, sc in variants]


_CACHE: dict = {}


def _run(scenario: Scenario) -> Trace:
    key = (scenario.config, scenario.requests)
    if key not in _CACHE:
        _CACHE[key] = simulate(scenario.config, scenario.requests)
    return _CACHE[key]


def _measure(scenario: Scenario, fn, *args, trace=None):
    return fn(_run(scenario) if trace is None else trace, *args)


def _client(run: stats.Run, client: str) -> dict:
    return next(c for c in run.clients if c["client"] == client)


def test_rate_limit_loses_throughput_vtc_keeps_it_and_b_waits_less(article):
    fcfs, limited, vtc = article["FCFS"], article["Rate limit"], article["VTC"]
    t0 = fcfs.summary["throughput_tok_s"]
    # The VTC paper's shape: a tight limit leaves well under half the throughput (they measured ~780 -> ~340).
    assert limited.summary["throughput_tok_s"] < 0.45 * t0
    assert limited.summary["num_rejected"] > 0
    assert set(limited.summary["rejected_by_reason"]) == {"rate_limited"}
    assert vtc.summary["throughput_tok_s"] == pytest.approx(t0, rel=0.02)
    assert vtc.summary["num_rejected"] == 0
    # ... and B, the trickle, stops waiting behind A's wall.
    assert _client(vtc, "B")["mean_finish_ms"] < 0.5 * _client(fcfs, "B")["mean_finish_ms"]
    assert _client(vtc, "B")["mean_queue_ms"] < 0.1 * _client(fcfs, "B")["mean_queue_ms"]
    # The limit barely touches B (its trickle is under the limit) while it turns most of A away.
    assert _client(limited, "B")["num_rejected"] <= 3 < 200 < _client(limited, "A")["num_rejected"]


def test_vtc_keeps_the_gap_under_the_bound_and_fcfs_does_not(article):
    assert article["VTC"].stats["gap"] < 0.05 * article["VTC"].stats["bound"]
    assert article["FCFS"].stats["gap"] > article["FCFS"].stats["bound"]
    assert article["VTC"].stats["fair_index"] > 0.95 > 0.8 > article["FCFS"].stats["fair_index"]


def test_limit_sweep_rises_toward_fcfs(article):
    p = presets.get("rate_limits")
    sweep = stats.limit_sweep(p.scenario, stats.sweep_values(p, "limit_sweep", 10), _measure)
    assert 10 in sweep["x"] and sweep["x"] == sorted(sweep["x"])
    throughput = [pt["throughput"] for pt in sweep["points"]]
    rejected = [pt["num_rejected"] for pt in sweep["points"]]
    assert throughput == sorted(throughput) and rejected == sorted(rejected, reverse=True)
    t0 = article["FCFS"].summary["throughput_tok_s"]
    assert throughput[0] < 0.2 * t0 and throughput[-1] > 0.9 * t0
    # The point at the page's limit is the 'Rate limit' run itself.
    assert sweep["points"][sweep["x"].index(10)]["throughput"] == article["Rate limit"].summary["throughput_tok_s"]


def test_weighted_vtc_splits_service_by_the_weights():
    p = presets.get("weighted_vtc")
    runs = {r.label: r for r in _runs(p, p.scenario)}
    for label, ratio in (("VTC 1:2", 2.0), ("VTC 1:1", 1.0)):
        a, b = runs[label].stats["tokens_all_waiting"]
        assert b / a == pytest.approx(ratio, rel=0.05), label


def test_output_weight_moves_the_waiting_between_prefill_and_decode_heavy_clients():
    p = presets.get("prefill_vs_decode")
    vtc = next(r for r in _runs(p, p.scenario) if r.config.policy is Policy.VTC)
    sweep = stats.weight_sweep(vtc.scenario, (0.5, 16.0), _measure)
    (a_low, b_low), (a_high, b_high) = (pt["mean_finish_ms"] for pt in sweep["points"])
    assert a_high < 0.5 * a_low and b_high > b_low  # A's long prompts look cheap once output tokens cost more


# ---- knobs, clients, variants -------------------------------------------------------------------------------------
def _values(knobs, **changes) -> dict:
    values = {k.key: k.default for k in knobs}
    values.update(changes)
    return values


def test_knobs_show_only_what_the_preset_uses():
    keys = {key: [k.key for k in lesson.knobs(p, p.scenario, False)]
            for key, p in presets.all_presets().items() if p.lesson == "fairness"}
    assert {"limit", "limit_window", "w_in", "w_out", "lift"} <= set(keys["article_fairness"])
    assert "lift" not in keys["returning_idle"] and "limit" not in keys["returning_idle"]
    assert "limit" in keys["rate_limits"] and "w_out" in keys["prefill_vs_decode"]
    for k in keys.values():
        assert k[0] == "policies" and k[-2:] == ["window", "unit"]


def test_untouched_client_knobs_keep_the_preset_workload_exactly():
    for p in presets.presets_for("fairness"):
        wl = fairness_clients.as_shares(p.scenario.workload)
        specs = fairness_clients.client_specs(wl, len(wl.clients))
        values = {s.client_id: _values(fairness_clients.client_knobs(s, wl, p.scenario.config)) for s in specs}
        assert fairness_clients.apply_clients(wl, specs, values) == p.scenario.workload, p.key
        assert fairness_clients.apply_client_weights(p.scenario.config, specs, values) is p.scenario.config


def test_client_knobs_change_shares_patterns_and_weights():
    p = presets.get("article_fairness")
    wl = p.scenario.workload
    specs = fairness_clients.client_specs(wl, 3)
    assert [s.client_id for s in specs] == ["A", "B", "C"]
    assert specs[2].share == specs[1].share and specs[2].stop_step is None
    values = {s.client_id: _values(fairness_clients.client_knobs(s, wl, p.scenario.config)) for s in specs}
    values["B"].update(B_share=30, B_on=100, B_off=300, B_weight=2.0)
    new = fairness_clients.apply_clients(wl, specs, values)
    assert [c.share for c in new.clients] == [0.9, 0.3, 0.1]
    assert (new.clients[1].on_steps, new.clients[1].off_steps) == (100, 300)
    config = fairness_clients.apply_client_weights(p.scenario.config, specs, values)
    assert config.client_weight("B") == 2.0 and config.client_weight("A") == 1.0
    # Shares are normalised: 90 + 30 + 10 -> 69%, 23%, 8%.
    described = fairness_clients.describe_clients(new)
    assert "**B** 23%" in described and "100 on / 300 off" in described


def test_clients_keep_their_colours_whoever_sends_first():
    p = presets.get("article_fairness")
    wl = p.scenario.workload.replace(clients=(*p.scenario.workload.clients, ClientSpec("C", share=0.3),
                                              ClientSpec("D", share=0.3)))
    scenario = dataclasses.replace(p.scenario, workload=wl, requests=tuple(generate(wl)))
    assert [r.client_id for r in scenario.requests[:3]] != ["A", "B", "C"]
    ordered = fairness_clients.in_client_order(scenario)
    trace = simulate(ordered.config, ordered.requests)
    assert trace.client_ids == ["A", "B", "C", "D"]
    assert sorted(ordered.requests, key=lambda r: r.request_id) == sorted(scenario.requests, key=lambda r: r.request_id)
    assert fairness_clients.in_client_order(p.scenario) is p.scenario  # already in order: untouched, same cache key


def test_as_shares_converts_rates_to_the_same_arrivals():
    wl = WorkloadSpec(num_requests=60, rate_per_step=1.0, clients=(ClientSpec("A", rate_per_step=0.3),
                                                                    ClientSpec("B", rate_per_step=0.1)), seed=4)
    shares = fairness_clients.as_shares(wl)
    assert shares.rate_per_step == pytest.approx(0.4)
    assert [c.share for c in shares.clients] == pytest.approx([0.75, 0.25])
    assert [(r.arrival_step, r.client_id) for r in generate(shares)] == \
        [(r.arrival_step, r.client_id) for r in generate(wl)]


def test_variant_labels_say_what_the_knobs_changed():
    p = presets.get("weighted_vtc")
    base = p.scenario.with_config(client_weights=(("B", 3.0),), output_weight=4.0)
    labels = [label for label, _ in lesson.variants(p, base, {"policies": ["VTC 1:2", "VTC 1:1", "FCFS"]})]
    assert labels == ["VTC 1:2 (weights A 1 : B 3, in 1 : out 4)", "VTC 1:1 (in 1 : out 4)", "FCFS"]
    a = presets.get("article_fairness")
    off = lesson.variants(a, a.scenario, {"policies": ["VTC"], "lift": False})
    assert off[0][0] == "VTC (no lift)" and off[0][1].config.policy is Policy.LCF


def test_apply_sets_the_limit_and_the_charges():
    p = presets.get("article_fairness")
    cfg = lesson.apply(p.scenario.config, _values(lesson.knobs(p, p.scenario, False), limit=4, limit_window=50,
                                                  w_in=0.5, w_out=3.0))
    assert (cfg.rate_limit_max_requests, cfg.rate_limit_window_steps) == (4, 50)
    assert (cfg.input_weight, cfg.output_weight) == (0.5, 3.0)


# ---- notices and tables -------------------------------------------------------------------------------------------
def test_article_notices_quote_the_runs(article):
    runs = list(article.values())
    text = " ".join(lesson.notices(runs, "steps"))
    fcfs_b, vtc_b = _client(article["FCFS"], "B")["mean_finish_ms"], _client(article["VTC"], "B")["mean_finish_ms"]
    assert f"from {fcfs_b:,.0f} ms to {vtc_b:,.0f} ms" in text
    t0, t1 = article["FCFS"].summary["throughput_tok_s"], article["Rate limit"].summary["throughput_tok_s"]
    assert f"throughput fell from {t0:,.0f} to {t1:,.0f} tokens/s ({t1 / t0:.0%} of FCFS's)" in text
    assert "FCFS went past it" in text and "lifted a returning client's counter" in text


def _paper_sentence(runs) -> list[str]:
    return [t for t in lesson.notices(runs, "steps") if t.startswith("The VTC paper measured")]


def test_article_notice_sets_the_papers_figure_beside_the_simulators(article):
    paper = notices.PAPER_RATE_LIMIT
    assert (paper.unlimited_tok_s, paper.limited_tok_s, f"{paper.kept:.0%}") == (780, 340, "44%")
    t0, t1 = article["FCFS"].summary["throughput_tok_s"], article["Rate limit"].summary["throughput_tok_s"]
    [sentence] = _paper_sentence(list(article.values()))
    assert "a fall from ~780 to ~340 tokens/s" in sentence
    assert f"the simulator's {t0:,.0f} and {t1:,.0f} tokens/s come from its own cost model" in sentence
    assert f"compare the share kept ({t1 / t0:.0%} here, ~44% in the paper), not the tokens/s" in sentence
    assert f"{t1 / t0:.0%}" == "42%"  # (the simulator's own share, read from the runs above)


@pytest.mark.parametrize(("changes", "shown"), [
    ({"rate_limit_max_requests": 12}, False),  # another limit: the paper's figure is not this one
    ({"rate_limit_window_steps": 300}, False),
    ({"num_blocks": 800}, False),  # another pool
    ({"max_num_seqs": 16}, False),
    ({"output_weight": 3.0, "input_weight": 0.5}, True),  # VTC's charges order neither FCFS nor the limited run
])
def test_papers_figure_only_beside_the_papers_setting(changes, shown):
    p = presets.get("article_fairness")
    runs = _runs(p, p.scenario.with_config(**changes), chosen=["FCFS", "Rate limit"])
    assert any("throughput fell from" in t for t in lesson.notices(runs, "steps"))  # (the limit still costs throughput)
    assert bool(_paper_sentence(runs)) is shown


def test_papers_figure_not_beside_another_workload():
    p = presets.get("article_fairness")
    fewer = dataclasses.replace(p.scenario, requests=p.scenario.requests[:-1])
    runs = _runs(p, fewer, chosen=["FCFS", "Rate limit"])
    assert any("throughput fell from" in t for t in lesson.notices(runs, "steps"))
    assert _paper_sentence(runs) == []
    # The rate_limits preset runs the same setting at its default limit: the same runs, so the same sentence.
    r = presets.get("rate_limits")
    assert len(_paper_sentence(_runs(r, r.scenario))) == 1


def test_returning_notice_compares_the_lift_with_lcf():
    p = presets.get("returning_idle")
    runs = _runs(p, p.scenario)
    text = " ".join(lesson.notices(runs, "steps"))
    lcf, vtc = runs[0].stats["longest_starvation_steps"][0], runs[1].stats["longest_starvation_steps"][0]
    assert lcf > 3 * vtc
    assert f"none admitted for up to {lcf:,} steps, against {vtc:,} under VTC (lift)" in text


def test_light_client_notice_quotes_the_other_clients_requests_pooled():
    # Three clients (the page's "Number of clients" at 3: C a copy of B): C is the light client, and "the other
    # clients'" time is the mean finish time of A's and B's requests together, not the mean of A's and B's means
    # (which weighs B's 30-odd requests like A's 240).
    p = presets.get("article_fairness")
    wl = p.scenario.workload
    specs = fairness_clients.client_specs(wl, 3)
    values = {s.client_id: _values(fairness_clients.client_knobs(s, wl, p.scenario.config)) for s in specs}
    scenario = fairness_clients.in_client_order(dataclasses.replace(
        p.scenario, workload=(new := fairness_clients.apply_clients(wl, specs, values)), requests=tuple(generate(new))))
    fcfs = _runs(p, scenario, chosen=["FCFS"])[0]
    t = fcfs.trace
    c = t.client_ids.index("C")
    others = metrics.served_mask(t) & (t.requests["client"] != c)
    pooled = float(metrics.request_latencies(t)["finish_ms"][others].mean())
    means = [row["mean_finish_ms"] for row in fcfs.clients if row["client"] != "C"]
    assert f"{pooled:,.0f}" != f"{sum(means) / 2:,.0f}"  # (the two readings differ here)
    sentence = lesson.notices([fcfs], "steps")[0]
    assert sentence.startswith("Under FCFS, C sends only") and f"the other clients' ({pooled:,.0f} ms)" in sentence


def test_notices_quote_no_finish_time_when_nothing_was_served():
    # An 8-block pool turns every request away (each is larger than 128 tokens): no client has a finish time, and
    # no sentence quotes one as "—" ("B's mean finish time stayed at —", "they took — on average").
    for key in ("article_fairness", "prefill_vs_decode"):
        p = presets.get(key)
        runs = _runs(p, p.scenario.with_config(num_blocks=8))
        assert all(r.summary["num_served"] == 0 for r in runs)
        weights = sorted({0.5, 16.0, runs[0].config.output_weight})
        vtc = next(r for r in runs if r.config.policy is Policy.VTC)
        sweep = stats.weight_sweep(vtc.scenario, weights, _measure) if key == "prefill_vs_decode" else None
        text = " ".join(lesson.sweep_notices(runs, None, sweep) + lesson.notices(runs, "steps"))
        assert "—" not in text and "mean finish time" not in text and "they took" not in text, key


def test_notices_survive_a_single_run_and_one_client():
    p = presets.get("article_fairness")
    assert lesson.notices(_runs(p, p.scenario, chosen=["VTC"]), "steps")  # no FCFS baseline: still something to say
    single = dataclasses.replace(p.scenario, requests=tuple(r for r in p.scenario.requests if r.client_id == "A"))
    runs = _runs(p, single)
    lesson.notices(runs, "steps")  # must not raise
    assert stats.light_client(runs[0]) is None


def test_tables(article):
    runs = list(article.values())
    clients = stats.client_table(runs)
    assert len(clients) == 6 and list(clients["client"][:2]) == ["A", "B"]
    policies = stats.policy_table(runs)
    assert list(policies.columns) == ["FCFS", "Rate limit", "VTC"]
    assert policies.loc["rejected (requests)", "Rate limit"] == article["Rate limit"].summary["num_rejected"]
    assert "mean finish: A " in lesson.run_caption(runs[0])


# ---- charts -------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def figures(article) -> dict[str, go.Figure]:
    traces = {label: run.trace for label, run in article.items()}
    p = presets.get("rate_limits")
    sweep = stats.limit_sweep(p.scenario, stats.sweep_values(p, "limit_sweep", 10), _measure)
    refs = stats.sweep_references(list(article.values()), _measure)
    pvd = presets.get("prefill_vs_decode")
    vtc = next(r for r in _runs(pvd, pvd.scenario) if r.config.policy is Policy.VTC)
    wsweep = stats.weight_sweep(vtc.scenario, (0.5, 2.0, 8.0), _measure)
    return {
        "counters": fc.counters_by_policy(traces, STYLE),
        "rates": fc.client_rates_by_policy(traces, STYLE, window_steps=50, x_unit="ms"),
        "total": fc.total_throughput(traces, STYLE),
        "limit_sweep": fc.limit_sweep_chart(sweep, refs, STYLE, light_client=1, chosen=10),
        "weight_sweep": fc.weight_sweep_chart(wsweep, {"FCFS": refs["FCFS"]}, STYLE, chosen=2.0),
        "gap": fc.service_gap_chart(traces, STYLE),
    }


def test_counters_chart_one_panel_per_policy_and_lift_markers(figures, article):
    fig = figures["counters"]
    panel_titles = [a.text for a in fig.layout.annotations]
    assert panel_titles == ["FCFS", "Rate limit", "VTC"]
    lines = [t for t in fig.data if t.mode == "lines"]
    assert [t.name for t in lines if t.showlegend] == ["client A", "client B"]
    assert {t.line.color for t in lines} == {theme.client_color(0), theme.client_color(1)}
    lifts, legend_entry = [t for t in fig.data if t.mode == "markers"]  # only VTC lifts, then the legend's
    assert lifts.xaxis == "x3" and len(lifts.x) == article["VTC"].stats["lifts"]["count"]
    assert legend_entry.name == "lift (counter raised)" and legend_entry.marker.color == theme.LIGHT_GREY
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis.title.text == "virtual counter (weighted tokens)"


def test_rates_and_total_throughput_have_units(figures, article):
    assert figures["rates"].layout.yaxis.title.text == "output (tokens/s, last 50 steps)"
    # One x title for the row of three panels, under the middle one (three ran together in a narrow chart).
    assert [figures["rates"].layout[f"xaxis{k}"].title.text for k in ("", "2", "3")] == ["", "time (ms)", ""]
    total = figures["total"]
    assert total.data[0].name == f"FCFS (mean {article['FCFS'].summary['throughput_tok_s']:,.0f} tokens/s)"
    assert [t.line.color for t in total.data] == [theme.POLICY_COLORS[k] for k in ("fcfs", "rate_limit", "vtc")]
    assert total.layout.yaxis.title.text == "output (tokens/s, last 100 steps)"


def test_policy_colours_stay_clear_of_client_colours():
    clients = {theme.client_color(0), theme.client_color(1)}
    for key in ("returning_idle", "weighted_vtc", "article_fairness"):
        p = presets.get(key)
        colors = fc.policy_colors({r.label: r.trace for r in _runs(p, p.scenario)})
        assert len(set(colors.values())) == len(colors) and not set(colors.values()) & clients, (key, colors)
    p = presets.get("returning_idle")
    assert fc.policy_colors({r.label: r.trace for r in _runs(p, p.scenario)})["LCF (no lift)"] == theme.PURPLE


def test_limit_sweep_chart(figures):
    fig = figures["limit_sweep"]
    assert fig.layout.xaxis.type == "log" and "per 200 steps" in fig.layout.xaxis3.title.text
    assert [fig.layout[f"yaxis{k}"].title.text for k in ("", "2", "3")] == [
        "total output (tokens/s)", "client B's mean finish (ms)", "rejected (requests)"]
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names[0] == "FCFS + rate limit" and names[1].startswith("FCFS, no limit (")
    assert any(n.startswith("VTC, no limit") for n in names)
    assert [s.x0 for s in fig.layout.shapes] == [10, 10, 10]  # the chosen limit, through all three panels
    assert fig.layout.annotations[0].x == pytest.approx(1.0)  # annotations on a log axis take log10


def test_weight_sweep_chart(figures):
    fig = figures["weight_sweep"]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.title.text == "mean finish time (ms)"
    assert [t.name for t in fig.data if "VTC" in t.name] == ["client A, VTC", "client B, VTC"]


def test_gap_chart_draws_the_bound(figures, article):
    fig = figures["gap"]
    bound = article["VTC"].stats["bound"]
    assert sorted(s.y0 for s in fig.layout.shapes) == [-bound, bound]
    assert fig.data[1].name == "Rate limit (never both waiting)"
    assert fig.data[2].name == f"VTC (largest gap {article['VTC'].stats['gap']:,.0f})"
    assert fig.layout.yaxis.title.text == "A minus B (weighted tokens)"


def test_gap_chart_precomputed_matches_computed(article):
    traces = {label: run.trace for label, run in article.items()}
    fresh = fc.service_gap_chart(traces, STYLE)
    cached = fc.service_gap_chart(traces, STYLE, precomputed=stats.gap_inputs(list(article.values())))
    assert fresh.to_json() == cached.to_json()


def test_builders_use_theme_colours_only(figures):
    for name, fig in figures.items():
        for trace in fig.data:
            for color in (getattr(trace.line, "color", None), getattr(trace.marker, "color", None)):
                colors = color if isinstance(color, tuple | list) else [color]
                assert all(c is None or c in THEME_COLORS for c in colors), (name, trace.name, color)


def test_builders_do_not_mutate_their_inputs():
    # Fresh runs, copied before any builder sees them (the module's `article` runs were drawn by other tests).
    p = presets.get("article_fairness")
    runs = _runs(p, p.scenario)
    traces = {run.label: run.trace for run in runs}
    before = copy.deepcopy(traces)
    fc.counters_by_policy(traces, STYLE)
    fc.client_rates_by_policy(traces, STYLE, window_steps=50, x_unit="ms")
    fc.total_throughput(traces, STYLE)
    fc.service_gap_chart(traces, STYLE)
    fc.service_gap_chart(traces, STYLE, precomputed=stats.gap_inputs(runs))
    for label, trace in traces.items():
        assert_trace_unchanged(before[label], trace)


def test_presentation_style_scales_up():
    p = presets.get("weighted_vtc")
    traces = {r.label: r.trace for r in _runs(p, p.scenario)}
    big = fc.counters_by_policy(traces, ChartStyle(presentation=True))
    small = fc.counters_by_policy(traces, STYLE)
    assert big.layout.height > small.layout.height and big.layout.font.size > small.layout.font.size
    assert big.data[0].line.width > small.data[0].line.width


def test_bad_arguments_are_value_errors(article):
    traces = {label: run.trace for label, run in article.items()}
    with pytest.raises(ValueError, match="window_steps"):
        fc.client_rates_by_policy(traces, STYLE, window_steps=0)
    with pytest.raises(ValueError, match="x_unit"):
        fc.counters_by_policy(traces, STYLE, x_unit="s")
    with pytest.raises(ValueError, match="clients 0 and 2"):
        fc.service_gap_chart(traces, STYLE, b=2)


def test_charts_never_import_streamlit(repo_root):
    # (that no lesson module calls Streamlit is tests/test_lesson_registry.py's, for every lesson)
    code = "import sys, ui.charts.fairness; assert 'streamlit' not in sys.modules, 'streamlit imported'"
    subprocess.run([sys.executable, "-c", code], cwd=repo_root, check=True)


def test_lcf_keeps_its_theme_colour_clear_of_the_first_clients():
    c = fc.policy_colors({"LCF": simulate(one_slot(policy="lcf"), RETURNING)})["LCF"]
    assert c == theme.POLICY_COLORS["lcf"] and c not in (theme.client_color(0), theme.client_color(1))
