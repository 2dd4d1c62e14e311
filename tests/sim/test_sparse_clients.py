"""Per-client values recorded sparsely (past ``cost_estimate.DENSE_CLIENTS_MAX`` clients; ``sparse_clients=True``
forces it) against the dense record: the same workload both ways must give the same trace, every ``clients`` column
equal element for element (``np.array_equal``), and the same requests, steps, schedule and events."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import Engine, EngineConfig, RequestSpec, Trace, cost_estimate, metrics, presets, simulate
from sim.trace import ACTIVITY_COLUMNS, CLIENT_COLUMNS, SparseClients
from sim.workload import ClientSpec, WorkloadSpec, generate
from tests.sim.factories import RETURNING, assert_same_trace, one_slot
from tests.sim.strategies import configs, requests


def both_ways(cfg: EngineConfig, reqs: list[RequestSpec], check: bool = True, **kw) -> tuple[Trace, Trace]:
    """(sparse, dense) traces of one workload; with ``check`` the sparse run checks after every step that no change
    of a counter went unrecorded (and the engine's other invariants)."""
    sparse = Engine(cfg, reqs, sparse_clients=True, check_invariants=check, **kw).run()
    dense = Engine(cfg, reqs, sparse_clients=False, **kw).run()
    assert sparse.is_sparse and not dense.is_sparse
    return sparse, dense


def assert_same_clients(sparse: Trace, dense: Trace) -> None:
    assert_same_trace(sparse, dense)  # (every clients column with np.array_equal, and the rest)
    assert sparse.events == dense.events
    assert list(sparse.clients) == list(dense.clients) == list(CLIENT_COLUMNS)
    for name, column in dense.clients.items():
        assert sparse.clients[name].dtype == column.dtype, name
        assert np.array_equal(sparse.final_client_values(name), dense.final_client_values(name)), name


@st.composite
def workloads(draw) -> tuple[EngineConfig, list[RequestSpec], bool]:
    """The general strategy with more clients and gaps between arrivals (so VTC lifts clients returning from
    idle), and long answers half the time (so the fast-forward's quiet stretches come often)."""
    reqs = draw(requests(max_requests=12, max_arrival=40, clients="abcdef"))
    if draw(st.booleans()):
        reqs = [RequestSpec(r.request_id, r.arrival_step, r.prompt_len, r.output_len * 4, client_id=r.client_id,
                            priority=r.priority, abort_step=r.abort_step, prefix_group=r.prefix_group,
                            prefix_len=r.prefix_len, stop_type=r.stop_type) for r in reqs]
    cfg = draw(configs())
    return cfg.replace(num_blocks=draw(st.integers(8, 120)), max_steps=20_000), reqs, draw(st.booleans())


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(case=workloads())
def test_a_sparse_record_reads_as_the_dense_one(case):
    cfg, reqs, fast_forward = case
    assert_same_clients(*both_ways(cfg, reqs, fast_forward=fast_forward))


@pytest.mark.slow
@pytest.mark.parametrize("key", list(presets.all_presets()))
def test_every_preset_is_the_same_both_ways(key):
    p = presets.get(key)
    for _, overrides in p.variants:
        sc = p.scenario.with_config(**overrides)
        # (with and without quiet stretches where there are several clients, as the Fairness lesson has)
        for fast_forward in (True, False) if len({r.client_id for r in sc.requests}) > 1 else (True,):
            assert_same_clients(*both_ways(sc.config, list(sc.requests), check=False, fast_forward=fast_forward))


@pytest.mark.parametrize("policy", ["vtc", "lcf", "fcfs"])
def test_a_client_returning_from_idle_is_the_same_both_ways(policy):
    sparse, dense = both_ways(one_slot(policy=policy), list(RETURNING))
    assert_same_clients(sparse, dense)
    if policy == "vtc":  # b is lifted to a's 10 at step 3 while a1 runs (tests/ui/test_lesson_fairness.py): a
        # change of b's counter with no activity of b's
        clients, b = sparse.clients, sparse.client_ids.index("b")
        assert clients["client_counters"][3].tolist() == [12, 10]
        assert (3, b) in zip(clients.change_step.tolist(), clients.change_client.tolist(), strict=True)
        assert (3, b) not in zip(clients.activity_step.tolist(), clients.activity_client.tolist(), strict=True)


def _many_clients(num_clients: int, num_requests: int, policy: str, **config) -> tuple[EngineConfig, list]:
    """A seeded workload of ``num_clients`` clients sending alike (so most of them send a few requests)."""
    workload = WorkloadSpec(num_requests=num_requests, rate_per_step=0.8, prompt_median=40, output_median=30,
                            clients=tuple(ClientSpec(f"c{i}") for i in range(num_clients)), seed=7)
    cfg = EngineConfig(num_blocks=400, block_size=16, max_num_seqs=24, max_num_batched_tokens=512, policy=policy,
                       **config)
    return cfg, generate(workload)


@pytest.mark.parametrize("policy, config", [
    ("vtc", {}), ("lcf", {"client_weights": {"c1": 2.0, "c7": 0.5}}), ("fcfs", {"rate_limit_max_requests": 1,
                                                                            "rate_limit_window_steps": 40}),
    ("priority", {"preemption_mode": "swap", "num_cpu_blocks": 200}), ("sjf", {"enable_prefix_caching": True}),
])
def test_past_the_threshold_a_run_records_sparsely_and_reads_the_same(policy, config):
    cfg, reqs = _many_clients(cost_estimate.DENSE_CLIENTS_MAX + 50, 600, policy, **config)
    auto = simulate(cfg, reqs)
    assert auto.is_sparse and len(auto.client_ids) > cost_estimate.DENSE_CLIENTS_MAX
    dense = simulate(cfg, reqs, sparse_clients=False)
    # what it holds before a column is read: its entries, a fraction of the [steps, clients] columns
    held = sum(a.nbytes for a in auto.clients.arrays())
    assert held < 0.2 * sum(c.nbytes for c in dense.clients.values())
    assert_same_clients(auto, dense)


@pytest.mark.parametrize("num_clients", [cost_estimate.DENSE_CLIENTS_MAX, cost_estimate.DENSE_CLIENTS_MAX + 1])
def test_the_threshold_is_the_number_of_clients(num_clients):
    reqs = [RequestSpec(f"r{i}", i // 4, 8, 6, client_id=f"c{i % num_clients}") for i in range(2 * num_clients)]
    trace = simulate(EngineConfig(num_blocks=200, max_num_seqs=16), reqs)
    assert len(trace.client_ids) == num_clients
    assert trace.is_sparse == (num_clients > cost_estimate.DENSE_CLIENTS_MAX)
    assert cost_estimate.PAGE_LIMITS.max_clients <= cost_estimate.DENSE_CLIENTS_MAX  # (pages keep the dense path)


def test_partial_runs_are_the_same_both_ways():
    sc = presets.get("returning_idle").scenario.with_config(policy="vtc")
    for until in (0, 150, 301, 500):
        sparse = Engine(sc.config, list(sc.requests), sparse_clients=True).run(until_step=until)
        dense = Engine(sc.config, list(sc.requests), sparse_clients=False).run(until_step=until)
        assert sparse.num_steps == dense.num_steps == until + 1
        for name, column in dense.clients.items():
            assert np.array_equal(sparse.clients[name], column), (until, name)
            assert np.array_equal(sparse.final_client_values(name), column[-1]), (until, name)


def test_a_sparse_record_by_hand():
    # 3 steps, 3 clients. Step 0: client 1 runs (2 blocks, 1 request, 1 token, no prefill) and is charged to 3.0.
    # Step 1: nothing recorded (an idle step). Step 2: client 2 runs (prefill 8 tokens) and is charged to 8.0;
    # client 0 is lifted to 3.0 (a change, no activity).
    i32, f64 = np.int32, np.float64
    clients = SparseClients(3, 3, (np.array([0, 2], i32), np.array([1, 2], i32),
                                   np.array([[2, 1, 1, 0], [1, 1, 0, 8]], i32)),
                            (np.array([0, 2, 2], i32), np.array([1, 0, 2], i32),
                             np.array([[3.0, 3.0], [3.0, 0.0], [8.0, 8.0]], f64)),
                            np.array([[3.0, 0.0], [3.0, 3.0], [8.0, 8.0]]))
    assert clients["client_blocks"].tolist() == [[0, 2, 0], [0, 0, 0], [0, 0, 1]]
    assert clients["client_prefill_tokens"].tolist() == [[0, 0, 0], [0, 0, 0], [0, 0, 8]]
    assert clients["client_counters"].tolist() == [[0, 3, 0], [0, 3, 0], [3, 3, 8]]  # carried over step 1
    assert clients["client_service"].tolist() == [[0, 3, 0], [0, 3, 0], [0, 3, 8]]  # a lift is no service
    assert clients["client_blocks"].dtype == np.int64 and clients["client_service"].dtype == np.float64
    assert clients.final("client_prefill_tokens").tolist() == [0, 0, 8]
    assert clients.final("client_counters").tolist() == [3, 3, 8]
    entries = clients.entries()  # the (step, client) pairs of either kind, in step then client order
    assert list(zip(entries["step"].tolist(), entries["client"].tolist(), strict=True)) == [(0, 1), (2, 0), (2, 2)]
    assert entries["client_counters"].tolist() == [3, 3, 8] and entries["client_running"].tolist() == [1, 0, 1]
    with pytest.raises(KeyError):
        clients["blocks"]


def test_a_column_is_made_when_first_read_once_and_read_only_when_frozen():
    cfg, reqs = _many_clients(150, 300, "vtc")
    trace = simulate(cfg, reqs)
    clients = trace.clients
    assert isinstance(clients, SparseClients) and not clients._dense
    before = trace.nbytes()
    assert "client_service" in clients and not clients._dense  # (asking for a name makes nothing)
    trace.final_client_values("client_service"), trace.final_client_values("client_blocks")
    metrics.per_client(trace)
    assert not clients._dense  # the last step's values and the per-client rows read no column
    trace.freeze()
    column = clients["client_counters"]
    assert clients["client_counters"] is column and list(clients._dense) == ["client_counters"]
    assert not column.flags.writeable and not clients.activity_values.flags.writeable
    assert trace.nbytes() == before + column.nbytes  # (what it holds now)
    with pytest.raises(ValueError):
        column[0, 0] = 1.0


def test_the_clients_frame_of_a_sparse_trace_has_the_recorded_entries_with_the_dense_values():
    sc = presets.get("returning_idle").scenario.with_config(policy="vtc")
    sparse, dense = both_ways(sc.config, list(sc.requests))
    rows, full = sparse.to_frames()["clients"], dense.to_frames()["clients"]
    assert list(rows.columns) == list(full.columns) and rows.dtypes.tolist() == full.dtypes.tolist()
    assert len(rows) < len(full)
    joined = rows.merge(full, on=["step", "client"], how="left", suffixes=("", "_dense"), validate="one_to_one")
    for name in (c.removeprefix("client_") for c in CLIENT_COLUMNS):
        assert (joined[name] == joined[f"{name}_dense"]).all(), name
    # every (step, client) left out did nothing: no activity there
    left_out = full.merge(rows[["step", "client"]], on=["step", "client"], how="left", indicator=True)
    left_out = left_out[left_out["_merge"] == "left_only"]
    activity = [c.removeprefix("client_") for c in ACTIVITY_COLUMNS]
    assert len(left_out) and (left_out[activity] == 0).all().all()
    # in step order, then client order
    order = [(step, dense.client_ids.index(c)) for step, c in zip(rows["step"], rows["client"], strict=True)]
    assert order == sorted(order)
