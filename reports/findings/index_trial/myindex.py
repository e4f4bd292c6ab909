"""My router's KV-event index (llm-d / Dynamo shape): which worker rank holds which KV blocks.

Engines publish vLLM's KV events per (worker_id, dp_rank); the router asks "which rank holds the
longest prefix of this request" with the request's per-block tokens hashes.

State (all dictionaries, O(1) per block per event):
  _meta[block_hash]              -> (parent_hash, tokens_hash)   while anyone holds the block
  _child[(parent, tokens_hash)]  -> block_hash                   the lookup a query walks
  _holders[block_hash]           -> {rank: copies}               who holds it, how many copies
  _held[rank]                    -> set of block hashes          for clears and worker removal
  _lru                           -> block hashes, least recently stored or matched first
                                    (only used when a capacity is set: the router forgets the
                                    coldest blocks to bound its memory, as llm-d's LRU index does)

Two modes: ``count_copies=True`` reads vLLM's raw stream (a block is held while its stores
outnumber its removes, llm-d's way); False reads a deduplicated stream (held from a store to the
next remove; a repeated store or remove of the same state is idempotent).

``bug`` selects one planted defect (see mybugs.py); "" is the index as I ship it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from radixcheck.properties.index.contract import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    StoredBlock,
)

Rank = tuple[int, int]
U64 = 2**64


class BadEvent(ValueError):
    """A malformed event: refused whole, nothing changed."""


def _check_hash(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < U64:
        raise BadEvent(f"bad hash {value!r}")
    return value


class BlockIndex:
    def __init__(self, count_copies: bool = True, capacity: int | None = None, bug: str = "") -> None:
        self.count_copies = count_copies
        self.capacity = capacity
        self.bug = bug
        self._meta: dict[int, tuple[int | None, int]] = {}
        self._child: dict[tuple[int | None, int], int] = {}
        self._holders: dict[int, dict[Rank, int]] = {}
        self._held: dict[Rank, set[int]] = {}
        self._lru: OrderedDict[int, None] = OrderedDict()
        self._parked: dict[Rank, list[BlockStored]] = {}  # only the "park_orphans" bug uses it

    # ---- events ------------------------------------------------------------------------------

    def apply_event(self, worker_id: int, dp_rank: int, event: object) -> None:
        rank = (worker_id, 0 if self.bug == "ranks_conflated" else dp_rank)
        if isinstance(event, BlockStored):
            self._store(rank, event)
        elif isinstance(event, BlockRemoved):
            self._remove(rank, event)
        elif isinstance(event, AllBlocksCleared):
            self._clear(rank)
        else:
            raise BadEvent(f"unknown event {event!r}")

    def _norm(self, value: int) -> int:
        # Hashes are kept as signed 64-bit keys on the wire of my old router; the bug keeps that.
        if self.bug == "hash_i63":
            return value & (2**63 - 1)
        return value

    def _store(self, rank: Rank, event: BlockStored) -> None:
        held = self._held.get(rank, set())
        parent = event.parent_hash
        if parent is not None:
            parent = self._norm(_check_hash(parent))
        seen: set[int] = set()
        new: list[tuple[int, int]] = []
        for block in event.blocks:
            if not isinstance(block, StoredBlock):
                raise BadEvent(f"not a StoredBlock: {block!r}")
            bh = self._norm(_check_hash(block.block_hash))
            th = self._norm(_check_hash(block.tokens_hash))
            if bh == parent or bh in seen:
                raise BadEvent(f"block {bh} named twice in one chain")
            seen.add(bh)
            new.append((bh, th))
        if parent is not None and parent not in held:
            if self.bug == "park_orphans":   # "it will come": wait for the parent's store
                self._parked.setdefault(rank, []).append(event)
                return
            raise BadEvent(f"parent {parent} not held by {rank}")
        # Checked: now apply.
        prev = parent
        for bh, th in new:
            self._add(rank, prev, bh, th)
            prev = bh
        if self.bug == "park_orphans":
            self._unpark(rank)
        self._enforce_capacity()

    def _unpark(self, rank: Rank) -> None:
        waiting = self._parked.pop(rank, [])
        for event in waiting:
            try:
                self._store(rank, event)
            except BadEvent:
                pass

    def _add(self, rank: Rank, parent: int | None, bh: int, th: int) -> None:
        if bh not in self._meta:
            self._meta[bh] = (parent, th)
            self._child[(parent, th)] = bh
        holders = self._holders.setdefault(bh, {})
        if self.count_copies or self.bug == "store_twice_counts":
            holders[rank] = holders.get(rank, 0) + 1
        else:
            holders[rank] = 1
        self._held.setdefault(rank, set()).add(bh)
        self._touch(bh)

    def _remove(self, rank: Rank, event: BlockRemoved) -> None:
        held = self._held.get(rank, set())
        hashes = [self._norm(_check_hash(h)) for h in event.block_hashes]
        for bh in hashes:
            if bh not in held:
                raise BadEvent(f"{rank} does not hold {bh}")
        for bh in hashes:
            if bh in self._held.get(rank, set()):
                self._drop(rank, bh, all_copies=self.bug == "copies_ignored")
                if self.bug == "remove_drops_children":
                    self._drop_descendants(rank, bh)

    def _drop_descendants(self, rank: Rank, bh: int) -> None:
        for child in [b for b in self._held.get(rank, set()) if self._meta.get(b, (None,))[0] == bh]:
            self._drop(rank, child, all_copies=True)
            self._drop_descendants(rank, child)

    def _drop(self, rank: Rank, bh: int, all_copies: bool = False) -> None:
        holders = self._holders[bh]
        holders[rank] -= 1
        if all_copies or holders[rank] <= 0:
            del holders[rank]
            self._held[rank].discard(bh)
            if not self._held[rank]:
                del self._held[rank]
        if not holders:
            self._forget(bh)

    def _forget(self, bh: int) -> None:
        """Nobody holds the block any more: drop every entry about it."""
        del self._holders[bh]
        key = self._meta.pop(bh)
        if self._child.get(key) == bh:
            del self._child[key]
        self._lru.pop(bh, None)

    def _clear(self, rank: Rank) -> None:
        for bh in list(self._held.get(rank, ())):
            if self.bug == "clear_leaves_holders":
                self._held[rank].discard(bh)   # forgot the reverse map: _holders keeps the rank
                continue
            self._drop(rank, bh, all_copies=True)
        self._held.pop(rank, None)

    def remove_worker(self, worker_id: int) -> None:
        for rank in [r for r in self._held if r[0] == worker_id]:
            if self.bug == "remove_worker_rank0" and rank[1] != 0:
                continue
            self._clear(rank)

    # ---- capacity (LRU) ----------------------------------------------------------------------

    def _touch(self, bh: int) -> None:
        if self.capacity is not None:
            self._lru[bh] = None
            self._lru.move_to_end(bh)

    def _enforce_capacity(self) -> None:
        if self.capacity is None:
            return
        while len(self._holders) > self.capacity:
            victim = next(iter(self._lru))
            for rank in list(self._holders[victim]):
                self._drop(rank, victim, all_copies=True)

    # ---- queries -----------------------------------------------------------------------------

    def _lookup(self, parent: int | None, th: int) -> int | None:
        if self.bug == "linear_lookup":   # "the dict is small": scan what we know
            for bh, key in self._meta.items():
                if key == (parent, th):
                    return bh
            return None
        return self._child.get((parent, th))

    def find_matches(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]:
        result: dict[Rank, int] = {}
        active: set[Rank] | None = None
        parent: int | None = None
        depth = 0
        for th in tokens_hashes:
            bh = self._lookup(parent, self._norm(th))
            if bh is None:
                break
            holders = set(self._holders.get(bh, ()))
            if self.bug == "overlap_counts_held":   # count every block held along the path
                for rank in holders:
                    result[rank] = result.get(rank, 0) + 1
                parent = bh
                self._touch(bh)
                continue
            now = holders if active is None else active & holders
            for rank in (active or set()) - now:
                result[rank] = depth
            active = now
            if not active:
                break
            depth += 1
            parent = bh
            self._touch(bh)
        if self.bug != "overlap_counts_held":
            for rank in active or ():
                result[rank] = depth
        return {rank: n for rank, n in result.items() if n > 0}

    def sizes(self) -> dict[Rank, int]:
        if self.bug == "sizes_count_copies":
            return {rank: sum(self._holders[bh][rank] for bh in held) for rank, held in self._held.items()}
        return {rank: len(held) for rank, held in self._held.items()}

    def dump(self) -> list[tuple[int, int, BlockStored]]:
        """One single-block store per held block (per copy when counting), parents first."""
        out: list[tuple[int, int, BlockStored]] = []
        for rank, held in self._held.items():
            if self.bug == "dump_unordered":
                order = list(held)
            else:
                order = self._parents_first(held)
            for bh in order:
                parent, th = self._meta[bh]
                copies = self._holders[bh][rank] if self.count_copies else 1
                for _ in range(copies):
                    out.append((rank[0], rank[1], BlockStored(parent, (StoredBlock(bh, th),))))
        return out

    def _parents_first(self, held: set[int]) -> list[int]:
        order: list[int] = []
        done: set[int] = set()
        for start in held:
            path = []
            bh: int | None = start
            while bh is not None and bh in held and bh not in done:
                path.append(bh)
                done.add(bh)
                bh = self._meta[bh][0]
            order.extend(reversed(path))
        return order

    def resident(self) -> int:
        return (len(self._meta) + len(self._child) + sum(len(h) for h in self._holders.values())
                + sum(len(h) for h in self._held.values()) + len(self._lru)
                + sum(len(p) for p in self._parked.values()))
