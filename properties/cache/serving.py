"""A minimal request server over the contract: what a serving engine does with a radix cache.

One request: match its prompt, lock the matched prefix, compute the rest into fresh slots,
insert, free the caller's duplicates, then (with the new path locked so it cannot evict what it
just computed) evict least-recently-used leaves until the tree is back within the budget, and
unlock. This is the protocol of SGLang's scheduler and of the seed's radixbench (budget counted
in cached tokens); the ledger in ``reports/`` and the DFS-optimality property both use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import SlotAllocator

Compute = Callable[[Sequence[int], np.ndarray, int], Any]
"""``compute(tokens, slots, cached)``: fill the KV of ``tokens[cached:]`` into ``slots[cached:]``
(``slots[:cached]`` already hold the matched prefix) — e.g. a model's suffix prefill."""


def serve(cache: Any, allocator: SlotAllocator, tokens: Sequence[int], budget: int | None = None, compute: Compute | None = None) -> int:
    """Serve one request; returns how many of its tokens came from the cache."""
    values, handle = cache.match_prefix(tokens)
    cached = len(values)
    cache.inc_lock_ref(handle)
    new = allocator.alloc(len(tokens) - cached)
    full = np.concatenate([np.asarray(values, dtype=np.int64), new])
    if compute is not None:
        compute(tokens, full, cached)
    prefix_len = cache.insert(tokens, full)
    aligned = len(tokens) // cache.page_size * cache.page_size
    allocator.free(np.concatenate([full[cached:prefix_len], full[max(aligned, cached):]]))
    _, leaf = cache.match_prefix(tokens)
    cache.inc_lock_ref(leaf)
    cache.dec_lock_ref(handle)
    if budget is not None and cache.total_size() > budget:
        cache.evict(cache.total_size() - budget)
    cache.dec_lock_ref(leaf)
    return cached


def serve_all(cache: Any, allocator: SlotAllocator, requests: Sequence[Sequence[int]], budget: int | None = None) -> int:
    """Serve ``requests`` in the given order; returns the tokens computed (not served from cache)."""
    return sum(len(r) - serve(cache, allocator, r, budget) for r in requests)
