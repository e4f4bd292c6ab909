"""The reference radix cache: simple, readable, and the suite's default target."""

from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.scheduling import cache_aware_order

__all__ = ["Node", "RadixCache", "cache_aware_order"]
