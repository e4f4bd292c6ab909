"""Cache-aware request ordering (SGLang §3.3; Theorem 3.1 of arXiv 2312.07104).

Serving a batch in lexicographic order of its token sequences visits the batch's prefix tree in
depth-first pre-order (a sequence sorts right after its own prefixes and before any sibling
branch), which is the order the paper proves optimal when the cache holds the longest request.
"""

from __future__ import annotations

from collections.abc import Sequence


def cache_aware_order(requests: Sequence[Sequence[int]]) -> list[int]:
    """Indices of ``requests`` in lexicographic (≡ DFS pre-order) order; stable for equal ones."""
    return sorted(range(len(requests)), key=lambda i: tuple(requests[i]))
