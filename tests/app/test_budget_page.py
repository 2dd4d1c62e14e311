"""The Token budget lesson driven through AppTest: every preset runs, the worked example's figures are on screen,
the budget slider moves TBT and TTFT the expected way, and the sweep completes into the notices."""

import json

import pytest

from sim import presets
from sim.events import over_token_budget
from tests.app.conftest import (
    assert_clean,
    chart_titles,
    metric_values,
    notice_text,
    open_page,
    player_data,
    settle_sweeps,
    sweep_running,
)
from ui import runner, sweeps

PAGE = "pages/5_Token_budget.py"


def test_worked_example_on_screen():
    at = open_page(PAGE)
    assert_clean(at)
    values = metric_values(at)
    assert values["A: no chunking, 8,192: streams' longest pause"] == "133.8 ms"
    assert values["B: chunked, 512: streams' longest pause"] == "13.9 ms"
    assert values["B: chunked, 512: p99 time between tokens"] == "13.9 ms"
    captions = " ".join(c.value for c in at.caption)
    assert "long's first token after 133.8 ms (its prefill in 1 step)" in captions
    assert "long's first token after 220.8 ms (its prefill in 16 steps)" in captions
    # The preset's description states the worked-out figures (tests/sim/test_budget.py pins them by hand).
    description = presets.get("long_prompt").description
    assert "= 133.8 ms" in description and "16 chunks in steps of 13.9 ms" in description
    assert any(c.value == description for c in at.caption)
    text = notice_text(at)
    assert "23x a plain decode step" in text and "The knee is near a budget of 1,024" in text
    titles = chart_titles(at)
    assert "Time between tokens, every gap" in titles and "The budget's trade-off: one point per budget" in titles
    assert "KV cache, B: chunked, 512" in titles
    assert player_data(at)["default_step"] == 20  # the player opens on the stall: long's prefill


@pytest.mark.parametrize("preset", [p.key for p in presets.presets_for("budget")])
def test_every_preset_runs(preset):
    at = open_page(PAGE, {"preset": preset})
    assert_clean(at)
    n = len(presets.get(preset).variants)
    assert sum(label.endswith("p99 time between tokens") for label in metric_values(at)) == n
    assert "What to notice" in notice_text(at)
    assert len(at.get("plotly_chart")) == 3 * n + 2  # tokens, Gantt, KV per server; TBT; the trade-off
    assert at.dataframe


def _figures(at) -> tuple[float, float]:
    """Server B's streams' longest pause and its long prompt's TTFT (ms), from the worked example's box."""
    pause = float(metric_values(at)["B: chunked, 1,024: streams' longest pause"].removesuffix(" ms"))
    caption = next(c.value for c in at.caption if c.value.startswith("long's first token") and "8 steps" in c.value)
    return pause, float(caption.split("after ")[1].split(" ms")[0])


def test_a_bigger_budget_shortens_ttft_and_lengthens_the_pauses():
    at = open_page(PAGE)
    at.select_slider(key="budget.budget_b").set_value(1024).run()
    assert_clean(at)
    pause, ttft = _figures(at)
    # 8 chunks of 1,016 tokens: steps of 5.75 + 1,016 x 0.016 + 0.048 = 22.054 ms (13.862 at 512); TTFT
    # 7 x 22.054 + (5.75 + 888 x 0.016 + 0.048) = 174.4 ms (220.8 at 512).
    assert pause == 22.1 and ttft == 174.4
    assert at.query_params["budget_b"] in ("1024", ["1024"])
    values = metric_values(at)
    assert values["B: chunked, 1,024: p99 time between tokens"] == "22.1 ms"


def test_chunking_off_rejects_the_long_prompt_under_a_small_budget():
    at = open_page(PAGE, {"chunked_b": "0"})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    unchunked = presets.get("long_prompt").scenario.config.replace(chunked_prefill=False, max_num_batched_tokens=512)
    assert over_token_budget(unchunked, 8000) in warnings  # (its words: sim.events, their one home)


def test_engine_knobs_rerun():
    at = open_page(PAGE, {"preset": "budget_memory"})
    at.slider(key="budget.engine.num_blocks").set_value(2000).run()
    assert_clean(at)
    assert "Where the budget meets memory" not in notice_text(at)  # a roomy pool: nobody is preempted


class _NoWorkers:
    """ui.runner's prefetcher with no worker processes: every sweep point is run by the page's own thread."""

    @staticmethod
    def prefetch(items) -> None:
        pass

    @staticmethod
    def status(key: str) -> None:
        return None

    @staticmethod
    def take(key: str, patience_s: float = 0.0) -> None:
        return None


def _tradeoff_points(at) -> dict[str, list[str]]:
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("The budget's trade-off"))
    return {d["name"]: list(d["text"]) for d in spec["data"] if d.get("text") and "lines" in d["mode"]}  # (the sweep)


def test_the_sweep_fills_in_without_holding_up_the_page(monkeypatch):
    # Out of time (budget 0) and no workers: the rerun shows both servers and a sweep still running, whose sentence
    # waits; a rerun without a time limit (in a browser: the sweep's polls) completes it. A pool of 1,999 blocks:
    # runs no other test has cached.
    monkeypatch.setattr(sweeps, "RERUN_BUDGET_S", 0.0)
    monkeypatch.setattr(runner, "_prefetcher", _NoWorkers)
    at = open_page(PAGE, {"num_blocks": "1999"}, settle=False)
    assert_clean(at)
    assert metric_values(at)["B: chunked, 512: streams' longest pause"] == "13.9 ms"
    assert sweep_running(at) and "The knee is near" not in notice_text(at)
    assert sum(len(v) for v in _tradeoff_points(at).values()) < 9
    settle_sweeps(at)
    assert_clean(at)
    # Chunked at every budget of the sweep; without chunking only 8,192 holds the 8,016-token request.
    points = _tradeoff_points(at)
    assert points["chunked prefill"] == ["64", "128", "256", "512", "1,024", "2,048", "4,096", "8,192"]
    assert points["no chunking"] == ["8,192"]
    assert "The knee is near a budget of 1,024" in notice_text(at)
