"""The Token budget lesson's logic without Streamlit: its knobs and servers, the worked example's stall, the sweep,
the notices (worded from the runs' numbers), and the chart builders."""

from __future__ import annotations

import numpy as np
import pytest

from lessons.budget import lesson
from sim import metrics, presets
from sim.engine import simulate
from ui.charts import budget as charts
from ui.theme import ChartStyle


def runs_of(key: str, **changes) -> list[lesson.Run]:
    p = presets.get(key)
    values = {k.key: k.default for k in lesson.knobs(p, p.scenario, False)}
    values.update(changes)
    out = []
    for label, sc in lesson.variants(p, p.scenario, values):
        trace = simulate(sc.config, sc.requests)
        out.append(lesson.Run(label, sc, trace, metrics.summary(trace)))
    return out


def test_knobs_start_from_the_preset_servers():
    p = presets.get("long_prompt")
    defaults = {k.key: k.default for k in lesson.knobs(p, p.scenario, False)}
    assert defaults == {"chunked_a": False, "budget_a": 8192, "chunked_b": True, "budget_b": 512}
    assert [label for label, _ in lesson.variants(p, p.scenario, defaults)] == ["A: no chunking, 8,192",
                                                                                 "B: chunked, 512"]
    assert all(k.key != "max_num_batched_tokens" for k in lesson.engine_knobs(p.scenario.config))


def test_worked_example_stall_from_the_runs():
    story = lesson.stalls(runs_of("long_prompt"))
    a, b = story
    # Without chunking: 1 step of 5.75 + 8,000 x 0.016 + 8 x 0.006 = 133.798 ms; chunked: 16 steps, 220.768 ms.
    assert (a.request_id, a.prompt_len, a.prefill_steps) == ("long", 8000, 1)
    assert a.ttft_ms == pytest.approx(133.798) and a.others_max_gap_ms == pytest.approx(133.798)
    assert b.prefill_steps == 16 and b.ttft_ms == pytest.approx(220.768)
    assert b.others_max_gap_ms == pytest.approx(13.862)
    labels = [m[:2] for m in lesson.stall_metrics(story)]
    assert labels == [("A: no chunking, 8,192: streams' longest pause", "133.8 ms"),
                      ("B: chunked, 512: streams' longest pause", "13.9 ms")]


def test_the_worked_example_is_told_on_its_own_requests_only():
    # The stall story (its cards and sentences) belongs to the long_prompt preset's requests, whatever the knobs;
    # the busy preset's longest prompt is no worked example.
    assert [s.prefill_steps for s in lesson.worked_example(runs_of("long_prompt", budget_b=1024))] == [1, 8]
    busy = runs_of("busy_budget")
    assert lesson.stalls(busy) and lesson.worked_example(busy) == []
    assert not any("-token prefill took" in t for t in lesson.notices(busy, "ms"))


def test_the_player_starts_where_the_long_prompt_is_first_scheduled():
    no_chunking, chunked = runs_of("long_prompt")
    # long arrives at step 20: without chunking its whole prefill is that step (the 133.8 ms stall), with a
    # 512-token budget its first chunk is.
    assert lesson.longest_prompt_start(no_chunking.trace) == 20
    assert no_chunking.trace.steps["step_ms"][20] == pytest.approx(133.798)
    assert lesson.longest_prompt_start(chunked.trace) == 20


def test_notices_word_the_numbers():
    runs = runs_of("long_prompt")
    text = " ".join(lesson.notices(runs, "ms"))
    assert "p99 time between tokens 133.8 ms against 13.9 ms" in text
    assert "p99 TTFT 124.6 ms against 205.1 ms" in text  # (the chats' TTFT counts too: p99 of 9 requests)
    assert "took 1 step, and the other streams waited up to 133.8 ms for a token: 23x a plain decode step" in text
    assert "the prefill took 16 steps instead" in text and "after 220.8 ms instead of 133.8" in text


def test_notices_follow_the_budget():
    # Server B at 1,024 tokens: 1,016 a chunk, 8 chunks, each 5.75 + 1,016 x 0.016 + 0.048 = 22.054 ms.
    story = lesson.stalls(runs_of("long_prompt", budget_b=1024))
    assert story[1].prefill_steps == 8 and story[1].others_max_gap_ms == pytest.approx(22.054)


def test_same_servers_say_so():
    text = " ".join(lesson.notices(runs_of("long_prompt", chunked_a=True, budget_a=512), "ms"))
    assert "Every server gives the same p99 time between tokens here (13.9 ms)" in text


def test_memory_notice():
    text = " ".join(lesson.notices(runs_of("budget_memory"), "ms"))
    assert ("A: chunked, 8,192 preempted 1 request and computed 2,002 tokens again (KV peaked at 680 of 680 blocks) "
            "and B: chunked, 512 preempted none (KV peaked at 657 of 680 blocks)") in text


def test_capped_answers_without_chunking():
    # Without chunking at 4,096 the 8,016-token request is rejected (its prompt is over the budget) and nothing
    # else is cut; at 1,024 nothing is cut either (chats are 160 tokens). A budget of 128 cuts every chat at 128.
    runs = runs_of("long_prompt", budget_a=128)
    text = " ".join(lesson.notices(runs, "ms"))
    assert "under A: no chunking, 128, 8 answers stopped at 128 tokens (prompt + answer) before their end" in text


def test_sweep_runs_and_notice():
    p = presets.get("long_prompt")
    runs = lesson.sweep_runs(p.scenario, (256, 512, 8192))
    # Chunked at every budget; without chunking only at 8,192 (the longest request is 8,000 + 16 tokens).
    assert [(sc.config.chunked_prefill, sc.config.max_num_batched_tokens) for sc in runs] == [
        (True, 256), (True, 512), (True, 8192), (False, 8192)]
    budgets = (256, 1024, 8192)
    sweep = lesson.tradeoff_sweep(p.scenario, budgets, lambda sc, fn: fn(simulate(sc.config, sc.requests)))
    assert [b for b, _, _ in sweep["chunked"]] == [256, 1024, 8192] and sweep["longest"] == 8016
    tbt = [x for _, _, x in sweep["chunked"]]
    assert tbt == sorted(tbt) and tbt[-1] == pytest.approx(133.798)
    text = " ".join(lesson.sweep_notice(sweep))
    assert "from 9.8 ms (budget 256) to 133.8 ms (8,192)" in text
    # p99 TTFT 297 ms at 256, 162 at 1,024, 125 at 8,192: 1,024 is the smallest within 1.5 x 125 = 187.5 ms.
    assert "The knee is near a budget of 1,024" in text
    missing = lesson.tradeoff_sweep(p.scenario, (256,), lambda sc, fn: None)
    assert missing["chunked"] == [] and lesson.sweep_notice(missing) == []


def test_chart_builders():
    runs = runs_of("long_prompt")
    style = ChartStyle()
    fig = charts.token_times(runs[0].trace, style, title="A")
    assert fig.layout.title.text == "A" and len(fig.data[0].x) == 8 * 60 + 16  # every token read
    assert fig.layout.yaxis.ticktext[0] == "chat0 (134 ms)"
    fig = charts.tbt_distribution({r.label: r.trace for r in runs}, style)
    assert [d.name for d in fig.data] == ["A: no chunking, 8,192 (p99 134 ms)", "B: chunked, 512 (p99 13.9 ms)"]
    fig = charts.tradeoff({"chunked": [(512, 200.0, 13.9), (8192, 125.0, 133.8)], "unchunked": []}, style,
                          current=[("A", 125.0, 133.8)])
    assert list(fig.data[0].text) == ["512", "8,192"] and fig.data[1].name == "A"
    assert list(fig.layout.xaxis.tickvals) == [15.0, 20.0, 30.0, 40.0, 50.0, 70.0, 100.0, 150.0]  # (1-2-5: three)


def test_tbt_axis_leaves_room_past_the_stall():
    # Without chunking the largest gap is the 133.8-ms stall; plotly's autorange would end the axis right on it.
    runs = runs_of("long_prompt")
    fig = charts.tbt_distribution({r.label: r.trace for r in runs}, ChartStyle())
    xs = np.concatenate([np.asarray(d.x, dtype=np.float64) for d in fig.data])
    assert xs.max() == pytest.approx(133.798)
    assert fig.layout.xaxis.type == "log"
    bottom, top = fig.layout.xaxis.range  # (decades, on a log axis)
    first, last = np.log10(xs.min()), np.log10(xs.max())
    assert top - last >= 0.05 * (last - first) and first - bottom >= 0.05 * (last - first)
    assert 10**top < 2 * xs.max()  # room, not a wasted half of the chart
    ticks = [t for t in fig.layout.xaxis.tickvals if bottom <= np.log10(t) <= top]
    assert len(ticks) >= 4


def test_tradeoff_tells_the_current_runs_apart():
    sweep = {"chunked": [(512, 200.0, 13.9), (8192, 125.0, 133.8)], "unchunked": [(8192, 125.0, 133.8)]}
    fig = charts.tradeoff(sweep, ChartStyle(), current=[("A: no chunking, 8,192", 125.0, 133.8),
                                                        ("C", np.nan, 1.0), ("B: chunked, 512", 200.0, 13.9)])
    a, b = fig.data[2:]  # (C has no p99 TTFT: not drawn)
    assert (a.marker.symbol, b.marker.symbol) == charts.CURRENT_SYMBOLS[0:3:2]  # (by position: B keeps its own)
    assert [a.name, b.name] == ["A: no chunking, 8,192", "B: chunked, 512"]
    assert a.marker.symbol != b.marker.symbol
    assert {a.marker.symbol, b.marker.symbol}.isdisjoint({s for _, _, s in charts.SERIES.values()})
    assert "text" in a.mode and list(a.text) == [a.name] and list(b.text) == [b.name]
    assert a.showlegend is not False and b.showlegend is not False
    # Each label below its marker (under the falling curve), on the side with room: A is the rightmost point.
    assert a.textposition == "bottom left" and b.textposition == "bottom right"


def test_busy_run_shows_its_worst_moment():
    runs = runs_of("busy_budget")
    lo, hi = charts.worst_gap_window(runs[0].trace)
    assert hi - lo == charts.WINDOW_MS
    g = metrics.token_gaps(runs[0].trace)
    worst_end = runs[0].trace.steps["time_ms"][g.after[int(np.argmax(g.ms))]]
    assert lo < worst_end <= hi
    assert len(charts.shown_streams(runs[0].trace)) == charts.MAX_STREAMS


def test_a_log_axis_has_readable_ticks_whatever_its_span():
    from ui.charts.budget import log_axis

    assert log_axis([5, 900])["ticktext"] == ["5", "10", "20", "50", "100", "200", "500", "1,000"]
    # Less than a decade (a p99 TTFT from 180 to 600 ms): 1-2-5 would label only 200 and 500.
    assert log_axis([180, 600])["ticktext"] == ["150", "200", "300", "400", "500", "700"]
    assert "range" not in log_axis([180, 600])  # (autorange unless asked for headroom)
    lo, hi = log_axis([100, 100], headroom=0.1)["range"]  # one value: room all the same
    assert lo == pytest.approx(2 - 0.05) and hi == pytest.approx(2 + 0.05)
    # Ticks past the data's span are not drawn: 100 and 1,000 frame 125-750 ms but only 200 and 500 show.
    assert log_axis([125, 750])["ticktext"] == ["100", "150", "200", "300", "400", "500", "700"]
    assert log_axis([0.12, 0.5])["ticktext"] == ["0.1", "0.15", "0.2", "0.3", "0.4", "0.5"]
    assert log_axis([0, float("nan")]) == {"type": "log"}


def test_the_sweep_sentence_says_which_way_each_p99_moves():
    # One batch slot: no other stream to stall, so p99 time between tokens is one plain decode step at every budget
    # (the sentence used to say it "grows from 5.8 ms to 5.8 ms"); a pool that preempts at large budgets can make
    # it shrink (budget_memory at 1,364 blocks: "grows from 6.8 ms to 5.8 ms").
    def notice(chunked: list[tuple[int, float, float]]) -> str:
        return lesson.sweep_notice({"chunked": chunked, "unchunked": [], "longest": 10, "unchunked_budgets": [64]})[0]

    assert ("p99 time between tokens stays at 5.8 ms from budget 64 to 8,192, while p99 TTFT falls from 3,466 ms to "
            "2,764 ms.") in notice([(64, 3466.0, 5.8), (8192, 2764.0, 5.8)])
    assert "shrinks from 6.8 ms (budget 64) to 5.8 ms (8,192)" in notice([(64, 3480.0, 6.8), (8192, 134.0, 5.8)])
    assert "p99 TTFT rises from 100 ms to 140 ms" in notice([(64, 100.0, 6.8), (8192, 140.0, 13.8)])
    assert "grows from 6.8 ms (budget 64) to 13.8 ms (8,192), while p99 TTFT falls from 820 ms to 125 ms" in notice(
        [(64, 820.0, 6.8), (8192, 125.0, 13.8)])
