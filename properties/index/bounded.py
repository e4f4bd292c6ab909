"""Indexes that forget on their own (``evicts_on_its_own``): a correct LRU-bounded index, and two bugs.

A router bounds its index as llm-d's in-memory index does (an LRU of block keys, refreshed by
stores and lookups; ``pkg/kvcache/kvblock/in_memory.go``) or as Dynamo's ``PruneManager`` does
(the earliest-stored go first past a size; ``lib/kv-router/src/indexer/pruning.rs``). The
correct variants here are the reference index with an LRU of ``capacity`` (rank, block) pairs on
top; they declare ``keeps_recent_blocks=capacity`` and must pass. Each mutant changes one thing
and names in ``caught_by`` the violation that must report it.

Point the suite at one: ``radixcheck audit radixcheck.properties.index.bounded:BoundedLruKvIndex``
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from radixcheck.oracles.violations import IndexViolation
from radixcheck.properties.index.contract import HASH_LIMIT, BlockRemoved, BlockStored, IndexCapabilities, Rank
from radixcheck.reference.kv_index import KvIndex

CAPACITY = 8  # (rank, block) pairs: the machine's worlds hold more, so it forgets often


class BoundedLruKvIndex(KvIndex):
    """The reference with an LRU of :data:`CAPACITY` (rank, block) pairs, refreshed by stores and by
    the blocks a lookup matches (llm-d's way). Past its capacity it forgets the least recently used
    pair, all copies. It takes a store under a parent it forgot, and ignores the removal of a block
    it forgot (llm-d's ``Evict`` of a missing key is a no-op)."""

    capacity = CAPACITY
    refresh_on_lookup = True
    capabilities = IndexCapabilities(tolerates_redelivery=True, evicts_on_its_own=True, keeps_recent_blocks=CAPACITY)

    def __init__(self) -> None:
        super().__init__()
        self._lru: OrderedDict[tuple[Rank, int], None] = OrderedDict()  # oldest first

    def _use(self, rank: Rank, block_hash: int) -> None:
        self._lru[(rank, block_hash)] = None
        self._lru.move_to_end((rank, block_hash))

    def _check_store(self, rank: Rank, event: BlockStored) -> None:
        parent = event.parent_hash
        forgotten = parent is not None and parent not in self._held.get(rank, ())
        if forgotten:  # it may be a parent this index forgot: checked as if held, the rest as usual
            self._held.setdefault(rank, set()).add(parent)
        try:
            super()._check_store(rank, event)
        finally:
            if forgotten:
                self._held[rank].discard(parent)

    def _store(self, rank: Rank, event: BlockStored) -> None:
        super()._store(rank, event)
        for block in event.blocks:
            self._use(rank, block.block_hash)
        while len(self._lru) > self.capacity:
            self._forget_pair(*self._victim())

    def _victim(self) -> tuple[Rank, int]:
        return next(iter(self._lru))

    def _forget_pair(self, rank: Rank, block_hash: int) -> None:
        del self._lru[(rank, block_hash)]
        while rank in self._holders.get(block_hash, ()):
            self._drop_copy(rank, block_hash)

    def _remove(self, rank: Rank, event: BlockRemoved) -> None:
        if not isinstance(event.block_hashes, tuple) or not all(
                isinstance(h, int) and not isinstance(h, bool) and 0 <= h < HASH_LIMIT for h in event.block_hashes):
            raise ValueError(f"BlockRemoved.block_hashes must be a tuple of ints in [0, 2**64), got {event.block_hashes!r}")
        for h in event.block_hashes:
            if rank in self._holders.get(h, ()):  # one it forgot: nothing to do
                self._drop_copy(rank, h)
                if rank not in self._holders.get(h, ()):
                    self._lru.pop((rank, h), None)

    def _clear(self, rank: Rank) -> None:
        super()._clear(rank)
        for pair in [p for p in self._lru if p[0] == rank]:  # at most ``capacity`` pairs
            del self._lru[pair]

    def find_matches(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]:
        scores = super().find_matches(tokens_hashes)
        if self.refresh_on_lookup and scores:
            parent, blocks = None, []
            for tokens_hash in list(tokens_hashes)[:max(scores.values())]:
                parent = self._lookup(parent, tokens_hash)
                blocks.append(parent)
            for rank, n in scores.items():
                for block_hash in blocks[:n]:
                    self._use(rank, block_hash)
        return scores


class BoundedLruStoresOnlyKvIndex(BoundedLruKvIndex):
    """The same LRU refreshed by stores alone (a lookup changes nothing, as in Dynamo's pruning,
    where only a store renews a block's timer)."""

    refresh_on_lookup = False


class BoundedLruCopyCountingKvIndex(BoundedLruKvIndex):
    """The LRU over vLLM's raw stream, copies counted (llm-d's reading): forgetting a pair drops
    every copy, so a later remove of one copy finds nothing, which it ignores."""

    capabilities = IndexCapabilities(counts_copies=True, evicts_on_its_own=True, keeps_recent_blocks=CAPACITY)


class ForgetsAnyKvIndex(BoundedLruKvIndex):
    """Keeps no promise (``keeps_recent_blocks=0``, as a TTL alone: the suite has no clock): every
    third store forgets the pair stored two stores before, whatever its age. Passing shows that
    without a promise only "never more than the events" is asked."""

    capacity = 10**9
    capabilities = IndexCapabilities(tolerates_redelivery=True, evicts_on_its_own=True, keeps_recent_blocks=0)

    def _store(self, rank: Rank, event: BlockStored) -> None:
        super()._store(rank, event)
        self._stores = getattr(self, "_stores", 0) + 1
        if self._stores % 3 == 0 and len(self._lru) >= 3:
            self._forget_pair(*list(self._lru)[-3])


class BoundedForgetsNewest(BoundedLruKvIndex):
    """Past its capacity it forgets the *most* recently used pair: the order of its queue is the
    wrong way round (a max-heap where Dynamo's ``PruneManager`` pops the earliest expiry through
    ``Reverse``). It forgets what it promises to keep."""

    bug_class = "bounded-forgets-newest"
    caught_by = IndexViolation

    def _victim(self) -> tuple[Rank, int]:
        return next(reversed(self._lru))


class BoundedIgnoresPartlyUnknownRemove(BoundedLruKvIndex):
    """To take the removal of blocks it forgot, it ignores any ``BlockRemoved`` naming one: the
    blocks of that event it still has stay, and it answers more than the ranks hold."""

    bug_class = "bounded-ignores-partly-unknown-remove"
    caught_by = IndexViolation

    def _remove(self, rank: Rank, event: BlockRemoved) -> None:
        if isinstance(event.block_hashes, tuple) and any(rank not in self._holders.get(h, ()) for h in event.block_hashes):
            return
        super()._remove(rank, event)


BOUNDED_INDEX_VARIANTS: list[type[KvIndex]] = [BoundedLruKvIndex, BoundedLruStoresOnlyKvIndex, BoundedLruCopyCountingKvIndex,
                                               ForgetsAnyKvIndex]
BOUNDED_INDEX_MUTANTS: list[Any] = [BoundedForgetsNewest, BoundedIgnoresPartlyUnknownRemove]
