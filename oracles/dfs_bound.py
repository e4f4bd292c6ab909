"""Oracle 6 — the DFS optimality bound (Theorem 3.1 of arXiv 2312.07104).

Whatever the order and the cache, each distinct non-empty prefix of a batch must be computed at
least once, so ``distinct_prefixes`` is a lower bound on the tokens computed. Served in DFS order
with a cache that holds the longest request, a radix cache meets it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence


def distinct_prefixes(requests: Sequence[Sequence[int]]) -> int:
    return len({tuple(r[:k]) for r in requests for k in range(1, len(r) + 1)})
