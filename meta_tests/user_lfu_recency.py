"""A new user's cache with its own policy, LFU with recency: frequency that saturates at three
hits, then least recently used (a match and an insert both count a hit). Declared as a
:class:`~radixcheck.properties.cache.policies.Policy`, so its order is judged.

``make`` counts right; ``make_unbumped`` is the user's first version, whose counter is not bumped
when an already cached prefix is re-inserted (only new nodes start at one): it "conformed" while
the order of a named policy other than "lru" was not exercised.

    radixcheck audit meta_tests.user_lfu_recency:make_unbumped --repro DIR   # exit 1, a repro file in DIR
"""

from __future__ import annotations

from typing import Any

from radixcheck import Capabilities, Policy
from radixcheck.reference.radix_cache import Node, RadixCache

LFU_WITH_RECENCY = Policy(key=lambda s: (min(s.hits, 3), s.last_use), name="lfu3-then-lru", hits_on_match=True)


class LfuRecencyCache(RadixCache):
    """The user's cache (here the reference's tree, with the user's policy and counters)."""

    policy = LFU_WITH_RECENCY
    capabilities = Capabilities(eviction_policy=LFU_WITH_RECENCY, page_sizes=(1, 4))


class UnbumpedOnReinsert(LfuRecencyCache):
    """The bug: an insert that re-covers a cached node does not count a hit."""

    def _hit(self, node: Node, by: str) -> None:
        if by == "match":
            super()._hit(node, by)


def make(allocator: Any, page_size: int) -> LfuRecencyCache:
    return LfuRecencyCache(allocator, page_size)


def make_unbumped(allocator: Any, page_size: int) -> UnbumpedOnReinsert:
    return UnbumpedOnReinsert(allocator, page_size)


make.capabilities = make_unbumped.capabilities = LfuRecencyCache.capabilities
