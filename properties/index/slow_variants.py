"""A correct but slow KV-event index: it passes every conformance property, and ``radixcheck bench`` flags it.

The smallest change to the reference that makes one operation's cost per unit of work grow with
the index, named in ``flagged_on``; the bench's meta-tests check both halves (this one is flagged
on that operation, the reference is not).

Try it: ``radixcheck bench radixcheck.properties.index.slow_variants:LookupScansEveryBlock``.
"""

from __future__ import annotations

from radixcheck.reference.kv_index import KvIndex


class LookupScansEveryBlock(KvIndex):
    """A query's next block is found by scanning every known ``(parent, tokens hash)`` pair (as a
    list of blocks searched in order would be) instead of by a hash lookup: each query block costs
    the number of blocks the index knows, so a router's lookup slows down as its workers cache more."""

    flagged_on = ("find_matches",)
    sources = ("reports/findings/router_trial.md, bug I6: 42.7 ms against 20 µs per find_matches at 10^4 prompts",)

    def _lookup(self, parent: int | None, tokens_hash: int) -> int | None:
        for key, block_hash in self._child.items():
            if key == (parent, tokens_hash):
                return block_hash
        return None


class LeaverScansEveryBlock(KvIndex):
    """A rank that leaves (``remove_worker``, ``AllBlocksCleared``) finds its blocks by scanning every
    block anyone holds (an index with no per-rank set of blocks) instead of reading its own: each
    block a leaving worker held costs the whole index."""

    flagged_on = ("remove_worker", "apply_cleared")
    sources = ("radixcheck bench's router world: a leaving worker's cost per block of its share",)

    def _clear(self, rank: tuple[int, int]) -> None:
        for block_hash in [h for h, holders in self._holders.items() if rank in holders]:
            while rank in self._holders.get(block_hash, ()):
                self._drop_copy(rank, block_hash)


SLOW_INDEX_VARIANTS: list[type[KvIndex]] = [LookupScansEveryBlock, LeaverScansEveryBlock]
