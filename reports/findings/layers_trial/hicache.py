"""A two-tier radix KV cache: namespaced, priority-ordered, write-through or write-back, with the
engine's request methods (a HiCache-like prefix cache, written for the layers trial).

Compressed edges (a node is a run of whole pages), split where a match or an insert ends inside an
edge. A node is on device (``device`` slots), on host (``host`` slots, a completed copy), or both;
at most one transfer is in flight on a node (``xfer``). Each namespace has its own root; the two
pools and one eviction order are shared.

A cache built with ``bugs={...}`` has the planted bugs named there (``mybugs.py``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np


class Node:
    __slots__ = ("key", "parent", "children", "ns", "device", "host", "pending_host", "xfer", "demote",
                 "removed", "lock", "last_use", "created", "hits", "priority")

    def __init__(self, key: tuple[int, ...], parent: Node | None, ns: Any, now: int = 0) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}
        self.ns = ns
        self.device: np.ndarray | None = None
        self.host: np.ndarray | None = None
        self.pending_host: np.ndarray | None = None  # host slots of a write in flight
        self.xfer: Any = None                         # the transfer in flight on this node
        self.demote = False                           # write-back: leave the device when the write lands
        self.removed = False                          # quarantined while a transfer was in flight
        self.lock = 0
        self.last_use = now
        self.created = now
        self.hits = 1
        self.priority = 0

    def __repr__(self) -> str:
        return f"Node({list(self.key)}, ns={self.ns!r}, dev={self.device is not None}, host={self.host is not None})"


class HiCache:
    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 policy: str = "priority", bugs: frozenset[str] = frozenset()) -> None:
        self.allocator, self.host_pool, self.controller = allocator, host_pool, controller
        self.page_size = page_size
        self.write_policy = write_policy
        self.policy = policy
        self.bugs = bugs
        self.roots: dict[Any, Node] = {}
        self.clock = 0
        self.clocks: dict[Any, int] = {}
        self.inflight: dict[int, tuple[str, list[Node]]] = {}
        self.seq = itertools.count()

    # ---- helpers -------------------------------------------------------------------------------
    def _root(self, ns: Any) -> Node:
        if ns not in self.roots:
            self.roots[ns] = Node((), None, ns)
        return self.roots[ns]

    def _key(self, node: Node) -> tuple:
        if self.policy == "lru":
            return (node.last_use,)
        return (node.priority, node.last_use)

    def _host_key(self, node: Node) -> tuple:
        if "host_lru_only" in self.bugs:
            return (node.last_use,)
        return self._key(node)

    def _tick(self, ns: Any = None) -> int:
        if "per_ns_clock" in self.bugs:  # BUG: each tenant counts its own uses
            self.clocks[ns] = self.clocks.get(ns, 0) + 1
            return self.clocks[ns]
        self.clock += 1
        return self.clock

    def _pages(self, tokens: Any) -> tuple[int, ...]:
        t = tuple(int(x) for x in tokens)
        return t[: len(t) // self.page_size * self.page_size]

    def _split(self, node: Node, k: int) -> Node:
        """Cut ``node``'s edge after ``k`` tokens; the new parent takes the first ``k`` and the node
        (and every handle to it) keeps the rest."""
        parent = node.parent
        assert parent is not None
        top = Node(node.key[:k], parent, node.ns)
        top.last_use, top.created, top.hits, top.priority = node.last_use, node.created, node.hits, node.priority
        top.lock, top.xfer = node.lock, node.xfer
        if node.device is not None:
            top.device, node.device = node.device[:k], node.device[k:]
        if node.host is not None:
            top.host, node.host = node.host[:k], node.host[k:]
        if node.pending_host is not None:
            top.pending_host, node.pending_host = node.pending_host[:k], node.pending_host[k:]
        if node.xfer is not None:
            self.inflight[node.xfer.number][1].append(top)
        parent.children[node.key[: self.page_size]] = top
        node.key = node.key[k:]
        node.parent = top
        top.children[node.key[: self.page_size]] = node
        return top

    def _walk(self, root: Node, pages: tuple[int, ...], now: int, split_end: bool = True) -> list[Node]:
        """The nodes covering the longest cached prefix of ``pages`` (split where it ends mid-edge)."""
        path, node, i, ps = [], root, 0, self.page_size
        while i < len(pages):
            child = node.children.get(pages[i: i + ps])
            if child is None:
                break
            n = 0
            while n < len(child.key) and i + n < len(pages) and child.key[n: n + ps] == pages[i + n: i + n + ps]:
                n += ps
            if n < len(child.key):
                if not split_end:
                    break
                child = self._split(child, n)
            path.append(child)
            i += n
            node = child
        return path

    @staticmethod
    def _has_device_child(node: Node) -> bool:
        return any(c.device is not None for c in node.children.values())

    # ---- lookups -------------------------------------------------------------------------------
    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> Any:
        from radixcheck import TierMatch

        now = self._tick(namespace)
        root = self._root(namespace)
        pages = self._pages(tokens)
        path = self._walk(root, pages, now)
        dev, host = [], []
        for node in path:
            node.last_use = now
            if node.device is not None and not host:
                dev.append(node)
            elif node.host is not None and node.device is None:
                host.append(node)
            else:
                break
        if "host_falls_back_default_ns" in self.bugs and not host and namespace is not None:
            host = self._shared_host_part(pages, sum(len(n.key) for n in dev))  # BUG: host tier shared by tokens
        values = np.concatenate([n.device for n in dev]) if dev else np.zeros(0, dtype=np.int64)
        dhandle = dev[-1] if dev else root
        return TierMatch(values, dhandle, sum(len(n.key) for n in host), host[-1] if host else dhandle)

    def _shared_host_part(self, pages: tuple[int, ...], depth: int) -> list[Node]:
        d, out = 0, []
        for n in self._walk(self._root(None), pages, self.clock, split_end=False):
            if d >= depth:
                if d == depth and not out and not (n.device is None and n.host is not None):
                    return []
                if n.device is None and n.host is not None:
                    out.append(n)
                else:
                    break
            d += len(n.key)
        return out if out and self._depth(out[0]) - len(out[0].key) == depth else []

    @staticmethod
    def _depth(node: Node) -> int:
        d = 0
        while node.parent is not None:
            d += len(node.key)
            node = node.parent
        return d

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0) -> int:
        now = self._tick(namespace)
        pages = self._pages(tokens)
        values = np.asarray(values, dtype=np.int64)
        root = self._root(namespace)
        path = self._walk(root, pages, now)
        prefix_len, i, on_device = 0, 0, True
        for node in path:
            node.last_use = now
            node.hits += 1
            if not (node.device is None and "revive_keeps_old_priority" in self.bugs):  # BUG: a revived page keeps its old priority
                node.priority = max(node.priority, priority)
            if node.device is None:  # host only: it takes the caller's new slots
                on_device = False
                node.device = values[i: i + len(node.key)].copy()
            elif on_device:
                prefix_len += len(node.key)
            i += len(node.key)
        parent = path[-1] if path else root
        if i < len(pages):
            new = Node(pages[i:], parent, root.ns, now)
            new.priority = priority
            new.device = values[i: len(pages)].copy()
            parent.children[new.key[: self.page_size]] = new
            path.append(new)
        if self.write_policy == "write_through":
            self._backup_chain(path)
        return prefix_len

    # ---- locks ---------------------------------------------------------------------------------
    def inc_lock_ref(self, handle: Node) -> None:
        while handle.parent is not None:
            handle.lock += 1
            handle = handle.parent

    def dec_lock_ref(self, handle: Node) -> None:
        while handle.parent is not None:
            handle.lock -= 1
            handle = handle.parent

    # ---- transfers -----------------------------------------------------------------------------
    def _write(self, node: Node) -> bool:
        t = self.controller.write(node.device)
        if t is None:
            self.evict_host(len(node.key))
            t = self.controller.write(node.device)
        if t is None:
            return False
        node.xfer, node.pending_host = t, t.host_slots
        self.inflight[t.number] = ("write", [node])
        return True

    def _backup_chain(self, path: list[Node]) -> bool:
        """Back up every page of ``path`` (root first) that has no host copy yet; stop at a failure."""
        for node in path:
            if node.host is not None or node.xfer is not None:
                continue
            if node.device is None or not self._write(node):
                return False
        return True

    def transfer_done(self, transfer: Any) -> None:
        kind, nodes = self.inflight.pop(transfer.number)
        for node in nodes:
            node.xfer = None
            if kind == "write":
                node.host, node.pending_host = node.pending_host, None
            if node.removed:
                self._free_node(node)
                continue
            if kind == "write" and node.demote:
                node.demote = False
                if (node.lock == 0 or "writeback_ignores_lock" in self.bugs) and not self._has_device_child(node):
                    self.allocator.free(node.device)
                    node.device = None

    def load_back(self, host_handle: Node) -> tuple[np.ndarray, Node]:
        path = []
        node = host_handle
        while node.parent is not None:
            path.append(node)
            node = node.parent
        path.reverse()
        root = node
        for n in path:  # hold the path while a nested eviction makes room
            n.lock += 1
        try:
            for n in path:
                if n.device is not None:
                    continue
                t = self.controller.load(n.host)
                if t is None:
                    self.evict(len(n.key))
                    t = self.controller.load(n.host)
                if t is None:
                    break
                n.device, n.xfer = t.device_slots, t
                if "load_resets_priority" in self.bugs:  # BUG: a loaded page starts afresh
                    n.priority = 0
                self.inflight[t.number] = ("load", [n])
        finally:
            for n in path:
                n.lock -= 1
        dev = [n for n in itertools.takewhile(lambda n: n.device is not None, path)]
        values = np.concatenate([n.device for n in dev]) if dev else np.zeros(0, dtype=np.int64)
        return values, (dev[-1] if dev else root)

    # ---- eviction ------------------------------------------------------------------------------
    def _all_nodes(self) -> list[Node]:
        out, stack = [], list(self.roots.values())
        while stack:
            n = stack.pop()
            if n.parent is not None:
                out.append(n)
            stack.extend(n.children.values())
        return out

    def _device_candidate(self, n: Node) -> bool:
        return (n.parent is not None and n.device is not None and n.xfer is None and n.lock == 0
                and not self._has_device_child(n))

    def _host_candidate(self, n: Node) -> bool:
        return (n.parent is not None and n.device is None and n.host is not None and n.xfer is None
                and n.lock == 0 and not n.children)

    def _unlink(self, node: Node) -> None:
        parent = node.parent
        if parent is not None and parent.children.get(node.key[: self.page_size]) is node:
            del parent.children[node.key[: self.page_size]]

    def evict(self, num_tokens: int) -> int:
        heap = [(self._key(n), next(self.seq), n) for n in self._all_nodes() if self._device_candidate(n)]
        heapq.heapify(heap)
        freed = counted = 0
        while counted < num_tokens and heap:
            _, _, node = heapq.heappop(heap)
            if not self._device_candidate(node):
                continue
            size = len(node.key)
            if node.host is not None:             # backed up: demote to host
                self.allocator.free(node.device)
                node.device = None
                freed += size
            elif self.write_policy == "write_back" and self._backup_chain(self._path(node)):
                node.demote = True                # freed when its write lands
            else:                                 # no host copy: dropped
                self.allocator.free(node.device)
                node.device = None
                self._unlink(node)
                freed += size
            counted += size
            parent = node.parent
            if parent is not None and self._device_candidate(parent):
                heapq.heappush(heap, (self._key(parent), next(self.seq), parent))
        return freed

    def _path(self, node: Node) -> list[Node]:
        path = []
        while node.parent is not None:
            path.append(node)
            node = node.parent
        return path[::-1]

    def evict_host(self, num_tokens: int) -> int:
        heap = [(self._host_key(n), next(self.seq), n) for n in self._all_nodes() if self._host_candidate(n)]
        heapq.heapify(heap)
        freed = 0
        while freed < num_tokens and heap:
            _, _, node = heapq.heappop(heap)
            if not self._host_candidate(node):
                continue
            self.host_pool.free(node.host)
            node.host = None
            self._unlink(node)
            freed += len(node.key)
            parent = node.parent
            if parent is not None and self._host_candidate(parent):
                heapq.heappush(heap, (self._host_key(parent), next(self.seq), parent))
        return freed

    def _free_node(self, node: Node) -> None:
        if node.device is not None:
            self.allocator.free(node.device)
            node.device = None
        if node.host is not None:
            self.host_pool.free(node.host)
            node.host = None

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        ps = self.page_size
        tokens = tuple(int(t) for t in tokens)
        cut = (len(tokens) - 1) // ps * ps
        head, rest = tokens[:cut], tokens[cut: cut + ps]  # the cut page may be partial: every page it starts goes
        parent, depth = self._root(namespace), 0
        for node in self._walk(parent, head, self.clock, split_end=False):
            parent, depth = node, depth + len(node.key)
        if depth < cut:  # the cut falls inside an edge: split there
            child = parent.children.get(head[depth: depth + ps])
            if child is None or child.key[: cut - depth] != head[depth:cut]:
                return 0
            parent = self._split(child, cut - depth)
        tops = [c for c in parent.children.values() if c.key[: len(rest)] == rest]
        return sum(self._quarantine(top, namespace) for top in tops)

    def _quarantine(self, top: Node, namespace: Any) -> int:
        pages = self._pages(self._path_tokens(top))
        cut = len(pages) - len(top.key)
        if "quarantine_purges_host_twins" in self.bugs:  # BUG: host copies are purged by tokens, every tenant
            for other in list(self.roots.values()):
                if other is not self._root(namespace):
                    self._purge_host(other, pages, cut)
        self._unlink(top)
        removed, stack = 0, [top]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            removed += len(n.key)
            if n.xfer is not None:
                n.removed = True
            else:
                self._free_node(n)
        return removed

    def _path_tokens(self, node: Node) -> tuple[int, ...]:
        return tuple(t for n in self._path(node) for t in n.key)

    def _purge_host(self, root: Node, pages: tuple[int, ...], cut: int) -> None:
        d = 0
        for n in self._walk(root, pages, self.clock, split_end=False):
            d += len(n.key)
            if d > cut and self._host_candidate(n):
                self.host_pool.free(n.host)
                n.host = None
                self._unlink(n)

    def device_size(self) -> int:
        return sum(len(n.key) for n in self._all_nodes() if n.device is not None)

    def host_size(self) -> int:
        return sum(len(n.key) for n in self._all_nodes() if n.host is not None)

    # ---- the engine's request methods --------------------------------------------------------
    def match_req(self, req: Any) -> None:
        m = self.match_prefix(req.tokens, namespace=req.namespace, priority=req.priority)
        req.slots = np.asarray(m.device_values, dtype=np.int64).copy()
        req.filled = req.protected = len(req.slots)
        req.handle = m.device_handle
        req.host_length, req.host_handle = m.host_length, m.host_handle

    def lock_req(self, req: Any) -> None:
        if req.host_length > 0:
            host_handle = req.host_handle
            if "reload_default_ns" in self.bugs:  # BUG: re-match to refresh the host handle, namespace forgotten
                m = self.match_prefix(req.tokens, priority=req.priority)
                if m.host_length:
                    host_handle = m.host_handle
            values, handle = self.load_back(host_handle)
            req.slots = np.asarray(values, dtype=np.int64).copy()
            if "lock_match_handle" not in self.bugs:  # BUG: locks the match's device node, not the loaded path
                req.handle = handle
            req.filled = req.protected = len(req.slots)
        self.inc_lock_ref(req.handle)
        req.host_length = 0

    def cache_unfinished_req(self, req: Any) -> None:
        aligned = req.filled // self.page_size * self.page_size
        row = req.slots[: req.filled]
        prio = 0 if "publish_drops_priority" in self.bugs else req.priority  # BUG: a chunk is published at priority 0
        prefix_len = self.insert(req.tokens[: req.filled], row, namespace=req.namespace, priority=prio)
        if prefix_len > req.protected:
            self.allocator.free(row[req.protected: prefix_len])
        m = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        self.inc_lock_ref(m.device_handle)
        self.dec_lock_ref(req.handle)
        req.slots = np.concatenate([np.asarray(m.device_values, dtype=np.int64), req.slots[aligned:]])
        req.protected = aligned
        req.handle = m.device_handle

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        row = req.slots[: req.filled]
        if insert:
            aligned = req.filled // self.page_size * self.page_size
            prefix_len = self.insert(req.tokens[: req.filled], row, namespace=req.namespace, priority=req.priority)
            dup = row[req.protected: prefix_len] if prefix_len > req.protected else row[:0]
            tail = row[aligned:]
            if len(dup) or len(tail):
                self.allocator.free(np.concatenate([dup, tail]))
        elif req.filled > req.protected:
            self.allocator.free(row[req.protected:])
        self.dec_lock_ref(req.handle)


def make_cache(policy: str = "priority", bugs: frozenset[str] = frozenset()) -> Callable[..., HiCache]:
    def factory(allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str) -> HiCache:
        return HiCache(allocator, host_pool, controller, page_size, write_policy, policy, bugs)
    return factory
