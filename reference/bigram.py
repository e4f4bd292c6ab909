"""The reference radix cache keyed by bigrams (the contract's "Key modes": SGLang's ``is_eagle=True``).

EAGLE speculative decoding keys token *i* by the pair ``(t[i], t[i+1])``: ``n`` raw tokens are
``n - 1`` keys. This cache turns the raw tokens into those keys (one int per pair, ``t[i] << 32 |
t[i+1]``: token ids are below 2**31, so a pair fits an int64 and two pairs are equal exactly when
their tokens are) and hands them, with the first ``n - 1`` values, to the plain reference cache,
which aligns them to whole pages *of keys*. Nothing else changes: locks, eviction, quarantine and
reset are the plain cache's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities
from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.validation import as_tokens, as_values


def bigrams(raw: tuple[int, ...]) -> tuple[int, ...]:
    """The keys of ``raw``: one per adjacent pair, ``len(raw) - 1`` of them (none for fewer than two)."""
    return tuple((a << 32) | b for a, b in zip(raw, raw[1:], strict=False))


class BigramRadixCache(RadixCache):
    """The reference cache with EAGLE bigram keys (``Capabilities(key_mode="bigram")``)."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), namespaces=True, key_mode="bigram", lifecycle="tree")

    def _keys(self, tokens: Sequence[int]) -> tuple[int, ...]:
        return bigrams(as_tokens(tokens, "tokens"))

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> tuple[np.ndarray, Node]:
        return super().match_prefix(self._keys(tokens), namespace, priority)

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        raw = as_tokens(tokens, "tokens")
        vals = as_values(values, len(raw))  # one slot per raw token; the last one starts no bigram
        keys = bigrams(raw)
        return super().insert(keys, vals[: len(keys)], namespace, priority)

    def evict_prefix(self, tokens: Sequence[int], namespace: Hashable = None) -> int:
        keys = self._keys(tokens)
        if not keys:
            raise ValueError("evict_prefix needs at least two raw tokens (one bigram key)")
        return super().evict_prefix(keys, namespace)

    def _not_offered(self, *args: Any) -> None:
        raise AssertionError("a request method was sent to a bigram cache (it declares lifecycle='tree')")

    match_req = lock_req = cache_unfinished_req = cache_finished_req = _not_offered
