"""Issue 19, "no quadratic paths": the work done on client weights, client and request ids, shared prefixes and
VTC's picks among waiting clients grows about as fast as the input (n log n at most), counted, not timed. Each test
runs its input at n and at 8n and counts operations a quadratic path would multiply: comparisons and hashes of the
ids (``CountingStr``, a str that counts them: a list ``.count``, an ``in`` over a list or a nested loop over ids
shows up as n^2 of them), look-ups in the prefix cache, or reads of VTC's counters. Linear work grows 8x, n log n
~10x, quadratic 64x: the bound, 20x, catches the last with room for the others. Counts are exact, so the tests
cannot flake on a busy machine as timings would."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from sim import EngineConfig, RequestSpec, cost_estimate, scenario
from sim.engine import Engine, client_ids_of
from sim.request import RequestTable
from sim.request_queue import VTCQueue
from sim.vtc import VirtualCounters
from sim.workload import generate, workload_from_dict

GROWTH = 8  # the input at n, then at GROWTH x n
MAX_RATIO = 20  # counted work at GROWTH x n over work at n: 8 (linear) to ~10 (n log n); 64 if quadratic


class Count:
    """A mutable count shared by many ``CountingStr``."""

    def __init__(self) -> None:
        self.n = 0


class CountingStr(str):
    """A str that counts, in ``count``, every comparison and hash made of it."""

    def __new__(cls, value: str, count: Count):
        self = super().__new__(cls, value)
        self.count = count
        return self

    def _op(self, name: str, other: object) -> bool:
        self.count.n += 1
        return getattr(str, name)(self, other)

    def __eq__(self, other: object) -> bool:
        return self._op("__eq__", other)

    def __ne__(self, other: object) -> bool:
        return self._op("__ne__", other)

    def __lt__(self, other: object) -> bool:
        return self._op("__lt__", other)

    def __le__(self, other: object) -> bool:
        return self._op("__le__", other)

    def __gt__(self, other: object) -> bool:
        return self._op("__gt__", other)

    def __ge__(self, other: object) -> bool:
        return self._op("__ge__", other)

    def __hash__(self) -> int:
        self.count.n += 1
        return str.__hash__(self)

    def __reduce__(self):  # (a copy is a plain str)
        return str, (str(self),)


def _work(make_and_use: Callable[[int, Count], object], n: int) -> int:
    count = Count()
    make_and_use(n, count)
    return count.n


def _assert_not_quadratic(make_and_use: Callable[[int, Count], object], n: int) -> tuple[int, int]:
    small, large = _work(make_and_use, n), _work(make_and_use, GROWTH * n)
    assert small > 0, "nothing was counted: the test no longer measures the path"
    assert large <= MAX_RATIO * small, (small, large, large / small)
    return small, large


def _ids(prefix: str, n: int, count: Count) -> list[CountingStr]:
    return [CountingStr(f"{prefix}{i}", count) for i in range(n)]


def test_client_weights_in_a_config_and_an_engine():
    # 50,000 weights made a config in 47 s once (a list .count in a loop); then the engine looks each client up
    def make_and_use(n: int, count: Count) -> None:
        clients = _ids("c", n, count)
        config = EngineConfig(client_weights=tuple((c, 1.0 + i % 3) for i, c in enumerate(clients)))
        assert config.client_weight("c7") == 2.0
        Engine(config, [RequestSpec(f"r{i}", 0, 4, 4, client_id=c) for i, c in enumerate(clients[: n // 10])])

    _assert_not_quadratic(make_and_use, 6_250)  # (and 50,000)


def test_a_twice_given_weight_is_found_in_one_pass():
    def make_and_use(n: int, count: Count) -> None:
        clients = _ids("c", n, count)
        with pytest.raises(ValueError, match="is given two weights"):
            EngineConfig(client_weights=(*((c, 1.0) for c in clients), (clients[-1], 2.0)))

    _assert_not_quadratic(make_and_use, 6_250)


def test_request_and_client_ids_in_the_scenario_loader_and_the_engine():
    # a scenario of n requests, each its own client: loaded (ids checked unique, clients counted against the
    # limits), then an engine made and run (its client index, counters, queues)
    def make_and_use(n: int, count: Count) -> None:
        requests = [{"id": rid, "arrival_step": i // 10, "prompt_len": 8, "output_len": 2, "client": client}
                    for i, (rid, client) in enumerate(zip(_ids("r", n, count), _ids("c", n, count), strict=True))]
        data = {"name": "ids", "config": {"num_blocks": 4_000, "policy": "vtc"}, "requests": requests}
        sc = scenario.scenario_from_dict(data, cost_estimate.CLI_LIMITS)
        assert len(client_ids_of(sc.requests)) == n
        Engine(sc.config, sc.requests).run()

    _assert_not_quadratic(make_and_use, 1_000)


def test_a_duplicate_request_id_is_found_in_one_pass():
    def make_and_use(n: int, count: Count) -> None:
        ids = _ids("r", n, count)
        requests = [{"id": rid, "arrival_step": 0, "prompt_len": 8, "output_len": 2} for rid in [*ids, ids[-1]]]
        with pytest.raises(scenario.ScenarioError, match="duplicate request id"):
            scenario.scenario_from_dict({"config": {"num_blocks": 100}, "requests": requests})

    _assert_not_quadratic(make_and_use, 2_000)


def test_the_clients_of_a_workload():
    # the generator's clients: their ids checked unique, their windows, each request's client
    def make_and_use(n: int, count: Count) -> None:
        workload = workload_from_dict({"num_requests": n, "clients": [{"client_id": c} for c in _ids("c", n, count)]})
        assert len(generate(workload)) == n

    _assert_not_quadratic(make_and_use, 2_000)


class _CountingLookups(dict):
    """The prefix cache's hash -> blocks map, counting its look-ups."""

    def __init__(self, count: Count):
        super().__init__()
        self.count = count

    def get(self, key, default=None):
        self.count.n += 1
        return super().get(key, default)


def _shared_prefix_run(num_requests: int, prefix_blocks: int, count: Count) -> None:
    """``num_requests`` requests behind one shared prefix of ``prefix_blocks`` blocks of 16 tokens (and named by
    a counted group name), run with prefix caching; the cache's look-ups counted."""
    prefix = 16 * prefix_blocks
    group = CountingStr("system", count)
    specs = [RequestSpec(f"r{i}", i // 4, prefix + 10, 2, prefix_group=group, prefix_len=prefix)
             for i in range(num_requests)]
    config = EngineConfig(num_blocks=prefix_blocks + 8 * num_requests, block_size=16, max_num_seqs=4,
                          max_num_batched_tokens=prefix + 64, enable_prefix_caching=True)
    engine = Engine(config, specs)
    engine.kv.pool.cached = _CountingLookups(count)
    engine.run()


def test_requests_behind_a_shared_prefix_look_it_up_once():
    # 1,000 requests behind a 1 M-token prefix once looked up its 62,500 blocks each; now the group's look-up is
    # shared while the cache keeps its blocks: more requests add their own blocks only, a longer prefix its blocks
    _assert_not_quadratic(lambda n, count: _shared_prefix_run(n, 500, count), 50)
    _assert_not_quadratic(lambda n, count: _shared_prefix_run(50, n, count), 100)
    small, large = _assert_not_quadratic(lambda n, count: _shared_prefix_run(n, n, count), 50)
    assert large < 2 * GROWTH * small  # (both at once: still linear, not n x prefix)


def test_vtc_picks_among_thousands_of_backlogged_clients():
    # every client waiting with two requests; each pick charges the picked client (its key grows, as a prompt's
    # charge does): the queue reads a counter per heap entry it looks at (a scan read every waiting client's)
    def make_and_use(n: int, count: Count) -> None:
        config = EngineConfig(num_blocks=100, policy="vtc")
        specs = [RequestSpec(f"r{i}", 0, 4, 4, client_id=f"c{i % n}") for i in range(2 * n)]
        table = RequestTable(specs, config, client_ids_of(specs))
        vtc = VirtualCounters(config, table)
        vtc.counters = vtc.counters.view(_CountingArray)
        vtc.counters.count = count
        queue = VTCQueue(table, vtc)
        for row in range(2 * n):
            queue.add(row)
        while len(queue):
            row = queue.pop()
            vtc.charge_prompt(row)

    _assert_not_quadratic(make_and_use, 500)


class _CountingArray(np.ndarray):
    """Counters whose reads by ``item`` (the queue's) are counted."""

    count: Count

    def item(self, *args):
        self.count.n += 1
        return super().item(*args)
