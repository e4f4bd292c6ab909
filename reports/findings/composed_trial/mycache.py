"""A home-grown two-tier radix KV cache: one node per page, a root per namespace (LoRA/extra_key),
eviction by priority then hits then recency, a host tier (write-through or write-back) fed by the
caller's transfer controller. Written from radixcheck's README, docs and contract modules only.

BUGS: a set of names of planted bugs (one idea each), switched on by the factories in
mycache_adapter.py; empty = the correct cache.
"""

from __future__ import annotations

import heapq
from collections import namedtuple
from typing import Any

import numpy as np

Stats = namedtuple("Stats", "last_use created hits priority depth")


def policy_key(s: Any) -> tuple:
    """Priority first (lowest goes first), then fewest hits, then least recently used."""
    return (s.priority, s.hits, s.last_use)


class Node:
    def __init__(self, parent: Node | None, key: tuple, ns: Any, clock: int, priority: int) -> None:
        self.parent = parent
        self.key = key
        self.ns = ns
        self.children: dict[tuple, Node] = {}
        self.depth = 0 if parent is None else parent.depth + len(key)
        self.device: np.ndarray | None = None   # device slots (being filled while `loading`)
        self.host: np.ndarray | None = None     # host slots of a completed copy
        self.writing: Any = None                # pending write transfer
        self.loading: Any = None                # pending load transfer
        self.evict_pending = False              # write-back started by evict: free device at completion
        self.dead = False                       # quarantined while a transfer was pending
        self.lock_ref = 0
        self.last_use = clock
        self.created = clock
        self.hits = 1
        self.priority = priority

    def stats(self) -> Stats:
        return Stats(self.last_use, self.created, self.hits, self.priority, self.depth)

    def has_device_child(self) -> bool:
        return any(c.device is not None for c in self.children.values())


class TierMatch:  # duck-typed like radixcheck's TierMatch: my project does not import the suite
    def __init__(self, device_values: np.ndarray, device_handle: Any, host_length: int, host_handle: Any) -> None:
        self.device_values = device_values
        self.device_handle = device_handle
        self.host_length = host_length
        self.host_handle = host_handle


class TwoTierCache:
    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 bugs: frozenset = frozenset()) -> None:
        self.allocator = allocator
        self.host_pool = host_pool
        self.controller = controller
        self.page_size = page_size
        self.write_policy = write_policy
        self.bugs = bugs
        self.roots: dict[Any, Node] = {}
        self.nodes: set[Node] = set()
        self.clock = 0
        self.pending: dict[Any, Node] = {}   # id(transfer) -> node
        self.tokens_of: dict[int, Any] = {}  # only for the planted bug pending_by_tokens
        self.load_locks: list[Node] = []     # only for the planted bug abort_keeps_load_lock

    # --- helpers -------------------------------------------------------------------------------
    def _root(self, ns: Any) -> Node:
        if ns not in self.roots:
            self.roots[ns] = Node(None, (), ns, 0, 0)
        return self.roots[ns]

    def _pages(self, tokens: Any) -> list[tuple]:
        toks = [int(t) for t in tokens]
        n = len(toks) // self.page_size * self.page_size
        return [tuple(toks[i:i + self.page_size]) for i in range(0, n, self.page_size)]

    def _path(self, node: Node) -> list[Node]:
        path = []
        while node.parent is not None:
            path.append(node)
            node = node.parent
        return path[::-1]

    def _backed(self, node: Node) -> bool:
        """The backup chain holds above `node`: its parent is the root, on host or being written."""
        p = node.parent
        return p.parent is None or p.host is not None or p.writing is not None

    def _write(self, node: Node) -> bool:
        t = self.controller.write(node.device)
        if t is None and self.write_policy == "write_back":
            # room for many write-backs at once: each evict_host call scans every node
            self.evict_host(max(len(node.device), 256))
            t = self.controller.write(node.device)
        if t is None:
            return False
        node.writing = t
        self.pending[self._pending_key(t, node)] = node
        return True

    def _pending_key(self, t: Any, node: Node) -> Any:
        if "pending_by_tokens" in self.bugs:   # BUG: the in-flight table is keyed by the page's tokens, not its namespace
            key = (t.kind, tuple(k for n in self._path(node) for k in n.key))
            self.tokens_of[id(t)] = key
            return key
        return id(t)

    def _remove_subtree(self, node: Node) -> int:
        """Unlink `node` and everything below it from both tiers; returns tokens unlinked."""
        removed = 0
        for child in list(node.children.values()):
            removed += self._remove_subtree(child)
        del node.parent.children[node.key]
        self.nodes.discard(node)
        removed += len(node.key)
        if node.writing is not None or node.loading is not None:
            node.dead = True          # its slots go at the transfer's completion
            return removed
        if node.device is not None:
            self.allocator.free(node.device)
        if node.host is not None:
            self.host_pool.free(node.host)
        return removed

    # --- the contract ----------------------------------------------------------------------------
    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> TierMatch:
        self.clock += 1
        node = root = self._root(namespace)
        values: list[np.ndarray] = []
        host_len, host_node = 0, None
        for page in self._pages(tokens):
            child = node.children.get(page)
            if child is None:
                break
            if host_node is None and child.device is not None:
                values.append(child.device)
            elif child.host is not None and child.device is None:
                host_node = child
                host_len += self.page_size
            else:
                break
            child.last_use = self.clock
            if "hits_on_match" in self.bugs:
                child.hits += 1
            node = child
        device_handle = node if host_node is None else self._device_end(node)
        vals = np.concatenate(values).astype(np.int64) if values else np.zeros(0, np.int64)
        return TierMatch(vals, device_handle if device_handle is not None else root, host_len,
                         host_node if host_node is not None else (device_handle or root))

    def _device_end(self, node: Node) -> Node:
        while node.parent is not None and node.device is None:
            node = node.parent
        return node

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, Any]:
        path = self._path(host_handle) if host_handle.parent is not None else []
        # a nested eviction (device, and host under write-back) must leave the path it loads alone
        self.inc_lock_ref(host_handle)
        try:
            self._load_path(path)
        finally:
            self.dec_lock_ref(host_handle)
        loaded = [n for n in path if n.loading is not None]
        if "abort_keeps_load_lock" in self.bugs and loaded:
            self.inc_lock_ref(loaded[-1])        # a load lock, given back by the request's unlock
            self.load_locks.append(loaded[-1])
        values: list[np.ndarray] = []
        last = host_handle
        while last.parent is not None and last.device is None:
            last = last.parent
        for node in (self._path(last) if last.parent is not None else []):
            values.append(node.device)
        vals = np.concatenate(values).astype(np.int64) if values else np.zeros(0, np.int64)
        return vals, last

    def _load_path(self, path: list[Node]) -> None:
        for node in path:
            if node.device is not None:
                continue
            src = node.host
            if "load_foreign_ns" in self.bugs:
                twin = self._twin(node)
                if twin is not None:
                    src = twin.host
            t = self.controller.load(src)
            if t is None:
                self.evict(len(src))
                t = self.controller.load(src)
            if t is None:
                break
            node.device = np.asarray(t.device_slots, dtype=np.int64).copy()
            node.loading = t
            self.pending[self._pending_key(t, node)] = node
            if "load_resets_hits" in self.bugs:
                node.hits = 1

    def _twin(self, node: Node) -> Node | None:
        """The same tokens under another namespace, host-only (used only by a planted bug)."""
        keys = [n.key for n in self._path(node)]
        for ns, root in self.roots.items():
            if ns == node.ns:
                continue
            cur = root
            for k in keys:
                cur = cur.children.get(k)
                if cur is None:
                    break
            if cur is not None and cur.host is not None and cur.device is None and cur.loading is None:
                return cur
        return None

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0) -> int:
        self.clock += 1
        vals = np.asarray(values, dtype=np.int64)
        node = self._root(namespace)
        prefix_len = 0
        leading = True
        inserted: list[Node] = []
        for i, page in enumerate(self._pages(tokens)):
            slots = vals[i * self.page_size:(i + 1) * self.page_size].copy()
            child = node.children.get(page)
            if child is None:
                child = Node(node, page, namespace, self.clock, priority)
                child.device = slots
                node.children[page] = child
                self.nodes.add(child)
            else:
                if child.device is not None and leading:
                    prefix_len += self.page_size
                elif child.device is None:
                    child.device = slots      # a host-only page takes the caller's KV: on both again
                child.hits += 1
                child.priority = max(child.priority, priority)
                child.last_use = self.clock
            leading = leading and prefix_len == (i + 1) * self.page_size
            inserted.append(child)
            node = child
        if self.write_policy == "write_through":
            for child in inserted:
                if child.device is None or child.host is not None or child.writing is not None:
                    continue
                if not self._backed(child) or not self._write(child):
                    break
        return prefix_len

    def inc_lock_ref(self, handle: Any) -> None:
        while handle.parent is not None:
            handle.lock_ref += 1
            handle = handle.parent

    def dec_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:
            if node.lock_ref <= 0:
                raise RuntimeError("unmatched unlock")
            node = node.parent
        path = self._path(handle) if handle.parent is not None else []
        for n in path:
            n.lock_ref -= 1
        if "abort_keeps_load_lock" in self.bugs:
            # BUG: the load lock goes with the request's unlock, once the loads landed; an abort
            # that comes before the load lands leaves it behind for good
            for held in list(self.load_locks):
                if held in path and all(n.loading is None for n in self._path(held)):
                    self.load_locks.remove(held)
                    for n in self._path(held):
                        n.lock_ref -= 1
        if "unlock_frees_pending_backup" in self.bugs:
            # BUG: a page nobody holds any more that only its own request used is given up: its
            # backup is cancelled by freeing the host slots the write is still filling
            for n in path:
                if n.lock_ref == 0 and n.writing is not None and not n.evict_pending and not n.children and n.hits == 1:
                    self.host_pool.free(n.writing.host_slots)
                    self.pending.pop(id(n.writing), None)
                    n.writing = None

    def _is_device_candidate(self, n: Node) -> bool:
        return (n.parent is not None and n.device is not None and n.loading is None and n.writing is None
                and not n.evict_pending and n.lock_ref == 0 and not n.has_device_child())

    def evict(self, num_tokens: int) -> int:
        # one scan, then a heap: no key changes during the call, and a leaf that goes can only make
        # its parent a new candidate
        heap = [(policy_key(n.stats()), id(n), n) for n in self.nodes if self._is_device_candidate(n)]
        heapq.heapify(heap)
        freed = counted = 0
        while counted < num_tokens and heap:
            leaf = heapq.heappop(heap)[2]
            if not self._is_device_candidate(leaf):
                continue
            parent = leaf.parent
            size = len(leaf.device)
            if leaf.host is not None:
                self.allocator.free(leaf.device)
                leaf.device = None
                freed += size
            elif self.write_policy == "write_back" and self._write_back_chain(leaf):
                leaf.evict_pending = True
            else:
                self.allocator.free(leaf.device)
                leaf.device = None
                freed += size
                for child in list(leaf.children.values()):
                    self._remove_subtree(child)
                del leaf.parent.children[leaf.key]
                self.nodes.discard(leaf)
            counted += size
            if self._is_device_candidate(parent):
                heapq.heappush(heap, (policy_key(parent.stats()), id(parent), parent))
        return freed

    def _write_back_chain(self, leaf: Node) -> bool:
        for node in self._path(leaf):
            if node.host is None and node.writing is None:
                if not self._write(node):
                    return False
        return True

    def _is_host_candidate(self, n: Node) -> bool:
        return (n.parent is not None and n.host is not None and n.device is None and n.loading is None
                and n.writing is None and not n.children and n.lock_ref == 0)

    def _host_key(self, n: Node) -> tuple:
        return (n.hits, n.last_use) if "host_ignores_priority" in self.bugs else policy_key(n.stats())

    def evict_host(self, num_tokens: int) -> int:
        heap = [(self._host_key(n), id(n), n) for n in self.nodes if self._is_host_candidate(n)]
        heapq.heapify(heap)
        freed = 0
        while freed < num_tokens and heap:
            leaf = heapq.heappop(heap)[2]
            if leaf not in self.nodes or not self._is_host_candidate(leaf):
                continue
            self.host_pool.free(leaf.host)
            freed += len(leaf.host)
            del leaf.parent.children[leaf.key]
            self.nodes.discard(leaf)
            if self._is_host_candidate(leaf.parent):
                heapq.heappush(heap, (self._host_key(leaf.parent), id(leaf.parent), leaf.parent))
        return freed

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        toks = [int(t) for t in tokens]
        cut = (len(toks) - 1) // self.page_size * self.page_size
        node = self._root(namespace)
        for page in self._pages(toks[:cut]):
            node = node.children.get(page)
            if node is None:
                return 0
        rest = tuple(toks[cut:])
        removed = 0
        for key, child in list(node.children.items()):
            if key[:len(rest)] == rest:
                removed += self._remove_subtree(child)
        return removed

    def transfer_done(self, transfer: Any) -> None:
        if "pending_by_tokens" in self.bugs:
            node = self.pending.pop(self.tokens_of.pop(id(transfer)), None)
            if node is None:
                return
        else:
            node = self.pending.pop(id(transfer))
        if transfer.kind == "write":
            node.writing = None
            node.host = np.asarray(transfer.host_slots, dtype=np.int64).copy()
            if node.dead:
                self._free_dead(node)
                return
            if node.evict_pending:
                node.evict_pending = False
                if node.lock_ref == 0 and not node.has_device_child():
                    self.allocator.free(node.device)
                    node.device = None
        else:
            node.loading = None
            if node.dead:
                self._free_dead(node)

    def _free_dead(self, node: Node) -> None:
        if node.writing is None and node.loading is None:
            if node.device is not None:
                self.allocator.free(node.device)
            if node.host is not None:
                self.host_pool.free(node.host)

    def device_size(self) -> int:
        return sum(len(n.device) for n in self.nodes if n.device is not None)

    def host_size(self) -> int:
        return sum(len(n.host) for n in self.nodes if n.host is not None)
