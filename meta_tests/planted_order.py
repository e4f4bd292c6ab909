"""Order bugs planted into the reference, for the ``known:`` waivers' meta-tests
(meta_tests/test_known_deviations.py): SGLang 0.5.23's #3 and #9 as the reference's own splits
would have them, and a second, different order bug to sit behind each.

The planted bugs act only on splits a match or an insert makes (a quarantine's split is not a use,
and SGLang has no quarantine), so they are what the deviations in
:mod:`radixcheck.oracles.deviation` describe, written against the reference's code instead of the model's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES
from radixcheck.properties.cache.mutants import FifoPolicyReference, LfuNotBumpedOnReinsert, LfuReference, MostRecentFirst, MruReference
from radixcheck.reference.radix_cache import Node, RadixCache


class _Using(RadixCache):
    """Knows whether a split is a use's (a match or an insert is running)."""

    _using = False

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> tuple[np.ndarray, Node]:
        self._using = True
        try:
            return super().match_prefix(tokens, namespace, priority)
        finally:
            self._using = False

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        self._using = True
        try:
            return super().insert(tokens, values, namespace, priority)
        finally:
            self._using = False


class RefreshesSuffix(_Using):
    """#3: a use stamps the node it walks into before splitting it, so the unused lower half looks used now."""

    def _split(self, child: Node, at: int) -> Node:
        if self._using:
            child.last_access = self._clock  # the bug
        return super()._split(child, at)


class FreshSplitCreation(_Using):
    """#9: a use's split makes the upper half a new node, created now (the lower half keeps its time)."""

    def _split(self, child: Node, at: int) -> Node:
        upper = super()._split(child, at)
        if self._using:
            upper.created = self._clock  # the bug
        return upper


class Lru(RadixCache):
    """The reference, correct, with the plain contract's capabilities (LRU)."""

    capabilities = DEFAULT_CAPABILITIES


class Lru3(RefreshesSuffix):
    """SGLang's LRU (the LRU oracle) with #3."""

    capabilities = DEFAULT_CAPABILITIES


class Lru3MostRecentFirst(RefreshesSuffix, MostRecentFirst):
    """#3, and a second order bug: the most recently used leaf goes first."""

    capabilities = DEFAULT_CAPABILITIES


class Lfu3(RefreshesSuffix, LfuReference):
    """SGLang's LFU with #3."""


class Mru3(RefreshesSuffix, MruReference):
    """SGLang's MRU with #3."""


class Fifo9(FreshSplitCreation, FifoPolicyReference):
    """SGLang's FIFO with #9."""


class Lfu3ReinsertNotCounted(RefreshesSuffix, LfuNotBumpedOnReinsert):
    """#3, and a second order bug: a re-insert does not count a hit."""


class Fifo9ByLastAccess(FreshSplitCreation, FifoPolicyReference):
    """#9, and a second order bug: FIFO ordered by last access (it is LRU)."""

    def _eviction_key(self, node: Node) -> tuple[Any, ...]:
        return node.last_access, node.serial  # the second bug

