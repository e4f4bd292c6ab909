"""Oracle 5 — evict-equals-never-saw, at the level of the tree.

After ``evict_prefix(P)`` every match must equal what a cache holding only the cached sequences
that do not start with P would return. The witness is built from scratch here, independently of
the running model: a set of prefixes, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence


def never_saw(cached_before: set[tuple[int, ...]], quarantined: Sequence[int]) -> set[tuple[int, ...]]:
    """The cached prefixes of a cache that never held a sequence starting with ``quarantined``."""
    n = len(quarantined)
    return {s for s in cached_before if not (len(s) >= n and s[:n] == tuple(quarantined))}


def expected_match_length(kept: set[tuple[int, ...]], query: Sequence[int], page_size: int) -> int:
    """Length of the longest prefix of ``query`` cached in that cache (``kept``, from :func:`never_saw`)."""
    best = 0
    for k in range(page_size, len(query) // page_size * page_size + 1, page_size):
        if tuple(query[:k]) not in kept:
            break
        best = k
    return best
