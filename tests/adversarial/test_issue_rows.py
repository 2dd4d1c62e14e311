"""Issue 19's table, one test per row: each hostile or oversized input is refused before any work with one line
naming the field, the figure and the limit, or runs within its budget. Where the real input is huge the test
builds it only as far as the refusal needs (a refusal comes before the workload is drawn or the run starts);
benchmarks/adversarial.py runs the real ones and prints their time and peak RSS."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from sim import EngineConfig, RequestSpec, cost_estimate, scenario
from sim.__main__ import main as cli
from sim.cost_estimate import CLI_LIMITS, PAGE_LIMITS
from sim.engine import Engine, StepLimitError, simulate
from sim.scenario import ScenarioError

LONG_MODEL = {"name": "long context", "max_position_embeddings": 10_000_000}


def _requests(n: int, *, clients: bool = False, prompt: int = 20, output: int = 20, **extra) -> list[dict]:
    return [{"id": f"r{i}", "arrival_step": i // 10, "prompt_len": prompt, "output_len": output,
             **({"client": f"c{i}"} if clients else {}), **extra} for i in range(n)]


def _text(config: dict, requests: list[dict] | None = None, workload: dict | None = None) -> str:
    body = {"requests": requests} if requests is not None else {"workload": workload}
    return json.dumps({"name": "hostile", "config": {"num_blocks": 20_000, **config}, **body})


def _refusal(text: str, limits=CLI_LIMITS) -> str:
    with pytest.raises(ScenarioError) as e:
        scenario.loads(text, limits)
    return str(e.value)


@pytest.fixture
def no_generation(monkeypatch):
    """A workload refused up front is never drawn: drawing it fails the test."""
    def refuse(spec):
        raise AssertionError(f"generate() ran for {spec.num_requests} requests")
    monkeypatch.setattr(scenario, "generate", refuse)


def test_one_client_per_request_runs_on_the_cli(tmp_path):
    # the 2,000 clients, 2,000 requests (4.8 GB then, a MemoryError; refused at 1,000 clients since): each
    # client costs what it does, not a column of every step (sparse per-client values past DENSE_CLIENTS_MAX)
    path, out = tmp_path / "clients.json", tmp_path / "result.json"
    path.write_text(_text({}, _requests(2_000, clients=True)))
    assert cli(["run", str(path), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["requests"]) == 2_000 and result["summary"]["num_finished"] == 2_000
    # the 20,000 (benchmarks/adversarial.py runs it: ~1.3 s, ~155 MB peak RSS) is within every limit
    many = scenario.loads(_text({}, _requests(20_000, clients=True)), CLI_LIMITS)
    estimate = cost_estimate.of_requests(many.config, many.requests)
    assert estimate.num_clients == 20_000 and estimate.peak_bytes < CLI_LIMITS.max_bytes / 2


def test_one_client_per_request_past_the_clients_limit_is_refused():
    # past the CLI's 100,000 clients (a page's 100)
    assert _refusal(_text({}, _requests(100_001, clients=True))) == (
        "clients: it has 100,001 distinct client ids, and the CLI runs at most 100,000; shorten the workload or "
        "split it into several files")
    assert _refusal(_text({}, _requests(101, clients=True)), PAGE_LIMITS).startswith(
        "clients: it has 101 distinct client ids, and this app runs at most 100; run it with `python -m sim run")


def test_a_workload_of_thousands_of_clients_runs():
    # the 119 KB file of 5,000 clients (12.8 GB and 72 s then): drawn and within the CLI's limits; its run
    # (benchmarks/adversarial.py: ~1.7 s, ~250 MB peak RSS) is pinned here by a tenth of it
    clients = [{"client_id": f"c{i}", "share": 1.0} for i in range(5_000)]
    sc = scenario.loads(_text({}, workload={"num_requests": 5_000, "clients": clients}), CLI_LIMITS)
    assert len({r.client_id for r in sc.requests}) > 3_000
    small = scenario.loads(_text({}, workload={"num_requests": 500, "clients": clients[:500]}), CLI_LIMITS)
    trace = simulate(small.config, small.requests)
    assert trace.is_sparse and (trace.requests["finish_step"] >= 0).all()


def test_a_workload_of_clients_past_the_limit_is_refused_before_it_is_drawn(no_generation):
    clients = [{"client_id": f"c{i}"} for i in range(100_001)]
    message = _refusal(_text({}, workload={"num_requests": 5_000, "clients": clients}))
    assert message.startswith("clients: it has 100,001 distinct client ids, and the CLI runs at most 100,000")


def test_max_num_seqs_times_a_very_long_request_runs_with_one_long_table(tmp_path):
    # 4,096 slots and one 5 M-token prompt among 4,095 short requests: the old [4,096 x 312,501] table (np.full of
    # 9.5 GiB), then a refusal of its 1,280,004,096 cells; now one slot's table is long, the others 3 blocks
    requests = [*_requests(4_095), {"id": "long", "arrival_step": 0, "prompt_len": 5_000_000, "output_len": 10}]
    config = {"num_blocks": 1_000_000, "max_num_seqs": 4096, "max_num_batched_tokens": 1_000_000,
              "model": LONG_MODEL}
    text = _text(config, requests)
    loaded = scenario.loads(text, CLI_LIMITS)
    estimate = cost_estimate.of_requests(loaded.config, loaded.requests)
    assert estimate.block_table_cells == 312_501 + 4_095 * 3  # cdiv(5,000,009, 16) + cdiv(20 + 19, 16) each
    path = tmp_path / "long.json"
    path.write_text(text)
    assert cli(["run", str(path), "--out", str(tmp_path / "out.json")]) == 0
    result = json.loads((tmp_path / "out.json").read_text())
    assert {r["final_status"] for r in result["requests"]} == {"FINISHED_LENGTH_CAPPED"}


def test_many_very_long_requests_are_refused_with_the_block_tables_figure():
    # every slot's table long: 512 requests of 2 M tokens, each in a slot of its own
    requests = [{"id": f"long{i}", "arrival_step": 0, "prompt_len": 2_000_000, "output_len": 10} for i in range(512)]
    config = {"num_blocks": 1_000_000, "max_num_seqs": 512, "max_num_batched_tokens": 1_000_000,
              "model": LONG_MODEL}
    assert _refusal(_text(config, requests)).startswith(
        "block table: its block tables need 64,000,512 cells (a cell a block of its 512 longest requests, one a "
        "batch slot; the longest 125,001 blocks), and the CLI allows at most 64,000,000")


def test_a_slots_table_is_as_long_as_the_longest_request_it_has_held():
    # one very long request with max_num_seqs 4,096: one slot's table of 312,501 blocks (1.2 MB), made when it is
    # admitted, not 4,096 of them (5 GB) up front; short requests in other slots get short tables
    config = EngineConfig(num_blocks=400_000, max_num_seqs=4096, max_num_batched_tokens=1_000_000,
                          model=dataclasses.replace(EngineConfig().model, max_position_embeddings=10_000_000))
    specs = [RequestSpec("long", 0, 5_000_000, 10), *(RequestSpec(f"s{i}", 5, 20, 20) for i in range(50))]
    engine = Engine(config, specs, check_invariants=True)
    assert engine.kv.num_table_cells == 0
    engine.advance(until_step=0)
    assert engine.kv.num_table_cells == 312_501  # cdiv(5,000,000 + 10 - 1, 16)
    engine.advance()
    assert engine.kv.num_table_cells == 312_501 + 50 * 3  # the long one's slot and 50 more of 3 blocks
    assert cost_estimate.of_requests(config, specs).block_table_cells == 312_501 + 50 * 3


def test_long_tailed_generator_lengths_are_refused_before_they_are_drawn(no_generation):
    # sigma 3: the longest of 20,000 prompts reaches the 9 M cap (the 1.25 M blocks x 4,096 slots, 17 GB).
    # The block tables now hold the 4,096 longest requests (estimated 39 M cells; 28 M when drawn with seed 0):
    # within the CLI's 64 M, but the run's steps are not
    config = {"num_blocks": 1_250_000, "max_num_seqs": 4096, "max_num_batched_tokens": 100_000, "model": LONG_MODEL}
    workload = {"num_requests": 20_000, "prompt_sigma": 3.0, "prompt_max": 9_000_000, "output_sigma": 3.0,
                "output_max": 900_000, "rate_per_step": 5.0}
    message = _refusal(_text(config, workload=workload))
    assert message.startswith("memory: it needs about 1,978 MiB of memory (estimated: 20,000 requests, 1,341,902 "
                              "steps x 1 client(s)), and the CLI allows at most 1,024 MiB")


@pytest.mark.parametrize(("sigma", "max_num_seqs"), [(0.0, 64), (1.0, 256), (2.0, 512), (3.0, 1024)])
def test_a_workloads_block_table_estimate_bounds_its_drawn_requests(sigma, max_num_seqs):
    # before drawing, the top max_num_seqs of the lognormal lengths are estimated from the distribution: at least
    # what the drawn requests need (and not the longest times max_num_seqs, which refused long tails outright)
    config = scenario.config_from_dict({"num_blocks": 2_000_000, "max_num_seqs": max_num_seqs, "model": LONG_MODEL})
    workload = scenario.workload_from_dict({"num_requests": 3_000, "prompt_median": 400, "prompt_sigma": sigma,
                                            "prompt_max": 200_000, "output_median": 100, "output_sigma": sigma,
                                            "output_max": 50_000, "seed": 7})
    before = cost_estimate.of_workload(config, workload)
    drawn = cost_estimate.of_requests(config, scenario.generate(workload))
    assert drawn.block_table_cells <= before.block_table_cells <= before.num_slots * before.longest_blocks
    if 0 < sigma < 3:  # (at sigma 3 a third of the requests reach the caps: most slots do hold long ones)
        assert before.block_table_cells < before.num_slots * before.longest_blocks / 2  # (the long tail counted once)


def test_fifty_thousand_client_weights_make_a_config():
    # (was a list .count in a loop: 47 s; benchmarks/adversarial.py times it)
    weights = tuple((f"c{i}", 1.0 + i % 3) for i in range(50_000))
    config = EngineConfig(client_weights=weights)
    assert len(config.client_weights) == 50_000 and config.client_weight("c4") == 2.0
    with pytest.raises(ValueError, match="client 'c7' is given two weights"):
        EngineConfig(client_weights=(*weights, ("c7", 1.0)))


def test_a_duplicate_request_id_is_found_in_one_pass():
    specs = [RequestSpec(f"r{i}", 0, 4, 4) for i in range(50_000)] + [RequestSpec("r49999", 0, 4, 4)]
    with pytest.raises(ValueError, match="duplicate request id 'r49999'"):
        Engine(EngineConfig(), specs)


def test_a_run_allowed_ten_million_steps_is_refused_by_its_memory():
    # 10,000 answers of 1,000 tokens one at a time: ~10 M steps at ~1.3 KB each
    message = _refusal(_text({"max_num_seqs": 1, "max_steps": 10_000_000}, _requests(10_000, output=1_000)))
    assert message.startswith("memory: it needs about 12,458 MiB of memory (estimated: 10,000 requests, "
                              "10,000,000 steps x 1 client(s)), and the CLI allows at most 1,024 MiB")


def test_the_step_guard_stops_where_the_trace_would_pass_the_memory_budget():
    limits = dataclasses.replace(CLI_LIMITS, max_bytes=26_000)  # 26,000 // 1,300 bytes a step = 20 steps
    with pytest.raises(StepLimitError) as e:
        simulate(EngineConfig(max_num_seqs=1), [RequestSpec("a", 0, 4, 100)], limits=limits)
    assert str(e.value) == ("stopped after 20 steps with 1 of 1 requests unfinished: the trace of more steps with 1 "
                            "client(s) would pass the CLI's memory budget of 26,000 bytes; shorten the workload or "
                            "use fewer clients")
    assert e.value.max_steps == 20
    # with 11 clients a step costs 1,300 + 11 x 200 bytes: 7 steps
    assert cost_estimate.max_recorded_steps(11, limits) == 7


def test_a_sparse_runs_step_guard_counts_what_it_has_recorded():
    # 200 clients (sparse) that each send one request in turn: one entry pair a busy step, none an idle one. At the
    # most a step could cost (200 active clients: 1,300 + 200 x 100 bytes) 100,000 bytes would stop it after 4
    # steps; what it records lets it go on until the budget is spent.
    limits = dataclasses.replace(CLI_LIMITS, max_bytes=100_000)
    specs = [RequestSpec(f"r{i}", 30 * i, 4, 20, client_id=f"c{i}") for i in range(200)]
    config = EngineConfig(max_num_seqs=256)
    engine = Engine(config, specs, limits=limits)
    assert engine.max_steps == 100_000 // (1_300 + 2 * 50 * 200) == 4
    with pytest.raises(StepLimitError) as e:
        engine.run()
    steps, entries = engine.recorder.num_steps, engine.recorder.sparse.num_entries
    assert steps == e.value.max_steps > 50
    assert cost_estimate.BYTES_PER_STEP * steps + cost_estimate.BYTES_PER_CLIENT_ENTRY * entries <= 100_000
    assert cost_estimate.max_recorded_steps(200, limits, 200, steps, entries) == steps  # (no room for another)
    assert str(e.value).startswith(f"stopped after {steps} steps with ")


def test_longer_answers_past_the_apps_tokens_are_refused():
    # the 20,000-request upload and the answer-length slider (22 M tokens): the runner checks every run
    small = scenario.loads(_text({}, _requests(2_000, prompt=200, output=50)), PAGE_LIMITS)
    longer = [dataclasses.replace(r, output_len=r.output_len * 80) for r in small.requests]  # 2,000 x 4,200
    with pytest.raises(ScenarioError, match=r"^tokens: its requests hold 8,400,000 tokens \(prompts plus answers\), "
                                            r"and this app runs at most 8,000,000 a scenario"):
        cost_estimate.check(cost_estimate.of_requests(small.config, longer), PAGE_LIMITS)


def test_the_cli_refuses_with_exit_code_2_and_one_line(tmp_path, capsys):
    path = tmp_path / "many.json"
    path.write_text(_text({}, _requests(100_001, clients=True)))
    assert cli(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path}: clients: it has 100,001 distinct client ids, and the CLI runs at most 100,000; "
                   f"shorten the workload or split it into several files\n")


def test_a_workload_estimate_is_close_to_the_drawn_requests():
    # the estimate before drawing (means of the clipped lognormals) against the requests drawn
    sc = scenario.loads(_text({}, workload={"num_requests": 2_000, "prompt_sigma": 0.8, "output_sigma": 0.8}))
    before = cost_estimate.of_workload(sc.config, sc.workload)
    after = cost_estimate.of_requests(sc.config, sc.requests)
    assert before.num_requests == after.num_requests == 2_000
    assert abs(before.num_tokens - after.num_tokens) < 0.1 * after.num_tokens
    assert before.longest_blocks >= after.longest_blocks


def test_prefix_hashes_by_range_match_the_per_block_rule():
    config = EngineConfig(num_blocks=64, block_size=4, enable_prefix_caching=True)
    specs = [RequestSpec("a", 0, 30, 4, prefix_group="g", prefix_len=17), RequestSpec("b", 0, 30, 4),
             RequestSpec("c", 0, 30, 4, prefix_group="h", prefix_len=3)]
    kv = Engine(config, specs).kv
    for row in range(3):
        for start, end in ((0, 7), (2, 5), (4, 7), (0, 0), (5, 5)):
            assert list(kv.block_hashes(row, start, end)) == [kv.block_hash(row, j) for j in range(start, end)]
    assert np.array_equal(np.fromiter(kv.block_hashes(0, 0, 6), np.int64)[:4] < 0, [True] * 4)  # 17 // 4 shared
