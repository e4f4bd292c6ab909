"""Batches of requests that share prefixes, and the tokens a cache makes a server compute for
them: the inputs and the measurement of oracle 6 (the DFS bound), at any page size.

A request is drawn as a sequence of *page symbols* and served as whole pages (symbol ``s`` is
the page ``(s,) * page_size``), so requests share exactly the pages whose symbols agree and the
theorem's bound is stated in pages: ``distinct_prefixes(symbols) * page_size`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from radixcheck.oracles.dfs_bound import distinct_prefixes
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.cache.serving import serve_all
from radixcheck.properties.target import GuardedCache, Target, guarded
from radixcheck.reference import cache_aware_order

Batch = list[tuple[int, ...]]


@st.composite
def batches(draw: st.DrawFn, max_requests: int = 8) -> Batch:
    """Requests (as page symbols) that share prefixes: each one extends a cut of an earlier one."""
    first = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=8)))
    batch = [first]
    for _ in range(draw(st.integers(0, max_requests - 1))):
        base = draw(st.sampled_from(batch))
        cut = draw(st.integers(0, len(base)))
        tail = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=5)))
        batch.append(base[:cut] + tail)
    return draw(st.permutations(batch))


def as_pages(request: tuple[int, ...], page_size: int) -> tuple[int, ...]:
    return tuple(s for s in request for _ in range(page_size))


@dataclass(frozen=True)
class ServingRun:
    """Requests served in this order on a fresh cache, with this budget (tokens, or ``None``):
    what a failure of the serving protocol carries (``exc.radixcheck_serving``), so that
    :mod:`radixcheck.properties.findings.repro` can write it out as a standalone file."""

    requests: tuple[tuple[int, ...], ...]
    budget: int | None
    page_size: int


def tokens_computed(target: Target, batch: Sequence[tuple[int, ...]], budget_pages: int | None, page_size: int) -> int:
    """Serve ``batch`` in the given order on a fresh cache; the tokens computed (not reused). A
    failure raised on the way carries the run (:class:`ServingRun`)."""
    allocator = SlotAllocator(1 << 16)
    requests = [as_pages(r, page_size) for r in batch]
    budget = None if budget_pages is None else budget_pages * page_size
    try:
        cache = GuardedCache(guarded("factory", target.factory, allocator, page_size))
        return serve_all(cache, allocator, requests, budget)
    except Exception as exc:
        if not hasattr(exc, "radixcheck_serving"):
            exc.radixcheck_serving = ServingRun(tuple(requests), budget, page_size)
        raise


def served_run(batch: Sequence[tuple[int, ...]], budget_pages: int | None, page_size: int) -> ServingRun:
    """The run :func:`tokens_computed` makes of ``batch`` (for a violation to carry)."""
    return ServingRun(tuple(as_pages(r, page_size) for r in batch), None if budget_pages is None else budget_pages * page_size, page_size)


def bound(batch: Sequence[tuple[int, ...]], page_size: int) -> int:
    return distinct_prefixes(batch) * page_size


def misses_the_bound(target: Target, batch: Batch, budget_pages: int, page_size: int = 1,
                     order_fn: Callable[[Batch], list[int]] = cache_aware_order) -> bool:
    """True when serving ``batch`` in ``order_fn``'s order computes more than the bound."""
    order = [batch[i] for i in order_fn(batch)]
    return tokens_computed(target, order, budget_pages, page_size) != bound(batch, page_size)
