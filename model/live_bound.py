"""The live arm's bound: the live ÷ token ratio a perfect implementation would reach.

A request of ``t`` new tokens over ``c`` cached ones is costed as ``a + m·t + p·pairs(t, c)``: ``a``
per request, ``m`` per computed token (the products, norms, logits), ``p`` per (query, key) pair of
attention, counted over every query head and layer. The token speedup counts tokens, not pairs, and
a suffix token attends to more keys than the average prompt token, so even ``a = 0`` with one ``p``
for both arms leaves live ÷ token below 1 (issue 43, fourteenth round, model/NOTES.md: 0.935–0.966 on
the seed workloads with SmolLM2's measured ``m`` and ``p``). ``python -m radixcheck.model.kernel_ab
workloads`` fits the three numbers to its measured shapes and prints the bound beside the ratio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Cost:
    """Seconds per request (a), per computed token (m) and per attention pair (p)."""

    a: float
    m: float
    p: float


def pairs(t: int, c: int, heads_layers: int) -> float:
    """(query, key) pairs of ``t`` new tokens over ``c`` cached, causal, over ``heads_layers`` heads × layers."""
    return heads_layers * (t * c + t * (t + 1) / 2)


def fit(times: Mapping[tuple[int, int], float], heads_layers: int) -> Cost:
    """Least-squares ``Cost`` from CPU seconds per ``(new, cached)`` shape (at least three distinct shapes),
    on relative errors: a shared box's noise is about proportional to a request's time, and absolute
    errors would let the long prompts alone set ``a`` (two runs at load 6-14 gave p 10.4 / 9.4 ns
    absolute, 8.90 / 8.88 relative: model/NOTES.md, issue 43, fourteenth round)."""
    if len(times) < 3:
        raise ValueError(f"fit needs at least 3 shapes, got {len(times)}")
    shapes = list(times)
    y = np.array([times[s] for s in shapes])
    A = np.array([[1.0, t, pairs(t, c, heads_layers)] for t, c in shapes]) / y[:, None]
    (a, m, p), *_ = np.linalg.lstsq(A, np.ones(len(shapes)), rcond=None)
    return Cost(float(a), float(m), float(p))


def ratio(requests: Sequence[tuple[int, int]], cost: Cost, heads_layers: int) -> float:
    """live ÷ token for ``requests`` as ``(prompt length, cached)`` if every request cost exactly ``cost``:
    the baseline prefills every prompt in full, the radix arm its suffix over the cached keys."""
    total = sum(n for n, _ in requests)
    computed = sum(n - c for n, c in requests)
    if computed <= 0:
        raise ValueError("no computed tokens: the token speedup is undefined")
    base = sum(cost.a + cost.m * n + cost.p * pairs(n, 0, heads_layers) for n, _ in requests)
    radix = sum(cost.a + cost.m * (n - c) + cost.p * pairs(n - c, c, heads_layers) for n, c in requests)
    return base / radix * computed / total


def p_for(requests: Sequence[tuple[int, int]], cost: Cost, target: float, heads_layers: int) -> float:
    """The per-pair cost at which ``ratio`` reaches ``target`` (``a`` and ``m`` held); 0.0 if even free
    attention does not reach it. The ratio falls as ``p`` grows, so bisect."""
    if ratio(requests, Cost(cost.a, cost.m, 0.0), heads_layers) < target:
        return 0.0
    lo, hi = 0.0, max(cost.p, 1e-12)
    while ratio(requests, Cost(cost.a, cost.m, hi), heads_layers) >= target:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(requests, Cost(cost.a, cost.m, mid), heads_layers) >= target else (lo, mid)
    return lo
