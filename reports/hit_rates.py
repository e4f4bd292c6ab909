"""Hit rate and token speedup: requests served through the reference radix cache.

Definitions (the seed's, cmd/radixbench): a request's *cached* tokens are those of its prompt that
the cache matches *before* the request is inserted; hit rate = cached ÷ prompt tokens; token
speedup = prompt tokens ÷ computed tokens, i.e. the prefill work of a cache-less server divided by
the radix cache's. Every count comes from running ``properties.cache.serving.serve`` on
``reference.RadixCache``; nothing here is a formula for the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.cache.serving import serve
from radixcheck.reference import RadixCache
from radixcheck.reports.workloads import Workload


def fresh_cache(pool_size: int) -> tuple[RadixCache, SlotAllocator]:
    """An empty reference cache over a slot pool that holds every token of the run."""
    allocator = SlotAllocator(pool_size)
    return RadixCache(allocator, page_size=1), allocator


def as_arrays(requests: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Requests as int64 arrays: the reference validates an array in one vectorised check
    instead of one isinstance per token, which is most of the run time on tuples."""
    return [np.asarray(r, dtype=np.int64) for r in requests]


def cached_per_request(requests: Sequence[Sequence[int]], budget: int | None = None) -> list[int]:
    """Serve ``requests`` in the given order; the cached-token count of each, in that order."""
    cache, allocator = fresh_cache(max(1, sum(len(r) for r in requests)))
    out = [serve(cache, allocator, r, budget) for r in as_arrays(requests)]
    if allocator.violations:  # the reference must never double-free; a report built on that is void
        raise AssertionError(f"slot allocator violations: {allocator.violations[:3]}")
    return out


@dataclass(frozen=True)
class HitRate:
    """The unbounded-cache accounting of one workload."""

    workload: str
    origin: str
    requests: int
    prompt_tokens: int
    cached_tokens: int
    longest: int

    @property
    def computed_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens

    @property
    def token_speedup(self) -> float:
        return self.prompt_tokens / self.computed_tokens


def hit_rate(w: Workload) -> HitRate:
    """Serve ``w`` in arrival order through an unbounded reference cache."""
    cached = sum(cached_per_request(w.requests))
    return HitRate(w.name, w.origin, len(w.requests), w.total_tokens, cached, w.max_len)
