"""Deliberately broken variants of the reference tenant tree, and correct unusual ones.

Each mutant is one idea, the smallest change to the reference (``radixcheck.reference.tenant_tree``)
that plants a class of bug a router's tree can have, and names in ``caught_by`` the oracle
exception(s) that must report it. The correct variants (``CORRECT_TENANT_TREE_VARIANTS``) must pass:
one with token-id keys, one that matches in chunks (declared lossy), one without a lock (declares
no thread safety, so no thread is ever sent), one that offers no eviction, removal, sizes or
node count (every such call is left out), and a trie of whole chunks (a router's chunk-hash trie,
declared lossy, whose matches may end inside a chunk).

``radixcheck audit radixcheck.properties.tenant_tree.mutants:MatchNamesUnavailableTenant``
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable

from radixcheck.oracles.violations import TenantTreeEvictionViolation, TenantTreeMemoryViolation, TenantTreeViolation
from radixcheck.properties.tenant_tree.contract import Key, TenantTreeCapabilities
from radixcheck.properties.tenant_tree.machine import TenantTreeMachine, tenant_tree_machine_for
from radixcheck.properties.tenant_tree.slow_variants import EvictScansTenantNodes
from radixcheck.reference.tenant_tree import Node, TenantTree, TokenTenantTree


class MatchNamesUnavailableTenant(TenantTree):
    """The tenants of a match are read off the node reached, not filtered by the available set: a
    replica that is busy or gone is still proposed (rule 4)."""

    bug_class = "match-names-unavailable-tenant"
    caught_by = TenantTreeViolation

    def _tenants_at(self, node: Node, wanted: set[str], length: int) -> frozenset[str]:
        return frozenset(node.times) if length else frozenset()


class MatchLongerThanQuery(TenantTree):
    """A query that ends mid-edge counts the whole edge as matched (a final partial chunk counted
    as whole): the match is longer than the query (rule 2)."""

    bug_class = "match-longer-than-query"
    caught_by = TenantTreeViolation

    def match(self, key: Key, available: Iterable[str]) -> tuple[int, frozenset[str]]:
        length, tenants = super().match(key, available)
        with self.lock:
            node, i = self.root, 0
            while i < length:
                node = node.children[key[i]]
                i += len(node.segment)
        return i, tenants


class SplitLosesOtherTenantsTimes(TenantTree):
    """A split's new upper node takes the inserting tenant's time for every tenant holding it: the
    other tenants' own last uses are lost, so their prefixes look fresher than they are and LRU
    eviction trims the wrong ones."""

    bug_class = "split-loses-other-tenants-times"
    caught_by = TenantTreeEvictionViolation

    def _split(self, child: Node, at: int, tenant: str, time_s: float) -> Node:
        upper = super()._split(child, at, tenant, time_s)
        upper.times = dict.fromkeys(upper.times, time_s)
        return upper

    # The inserting tenant's time may be older than another holder's own times below the split (each
    # tenant has its own clock), so the reference's heap, which relies on a parent never being older
    # than its children, would take an inner node: another bug. This one only misorders, so it evicts
    # as the reference did before its heap: the least recently used of the tenant's leaves, found by a scan.
    evict = EvictScansTenantNodes.evict


class EvictionCrossesTenants(TenantTree):
    """A tenant's eviction unlinks the leaf it chose for every tenant, not only for itself: other
    replicas lose prefixes they still hold."""

    bug_class = "eviction-crosses-tenants"
    caught_by = TenantTreeEvictionViolation

    def _drop(self, tenant: str, node: Node) -> None:
        if not self._evicting:
            super()._drop(tenant, node)
            return
        for holder in list(node.times):
            super()._drop(holder, node)

    _evicting = False

    def evict(self, tenant: str, amount: int) -> int:
        self._evicting = True
        try:
            return super().evict(tenant, amount)
        finally:
            self._evicting = False


class RemovedTenantLeftInNodes(TenantTree):
    """Removing a tenant forgets its size and node list but leaves its times in the nodes (smg
    #2132's shape: a removed worker's tenant never purged): the nodes stay in memory, and when a
    replica comes back under the same name it is matched on prefixes it never received."""

    bug_class = "removed-tenant-left-in-nodes"
    caught_by = (TenantTreeViolation, TenantTreeMemoryViolation)

    def remove_tenants(self, tenants: list[str]) -> None:
        with self.lock:
            for tenant in tenants:
                self.nodes_of.pop(tenant, None)
                self.size_of.pop(tenant, None)

    def _split(self, child: Node, at: int, tenant: str, time_s: float) -> Node:
        leftover = {t: child.times.pop(t) for t in list(child.times) if t not in self.nodes_of}
        upper = super()._split(child, at, tenant, time_s)
        child.times |= leftover
        upper.times |= leftover
        return upper

    def _touch(self, tenant: str, node: Node, time_s: float) -> None:
        if tenant in node.times and node not in self.nodes_of[tenant]:  # a leftover time: counted afresh
            del node.times[tenant]
        super()._touch(tenant, node, time_s)


TENANT_TREE_MUTANTS: list[type[TenantTree]] = [MatchNamesUnavailableTenant, MatchLongerThanQuery, SplitLosesOtherTenantsTimes,
                                               EvictionCrossesTenants, RemovedTenantLeftInNodes]


class SplitRacesWithoutLock(TenantTree):
    """Claims thread safety, but takes no lock, and a split gives up the interpreter between
    linking the new upper node and giving it its holders' times, read before (any real work there
    would): a concurrent insert of another tenant through the new node is miscounted and its time
    there lost. Only the threaded stress test can see it; the single-threaded machine passes it.

    The links themselves are made before the window: a window between reading the node's segment
    and cutting it let two threads split one node at once, and the second cut an empty segment
    (an ``IndexError`` of the mutant's own, 3 rounds in 15 under load), a crash, not the oracle."""

    bug_class = "split-races-without-lock"
    caught_by = (TenantTreeViolation, TenantTreeEvictionViolation, TenantTreeMemoryViolation)  # an oracle's verdict

    def __init__(self) -> None:
        super().__init__()
        self.lock = contextlib.nullcontext()

    def _split(self, child: Node, at: int, tenant: str, time_s: float) -> Node:
        upper = Node(child.segment[:at], child.parent)
        held = dict(child.times)  # the holders' last uses, read before the window
        child.parent.children[upper.segment[0]] = upper
        child.segment = child.segment[at:]
        child.parent = upper
        upper.children[child.segment[0]] = child
        self.nodes += 1
        time.sleep(0)  # the window: another thread runs here, through an upper node no tenant holds yet
        for holder, held_at in held.items():
            upper.times[holder] = held_at  # a time another thread stamped in the window is overwritten: lost
            self.nodes_of[holder].add(upper)
            self._remember(holder, upper, held_at)
        return upper


THREAD_MUTANTS: list[type[TenantTree]] = [SplitRacesWithoutLock]
"""Mutants only the threaded stress test (``stress_with_threads``) can catch."""


# ---- correct variants ----------------------------------------------------------------------------


class ChunkedTenantTree(TenantTree):
    """Correct, declared lossy: a match stops at the last whole chunk of 4 elements (the truth rounded
    down), as a hash trie of chunks does; it names the available tenants holding that much."""

    capabilities = dataclasses.replace(TenantTree.capabilities, match_granularity=4)

    def match(self, key: Key, available: Iterable[str]) -> tuple[int, frozenset[str]]:
        length, _ = super().match(key, available)
        length -= length % 4
        return super().match(key[:length], available) if length else (0, frozenset())


class UnlockedTenantTree(TenantTree):
    """Correct for one thread: no lock (declares ``thread_safe=False``: no thread is sent)."""

    capabilities = dataclasses.replace(TenantTree.capabilities, thread_safe=False)

    def __init__(self) -> None:
        super().__init__()
        self.lock = contextlib.nullcontext()


class InsertOnlyTenantTree(TenantTree):
    """Correct, and offers only add, insert and match (a hash trie's shape: no eviction, removal,
    sizes or node count); everything else is left out, never failed."""

    capabilities = TenantTreeCapabilities(key_kind="text", thread_safe=True, supports_removal=False, supports_eviction=False,
                                          reports_sizes=False, reports_nodes=False)


class ChunkTrie:
    """Correct, declared lossy: a trie of whole chunks of 4 elements (a key's last chunk may be
    shorter), each node the set of tenants that inserted through it, as a router's chunk-hash
    trie keeps it (without the hashes). A match walks whole chunks, counts the last one by its own
    length, and names the tenants of the node it ends at: at a length inside a chunk that is only
    the tenants whose key ended there (the contract's allowance). No eviction, removal, sizes or
    node count (declared)."""

    capabilities = TenantTreeCapabilities(key_kind="text", match_granularity=4, supports_removal=False, supports_eviction=False,
                                          reports_sizes=False, reports_nodes=False)

    def __init__(self) -> None:
        self.root: dict = {"tenants": set(), "children": {}}

    @staticmethod
    def _chunks(key: Key) -> list[Key]:
        return [key[i:i + 4] for i in range(0, len(key), 4)]

    def add_tenants(self, tenants: list[str], time_s: float) -> None:
        pass

    def insert(self, key: Key, tenant: str, time_s: float) -> None:
        node = self.root
        for chunk in self._chunks(key):
            node = node["children"].setdefault(chunk, {"tenants": set(), "children": {}})
            node["tenants"].add(tenant)

    def match(self, key: Key, available: Iterable[str]) -> tuple[int, frozenset[str]]:
        node, length, tenants = self.root, 0, frozenset()
        for chunk in self._chunks(key):
            node = node["children"].get(chunk)
            here = frozenset(node["tenants"]) & set(available) if node else frozenset()
            if not here:
                break
            length, tenants = length + len(chunk), here
        return length, tenants


CORRECT_TENANT_TREE_VARIANTS: list[type] = [TokenTenantTree, ChunkedTenantTree, UnlockedTenantTree, InsertOnlyTenantTree, ChunkTrie]


def machine_for_tenant_tree_mutant(tree: type[TenantTree], name: str | None = None) -> type[TenantTreeMachine]:
    """The tenant-tree machine for one mutant or variant, with its own capabilities. The name keys
    Hypothesis's derandomized seed (the kill rates give each stream its own name)."""
    return tenant_tree_machine_for(tree, tree.capabilities, name or f"tenant_tree_mutant_{tree.__name__}")
