"""Correct but slow caches: they pass every oracle, and ``radixcheck bench`` flags them. Those whose match or
insert scans (``ChildLookupScans``, ``TouchScansRecencyList``) also fail the production world's step-cost watch
(``radixcheck.properties.cache.step_cost``): there the cost is the finding.

Each reproduces a cost pattern that shipped in real radix caches (the public threads are in
``sources``) with the smallest change to the reference, and names in ``flagged_on`` the bench
operation whose cost per unit of work grows with the cache because of it. The bench's
meta-tests check both halves: these are flagged on that operation, the reference is not.

Try one: ``radixcheck bench radixcheck.properties.cache.slow_variants:EvictRescansPerLeaf``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.validation import as_count, as_tokens


class EvictRescansPerLeaf(RadixCache):
    """Eviction looks for the least recently used leaf by walking the whole tree, once for every
    leaf it evicts: evicting k leaves of an n-node tree costs k*n. Same order as the reference
    (the oldest evictable leaf each time; a parent left childless is a candidate at once)."""

    flagged_on = ("evict",)
    sources = (
        "sgl-project/sglang#14339 (evictable leaves kept incrementally: one eviction 7 ms -> 0.5 ms)",
        "sgl-project/sglang#38454 (per-call heap rebuild: 70-77 ms per evict at ~41k leaves)",
    )

    def evict(self, num_tokens: int) -> int:
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        evicted = 0
        while evicted < wanted:
            leaves = [n for n in self._linked_nodes() if self._evictable_leaf(n)]
            if not leaves:
                break
            leaf = min(leaves, key=self._eviction_key)
            self._unlink(leaf)
            self._free(leaf)
            evicted += len(leaf.key)
        return evicted


class ChildLookupScans(RadixCache):
    """A node's child is found by scanning its children (as a list of edges would be) instead of
    by a hash of the first page: a match or insert under a node with c children costs c per level,
    so a system prompt shared by n conversations makes every request cost n."""

    flagged_on = ("match_prefix", "insert")
    sources = ("a node's children kept as a list of edges and searched in order (the textbook trie layout)",)

    def _child(self, node: Node, page: tuple[int, ...]) -> Node | None:
        for first_page, child in node.children.items():
            if first_page == page:
                return child
        return None


class TouchScansRecencyList(RadixCache):
    """Keeps every cached page in a recency list beside the tree, as a free-block queue does (a page known
    by its first slot, as vLLM knows a block by its id), and finds each page a match or an insert touches
    by searching that list: a call touching d pages of a cache of n costs d*n. The tree and its eviction
    order are the reference's (the list is only kept, never read), so it passes every oracle; the
    production world's step-cost watch fails it in its first story (``radixcheck.properties.cache.step_cost``)."""

    flagged_on = ("match_prefix", "insert")
    sources = ("reports/findings/vllm_trial.md: TouchWalksQueue, a vLLM-shaped free-block queue searched on every touch, "
               "got no verdict in 25 min of production world",)

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        super().__init__(allocator, page_size)
        self._recency: list[int] = []  # each cached page's first slot, least recently touched first

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> tuple[np.ndarray, Node]:
        values, node = super().match_prefix(tokens, namespace, priority)
        self._touch(values)
        return values, node

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        cached = super().insert(tokens, values, namespace, priority)
        self._touch(self._cached_values(tokens, namespace))
        return cached

    def _cached_values(self, tokens: Sequence[int], namespace: Hashable) -> np.ndarray:
        """The slots the tree now holds for ``tokens`` (its own, not the caller's duplicates), without a clock tick."""
        key = as_tokens(tokens, "tokens")
        node, pos, aligned, pieces = self._root_for(namespace), 0, len(key) // self.page_size * self.page_size, []
        while pos < aligned and (child := self._child(node, key[pos : pos + self.page_size])) is not None:
            pieces.append(child.value)  # the insert split the edges where its key ends: whole nodes
            node, pos = child, pos + len(child.key)
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)

    def _touch(self, values: np.ndarray) -> None:
        for slot in values[:: self.page_size].tolist():  # each page's first slot
            if slot in self._recency:  # the search: O(n)
                self._recency.remove(slot)
            self._recency.append(slot)

    def _free(self, node: Node) -> None:
        for slot in node.value[:: self.page_size].tolist():
            if slot in self._recency:
                self._recency.remove(slot)
        super()._free(node)

    def reset(self) -> None:
        super().reset()
        self._recency.clear()


SLOW_VARIANTS: list[type[RadixCache]] = [EvictRescansPerLeaf, ChildLookupScans, TouchScansRecencyList]
