"""vLLM V1's free-queue order (issue 18), by hand on tiny pools: which freed block is handed out first.

Blocks of 4 tokens (the factories' pool: 8 blocks). vLLM's source: ``BlockPool.free_blocks`` (a freed block without a
hash is prepended to the free queue, one with a hash appended).
"""

from __future__ import annotations

import pytest

from sim import Engine, EngineConfig
from tests.sim.factories import config, rec, req, run, schedule


def _blocks_at(cfg: EngineConfig, requests: list, step: int, request_id: str) -> list[int]:
    """The block ids ``request_id`` holds after ``step``, in token order."""
    engine = Engine(cfg, requests, check_invariants=True)
    engine.advance(until_step=step)
    kv, row = engine.kv, engine.table.ids.index(request_id)
    return kv.block_table[kv.slot_of_row[row], : kv.num_blocks_held[row]].tolist()


# ---- rule 1: which freed block is handed out first --------------------------------------------------------------
@pytest.mark.parametrize(("enable_prefix_caching", "blocks_of_b"), [(False, [2, 1]), (True, [2, 3])])
def test_a_new_request_gets_the_blocks_freed_without_a_hash_first(enable_prefix_caching, blocks_of_b):
    # A (prompt 10, group g with an 8-token prefix, 1 token) holds blocks 0, 1, 2 at step 0 and finishes; they are
    # freed tail first: 2, 1, 0. Block 2 (tokens 8-9) is partial, so never hashed.
    # Caching off: no block has a hash, all three go to the head in that order: queue [2 1 0 3 4 5 6 7].
    # Caching on: blocks 0 and 1 hold the group's hashes and go to the tail: queue [2 3 4 5 6 7 1 0].
    # B (prompt 8, no group) at step 1 needs ceil(8 / 4) = 2 blocks from the head.
    requests = [req("A", 0, 10, 1, prefix_group="g", prefix_len=8), req("B", 1, 8, 2)]
    cfg = config(enable_prefix_caching=enable_prefix_caching)
    assert _blocks_at(cfg, requests, 1, "B") == blocks_of_b


def test_a_partial_block_freed_last_is_reused_first_so_a_cached_prefix_survives():
    # step 0: A (prompt 10, group g, prefix 8) takes blocks 0 1 2 and finishes: queue [2 | 3 4 5 6 7 | 1 0], blocks
    #   0 and 1 cached (the group's two blocks), 2 partial.
    # step 1: C (prompt 6) takes 2 and 3 from the head: block 2 gets C's full block 0 (hashed), 3 its partial block
    #   (tokens 4-5). C finishes, freed tail first: 3 to the head, 2 to the tail: queue [3 4 5 6 7 1 0 2].
    # step 2: D (prompt 20) takes 5 blocks from the head, [3 4 5 6 7]: both group blocks stay cached.
    #   (Appending every freed block, the queue was [4 5 6 7 2 1 0 3] and D took 1, a group block.)
    # step 3: B (prompt 10, group g) hits both group blocks (8 tokens) and computes only 10 - 8 = 2.
    t = run(config(enable_prefix_caching=True), req("A", 0, 10, 1, prefix_group="g", prefix_len=8),
            req("C", 1, 6, 1), req("D", 2, 20, 1), req("B", 3, 10, 1, prefix_group="g", prefix_len=8))
    assert rec(t, "B")["cached_tokens"] == 8
    assert schedule(t)[3] == [("B", 2)]
