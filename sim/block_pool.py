"""The GPU KV block pool: reference counts, the free queue and the prefix-cache index (docs/ENGINE.md#the-block-pool).

Invariant: a block is free exactly when its ``ref_cnt`` is 0, and every free block has exactly one live entry in the
free queue. Freed blocks keep their hash (they stay reusable by prefix caching) until the pool hands them out again.

The free queue follows vLLM's ``FreeKVCacheBlockQueue`` and ``BlockPool.free_blocks``: blocks are handed out from
the head. A freed block that holds a hash (a full block, with prefix caching) is appended at the tail, so cached
blocks are evicted least recently freed first (LRU); a freed block without a hash (a partial block, or every block
without prefix caching) is prepended at the head, so it is handed out first (LIFO): it can never be a cache hit.
A prefix-cache hit can take a block out of the middle of the queue; we do that lazily:

    _queue:     [ .. room .. | b7 | b2 | b9 | b4 | .. room .. ]
                              ^head                ^tail
    _queue_pos[b] == i  <=> the entry at index i is b's live entry (-1: b is not in the queue)

so a taken block's old entry is skipped when the head reaches it. When the tail hits the end the live entries are
compacted to end at index ``num_blocks``, which leaves room for ``num_used`` entries before the head: enough for
every prepend, since only used blocks are prepended and each allocation moves the head up again (a block taken
by a cache hit holds a hash: it goes back to the tail).

Without prefix caching no block is shared or taken from the middle, so the free queue alone says which blocks are
used, and ``ref_cnt`` is derived from it when read (docs/PERFORMANCE.md#the-block-pool-without-prefix-caching).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

NO_HASH = np.iinfo(np.int64).min  # block_hash sentinel: the block holds no full, hashed token run


class BlockPool:
    def __init__(self, num_blocks: int, enable_caching: bool = True):
        self.num_blocks = num_blocks
        # Without prefix caching every entry in [head, tail) is live: the positions need no upkeep.
        self._track_positions = enable_caching
        self._ref_cnt = np.zeros(num_blocks, dtype=np.int32)  # [num_blocks] int32, 0 = free (kept with caching)
        self.block_hash = np.full(num_blocks, NO_HASH, dtype=np.int64)  # [num_blocks] int64, NO_HASH = uncached
        # Block hash -> ids of the full blocks holding those tokens, oldest first. Usually one; vLLM does not
        # de-duplicate (a block-aligned prompt recomputes its last block, a copy of a cached one), and a lookup
        # takes the oldest still cached, so a copy stays findable after the first is evicted.
        self.cached: dict[int, list[int]] = {}
        # Bumped whenever a prefix group's hash (a negative number, see kv_cache_manager) is cached or evicted: a
        # lookup of a group's blocks made since is still valid (docs/PERFORMANCE.md#prefix-cache-lookups).
        self.group_version = 0
        self._capacity = 2 * num_blocks + 64
        self._queue = np.empty(self._capacity, dtype=np.int32)  # [capacity] int32 block ids, see module doc
        self._queue_pos = np.full(num_blocks, -1, dtype=np.int64)  # [num_blocks] int64, -1 = not free
        self._queue[:num_blocks] = np.arange(num_blocks, dtype=np.int32)
        self._queue_pos[:] = np.arange(num_blocks)
        self._head = 0
        self._tail = num_blocks
        self._num_stale = 0  # entries in [head, tail) that are not live
        self.num_free = num_blocks

    @property
    def ref_cnt(self) -> np.ndarray:
        """[num_blocks] int32: block-table entries naming each block (0 = free)."""
        if self._track_positions:
            return self._ref_cnt
        used = np.ones(self.num_blocks, dtype=np.int32)
        used[self._queue[self._head : self._tail]] = 0
        return used

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    def allocate(self, n: int) -> np.ndarray:
        """Take ``n`` blocks from the head of the free queue, evicting their cached hashes. Caller checks room.
        The result may be a view of the queue: store it (in a block table) before the pool changes again."""
        if n > self.num_free:
            raise RuntimeError(f"allocate({n}) with only {self.num_free} free blocks")
        if n == 0:
            return np.empty(0, dtype=np.int32)
        if self._num_stale == 0:  # fast path: every entry is live
            blocks = self._queue[self._head : self._head + n]  # a view: the next free() may prepend over it
            self._head += n
        else:
            blocks = self._pop_skipping_stale(n)
        if self._track_positions:
            self._queue_pos[blocks] = -1
            self._ref_cnt[blocks] = 1
        self.num_free -= n
        if self.cached:
            self._evict(blocks)
        return blocks

    def _pop_skipping_stale(self, n: int) -> np.ndarray:
        taken: list[np.ndarray] = []
        need = n
        while need:
            end = min(self._tail, self._head + need + self._num_stale)
            ids = self._queue[self._head : end]
            live = self._queue_pos[ids] == np.arange(self._head, end)
            live_idx = np.flatnonzero(live)[:need]
            if len(live_idx) < need:
                chunk, consumed = ids[live_idx], end - self._head
            else:
                chunk, consumed = ids[live_idx], int(live_idx[-1]) + 1
            self._num_stale -= consumed - len(chunk)
            self._head += consumed
            taken.append(chunk)
            need -= len(chunk)
        return np.concatenate(taken)

    def cached_block(self, block_hash: int) -> int | None:
        """The block to reuse for ``block_hash`` (the oldest one cached), or None."""
        blocks = self.cached.get(block_hash)
        return blocks[0] if blocks else None

    def _evict(self, blocks: np.ndarray) -> None:
        hashes = self.block_hash[blocks]
        held = hashes != NO_HASH
        hashes = hashes[held]
        for b, h in zip(blocks[held].tolist(), hashes.tolist(), strict=True):
            same = self.cached[h]
            same.remove(b)
            if not same:
                del self.cached[h]
        self.block_hash[blocks] = NO_HASH
        if len(hashes) and hashes.min() < 0:
            self.group_version += 1

    def free(self, blocks: np.ndarray) -> None:
        """Drop one reference to each of ``blocks`` (distinct ids, in eviction order: a request's tail first).
        Those now unused go back to the free queue in that order: without a hash at the head, with one at the tail.
        Without prefix caching no block is shared or hashed, so every block is released to the head."""
        if not self._track_positions:
            k = len(blocks)
            if k:
                self._prepend(blocks, k)
            return
        self._ref_cnt[blocks] -= 1
        released = blocks[self._ref_cnt[blocks] == 0]
        if not len(released):
            return
        hashed = self.block_hash[released] != NO_HASH
        fresh = released[~hashed]
        if len(fresh):
            self._prepend(fresh, len(fresh))
        cached = released[hashed]
        k = len(cached)
        if k:
            if self._tail + k > self._capacity:
                self._compact()
            self._queue[self._tail : self._tail + k] = cached
            self._queue_pos[cached] = np.arange(self._tail, self._tail + k)
            self._tail += k
            self.num_free += k

    def _prepend(self, blocks: np.ndarray, k: int) -> None:
        """Put ``k`` blocks before the head, ``blocks[0]`` first in line (vLLM's ``prepend_n``)."""
        if k > self._head:  # (never, by the room argument of the module doc; a compaction makes room anyway)
            self._compact()
        head = self._head - k
        self._queue[head : self._head] = blocks
        if self._track_positions:
            self._queue_pos[blocks] = np.arange(head, self._head)
        self._head = head
        self.num_free += k

    def touch(self, blocks: np.ndarray) -> None:
        """Take a reference to cached ``blocks`` (a prefix-cache hit); free ones leave the free queue."""
        if not self._track_positions:
            raise RuntimeError("touch() needs a pool created with enable_caching=True")
        was_free = blocks[self._ref_cnt[blocks] == 0]
        self._queue_pos[was_free] = -1
        self._num_stale += len(was_free)
        self.num_free -= len(was_free)
        self._ref_cnt[blocks] += 1

    def cache_block(self, block: int, block_hash: int) -> None:
        """Make a full block findable by its hash (after any other block with the same tokens, as vLLM)."""
        self.cache_blocks(np.array([block]), [block_hash])

    def cache_blocks(self, blocks: np.ndarray, block_hashes: Iterable[int]) -> None:
        """``cache_block`` for each of ``blocks`` with its hash from the iterable ``block_hashes``, in order."""
        cached = self.cached
        hashes = list(block_hashes)
        for block, block_hash in zip(blocks.tolist(), hashes, strict=True):
            cached.setdefault(block_hash, []).append(block)
        self.block_hash[blocks] = hashes
        if hashes and min(hashes[0], hashes[-1]) < 0:  # (group hashes come first, in a run)
            self.group_version += 1

    def _compact(self) -> None:
        """Move the live entries to end at index ``num_blocks``: room for ``num_used`` prepends before the head and
        for at least ``num_blocks + 64`` appends after the tail."""
        live_ids = self.free_queue_order().copy()
        k = len(live_ids)
        head = self.num_blocks - k
        self._queue[head : self.num_blocks] = live_ids
        self._queue_pos[live_ids] = np.arange(head, self.num_blocks)
        self._head, self._tail, self._num_stale = head, self.num_blocks, 0

    def cached_free_mask(self) -> np.ndarray:
        """[num_blocks] bool: free blocks still holding prefix-cache content."""
        return (self.ref_cnt == 0) & (self.block_hash != NO_HASH)

    def free_queue_order(self) -> np.ndarray:
        """Free blocks in hand-out order (head first)."""
        ids = self._queue[self._head : self._tail]
        if not self._track_positions:
            return ids
        return ids[self._queue_pos[ids] == np.arange(self._head, self._tail)]

    def check_integrity(self) -> None:
        order = self.free_queue_order()
        free = np.flatnonzero(self.ref_cnt == 0)
        if (self.ref_cnt < 0).any():
            raise AssertionError("negative ref_cnt")
        if len(order) != self.num_free or len(free) != self.num_free:
            raise AssertionError(f"num_free={self.num_free}, queue has {len(order)}, ref_cnt==0 for {len(free)}")
        if not np.array_equal(np.sort(order), free):
            raise AssertionError("free queue does not hold exactly the blocks with ref_cnt 0")
        for h, blocks in self.cached.items():
            for b in blocks:
                if self.block_hash[b] != h:
                    raise AssertionError(f"cached hash {h} points at block {b} holding {self.block_hash[b]}")
        if sum(map(len, self.cached.values())) != int(np.count_nonzero(self.block_hash != NO_HASH)):
            raise AssertionError("a hashed block is missing from the cache index (or listed twice)")
