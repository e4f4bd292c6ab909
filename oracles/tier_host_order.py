"""Oracle 4h — the host tier's eviction order: the declared Policy's order (least recently used
first by default) over the host-only leaves.

The tier contract's ``evict_host(num_tokens)`` frees host copies of pages on host only, leaves
first. A *host-only leaf* is a cached page with a completed host copy, no device copy, and no
child on either tier; it is a *candidate* while no request holds a lock on it. A page's order is
the device tier's (oracle 4t): its last use (a ``match_prefix`` or ``insert`` that covered it,
host part included), or a declared Policy's key over its statistics, which a page keeps through
every move between the tiers. Keys that tie may go in any order.

An ``evict_host`` call *picks* each host-only page whose host copy it frees (a host copy of a
page still on device, which SGLang's write-back reclaims first, is no pick: that page stays
cached). A cache may free several leaves in one ``free`` call, so a call's picks are replayed
in the order the rule allows: each time, the coldest pick that is a leaf then must be no hotter
than every candidate left beside the picks (a parent whose last child went is a candidate from
then on). Only the ``evict_host`` calls the suite makes are judged, never a host eviction a
backup or a load-back makes inside another call (where the pages it is loading are not
candidates); a finding is kept and raised once ``evict_host`` returns.

:class:`HostLeaves` keeps the host-only leaves by that order, refiled by the tier model whenever
a page goes on or off a tier or is used; the replay reads from the coldest leaf and skips the
picks and the locked ones, so it costs the picks and what it skips, never the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from sortedcontainers import SortedList

from radixcheck.oracles.violations import HostEvictionOrderViolation


def on_a_tier(page: Any) -> bool:
    """Cached on device or host, or being written there."""
    return not page.gone and (page.device is not None or page.host is not None or page.writing is not None)


def is_host_leaf(page: Any, taken: Collection[Any] = ()) -> bool:
    """On host only, cached, with no child on a tier (the pages in ``taken`` have gone)."""
    return (page.parent is not None and not page.gone and page.device is None and page.host is not None
            and not any(on_a_tier(c) and c not in taken for c in page.children.values()))


class HostLeaves:
    """The host-only leaves, first to go first: by ``order(page)`` (the last use, or a policy's key)."""

    def __init__(self, order: Callable[[Any], Any]) -> None:
        self.order = order
        self.by_order = SortedList()  # (order(page), serial, page)
        self.filed: dict[int, tuple[Any, int]] = {}  # serial -> its key in by_order

    def refile(self, page: Any) -> None:
        """Put ``page`` where it belongs now (in, out, or at its new order)."""
        key = self.filed.pop(page.serial, None)
        if key is not None:
            self.by_order.remove((*key, page))
        if is_host_leaf(page):
            key = (self.order(page), page.serial)
            self.filed[page.serial] = key
            self.by_order.add((*key, page))

    def coldest(self, skip: Collection[Any]) -> Any | None:
        """The candidate with the smallest order that is unlocked and not in ``skip``."""
        for _, _, page in self.by_order:
            if page not in skip and not page.locks:
                return page
        return None


def check_host_order(picked: list[Any], leaves: HostLeaves, num_tokens: int, describe: Callable[[Any], str],
                     rule: str) -> None:
    """``picked``: the host-only pages one ``free`` of ``evict_host(num_tokens)`` took, judged
    before ``leaves`` is refiled. Raises :class:`HostEvictionOrderViolation` when no order of
    them picks, each time, a leaf no hotter than every candidate left."""
    order, left, taken, became = leaves.order, list(picked), set(), []  # became: parents that turned leaf on the way
    while left:
        ready = [p for p in left if is_host_leaf(p, taken)]
        if not ready:
            return  # not a leaf-first eviction at all: oracle 16 judges it
        pick = min(ready, key=lambda p: (order(p), p.serial))
        skip = set(left) | taken
        others = [p for p in [leaves.coldest(skip), *became] if p is not None and p not in skip and not p.locks]
        stayed = min(others, key=lambda p: (order(p), p.serial), default=None)
        if stayed is not None and order(stayed) < order(pick):
            raise HostEvictionOrderViolation(
                f"evict_host({num_tokens}) freed {pick} ({describe(pick)}) while the host-only leaf {stayed} "
                f"({describe(stayed)}) stayed: the host tier evicts {rule} first")
        left.remove(pick)
        taken.add(pick)
        parent = pick.parent
        if parent.parent is not None and parent not in left and parent.serial not in leaves.filed and is_host_leaf(parent, taken):
            became.append(parent)
