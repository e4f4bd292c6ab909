"""Oracle 4 — least-recently-used leaf eviction.

Every page evicted was, when evicted, no more recently used than any unlocked leaf that survives
(a parent is always at least as recent as its children, so collapsing upward keeps this true).
The cache stops once it has freed ``num_tokens``: leaving out the most recent batch of what it
evicted, it had freed fewer. (That it frees enough is :mod:`radixcheck.oracles.amount`, for
every policy.)

When the most recent batch was not needed, the order of the ``free`` calls tells the two bugs
apart: a newer page freed in an earlier call than an older one is an order violation; otherwise
the cache kept going past ``num_tokens``.
"""

from __future__ import annotations

from radixcheck.oracles.prefix_set import Entry
from radixcheck.oracles.violations import LRUOrderViolation, shown


def check_lru(evicted: list[tuple[int, Entry]], surviving_leaves: list[Entry], num_tokens: int, page_size: int) -> None:
    """``evicted``: (index of the ``free`` call that returned it, page), for one ``evict`` call."""
    unlocked = [e for e in surviving_leaves if e.locks == 0]
    freed = len(evicted) * page_size
    if not evicted:
        return
    newest = max(e.last_use for _, e in evicted)
    older = [e.prefix for e in unlocked if e.last_use < newest]
    if older:
        raise LRUOrderViolation(
            f"evict({num_tokens}) evicted a page used at t={newest} while leaf {shown(older[0])} (used earlier) survived"
        )
    before_last = sum(page_size for _, e in evicted if e.last_use < newest)
    if before_last < num_tokens:
        return
    inversions = [(a, b) for call_a, a in evicted for call_b, b in evicted if call_a < call_b and a.last_use > b.last_use]
    if inversions:
        newer, older_page = inversions[0]
        raise LRUOrderViolation(
            f"evict({num_tokens}) evicted out of LRU order: page {shown(newer.prefix)} (used at t={newer.last_use}) went before "
            f"page {shown(older_page.prefix)} (used at t={older_page.last_use}); the older pages alone freed {before_last} tokens"
        )
    raise LRUOrderViolation(f"evict({num_tokens}) kept going after freeing {before_last} tokens, oldest first (freed {freed})")
