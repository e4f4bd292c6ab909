"""Oracle 1 — the prefix-set model.

A radix cache, seen from outside, is a prefix-closed set of cached token sequences. This model
stores that set as plainly as a production-sized run allows: one ``Entry`` per cached *page*,
found from the entry of the page before it by the page's tokens (a trie of pages). No edges, no
splitting: a match is the longest chain of cached pages, and its values are those pages' slot
ids, exactly the values first inserted there.

The model also keeps what a cache must remember about each page: its lock count, its last use
(a logical clock, one tick per match or insert) and whether it is cached, detached (quarantined
while locked) or gone (its slots must have been freed). The other oracles read this state. A
use of a path is stamped on its last page only; a page's last use is the newest stamp at or
below it, which is what a leaf's own stamp is (see ``_use``).

**Namespaces.** Each namespace (any hashable value, told apart by its equality) has its own trie
of pages: ``roots`` maps it to its root entry, the default namespace ``None`` to ``root``. Every
entry remembers its namespace and the clock of the insert that cached it (``born``), so an
isolation check can name both. The slots, the sizes, the locks and the recency order stay global:
the namespaces share one pool and one eviction order.

**Policies.** For a target with a declared eviction policy the model also keeps, per page, what
the policy's key reads (:class:`~radixcheck.oracles.policy.LeafStats`): its hits (every insert that
covered it, and every match if ``hits_on_match``), the highest priority of the inserts that
covered it, its branch's high-water depth, and whether a cache node ends after it (a match or an
insert ended there, or the tree forked: where SGLang's tree has a node boundary). With
``order_key`` set, the unlocked leaves are also kept in that key's order (``by_policy``).

**Scale.** A production cache holds 10^5 tokens and paths thousands of pages deep, so nothing
here walks the whole tree on a step: every method costs what it reads or changes. The sizes are
two counters, ``slot_owner`` maps each slot to its page, and the unlocked leaves are kept in
recency order; whenever a page changes, :meth:`PrefixSetModel._refile` puts it back where it
belongs. Only :meth:`PrefixSetModel.reset` and :meth:`PrefixSetModel.entries` touch every page.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedList

from radixcheck.oracles.deviation import Deviation
from radixcheck.oracles.policy import LeafStats
from radixcheck.oracles.violations import Check, PrefixSetViolation, SlotViolation, shown

_serials = itertools.count()


@dataclass(eq=False, slots=True)
class Entry:
    """One cached page: its tokens, its slot ids, and where it hangs in the trie."""

    page: tuple[int, ...]
    values: tuple[int, ...]  # the slot ids of this page
    parent: Entry | None
    depth: int = 0  # pages from the root: this page ends at token depth * page_size
    children: dict[tuple[int, ...], Entry] = field(default_factory=dict)
    locks: int = 0
    last_use: int = 0
    state: str = "cached"  # "cached" | "detached" | "gone" ("root" for the trie's root)
    serial: int = field(default_factory=lambda: next(_serials))
    filed_as: tuple | None = None  # its key in PrefixSetModel.unlocked_leaves, if it is there
    namespace: Hashable = None  # the namespace whose trie it is in
    born: int = 0  # the model's clock at the insert that cached it
    hits: int = 0  # hits that covered it (LeafStats.hits)
    priority: int = 0  # the highest priority of the inserts that covered it
    history: int = 0  # the deepest its branch reached, in pages (TLRU's L)
    ends_node: bool = False  # a match or insert ended here, or the tree forked here: a cache node ends after it
    policy_filed_as: tuple | None = None  # its key in PrefixSetModel.by_policy, if it is there

    @property
    def prefix(self) -> tuple[int, ...]:
        """Every token from the root to the end of this page (O(depth): for messages)."""
        pages, node = [], self
        while node is not None:
            pages.append(node.page)
            node = node.parent
        return tuple(t for page in reversed(pages) for t in page)

    def __repr__(self) -> str:
        return f"Entry({shown(self.prefix)}, locks={self.locks}, last_use={self.last_use}, {self.state})"


@dataclass
class PrefixSetModel:
    page_size: int = 1
    clock: int = 0
    root: Entry = field(default_factory=lambda: Entry((), (), None, state="root"))
    pages: int = 0  # cached pages
    locked_pages: int = 0  # cached pages with a lock
    slot_owner: dict[int, Entry] = field(default_factory=dict)  # cached and detached pages' slots
    detached: dict[Entry, None] = field(default_factory=dict)  # insertion-ordered set
    unlocked_leaves: SortedList = field(default_factory=SortedList)  # (last_use, serial, entry), oldest first
    roots: dict[Hashable, Entry] = field(default_factory=dict)  # namespace -> its trie's root (None -> root)
    order_key: Callable[[LeafStats], Any] | None = None  # a declared policy's key: keeps by_policy
    hits_on_match: bool = True  # a match counts as a hit (LeafStats.hits)
    by_policy: SortedList = field(default_factory=SortedList)  # (order_key(stats), serial, entry), coldest first
    deviations: list[Deviation] = field(default_factory=list)  # known order bugs whose stamps are kept too (oracles.deviation)

    def __post_init__(self) -> None:
        self.roots[None] = self.root

    def root_of(self, namespace: Hashable) -> Entry:
        """The root entry of ``namespace``'s trie (an empty one, made on its first insert)."""
        if namespace not in self.roots:
            self.roots[namespace] = Entry((), (), None, state="root", namespace=namespace)
        return self.roots[namespace]

    # ---- the set itself -------------------------------------------------------------------

    def _page_at(self, tokens: Sequence[int], depth: int) -> tuple[int, ...]:
        p = self.page_size
        return tuple(tokens[depth * p : (depth + 1) * p])

    def longest_cached(self, tokens: Sequence[int], namespace: Hashable = None) -> list[Entry]:
        """The entries of the longest prefix of ``tokens`` cached under ``namespace`` (no side effects)."""
        path, node = [], self.roots.get(namespace)
        if node is None:
            return path
        for depth in range(len(tokens) // self.page_size):
            node = node.children.get(self._page_at(tokens, depth))
            if node is None:
                break
            path.append(node)
        return path

    def _use(self, path: list[Entry]) -> None:
        """Mark a matched or inserted path as used now. Only its last page is stamped: a page's
        last use is the newest stamp at or below it, and a page leaving the set hands its stamp
        to its parent (``_unlink``), so a leaf's stamp is always its own last use."""
        if path:
            path[-1].last_use = self.clock
            self._refile(path[-1])

    def touch(self, path: list[Entry]) -> None:
        """A match whose path the caller already knows (it extends nothing): as :meth:`match`."""
        self.clock += 1
        self._matched(path)

    def match(self, tokens: Sequence[int], namespace: Hashable = None) -> list[Entry]:
        """A match: the longest prefix cached under ``namespace``, marked as used now."""
        self.clock += 1
        path = self.longest_cached(tokens, namespace)
        self._matched(path)
        return path

    def _matched(self, path: list[Entry]) -> None:
        if self.hits_on_match:
            for entry in path:
                entry.hits += 1
        self._use(path)
        self._node_ends(path)

    def insert(self, tokens: Sequence[int], values: Sequence[int], namespace: Hashable = None, priority: int = 0) -> int:
        """Cache ``tokens`` under ``namespace``; already-cached pages keep their first values. Returns
        prefix_len. Every page it covers counts a hit and takes ``priority`` if higher."""
        self.clock += 1
        p = self.page_size
        path = self.longest_cached(tokens, namespace)
        prefix_len = len(path) * p
        for entry in path:
            entry.hits += 1
            entry.priority = max(entry.priority, priority)
        node = path[-1] if path else self.root_of(namespace)
        if len(path) < len(tokens) // p:
            self._node_ends(path)  # the new pages hang here: a fork, or the end of a leaf
        for depth in range(len(path), len(tokens) // p):
            page = Entry(self._page_at(tokens, depth), tuple(values[depth * p : (depth + 1) * p]), node, depth + 1,
                         namespace=namespace, born=self.clock, hits=1, priority=priority)
            node.children[page.page] = page
            self._refile(node)  # no longer a leaf
            self.pages += 1
            for slot in page.values:
                self.slot_owner[slot] = page
            path.append(page)
            node = page
        deepest = len(path)
        for entry in reversed(path):  # the branch's high-water mark rises (and never falls)
            if entry.history >= deepest:
                break
            entry.history = deepest
        self._use(path)
        self._node_ends(path)
        return prefix_len

    def _node_ends(self, path: list[Entry]) -> None:
        """A cache node ends after ``path[-1]`` (a split there, if it was inside an edge): the leaf
        below it, if one hangs on a single chain, now has a shorter node (LeafStats.start)."""
        if not path or path[-1].ends_node:
            return
        entry = path[-1]
        entry.ends_node = True
        inside = bool(entry.children)  # the use ended inside a node: a cache splits it here
        while len(entry.children) == 1:
            entry = next(iter(entry.children.values()))
            if entry.ends_node:
                break
        if not entry.children:
            self._refile(entry)
        if inside:
            for deviation in self.deviations:  # entry: the last page of the split node's lower half
                deviation.split(path[-1], entry, self.clock)

    def deviated_stats(self, entry: Entry, deviation: Deviation) -> LeafStats:
        """What a cache with the known bug ``deviation`` (one of ``deviations``) keeps for the leaf ``entry``."""
        return deviation.stats(self.leaf_stats(entry), entry)

    def leaf_stats(self, entry: Entry) -> LeafStats:
        """What a policy's key reads of ``entry`` as a leaf (O(pages of its node), for ``start``)."""
        top = entry.parent
        while top.state != "root" and not top.ends_node and len(top.children) <= 1:
            top = top.parent
        p = self.page_size
        return LeafStats(last_use=entry.last_use, created=entry.born, hits=entry.hits, priority=entry.priority,
                         depth=entry.depth * p, start=top.depth * p, history=entry.history * p)

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
            if entry.locks == 1 and entry.state == "cached":
                self.locked_pages += 1
            self._refile(entry)

    def unlock(self, path: list[Entry]) -> set[int]:
        """Release one lock; returns the slots that must be freed now (detached pages let go)."""
        freed: set[int] = set()
        for entry in path:
            entry.locks -= 1
            if entry.locks == 0 and entry.state == "cached":
                self.locked_pages -= 1
            if entry.locks == 0 and entry.state == "detached":
                del self.detached[entry]
                freed.update(self._forget(entry))
            self._refile(entry)
        return freed

    # ---- removal ------------------------------------------------------------------------------

    def _forget(self, entry: Entry) -> tuple[int, ...]:
        """The page is gone: its slots leave the index (they must be freed now)."""
        entry.state = "gone"
        for slot in entry.values:
            del self.slot_owner[slot]
        return entry.values

    def _unlink(self, entry: Entry) -> None:
        """Take a cached page out of the set (its slots stay indexed until it is forgotten)."""
        del entry.parent.children[entry.page]
        entry.parent.last_use = max(entry.parent.last_use, entry.last_use)  # it was used whenever this page was
        self.pages -= 1
        if entry.locks > 0:
            self.locked_pages -= 1
        entry.state = "unlinked"
        for deviation in self.deviations:
            deviation.unlinked(entry)
        self._refile(entry)
        self._refile(entry.parent)  # may have become a leaf

    def remove_freed(self, slots: Iterable[int]) -> list[Entry]:
        """Apply an eviction observed as freed slots; returns the entries it removed.

        Raises when the freed slots are not whole cached pages, or when removing them would leave
        a cached page whose prefix is gone (the set must stay prefix-closed).
        """
        slots = list(slots)
        owners = {self.slot_owner.get(s) for s in slots}
        unknown = [s for s in slots if self.slot_owner.get(s) is None or self.slot_owner[s].state != "cached"]
        if unknown:
            raise SlotViolation(f"eviction freed slots the cache did not hold in the tree: {sorted(unknown)[:8]}",
                                Check("set(freed).isdisjoint(not_in_tree)", "sorted(set(freed) & set(not_in_tree))",
                                      {"not_in_tree": sorted(unknown)}))
        freed = set(slots)
        removed = sorted(owners, key=lambda e: e.serial)
        partial = [e for e in removed if not freed.issuperset(e.values)]
        if partial:
            raise SlotViolation(f"eviction freed only part of the page(s) {', '.join(shown(e.prefix) for e in partial[:3])}",
                                Check("set(page) <= set(freed) or set(page).isdisjoint(freed)", "sorted(set(page) & set(freed))",
                                      {"page": list(partial[0].values)}))
        orphans = [(e, c) for e in removed for c in e.children.values() if c not in owners]
        if orphans:
            parent, child = orphans[0]
            kept = ", ".join(shown(c.prefix) for _, c in orphans[:3])
            raise PrefixSetViolation(f"eviction removed a prefix but kept its extension(s) {kept}",
                                     Check("not set(prefix) <= set(freed) or set(extension) <= set(freed)", "sorted(freed)",
                                           {"prefix": list(parent.values), "extension": list(child.values)}))
        for entry in sorted(removed, key=lambda e: -e.depth):  # deepest first: each is a leaf when it goes
            self._unlink(entry)
            self._forget(entry)
        return removed

    def quarantine(self, tokens: Sequence[int], namespace: Hashable = None) -> tuple[int, set[int]]:
        """evict_prefix: drop every page cached under ``namespace`` whose prefix starts with ``tokens``.

        With page_size p the cut is at (len(tokens) - 1) // p * p: the doomed pages are the
        subtrees hanging below the cut whose first page starts with the tokens after it.
        Returns (tokens removed, slots to free now).
        """
        p = self.page_size
        cut_pages = (len(tokens) - 1) // p
        path = self.longest_cached(tokens[: cut_pages * p], namespace)
        if len(path) < cut_pages or namespace not in self.roots:
            return 0, set()
        above = path[-1] if path else self.roots[namespace]
        head = tuple(tokens[cut_pages * p :])
        doomed = [c for c in above.children.values() if c.page[: len(head)] == head]
        removed, freed = 0, set()
        for top in doomed:
            for entry in sorted(self._subtree(top), key=lambda e: -e.depth):
                self._unlink(entry)
                removed += p
                if entry.locks > 0:
                    entry.state = "detached"
                    self.detached[entry] = None
                else:
                    freed.update(self._forget(entry))
        return removed, freed

    def reset(self) -> set[int]:
        """Everything goes; returns every slot that must be freed."""
        freed = set(self.slot_owner)
        for entry in list(self.entries()) + list(self.detached):
            entry.state = "gone"
        for root in self.roots.values():
            root.children.clear()
        self.detached.clear()
        self.slot_owner.clear()
        self.unlocked_leaves.clear()
        self.by_policy.clear()
        self.pages = self.locked_pages = 0
        return freed

    # ---- what the other oracles read --------------------------------------------------------

    def _refile(self, entry: Entry) -> None:
        """Put ``entry`` among the unlocked leaves (keyed by recency, and by the policy's key if one
        is set) if it is one, else take it out."""
        is_unlocked_leaf = entry.state == "cached" and not entry.children and entry.locks == 0
        key = (entry.last_use, entry.serial, entry) if is_unlocked_leaf else None
        if entry.filed_as != key:
            if entry.filed_as is not None:
                self.unlocked_leaves.remove(entry.filed_as)
            if key is not None:
                self.unlocked_leaves.add(key)
            entry.filed_as = key
        if self.order_key is not None:
            policy_key = (self.order_key(self.leaf_stats(entry)), entry.serial, entry) if is_unlocked_leaf else None
            if entry.policy_filed_as != policy_key:
                if entry.policy_filed_as is not None:
                    self.by_policy.remove(entry.policy_filed_as)
                if policy_key is not None:
                    self.by_policy.add(policy_key)
                entry.policy_filed_as = policy_key

    def coldest_unlocked_leaf(self, besides: set[Entry]) -> Entry | None:
        """The unlocked leaf with the smallest policy key, leaving out ``besides`` (``order_key`` must be set)."""
        return next((e for _, _, e in self.by_policy if e not in besides), None)

    def oldest_unlocked_leaf(self) -> Entry | None:
        return self.unlocked_leaves[0][2] if self.unlocked_leaves else None

    def unlocked_leaf_list(self) -> list[Entry]:
        """The unlocked leaves, least recently used first."""
        return [key[2] for key in self.unlocked_leaves]

    def total(self) -> int:
        return self.pages * self.page_size

    def protected(self) -> int:
        return self.locked_pages * self.page_size

    def slot_count(self) -> int:
        """How many slots the cache must still hold: cached pages and detached (locked) ones."""
        return len(self.slot_owner)

    @staticmethod
    def _subtree(top: Entry) -> Iterator[Entry]:
        stack = [top]
        while stack:
            entry = stack.pop()
            yield entry
            stack.extend(entry.children.values())

    def entries(self) -> Iterator[Entry]:
        """Every cached page of every namespace (O(tree): for whole-model checks, not for steps)."""
        for root in list(self.roots.values()):
            for child in list(root.children.values()):
                yield from self._subtree(child)
