"""The declare-one-prefix baseline: what reuse looks like without a radix tree.

Before its radix tree the seed could reuse one *declared* prefix: the longest prefix common to
every request, computed once and reused by all requests but the first. The radix tree's gain is
its reused tokens divided by that baseline's: what discovering every shared subtree adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from radixcheck.reports.hit_rates import HitRate
from radixcheck.reports.workloads import Workload


def common_prefix_length(requests: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix shared by every request."""
    first = requests[0]
    n = min(len(r) for r in requests)
    for r in requests[1:]:
        k = 0
        while k < n and r[k] == first[k]:
            k += 1
        n = k
    return n


@dataclass(frozen=True)
class DeclareOne:
    workload: str
    prompt_tokens: int
    common_prefix: int
    reused_tokens: int  # common_prefix * (requests - 1)
    radix_reused_tokens: int

    @property
    def hit_rate(self) -> float:
        return self.reused_tokens / self.prompt_tokens

    @property
    def radix_hit_rate(self) -> float:
        return self.radix_reused_tokens / self.prompt_tokens

    @property
    def radix_gain(self) -> float:
        return self.radix_reused_tokens / self.reused_tokens if self.reused_tokens else float("inf")


def declare_one(w: Workload, radix: HitRate) -> DeclareOne:
    """The declared-prefix baseline of ``w`` next to the radix cache's measured reuse."""
    lcp = common_prefix_length(w.requests)
    return DeclareOne(w.name, w.total_tokens, lcp, lcp * (len(w.requests) - 1), radix.cached_tokens)
