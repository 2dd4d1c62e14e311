"""Block tables: which pool blocks hold each running request's KV, and prefix-cache lookups
(docs/ENGINE.md#prefix-caching).

A request holds blocks only while it is running. It then owns a batch slot; its blocks are
``slot_tables[slot][:num_blocks_held[row]]`` in token order (``blocks_of(row)``). Each slot's table is an int32
array as long as the longest request it has held (``max_blocks_of_row``), made when a request longer than that
arrives in it: the tables together hold at most the block counts of the ``num_slots`` longest requests, where
one [slots, longest] table would reserve room for the longest request in every slot (vLLM's GPU-side block
table is that rectangle; its scheduler keeps a list per request). Invariant after every step: a running request holds
``ceil(num_computed_tokens / block_size)`` blocks, and a block's ``ref_cnt`` equals the number of block-table
entries naming it (several only when prefix caching shares it).

Prefix caching models the chained block hash of vLLM without tokens: block ``j`` of a request covers tokens
``[j*B, (j+1)*B)``; if all tokens up to its end belong to the request's shared prefix (``(j+1)*B <= prefix_len``)
its identity is ``(prefix group, j)``, otherwise ``(request, j)``, unique to the request (its own prompt text and
its generated tokens). A preempted request therefore finds its own freed blocks again if they were not reused.
"""

from __future__ import annotations

import itertools
from operator import itemgetter

import numpy as np

from .block_pool import BlockPool
from .config import cdiv
from .npfast import ONE, ZERO, constant

_J_BITS = 31  # block index bits in a hash key
_NO_TABLE = np.zeros(0, dtype=np.int32)  # a slot no request has used yet (never written: any request is longer)
_first = itemgetter(0)


def _request_block_hash(row: int, j: int) -> int:
    return (row << _J_BITS) | j


def _group_block_hash(group: int, j: int) -> int:
    return -(((group + 1) << _J_BITS) | j)


class KVCacheManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_slots: int,
        max_blocks_of_row: np.ndarray,
        num_rows: int,
        prefix_group: np.ndarray,
        prefix_len: np.ndarray,
        enable_caching: bool,
    ):
        self.block_size = block_size
        self._is_power_of_two = block_size & (block_size - 1) == 0  # (then the block arithmetic shifts and masks)
        # 0-d operands of the per-step block arithmetic (see npfast): block_size, block_size - 1, log2(block_size)
        self._size, self._size_less_one = constant(block_size), constant(block_size - 1)
        self._shift = constant(block_size.bit_length() - 1)
        self.pool = BlockPool(num_blocks, enable_caching)
        self.enable_caching = enable_caching
        # [slots] int32 arrays, -1 past the held blocks; each as long as the longest request its slot has held
        self.slot_tables: list[np.ndarray] = [_NO_TABLE] * num_slots
        self._max_blocks_of_row = max_blocks_of_row  # [rows] blocks each request holds at its longest
        self.slot_of_row = np.full(num_rows, -1, dtype=np.int32)  # [rows] int32, -1 = holds no slot
        self.row_of_slot = np.full(num_slots, -1, dtype=np.int32)  # [slots] int32, -1 = empty slot
        self.num_blocks_held = np.zeros(num_rows, dtype=np.int64)  # [rows] int64
        self.num_hashed_blocks = np.zeros(num_rows, dtype=np.int64)  # [rows] leading blocks registered
        self._free_slots = list(range(num_slots - 1, -1, -1))
        self._prefix_group = prefix_group  # [rows] int64, -1 = no shared prefix
        self._prefix_len = prefix_len  # [rows] int64 tokens
        # (group, blocks) -> the cached blocks of a group's prefix, read-only, valid while the pool's group_version
        # is _group_hits_version (find_cached_blocks)
        self._group_hits: dict[tuple[int, int], np.ndarray] = {}
        self._group_hits_version = -1

    def blocks_of(self, row: int) -> np.ndarray:
        """The blocks running request ``row`` holds, in token order (a view: copy it to keep it)."""
        return self.slot_tables[self.slot_of_row.item(row)][: self.num_blocks_held.item(row)]

    @property
    def num_table_cells(self) -> int:
        """Cells the slots' tables hold now (what ``cost_estimate`` bounds as the block table's cells)."""
        return sum(len(table) for table in self.slot_tables)

    def place(self, rows: np.ndarray, cols: np.ndarray, blocks: np.ndarray) -> None:
        """Write block ``blocks[i]`` at position ``cols[i]`` of running request ``rows[i]``'s table (positions
        within the request's longest: its table has room)."""
        tables = self.slot_tables
        for slot, col, block in zip(self.slot_of_row[rows].tolist(), cols.tolist(), blocks.tolist(), strict=True):
            tables[slot][col] = block

    def blocks_for(self, num_tokens: np.ndarray) -> np.ndarray:
        """ceil(num_tokens / block_size), elementwise (a shift when block_size is a power of two)."""
        if self._is_power_of_two:
            return (num_tokens + self._size_less_one) >> self._shift
        return (num_tokens + self._size_less_one) // self._size

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free

    # ---- prefix cache -------------------------------------------------------------------------------------
    def block_hash(self, row: int, j: int) -> int:
        if self._prefix_group[row] >= 0 and (j + 1) * self.block_size <= self._prefix_len[row]:
            return _group_block_hash(self._prefix_group.item(row), j)
        return _request_block_hash(row, j)

    def block_hashes(self, row: int, start: int, end: int) -> range | itertools.chain:
        """``block_hash(row, j)`` for j in [start, end), as ranges: the hashes of consecutive blocks are consecutive
        numbers (docs/PERFORMANCE.md#prefix-cache-lookups)."""
        group = self._prefix_group.item(row)
        num_shared = self._prefix_len.item(row) // self.block_size if group >= 0 else 0  # blocks hashed by group
        mid = min(max(num_shared, start), end)
        own = range((row << _J_BITS) + mid, (row << _J_BITS) + end)  # _request_block_hash(row, j), j < 2**31
        if mid == start:
            return own
        base = -((group + 1) << _J_BITS)  # _group_block_hash(group, j) == base - j
        return itertools.chain(range(base - start, base - mid, -1), own)

    def find_cached_blocks(self, row: int, num_tokens: int) -> np.ndarray:
        """Longest run of leading blocks already in the cache. At least the last token is always computed.

        The blocks of a shared prefix are looked up once for all the group's requests while the pool caches and
        evicts no group block (``pool.group_version``; docs/PERFORMANCE.md#prefix-cache-lookups)."""
        pool = self.pool
        if not self.enable_caching or not pool.cached:
            return np.empty(0, dtype=np.int32)
        end = (num_tokens - 1) // self.block_size
        group = self._prefix_group.item(row)
        mid = min(self._prefix_len.item(row) // self.block_size, end) if group >= 0 else 0
        if mid:
            if self._group_hits_version != pool.group_version:
                self._group_hits.clear()
                self._group_hits_version = pool.group_version
            shared = self._group_hits.get((group, mid))
            if shared is None:
                shared = self._group_hits[group, mid] = self._lookup(self.block_hashes(row, 0, mid))
                shared.flags.writeable = False  # (handed to every request of the group)
            if len(shared) < mid:  # (the run of hits ends inside the prefix)
                return shared
            own = self._lookup(self.block_hashes(row, mid, end))
            return np.concatenate([shared, own]) if len(own) else shared
        return self._lookup(self.block_hashes(row, 0, end))

    def _lookup(self, hashes: range | itertools.chain) -> np.ndarray:
        """[k] int32: the cached block (the oldest) of each leading hash of ``hashes`` that is cached."""
        # (a cached list is never empty: a missing hash gives None, which ends the run)
        found = list(itertools.takewhile(bool, map(self.pool.cached.get, hashes)))
        return np.fromiter(map(_first, found), dtype=np.int32, count=len(found))

    def _hash_full_blocks(self, row: int, num_tokens_known: int) -> None:
        """Register blocks that the scheduled tokens fill (vLLM caches at allocation, capped at num_tokens)."""
        start, end = self.num_hashed_blocks.item(row), num_tokens_known // self.block_size
        if end <= start:
            return
        table = self.slot_tables[self.slot_of_row.item(row)]
        self.pool.cache_blocks(table[start:end], self.block_hashes(row, start, end))
        self.num_hashed_blocks[row] = end

    # ---- allocation ---------------------------------------------------------------------------------------
    def admit(self, row: int, cached_blocks: np.ndarray, num_tokens_after: int, num_tokens_known: int) -> None:
        """Give a waiting request a slot, its cache hits and new blocks for ``num_tokens_after`` tokens."""
        slot = self._free_slots.pop()
        self.slot_of_row[row] = slot
        self.row_of_slot[slot] = row
        longest = self._max_blocks_of_row.item(row)
        if len(self.slot_tables[slot]) < longest:  # (a freed table is all -1 again: reused as it is)
            self.slot_tables[slot] = np.full(longest, -1, dtype=np.int32)
        k = len(cached_blocks)
        if k:
            self.pool.touch(cached_blocks)
            self.slot_tables[slot][:k] = cached_blocks
        self.num_blocks_held[row] = k
        self.num_hashed_blocks[row] = k
        self._grow_from(row, slot, k, num_tokens_after, num_tokens_known)

    def grow(self, row: int, num_tokens_after: int, num_tokens_known: int) -> None:
        """Allocate the blocks one request needs to hold ``num_tokens_after`` computed tokens."""
        self._grow_from(row, self.slot_of_row.item(row), self.num_blocks_held.item(row), num_tokens_after,
                        num_tokens_known)

    def _grow_from(self, row: int, slot: int, held: int, num_tokens_after: int, num_tokens_known: int) -> None:
        """``grow`` for a request in batch slot ``slot`` that holds ``held`` blocks (callers know both)."""
        target = cdiv(num_tokens_after, self.block_size)
        if target > held:
            self.slot_tables[slot][held:target] = self.pool.allocate(target - held)
            self.num_blocks_held[row] = target
        if self.enable_caching:
            self._hash_full_blocks(row, min(num_tokens_after, num_tokens_known))

    def fills_its_blocks(self, num_tokens: np.ndarray) -> np.ndarray:
        """[k] bool: ``num_tokens`` computed tokens fill whole blocks (the next token needs a new one)."""
        if self._is_power_of_two:
            return (num_tokens & self._size_less_one) == ZERO
        return num_tokens % self._size == ZERO

    def grow_by_one_block(self, rows: np.ndarray, num_computed: np.ndarray) -> None:
        """One more block for each of ``rows``, whose ``num_computed`` tokens (> 0) fill the blocks they hold."""
        # They hold whole blocks: num_computed / block_size exactly (a shift when block_size is a power of two)
        held = num_computed >> self._shift if self._is_power_of_two else num_computed // self._size
        self.place(rows, held, self.pool.allocate(len(rows)))
        self.num_blocks_held[rows] = held + ONE

    def grow_many(self, rows: np.ndarray, new_blocks: np.ndarray, held: np.ndarray, total: int,
                  num_tokens_known: np.ndarray | None) -> None:
        """Vectorised ``grow`` for running requests: ``new_blocks[i]`` more blocks for ``rows[i]``, which holds
        ``held[i]`` now, ``total`` = sum(new_blocks) in all. ``num_tokens_known`` (needed only with prefix caching)
        caps which blocks count as full."""
        if total:
            growing = new_blocks.nonzero()[0]  # usually a few decoding requests crossing a block boundary
            rows_g, held_g = rows[growing], held[growing]
            blocks = self.pool.allocate(total)
            if total == len(growing):  # one block each
                self.place(rows_g, held_g, blocks)
                self.num_blocks_held[rows_g] = held_g + 1
            else:
                new_g = new_blocks[growing]
                ends = np.cumsum(new_g)
                for slot, h, n, end in zip(self.slot_of_row[rows_g].tolist(), held_g.tolist(), new_g.tolist(),
                                           ends.tolist(), strict=True):
                    self.slot_tables[slot][h:h + n] = blocks[end - n:end]
                self.num_blocks_held[rows_g] = held_g + new_g
        if self.enable_caching and num_tokens_known is not None:
            full = num_tokens_known // self.block_size
            for i in np.flatnonzero(full > self.num_hashed_blocks[rows]).tolist():
                self._hash_full_blocks(int(rows[i]), int(num_tokens_known[i]))

    def append_blocks(self, rows: np.ndarray, positions: np.ndarray, nth: np.ndarray) -> None:
        """New blocks, from the pool in the order given: request ``rows[positions[i]]`` gets its ``nth[i]``-th
        (from 0) new block after those it holds (a quiet stretch's blocks, in vLLM's order: sim/fast_forward.py)."""
        if not len(positions):
            return
        blocks = self.pool.allocate(len(positions))
        growing = rows[positions]
        self.place(growing, self.num_blocks_held[growing] + nth, blocks)
        self.num_blocks_held[rows] += np.bincount(positions, minlength=len(rows))

    def free(self, row: int) -> None:
        """Release a request's blocks, tail first (so its prefix stays cached longest), and its slot."""
        slot = self.slot_of_row.item(row)
        if slot < 0:
            return
        held = self.num_blocks_held.item(row)
        table = self.slot_tables[slot]
        if held:
            self.pool.free(table[held - 1 :: -1])  # tail first; the pool copies the ids
        table[:held] = -1
        self.num_blocks_held[row] = 0
        self.num_hashed_blocks[row] = 0
        self.slot_of_row[row] = -1
        self.row_of_slot[slot] = -1
        self._free_slots.append(slot)

    # ---- views --------------------------------------------------------------------------------------------
    def owner_map(self) -> np.ndarray:
        """[num_blocks] int32: the row holding each block (the latest slot's if shared), -1 free."""
        owner = np.full(self.pool.num_blocks, -1, dtype=np.int32)
        for slot in np.flatnonzero(self.row_of_slot >= 0).tolist():  # in slot order: a later slot's holder wins
            row = self.row_of_slot.item(slot)
            owner[self.slot_tables[slot][: self.num_blocks_held.item(row)]] = row
        return owner

    def check_integrity(self) -> None:
        self.pool.check_integrity()
        slots = np.flatnonzero(self.row_of_slot >= 0)
        rows = self.row_of_slot[slots]
        if not np.array_equal(self.slot_of_row[rows], slots):
            raise AssertionError("slot_of_row and row_of_slot disagree")
        refs = np.zeros(self.pool.num_blocks, dtype=np.int64)
        for slot, row in zip(slots.tolist(), rows.tolist(), strict=True):
            table = self.slot_tables[slot]
            if len(table) < self._max_blocks_of_row[row]:
                raise AssertionError(f"row {row}: its slot's table is shorter than the request at its longest")
            blocks = table[: self.num_blocks_held[row]]
            if (blocks < 0).any() or len(np.unique(blocks)) != len(blocks):
                raise AssertionError(f"row {row}: block table has holes or repeats: {blocks}")
            if (table[self.num_blocks_held[row] :] != -1).any():
                raise AssertionError(f"row {row}: entries past its held blocks")
            refs[blocks] += 1
        if not np.array_equal(refs, self.pool.ref_cnt):
            raise AssertionError("ref_cnt differs from the number of block-table entries per block")
        if len(self._free_slots) + len(slots) != len(self.row_of_slot):
            raise AssertionError("a batch slot was lost")
