"""The VTC/LCF waiting queue's lazy heap (sim/request_queue.py, ``VTCQueue``) against the pick it replaced: a scan of
every backlogged client for the lowest (counter, head row). Random operations on the queue, then whole runs."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim import Engine, EngineConfig, RequestSpec
from sim.request import RequestTable
from sim.request_queue import VTCQueue
from sim.vtc import VirtualCounters
from tests.sim.factories import assert_same_trace
from tests.sim.strategies import configs, requests


def scan_next_client(queue: VTCQueue) -> int:
    """The pick as it was: look at every backlogged client."""
    best, best_key = -1, None
    for c, q in queue._queues.items():
        key = (queue._counters.item(c), q[0])
        if best_key is None or key < best_key:
            best, best_key = c, key
    return best


NUM_ROWS, NUM_CLIENTS = 12, 3
_OPS = st.lists(st.tuples(st.sampled_from(["add", "prepend", "pop", "remove", "remove_head", "charge"]),
                          st.integers(0, NUM_ROWS - 1), st.sampled_from([0.0, 0.5, 1.0, 3.0])), max_size=80)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(ops=_OPS, policy=st.sampled_from(["vtc", "lcf"]))
@example(ops=[("add", 0, 0.0), ("add", 6, 0.0), ("add", 1, 0.0), ("remove_head", 0, 0.0)], policy="lcf")
def test_the_heap_picks_what_a_scan_of_every_backlogged_client_picks(ops, policy):
    # rows of 3 clients in no particular order: a client's rows join its queue out of row order, and a row put back
    # in front (prepend) can be later or earlier than the head it displaces
    cfg = EngineConfig(num_blocks=64, policy=policy)
    specs = [RequestSpec(f"r{i}", 0, 4, 4, client_id=f"c{(i * 5) % NUM_CLIENTS}") for i in range(NUM_ROWS)]
    table = RequestTable(specs, cfg, [f"c{i}" for i in range(NUM_CLIENTS)])
    vtc = VirtualCounters(cfg, table)
    queue = VTCQueue(table, vtc)
    waiting: set[int] = set()
    for op, row, amount in ops:
        if op in ("add", "prepend") and row not in waiting:
            getattr(queue, op)(row)
            waiting.add(row)
        elif op == "pop" and waiting:
            expected = queue._queues[scan_next_client(queue)][0]
            assert queue.pop() == expected
            waiting.discard(expected)
        elif op == "remove" and row in waiting:
            queue.remove(row)
            waiting.discard(row)
        elif op == "remove_head" and table.client[row] in queue._queues:  # (a client's head leaves: an abort)
            head = queue._queues[table.client[row]][0]
            queue.remove(head)
            waiting.discard(head)
        elif op == "charge":  # counters only grow (a charge, a lift)
            vtc.counters[table.client[row]] += amount
        if waiting:
            assert queue.peek() == queue._queues[scan_next_client(queue)][0]
        assert len(queue) == len(waiting)
        assert set(queue._queues) == set(queue._live)  # one live entry per backlogged client, no other


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(cfg=configs(policies=("vtc", "lcf")), reqs=requests(max_requests=14, max_arrival=10, clients="abcdefg"))
def test_runs_with_the_heap_are_runs_with_the_scan(cfg, reqs):
    with_heap = Engine(cfg, reqs, check_invariants=True).run()
    engine = Engine(cfg, reqs)
    queue = engine.scheduler.waiting
    queue._next_client = lambda: scan_next_client(queue)
    with_scan = engine.run()
    assert_same_trace(with_heap, with_scan)
    assert with_heap.events == with_scan.events
