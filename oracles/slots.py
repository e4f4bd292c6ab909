"""Oracle 3 — slot conservation.

Every slot id is freed exactly once; at every step the slots the allocator has handed out are
exactly those the cache must hold (cached and detached pages) plus those callers still hold.

Each call that may free (``evict``, ``dec_lock_ref``, ``evict_prefix``, ``reset``) is checked on
what it freed (:func:`check_freed`), so between steps a count is enough
(:func:`check_slot_count`, O(1)); the sets themselves are compared (:func:`check_conservation`)
only to name the slots when the counts disagree, and at the end of a run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from radixcheck.oracles.violations import Check, SlotViolation


def check_conservation(in_use: set[int], cache_slots: set[int], caller_slots: Iterable[int], violations: list[str]) -> None:
    expected = cache_slots | set(caller_slots)
    check = Check("not allocator.violations and allocator.in_use == set(expected_in_use)",
                  "(allocator.violations[:1], 'leaked', sorted(allocator.in_use - set(expected_in_use))[:8], "
                  "'freed too early', sorted(set(expected_in_use) - allocator.in_use)[:8])", {"expected_in_use": sorted(expected)})
    if violations:
        raise SlotViolation(f"the allocator refused a free: {violations[0]}", check)
    leaked = in_use - expected
    lost = expected - in_use
    if leaked:
        raise SlotViolation(f"slots leaked (allocated, but neither cached nor held by a caller): {sorted(leaked)[:8]}", check)
    if lost:
        raise SlotViolation(f"slots freed while still cached or held: {sorted(lost)[:8]}", check)


def check_slot_count(in_use: set[int], cache_slots: Collection[int], violations: list[str]) -> None:
    """The cheap check between steps: as many slots in use as the cache must hold."""
    if violations or len(in_use) != len(cache_slots):
        check_conservation(in_use, set(cache_slots), (), violations)


def check_freed(freed_now: list[int], expected: set[int], what: str) -> None:
    check = Check("sorted(freed) == expected",
                  "{'freed twice': len(freed) - len(set(freed)), 'not to be freed': sorted(set(freed) - set(expected))[:8], "
                  "'kept': sorted(set(expected) - set(freed))[:8]}", {"expected": sorted(expected)})
    if len(freed_now) != len(set(freed_now)):
        raise SlotViolation(f"{what} freed a slot twice: {freed_now[:16]}", check)
    if set(freed_now) != expected:
        raise SlotViolation(f"{what} should free {sorted(expected)[:8]} but freed {sorted(freed_now)[:8]}", check)
