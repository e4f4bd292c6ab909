"""Oracle 4 — least-recently-used leaf eviction.

Every page evicted was, when evicted, no more recently used than any unlocked leaf that survives
(a parent is always at least as recent as its children, so collapsing upward keeps this true).
The cache stops once it has freed ``num_tokens``: leaving out the most recent batch of what it
evicted, it had freed fewer. (That it frees enough, and no more than its ``free()`` calls
needed, is :mod:`radixcheck.oracles.amount`, for every policy.)

When the most recent batch was not needed, the order of the ``free`` calls tells the two bugs
apart: a newer page freed in an earlier call than an older one is an order violation; otherwise
the cache kept going past ``num_tokens``. Times are the model's clock, and ``at`` names the call
that set each one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from radixcheck.oracles.prefix_set import Entry
from radixcheck.oracles.violations import Check, LRUOrderViolation, shown, shown_namespace


def check_lru(evicted: list[tuple[int, Entry]], oldest_survivor: Entry | None, num_tokens: int, page_size: int,
              at: Callable[[int], str] = lambda t: f"t={t}") -> None:
    """``evicted``: (index of the ``free`` call that returned it, page), for one ``evict`` call;
    ``oldest_survivor``: the least recently used unlocked leaf left; ``at(t)`` describes time t."""
    if not evicted:
        return
    newest_page = max((e for _, e in evicted), key=lambda e: e.last_use)
    newest = newest_page.last_use
    if oldest_survivor is not None and oldest_survivor.last_use < newest:
        raise LRUOrderViolation(
            f"evict({num_tokens}) evicted a page last used by {at(newest)} while leaf {shown(oldest_survivor.prefix)} "
            f"(last used by {at(oldest_survivor.last_use)}) survived",
            Check("not (set(newer) <= set(freed) and set(older_leaf).isdisjoint(freed))",
                  "{'the newer page freed': set(newer) <= set(freed), 'the older leaf freed': not set(older_leaf).isdisjoint(freed)}",
                  {"newer": list(newest_page.values), "older_leaf": list(oldest_survivor.values)}),
        )
    before_last = sum(page_size for _, e in evicted if e.last_use < newest)
    if before_last < num_tokens:
        return
    newer: Entry | None = None  # the most recently used page of the calls so far
    for _, group in itertools.groupby(sorted(evicted, key=lambda item: item[0]), key=lambda item: item[0]):
        pages = [page for _, page in group]
        older = min(pages, key=lambda e: e.last_use)
        if newer is not None and newer.last_use > older.last_use:
            apart = newer.namespace != older.namespace  # the same tokens may then be two pages: name their tenants
            tenant = {e.serial: f" under namespace {shown_namespace(e.namespace)}" if apart else "" for e in (newer, older)}
            raise LRUOrderViolation(
                f"evict({num_tokens}) evicted out of LRU order: page {shown(newer.prefix)}{tenant[newer.serial]} (last used by "
                f"{at(newer.last_use)}) went before page {shown(older.prefix)}{tenant[older.serial]} (last used by {at(older.last_use)}); "
                f"the older pages alone freed {before_last} tokens",
                Check("call_freeing(older[0], free_calls) <= call_freeing(newer[0], free_calls)",
                      "(call_freeing(newer[0], free_calls), call_freeing(older[0], free_calls))",
                      {"newer": list(newer.values), "older": list(older.values)}),
            )
        newest_here = max(pages, key=lambda e: e.last_use)
        if newer is None or newest_here.last_use > newer.last_use:
            newer = newest_here
    raise LRUOrderViolation(
        f"evict({num_tokens}) kept going after freeing {before_last} tokens, oldest first (freed {len(evicted) * page_size})",
        Check("set(newest).isdisjoint(freed) or len(set(freed) & set(older_pages)) < n",
              "{'tokens freed from the older pages': len(set(freed) & set(older_pages)), 'then the newest too': set(newest) <= set(freed)}",
              {"n": num_tokens, "newest": list(newest_page.values),
               "older_pages": sorted(s for _, e in evicted if e.last_use < newest for s in e.values)}),
    )
