"""Oracle 7 — the KV-event index model: per rank, the set of block chains its events say it holds.

A router's index, seen from outside, answers one question: for a request's blocks, how many
leading ones does each rank hold? This model keeps exactly what the events say, as plainly as
possible. Every block is known by its *chain*, the sequence of ``tokens_hash`` values from the
start of the sequence to it, interned as a small int (``chain_of``: a trie of chains, never
trusting that two block hashes differ because their blocks do). Each rank (``(worker_id,
dp_rank)``) has the set of chains it holds, with a copy count when the index counts vLLM's
duplicate copies. A query's expected overlap for a rank is the longest run of its leading chains
that the rank holds.

Every method costs what its event or query touches (no walk of the whole model on a step), except
:meth:`IndexModel.reachable`, which the dump check calls. It imports nothing from the suite but
its exception classes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from radixcheck.oracles.violations import EngineEventsViolation

Rank = tuple[int, int]
ROOT = 0  # the chain of nothing: the parent of a sequence's first block


class IndexModel:
    """What each rank holds, by the events. ``counts_copies``: a rank holds a block while it has
    had more stores of it than removes (vLLM's raw stream); otherwise a store adds, a remove drops."""

    def __init__(self, counts_copies: bool = False) -> None:
        self.counts_copies = counts_copies
        self._chains: dict[tuple[int, int], int] = {}  # (parent chain, tokens hash) -> chain
        self._parent: dict[int, tuple[int, int]] = {}  # chain -> (parent chain, tokens hash)
        self.chain_of: dict[int, int] = {}  # block hash -> chain (learnt from stores)
        self.hash_of: dict[int, int] = {}  # chain -> block hash
        self.held: dict[Rank, Counter[int]] = {}  # rank -> chain -> copies (>= 1)
        self._holders: dict[int, set[Rank]] = {}  # chain -> ranks holding it
        self.total_held = 0  # (rank, chain) pairs held

    # ---- what the events say ------------------------------------------------------------------

    def _intern(self, parent: int, tokens_hash: int, block_hash: int) -> int:
        chain = self._chains.get((parent, tokens_hash))
        if chain is None:
            chain = self._chains[(parent, tokens_hash)] = len(self._parent) + 1
            self._parent[chain] = (parent, tokens_hash)
        known = self.chain_of.get(block_hash)
        if known is not None and known != chain:
            raise EngineEventsViolation(f"block hash {block_hash} names two different chains of blocks")
        if self.hash_of.get(chain, block_hash) != block_hash:
            raise EngineEventsViolation(f"one chain of blocks was stored under two block hashes: "
                                        f"{self.hash_of[chain]} and {block_hash}")
        self.chain_of[block_hash], self.hash_of[chain] = chain, block_hash
        return chain

    def holds(self, rank: Rank, block_hash: int) -> bool:
        chain = self.chain_of.get(block_hash)
        return chain is not None and chain in self.held.get(rank, ())

    def copies(self, rank: Rank, block_hash: int) -> int:
        chain = self.chain_of.get(block_hash)
        return 0 if chain is None else self.held.get(rank, Counter())[chain]

    def store(self, rank: Rank, parent_hash: int | None, blocks: Sequence[tuple[int, int]]) -> None:
        """``BlockStored``: ``blocks`` are ``(block_hash, tokens_hash)`` pairs, a chain under ``parent_hash``."""
        if parent_hash is not None and not self.holds(rank, parent_hash):
            raise EngineEventsViolation(f"BlockStored under parent {parent_hash}, which rank {rank} does not hold by its events")
        parent = ROOT if parent_hash is None else self.chain_of[parent_hash]
        mine = self.held.setdefault(rank, Counter())
        for block_hash, tokens_hash in blocks:
            chain = self._intern(parent, tokens_hash, block_hash)
            if chain not in mine:
                self.total_held += 1
                self._holders.setdefault(chain, set()).add(rank)
                mine[chain] = 1
            elif self.counts_copies:
                mine[chain] += 1
            parent = chain

    def remove(self, rank: Rank, block_hashes: Iterable[int]) -> None:
        """``BlockRemoved``: one copy of each block goes (the only one, without copy counting)."""
        mine = self.held.get(rank, Counter())
        for block_hash in block_hashes:
            if not self.holds(rank, block_hash):
                raise EngineEventsViolation(
                    f"BlockRemoved of block {block_hash}, which rank {rank} does not hold by its events"
                    + (" (its events already removed it: one remove per physical copy, more removes than the stores "
                       "a set counts)" if block_hash in self.chain_of else " (no store named it)"))
            chain = self.chain_of[block_hash]
            mine[chain] -= 1
            if mine[chain] <= 0:
                self._drop(rank, chain)

    def _drop(self, rank: Rank, chain: int) -> None:
        del self.held[rank][chain]
        self.total_held -= 1
        holders = self._holders[chain]
        holders.discard(rank)
        if not holders:
            del self._holders[chain]

    def clear(self, rank: Rank) -> None:
        """``AllBlocksCleared`` from ``rank``."""
        for chain in list(self.held.get(rank, ())):
            self._drop(rank, chain)

    def remove_worker(self, worker_id: int) -> None:
        for rank in [r for r in self.held if r[0] == worker_id]:
            self.clear(rank)
            del self.held[rank]

    # ---- what a router must answer -------------------------------------------------------------

    def chain_hashes(self, tokens_hashes: Sequence[int]) -> list[int]:
        """The block hashes of a query's leading blocks, as far as any store named them."""
        out, parent = [], ROOT
        for tokens_hash in tokens_hashes:
            chain = self._chains.get((parent, tokens_hash))
            if chain is None or chain not in self.hash_of:
                break
            out.append(self.hash_of[chain])
            parent = chain
        return out

    def query_chains(self, tokens_hashes: Sequence[int]) -> list[int]:
        """The chains of a query's leading blocks, as far as any store named them."""
        out, parent = [], ROOT
        for tokens_hash in tokens_hashes:
            chain = self._chains.get((parent, tokens_hash))
            if chain is None:
                break
            out.append(chain)
            parent = chain
        return out

    def holders(self, chain: int) -> set[Rank]:
        return self._holders.get(chain, set())

    def path(self, block_hash: int) -> list[int]:
        """The chains from the sequence's first block to this one (the dump check only)."""
        out, node = [], self.chain_of[block_hash]
        while node != ROOT:
            out.append(node)
            node = self._parent[node][0]
        return out[::-1]

    def overlaps(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]:
        """Each rank's overlap with the query (ranks with 0 left out): O(query x ranks)."""
        scores: dict[Rank, int] = {}
        active: set[Rank] | None = None
        parent = ROOT
        for depth, tokens_hash in enumerate(tokens_hashes, 1):
            chain = self._chains.get((parent, tokens_hash))
            holders = self._holders.get(chain, set()) if chain is not None else set()
            active = set(holders) if active is None else active & holders
            if not active:
                break
            for rank in active:
                scores[rank] = depth
            parent = chain
        return scores

    def sizes(self) -> dict[Rank, int]:
        return {rank: len(chains) for rank, chains in self.held.items() if chains}

    def reachable(self) -> set[tuple[Rank, int]]:
        """Every (rank, block hash) whose block and all its ancestors the rank holds: what a dump
        must list. Walks everything held (the dump check only)."""
        out = set()
        for rank, chains in self.held.items():
            for chain in chains:
                node = chain
                while node != ROOT and node in chains:
                    node = self._parent[node][0]
                if node == ROOT:
                    out.add((rank, self.hash_of[chain]))
        return out

    def parent_hash(self, block_hash: int) -> int | None:
        parent = self._parent[self.chain_of[block_hash]][0]
        return None if parent == ROOT else self.hash_of[parent]

    def tokens_hash(self, block_hash: int) -> int:
        return self._parent[self.chain_of[block_hash]][1]
