"""The engines the index machine plays: one vLLM-like block cache per rank, and its publisher.

Each rank of each worker is an :class:`EngineRank`: a prefix cache of blocks, each block known by
its *chain* (the token-block ids from the start of the sequence to it), with a physical copy
count, as vLLM's block pool keeps them (it does not deduplicate). It does what vLLM's scheduler
and block pool do, and returns the KV event each action publishes:

* :meth:`EngineRank.serve`: a request's prefill. The hit is the longest run of cached leading
  blocks (``get_computed_blocks`` walks the block hashes until the first miss); a block-aligned
  prompt that is fully cached has its last block recomputed (vLLM caps a hit at ``num_tokens -
  1``), and every block after the hit is cached again, as a new copy if it already was (a block
  left cached under an evicted parent, or that recomputed last block). One ``BlockStored`` under
  the last hit block.
* :meth:`EngineRank.evict`: memory pressure takes free cached blocks one copy at a time, oldest
  use first (or any one, for an engine that evicts any unreferenced block, e.g. vLLM's
  ``evict_blocks``); leaves first when the index needs it. One ``BlockRemoved``.
* :meth:`EngineRank.clear`: ``reset_prefix_cache``: ``AllBlocksCleared``.

The publisher either passes vLLM's raw stream (one ``BlockRemoved`` per physical copy), for an
index that counts copies, or deduplicates it as Dynamo's worker-side ``EventDedupFilter`` does
(ai-dynamo/dynamo#8012): stores always pass, a remove passes when the rank's last copy goes.

Hashes: ``tokens_hash`` is a 64-bit digest of a token-block id; ``block_hash`` chains the parent's
block hash with the block's tokens hash (64-bit blake2b), so both spread over ``[0, 2**64)``.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, KvEvent, StoredBlock

Chain = tuple[int, ...]


def tokens_hash(block_id: int) -> int:
    """The 64-bit hash of one block's tokens (a token-block id stands for the block's tokens)."""
    return int.from_bytes(hashlib.blake2b(b"tokens:%d" % block_id, digest_size=8).digest(), "big")


def chain_hash(parent: int | None, tokens: int) -> int:
    """The block hash of a block with these tokens under ``parent`` (None at a sequence's start)."""
    seed = b"root" if parent is None else parent.to_bytes(8, "big")
    return int.from_bytes(hashlib.blake2b(seed + tokens.to_bytes(8, "big"), digest_size=8).digest(), "big")


class Hashes:
    """Block hashes of chains, memoised (a chain's hash needs its parent's)."""

    def __init__(self) -> None:
        self._of: dict[Chain, int] = {}

    def of(self, chain: Chain) -> int:
        h = self._of.get(chain)
        if h is None:
            parent = self.of(chain[:-1]) if len(chain) > 1 else None
            h = self._of[chain] = chain_hash(parent, tokens_hash(chain[-1]))
        return h

    def stored(self, chain: Chain) -> StoredBlock:
        return StoredBlock(self.of(chain), tokens_hash(chain[-1]))


class EngineRank:
    """One rank's prefix cache and publisher. ``raw``: publish vLLM's stream as it is (a remove
    per physical copy); else deduplicate removes. ``leaves_first``: evict only blocks with no
    cached block under them (or a spare copy)."""

    def __init__(self, hashes: Hashes, raw: bool, leaves_first: bool) -> None:
        self.hashes, self.raw, self.leaves_first = hashes, raw, leaves_first
        self.copies: Counter[Chain] = Counter()  # chain -> physical copies cached
        self.children: Counter[Chain] = Counter()  # chain -> distinct cached chains one block below it
        self.last_use: dict[Chain, int] = {}
        self.published: Counter[int] = Counter()  # the dedup filter: stores published per block hash
        self.clock = 0
        self.last_event: KvEvent | None = None

    def cached(self, chain: Chain) -> bool:
        return self.copies[chain] > 0

    def hit(self, request: Chain) -> int:
        """Leading blocks of ``request`` cached (what the engine itself matches)."""
        n = 0
        while n < len(request) and self.copies[request[: n + 1]] > 0:
            n += 1
        return n

    def serve(self, request: Chain, aligned: bool) -> BlockStored | None:
        """A request's prefill: cache every block after the hit (``aligned``: the prompt is a whole
        number of blocks, so a fully cached one recomputes its last block)."""
        self.clock += 1
        hit = self.hit(request)
        if aligned and hit == len(request) and hit:
            hit -= 1
        for n in range(1, hit + 1):
            self.last_use[request[:n]] = self.clock
        new = [request[:n] for n in range(hit + 1, len(request) + 1)]
        for chain in new:
            if self.copies[chain] == 0 and len(chain) > 1:
                self.children[chain[:-1]] += 1
            self.copies[chain] += 1
            self.last_use[chain] = self.clock
            self.published[self.hashes.of(chain)] += 1
        if not new:
            return None
        parent = self.hashes.of(request[:hit]) if hit else None
        return self._published(BlockStored(parent, tuple(self.hashes.stored(c) for c in new)))

    def candidates(self) -> list[Chain]:
        """What eviction may take next: any cached block, or (leaves first) one with nothing cached
        under it, or a spare copy; oldest use first, and of blocks last used together the deepest
        first (vLLM frees a request's blocks tail first)."""
        free = [c for c, n in self.copies.items() if n > 0 and (not self.leaves_first or self.children[c] == 0 or n > 1)]
        return sorted(free, key=lambda c: (self.last_use[c], -len(c), c))

    def evict(self, count: int, pick: int | None = None) -> BlockRemoved | None:
        """Evict ``count`` copies, oldest use first; ``pick``: instead, the candidate at that index
        (mod the candidates) each time, e.g. a block whose children stay cached."""
        removed: list[int] = []
        for _ in range(count):
            free = self.candidates()
            if not free:
                break
            chain = free[pick % len(free)] if pick is not None else free[0]
            removed += self._evict_copy(chain)
        return self._published(BlockRemoved(tuple(removed))) if removed else None

    def evict_chain(self, chain: Chain) -> BlockRemoved | None:
        """Evict one copy of exactly this block (the caller chose it: it is cached)."""
        removed = self._evict_copy(chain)
        return self._published(BlockRemoved(tuple(removed))) if removed else None

    def _evict_copy(self, chain: Chain) -> list[int]:
        self.copies[chain] -= 1
        if self.copies[chain] == 0:
            del self.copies[chain]
            self.last_use.pop(chain, None)
            if len(chain) > 1:
                self.children[chain[:-1]] -= 1
                if self.children[chain[:-1]] == 0:
                    del self.children[chain[:-1]]
        h = self.hashes.of(chain)
        self.published[h] -= 1
        last = self.published[h] == 0
        if last:
            del self.published[h]
        return [h] if self.raw or last else []

    def clear(self) -> AllBlocksCleared:
        self.copies.clear()
        self.children.clear()
        self.last_use.clear()
        self.published.clear()
        return self._published(AllBlocksCleared())

    def _published(self, event: KvEvent) -> KvEvent:
        self.last_event = event
        return event
