"""Oracle 2 — refcount safety.

A locked path is never evicted; sizes add up (evictable + protected == total); no count is ever
negative; protected is exactly the pages under a lock, so it is 0 once every lock is released.
"""

from __future__ import annotations

from radixcheck.oracles.prefix_set import Entry, PrefixSetModel
from radixcheck.oracles.violations import Check, RefcountViolation, shown


def check_sizes(model: PrefixSetModel, total: int, evictable: int, protected: int) -> None:
    if min(total, evictable, protected) < 0:
        raise _sizes_disagree(f"negative size: total={total} evictable={evictable} protected={protected}")
    if evictable + protected != total:
        raise _sizes_disagree(f"evictable {evictable} + protected {protected} != total {total}")
    if total != model.total():
        raise _sizes_wrong(model, f"total_size() is {total}, but {model.total()} tokens are cached")
    if protected != model.protected():
        raise _sizes_wrong(model, f"protected_size() is {protected}, but {model.protected()} cached tokens are under a lock")


def _sizes_disagree(message: str) -> RefcountViolation:
    """The cache's own sizes disagree with each other: a repro checks them against each other, not against the
    model, whose sizes past a waived choice (an eviction's amount or order) are the run's cache's, not a fixed one's."""
    return RefcountViolation(message, Check("min((s := sizes()).values()) >= 0 and s['evictable'] + s['protected'] == s['total']",
                                            "sizes()", {}))


def _sizes_wrong(model: PrefixSetModel, message: str) -> RefcountViolation:
    """Each message names one way the sizes are wrong; a repro states all four as one comparison."""
    expected = {"total": model.total(), "evictable": model.total() - model.protected(), "protected": model.protected()}
    return RefcountViolation(message, Check("sizes() == expected", "sizes()", {"expected": expected}))


def check_none_locked(removed: list[Entry]) -> None:
    locked = [e for e in removed if e.locks > 0]
    if locked:
        slots = sorted(s for e in locked for s in e.values)
        raise RefcountViolation(f"evict() removed locked page(s) ending prefix {', '.join(shown(e.prefix) for e in locked[:3])}",
                                Check("set(freed).isdisjoint(locked)", "sorted(set(freed) & set(locked))", {"locked": slots}))
