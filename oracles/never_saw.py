"""Oracle 5 — evict-equals-never-saw, at the level of the tree.

After ``evict_prefix(P)`` every match must equal what a cache that never held a sequence
starting with P would return. That cache holds every cached prefix that does not start with P;
so a query that does not start with P matches as far as before, and one that does matches as far
as before but never as far as P itself: only the pages that end before ``len(P)``.
"""

from __future__ import annotations

from collections.abc import Sequence


def expected_match_length(longest_before: int, query: Sequence[int], quarantined: Sequence[int], page_size: int) -> int:
    """The length a cache that never saw ``quarantined`` matches ``query`` to, given that the cache
    matched it to ``longest_before`` tokens just before the quarantine."""
    n = len(quarantined)
    if tuple(query[:n]) == tuple(quarantined):
        return min(longest_before, (n - 1) // page_size * page_size)
    return longest_before
