"""Oracle 4, for every eviction policy — ``evict(n)`` frees at least ``n`` tokens, unless nothing
evictable (no unlocked leaf) is left.
"""

from __future__ import annotations

from radixcheck.oracles.prefix_set import Entry
from radixcheck.oracles.violations import EvictionAmountViolation, shown


def check_amount(freed_tokens: int, surviving_leaves: list[Entry], num_tokens: int) -> None:
    unlocked = [e.prefix for e in surviving_leaves if e.locks == 0]
    if freed_tokens < num_tokens and unlocked:
        raise EvictionAmountViolation(
            f"evict({num_tokens}) freed only {freed_tokens} tokens but left unlocked leaf {shown(unlocked[0])}"
        )
