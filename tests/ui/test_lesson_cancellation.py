"""The Cancellation lesson without Streamlit: the article's numbers, timeouts, goodput, the KV split, the knobs and
the charts. Expected numbers are worked out by hand in the comments (Llama 3.1 8B: 131,072 B of KV per token)."""

from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from lessons.cancellation import lesson, measures
from sim import EngineConfig, RequestSpec, metrics, presets
from sim.engine import simulate
from sim.request import NO_STEP, RequestStatus, StopType
from sim.scenario import Scenario
from sim.workload import generate
from tests.trace_checks import assert_trace_unchanged
from ui import theme
from ui.charts import cancellation as charts
from ui.charts.layout import NO_FILL
from ui.theme import ChartStyle

STYLE = ChartStyle()
THEME_COLORS = {v for k, v in vars(theme).items() if k.isupper() and isinstance(v, str) and v.startswith("#")}


def defaults(preset: presets.Preset, uploaded: bool = False) -> dict:
    return {k.key: k.default for k in lesson.knobs(preset, preset.scenario, uploaded)}


def runs_of(key: str, engine: dict | None = None, **changes) -> list[lesson.Run]:
    """The preset's servers as the page builds them: knobs at their defaults unless ``changes`` says otherwise
    (``engine``: the engine panel's config fields, e.g. ``{"num_blocks": 8}``)."""
    p = presets.get(key)
    values = defaults(p) | changes
    base = dataclasses.replace(p.scenario, config=lesson.apply(p.scenario.config.replace(**(engine or {})), values))
    if base.workload is not None:
        workload = lesson.apply_workload(base.workload, values)
        base = dataclasses.replace(base, workload=workload, requests=tuple(generate(workload)))
    base = lesson.apply_requests(base, values)
    out = []
    for label, sc in lesson.variants(p, base, values):
        trace = simulate(sc.config, sc.requests)
        out.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    return out


def run_scenario(config: EngineConfig, requests: list[RequestSpec], servers: dict[str, dict]) -> list[lesson.Run]:
    out = []
    for label, changes in servers.items():
        sc = Scenario(label, config.replace(**changes), tuple(requests))
        trace = simulate(sc.config, sc.requests)
        out.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    return out


@pytest.fixture(scope="module")
def article() -> list[lesson.Run]:
    return runs_of("article_abandon")  # abort on disconnect, no abort


@pytest.fixture(scope="module")
def impatient() -> list[lesson.Run]:
    return runs_of("impatient_users")  # abort at once, notices after 50 steps, no abort


@pytest.fixture(scope="module")
def stops() -> list[lesson.Run]:
    return runs_of("stops")  # check every step, stop at max_tokens


# ---- the article: a 1,000-token answer abandoned at token 300 -------------------------------------------------------
def test_article_story_numbers(article):
    story = measures.abandon_story(article)
    assert story is not None and story.request_id == "long" and story.waiter_id == "waiting"
    # Tokens 1..300 at steps 0..299; the user leaves after token 300, the server aborts at the start of step 300.
    assert (story.tokens_read, story.abort_step) == (300, 300)
    # Without an abort: tokens 301..1000 for nobody; KV after the last step = 1 prompt + 999 fed back = 1,000 tokens.
    assert story.wasted_tokens == 700
    assert story.end_kv_tokens == 1000 and story.end_blocks == 63  # ceil(1000 / 16)
    assert round(measures.mb(story.end_kv_tokens, story.config)) == 131  # 131,072,000 B
    # With an abort: the 1 + 299 = 300 tokens it held (19 blocks) go back at step 300.
    assert story.freed_kv_tokens == 300 and story.freed_blocks == 19
    assert round(measures.mb(story.freed_kv_tokens, story.config)) == 39  # 39,321,600 B
    # The waiting request (arrived at step 1) starts at step 300 with the abort, at 1,000 without.
    assert (story.waiter_start_abort, story.waiter_start_no_abort, story.earlier_steps) == (300, 1000, 700)


def test_article_story_metrics_are_the_numbers_on_screen(article):
    values = {card.label: card.value for card in measures.story_metrics(measures.abandon_story(article))}
    assert values == {"Generated for nobody, no abort": "700 tokens", "Its KV at the end, no abort": "131 MB",
                      "Freed by the abort at step 300": "39 MB",
                      "'waiting' starts sooner by": "700 steps"}
    captions = " ".join(card.caption for card in measures.story_metrics(measures.abandon_story(article)))
    assert "63 blocks = 132 MB allocated" in captions and "19 blocks = 40 MB allocated" in captions  # 2 MiB blocks
    assert "step 299" in captions  # the user's last token


def test_article_kv_is_freed_on_the_very_next_step(article):
    aborting, keeping = article
    kv = aborting.trace.steps["kv_tokens"]
    assert (kv[299], kv[300]) == (300, 1)  # step 300 already runs the waiting request's 1-token prompt
    parts = charts.kv_parts(keeping.trace)
    abandoned = parts["held by abandoned requests"]
    # The client left at step 300: from then on the request's KV (301 after step 300 ... 1,000) is for nobody.
    assert (abandoned[299], abandoned[300], abandoned[999]) == (0, 301, 1000)
    assert parts["wanted"][299] == 300 and parts["wanted"][999] == 0
    assert "held by abandoned requests" not in charts.kv_parts(aborting.trace)


def test_article_notices(article):
    text = " ".join(lesson.notices(article, "steps"))
    assert "generated 700 tokens for nobody after the user left at token 300" in text
    assert "1,000 tokens = 131 MB (63 blocks of 16 tokens)" in text
    assert "300 tokens of KV it held (39 MB) were freed at step 300, the very next step" in text
    assert "waiting started at step 300 instead of 1,000: 700 steps earlier" in text
    assert ("the user who stayed to the end under both waited 999 steps in the queue under no abort, against 299 "
            "under abort on disconnect (700 steps more)") in text


@pytest.mark.parametrize(("leave", "freed_mb", "earlier"), [(500, 66, 500), (100, 13, 900)])
def test_article_knobs_move_the_numbers(leave, freed_mb, earlier):
    # Leaving after token k: k tokens of KV (1 prompt + k - 1 fed back) freed at step k, the waiter starts at k.
    story = measures.abandon_story(runs_of("article_abandon", leave_after_tokens=leave))
    assert (story.abort_step, story.freed_kv_tokens, story.wasted_tokens) == (leave, leave, 1000 - leave)
    assert round(measures.mb(story.freed_kv_tokens, story.config)) == freed_mb
    assert story.earlier_steps == earlier


def test_no_story_when_the_user_reads_the_whole_answer():
    runs = runs_of("article_abandon", leave_after_tokens=1000)  # disconnects at step 1000, the answer ended at 999
    assert measures.abandon_story(runs) is None
    assert all(run.summary["wasted_tokens"] == 0 for run in runs)
    assert "No server generated a token nobody read" in " ".join(lesson.notices(runs, "steps"))


# ---- goodput -----------------------------------------------------------------------------------------------------
def test_goodput_counts_only_tokens_somebody_read(article):
    for run in article:
        s, t = run.summary, run.trace
        seconds = t.steps["time_ms"][-1] / 1000
        assert s["read_tok_s"] == pytest.approx((s["output_tokens"] - s["wasted_tokens"]) / seconds)
    aborting, keeping = article
    # Both runs deliver the same 400 read tokens (300 of long, 100 of waiting); without the abort it takes
    # 1,100 steps instead of 400, so goodput falls by the ratio of the two makespans.
    assert aborting.summary["useful_tokens"] == keeping.summary["useful_tokens"] == 400
    ratio = keeping.summary["read_tok_s"] / aborting.summary["read_tok_s"]
    assert ratio == pytest.approx(aborting.trace.steps["time_ms"][-1] / keeping.trace.steps["time_ms"][-1])


def test_impatient_users_order_waste_goodput_and_waiting(impatient):
    prompt, late, never = (run.summary for run in impatient)
    assert prompt["wasted_tokens"] == 0 < late["wasted_tokens"] < never["wasted_tokens"]
    assert prompt["wasted_gpu_ms"] == 0 < late["wasted_gpu_ms"] < never["wasted_gpu_ms"]
    assert prompt["read_tok_s"] > late["read_tok_s"] > never["read_tok_s"]
    assert prompt["queue_steps"]["mean"] < late["queue_steps"]["mean"] < never["queue_steps"]["mean"]
    text = " ".join(lesson.notices(impatient, "steps"))
    assert "A server that notices after 50 steps kept" in text and "at most 50 each" in text
    assert "The waiting time others lose" in text


def test_late_detection_wastes_at_most_the_delay_per_request(impatient):
    late = impatient[1]
    r = late.trace.requests
    left = r["disconnect_step"] != NO_STEP
    assert r["num_wasted_tokens"][left].max() <= 50
    assert r["num_wasted_tokens"][~left].sum() == 0


# ---- timeouts ----------------------------------------------------------------------------------------------------
def test_timeouts_remove_waiting_requests():
    # One slot, three 100-token answers arriving at step 0, clients give up after 50 steps. Aborting: A runs steps
    # 0..49 and is dropped at step 50 with 50 tokens; B and C are dropped from the queue at step 50, never run.
    # Not aborting: all three answers are generated in full, for nobody: 50 + 100 + 100 = 250 wasted tokens.
    config = EngineConfig(num_blocks=100, max_num_seqs=1, timeout_steps=50)
    requests = [RequestSpec(x, 0, 4, 100) for x in "ABC"]
    servers = {"abort at once": {}, "no abort": {"abort_on_disconnect": False}}
    aborting, keeping = run_scenario(config, requests, servers)
    r = aborting.trace.requests
    assert (r["status"] == RequestStatus.FINISHED_ABORTED).all()
    assert r["finish_step"].tolist() == [50, 50, 50]
    assert r["first_scheduled_step"].tolist() == [0, NO_STEP, NO_STEP]
    # B and C wait through step 49; step 50 (the last) drops all three before scheduling, so nothing runs.
    waiting = aborting.trace.steps["num_waiting"]
    assert (waiting[49], waiting[50], aborting.trace.num_steps) == (2, 0, 51)
    assert measures.timed_out(aborting).tolist() == [True, True, True]
    assert keeping.summary["wasted_tokens"] == 250 and keeping.summary["num_served"] == 0
    text = " ".join(lesson.notices([aborting, keeping], "steps"))
    assert ("With a 50-step client timeout, 3 users gave up under abort at once: 2 still queued, 1 after waiting "
            "0 steps before starting; it dropped them from the queue and the batch at once.") in text
    assert "3 users gave up under no abort: 2 still queued, 1 after waiting 0 steps before starting" in text
    assert "without an abort it still generated their answers for nobody" in text
    # One user alone, queued: the sentence speaks of one.
    one = lesson.notices(run_scenario(config, requests[:2], {"abort at once": {}}), "steps")
    assert "With a 50-step client timeout, 2 users gave up under abort at once: 1 still queued, 1 after " \
           "waiting 0 steps before starting" in " ".join(one)


def test_timeout_knob_reaches_every_server():
    runs = runs_of("impatient_users", timeout=300)
    prompt, late, never = runs
    for run in runs:
        assert run.scenario.config.timeout_steps == 300
        assert measures.timed_out(run).any()
    # Aborting at once, a user who times out is gone at the deadline, queued or not; never aborting, the server
    # still finishes every timed-out answer, for nobody.
    r = prompt.trace.requests
    gone = measures.timed_out(prompt)
    assert (r["status"][gone] == RequestStatus.FINISHED_ABORTED).all()
    assert (r["finish_step"][gone] == r["arrival_step"][gone] + 300).all()
    r = never.trace.requests
    gone = measures.timed_out(never)
    assert (r["status"][gone] != RequestStatus.FINISHED_ABORTED).all() and (r["num_wasted_tokens"][gone] > 0).all()
    # FCFS under overload: the oldest request is admitted first, so users time out soon after they start, having
    # waited most of the timeout in the queue (the notice says how long).
    text = " ".join(lesson.notices(runs, "steps"))
    assert re.search(r"43 users gave up under abort at once, all after waiting \d+ steps on average before "
                     r"starting", text)
    assert re.search(r"108 users gave up under no abort: 77 still queued, 31 after waiting \d+ steps on average "
                     r"before starting", text)


def test_waiting_time_is_compared_over_the_users_who_stayed_under_every_server():
    # With a timeout, who gives up depends on the server: under no abort only the lucky few who got in quickly
    # stay, so each run's own average would flatter it. The sentences and the chart take the same users.
    runs = runs_of("impatient_users", timeout=300)
    prompt, late, never = runs
    every = measures.stayed_under_every_server(runs)
    served = [metrics.served_mask(r.trace) for r in runs]
    # Served to the end: 97 users under abort at once, 79 when it notices late, 32 under no abort (its queue is
    # clogged by work for nobody, so most users time out), and those 32 under the other two servers as well.
    assert [int(s.sum()) for s in served] == [97, 79, 32]
    assert int(every.sum()) == 32 and all((every <= s).all() for s in served)
    a = metrics.request_latencies(prompt.trace)["queue_steps"][every].mean()
    b = metrics.request_latencies(never.trace)["queue_steps"][every].mean()
    assert b - a > never.summary["queue_steps"]["mean"] - prompt.summary["queue_steps"]["mean"] + 20  # unpaired: less
    text = " ".join(lesson.notices(runs, "steps"))
    assert (f"the {every.sum()} users who stayed to the end under every server waited {b:,.0f} steps on average in "
            f"the queue under no abort, against {a:,.0f} under abort at once ({round(b) - round(a):,} steps more "
            f"each)") in text  # (the difference of the numbers shown, so that they subtract)
    waits = measures.waiting_of_the_same_users(runs)
    assert waits["no abort"]["queue_steps"]["mean"] == pytest.approx(b)
    assert {w["num_served"] for w in waits.values()} == {int(every.sum())}


def test_a_user_leaving_before_the_timeout_is_not_counted_as_a_timeout():
    config = EngineConfig(num_blocks=100, max_num_seqs=1, timeout_steps=50)
    (run,) = run_scenario(config, [RequestSpec("A", 0, 4, 100, abort_step=20)], {"abort at once": {}})
    assert measures.timed_out(run).tolist() == [False]


# ---- stops -------------------------------------------------------------------------------------------------------
def test_stops_preset_numbers(stops):
    every, at_max = stops
    assert every.summary["wasted_tokens"] == 12  # the 12 stop-string answers, one token each
    assert at_max.summary["wasted_tokens"] == 8316  # sum of 512 - natural length, natural = 60 + (37 i mod 240)
    text = " ".join(lesson.notices(stops, "steps"))
    assert "the 12 answers ending on a stop string each ran one token past their end" in text
    assert "the 12 ending on a stop token wasted 0" in text
    assert "still runs to max_tokens (512): 8,316 tokens past the ends of 24 answers" in text


def test_stop_sentences_speak_only_of_answers_that_ran():
    # An 8-block pool turns every request away on arrival: no answer ran, so none "ran one token past its end" or
    # "still runs to max_tokens" (the sentences used to say so, with "0 tokens").
    runs = runs_of("stops", engine={"num_blocks": 8})
    assert all(r.summary["num_rejected"] == 24 for r in runs)
    text = " ".join(lesson.notices(runs, "steps"))
    assert "ran one token past" not in text and "still runs to max_tokens" not in text


def test_stop_knobs():
    p = presets.get("stops")
    tokens_only = runs_of("stops", stop_marker="token")
    assert tokens_only[0].summary["wasted_tokens"] == 0  # a stop token is seen on its own step
    strings = runs_of("stops", stop_marker="string")
    assert strings[0].summary["wasted_tokens"] == 24  # every answer caught one step late
    capped = lesson.apply_requests(p.scenario, defaults(p) | {"max_tokens": 64})
    assert {r.max_tokens for r in capped.requests} == {64}
    # Natural lengths 60..299 against a limit of 64: all but two answers (60 tokens ending on a stop token, 61 on a
    # stop string) are cut at 64; the two keep their own ends where every step is checked, and run on to 64 where
    # only max_tokens is.
    every, at_max = runs_of("stops", max_tokens=64)
    natural = np.array([r.output_len for r in every.scenario.requests])
    cut = natural >= 64
    assert natural[~cut].tolist() == [60, 61]
    out = every.trace.requests["num_output_tokens"]
    assert (out[cut] == 64).all() and out[~cut].tolist() == [60, 62]  # the stop string is seen one step late
    assert every.summary["wasted_tokens"] == 1
    assert (at_max.trace.requests["num_output_tokens"] == 64).all()
    assert at_max.summary["wasted_tokens"] == (64 - 60) + (64 - 61)


def test_past_end_kv_by_hand():
    # Prompt 4, the answer ends on a stop token after 3 tokens, max_tokens 10, checked only at max_tokens: token k
    # (from 0) at step k; tokens 3..9 are past the end, and after step k the request holds 4 + k tokens of KV.
    t = simulate(EngineConfig(num_blocks=8, block_size=4, stop_check="at_max_tokens"),
                 [RequestSpec("A", 0, 4, 3, max_tokens=10)])
    assert metrics.past_end_kv_tokens(t).tolist() == [0, 0, 0, 7, 8, 9, 10, 11, 12, 13]
    assert t.steps["kv_tokens"].tolist() == [4, 5, 6, 7, 8, 9, 10, 11, 12, 13]


def test_past_end_kv_of_a_stop_string_is_one_step(stops):
    # Checked every step, each of the 12 stop-string answers is caught one step late: in that step (its last) all
    # its KV is held past the end of the answer, and in no other step is any.
    every = stops[0]
    t = every.trace
    held = metrics.past_end_kv_tokens(t)
    strings = [i for i, r in enumerate(every.scenario.requests) if r.stop_type is StopType.STRING]
    assert len(strings) == 12
    expected = np.zeros_like(held)
    for i in strings:
        expected[t.requests["finish_step"][i]] += t.requests["num_computed_tokens"][i]
    np.testing.assert_array_equal(held, expected)


# ---- knobs and variants ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "expected"), [
    ("article_abandon", {"servers", "answer_tokens", "leave_after_tokens", "timeout", "unit"}),
    ("impatient_users", {"servers", "abandon_rate", "abandon_point", "delay", "timeout", "unit"}),
    ("stops", {"servers", "max_tokens", "stop_marker", "unit"}),
])
def test_each_preset_shows_the_knobs_that_matter(key, expected):
    assert set(defaults(presets.get(key))) == expected


def test_uploaded_scenarios_get_no_request_level_knobs():
    assert "answer_tokens" not in defaults(presets.get("article_abandon"), uploaded=True)
    assert "max_tokens" not in defaults(presets.get("stops"), uploaded=True)


def test_knob_defaults_start_from_the_preset():
    values = defaults(presets.get("impatient_users"))
    assert (values["abandon_rate"], values["abandon_point"], values["delay"], values["timeout"]) == (
        0.3, "uniform", 50, 0)
    assert values["servers"] == ["abort at once", "notices after 50 steps", "no abort"]


def test_the_delay_knob_relabels_the_late_server():
    p = presets.get("impatient_users")
    values = defaults(p) | {"delay": 120}
    labels = [label for label, sc in lesson.variants(p, p.scenario, values)]
    assert labels == ["abort at once", "notices after 120 steps", "no abort"]
    late = dict(lesson.variants(p, p.scenario, values))["notices after 120 steps"]
    assert late.config.disconnect_detect_delay_steps == 120
    values["servers"] = ["no abort"]
    assert [label for label, _ in lesson.variants(p, p.scenario, values)] == ["no abort"]


def test_abandonment_knobs_regenerate_the_workload():
    p = presets.get("impatient_users")
    w = lesson.apply_workload(p.scenario.workload, defaults(p) | {"abandon_rate": 1.0, "abandon_point": "early"})
    assert (w.abandon_rate, w.abandon_point) == (1.0, "early")
    assert lesson.apply_workload(None, {"abandon_rate": 1.0}) is None


def test_inspector_opens_at_the_abort(article):
    assert lesson.inspector_step(article[0].trace) == 300  # the abort
    assert lesson.inspector_step(article[1].trace) == 300  # no abort: the disconnect


def test_run_caption_when_nobody_stayed():
    runs = runs_of("impatient_users", abandon_rate=1.0, servers=["abort at once"])
    assert "no user stayed to the end" in lesson.run_caption(runs[0], "steps")
    assert "nan" not in lesson.run_caption(runs[0], "steps")


def test_gantt_notes_and_columns(article, impatient):
    story = measures.abandon_story(article)
    assert lesson.gantt_notes(article[1], story) == {"long": "user left at step 300", "waiting": "starts at step 1,000"}
    assert lesson.gantt_notes(impatient[0], None) == {}
    assert lesson.gantt_columns(article) == 1 and lesson.gantt_columns(impatient) == 2


# ---- charts ------------------------------------------------------------------------------------------------------
def _colors(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "template":
                continue
            if "color" in key.lower() and not isinstance(value, dict):
                yield from (value if isinstance(value, list | tuple) else [value])
            else:
                yield from _colors(value)
    elif isinstance(node, list | tuple):
        for value in node:
            yield from _colors(value)


def figures(runs: list[lesson.Run]) -> dict[str, go.Figure]:
    summaries = {run.label: run.summary for run in runs}
    styles = charts.server_styles({run.label: run.scenario.config for run in runs})
    return {
        "kv": charts.kv_for_nobody({run.label: run.trace for run in runs}, STYLE),
        "kv_ms": charts.kv_for_nobody({run.label: run.trace for run in runs}, STYLE, x_unit="ms"),
        "waste": charts.waste_bars(summaries, STYLE, styles=styles),
        "wait": charts.waiting_others_lose(summaries, STYLE, styles=styles, unit="ms"),
    }


def test_kv_chart_in_mb_and_percent_of_pool(article):
    fig = charts.kv_for_nobody({run.label: run.trace for run in article}, STYLE)
    layout = fig.layout
    assert [layout.yaxis.title.text, layout.yaxis2.title.text] == ["KV (MB)", "KV (% of pool)"]
    assert layout.xaxis2.title.text == "time (engine steps)"
    abandoned = next(t for t in fig.data if t.name == "held by abandoned requests")
    assert abandoned.y[999] == pytest.approx(1000 * 131_072 / 1e6)  # 131.072 MB
    titles = [a.text for a in layout.annotations]
    assert "<b>abort on disconnect</b>: an abort freed 39 MB at step 300" in titles
    assert "<b>no abort</b>: 131 MB (6% of the pool) held for nobody at step 999" in titles
    # Stacks per panel add up to the KV held: wanted + abandoned == kv_tokens in MB.
    stacked = [t for t in fig.data if t.stackgroup == "kv2"]
    total = np.sum([np.asarray(t.y) for t in stacked], axis=0)
    np.testing.assert_allclose(total, article[1].trace.steps["kv_tokens"] * 131_072 / 1e6)
    assert "2,095 MB = 999 blocks" in layout.title.text  # 999 blocks x 2 MiB


def test_kv_chart_pool_line_only_near_the_data(article, impatient):
    names = lambda fig: {t.name for t in fig.data}  # noqa: E731
    assert "KV pool" not in names(charts.kv_for_nobody({r.label: r.trace for r in article}, STYLE))  # 6% used
    assert "KV pool" in names(charts.kv_for_nobody({r.label: r.trace for r in impatient}, STYLE))  # ~65% used


def test_kv_chart_names_past_end_kv(stops):
    fig = charts.kv_for_nobody({run.label: run.trace for run in stops}, STYLE)
    assert {t.name for t in fig.data if t.showlegend} == {"wanted", "held past the answer's end"}


def test_waste_bars_values(impatient):
    summaries = {run.label: run.summary for run in impatient}
    fig = charts.waste_bars(summaries, STYLE, styles=charts.server_styles(
        {run.label: run.scenario.config for run in impatient}))
    tokens, gpu, goodput = fig.data
    assert list(tokens.x) == [s["wasted_tokens"] for s in summaries.values()]
    assert list(gpu.x) == pytest.approx([s["wasted_gpu_ms"] for s in summaries.values()])
    assert list(goodput.x) == pytest.approx([s["read_tok_s"] for s in summaries.values()])
    assert list(tokens.y) == list(summaries)
    assert [fig.layout.xaxis.title.text, fig.layout.xaxis2.title.text, fig.layout.xaxis3.title.text] == [
        "generated for<br>nobody (tokens)", "GPU time for<br>nobody (ms)", "useful throughput<br>(tokens read/s)"]


def test_waiting_chart_labels_the_difference(article):
    summaries = {run.label: run.summary for run in article}
    styles = charts.server_styles({run.label: run.scenario.config for run in article})
    fig = charts.waiting_others_lose(summaries, STYLE, styles=styles)
    abort, keep = fig.data
    assert list(abort.x) == [299, 299] and list(keep.x) == [999, 999]
    assert list(keep.text) == ["999 (+700)", "999 (+700)"]
    assert fig.layout.xaxis.title.text == "queueing delay (steps)"
    assert fig.layout.title.subtitle.text == "1 user who stayed under every server; arrival to first step run"
    with pytest.raises(ValueError):
        charts.waiting_others_lose(summaries, STYLE, styles=styles, unit="hours")


def test_waiting_chart_says_when_nobody_stayed():
    runs = runs_of("impatient_users", abandon_rate=1.0, servers=["abort at once"])
    fig = charts.waiting_others_lose({r.label: r.summary for r in runs}, STYLE,
                                     styles=charts.server_styles({r.label: r.scenario.config for r in runs}))
    assert any("No user stayed" in a.text for a in fig.layout.annotations)


def test_server_styles_by_what_the_server_does():
    c = EngineConfig()
    styles = charts.server_styles({"a": c, "b": c.replace(disconnect_detect_delay_steps=5),
                                   "c": c.replace(abort_on_disconnect=False)})
    assert styles == {"a": charts.SERVER_STYLES["prompt"], "b": charts.SERVER_STYLES["late"],
                      "c": charts.SERVER_STYLES["never"]}
    assert charts.server_kind(c.replace(stop_check="at_max_tokens")) == "never"
    same = charts.server_styles({"x": c, "y": c})  # two servers of one kind: series colours keep them apart
    assert same["x"] != same["y"]


def test_chart_colours_and_fonts(article, impatient, stops):
    for runs in (article, impatient, stops):
        for name, fig in figures(runs).items():
            for value in _colors(fig.to_plotly_json()):
                assert isinstance(value, str), (name, value)
                assert value in THEME_COLORS or value == NO_FILL, (name, value)
            assert fig.layout.title.text and fig.layout.font.size == STYLE.font_size, name


def test_presentation_mode_scales_the_charts(article):
    big = ChartStyle(presentation=True)
    fig = charts.kv_for_nobody({run.label: run.trace for run in article}, big)
    assert fig.layout.font.size == big.font_size and fig.layout.height == big.height(110 + 190 * 2)


def test_builders_do_not_mutate_their_inputs():
    # Fresh runs, copied whole before any builder sees them (the module's `article` runs were drawn by other tests).
    runs = runs_of("article_abandon")
    before = {run.label: (copy.deepcopy(run.trace), copy.deepcopy(run.summary)) for run in runs}
    figures(runs)
    for run in runs:
        assert_trace_unchanged(before[run.label][0], run.trace)
        assert run.summary == before[run.label][1]
