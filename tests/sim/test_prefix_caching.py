"""Prefix caching: full blocks identified by a chained hash, freed blocks cached until handed out again (least
recently freed first; a freed block holding no hash is handed out before them all), a request's tail freed first,
cache hits on a preempted request's re-prefill.

Blocks of 4 tokens. A request in ``prefix_group`` g with ``prefix_len`` 8 has two group blocks (tokens 0-3, 4-7);
its other full blocks are its own. At least the last prompt token is always computed, so a 10-token prompt can hit at
most (10 - 1) // 4 = 2 blocks.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.block_pool import BlockPool
from tests.sim.factories import config, rec, req, run, schedule

CACHING = {"enable_prefix_caching": True}


def test_requests_of_one_prefix_group_share_its_full_blocks():
    # A (prompt 10, group "sys", prefix 8) computes 10 tokens at step 0: blocks 0-3 and 4-7 are group blocks.
    # B (same group) arrives at step 1 while A is still running: hits both (8 tokens), computes only 2.
    t = run(config(**CACHING), req("A", 0, 10, 5, prefix_group="sys", prefix_len=8),
            req("B", 1, 10, 1, prefix_group="sys", prefix_len=8))
    assert schedule(t)[1] == [("A", 1), ("B", 2)]
    assert rec(t, "B")["cached_tokens"] == 8
    assert rec(t, "A")["cached_tokens"] == 0
    # Shared blocks count once: after step 1 A holds ceil(11/4) = 3 blocks, B holds the 2 shared + 1 of its own.
    assert int(t.steps["used_blocks"][1]) == 4


def test_another_group_or_no_group_gets_no_hit():
    t = run(config(**CACHING), req("A", 0, 10, 5, prefix_group="sys", prefix_len=8),
            req("B", 1, 10, 1, prefix_group="other", prefix_len=8), req("C", 1, 10, 1))
    assert rec(t, "B")["cached_tokens"] == rec(t, "C")["cached_tokens"] == 0


def test_without_prefix_caching_nothing_is_shared():
    t = run(config(), req("A", 0, 10, 5, prefix_group="sys", prefix_len=8),
            req("B", 1, 10, 1, prefix_group="sys", prefix_len=8))
    assert schedule(t)[1] == [("A", 1), ("B", 10)]
    assert rec(t, "B")["cached_tokens"] == 0


@pytest.mark.parametrize(("filler_prompt", "hit_tokens"), [(24, 8), (28, 4), (32, 0)])
def test_freed_blocks_stay_cached_until_handed_out_least_recently_freed_first(filler_prompt, hit_tokens):
    # Free queue at start: [0 1 2 3 4 5 6 7]. A (prompt 10, 1 token) takes blocks 0, 1, 2 at step 0 and finishes:
    # freed tail first; block 2 (tokens 8-9, partial, no hash) to the head, its cached group blocks 1, 0 to the tail
    # -> queue [2 | 3 4 5 6 7 | 1 0].
    # Step 1: F (no group) takes filler_prompt / 4 blocks from the head and finishes:
    #   24 -> 6 blocks [2..7]: both group blocks stay cached -> B hits 8 tokens
    #   28 -> 7 blocks, also block 1 (A's 2nd group block) is handed out and loses its hash -> B hits 4
    #   32 -> all 8: nothing left cached -> B hits 0
    # Step 2: B (same group as A) is admitted.
    t = run(config(**CACHING), req("A", 0, 10, 1, prefix_group="sys", prefix_len=8), req("F", 1, filler_prompt, 1),
            req("B", 2, 10, 1, prefix_group="sys", prefix_len=8))
    assert int(t.steps["cached_free_blocks"][0]) == 2  # A's two group blocks, free but cached
    assert rec(t, "B")["cached_tokens"] == hit_tokens
    assert schedule(t)[2] == [("B", 10 - hit_tokens)]


def test_a_cache_hit_on_a_free_block_takes_it_off_the_free_list():
    # A finishes at step 0 leaving 2 cached free blocks (8 free in all). B hits both: after B's step 2 blocks are
    # reused + ceil(10/4) - 2 = 1 new -> 3 used, 5 free, and no cached block is left free.
    t = run(config(**CACHING), req("A", 0, 10, 1, prefix_group="sys", prefix_len=8),
            req("B", 1, 10, 3, prefix_group="sys", prefix_len=8))
    assert int(t.steps["used_blocks"][1]) == 3
    assert int(t.steps["cached_free_blocks"][1]) == 0


def test_a_recomputed_request_gets_cache_hits_on_re_prefill():
    # 4 blocks, two slots. A prompt 3, B prompt 4, 8 tokens each. Allocation from the free queue [0 1 2 3]:
    # step 0: A -> 0, B -> 1; step 1: B (5 tokens) -> 2; step 2: A (5 tokens) -> 3. Full from here.
    # Step 5: B needs a 3rd block: B is the last running request and preempts itself, freeing [2, 1] tail first
    # (both full blocks of B's own tokens, cached). Step 6: A takes the head, block 2: B's 2nd block is gone.
    # A finishes at step 7. Step 8: B re-prefills 4 + 5 = 9 tokens, of which block 1 (4 tokens) is a hit: 5 computed.
    t = run(config(num_blocks=4, max_num_seqs=2, **CACHING), req("A", 0, 3, 8), req("B", 0, 4, 8))
    b = rec(t, "B")
    assert b["preempted_at_steps"] == [5] and b["resumed_at_steps"] == [8]
    assert schedule(t)[8] == [("B", 5)]
    assert b["cached_tokens"] == 4
    assert b["recomputed_tokens"] == 8 - 4  # 8 tokens of KV lost at the preemption, 4 found in the cache
    # Without caching the whole 9 tokens are computed again.
    t_off = run(config(num_blocks=4, max_num_seqs=2), req("A", 0, 3, 8), req("B", 0, 4, 8))
    assert schedule(t_off)[8] == [("B", 9)]
    assert rec(t_off, "B")["recomputed_tokens"] == 8


# ---- the block pool on its own ----------------------------------------------------------------------------------
def test_a_recomputed_copy_of_a_cached_block_stays_findable_when_the_original_is_evicted():
    # 10 blocks. A (prompt 12, group g, prefix 8) caches the group blocks (g,0) and (g,1) and finishes at step 1.
    # B (prompt 8, same group) arrives at step 1: at least its last token is computed, so it hits (g,0) only and
    # recomputes (g,1) into a block of its own, a second block with that hash (vLLM keeps both). At step 2 D (28
    # tokens, 7 blocks) takes the free blocks, A's (g,1) among them. C (prompt 12, group g) at step 4 still hits
    # both group blocks: (g,0), and B's copy of (g,1), which B holds. It computes only its last 4 tokens.
    t = run(config(num_blocks=10, **CACHING), req("A", 0, 12, 2, prefix_group="g", prefix_len=8),
            req("B", 1, 8, 12, prefix_group="g", prefix_len=8), req("D", 2, 28, 1),
            req("C", 4, 12, 2, prefix_group="g", prefix_len=8))
    assert schedule(t)[1] == [("A", 1), ("B", 4)]
    assert schedule(t)[4] == [("B", 1), ("C", 4)]
    assert rec(t, "C")["cached_tokens"] == 8


def test_pool_lookup_takes_the_oldest_block_cached_under_a_hash():
    pool = BlockPool(3, enable_caching=True)
    blocks = pool.allocate(3)
    pool.cache_block(0, block_hash=5)
    pool.cache_block(2, block_hash=5)  # the same tokens computed again
    assert pool.cached_block(5) == 0
    pool.free(blocks)  # block 1 (no hash) to the head, 0 and 2 to the tail: queue [1 0 2]
    pool.allocate(2)  # blocks 1 and 0: block 0 is evicted
    assert pool.cached_block(5) == 2 and pool.cached == {5: [2]}
    pool.check_integrity()


def test_pool_hands_out_the_least_recently_freed_cached_block_first():
    pool = BlockPool(4, enable_caching=True)
    first = pool.allocate(3)
    assert first.tolist() == [0, 1, 2]
    pool.cache_block(0, block_hash=10)
    pool.cache_block(2, block_hash=12)
    pool.free(np.array([2, 0], dtype=np.int32))  # freed in this order: 2, then 0, both hashed: to the tail
    # Queue: 3 (never used), then 2, then 0.
    assert pool.free_queue_order().tolist() == [3, 2, 0]
    assert pool.allocate(2).tolist() == [3, 2]
    pool.check_integrity()


@pytest.mark.parametrize("enable_caching", [True, False])
def test_pool_hands_out_a_freed_block_without_hash_first(enable_caching):
    # vLLM's BlockPool.free_blocks: a block holding no hash can never be a cache hit, so it goes to the head of the
    # free queue (prepend_n keeps the order given: the first freed is handed out first).
    pool = BlockPool(4, enable_caching=enable_caching)
    assert pool.allocate(3).tolist() == [0, 1, 2]  # queue [3]
    pool.free(np.array([2, 0], dtype=np.int32))  # a request's blocks, tail first: queue [2 0 3]
    assert pool.free_queue_order().tolist() == [2, 0, 3]
    assert pool.allocate(2).tolist() == [2, 0]
    pool.check_integrity()


def test_pool_puts_freed_blocks_without_hash_at_the_head_and_with_hash_at_the_tail():
    # A request holding blocks 1, 2, 3 (1 and 2 full and hashed, 3 partial) frees them tail first: 3, 2, 1.
    pool = BlockPool(5, enable_caching=True)
    pool.allocate(1)  # block 0, held by someone else
    blocks = pool.allocate(3)  # [1 2 3]; queue [4]
    pool.cache_block(1, block_hash=11)
    pool.cache_block(2, block_hash=12)
    pool.free(blocks[::-1].copy())  # 3 to the head; 2 then 1 to the tail: queue [3 4 2 1]
    assert pool.free_queue_order().tolist() == [3, 4, 2, 1]
    assert pool.allocate(2).tolist() == [3, 4]  # both cached blocks survive
    assert pool.cached == {11: [1], 12: [2]}
    pool.check_integrity()


def test_pool_keeps_prepending_and_appending_without_running_out_of_room():
    # 200 rounds on 6 blocks, each appending one cached block: the tail reaches the end of the queue array (2 * 6
    # + 64 entries) and the queue is compacted several times; the head keeps room for every prepend.
    pool = BlockPool(6, enable_caching=True)
    for i in range(200):
        blocks = pool.allocate(4).copy()
        pool.cache_block(int(blocks[0]), block_hash=1000 + i)  # one full block per round, three partial ones
        pool.free(blocks[::-1].copy())  # tail first: the three partial ones to the head, the full one to the tail
        assert pool.free_queue_order()[:3].tolist() == blocks[:0:-1].tolist()
        assert pool.free_queue_order()[-1] == blocks[0]
        pool.check_integrity()
    assert pool.num_free == 6


def test_pool_touch_takes_a_cached_block_out_of_the_middle_of_the_free_queue():
    pool = BlockPool(4, enable_caching=True)
    blocks = pool.allocate(4)
    pool.cache_block(1, block_hash=123)
    pool.free(blocks)  # queue [0 1 2 3], block 1 cached
    pool.touch(np.array([1], dtype=np.int32))  # a prefix-cache hit
    assert pool.num_free == 3
    assert pool.free_queue_order().tolist() == [0, 2, 3]
    assert pool.allocate(3).tolist() == [0, 2, 3]  # the stale entry for block 1 is skipped
    assert pool.cached == {123: [1]}  # block 1 is in use, still findable
    pool.check_integrity()


def test_pool_evicts_a_cached_block_when_it_is_handed_out():
    pool = BlockPool(2, enable_caching=True)
    blocks = pool.allocate(2)
    pool.cache_block(0, block_hash=7)
    pool.free(blocks)  # queue [1 0]: block 1 (no hash) at the head, block 0 (cached) at the tail
    assert pool.cached == {7: [0]}
    assert pool.allocate(1).tolist() == [1]
    assert pool.cached == {7: [0]}
    pool.allocate(1)  # block 0: evicted
    assert pool.cached == {}
    pool.check_integrity()


def test_pool_reference_counts_shared_blocks():
    pool = BlockPool(2, enable_caching=True)
    b = pool.allocate(1)
    pool.touch(b)  # a second request shares it
    assert pool.ref_cnt[b[0]] == 2 and pool.num_free == 1
    pool.free(b)
    assert pool.num_free == 1  # still held by one
    pool.free(b)
    assert pool.num_free == 2
    pool.check_integrity()
