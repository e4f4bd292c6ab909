"""Index mutants of one cause read several ways, and of two causes, for the grouping-by-replay tests
(``meta_tests/test_index_replay.py``); a module of their own, so an audit of them (``radixcheck
audit meta_tests.index_replay_mutants:Keeps63Bits``) imports nothing else of the tests."""

from __future__ import annotations

from typing import Any

from radixcheck.properties.index.contract import BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.index.mutants import ClearedClearsEveryRank
from radixcheck.reference.kv_index import KvIndex

HIGH = 2**63  # a hash at or above this has its top bit set
I63 = HIGH - 1


def _i63(h: Any) -> Any:
    """A hash kept as a signed 63-bit key; a malformed one as sent (the reference refuses it)."""
    return h & I63 if isinstance(h, int) and not isinstance(h, bool) and 0 <= h < 2**64 else h


class Keeps63Bits(KvIndex):
    """Keeps every hash as a signed 63-bit key (the index trial's B6): one at or above 2**63 collides
    with the one 2**63 below it. Its queries are masked the same way, so they agree with the events;
    its dump hands back the masked hashes: a block no rank holds, a wrong tokens hash or a wrong parent,
    by which of a block's hashes had its top bit set."""

    def apply_event(self, worker_id: int, dp_rank: int, event: Any) -> None:
        if isinstance(event, BlockStored) and isinstance(event.blocks, tuple):
            event = BlockStored(_i63(event.parent_hash), tuple(
                StoredBlock(_i63(b.block_hash), _i63(b.tokens_hash)) if isinstance(b, StoredBlock) else b for b in event.blocks))
        elif isinstance(event, BlockRemoved) and isinstance(event.block_hashes, tuple):
            event = BlockRemoved(tuple(_i63(h) for h in event.block_hashes))
        super().apply_event(worker_id, dp_rank, event)

    def find_matches(self, tokens_hashes: Any) -> dict:
        return super().find_matches([_i63(h) for h in tokens_hashes])


class TwoBugs(ClearedClearsEveryRank, Keeps63Bits):
    """Two bugs of one index: a rank's clear clears its worker's other ranks, and the 63-bit keys."""

