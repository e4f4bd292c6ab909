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

from radixcheck.properties.cache.canonical import canonical_namespace
from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, IndexCapabilities, StoredBlock
from radixcheck.properties.index.engines import chain_hash
from radixcheck.properties.index.router_contract import RouterCapabilities, RouterPair
from radixcheck.reference import RadixCache
from radixcheck.reference.kv_index import KvIndex


def page_tokens_hashes(tokens: Sequence[int], page_size: int, namespace: Any = None) -> list[int]:
    """One 64-bit hash per whole page of ``tokens`` under ``namespace`` (folded into every page's hash,
    as Dynamo's ``compute_block_hash_for_seq(..., lora_name=..., cache_namespace=...)`` folds its
    namespace in; ``repr`` of its canonical form tells the suite's namespaces apart and keeps equal ones,
    ``1``, ``1.0`` and ``True``, one)."""
    seed = b"" if namespace is None else repr(canonical_namespace(namespace)).encode() + b"\0"
    return [int.from_bytes(hashlib.blake2b(seed + repr(list(tokens[i:i + page_size])).encode(), digest_size=8).digest(), "big")
            for i in range(0, len(tokens) // page_size * page_size, page_size)]


class PublishingRadixCache(RadixCache):
    """The reference cache, publishing what it caches as KV events (see the module docstring)."""

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        super().__init__(allocator, page_size)
        self.tap_events = False
        self._published: list[Any] = []
        self._pages: dict[tuple[Any, tuple[int, ...]], int] = {}  # (namespace, cached page prefix) -> its block hash

    def _cached_prefixes(self) -> list[tuple[Any, tuple[int, ...]]]:
        out = []
        for namespace, root in self.roots.items():
            stack = [(root, ())]
            while stack:
                node, prefix = stack.pop()
                for child in node.children.values():
                    key = prefix + tuple(int(t) for t in child.key)
                    out += [(namespace, key[: len(prefix) + n]) for n in range(self.page_size, len(child.key) + 1, self.page_size)]
                    stack.append((child, key))
        return out

    def _tokens_hash(self, namespace: Any, page: tuple[int, ...]) -> int:
        """The tokens hash a published block carries (a publisher that drops the namespace overrides it)."""
        return page_tokens_hashes(page, self.page_size, namespace)[0]

    def _publish_changes(self) -> None:
        now = set(self._cached_prefixes())
        gone = sorted(set(self._pages) - now, key=lambda p: len(p[1]), reverse=True)  # deepest first, as a leaf eviction goes
        if gone:
            self._emit(BlockRemoved(tuple(self._pages.pop(p) for p in gone)))
        for namespace, prefix in sorted(now - set(self._pages), key=lambda p: len(p[1])):  # parents first
            parent = self._pages.get((namespace, prefix[: -self.page_size])) if len(prefix) > self.page_size else None
            tokens = self._tokens_hash(namespace, prefix[-self.page_size:])
            h = chain_hash(parent, tokens)
            self._emit(BlockStored(parent, (StoredBlock(h, tokens),)))
            self._pages[(namespace, prefix)] = h

    def _emit(self, event: Any) -> None:
        if self.tap_events:
            self._published.append(event)

    def take_published(self) -> list[Any]:
        events, self._published = self._published, []
        return events

    def cached_prefix_length(self, tokens: Sequence[int], namespace: Any = None) -> int:
        """Tokens of the longest prefix cached under ``namespace``, read from the tree without counting
        as a use (no clock tick, no split, no root made)."""
        key = tuple(int(t) for t in tokens)
        key = key[: len(key) // self.page_size * self.page_size]
        node, pos = self.roots.get(self._key(namespace)), 0
        if node is None:
            return 0
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

    def insert(self, tokens: Sequence[int], values: Any, namespace: Any = None) -> int:
        prefix_len = super().insert(tokens, values, namespace)
        self._publish_changes()
        return prefix_len

    def evict(self, num_tokens: int) -> int:
        evicted = super().evict(num_tokens)
        self._publish_changes()
        return evicted

    def evict_prefix(self, tokens: Sequence[int], namespace: Any = None) -> int:
        removed = super().evict_prefix(tokens, namespace)
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
