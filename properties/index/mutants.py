"""Deliberately broken variants of the reference KV-event index, and correct unusual ones.

Each mutant reproduces one class of bug that Dynamo's KV router index met in production (the
issue or pull request is in ``sources``), with the smallest change to the reference
(``radixcheck.reference.kv_index``), and names in ``caught_by`` the oracle exception(s) that must
report it, so a mutant killed for another reason does not count as caught. The correct variants
(``CORRECT_INDEX_VARIANTS``) are right but unusual (one trusts its callers, one counts vLLM's
duplicate copies, one needs leaves removed first, one has one rank per worker) and must pass.

Point the suite at one to see a failure as a user would:
``radixcheck audit radixcheck.properties.index.mutants:SelfParentPanics``
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from radixcheck.oracles.violations import BadInputViolation, IndexMemoryViolation, IndexViolation
from radixcheck.properties.index.contract import BlockStored, IndexCapabilities, Rank
from radixcheck.properties.index.machine import KvIndexMachine, index_machine_for
from radixcheck.reference.kv_index import KvIndex


class SelfParentPanics(KvIndex):
    """No cycle check: a store whose parent is one of its own blocks links the block under itself,
    and the walk that follows "panics" (RefCell already borrowed), after which every call fails
    as if the indexer were offline (ai-dynamo/dynamo#4394, guarded by #4395)."""

    bug_class = "self-parent-panics"
    sources = ("ai-dynamo/dynamo#4394", "ai-dynamo/dynamo#4395")
    caught_by = BadInputViolation

    offline = False

    def apply_event(self, worker_id: int, dp_rank: int, event: Any) -> None:
        if self.offline:
            raise RuntimeError("IndexerOffline: the indexer thread panicked")
        super().apply_event(worker_id, dp_rank, event)
        if isinstance(event, BlockStored) and any(b.block_hash == event.parent_hash for b in event.blocks):
            self.offline = True
            raise RuntimeError("already mutably borrowed: BorrowError (self-referencing block)")

    def find_matches(self, tokens_hashes: Sequence[int]) -> dict[Rank, int]:
        if self.offline:
            raise RuntimeError("IndexerOffline: the indexer thread panicked")
        return super().find_matches(tokens_hashes)

    def _check_store(self, rank: Rank, event: BlockStored) -> None:
        try:
            super()._check_store(rank, event)
        except ValueError:
            if not any(b.block_hash == event.parent_hash for b in event.blocks):
                raise  # only the self-parent check is missing: the block is linked under itself


class RemoveLeavesPhantomEntry(KvIndex):
    """A remove that cannot resolve its block through the tree (its parent is held by nobody, so
    it hangs under nothing) drops the block from the tree but not from the rank's lookup: a
    phantom tracked block, counted in the sizes forever (ai-dynamo/dynamo#11785)."""

    bug_class = "remove-leaves-phantom-entry"
    sources = ("ai-dynamo/dynamo#11785",)
    caught_by = (IndexViolation, IndexMemoryViolation)

    def _drop_copy(self, rank: Rank, block_hash: int) -> None:
        parent = self._key[block_hash][0]
        unresolvable = parent is not None and parent not in self._holders
        super()._drop_copy(rank, block_hash)
        if unresolvable and rank not in self._holders.get(block_hash, ()):
            self._held[rank].add(block_hash)  # the lookup entry is not scrubbed

    def _chain_to_root(self, rank: Rank, block_hash: int) -> list[int] | None:
        return super()._chain_to_root(rank, block_hash) if block_hash in self._key else None  # the tree no longer has it


class RestoreRevivesRemovedEntries(KvIndex):
    """A "lookup repair" on store: when a block is stored, every rank that ever held it is put back
    as a holder, reviving entries that ranks had removed (ai-dynamo/dynamo#11891)."""

    bug_class = "restore-revives-removed"
    sources = ("ai-dynamo/dynamo#11891",)
    caught_by = IndexViolation

    def __init__(self) -> None:
        super().__init__()
        self._ever: dict[int, set[Rank]] = {}

    def _add_copy(self, rank: Rank, block_hash: int) -> None:
        super()._add_copy(rank, block_hash)
        ever = self._ever.setdefault(block_hash, set())
        ever.add(rank)
        for other in ever - set(self._holders[block_hash]):  # the repair
            self._holders[block_hash][other] = 1
            self._held.setdefault(other, set()).add(block_hash)

    def _forget(self, block_hash: int) -> None:
        super()._forget(block_hash)
        self._ever.pop(block_hash, None)


class PrunesSuffixWithAncestor(KvIndex):
    """Removing a block also drops, for that rank, every block stored under it (an eager prune of
    the suffix); the rank's later remove of such a block is refused as unknown
    (ai-dynamo/dynamo#10916), and the suffix no longer matches once the parent is stored again,
    although the engine still holds it."""

    bug_class = "prunes-suffix-with-ancestor"
    sources = ("ai-dynamo/dynamo#10916",)
    caught_by = IndexViolation

    def _drop_copy(self, rank: Rank, block_hash: int) -> None:
        if rank not in self._holders.get(block_hash, ()):
            return  # pruned earlier in the same event: skipped quietly (a later event naming it is refused)
        below = [h for (parent, _), h in self._child.items() if parent == block_hash]
        super()._drop_copy(rank, block_hash)
        if rank not in self._holders.get(block_hash, ()):
            for child in below:
                while rank in self._holders.get(child, ()):
                    self._drop_copy(rank, child)


class LeaksRemovedNodes(KvIndex):
    """A block nobody holds any more stays in the index (its node is never freed): matches and the
    dump are right, but memory grows with every distinct prompt ever seen
    (ai-dynamo/dynamo#11678, #10774, #14878: ~1 GB/h of router memory)."""

    bug_class = "leaks-removed-nodes"
    sources = ("ai-dynamo/dynamo#11678", "ai-dynamo/dynamo#10774", "ai-dynamo/dynamo#14878")
    caught_by = IndexMemoryViolation

    def _forget(self, block_hash: int) -> None:
        pass  # the node (an empty holders entry), its key and its child link stay


class SizeCountsNewBlocksOnly(KvIndex):
    """Sizes kept as counters that grow only when a store creates a block the index did not have:
    a block stored again while it is still in the index (a restore after a partial remove, kept
    alive by another rank, or a second rank's store) is not counted, so sizes undercount
    (the accounting gap of ai-dynamo/dynamo#8473's review; #7800, #7945)."""

    bug_class = "size-counts-new-blocks"
    sources = ("ai-dynamo/dynamo#8473", "ai-dynamo/dynamo#7800", "ai-dynamo/dynamo#7945")
    caught_by = IndexViolation

    def __init__(self) -> None:
        super().__init__()
        self._size: dict[Rank, int] = {}

    def _add_copy(self, rank: Rank, block_hash: int) -> None:
        new_block = block_hash not in self._holders
        had = rank in self._holders.get(block_hash, ())
        super()._add_copy(rank, block_hash)
        if new_block and not had:
            self._size[rank] = self._size.get(rank, 0) + 1

    def _drop_copy(self, rank: Rank, block_hash: int) -> None:
        super()._drop_copy(rank, block_hash)
        if rank not in self._holders.get(block_hash, ()):
            self._size[rank] = self._size.get(rank, 0) - 1

    def remove_worker(self, worker_id: int) -> None:
        super().remove_worker(worker_id)
        for rank in [r for r in self._size if r[0] == worker_id]:
            del self._size[rank]

    def sizes(self) -> dict[Rank, int]:
        return {rank: n for rank, n in self._size.items() if n}


class ClearedClearsEveryRank(KvIndex):
    """``AllBlocksCleared`` from one data-parallel rank clears every rank of its worker (Dynamo's
    radix tree did this before it cleared by ``(worker, dp_rank)``: ``remove_worker_dp_rank``)."""

    bug_class = "cleared-clears-every-rank"
    sources = ("ai-dynamo/dynamo lib/kv-router radix_tree.rs: Cleared => clear_all_blocks(worker_id)",)
    caught_by = IndexViolation

    def _clear(self, rank: Rank) -> None:
        for other in [r for r in self._held if r[0] == rank[0]]:
            super()._clear(other)


class BadStoreHalfApplied(KvIndex):
    """Checks a store block by block while applying it: a ``BlockStored`` whose second block has a
    hash no u64 can hold is refused only after its first block was stored, so a refused event
    changed the index (a planted bug of a new user's trial; radixcheck's standard for bad input:
    refused with a clear exception, the state unchanged)."""

    bug_class = "bad-store-half-applied"
    sources = ()
    caught_by = BadInputViolation

    def _store(self, rank: Rank, event: BlockStored) -> None:
        if not isinstance(event.blocks, tuple):
            raise ValueError(f"BlockStored.blocks must be a tuple of StoredBlock, got {event.blocks!r}")
        for n, block in enumerate(event.blocks):
            parent = event.parent_hash if n == 0 else event.blocks[n - 1].block_hash
            self._check_store(rank, BlockStored(parent, (block,)))
            super()._store(rank, BlockStored(parent, (block,)))


INDEX_MUTANTS: list[type[KvIndex]] = [
    SelfParentPanics, RemoveLeavesPhantomEntry, RestoreRevivesRemovedEntries, PrunesSuffixWithAncestor,
    LeaksRemovedNodes, SizeCountsNewBlocksOnly, ClearedClearsEveryRank, BadStoreHalfApplied,
]


# ---- correct variants: unusual but right, so they must pass -------------------------------


class TrustingKvIndex(KvIndex):
    """Trusts its publishers, as Dynamo's concurrent indexer does ("publishers must not emit
    self-referencing stores"): it checks nothing, and asserts instead that every event it gets is
    well formed. Passing shows the suite sends no malformed event to an index that declares
    ``validates_events=False``."""

    capabilities = dataclasses.replace(KvIndex.capabilities, validates_events=False)

    def _check_store(self, rank: Rank, event: BlockStored) -> None:
        try:
            super()._check_store(rank, event)
        except ValueError as exc:
            raise AssertionError(f"a malformed event was sent to an index that trusts its publishers: {exc}") from exc


class CopyCountingKvIndex(KvIndex):
    """Reads vLLM's raw stream and counts physical copies of a block hash, as llm-d's filter does
    (llm-d/llm-d-kv-cache#680): a block stays held until its last copy is removed."""

    capabilities = IndexCapabilities(counts_copies=True)


class LeavesFirstKvIndex(KvIndex):
    """Needs a rank's blocks removed leaves first (as a tree that prunes a removed block's subtree
    would), declares it, and asserts it; offers no sizes, dump or memory count. Passing shows the
    suite's engines then evict leaves first, and that it never asks for what is not offered."""

    capabilities = IndexCapabilities(accepts_any_removal_order=False, reports_sizes=False, offers_dump=False,
                                     reports_resident=False)

    clearing = False

    def _clear(self, rank: Rank) -> None:
        self.clearing = True  # a reset drops everything at once: no order to keep
        try:
            super()._clear(rank)
        finally:
            self.clearing = False

    def _drop_copy(self, rank: Rank, block_hash: int) -> None:
        if self._holders[block_hash][rank] == 1 and not self.clearing:
            held_below = [h for (parent, _), h in self._child.items() if parent == block_hash and rank in self._holders.get(h, ())]
            assert not held_below, f"block {block_hash} removed before the blocks {held_below} stored under it (declared leaves first)"
        super()._drop_copy(rank, block_hash)

    def sizes(self) -> Any:
        raise AssertionError("sizes() called on an index that declares reports_sizes=False")

    def dump(self) -> Any:
        raise AssertionError("dump() called on an index that declares offers_dump=False")

    def resident(self) -> Any:
        raise AssertionError("resident() called on an index that declares reports_resident=False")


class SingleRankKvIndex(KvIndex):
    """One rank per worker (no data parallelism), declared and asserted."""

    capabilities = dataclasses.replace(KvIndex.capabilities, max_dp_ranks=1)

    def apply_event(self, worker_id: int, dp_rank: int, event: Any) -> None:
        assert dp_rank == 0, f"an event from dp_rank {dp_rank} sent to an index that declares max_dp_ranks=1"
        super().apply_event(worker_id, dp_rank, event)


CORRECT_INDEX_VARIANTS: list[type[KvIndex]] = [TrustingKvIndex, CopyCountingKvIndex, LeavesFirstKvIndex, SingleRankKvIndex]


def machine_for_index_mutant(mutant: type[KvIndex], name: str | None = None, churn: bool = False) -> type[KvIndexMachine]:
    """The index machine for one mutant or variant, with its own capabilities. The name keys
    Hypothesis's derandomized seed (the kill rates give each stream its own name)."""
    return index_machine_for(mutant, mutant.capabilities, name or f"index_mutant_{mutant.__name__}", churn=churn)
