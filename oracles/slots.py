"""Oracle 3 — slot conservation.

Every slot id is freed exactly once; at every step the slots the allocator has handed out are
exactly those the cache must hold (cached and detached pages) plus those callers still hold.
"""

from __future__ import annotations

from collections.abc import Iterable

from radixcheck.oracles.violations import SlotViolation


def check_conservation(in_use: set[int], cache_slots: set[int], caller_slots: Iterable[int], violations: list[str]) -> None:
    if violations:
        raise SlotViolation(f"the allocator refused a free: {violations[0]}")
    expected = cache_slots | set(caller_slots)
    leaked = in_use - expected
    lost = expected - in_use
    if leaked:
        raise SlotViolation(f"slots leaked (allocated, but neither cached nor held by a caller): {sorted(leaked)[:8]}")
    if lost:
        raise SlotViolation(f"slots freed while still cached or held: {sorted(lost)[:8]}")


def check_freed(freed_now: list[int], expected: set[int], what: str) -> None:
    if len(freed_now) != len(set(freed_now)):
        raise SlotViolation(f"{what} freed a slot twice: {freed_now}")
    if set(freed_now) != expected:
        raise SlotViolation(f"{what} should free {sorted(expected)[:8]} but freed {sorted(freed_now)[:8]}")
