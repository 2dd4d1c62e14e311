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


def batch_at(sparse: dict, i: int) -> list[int]:
    last: list[int] = []
    for k in range(i + 1):
        d = sparse.get(str(k))
        if d is None:
            continue
        if "f" in d:
            last = d["f"]
            continue
        gone = set(d.get("d", []))
        kept = [v for j in range(0, len(last), 3) if last[j] not in gone for v in last[j : j + 3]]
        c = d.get("c", [])
        for j in range(0, len(c), 3):
            kept[3 * c[j] + 1], kept[3 * c[j] + 2] = c[j + 1], c[j + 2]
        last = kept + d.get("a", [])
    return last


def events_at(events: dict, i: int) -> list[int]:
    v = events.get(str(i), [])
    return events_at(events, i - 1) if v == 0 else v


def state_at(data: dict, step: int) -> dict:
    """What the player shows for ``step`` of one run (its payload ``data``)."""
    i = step - data["first"]
    ids = data["ids"]
    batch = batch_at(data["batch"], i)
    evs = events_at(data["events"], i)
    step_ms = unrun(data["step_ms"])
    return {
        "batch": [(ids[str(r)], t, k) for r, t, k in zip(batch[0::3], batch[1::3], batch[2::3], strict=True)],
        "waiting": [ids[str(r)] for r in carried(data["queues"]["waiting_head"], i)],
        "idle": [ids[str(r)] for r in carried(data["queues"]["idle_running"], i)],
        "swapped": [ids[str(r)] for r in carried(data["queues"]["swapped"], i)],
        "counts": {k: unrun(v)[i] for k, v in data["counts"].items()},
        "step_ms": step_ms[i],
        "start_ms": data["start_ms"] + sum(step_ms[:i]),
        "lines": [f"{ids[str(row)]} {data['texts'][label]}: {data['texts'][why]}".replace(" : ", " ")
                  for row, label, why in zip(evs[0::4], evs[1::4], evs[2::4], strict=True)],
        "arrived": [ids[str(r)] for r in data["arrived"].get(str(i), [])],
    }


def payload(sc: Scenario, label: str = "run", block_map: bool = False, whole: bool = False) -> tuple[dict, object]:
    trace = simulate(sc.config, sc.requests)
    window = (0, trace.num_steps) if whole else window_around(0, trace.num_steps)
    pb = record_window(sc.config, sc.requests, *window, block_map=block_map)
    data = timeline.run_payload(label, trace, pb)
    json.dumps(data)  # what the component sends must be plain JSON
    return data, trace


def _variant(key: str, label: str) -> Scenario:
    preset = presets.get(key)
    overrides = dict(preset.variants)[label]
    return preset.scenario.with_config(**overrides) if overrides else preset.scenario


def test_the_articles_one_slot_example_step_by_step():
    data, trace = payload(_variant("article_hol", "FCFS"), "FCFS", whole=True)
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
    assert any(line.startswith("short1 admitted with its whole prompt of 4 tokens") for line in handover["lines"])
    assert handover["start_ms"] == pytest.approx(float(trace.start_ms(1000)), abs=0.01)  # the clock, from step_ms


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


def test_a_batch_is_sent_as_its_change_from_the_step_before():
    assert timeline.batch_delta([1, 1, 2, 2, 1, 2], [2, 1, 2, 3, 40, 0]) == {"d": [1], "a": [3, 40, 0]}
    assert timeline.batch_delta([1, 8, 1, 2, 1, 2], [1, 1, 2, 2, 1, 2]) == {"c": [0, 1, 2]}
    # a request that got no tokens last step is back in its place, not at the end: the whole list
    assert timeline.batch_delta([1, 1, 2], [3, 1, 2, 1, 1, 2]) == {"f": [3, 1, 2, 1, 1, 2]}
    for before, now in (([1, 1, 2, 2, 1, 2], [2, 1, 2, 3, 40, 0]), ([1, 8, 1], [1, 1, 2, 5, 8, 1])):
        assert batch_at({"0": {"f": before}, "1": timeline.batch_delta(before, now)}, 1) == now


def test_run_lengths_round_trip():
    import numpy as np
    values = np.array([3, 3, 3, 1, 1, 4, 3])
    assert timeline.run_lengths(values) == [3, 3, 1, 2, 4, 1, 3, 1]
    assert unrun(timeline.run_lengths(values)) == values.tolist()
    assert timeline.run_lengths(np.array([])) == []


def test_the_player_starts_at_the_first_preemption_else_refusal_else_admission():
    toy = simulate(*_cfg_reqs(_variant("toy_pool", "FCFS victim")))
    assert timeline.earliest([timeline.first_decisions(toy)]) == 113
    lone = simulate(EngineConfig(num_blocks=100), [R("x", 3, 8, 2)])
    assert timeline.earliest([timeline.first_decisions(lone)]) == 3  # nothing refused: the first admission


def test_a_windows_payload_stays_small():
    data, _ = payload(_variant("starvation", "FCFS"))
    assert data["num_steps"] == 5401 and (data["first"], data["end"]) == (0, 1000)
    assert len(json.dumps(data)) < 60_000  # bytes, for 1,000 steps of a busy queue


def _cfg_reqs(sc: Scenario):
    return sc.config, sc.requests


@pytest.mark.parametrize(("key", "label"), [("article_fairness", "VTC"), ("busy_server", "SJF (predicted)"),
                                            ("prefix_cache", "prefix caching on"), ("long_prompt", None)])
def test_every_steps_batch_and_clock_decode_to_the_trace(key, label):
    preset = presets.get(key)
    label = label or preset.variants[-1][0]
    data, trace = payload(_variant(key, label))
    step_ms = unrun(data["step_ms"])
    clock = data["start_ms"]
    for i in range(data["end"] - data["first"]):
        t = data["first"] + i
        lo, hi = trace.sched_offsets[t], trace.sched_offsets[t + 1]
        want = [v for r, k, n in zip(trace.sched_rows[lo:hi], trace.sched_kind[lo:hi], trace.sched_tokens[lo:hi],
                                     strict=True) for v in (int(r), int(n), int(k))]
        assert batch_at(data["batch"], i) == want, t
        assert clock == pytest.approx(float(trace.start_ms(t)), abs=0.05), t
        clock += step_ms[i]


def test_without_a_replay_the_trace_still_gives_batch_counts_and_decisions():
    """Before the player has been in view, its data comes from the trace alone: no queue order, no block map."""
    sc = _variant("recompute_vs_swap", "swap")
    trace = simulate(sc.config, sc.requests)
    full, _ = payload(sc, block_map=True)
    light = timeline.run_payload("run", trace, None, full["first"], full["end"])
    assert light["queues"] is None and light["blocks"] is None
    for key in ("batch", "counts", "step_ms", "events", "arrived", "texts", "jumps", "start_ms"):
        assert light[key] == full[key], key
    lines = state_at({**light, "queues": full["queues"]}, 103)["lines"]  # (the swapped wording needs no replay)
    assert any(line.startswith("victim is not swapped back in yet: needs") for line in lines)
    with pytest.raises(ValueError, match="first_step and end_step"):
        timeline.run_payload("run", trace, None)


def test_the_components_data_is_the_frame_and_each_runs_window_as_one_json_document():
    from ui import player  # (imports Streamlit's component registry: only in this test)

    sc = presets.get("article_hol").scenario
    trace = simulate(sc.config, sc.requests)
    windows = [(0, 10, json.dumps(timeline.run_payload(label, trace, None, 0, 10)).encode()) for label in "AB"]
    frame = {**timeline.payload_frame("steps", 3), "id": "x#0-10", "detail": False}
    data = json.loads(player.component_data(frame, windows))
    assert [r["label"] for r in data["runs"]] == ["A", "B"]  # in order, each whole
    assert data["runs"][0] == json.loads(windows[0][2])
    assert {k: data[k] for k in frame} == json.loads(json.dumps(frame))  # and the frame's every key


def test_a_player_not_yet_seen_gets_a_preview_window_and_once_seen_the_full_one():
    from ui import player

    sc = presets.get("article_hol").scenario  # 1,200 steps
    trace = simulate(sc.config, sc.requests)
    first, end, raw = player.window_payload("FCFS", sc, trace, 1000, block_map=False, detail=False)
    preview = json.loads(raw)
    assert (first, end) == (preview["first"], preview["end"]) == (950, 1050)  # holds the step, a little ahead
    assert preview["queues"] is None
    first, end, raw = player.window_payload("FCFS", sc, trace, 1000, block_map=False, detail=True)
    full = json.loads(raw)
    assert (first, end) == (full["first"], full["end"]) == (200, 1200) and full["queues"] is not None
    for i in (0, 49, 99):  # the preview's steps read as the full window's do
        assert batch_at(preview["batch"], i) == batch_at(full["batch"], 750 + i)
        assert unrun(preview["counts"]["waiting"])[i] == unrun(full["counts"]["waiting"])[750 + i]
