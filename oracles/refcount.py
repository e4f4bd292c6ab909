"""Oracle 2 — refcount safety.

A locked path is never evicted; sizes add up (evictable + protected == total); no count is ever
negative; protected is exactly the pages under a lock, so it is 0 once every lock is released.
"""

from __future__ import annotations

from oracles.prefix_set import Entry, PrefixSetModel


def check_sizes(model: PrefixSetModel, total: int, evictable: int, protected: int) -> None:
    assert min(total, evictable, protected) >= 0, f"negative size: total={total} evictable={evictable} protected={protected}"
    assert evictable + protected == total, f"evictable {evictable} + protected {protected} != total {total}"
    assert total == model.total(), f"total_size() is {total}, but {model.total()} tokens are cached"
    assert protected == model.protected(), f"protected_size() is {protected}, but {model.protected()} cached tokens are under a lock"


def check_none_locked(removed: list[Entry]) -> None:
    locked = [e.prefix for e in removed if e.locks > 0]
    assert not locked, f"evict() removed locked page(s) ending prefix {locked[:3]}"
