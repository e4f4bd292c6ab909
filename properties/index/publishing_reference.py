"""The reference radix cache publishing KV events, for the end-to-end check's own tests.

:class:`PublishingRadixCache` is the reference cache (``radixcheck.reference.RadixCache``) plus an
event stream as SGLang's radix cache publishes one: a ``BlockStored`` for every page that becomes
cached (under the page before it), a ``BlockRemoved`` for every page no match can reach any more
(evicted, quarantined), an ``AllBlocksCleared`` on reset. It finds what changed by comparing the
cached pages before and after each call that can change them (a walk of the tree: a test engine,
for small worlds), so it cannot disagree with the cache. ``cached_prefix_length`` answers the
end-to-end probe without counting as a use (the reference's match refreshes recency).

``router_pair()`` pairs it with the reference index; the meta-tests break the publisher or the
index and check which oracle reports it (``meta_tests/test_router_e2e.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, IndexCapabilities, StoredBlock
from radixcheck.properties.index.engines import chain_hash
from radixcheck.properties.index.router_contract import RouterCapabilities, RouterPair
from radixcheck.reference import RadixCache
from radixcheck.reference.kv_index import KvIndex


def page_tokens_hashes(tokens: Sequence[int], page_size: int) -> list[int]:
    """One 64-bit hash per whole page of ``tokens``."""
    return [int.from_bytes(hashlib.blake2b(repr(list(tokens[i:i + page_size])).encode(), digest_size=8).digest(), "big")
            for i in range(0, len(tokens) // page_size * page_size, page_size)]


class PublishingRadixCache(RadixCache):
    """The reference cache, publishing what it caches as KV events (see the module docstring)."""

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        super().__init__(allocator, page_size)
        self.tap_events = False
        self._published: list[Any] = []
        self._pages: dict[tuple[int, ...], int] = {}  # cached page prefix -> its block hash

    def _cached_prefixes(self) -> list[tuple[int, ...]]:
        out, stack = [], [(self.root, ())]
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                key = prefix + tuple(int(t) for t in child.key)
                out += [key[: len(prefix) + n] for n in range(self.page_size, len(child.key) + 1, self.page_size)]
                stack.append((child, key))
        return out

    def _publish_changes(self) -> None:
        now = set(self._cached_prefixes())
        gone = sorted(set(self._pages) - now, key=len, reverse=True)  # deepest first, as a leaf eviction goes
        if gone:
            self._emit(BlockRemoved(tuple(self._pages.pop(p) for p in gone)))
        for prefix in sorted(now - set(self._pages), key=len):  # parents first
            parent = prefix[: -self.page_size]
            tokens = page_tokens_hashes(prefix[-self.page_size:], self.page_size)[0]
            h = chain_hash(self._pages.get(parent) if parent else None, tokens)
            self._emit(BlockStored(self._pages.get(parent) if parent else None, (StoredBlock(h, tokens),)))
            self._pages[prefix] = h

    def _emit(self, event: Any) -> None:
        if self.tap_events:
            self._published.append(event)

    def take_published(self) -> list[Any]:
        events, self._published = self._published, []
        return events

    def cached_prefix_length(self, tokens: Sequence[int]) -> int:
        """Tokens of the longest cached prefix, read from the tree without counting as a use (no
        clock tick, no split)."""
        key = tuple(int(t) for t in tokens)
        key = key[: len(key) // self.page_size * self.page_size]
        node, pos = self.root, 0
        while pos < len(key):
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None:
                break
            shared = self._shared_length(child.key, key[pos : pos + len(child.key)])
            pos += shared
            if shared < len(child.key):
                break
            node = child
        return pos

    def insert(self, tokens: Sequence[int], values: Any) -> int:
        prefix_len = super().insert(tokens, values)
        self._publish_changes()
        return prefix_len

    def evict(self, num_tokens: int) -> int:
        evicted = super().evict(num_tokens)
        self._publish_changes()
        return evicted

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        removed = super().evict_prefix(tokens)
        self._publish_changes()
        return removed

    def reset(self) -> None:
        super().reset()
        self._pages.clear()
        self._emit(AllBlocksCleared())


PublishingRadixCache.capabilities = RadixCache.capabilities


def router_pair(engine: type[PublishingRadixCache] = PublishingRadixCache,
                index: Callable[[], Any] = KvIndex) -> Callable[[], RouterPair]:
    """A pair factory: ``engine`` publishing into ``index`` (the reference index by default)."""

    def factory() -> RouterPair:
        return RouterPair(engine=engine, index=index, events=lambda events, page_size: events, tokens_hashes=page_tokens_hashes)

    factory.capabilities = RouterCapabilities(engine=engine.capabilities,  # type: ignore[attr-defined]
                                              index=getattr(index, "capabilities", IndexCapabilities()))
    return factory


reference_pair = router_pair()
"""``radixcheck audit radixcheck.properties.index.publishing_reference:reference_pair``: the reference cache into the reference index."""
