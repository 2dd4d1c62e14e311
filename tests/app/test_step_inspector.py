"""The step inspector (ui.sections.step_inspector) on small schedules: what it says at a step is what happened."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _inspect(case: str, step: int | None = None) -> AppTest:
    """Run the inspector alone on one of the cases below (at ``step``, else where it opens)."""

    def app(case: str) -> None:
        from sim import presets
        from sim.config import EngineConfig
        from sim.engine import simulate
        from sim.request import RequestSpec as R
        from sim.scenario import Scenario
        from ui import sections
        from ui.theme import ChartStyle

        if case in ("starvation", "recompute_vs_swap"):
            preset = presets.get(case)
            label, overrides = preset.variants[1]  # "SJF + guard", "swap"
            scenario = preset.scenario.with_config(**overrides)
        else:
            scenario = {
                # priority: L (priority 5) needs a block at step 2 and is the lowest priority: it preempts itself
                # and vLLM stops scheduling the running list there, so M (running, after it) gets no token.
                "self_preempt": Scenario("self", EngineConfig(num_blocks=3, max_num_seqs=4, policy="priority"),
                                         (R("H", 0, 10, 5, priority=0), R("L", 0, 15, 5, priority=5),
                                          R("M", 1, 10, 5, priority=0))),
                "late": Scenario("late", EngineConfig(num_blocks=100), (R("only", 2, 8, 3),)),
                "one_step": Scenario("one", EngineConfig(num_blocks=100), (R("x", 0, 8, 1),)),
                # ids from a file are shown as typed: one slot, so the second waits behind the first at step 0
                "markdown_ids": Scenario("md", EngineConfig(num_blocks=100, max_num_seqs=1),
                                         (R("[a](https://e.com)", 0, 8, 2), R("**b**", 0, 8, 2))),
            }[case]
            label = case
        sections.step_inspector({label: (scenario, simulate(scenario.config, scenario.requests))}, "t",
                                ChartStyle(), start_step=lambda trace: 0, scope=case)

    at = AppTest.from_function(app, args=(case,), default_timeout=60).run()
    if step is not None:
        at.slider[0].set_value(step).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown)


def test_a_running_request_the_step_gave_no_tokens_is_still_in_the_batch():
    at = _inspect("self_preempt", 2)
    table = at.dataframe[0].value
    assert table["request"].tolist() == ["H", "M"]
    assert table.set_index("request").loc["M"].tolist() == [0, "no tokens: scheduling stopped at a preemption"]
    assert "**L** preempted: KV pool full: itself needed a new block" in _text(at)


def test_an_idle_step_says_so_once():
    at = _inspect("late", 1)
    text = _text(at)
    assert "Nothing to decide: no request was waiting or running." in text
    assert "everybody kept running" not in text
    assert [c.value for c in at.caption] == ["Nothing ran: the engine was idle."]


def test_a_one_step_run_has_no_slider_to_slip_off():
    at = _inspect("one_step")
    assert not at.slider
    assert "The whole run is one engine step, step 0." in [c.value for c in at.caption]
    assert "**x** finished (length) after 1 token" in _text(at)  # one token, not "1 tokens"


def test_events_read_once_with_their_numbers_written_out():
    text = _text(_inspect("starvation", 1))
    assert "**s0** admitted with a first chunk of 64 tokens" in text  # not "admitted: admitted with a 64-token"


def test_a_starvation_guard_promotion_is_explained():
    text = _text(_inspect("starvation", 201))
    assert ("**long** promoted: waited 200 steps (starvation guard threshold: 200): moved ahead of every request "
            "not promoted, for 600 steps of running") in text


def test_a_swapped_request_that_cannot_come_back_is_not_called_next_in_line():
    at = _inspect("recompute_vs_swap", 103)
    text = _text(at)
    assert "**Swapped to CPU:** victim" in text
    assert "**victim** is not swapped back in yet: needs" in text and "victim** is next in line" not in text
    assert "copying KV blocks" not in at.markdown[0].value
    headline = _inspect("recompute_vs_swap", 102).markdown[0].value  # the swap-out: why the step is long
    assert "(from 621.3 ms to 632.9 ms, 11.62 ms long, 5.87 ms of it copying KV blocks between GPU and CPU)" in headline


def test_request_ids_from_a_file_are_shown_as_typed_not_as_markdown():
    at = _inspect("markdown_ids", step=0)
    text = " ".join(m.value for m in at.markdown)
    assert "\\[a\\]\\(https\\:\u200b//e.com\\)" in text  # escaped: no link is drawn
    assert "- **\\*\\*b\\*\\*** is next in line" in text  # the id in bold, its own asterisks as typed
