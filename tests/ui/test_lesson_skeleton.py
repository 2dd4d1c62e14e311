"""ui.lesson's shared pieces that need no Streamlit: the warning about requests the engine can never run."""

from __future__ import annotations

from sim.config import EngineConfig
from sim.engine import simulate
from sim.events import over_kv_pool, over_max_model_len, over_token_budget
from sim.request import RequestSpec
from sim.scenario import Scenario
from ui.lesson import unservable_message


def message(config: EngineConfig, *requests: RequestSpec) -> str:
    scenario = Scenario("t", config, tuple(requests))
    return unservable_message(scenario, simulate(config, requests))


def test_nothing_to_say_when_every_request_can_run():
    assert message(EngineConfig(num_blocks=8), RequestSpec("a", 0, 16, 16)) == ""


def test_one_request_too_big_for_the_pool():
    # 8 blocks of 16 tokens = 128 tokens; b holds 100 + 99 = 199 tokens at its longest = 13 blocks.
    config = EngineConfig(num_blocks=8)
    text = message(config, RequestSpec("a", 0, 16, 16), RequestSpec("b", 0, 100, 100))
    assert text == ("**1 of 2 requests can never run on this engine and was rejected on arrival**: "
                    f"{over_kv_pool(config, 13, 100, 100)}: enlarge the KV pool to run it. Every figure on this page "
                    "counts only the others.")


def test_both_reasons_say_how_many_each():
    # Chunked prefill off and a 64-token budget: c's 100-token prompt can never be scheduled. max_model_len is then
    # 64 too, so b (prompt 60) stops at 64 tokens: ceil(63 / 16) = 4 blocks at its longest, more than the 3 here.
    config = EngineConfig(num_blocks=3, chunked_prefill=False, max_num_batched_tokens=64)
    text = message(config, RequestSpec("a", 0, 16, 16), RequestSpec("b", 0, 60, 200), RequestSpec("c", 0, 100, 1),
                   RequestSpec("d", 0, 120, 1))
    assert text.startswith("**3 of 4 requests can never run on this engine and were rejected on arrival**: ")
    assert f"{over_kv_pool(config, 4, 60, 4, who='1 request')}: enlarge the KV pool to run it; " in text
    assert f"; {over_token_budget(config, 120, who='2 requests', many=True)}. " in text
    assert "2 requests have prompts of up to 120 tokens, longer than one step's token budget" in text


def test_a_prompt_over_max_model_len():
    config = EngineConfig(num_blocks=64, max_model_len=100)
    text = message(config, RequestSpec("a", 0, 16, 16), RequestSpec("b", 0, 120, 1))
    assert text == ("**1 of 2 requests can never run on this engine and was rejected on arrival**: "
                    f"{over_max_model_len(config, 120)}. Every figure on this page counts only the others.")


def test_an_uploaded_variant_gives_the_other_variants_back_the_setting_they_rely_on():
    from sim import presets
    from ui.lesson import as_variant_base

    fairness = presets.get("article_fairness")  # FCFS sets rate_limit_max_requests 0; "Rate limit" relies on 10
    fcfs_file = fairness.scenario.with_config(policy="fcfs", rate_limit_max_requests=0)
    assert as_variant_base(fairness, fcfs_file).config.rate_limit_max_requests == 10
    weighted = presets.get("weighted_vtc")  # "VTC 1:1" sets equal weights; "VTC 1:2" relies on (A 1, B 2)
    equal_file = weighted.scenario.with_config(client_weights=(), num_blocks=500)
    rebased = as_variant_base(weighted, equal_file)
    assert rebased.config.client_weights == (("A", 1.0), ("B", 2.0)) and rebased.config.num_blocks == 500
    # A file's own setting that no variant switches to stays the file's: 1:3 weights, a 120-step delay.
    own = weighted.scenario.with_config(client_weights=(("A", 1.0), ("B", 3.0)))
    assert as_variant_base(weighted, own) == own
    cancel = presets.get("impatient_users")
    late = cancel.scenario.with_config(disconnect_detect_delay_steps=120)
    assert as_variant_base(cancel, late).config.disconnect_detect_delay_steps == 120


def test_tables_fit_their_rows_in_presentation_mode_too():
    # st.dataframe rows are 2.1875 rem: 35 px, and 44 px once presentation mode sets the root font to 20 px (a
    # 19-row metrics table then needs 883 px; at 703 its last rows scrolled out of view on the projector).
    from ui import page
    from ui.theme import ChartStyle

    assert page.table_height(19, ChartStyle()) == 35 * 20 + 3
    present = ChartStyle(presentation=True)
    assert page.table_height(19, present) == 44 * 20 + 3
    assert page.table_height(40, present, 320) == 400  # the cap grows with the text
    assert "html { font-size: 20px; }" in page._PRESENTATION_CSS  # the root font the heights assume


def test_a_metric_row_keeps_one_decimal_in_every_cell_when_one_has_it():
    from ui.page import _row_cells

    assert _row_cells([6326.0, 6320.2, float("nan")]) == ["6,326.0", "6,320.2", "—"]
    assert _row_cells([1100.0, 500.0]) == ["1,100", "500"]  # the article's numbers stay whole
    assert _row_cells([4081, None]) == ["4,081", "—"]  # a count, and a count with no value
