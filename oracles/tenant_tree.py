"""Oracle 11 — the tenant-tree model: per tenant, the prefixes it holds, each with its last use.

A router's tenant tree (``radixcheck.properties.tenant_tree.contract``) is judged against this
model, as plainly as possible: each present tenant has a dict ``prefix -> last-use time`` of every
non-empty prefix of every key inserted for it (its size is the dict's length), and each prefix the
tenants who hold it. The truth of a match is then a walk down the query's prefixes while some
available tenant holds one. LRU eviction per tenant removes prefixes in a fixed order, oldest
last use first and the deepest first among equal times (a leaf before its parent), kept in a
sorted list so an eviction costs what it removes. Removing a tenant drops its dict: nothing of it
stays.

Every method costs what its key or its tenant's prefixes touch (no walk of every tenant). It
imports nothing from the suite but its exception classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sortedcontainers import SortedList

from radixcheck.oracles.violations import TenantTreeEvictionViolation

Key = str | tuple[int, ...]


class TenantTreeModel:
    """What each present tenant holds, by the inserts and evictions sent."""

    def __init__(self) -> None:
        self.times: dict[str, dict[Key, float]] = {}  # present tenant -> prefix -> last use
        self._order: dict[str, SortedList] = {}  # tenant -> (time, -len(prefix), prefix): eviction order
        self.holders: dict[Key, set[str]] = {}  # prefix -> present tenants holding it

    # ---- what the caller did -----------------------------------------------------------------

    def add(self, tenant: str) -> None:
        if tenant not in self.times:
            self.times[tenant], self._order[tenant] = {}, SortedList()

    def insert(self, key: Key, tenant: str, time_s: float) -> None:
        """Every prefix of ``key`` is held by ``tenant``, last used at ``time_s`` (or later)."""
        mine, order = self.times[tenant], self._order[tenant]
        for n in range(1, len(key) + 1):
            prefix = key[:n]
            old = mine.get(prefix)
            if old is None:
                self.holders.setdefault(prefix, set()).add(tenant)
            elif old >= time_s:
                continue
            else:
                order.remove((old, -n, prefix))
            mine[prefix] = time_s
            order.add((time_s, -n, prefix))

    def remove(self, tenant: str) -> None:
        """The tenant leaves: nothing of it stays."""
        for prefix in self.times.pop(tenant, {}):
            self._drop_holder(prefix, tenant)
        self._order.pop(tenant, None)

    def _drop_holder(self, prefix: Key, tenant: str) -> None:
        holders = self.holders[prefix]
        holders.discard(tenant)
        if not holders:
            del self.holders[prefix]

    def eviction_bounds(self, tenant: str, amount: int) -> tuple[int, int]:
        """The fewest and the most prefixes ``evict(tenant, amount)`` may remove: at least
        ``min(amount, size)``; at most that plus the rest of the group (same last use) it ends in."""
        order = self._order[tenant]
        least = min(amount, len(order))
        if least == 0:
            return 0, 0
        last_time = order[least - 1][0]
        most = least
        while most < len(order) and order[most][0] == last_time:
            most += 1
        return least, most

    def evict(self, tenant: str, removed: int, last_use: dict[Key, float] | None = None) -> list[Key]:
        """The tree removed ``removed`` prefixes of ``tenant``: the first ones in eviction order
        (their last uses are written into ``last_use``, where given: ``adopt`` may need them back)."""
        order, mine = self._order[tenant], self.times[tenant]
        if removed > len(order):
            raise TenantTreeEvictionViolation(f"evict({tenant!r}) removed {removed}, but {tenant!r} holds only {len(order)}")
        gone = [order[i][2] for i in range(removed)]
        del order[:removed]
        for prefix in gone:
            if last_use is not None:
                last_use[prefix] = mine[prefix]
            del mine[prefix]
            self._drop_holder(prefix, tenant)
        return gone

    def adopt(self, tenant: str, holds: Callable[[Key], bool], evicted: dict[Key, float]) -> None:
        """After an eviction finding: ``tenant`` holds what the tree says it holds (``holds``), of
        the prefixes the model had for it and those LRU took (``evicted``, with their last uses),
        so that a waived finding leaves no echo. Costs the tenant's prefixes: only on a finding."""
        mine, order = self.times[tenant], self._order[tenant]
        for prefix, time_s in evicted.items():
            if prefix not in mine and holds(prefix):  # LRU took it; the tree kept it
                mine[prefix] = time_s
                order.add((time_s, -len(prefix), prefix))
                self.holders.setdefault(prefix, set()).add(tenant)
        for prefix in [p for p in mine if not holds(p)]:  # the tree took it instead
            order.remove((mine.pop(prefix), -len(prefix), prefix))
            self._drop_holder(prefix, tenant)

    # ---- what a tree must answer ---------------------------------------------------------------

    def truth(self, key: Key, available: Iterable[str]) -> int:
        """The longest prefix of ``key`` that some available present tenant holds."""
        wanted = set(available)
        best = 0
        for n in range(1, len(key) + 1):
            if not self.holders.get(key[:n], set()) & wanted:
                break
            best = n
        return best

    def holders_of(self, prefix: Sequence, available: Iterable[str]) -> set[str]:
        """The available tenants holding ``prefix`` (non-empty)."""
        return self.holders.get(prefix, set()) & set(available)

    def size(self, tenant: str) -> int:
        return len(self.times.get(tenant, ()))

    def sizes(self) -> dict[str, int]:
        return {t: len(p) for t, p in self.times.items() if p}

    def distinct_prefixes(self) -> int:
        """Prefixes held by any present tenant: a tree needs at most this many nodes (plus its root)."""
        return len(self.holders)
