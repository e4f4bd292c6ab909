"""Oracle 1 — the prefix-set model.

A radix cache, seen from outside, is a prefix-closed set of cached token sequences. This model
stores that set literally: a dict from every cached page-aligned prefix to an ``Entry`` holding
the slot ids of its last page. No tree, no splitting: a match is the longest prefix found in
the dict, and its values are the concatenated pages — exactly the values first inserted there.

The model also keeps what a cache must remember about each page: its lock count, its last use
(a logical clock, one tick per match or insert) and whether it is cached, detached (quarantined
while locked) or gone (its slots must have been freed). The other oracles read this state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from radixcheck.oracles.violations import PrefixSetViolation, SlotViolation, shown


@dataclass(eq=False)
class Entry:
    prefix: tuple[int, ...]
    values: tuple[int, ...]  # the slot ids of the last page of ``prefix``
    locks: int = 0
    last_use: int = 0
    state: str = "cached"  # "cached" | "detached" | "gone"


@dataclass
class PrefixSetModel:
    page_size: int = 1
    cached: dict[tuple[int, ...], Entry] = field(default_factory=dict)
    detached: list[Entry] = field(default_factory=list)
    clock: int = 0

    # ---- the set itself -------------------------------------------------------------------

    def aligned_prefixes(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        """Every non-empty page-aligned prefix of ``tokens``, shortest first."""
        p = self.page_size
        return [tuple(tokens[:k]) for k in range(p, len(tokens) // p * p + 1, p)]

    def longest_cached(self, tokens: Sequence[int]) -> list[Entry]:
        """The entries of the longest cached prefix of ``tokens`` (no side effects)."""
        path = []
        for k in range(self.page_size, len(tokens) + 1, self.page_size):
            entry = self.cached.get(tuple(tokens[:k]))
            if entry is None:
                break
            path.append(entry)
        return path

    def match(self, tokens: Sequence[int]) -> list[Entry]:
        """A match: the longest cached prefix, marked as used now."""
        self.clock += 1
        path = self.longest_cached(tokens)
        for entry in path:
            entry.last_use = self.clock
        return path

    def insert(self, tokens: Sequence[int], values: Sequence[int]) -> int:
        """Cache ``tokens``; already-cached pages keep their first values. Returns prefix_len."""
        self.clock += 1
        path = self.longest_cached(tokens)
        prefix_len = len(path) * self.page_size
        for prefix in self.aligned_prefixes(tokens)[len(path) :]:
            page = tuple(int(v) for v in values[len(prefix) - self.page_size : len(prefix)])
            self.cached[prefix] = Entry(prefix, page)
        for entry in self.longest_cached(tokens):
            entry.last_use = self.clock
        return prefix_len

    @staticmethod
    def values_of(path: Iterable[Entry]) -> list[int]:
        return [v for entry in path for v in entry.values]

    # ---- locks: a handle locks every entry on its path ----------------------------------------

    @staticmethod
    def can_lock(path: list[Entry]) -> bool:
        return all(e.state == "cached" for e in path)

    @staticmethod
    def can_unlock(path: list[Entry]) -> bool:
        """Every counter on the path is positive and the handle's own page is not gone."""
        return all(e.state != "gone" and e.locks > 0 for e in path)

    def lock(self, path: list[Entry]) -> None:
        for entry in path:
            entry.locks += 1

    def unlock(self, path: list[Entry]) -> set[int]:
        """Release one lock; returns the slots that must be freed now (detached pages let go)."""
        freed: set[int] = set()
        for entry in path:
            entry.locks -= 1
            if entry.locks == 0 and entry.state == "detached":
                entry.state = "gone"
                self.detached.remove(entry)
                freed.update(entry.values)
        return freed

    # ---- removal ------------------------------------------------------------------------------

    def remove_freed(self, slots: Iterable[int]) -> list[Entry]:
        """Apply an eviction observed as freed slots; returns the entries it removed.

        Raises AssertionError when the freed slots are not whole cached pages or when removing
        them would leave a cached page whose prefix is gone (the set must stay prefix-closed).
        """
        slots = set(slots)
        removed = [e for e in self.cached.values() if e.values[0] in slots]
        partial = [e.prefix for e in removed if not slots.issuperset(e.values)]
        if partial:
            raise SlotViolation(f"eviction freed only part of the page(s) {', '.join(map(shown, partial[:3]))}")
        unknown = slots - {v for e in removed for v in e.values}
        if unknown:
            raise SlotViolation(f"eviction freed slots the cache did not hold: {sorted(unknown)[:8]}")
        for entry in removed:
            del self.cached[entry.prefix]
            entry.state = "gone"
        orphans = [e.prefix for e in self.cached.values() if e.prefix[: -self.page_size] and e.prefix[: -self.page_size] not in self.cached]
        if orphans:
            raise PrefixSetViolation(f"eviction removed a prefix but kept its extension(s) {', '.join(map(shown, orphans[:3]))}")
        return removed

    def quarantine(self, tokens: Sequence[int]) -> tuple[int, set[int]]:
        """evict_prefix: drop every cached page whose prefix starts with ``tokens``.

        With page_size p the cut is at (len(tokens) - 1) // p * p, so the doomed pages are those of
        length >= len(tokens) that start with ``tokens``. Returns (tokens removed, slots to free now).
        """
        n = len(tokens)
        doomed = [e for e in self.cached.values() if len(e.prefix) >= n and e.prefix[:n] == tuple(tokens)]
        freed: set[int] = set()
        for entry in doomed:
            del self.cached[entry.prefix]
            if entry.locks > 0:
                entry.state = "detached"
                self.detached.append(entry)
            else:
                entry.state = "gone"
                freed.update(entry.values)
        return len(doomed) * self.page_size, freed

    def reset(self) -> set[int]:
        """Everything goes; returns every slot that must be freed."""
        freed = self.slots()
        for entry in list(self.cached.values()) + self.detached:
            entry.state = "gone"
        self.cached.clear()
        self.detached.clear()
        return freed

    # ---- what the other oracles read --------------------------------------------------------

    def total(self) -> int:
        return len(self.cached) * self.page_size

    def protected(self) -> int:
        return sum(self.page_size for e in self.cached.values() if e.locks > 0)

    def slots(self) -> set[int]:
        """Every slot the cache must still hold: cached pages and detached (locked) ones."""
        return {v for e in list(self.cached.values()) + self.detached for v in e.values}

    def leaves(self) -> list[Entry]:
        """Cached pages that no other cached page extends."""
        parents = {prefix[: -self.page_size] for prefix in self.cached}
        return [e for e in self.cached.values() if e.prefix not in parents]
