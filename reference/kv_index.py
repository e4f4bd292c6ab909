"""A deliberately simple, readable KV-event index: the reference for the second contract.

It keeps four dictionaries and nothing else:

* ``_key``: for every block someone holds, its ``(parent block_hash, tokens_hash)``;
* ``_child``: the other way round, ``(parent block_hash, tokens_hash) -> block_hash``, which is
  how a query of tokens hashes finds its blocks, one step at a time;
* ``_holders``: for every block someone holds, which ranks hold it (and how many copies);
* ``_held``: for every rank, the blocks it holds.

No tree of nodes: a block stored under a parent that was removed before it stays findable
through ``_child`` and matches again as soon as the parent is stored again, which is what the
engine itself does (the child was never evicted). A block nobody holds leaves every dictionary
at once, so what the index keeps is bounded by what is held (``resident``). Every event is
checked completely before anything changes, so a refused event changes nothing. The contract is
``properties/index/contract.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from radixcheck.properties.index.contract import (
    HASH_LIMIT,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    IndexCapabilities,
    Rank,
    StoredBlock,
)


def _hash(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < HASH_LIMIT:
        raise ValueError(f"{what} must be an int in [0, 2**64), got {value!r}")
    return value


def _rank(worker_id: Any, dp_rank: Any) -> Rank:
    for value, what in ((worker_id, "worker_id"), (dp_rank, "dp_rank")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return (worker_id, dp_rank)


class KvIndex:
    """Reference KV-event index (a router's view of which rank holds which blocks)."""

    capabilities = IndexCapabilities(tolerates_redelivery=True)  # a repeated store or clear changes nothing; a repeated remove is refused

    def __init__(self) -> None:
        self.counts_copies = type(self).capabilities.counts_copies
        self._key: dict[int, tuple[int | None, int]] = {}
        self._child: dict[tuple[int | None, int], int] = {}
        self._holders: dict[int, Counter[Rank]] = {}
        self._held: dict[Rank, set[int]] = {}

    # ---- events ----------------------------------------------------------------------------

    def apply_event(self, worker_id: int, dp_rank: int, event: Any) -> None:
        rank = _rank(worker_id, dp_rank)
        if isinstance(event, BlockStored):
            self._store(rank, event)
        elif isinstance(event, BlockRemoved):
            self._remove(rank, event)
        elif isinstance(event, AllBlocksCleared):
            self._clear(rank)
        else:
            raise TypeError(f"not a KV event: {event!r}")

    def _store(self, rank: Rank, event: BlockStored) -> None:
        self._check_store(rank, event)
        parent = event.parent_hash
        for block in event.blocks:
            self._child[(parent, block.tokens_hash)] = block.block_hash
            self._key[block.block_hash] = (parent, block.tokens_hash)
            self._add_copy(rank, block.block_hash)
            parent = block.block_hash

    def _check_store(self, rank: Rank, event: BlockStored) -> None:
        """Everything that makes a store malformed, checked before anything changes."""
        parent = event.parent_hash
        if parent is not None:
            _hash(parent, "parent_hash")
            if parent not in self._held.get(rank, ()):
                raise ValueError(f"BlockStored under parent {parent}, which rank {rank} does not hold")
        if not isinstance(event.blocks, tuple) or not all(isinstance(b, StoredBlock) for b in event.blocks):
            raise ValueError(f"BlockStored.blocks must be a tuple of StoredBlock, got {event.blocks!r}")
        self._check_chain(parent, event.blocks)
        for block in event.blocks:
            h, t = _hash(block.block_hash, "block_hash"), _hash(block.tokens_hash, "tokens_hash")
            known = self._key.get(h)
            if known is not None and known != (parent, t):
                raise ValueError(f"block {h} is already known under parent {known[0]} with tokens hash {known[1]}")
            other = self._child.get((parent, t))
            if other is not None and other != h:
                raise ValueError(f"tokens hash {t} under parent {parent} is already block {other}, not {h}")
            parent = h

    def _check_chain(self, parent: int | None, blocks: tuple[StoredBlock, ...]) -> None:
        """No block of a store is its own parent or named twice: that would make a cycle."""
        hashes = [parent] + [b.block_hash for b in blocks]
        if len(set(hashes)) < len(hashes):
            raise ValueError(f"BlockStored under {parent} names a block twice or as its own parent: a cycle")

    def _add_copy(self, rank: Rank, block_hash: int) -> None:
        holders = self._holders.setdefault(block_hash, Counter())
        holders[rank] = holders[rank] + 1 if self.counts_copies else 1
        self._held.setdefault(rank, set()).add(block_hash)

    def _remove(self, rank: Rank, event: BlockRemoved) -> None:
        if not isinstance(event.block_hashes, tuple):
            raise ValueError(f"BlockRemoved.block_hashes must be a tuple, got {event.block_hashes!r}")
        wanted = Counter(_hash(h, "block hash") for h in event.block_hashes)
        for h, n in wanted.items():
            if self._holders.get(h, Counter())[rank] < n:
                raise ValueError(f"BlockRemoved of block {h}, which rank {rank} does not hold ({n} cop{'y' if n == 1 else 'ies'})")
        for h in event.block_hashes:
            self._drop_copy(rank, h)

    def _drop_copy(self, rank: Rank, block_hash: int) -> None:
        holders = self._holders[block_hash]
        holders[rank] -= 1
        if holders[rank] == 0:
            del holders[rank]
            self._held[rank].discard(block_hash)
            if not holders:
                self._forget(block_hash)

    def _forget(self, block_hash: int) -> None:
        """Nobody holds the block: it leaves every dictionary."""
        del self._holders[block_hash]
        key = self._key.pop(block_hash)
        if self._child.get(key) == block_hash:
            del self._child[key]

    def _clear(self, rank: Rank) -> None:
        for block_hash in list(self._held.get(rank, ())):
            while rank in self._holders.get(block_hash, ()):
                self._drop_copy(rank, block_hash)

    def remove_worker(self, worker_id: int) -> None:
        _rank(worker_id, 0)
        for rank in [r for r in self._held if r[0] == worker_id]:
            self._clear(rank)
            del self._held[rank]

    # ---- queries ---------------------------------------------------------------------------

    def find_matches(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]:
        """Each rank's overlap: how many leading blocks of the query it holds as a chain."""
        query = [_hash(t, "tokens hash") for t in tokens_hashes]
        scores: dict[Rank, int] = {}
        active: set[Rank] | None = None
        parent = None
        for depth, tokens_hash in enumerate(query, 1):
            block_hash = self._lookup(parent, tokens_hash)
            if block_hash is None:
                break
            holders = set(self._holders[block_hash])
            active = holders if active is None else active & holders
            if not active:
                break
            scores.update(dict.fromkeys(active, depth))
            parent = block_hash
        return scores

    def _lookup(self, parent: int | None, tokens_hash: int) -> int | None:
        """The block stored under ``parent`` with these tokens: one dictionary lookup."""
        return self._child.get((parent, tokens_hash))

    def sizes(self) -> dict[Rank, int]:
        return {rank: len(blocks) for rank, blocks in self._held.items() if blocks}

    def dump(self) -> list[tuple[int, int, BlockStored]]:
        """One store per held block whose ancestors the rank all holds, parents first."""
        out = []
        for rank, blocks in self._held.items():
            for block_hash in blocks:
                chain = self._chain_to_root(rank, block_hash)
                if chain is not None:
                    parent, tokens_hash = self._key[block_hash]
                    out.append((len(chain), rank, BlockStored(parent, (StoredBlock(block_hash, tokens_hash),))))
        out.sort(key=lambda item: item[0])
        return [(rank[0], rank[1], event) for _, rank, event in out]

    def _chain_to_root(self, rank: Rank, block_hash: int) -> list[int] | None:
        chain = [block_hash]
        parent = self._key[block_hash][0]
        while parent is not None:
            if parent not in self._held[rank]:
                return None
            chain.append(parent)
            parent = self._key[parent][0]
        return chain

    def resident(self) -> int:
        return len(self._key) + len(self._child) + len(self._holders) + sum(map(len, self._held.values()))
