"""Scheduling under a bounded cache: FCFS, offline cache-aware order, and SGLang's online LPM.

The cache holds at most ``budget`` tokens (counted in cached tokens; LRU-leaf eviction, the
request being served stays locked; ``properties.cache.serving.serve``). Three orders:

* **FCFS** — arrival order.
* **cache-aware (offline)** — the whole batch sorted lexicographically (``reference.cache_aware_order``),
  which is depth-first pre-order of the batch's prefix tree: optimal when the budget holds the
  longest request (Theorem 3.1 of arXiv 2312.07104).
* **online LPM** — SGLang's longest-prefix-match policy over a waiting queue of bounded size: the
  queue admits requests in arrival order; each step serves the waiting request whose prompt has
  the longest cached prefix *now* (ties: earliest arrival). Probing uses ``match_prefix``, which,
  as in SGLang, also refreshes the recency of what it matches. A request becomes eligible only
  after every earlier request that is a prefix of it was served (turn t+1 of a conversation or an
  agent cannot be sent before turn t was answered). Queue size 1 is FCFS.

Hit rates are reported as measured and as % of the *unbounded* optimum (every distinct prefix
computed once); below 1x the longest request no order can reach 100 %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from radixcheck.properties.cache.serving import serve
from radixcheck.reference import cache_aware_order
from radixcheck.reports.hit_rates import HitRate, as_arrays, cached_per_request, fresh_cache
from radixcheck.reports.workloads import Workload

LEDGER_FACTOR = Fraction(3, 2)  # the seed's budget: 1.5 x the longest request
SWEEP_FACTORS: tuple[Fraction, ...] = tuple(Fraction(x) for x in ("0.5", "0.75", "1", "1.25", "1.5", "2", "3", "4"))
QUEUE_SIZES: tuple[int, ...] = (4, 16)


def budget_for(w: Workload, factor: Fraction) -> int:
    """``floor(factor x longest request)``; for 1.5 this is the seed's ``max + max // 2``."""
    return math.floor(factor * w.max_len)


def prefix_dependencies(requests: Sequence[Sequence[int]]) -> list[list[int]]:
    """For each request, the earlier-arriving requests that are proper prefixes of it."""
    deps: list[list[int]] = []
    for i, r in enumerate(requests):
        deps.append([j for j in range(i) if len(requests[j]) < len(r) and tuple(r[: len(requests[j])]) == tuple(requests[j])])
    return deps


def fcfs(requests: Sequence[Sequence[int]], budget: int | None) -> int:
    return sum(cached_per_request(requests, budget))


def cache_aware(requests: Sequence[Sequence[int]], budget: int | None) -> int:
    return sum(cached_per_request([requests[i] for i in cache_aware_order(requests)], budget))


def online_lpm(requests: Sequence[Sequence[int]], budget: int | None, queue_size: int) -> tuple[int, list[int]]:
    """Serve with SGLang's longest-prefix-match priority over a bounded waiting queue.

    Returns (cached tokens, the order served as arrival indices).
    """
    if queue_size < 1:
        raise ValueError("queue_size must be >= 1")
    cache, allocator = fresh_cache(max(1, sum(len(r) for r in requests)))
    deps = prefix_dependencies(requests)
    arrays = as_arrays(requests)
    served: set[int] = set()
    waiting: list[int] = []
    arrived, cached, order = 0, 0, []
    while len(order) < len(requests):
        while len(waiting) < queue_size and arrived < len(requests):
            waiting.append(arrived)
            arrived += 1
        # the earliest waiting request is always eligible: its prefixes arrived (and were served) before it
        eligible = [i for i in waiting if all(d in served for d in deps[i])]
        pick = max(eligible, key=lambda i: (len(cache.match_prefix(arrays[i])[0]), -i))
        waiting.remove(pick)
        cached += serve(cache, allocator, arrays[pick], budget)
        served.add(pick)
        order.append(pick)
    if allocator.violations:
        raise AssertionError(f"slot allocator violations: {allocator.violations[:3]}")
    return cached, order


@dataclass(frozen=True)
class Bounded:
    """One workload at one budget: cached tokens per policy, against the unbounded optimum."""

    workload: str
    factor: Fraction
    budget: int
    prompt_tokens: int
    optimum: int  # cached tokens with an unbounded cache (every distinct prefix computed once)
    cached: dict[str, int]

    def hit(self, policy: str) -> float:
        return self.cached[policy] / self.prompt_tokens

    def of_optimum(self, policy: str) -> float:
        return self.cached[policy] / self.optimum if self.optimum else 1.0


def policies(queue_sizes: Sequence[int] = QUEUE_SIZES) -> list[str]:
    return ["FCFS", "cache-aware (offline)"] + [f"online LPM (queue {q})" for q in queue_sizes]


def bounded(w: Workload, radix: HitRate, factor: Fraction, queue_sizes: Sequence[int] = QUEUE_SIZES) -> Bounded:
    """Every policy on ``w`` with a budget of ``factor`` x its longest request."""
    b = budget_for(w, factor)
    cached = {"FCFS": fcfs(w.requests, b), "cache-aware (offline)": cache_aware(w.requests, b)}
    for q in queue_sizes:
        cached[f"online LPM (queue {q})"] = online_lpm(w.requests, b, q)[0]
    return Bounded(w.name, factor, b, w.total_tokens, radix.cached_tokens, cached)


def sweep(
    w: Workload, radix: HitRate, factors: Sequence[Fraction] = SWEEP_FACTORS, queue_sizes: Sequence[int] = QUEUE_SIZES
) -> list[Bounded]:
    return [bounded(w, radix, f, queue_sizes) for f in factors]
