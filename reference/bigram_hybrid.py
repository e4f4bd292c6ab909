"""The reference caches keyed by bigrams with a second pool (the contract's "Key modes" with "A
second pool": an EAGLE draft over a hybrid model).

A bigram cache turns ``n`` raw tokens into ``n - 1`` keys (:mod:`radixcheck.reference.bigram`);
its second pool is counted in the same keys. A sliding window's insert brings one window slot per
raw token, as it brings one KV slot per raw token, and the key ``i`` (the pair ``t[i], t[i+1]``)
keeps the window slot of raw token ``i``: the last raw token's starts no bigram, and the caller
frees it. The window ``W`` and the page alignment are in keys. A state is one slot whatever the key
mode. Everything else is the hybrid reference's, over the keys.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities, SlidingWindow, StatePool
from radixcheck.reference.bigram import bigrams
from radixcheck.reference.hybrid_cache import NONE, WINDOW, WindowRadixCache, as_window
from radixcheck.reference.radix_cache import Node
from radixcheck.reference.state_cache import StateRadixCache
from radixcheck.reference.validation import as_tokens, as_values


class _BigramKeys:
    """Raw tokens in, bigram keys to the hybrid cache underneath (a mixin before it)."""

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> tuple[np.ndarray, Node, Any]:
        return super().match_prefix(bigrams(as_tokens(tokens, "tokens")), namespace, priority)  # type: ignore[misc]

    def evict_prefix(self, tokens: Sequence[int], namespace: Hashable = None) -> int:
        keys = bigrams(as_tokens(tokens, "tokens"))
        if not keys:
            raise ValueError("evict_prefix needs at least two raw tokens (one bigram key)")
        return super().evict_prefix(keys, namespace)  # type: ignore[misc]


class BigramWindowCache(_BigramKeys, WindowRadixCache):
    """Bigram keys and a sliding window counted in keys (``lifecycle="tree"``)."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), key_mode="bigram", second_pool=SlidingWindow(WINDOW), lifecycle="tree")
    page_size_for_test = 4

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        raw = as_tokens(tokens, "tokens")
        vals = as_values(values, len(raw))  # one slot per raw token; the last one starts no bigram
        slots = as_window(window, len(raw))
        keys = bigrams(raw)
        return super().insert(keys, vals[: len(keys)], namespace, priority, window=slots[: len(keys)])


class BigramStateCache(_BigramKeys, StateRadixCache):
    """Bigram keys and a state pool (``lifecycle="tree"``): the state after the last key."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), key_mode="bigram", second_pool=StatePool(), lifecycle="tree")
    page_size_for_test = 4

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               state: Any = NONE) -> int:
        raw = as_tokens(tokens, "tokens")
        vals = as_values(values, len(raw))
        keys = bigrams(raw)
        return super().insert(keys, vals[: len(keys)], namespace, priority, state=state)
