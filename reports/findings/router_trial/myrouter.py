"""My cache-aware router's two structures, written from radixcheck's docs only.

* ``EventIndex``: which (worker, dp_rank) holds which KV blocks, fed by the engines' KV events;
  ``find_matches`` gives each rank's overlap with a request's block hashes.
* ``TenantTree``: one approximate radix tree over all replicas (tenants), per-tenant LRU trimming.
"""

from __future__ import annotations

import heapq
import itertools
import threading

from radixcheck import IndexCapabilities, TenantTreeCapabilities
from radixcheck.properties.index.contract import HASH_LIMIT, AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock

Rank = tuple[int, int]


def _is_hash(h: object) -> bool:
    return isinstance(h, int) and not isinstance(h, bool) and 0 <= h < HASH_LIMIT


class EventIndex:
    """Per rank, the set of block hashes it holds; per block, its parent and tokens hash."""

    def __init__(self) -> None:
        self.held: dict[Rank, set[int]] = {}             # rank -> block hashes it holds
        self.holders: dict[int, set[Rank]] = {}          # block hash -> ranks holding it
        self.info: dict[int, tuple[int | None, int]] = {}  # block hash -> (parent hash, tokens hash)
        self.child: dict[tuple[int | None, int], int] = {}  # (parent hash, tokens hash) -> block hash

    # --- events -----------------------------------------------------------------------------
    def apply_event(self, worker_id: int, dp_rank: int, event: object) -> None:
        rank = (worker_id, dp_rank)
        if isinstance(event, BlockStored):
            self._store(rank, event)
        elif isinstance(event, BlockRemoved):
            self._remove(rank, event.block_hashes)
        elif isinstance(event, AllBlocksCleared):
            self._clear(rank)
        else:
            raise ValueError(f"unknown event {event!r}")

    def _check_store(self, rank: Rank, event: BlockStored) -> None:
        """Raise before changing anything: a store is applied whole or not at all."""
        blocks = event.blocks
        if event.parent_hash is not None:
            if not _is_hash(event.parent_hash):
                raise ValueError("bad parent hash")
            if event.parent_hash not in self.held.get(rank, ()):
                raise ValueError("parent not held by this rank")
        seen: set[int] = set()
        for b in blocks:
            if not isinstance(b, StoredBlock) or not _is_hash(b.block_hash) or not _is_hash(b.tokens_hash):
                raise ValueError("bad block")
            if b.block_hash in seen or b.block_hash == event.parent_hash:
                raise ValueError("block named twice / self parent")
            seen.add(b.block_hash)

    def _store(self, rank: Rank, event: BlockStored) -> None:
        self._check_store(rank, event)
        parent = event.parent_hash
        held = self.held.setdefault(rank, set())
        for b in event.blocks:
            h = b.block_hash
            if h not in self.info:
                self.info[h] = (parent, b.tokens_hash)
                self.child[(parent, b.tokens_hash)] = h
            held.add(h)
            self.holders.setdefault(h, set()).add(rank)
            parent = h

    def _remove(self, rank: Rank, hashes: tuple[int, ...]) -> None:
        held = self.held.get(rank, set())
        if not all(_is_hash(h) and h in held for h in hashes):
            raise ValueError("remove of a block this rank does not hold")
        for h in hashes:
            self._drop(rank, h)

    def _drop(self, rank: Rank, h: int) -> None:
        """This rank no longer holds h; forget h entirely once no rank does."""
        self.held[rank].discard(h)
        if not self.held[rank]:
            del self.held[rank]
        ranks = self.holders[h]
        ranks.discard(rank)
        if not ranks:
            del self.holders[h]
            del self.child[self.info.pop(h)]

    def _clear(self, rank: Rank) -> None:
        for h in list(self.held.get(rank, ())):
            self._drop(rank, h)

    def remove_worker(self, worker_id: int) -> None:
        for rank in [r for r in self.held if r[0] == worker_id]:
            self._clear(rank)

    # --- queries ----------------------------------------------------------------------------
    def find_matches(self, tokens_hashes: list[int]) -> dict[Rank, int]:
        result: dict[Rank, int] = {}
        active: set[Rank] | None = None   # ranks holding every block so far (None: not started)
        parent: int | None = None
        depth = 0
        for th in tokens_hashes:
            h = self.child.get((parent, th))
            ranks = self.holders.get(h, set()) if h is not None else set()
            now = set(ranks) if active is None else active & set(ranks)
            for r in (active or set()) - now:
                result[r] = depth
            active = now
            if not active:
                break
            depth += 1
            parent = h
        for r in active or ():
            result[r] = depth
        return result

    def sizes(self) -> dict[Rank, int]:
        return {r: len(hs) for r, hs in self.held.items()}

    def dump(self) -> list[tuple[int, int, BlockStored]]:
        """One single-block store per held block, parents before children (by chain depth)."""
        out = []
        for (w, d), hs in self.held.items():
            def depth(h: int, hs: set[int] = hs) -> int:
                n = 0
                while h is not None and h in hs:
                    h = self.info[h][0]
                    n += 1
                return n
            for h in sorted(hs, key=depth):
                parent, th = self.info[h]
                out.append((w, d, BlockStored(parent, (StoredBlock(h, th),))))
        return out

    def resident(self) -> int:
        return (sum(len(s) for s in self.held.values()) + sum(len(s) for s in self.holders.values())
                + len(self.info) + len(self.child))


def make_index() -> EventIndex:
    return EventIndex()


make_index.capabilities = IndexCapabilities(
    counts_copies=False,             # I read Dynamo's deduplicated stream
    accepts_any_removal_order=True,  # a parent may go before its children
    max_dp_ranks=4,
    validates_events=True,
    tolerates_redelivery=True,
    reports_sizes=True, offers_dump=True, reports_resident=True,
)


class TrustingIndex(EventIndex):
    """The same index trusting its publishers, as real indexers do: no validation at all."""

    def _check_store(self, rank: Rank, event: BlockStored) -> None:
        pass

    def _remove(self, rank: Rank, hashes: tuple[int, ...]) -> None:
        for h in hashes:
            self._drop(rank, h)


def make_trusting_index() -> TrustingIndex:
    return TrustingIndex()


make_trusting_index.capabilities = IndexCapabilities(
    counts_copies=False, accepts_any_removal_order=True, max_dp_ranks=4,
    validates_events=False,        # trusts its publishers: no malformed events sent
    tolerates_redelivery=False,    # a redelivered remove would KeyError: declared as not tolerated
    reports_sizes=True, offers_dump=True, reports_resident=True,
)


# ------------------------------------------------------------------------------------------------
class _Node:
    __slots__ = ("edge", "parent", "children", "tenants", "tenant_children", "end")

    def __init__(self, edge, parent: _Node | None) -> None:
        self.edge = edge                 # the key slice on the edge into this node
        self.parent = parent
        self.children: dict = {}         # first element -> child
        self.tenants: dict[str, float] = {}          # tenant -> last use
        self.tenant_children: dict[str, int] = {}    # tenant -> how many children it holds
        self.end = (parent.end if parent else 0) + len(edge)  # depth in elements


class TenantTree:
    """One radix tree for every tenant; each node records which tenants hold it and when."""

    def __init__(self) -> None:
        self.root = _Node("", None)
        self.present: set[str] = set()
        self.size: dict[str, int] = {}
        self.nodes: dict[str, set[_Node]] = {}       # tenant -> nodes it holds
        self.heap: dict[str, list] = {}              # tenant -> lazy heap of its leaves
        self.count = 1
        self.seq = itertools.count()
        self.lock = threading.RLock()

    def add_tenants(self, tenants: list[str], time_s: float) -> None:
        with self.lock:
            for t in tenants:
                if t not in self.present:
                    self.present.add(t)
                    self.size[t] = 0
                    self.nodes[t] = set()
                    self.heap[t] = []

    def _split(self, node: _Node, at: int) -> _Node:
        """Cut node's edge after ``at`` elements; return the new upper node."""
        parent = node.parent
        upper = _Node(node.edge[:at], parent)
        parent.children[upper.edge[0]] = upper
        upper.tenants = dict(node.tenants)
        upper.tenant_children = {t: 1 for t in node.tenants}
        for t in node.tenants:
            self.nodes[t].add(upper)
        node.edge = node.edge[at:]
        node.parent = upper
        upper.children[node.edge[0]] = node
        self.count += 1
        return upper

    def _hold(self, node: _Node, tenant: str, time_s: float) -> None:
        if tenant not in node.tenants:
            self.size[tenant] += len(node.edge)
            self.nodes[tenant].add(node)
            node.parent.tenant_children[tenant] = node.parent.tenant_children.get(tenant, 0) + 1
        node.tenants[tenant] = time_s

    def insert(self, key, tenant: str, time_s: float) -> None:
        with self.lock:
            node, i = self.root, 0
            while i < len(key):
                child = node.children.get(key[i])
                if child is None:
                    child = _Node(key[i:], node)
                    node.children[key[i]] = child
                    self.count += 1
                else:
                    n = 0
                    while n < len(child.edge) and i + n < len(key) and child.edge[n] == key[i + n]:
                        n += 1
                    if n < len(child.edge):
                        child = self._split(child, n)
                self._hold(child, tenant, time_s)
                i += len(child.edge)
                node = child
            if node is not self.root and not node.tenant_children.get(tenant):
                heapq.heappush(self.heap[tenant], (time_s, -node.end, next(self.seq), node))

    def match(self, key, available: frozenset[str]) -> tuple[int, frozenset[str]]:
        with self.lock:
            node, i, best = self.root, 0, frozenset()
            while i < len(key):
                child = node.children.get(key[i])
                if child is None:
                    break
                here = frozenset(t for t in child.tenants if t in available)
                if not here:
                    break
                n = 0
                while n < len(child.edge) and i + n < len(key) and child.edge[n] == key[i + n]:
                    n += 1
                i, best = i + n, here
                if n < len(child.edge):
                    break
                node = child
            return i, best

    def _release(self, node: _Node, tenant: str) -> None:
        """Tenant no longer holds node (a node none of its children it holds)."""
        del node.tenants[tenant]
        node.tenant_children.pop(tenant, None)
        self.nodes[tenant].discard(node)
        self.size[tenant] -= len(node.edge)
        parent = node.parent
        parent.tenant_children[tenant] -= 1
        if not parent.tenant_children[tenant]:
            del parent.tenant_children[tenant]
            if parent is not self.root and tenant in parent.tenants and tenant in self.heap:
                heapq.heappush(self.heap[tenant], (parent.tenants[tenant], -parent.end, next(self.seq), parent))
        if not node.tenants:
            del parent.children[node.edge[0]]
            self.count -= 1

    def evict(self, tenant: str, amount: int) -> int:
        with self.lock:
            removed, heap = 0, self.heap.get(tenant, [])
            while removed < amount and heap:
                time_s, neg_end, _, node = heapq.heappop(heap)
                # lazy heap: skip entries made stale by a later insert, a split or a release
                if (node.tenants.get(tenant) != time_s or node.end != -neg_end
                        or node.tenant_children.get(tenant)):
                    continue
                removed += len(node.edge)
                self._release(node, tenant)
            return removed

    def remove_tenants(self, tenants: list[str]) -> None:
        with self.lock:
            for t in tenants:
                if t not in self.present:
                    continue
                for node in sorted(self.nodes[t], key=lambda n: -n.end):
                    self._release(node, t)
                self.present.discard(t)
                del self.size[t], self.nodes[t], self.heap[t]

    def sizes(self) -> dict[str, int]:
        with self.lock:
            return dict(self.size)

    def node_count(self) -> int:
        with self.lock:
            return self.count


def make_tree() -> TenantTree:
    return TenantTree()


make_tree.capabilities = TenantTreeCapabilities(
    key_kind="text", match_granularity=1, match_refreshes_recency=False, thread_safe=True,
    supports_removal=True, supports_eviction=True, reports_sizes=True, reports_nodes=True,
)
