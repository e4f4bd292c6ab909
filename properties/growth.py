"""How a cost grows with the cache's size: a robust log-log slope, and when it is a flag.

A cost measured per unit of work (per query token, per evicted leaf, per call) should stay flat
as the cache grows, or grow like a logarithm (a heap, a sorted container). One that grows like
the cache itself (a scan of the tree, or of a node's children, inside the operation) is the
production problem ``radixcheck bench`` exists to catch.

The exponent is the Theil-Sen slope of log(cost) against log(size): the median of the slopes of
every pair of points taken at different sizes. Every repeat at every size is a point, so one
noisy batch (another process on the shared core, a page fault) moves the median of hundreds of
pairwise slopes very little, and no single pair of sizes decides the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

FLAG_EXPONENT = 0.5
"""Flag when the fitted exponent reaches this. Cost per unit that grows linearly with the cache
fits an exponent near 1; a logarithm over the bench's 2-3 decades fits 0.1-0.25 (log2 n from 16
to 12,500 grows 3.4x while n grows 780x: exponent 0.18), and memory-hierarchy effects as the tree
outgrows the caches add about 0.1. 0.5 sits halfway (in log terms) between the two, so neither
noise nor a cache miss turns a logarithm into a flag, and a scan that only starts to dominate at
the larger sizes (fixed per-call overhead at the small ones pulls its fit below 1) still reaches it."""

_FLOOR = 1e-12  # seconds: a batch too quick for the clock still has a logarithm


def growth_exponent(points: Sequence[tuple[float, float]]) -> float:
    """Theil-Sen slope of log(cost) on log(size) over ``points`` = ``[(size, cost), ...]``.

    Raises ``ValueError`` when fewer than two distinct positive sizes are given (no slope exists)."""
    logs = []
    for size, cost in points:
        if not size > 0:
            raise ValueError(f"sizes must be positive, got {size!r}")
        logs.append((math.log(size), math.log(max(float(cost), _FLOOR))))
    slopes = [
        (cy - by) / (cx - bx)
        for i, (bx, by) in enumerate(logs)
        for cx, cy in logs[i + 1 :]
        if cx != bx
    ]
    if not slopes:
        raise ValueError(f"a growth exponent needs points at two or more sizes, got sizes {sorted({s for s, _ in points})}")
    slopes.sort()
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def grows_too_fast(exponent: float | None) -> bool:
    """Whether a fitted exponent is a flag (cost per unit growing about linearly or faster)."""
    return exponent is not None and exponent >= FLAG_EXPONENT
