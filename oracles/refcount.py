"""Oracle 2 — refcount safety.

A locked path is never evicted; sizes add up (evictable + protected == total); no count is ever
negative; protected is exactly the pages under a lock, so it is 0 once every lock is released.
"""

from __future__ import annotations

from radixcheck.oracles.prefix_set import Entry, PrefixSetModel
from radixcheck.oracles.violations import RefcountViolation, shown


def check_sizes(model: PrefixSetModel, total: int, evictable: int, protected: int) -> None:
    if min(total, evictable, protected) < 0:
        raise RefcountViolation(f"negative size: total={total} evictable={evictable} protected={protected}")
    if evictable + protected != total:
        raise RefcountViolation(f"evictable {evictable} + protected {protected} != total {total}")
    if total != model.total():
        raise RefcountViolation(f"total_size() is {total}, but {model.total()} tokens are cached")
    if protected != model.protected():
        raise RefcountViolation(f"protected_size() is {protected}, but {model.protected()} cached tokens are under a lock")


def check_none_locked(removed: list[Entry]) -> None:
    locked = [e.prefix for e in removed if e.locks > 0]
    if locked:
        raise RefcountViolation(f"evict() removed locked page(s) ending prefix {', '.join(map(shown, locked[:3]))}")
