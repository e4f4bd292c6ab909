"""The reference tenant prefix tree: a router's multi-tenant radix tree, as simple as it can be.

One radix tree for every tenant (replica). Each node holds a segment of a key (a ``str`` or a
tuple of token ids), its children by first element, and, per tenant holding it, the time that
tenant last used it. A tenant holds a node's whole segment or none of it: an insert that ends or
branches mid-segment splits the node, and the new upper half keeps every tenant's time. A match
walks down while some available tenant holds the next node. LRU eviction of a tenant removes its
leaves (nodes none of whose children it holds), the least recently used first, until the amount is
reached; a node no tenant holds any more is unlinked. Each tenant keeps a heap of its nodes by
(last use, deepest end first), entries left stale when a node is used again: a parent is never
older than its children, so the heap's oldest live entry is always one of the tenant's leaves, and
one eviction costs a logarithm of the tree, not a scan of it (``radixcheck bench`` measures it). One lock makes every call atomic
(``thread_safe=True``). Contract: ``radixcheck.properties.tenant_tree.contract``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterable

from radixcheck.properties.tenant_tree.contract import Key, TenantTreeCapabilities


class Node:
    __slots__ = ("segment", "parent", "children", "times", "end")

    def __init__(self, segment: Key, parent: Node | None) -> None:
        self.segment = segment
        self.parent = parent
        self.end = (parent.end if parent else 0) + len(segment)  # elements from the root to the segment's end: a split keeps it
        self.children: dict[object, Node] = {}
        self.times: dict[str, float] = {}  # tenant -> last use


def _shared(a: Key, b: Key) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class TenantTree:
    """The reference (text keys; :class:`TokenTenantTree` for token ids)."""

    capabilities = TenantTreeCapabilities(key_kind="text", thread_safe=True)

    def __init__(self) -> None:
        self.root = Node(self._empty(), None)
        self.nodes_of: dict[str, set[Node]] = {}  # present tenant -> the nodes it holds (root excluded)
        self.size_of: dict[str, int] = {}  # present tenant -> elements it holds
        self.lru: dict[str, list[tuple[float, int, int, Node]]] = {}  # present tenant -> heap (time, -end, tiebreak, node)
        self._tiebreak = itertools.count()
        self.nodes = 1
        self.lock = threading.Lock()

    def _empty(self) -> Key:
        return "" if self.capabilities.key_kind == "text" else ()

    # ---- tenants -----------------------------------------------------------------------------

    def add_tenants(self, tenants: list[str], time_s: float) -> None:
        with self.lock:
            for tenant in tenants:
                if tenant not in self.nodes_of:
                    self.nodes_of[tenant], self.size_of[tenant], self.lru[tenant] = set(), 0, []

    def remove_tenants(self, tenants: list[str]) -> None:
        with self.lock:
            for tenant in tenants:
                for node in list(self.nodes_of.get(tenant, ())):
                    self._drop(tenant, node)
                self.nodes_of.pop(tenant, None)
                self.size_of.pop(tenant, None)
                self.lru.pop(tenant, None)

    # ---- insert and match --------------------------------------------------------------------

    def insert(self, key: Key, tenant: str, time_s: float) -> None:
        with self.lock:
            node, i = self.root, 0
            while i < len(key):
                child = node.children.get(key[i])
                if child is None:
                    child = Node(key[i:], node)
                    node.children[key[i]] = child
                    self.nodes += 1
                shared = _shared(child.segment, key[i:])
                if shared < len(child.segment):
                    child = self._split(child, shared, tenant, time_s)
                self._touch(tenant, child, time_s)
                node, i = child, i + shared

    def _split(self, child: Node, at: int, tenant: str, time_s: float) -> Node:
        """Cut ``child`` after ``at`` elements; the new upper node keeps every tenant's time."""
        upper = Node(child.segment[:at], child.parent)
        upper.times = dict(child.times)
        for holder, time_s_held in upper.times.items():
            self.nodes_of[holder].add(upper)
            self._remember(holder, upper, time_s_held)
        child.parent.children[upper.segment[0]] = upper
        child.segment = child.segment[at:]
        child.parent = upper
        upper.children[child.segment[0]] = child
        self.nodes += 1
        return upper

    def _touch(self, tenant: str, node: Node, time_s: float) -> None:
        if tenant not in node.times:
            self.nodes_of[tenant].add(node)
            self.size_of[tenant] += len(node.segment)
        node.times[tenant] = time_s
        self._remember(tenant, node, time_s)

    def _remember(self, tenant: str, node: Node, time_s: float) -> None:
        """A heap entry for the node's new last use; the old entry goes stale (skipped when popped,
        and dropped when stale entries outnumber the live ones, so the heap stays O(nodes held))."""
        heap = self.lru[tenant]
        heapq.heappush(heap, (time_s, -node.end, next(self._tiebreak), node))
        if len(heap) > 2 * len(self.nodes_of[tenant]) + 16:
            self.lru[tenant] = [entry for entry in heap if self._live(tenant, entry)]
            heapq.heapify(self.lru[tenant])

    def _live(self, tenant: str, entry: tuple[float, int, int, Node]) -> bool:
        time_s, _, _, node = entry
        return node in self.nodes_of[tenant] and node.times[tenant] == time_s

    def match(self, key: Key, available: Iterable[str]) -> tuple[int, frozenset[str]]:
        with self.lock:
            wanted = set(available)
            node, i = self.root, 0
            while i < len(key):
                child = node.children.get(key[i])
                if child is None or not wanted & child.times.keys():
                    break
                shared = _shared(child.segment, key[i:])
                node, i = child, i + shared
                if shared < len(child.segment):
                    break
            return i, self._tenants_at(node, wanted, i)

    def _tenants_at(self, node: Node, wanted: set[str], length: int) -> frozenset[str]:
        return frozenset(wanted & node.times.keys()) if length else frozenset()

    # ---- eviction ----------------------------------------------------------------------------

    def evict(self, tenant: str, amount: int) -> int:
        """Remove ``tenant``'s least recently used leaves until ``amount`` elements are gone."""
        with self.lock:
            removed = 0
            heap = self.lru.get(tenant, [])
            while removed < amount and self.nodes_of.get(tenant):
                entry = heapq.heappop(heap)
                if not self._live(tenant, entry):
                    continue
                leaf = entry[3]  # the oldest, deepest first: a node's children it holds are never older
                removed += len(leaf.segment)
                self._drop(tenant, leaf)
            return removed

    def _drop(self, tenant: str, node: Node) -> None:
        """``tenant`` no longer holds ``node``; a node nobody holds is unlinked."""
        del node.times[tenant]
        self.nodes_of[tenant].discard(node)
        self.size_of[tenant] -= len(node.segment)
        if not node.times:
            del node.parent.children[node.segment[0]]
            self.nodes -= 1

    # ---- sizes and memory --------------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        with self.lock:
            return dict(self.size_of)

    def node_count(self) -> int:
        with self.lock:
            return self.nodes


class TokenTenantTree(TenantTree):
    """The reference with token-id keys (``tuple[int, ...]``)."""

    capabilities = TenantTreeCapabilities(key_kind="tokens", thread_safe=True)
