"""Scenario files (docs/SCENARIO.md#errors): validation with messages naming the field, dump/load round trips, and the
command line ``python -m sim run FILE [--out RESULT] [--steps]`` (exit 0 ok, 2 invalid scenario, 3 cannot finish)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sim import ClientSpec, EngineConfig, ModelSpec, RequestSpec, Scenario, ScenarioError, WorkloadSpec, presets
from sim import scenario as scenario_module
from sim.config import MODELS, CostModel
from sim.events import over_kv_pool, over_max_model_len, over_token_budget
from sim.request import StopType
from sim.scenario import dumps, load, loads, request_from_dict, requests_from_list, scenario_from_dict, scenario_to_dict
from sim.workload import generate
from tests.sim.factories import REPO_ROOT, VLLM_SCENARIOS_DIR, vllm_scenario_paths

BASE: dict[str, Any] = {
    "name": "tiny",
    "config": {"num_blocks": 8, "block_size": 4},
    "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2}],
}


def _tiny(**changes: Any) -> EngineConfig:
    """BASE's engine (with ``changes``): the figures of a refusal's sentence (``sim.events``, its one home)."""
    return EngineConfig(num_blocks=8, block_size=4, **changes)


def _without_requests(workload: Any):
    def change(d):
        del d["requests"]
        d["workload"] = workload
    return change


# (case id, change to BASE, text the one-line message must contain)
INVALID = [
    ("unknown top-level key", lambda d: d.update(foo=1), "scenario: unknown key 'foo'"),
    ("unknown config key", lambda d: d["config"].update(num_block=3), "config: unknown key 'num_block'"),
    ("unknown request key", lambda d: d["requests"][0].update(prompt=3), "requests[0]: unknown key 'prompt'"),
    ("config wrong type", lambda d: d["config"].update(num_blocks="8"), "config.num_blocks: must be an integer"),
    ("config float for int", lambda d: d["config"].update(num_blocks=8.0), "config.num_blocks: must be an integer"),
    ("config bool for int", lambda d: d["config"].update(num_blocks=True), "config.num_blocks: must be an integer"),
    ("config bool wrong type", lambda d: d["config"].update(enable_prefix_caching="yes"),
     "config.enable_prefix_caching: must be true or false"),
    ("request wrong type", lambda d: d["requests"][0].update(prompt_len="4"), "prompt_len: must be an integer"),
    ("zero num_blocks", lambda d: d["config"].update(num_blocks=0), "config.num_blocks: must be between 1 and"),
    ("negative block_size", lambda d: d["config"].update(block_size=-1), "config.block_size: must be between 1"),
    ("zero max_num_seqs", lambda d: d["config"].update(max_num_seqs=0), "config.max_num_seqs: must be between 1"),
    ("zero token budget", lambda d: d["config"].update(max_num_batched_tokens=0),
     "config.max_num_batched_tokens: must be between 1"),
    ("zero prompt", lambda d: d["requests"][0].update(prompt_len=0), "prompt_len: must be between 1"),
    ("negative output", lambda d: d["requests"][0].update(output_len=-1), "output_len: must be between 1"),
    ("zero max_tokens", lambda d: d["requests"][0].update(max_tokens=0), "max_tokens: must be between 1"),
    ("watermark out of range", lambda d: d["config"].update(watermark=1.0),
     "config.watermark: must be >= 0.0 and < 1.0, got 1.0"),
    ("max_model_len over the budget without chunking",
     lambda d: d["config"].update(chunked_prefill=False, max_num_batched_tokens=64, max_model_len=100),
     "config.max_model_len: must be at most max_num_batched_tokens (64) when chunked_prefill is off, got 100"),
    ("max_model_len over the model's context", lambda d: d["config"].update(model="qwen2.5-7b", max_model_len=40_000),
     "config.max_model_len: must be at most 32,768, the context length of Qwen2.5 7B (model.max_position_embeddings)"),
    ("negative max_model_len", lambda d: d["config"].update(max_model_len=-1),
     "config.max_model_len: must be between 0 and"),
    ("prompt over max_model_len", lambda d: d["config"].update(max_model_len=3),
     "requests[0] (id 'a'): " + over_max_model_len(_tiny(max_model_len=3), 4)),
    ("zero client weight", lambda d: d["config"].update(client_weights={"a": 0}), "config.client_weights[a]"),
    # prompt 100 + 2 out: ceil(101 / 4) = 26 blocks > 8.
    ("never fits the pool", lambda d: d["requests"][0].update(prompt_len=100),
     "requests[0] (id 'a'): " + over_kv_pool(_tiny(), 26, 100, 2)),
    ("prompt over the budget without chunking", lambda d: (d["config"].update(chunked_prefill=False,
                                                                               max_num_batched_tokens=3)),
     "requests[0] (id 'a'): " + over_token_budget(_tiny(chunked_prefill=False, max_num_batched_tokens=3), 4)),
    ("duplicate ids", lambda d: d["requests"].append(dict(d["requests"][0])), "requests[1].id: duplicate request id"),
    ("bad policy", lambda d: d["config"].update(policy="sjn"),
     "config.policy: 'sjn' is not one of: fcfs, priority, sjf, sjf_predicted, vtc, lcf"),
    ("bad preemption mode", lambda d: d["config"].update(preemption_mode="drop"), "config.preemption_mode"),
    ("bad stop check", lambda d: d["config"].update(stop_check="never"), "config.stop_check"),
    ("bad stop type", lambda d: d["requests"][0].update(stop="regex"), "stop_type must be 'token' or 'string'"),
    ("abort before arrival", lambda d: d["requests"][0].update(arrival_step=3, abort_step=1),
     "abort_step: must be >= 3"),
    ("prefix_len without group", lambda d: d["requests"][0].update(prefix_len=2), "prefix_len needs a prefix_group"),
    ("missing request field", lambda d: d["requests"][0].pop("output_len"), "requests[0].output_len: required"),
    ("empty id", lambda d: d["requests"][0].update(id=""), "request id: must be a non-empty string"),
    ("empty requests", lambda d: d.update(requests=[]), "requests: must be a non-empty list"),
    ("request not an object", lambda d: d.update(requests=[3]), "requests[0]: must be a JSON object"),
    ("missing config", lambda d: d.pop("config"), "config: required"),
    ("config not an object", lambda d: d.update(config=[]), "config: must be a JSON object"),
    ("missing num_blocks", lambda d: d["config"].pop("num_blocks"), "config.num_blocks: required"),
    ("unknown model", lambda d: d["config"].update(model="gpt"), "config.model: 'gpt' is not one of"),
    ("bad cost", lambda d: d["config"].update(cost={"step_base_ms": 0}),
     "config.cost.step_base_ms: must be >= 0.001 and <= 60000.0, got 0"),
    # Type-valid but absurd: a 10**12-layer model or a 1e-300 GB/s link made figures overflow on the pages.
    ("huge model", lambda d: d["config"].update(model={"num_layers": 10**12}),
     "config.model.num_layers: must be between 1 and 1024, got 1000000000000"),
    ("crawling link", lambda d: d["config"].update(cost={"swap_bandwidth_gb_s": 1e-300}),
     "config.cost.swap_bandwidth_gb_s: must be >= 0.001 and <= 100000.0"),
    ("tiny client weight", lambda d: d["config"].update(client_weights={"x": 1e-300}),
     "config.client_weights[x]: must be >= 0.001 and <= 1000.0"),
    ("two weights for a client", lambda d: d["config"].update(client_weights=[["a", 1], ["a", 2]]),
     "config.client_weights: client 'a' is given two weights; give each client one"),
    ("unknown cost key", lambda d: d["config"].update(cost={"step_ms": 1}), "config.cost: unknown key 'step_ms'"),
    ("name not a string", lambda d: d.update(name=3), "name: must be a string, got a number"),
    ("description null", lambda d: d.update(description=None), "description: must be a string, got null"),
    ("both requests and workload", lambda d: d.update(workload={}), "requests, workload: give exactly one"),
    ("workload value", _without_requests({"num_requests": 0}), "workload.num_requests: must be between 1"),
    ("workload unknown key", _without_requests({"num_request": 5}), "workload: unknown key 'num_request'"),
    ("workload not an object", _without_requests([]), "workload: must be a JSON object"),
    ("workload generator", _without_requests({"generator": "x"}), "workload.generator: 'x' is not one of: poisson"),
    ("workload client share", _without_requests({"clients": [{"client_id": "A", "share": -1}]}),
     "workload.clients[A].share: must be >= 0.0"),
    ("workload client unknown key", _without_requests({"clients": [{"id": "A"}]}),
     "workload.clients[0]: unknown key 'id'"),
    ("workload abandon point", _without_requests({"abandon_point": "middle"}), "workload.abandon_point"),
    ("workload window too narrow", _without_requests({"num_requests": 50, "clients": [{"client_id": "A",
                                                                                        "stop_step": 2}]}),
     "workload.clients: the clients' windows close by step 2 (stop_step) after only"),
    ("workload request never fits", _without_requests({"num_requests": 5, "prompt_median": 500}),
     "workload: its request 'r0': it needs"),
    # Values too large for the simulator's arithmetic, or a run that would stop before they matter.
    ("arrival past max_steps", lambda d: d["requests"][0].update(arrival_step=10**8),
     "requests[0].arrival_step: 100,000,000, at or past max_steps (2,000,000)"),
    ("a start after any run's end", _without_requests({"clients": [{"client_id": "a", "start_step": 10**12}]}),
     "workload.clients[a].start_step: must be between 0 and 10000000, got 1000000000000"),
    ("max_steps past a trace's memory", lambda d: d["config"].update(max_steps=10**12),
     "config.max_steps: must be between 1 and 10000000, got 1000000000000"),
    ("arrival past int64", lambda d: d["requests"][0].update(arrival_step=2**63),
     "arrival_step: must be at most 1,000,000,000,000 (the simulator's limit)"),
    ("cost beyond a float's use", lambda d: d["config"].update(cost={"prefill_token_us": 1e308}),
     "config.cost.prefill_token_us: must be >= 0.0 and <= 1000000.0, got 1e+308"),
    ("on/off past int64", _without_requests({"clients": [{"client_id": "A", "on_steps": 10**19,
                                                          "off_steps": 10**19}]}),
     "workload.clients[A].on_steps: must be at most 1,000,000,000,000"),
    ("model name not a string", lambda d: d["config"].update(model={"name": [1]}),
     "config.model.name: must be a string"),
    ("workload rate too small", _without_requests({"rate_per_step": 1e-300}),
     "workload.rate_per_step: must be >= 1e-06"),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_scenarios_name_the_field(change, message):
    data = copy.deepcopy(BASE)
    change(data)
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(data)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_base_scenario_is_valid():
    sc = scenario_from_dict(copy.deepcopy(BASE))
    assert sc.config.num_blocks == 8 and sc.requests == (RequestSpec("a", 0, 4, 2),)


# ---- a file's requests, checked a column at a time -------------------------------------------------------------
EVERY_FIELD = [  # one request with only the required keys, one with every key
    {"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2},
    {"id": "b", "arrival_step": 3, "prompt_len": 20, "output_len": 7, "client": "x", "priority": -2, "abort_step": 9,
     "prefix_group": "sys", "prefix_len": 8, "max_tokens": 12, "stop": "string"},
]


def test_a_files_requests_are_checked_a_column_at_a_time_into_the_same_specs(monkeypatch):
    one_by_one = [request_from_dict(r, i) for i, r in enumerate(EVERY_FIELD)]

    def item_by_item(*_):
        raise AssertionError("took the item-by-item path")

    monkeypatch.setattr(scenario_module, "request_from_dict", item_by_item)
    specs = requests_from_list(copy.deepcopy(EVERY_FIELD))
    assert specs == one_by_one and list(map(hash, specs)) == list(map(hash, one_by_one))
    assert specs[0].stop_type is StopType.TOKEN and specs[1].stop_type is StopType.STRING  # (members, not strings)


# (key, value) breaking one of RequestSpec's rules in EVERY_FIELD's second request.
BROKEN = [
    ("id", ""), ("id", 3), ("arrival_step", -1), ("arrival_step", 1.0), ("arrival_step", True),
    ("arrival_step", 10**12 + 1), ("prompt_len", 0), ("prompt_len", 10_000_001), ("output_len", 0),
    ("output_len", "7"), ("client", ""), ("client", None), ("priority", 10**9 + 1), ("priority", -(10**9) - 1),
    ("priority", 0.5), ("abort_step", 2), ("abort_step", 10**12 + 1), ("abort_step", False), ("prefix_group", ""),
    ("prefix_group", 5), ("prefix_group", None), ("prefix_len", 21), ("prefix_len", -1), ("prefix_len", 8.0),
    ("max_tokens", 0), ("max_tokens", 10_000_001), ("max_tokens", 1.5), ("stop", "regex"), ("stop", None),
    ("stop", ["token"]),
]


@pytest.mark.parametrize(("key", "value"), BROKEN, ids=[f"{k}={v!r}" for k, v in BROKEN])
def test_a_column_at_a_time_refuses_what_one_by_one_refuses_with_its_message(key, value):
    items = copy.deepcopy(EVERY_FIELD)
    items[1][key] = value
    with pytest.raises(ScenarioError) as one:
        request_from_dict(items[1], 1)
    with pytest.raises(ScenarioError) as together:
        requests_from_list(items)
    assert str(together.value) == str(one.value)


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    ("", "not valid JSON: Expecting value at line 1 column 1"),
    ("[]", "scenario: must be a JSON object, got a list"),
    ("null", "scenario: must be a JSON object, got null"),
    ("1" * 5000, "not valid JSON here: Exceeds the limit (4300 digits)"),
    ("[" * 100_000, "not valid JSON here: nested too deeply"),
    # A key written twice would otherwise keep its last value without a word.
    ('{"config": {"num_blocks": 100}, "config": {"num_blocks": 1}}',
     "key 'config' appears twice in one JSON object; write each setting once"),
    # Half a surrogate pair is valid JSON but not text: the page, a CSV or a terminal cannot show it.
    ('{"name": "bad \\udfff", "config": {"num_blocks": 8}, "requests": []}',
     "name: holds an unpaired surrogate escape (\\ud800-\\udfff), not text"),
    ('{"config": {"num_blocks": 8}, "requests": [{"id": "a", "arrival_step": 0, "prompt_len": 4, "output_len": 2, '
     '"client": "\\ud83d"}]}', "requests[0].client: holds an unpaired surrogate escape"),
    # The character itself in the text, no escape (a str made in Python; a UTF-8 file cannot hold one).
    ('{"name": "bad \udfff", "config": {"num_blocks": 8}, "requests": []}',
     "name: holds an unpaired surrogate escape (\\ud800-\\udfff), not text"),
])
def test_bad_json(text, message):
    with pytest.raises(ScenarioError) as err:
        loads(text)
    assert message in str(err.value)


def test_a_whole_surrogate_pair_is_text():
    text = '{"config": {"num_blocks": 8}, "requests": [{"id": "\\ud83d\\ude00", "arrival_step": 0, "prompt_len": 4, ' \
           '"output_len": 2}]}'
    assert loads(text).requests[0].request_id == "\U0001F600"


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read the file: No such file or directory"):
        load(tmp_path / "missing.json")


def test_not_utf8(tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ScenarioError, match="not a UTF-8 text file"):
        load(path)


def test_a_byte_order_mark_is_fine(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(BASE).encode())  # as Windows Notepad saves UTF-8
    assert load(path).config.num_blocks == 8


# ---- round trips ------------------------------------------------------------------------------------------------
def test_round_trip_explicit_requests():
    config = EngineConfig(
        num_blocks=64, block_size=8, max_num_seqs=3, max_num_batched_tokens=100, policy="vtc",
        max_model_len=90, enable_prefix_caching=True, chunked_prefill=False, watermark=0.1, preemption_mode="swap",
        num_cpu_blocks=9,
        abort_on_disconnect=False, disconnect_detect_delay_steps=2, timeout_steps=50, stop_check="at_max_tokens",
        prediction_error_sigma=1.5, starvation_threshold_steps=7, priority_quantum_steps=3, input_weight=0.5,
        output_weight=4.0, client_weights={"x": 2.0}, rate_limit_max_requests=2, rate_limit_window_steps=30, seed=9,
        model=ModelSpec("Tiny", 2, 2, 64, 1, 4096), cost=CostModel(step_base_ms=1.5), max_steps=1234)
    requests = (
        RequestSpec("a", 0, 10, 5),
        RequestSpec("b", 3, 20, 7, client_id="x", priority=-2, abort_step=9, prefix_group="sys", prefix_len=8,
                    max_tokens=12, stop_type="string"),
    )
    sc = Scenario("Everything", config, requests, description="all fields set")
    assert scenario_from_dict(scenario_to_dict(sc)) == sc
    assert loads(dumps(sc)) == sc


def test_round_trip_named_model():
    sc = Scenario("70B", EngineConfig(num_blocks=8, model=MODELS["llama-3.1-70b"]), (RequestSpec("a", 0, 4, 2),))
    data = scenario_to_dict(sc)
    assert data["config"]["model"] == "llama-3.1-70b"
    assert loads(json.dumps(data)) == sc


def test_round_trip_workload():
    workload = WorkloadSpec(num_requests=30, rate_per_step=0.3, prompt_median=12, output_median=9, abandon_rate=0.2,
                            abandon_point="late", prefix_len=8, seed=4,
                            clients=(ClientSpec("A", share=0.7, on_steps=20, off_steps=10),
                                     ClientSpec("B", share=0.3, start_step=5, priority=1, output_median=20)))
    sc = Scenario("Generated", EngineConfig(num_blocks=200), tuple(generate(workload)), workload=workload)
    data = scenario_to_dict(sc)
    assert "requests" not in data and data["workload"]["seed"] == 4
    back = loads(json.dumps(data))
    assert back == sc
    assert back.requests == sc.requests  # regenerated from the seed


@pytest.mark.parametrize("key", list(presets.all_presets()))
def test_round_trip_presets(key):
    sc = presets.get(key).scenario
    assert loads(dumps(sc)) == sc


def test_vllm_scenario_files_round_trip():
    for path in vllm_scenario_paths():
        sc = load(path)
        assert loads(dumps(sc)) == sc


# ---- the command line -------------------------------------------------------------------------------------------
REQUEST_FIELDS = {"id", "client", "arrival_step", "first_scheduled_step", "first_token_step", "finish_step",
                  "num_output_tokens", "num_preemptions", "preempted_at_steps", "resumed_at_steps", "final_status",
                  "finish_reason", "wasted_tokens"}
STEP_FIELDS = {"step", "time_ms", "scheduled", "preempted", "finished", "free_blocks", "num_waiting", "num_running"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)


def _write(tmp_path: Path, data: Any, name: str = "scenario.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_cli_run_writes_the_documented_result(tmp_path):
    # Two requests, one slot: a (prompt 4, 2 tokens) runs steps 0-1, b (prompt 4, 3 tokens) steps 2-4.
    data = copy.deepcopy(BASE)
    data["config"]["max_num_seqs"] = 1
    data["requests"].append({"id": "b", "arrival_step": 0, "prompt_len": 4, "output_len": 3, "client": "B"})
    out = tmp_path / "result.json"
    done = _cli("run", str(_write(tmp_path, data)), "--out", str(out), "--steps")
    assert done.returncode == 0, done.stderr
    assert "2 requests, 5 steps, 0 preemptions" in done.stdout
    result = json.loads(out.read_text())
    assert set(result) >= {"requests", "summary", "steps"}
    assert all(set(r) >= REQUEST_FIELDS for r in result["requests"])
    b = result["requests"][1]
    assert (b["id"], b["client"], b["first_scheduled_step"], b["finish_step"], b["final_status"],
            b["finish_reason"]) == ("b", "B", 2, 4, "FINISHED_LENGTH_CAPPED", "length")
    assert len(result["steps"]) == 5 and all(set(s) >= STEP_FIELDS for s in result["steps"])
    # Step 1: a decodes 1 token and finishes: its 2 blocks (4 + 1 = 5 tokens) free at the end: 8 free; b waits.
    s1 = result["steps"][1]
    assert (s1["scheduled"], s1["finished"], s1["free_blocks"], s1["num_waiting"], s1["num_running"]) == (
        [["a", 1]], ["a"], 8, 1, 1)
    assert result["steps"][2]["scheduled"] == [["b", 4]]
    # Prefill steps cost 5.75 + 4 x 0.016 ms, decode steps 5.75 + 0.006 ms: end of step 1 = 5.814 + 5.756.
    assert s1["time_ms"] == pytest.approx(11.57)
    assert result["summary"]["finish_steps"]["mean"] == 3.5  # (2 + 5) / 2


def test_cli_writes_one_request_and_one_step_a_line(tmp_path):
    # BASE (a: 2 steps) runs 2 steps: the file is one JSON document whose records are one line each (read and grep
    # a request's whole outcome), the summary indented a key a line.
    out = tmp_path / "result.json"
    done = _cli("run", str(_write(tmp_path, BASE)), "--out", str(out), "--steps")
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    result = json.loads(text)
    lines = text.splitlines()
    assert [json.loads(line.strip().rstrip(",")) for line in lines if line.startswith('  {"id": ')] == (
        result["requests"])
    assert [json.loads(line.strip().rstrip(",")) for line in lines if line.startswith('  {"step": ')] == (
        result["steps"])
    assert len(result["steps"]) == 2
    assert ' "summary": {' in lines and '  "num_requests": 1,' in lines


def test_cli_without_steps_prints_json_and_has_no_steps(tmp_path):
    done = _cli("run", str(_write(tmp_path, BASE)))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "steps" not in result and result["requests"][0]["id"] == "a"


def test_cli_runs_a_vllm_example(tmp_path):
    out = tmp_path / "r.json"
    done = _cli("run", str(VLLM_SCENARIOS_DIR / "a_hol_fcfs.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["summary"]["finish_steps"]["mean"] == 1100.0


@pytest.mark.parametrize(("content", "field"), [
    ({**BASE, "config": {"num_blocks": 0}}, "config.num_blocks"),
    ("{not json", "not valid JSON"),
])
def test_cli_invalid_scenario_exits_2_with_one_line(tmp_path, content, field):
    path = _write(tmp_path, content)
    done = _cli("run", str(path), "--out", str(tmp_path / "r.json"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and field in lines[0]
    assert not (tmp_path / "r.json").exists()


def test_cli_missing_file_exits_2(tmp_path):
    done = _cli("run", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "No such file or directory" in done.stderr


def test_cli_exits_3_when_max_steps_is_too_small(tmp_path):
    # a needs 2 steps; max_steps 1 stops the run.
    data = copy.deepcopy(BASE)
    data["config"]["max_steps"] = 1
    done = _cli("run", str(_write(tmp_path, data)))
    assert done.returncode == 3
    assert "max_steps=1" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_cli_writes_null_for_statistics_over_no_request(tmp_path):
    # The only request's client leaves at its arrival step: aborted at step 0, nobody served -> no finish statistic.
    data = copy.deepcopy(BASE)
    data["requests"][0]["abort_step"] = 0
    out = tmp_path / "r.json"
    done = _cli("run", str(_write(tmp_path, data)), "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["summary"]["finish_steps"] == {"count": 0, "mean": None, "p50": None, "p99": None, "max": None}
    assert (result["requests"][0]["final_status"], result["requests"][0]["finish_step"]) == ("FINISHED_ABORTED", 0)


def test_cli_bench_prints_best_and_median_per_file(tmp_path):
    # The vLLM example (one slot, 1,000/100/100-step answers) runs 1,200 steps and preempts nobody.
    done = _cli("bench", str(VLLM_SCENARIOS_DIR / "a_hol_fcfs.json"), "--repeat", "3", "--seconds", "0")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.strip().splitlines()
    assert header.split() == ["scenario", "requests", "steps", "preempt", "wall", "s", "median", "s", "runs",
                              "steps/s", "peak", "MB"]
    name, requests, steps, preempt, best, median, runs, steps_per_s, peak_mb = row.split()
    assert (name, requests, steps, preempt, runs) == ("a_hol_fcfs", "3", "1200", "0", "3")
    assert 0 < float(best) <= float(median) and float(steps_per_s) > 0 and float(peak_mb) > 0


def test_cli_bench_keeps_running_until_its_seconds_have_passed():
    # A ~3 ms scenario asked for 2 runs over at least 1 s runs many more times (and never past MAX_RUNS). (At 0.3 s
    # a loaded 2-core machine once fitted only 2 runs in: a run's first milliseconds can wait ~0.15 s for a core.)
    done = _cli("bench", str(VLLM_SCENARIOS_DIR / "a_hol_fcfs.json"), "--repeat", "2", "--seconds", "1")
    assert done.returncode == 0, done.stderr
    runs = int(done.stdout.strip().splitlines()[1].split()[6])
    assert 2 < runs <= 200


@pytest.mark.parametrize("seconds", ["-1", "x", "nan", "inf", "3601"])
def test_cli_bench_refuses_seconds_out_of_range(seconds):
    done = _cli("bench", "--seconds", seconds)
    assert done.returncode == 2
    assert f"argument --seconds: must be a number of seconds from 0 to 3600, got '{seconds}'" in done.stderr


@pytest.mark.parametrize("repeat", ["0", "-1", "x"])
def test_cli_bench_refuses_a_repeat_below_one(repeat):
    done = _cli("bench", "--repeat", repeat)
    assert done.returncode == 2
    assert f"argument --repeat: must be a whole number >= 1, got '{repeat}'" in done.stderr


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_cli_refuses_an_out_path_it_cannot_write_before_running(tmp_path, where):
    out = tmp_path if where == "dir" else tmp_path / "nowhere" / "r.json"
    done = _cli("run", str(_write(tmp_path, copy.deepcopy(BASE))), "--out", str(out))
    assert done.returncode == 2 and done.stdout == ""
    expected = "is a directory; give a file name" if where == "dir" else f"the folder {out.parent} does not exist"
    assert done.stderr.strip() == f"error: --out {out}: {expected}"


# ---- I/O that fails: one line and exit 2, never a traceback ------------------------------------------------------
def test_an_output_device_that_refuses_writes_is_one_line_and_exit_2():
    done = _cli("run", "scenarios/article_hol.json", "--out", "/dev/full")  # (Linux: every write fails, ENOSPC)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --out /dev/full: could not write the result: No space left on device"]


def test_a_reader_that_stops_early_is_one_line_and_exit_2():
    # `python -m sim run X --steps | head -1`: the reader is gone before the result (~1 MB, past any pipe buffer)
    # is written.
    proc = subprocess.Popen([sys.executable, "-m", "sim", "run", "scenarios/busy_server_sjf.json", "--steps"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 2, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [
        "error: stdout closed before the result was written (a reader that stopped early?)"]


def test_a_file_past_the_size_limit_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    monkeypatch.setattr(scenario_module, "MAX_FILE_BYTES", 1000)
    path = _write(tmp_path, " " * 1001)
    with pytest.raises(ScenarioError, match=r"larger than 1,000 bytes, the most a scenario file may hold"):
        load(path)
    path = _write(tmp_path, json.dumps(BASE).ljust(1000))  # at the limit: read and run
    assert load(path).config.num_blocks == 8


def test_an_endless_input_is_refused():
    done = _cli("run", "/dev/zero")  # reads at most the limit, then says so
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: /dev/zero: larger than 268,435,456 bytes, the most a scenario file may hold (use a workload "
        "generator instead of listing the requests)"]
