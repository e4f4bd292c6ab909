"""Oracle 4t — the device tier's eviction order: least recently used unlocked device leaf first
(or, for a target that declares a Policy, the leaf with the smallest key first).

The tier contract's ``evict(num_tokens)`` frees device pages "least recently used unlocked device
leaf first". A *device leaf* is a cached page on device with no child on device; it is a
*candidate* while no request holds a lock on it and no transfer is in flight on it or on a page
below it (a pending write reads its slots, a pending load fills them: the contract forbids
freeing those; and a cache may keep a transfer's whole path, as SGLang locks it, which shows
once ``evict_prefix`` cut the moving page off and its parent became a leaf). A page's
last use is the tier model's clock at the last ``match_prefix`` or ``insert`` that covered it (a
lock is not a use).

An ``evict`` call *picks* a page when it frees its device slots, or, under ``write_back``, when it
starts the write-back of a device leaf (its slots are freed at the write's completion). Each pick
must be no more recently used than every other candidate at that moment: a page picked later in
the same call, or after an earlier pick's write-back started, is judged against what is left then.
Pages a ``free`` call or a write takes together are judged by the most recent of them.

A declared :class:`~radixcheck.properties.cache.policies.Policy` replaces "least recently used"
by its key over the page's :class:`~radixcheck.oracles.policy.LeafStats` (the tier model counts
them: a load-back keeps a page's hits); keys that tie may go in any order.

:class:`DeviceLeaves` keeps the device leaves in last-use order, refiled by the tier model whenever
a page goes on or off the device or is used; finding the oldest candidate reads from the oldest
leaf and skips the locked and busy ones, so it costs the leaves it skips, never the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sortedcontainers import SortedList

from radixcheck.oracles.violations import EvictionOrderViolation, LRUOrderViolation


def is_device_leaf(page: Any) -> bool:
    """On device, cached, with no cached child on device."""
    return (page.device is not None and not page.gone
            and not any(c.device is not None and not c.gone for c in page.children.values()))


class DeviceLeaves:
    """The device leaves, first to go first: by ``order(page)`` (the last use, or a policy's key)."""

    def __init__(self, order: Callable[[Any], Any] = lambda page: page.last_use) -> None:
        self.order = order
        self.by_use = SortedList()  # (order(page), serial, page)
        self.filed: dict[int, tuple[Any, int]] = {}  # serial -> its key in by_use

    def refile(self, page: Any) -> None:
        """Put ``page`` where it belongs now (in, out, or at its new last use)."""
        key = self.filed.pop(page.serial, None)
        if key is not None:
            self.by_use.remove((*key, page))
        if page.parent is not None and is_device_leaf(page):
            key = (self.order(page), page.serial)
            self.filed[page.serial] = key
            self.by_use.add((*key, page))

    def oldest_candidate(self, excluding: Iterable[Any], busy: Callable[[Any], bool]) -> Any | None:
        """The least recently used leaf that is unlocked, not ``busy`` and not in ``excluding``."""
        skip = {id(p) for p in excluding}
        for _, _, page in self.by_use:
            if id(page) not in skip and not page.locks and not busy(page):
                return page
        return None


def left_behind(page: Any) -> str:
    """The likelier cause when the leaf that stayed was unlocked while a transfer moved it: a cache
    that skips unlocking a page in transfer keeps that lock, so the page is still locked in the
    cache (a new user's B3 read as an order bug that blamed the leaf); "" otherwise."""
    how = getattr(page, "released_in_flight", "")
    if not how:
        return ""
    return (f". Likely cause, a lock left behind: {page} holds no lock in radixcheck's count, but {how}: "
            "a cache that skips unlocking a page in transfer still holds that lock")


def check_device_order(picked: list[Any], oldest: Any | None, num_tokens: int, how: str, at: Callable[[int], str]) -> None:
    """``picked``: the pages one free (or one write-back) of ``evict(num_tokens)`` took; ``oldest``:
    the least recently used candidate left beside them; ``how``: "freed" or "wrote back"."""
    if not picked or oldest is None:
        return
    newest = max(picked, key=lambda p: p.last_use)
    if oldest.last_use < newest.last_use:
        raise LRUOrderViolation(
            f"evict({num_tokens}) {how} {newest} (last used by {at(newest.last_use)}) while the unlocked device leaf "
            f"{oldest} (last used by {at(oldest.last_use)}) stayed: the device tier evicts least recently used first"
            f"{left_behind(oldest)}")


def check_device_policy(picked: list[Any], coldest: Any | None, num_tokens: int, how: str, key: Callable[[Any], Any],
                        describe: Callable[[Any], str], policy: str) -> None:
    """As :func:`check_device_order`, for a declared policy: ``coldest`` is the candidate with the
    smallest ``key`` left beside the picked pages, and none of them may have a larger key."""
    if not picked or coldest is None:
        return
    hotter = max(picked, key=key)
    if key(coldest) < key(hotter):
        raise EvictionOrderViolation(
            f"evict({num_tokens}) {how} {hotter} ({describe(hotter)}, key {key(hotter)!r}) while the unlocked device leaf "
            f"{coldest} ({describe(coldest)}, key {key(coldest)!r}) stayed: under {policy} it goes first"
            f"{left_behind(coldest)}")
