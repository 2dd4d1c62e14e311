"""The Preemption lesson driven through AppTest: every preset runs clean with its numbers on screen, knobs rerun
by key (pool, block size, bandwidth, CPU swap space, model, policy), and URL settings apply."""

import re

import pytest

from sim import presets
from tests.app.conftest import assert_clean, metric_values, open_page, player_data

PAGE = "pages/4_Preemption.py"


def notices(at) -> str:
    return " ".join(i.value for i in at.info)


@pytest.mark.parametrize("preset", [p.key for p in presets.presets_for("preemption")])
def test_every_preset_runs(preset):
    at = open_page(PAGE, {"preset": preset})
    assert_clean(at)
    p = presets.get(preset)
    values = metric_values(at)
    assert all(f"{label}: preemptions" in values for label, _ in p.variants)
    assert {"Recompute: GPU time", "Swap: copied each way", "Swap: time each way",
            "Swap: CPU RAM parked"} <= set(values)
    assert "What to notice" in notices(at)
    # The player opens at the runs' first preemption (the toy pool's D at step 113; sizing's at step 25); each
    # run's block map comes once the player has been in view (the browser asks: tests/browser/test_player_browser).
    first_preemption = {"toy_pool": 113, "recompute_vs_swap": 102, "prefix_cache": 33, "sizing": 25}
    data = player_data(at)
    assert data["default_step"] == first_preemption[preset]
    assert [r["label"] for r in data["runs"]] == [label for label, _ in p.variants]
    assert data["block_map"] and not data["detail"] and all(r["blocks"] is None for r in data["runs"])


def test_toy_pool_names_the_victims_and_the_blocked_request():
    at = open_page(PAGE)
    assert_clean(at)
    values = metric_values(at)
    assert values["FCFS victim: preemptions"] == values["priority victim: preemptions"] == "2"
    text = notices(at)
    assert "evicted D, the last request in the running list" in text
    assert "E (1 block) waited behind it" in text
    assert "evicted C, the running request with the lowest priority" in text
    assert player_data(at)["default_step"] == 113  # the player opens at the first preemption


def test_recompute_vs_swap_shows_the_articles_numbers():
    at = open_page(PAGE, {"preset": "recompute_vs_swap"})
    assert_clean(at)
    values = metric_values(at)
    assert values["Recompute: GPU time"] == "32.0 ms"
    assert values["Swap: copied each way"] == "262 MB"
    assert values["Swap: time each way"] == "5.87 ms"
    assert values["Swap: CPU RAM parked"] == "262 MB"
    assert any("5.24 ms at the peak 50 GB/s plus 0.63 ms" in c.value for c in at.caption)  # 5.87 in all
    assert "32.0 ms of GPU time" in notices(at) and "262 MB to CPU memory" in notices(at)


def test_block_size_and_bandwidth_knobs_change_the_swap_cost():
    at = open_page(PAGE, {"preset": "recompute_vs_swap"})
    at.selectbox(key="preemption.engine.block_size").set_value(1).run()
    assert_clean(at)
    values = metric_values(at)
    # One-token blocks fill the same 288 MiB one step later: the victim holds 2,001 tokens, copied as 2,001 blocks:
    # 262,275,072 B / 50 GB/s = 5.25 ms of data + 2,001 x 5 us = 10.01 ms of overhead each way.
    assert values["Swap: time each way"] == "15.25 ms" and values["Swap: copied each way"] == "262 MB"
    assert at.query_params["block_size"] in ("1", ["1"])
    at.slider(key="preemption.swap.swap_bandwidth_gb_s").set_value(25.0).run()
    assert_clean(at)
    assert metric_values(at)["Swap: time each way"] == "20.50 ms"  # 10.49 ms of data + 10.01 ms of overhead


def test_too_little_cpu_swap_space_falls_back_to_recompute():
    at = open_page(PAGE, {"preset": "recompute_vs_swap", "cpu_swap_gib": "0.125"})  # 64 blocks < 125
    assert_clean(at)
    assert "fell back to recompute" in notices(at)
    assert metric_values(at)["swap: preemptions"] == "1"
    # The cost cards say the victim's 262 MB are needed, not parked: they do not fit in 64 blocks.
    assert metric_values(at)["Swap: CPU RAM needed"] == "262 MB" and "Swap: CPU RAM parked" not in metric_values(at)
    assert any("The CPU swap space (0.125 GiB, 64 blocks) cannot hold these 125 blocks: in swap mode this victim "
               "falls back to recompute." in c.value for c in at.caption)
    # With room for it, the card says parked and the caption says nothing of a fallback.
    at = open_page(PAGE, {"preset": "recompute_vs_swap"})
    assert metric_values(at)["Swap: CPU RAM parked"] == "262 MB"
    assert not any("cannot hold" in c.value for c in at.caption)


def test_a_bigger_pool_stops_preemption_and_the_model_knob_counts_bytes():
    at = open_page(PAGE)
    at.slider(key="preemption.engine.pool_gib").set_value(0.125).run()  # 64 blocks: room for everyone
    assert_clean(at)
    values = metric_values(at)
    assert values["FCFS victim: preemptions"] == values["priority victim: preemptions"] == "0"
    assert "nothing was preempted" in notices(at)
    at = open_page(PAGE, {"preset": "recompute_vs_swap", "model": "llama-3.1-70b", "pool_gib": "1"})
    assert_clean(at)
    # 320 KiB per token: the victim's 144 blocks (2,304 tokens) are 755 MB (with Llama 3.1 8B, 128 KiB: 302 MB)
    assert metric_values(at)["Swap: copied each way"] == "755 MB"


def test_prefix_cache_and_sizing_presets_show_their_sections():
    at = open_page(PAGE, {"preset": "prefix_cache"})
    assert_clean(at)
    assert "in the prefix cache (" in notices(at)
    assert any(h.value == "Re-prefill and the prefix cache" for h in at.subheader)
    at = open_page(PAGE, {"preset": "sizing"})
    assert_clean(at)
    assert "preemption stops from" in notices(at)
    assert at.subheader[0].value == "Sizing: KV pool size x max_num_seqs"  # the preset's point comes first
    # Moving max_num_seqs reruns the main run, not the sweep (cached), and moves the outline.
    at.slider(key="preemption.engine.max_num_seqs").set_value(16).run()
    assert_clean(at)
    assert metric_values(at)["FCFS: preemptions"] == "0"
    assert any("max_num_seqs 16" in c.value for c in at.caption)


def test_policy_and_mode_knobs_when_not_compared():
    # The preset runs the priority policy (victim: the lowest priority); under fcfs it is the last one admitted.
    at = open_page(PAGE, {"preset": "recompute_vs_swap", "policy": "fcfs"})
    assert_clean(at)
    assert "evicted grower, the last request in the running list" in notices(at)
    assert metric_values(at)["Recompute: GPU time"] == "4.8 ms"  # its 299 tokens at 16 us each
    at = open_page(PAGE, {"preset": "sizing", "preemption_mode": "swap"})
    assert_clean(at)
    assert "swap" in notices(at)


def test_a_linked_step_past_the_end_is_warned_about_with_the_other_bad_values():
    at = open_page(PAGE, {"step": "99999", "pool_gib": "banana"})
    assert_clean(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "step 99,999 is past the end of these runs (step 286)" in warnings and "pool_gib=banana" in warnings

def test_no_run_chosen_asks_for_one():
    at = open_page(PAGE)
    at.multiselect(key="preemption.compare").set_value([]).run()
    assert_clean(at)
    assert any("at least one run" in w.value for w in at.warning)


def test_a_pool_too_small_for_every_request_says_so():
    # 1 block (1/1024 GiB) holds 16 tokens: none of the toy pool's five requests fits.
    at = open_page(PAGE, {"preset": "toy_pool", "pool_gib": str(1 / 1024)})
    assert_clean(at)
    assert "5 of 5 requests can never run on this engine and were rejected on arrival" in at.warning[0].value
    captions = [c.value for c in at.caption if "tokens recomputed" in c.value]
    assert captions and all(c.startswith("no request finished · ") and "of 1 block" in c for c in captions)


def test_the_cost_what_if_never_uses_a_request_that_could_not_run():
    # 70B model on a 0.35 GiB pool: 'victim' (2,299 tokens) is rejected on arrival, so the what-if takes the
    # longest request that ran; with a pool too small for anyone there is no victim at all.
    at = open_page(PAGE, {"preset": "recompute_vs_swap", "block_size": "8", "pool_gib": "0.34765625",
                          "model": "llama-3.1-70b", "policy": "fcfs"})
    assert_clean(at)
    assert any(c.value.startswith("For grower at its longest") for c in at.caption)
    at = open_page(PAGE, {"pool_gib": "0.0009765625"})
    assert_clean(at)
    assert any("there is no victim to bring back" in c.value for c in at.caption)
    assert "Recompute: GPU time" not in metric_values(at)


def test_a_one_run_preset_names_the_policy_it_runs():
    """Sizing's one run is labelled FCFS; with the policy knob (or an uploaded file) on priority it is called
    priority, in its numbers and sentences."""
    at = open_page(PAGE, {"preset": "sizing", "policy": "priority"})
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "priority: preemptions" in labels and "FCFS: preemptions" not in labels
    assert "FCFS: preemptions" in [m.label for m in open_page(PAGE, {"preset": "sizing"}).metric]


def test_an_uploaded_toy_model_runs_and_its_sizes_read_in_bytes():
    # One layer, one KV head of dimension 1, one byte a value: 2 bytes a token, 32 a block. The swap knob's
    # default 4 GiB is ~134 million such blocks, past the engine's limit: it is capped, not an "Invalid setting".
    uploaded = {"name": "toy model", "config": {"num_blocks": 16, "block_size": 16, "max_num_seqs": 4,
                                                 "model": {"name": "toy", "num_layers": 1, "num_kv_heads": 1,
                                                           "head_dim": 1, "dtype_bytes": 1}},
                "requests": [{"id": f"r{i}", "arrival_step": 0, "prompt_len": 40, "output_len": 60}
                             for i in range(4)]}
    at = open_page(PAGE, session={"preemption.uploaded": uploaded})
    assert_clean(at)
    assert not at.error
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "32 B per block of 16 tokens" in captions and "toy: 2 B per token" in captions
    # every size on the page in a unit that fits: no "3.05176e-05 MiB", no "0 KiB" (the cost cards' help and the
    # cost caption's per-layer copies included)
    texts = [c.value for c in at.caption] + [m.proto.help for m in at.metric] + [i.value for i in at.info]
    assert not [t for t in texts if re.search(r"\de-\d|\b0 [KMG]iB|0\.0+\d* [KMG]iB", t)], texts
    assert any("blocks x 32 B" in m.proto.help for m in at.metric)  # swap: copied each way
