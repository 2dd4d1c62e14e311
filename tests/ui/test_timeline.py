"""ui.timeline: what the step player receives says, at each step, what the simulator did (decoded here the way
ui/player.js decodes it: run lengths expanded, sparse lists carried forward)."""

from __future__ import annotations

import json

import pytest

from sim import presets
from sim.config import EngineConfig
from sim.engine import queues_after_step, simulate
from sim.playback import record_window, window_around
from sim.request import RequestSpec as R
from sim.scenario import Scenario
from ui import timeline


def unrun(pairs: list) -> list:
    return [v for v, n in zip(pairs[0::2], pairs[1::2], strict=True) for _ in range(int(n))]


def carried(sparse: dict, i: int, empty=()):
    while i >= 0 and str(i) not in sparse:
        i -= 1
    return sparse[str(i)] if i >= 0 else list(empty)


def state_at(data: dict, step: int) -> dict:
    """What the player shows for ``step`` of one run (its payload ``data``)."""
    i = step - data["first"]
    ids = data["ids"]
    batch = carried(data["batch"], i)
    return {
        "batch": [(ids[str(r)], t, k) for r, t, k in zip(batch[0::3], batch[1::3], batch[2::3], strict=True)],
        "waiting": [ids[str(r)] for r in carried(data["queues"]["waiting_head"], i)],
        "idle": [ids[str(r)] for r in carried(data["queues"]["idle_running"], i)],
        "swapped": [ids[str(r)] for r in carried(data["queues"]["swapped"], i)],
        "counts": {k: unrun(v)[i] for k, v in data["counts"].items()},
        "step_ms": unrun(data["step_ms"])[i],
        "lines": [f"{ids[str(row)]} {data['texts'][label]}: {data['texts'][why]}".replace(" : ", " ")
                  for row, label, why, _ in data["events"].get(str(i), [])],
        "arrived": [ids[str(r)] for r in data["arrived"].get(str(i), [])],
    }


def payload(sc: Scenario, label: str = "run", block_map: bool = False) -> tuple[dict, object]:
    trace = simulate(sc.config, sc.requests)
    pb = record_window(sc.config, sc.requests, *window_around(0, trace.num_steps), block_map=block_map)
    data = timeline.run_payload(label, trace, pb)
    json.dumps(data)  # what the component sends must be plain JSON
    return data, trace


def _variant(key: str, label: str) -> Scenario:
    preset = presets.get(key)
    overrides = dict(preset.variants)[label]
    return preset.scenario.with_config(**overrides) if overrides else preset.scenario


def test_the_articles_one_slot_example_step_by_step():
    data, trace = payload(_variant("article_hol", "FCFS"), "FCFS")
    start = state_at(data, 0)
    assert start["batch"] == [("long", 4, 1)]  # its 4-token prompt, then its first token
    assert start["waiting"] == ["short1", "short2"]
    assert start["arrived"] == ["long", "short1", "short2"]
    assert "short1 is next in line but not admitted: the only batch slot (max_num_seqs = 1) is taken" in start[
        "lines"]
    assert start["counts"]["used"] == 1 and start["counts"]["free_after"] == 998
    assert start["step_ms"] == pytest.approx(5.75 + 4 * 0.016)  # the cost model: base + 4 prefill tokens
    assert state_at(data, 500)["batch"] == [("long", 1, 2)] and state_at(data, 500)["lines"] == [
        "short1 is next in line but not admitted: the only batch slot (max_num_seqs = 1) is taken"]
    handover = state_at(data, 1000)
    assert handover["batch"] == [("short1", 4, 1)] and handover["waiting"] == ["short2"]
    assert any(line.startswith("short1 admitted with a first chunk of 4 tokens") for line in handover["lines"])
    assert data["x_ms"][1000] == pytest.approx(float(trace.start_ms(1000)), abs=1e-3)


def test_what_the_player_shows_is_the_engines_state_at_every_step():
    sc = _variant("toy_pool", "FCFS victim")
    data, trace = payload(sc, block_map=True)
    for step in range(0, trace.num_steps, 7):
        shown = state_at(data, step)
        queues = queues_after_step(sc.config, sc.requests, step)
        lo, hi = trace.sched_offsets[step], trace.sched_offsets[step + 1]
        assert [b[0] for b in shown["batch"]] == [trace.request_ids[r] for r in trace.sched_rows[lo:hi]]
        assert [b[1] for b in shown["batch"]] == trace.sched_tokens[lo:hi].tolist()
        assert shown["waiting"] == queues["waiting"][:10]
        assert shown["counts"]["used"] == trace.steps["used_blocks"][step]
        assert shown["counts"]["free_after"] == trace.steps["free_blocks_after"][step]
    assert any("D preempted: KV pool full" in line for line in state_at(data, 113)["lines"])
    assert 113 in data["jumps"] and 145 in data["jumps"]


def test_a_running_request_the_step_gave_no_tokens_is_shown_as_such():
    sc = Scenario("self", EngineConfig(num_blocks=3, max_num_seqs=4, policy="priority"),
                  (R("H", 0, 10, 5, priority=0), R("L", 0, 15, 5, priority=5), R("M", 1, 10, 5, priority=0)))
    shown = state_at(payload(sc)[0], 2)
    assert [b[0] for b in shown["batch"]] == ["H"] and shown["idle"] == ["M"]
    assert shown["counts"]["preempted"] == 1  # the player words M's empty step: scheduling stopped at a preemption
    assert any(line.startswith("L preempted: KV pool full: itself needed a new block") for line in shown["lines"])


def test_a_swapped_request_that_cannot_come_back_is_not_called_next_in_line():
    data, _ = payload(_variant("recompute_vs_swap", "swap"))
    shown = state_at(data, 103)
    assert shown["swapped"] == ["victim"]
    assert any(line.startswith("victim is not swapped back in yet: needs") for line in shown["lines"])
    assert not any("victim is next in line" in line for line in shown["lines"])


def test_a_starvation_guard_promotion_is_explained():
    data, _ = payload(_variant("starvation", "SJF + guard"))
    assert ("long promoted: waited 200 steps (starvation guard threshold: 200): moved ahead of every request not "
            "promoted, for 600 steps of running") in state_at(data, 201)["lines"]


def test_request_ids_are_sent_as_data_exactly_as_typed():
    sc = Scenario("md", EngineConfig(num_blocks=100, max_num_seqs=1),
                  (R("[a](https://e.com)", 0, 8, 2), R("<b>x</b>", 0, 8, 2)))
    data, _ = payload(sc)
    assert sorted(data["ids"].values()) == ["<b>x</b>", "[a](https://e.com)"]  # the browser writes them as text


def test_run_lengths_round_trip():
    import numpy as np
    values = np.array([3, 3, 3, 1, 1, 4, 3])
    assert timeline.run_lengths(values) == [3, 3, 1, 2, 4, 1, 3, 1]
    assert unrun(timeline.run_lengths(values)) == values.tolist()
    assert timeline.run_lengths(np.array([])) == []


def test_the_player_starts_at_the_first_preemption_else_refusal_else_admission():
    toy = simulate(*_cfg_reqs(_variant("toy_pool", "FCFS victim")))
    assert timeline.default_step([toy]) == 113
    lone = simulate(EngineConfig(num_blocks=100), [R("x", 3, 8, 2)])
    assert timeline.default_step([lone]) == 3  # nothing refused: the first admission


def test_a_windows_payload_stays_small():
    data, _ = payload(_variant("starvation", "FCFS"))
    assert data["num_steps"] == 5401 and (data["first"], data["end"]) == (0, 2000)
    assert len(json.dumps(data)) < 200_000  # bytes, for 2,000 steps of a busy queue


def _cfg_reqs(sc: Scenario):
    return sc.config, sc.requests
