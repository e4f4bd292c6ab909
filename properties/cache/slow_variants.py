"""Correct but slow caches: they pass every conformance property, and ``radixcheck bench`` flags them.

Each reproduces a cost pattern that shipped in real radix caches (the public threads are in
``sources``) with the smallest change to the reference, and names in ``flagged_on`` the bench
operation whose cost per unit of work grows with the cache because of it. The bench's
meta-tests check both halves: these are flagged on that operation, the reference is not.

Try one: ``radixcheck bench radixcheck.properties.cache.slow_variants:EvictRescansPerLeaf``.
"""

from __future__ import annotations

from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.validation import as_count


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


SLOW_VARIANTS: list[type[RadixCache]] = [EvictRescansPerLeaf, ChildLookupScans]
