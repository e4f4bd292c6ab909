"""Oracle 4 — least-recently-used leaf eviction.

Every page evicted was, when evicted, no more recently used than any unlocked leaf that survives
(a parent is always at least as recent as its children, so collapsing upward keeps this true).
The cache stops once it has freed ``num_tokens``: leaving out the most recent batch of what it
evicted, it had freed fewer. It stops early only when no unlocked leaf is left.
"""

from __future__ import annotations

from oracles.prefix_set import Entry


def check_lru(evicted: list[Entry], surviving_leaves: list[Entry], num_tokens: int, page_size: int) -> None:
    unlocked = [e for e in surviving_leaves if e.locks == 0]
    freed = len(evicted) * page_size
    if freed < num_tokens:
        assert not unlocked, f"evict({num_tokens}) freed {freed} but left unlocked leaf {unlocked[0].prefix}"
    if not evicted:
        return
    newest = max(e.last_use for e in evicted)
    older = [e.prefix for e in unlocked if e.last_use < newest]
    assert not older, f"evicted a page used at t={newest} while leaf {older[0]} (older) survived"
    before_last = sum(page_size for e in evicted if e.last_use < newest)
    assert before_last < num_tokens, f"evict({num_tokens}) kept going after freeing {before_last} tokens (freed {freed})"
