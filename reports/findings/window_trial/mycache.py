"""A home-grown radix KV cache with a host tier and a sliding-window second pool.

One node per page (no edge compression), one root per namespace, one LRU clock for all.
Each page keeps: device KV slots (or None), a completed host copy (or None), the window
value of each of its tokens on device and in its host copy (-1 = tombstoned), at most one
pending transfer, a lock count and its last use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radixcheck import SlidingWindow, TierCapabilities, TierMatch

WINDOW = 4
NONE = -1


class Node:
    __slots__ = ("key", "parent", "children", "device", "host", "win_dev", "win_host", "xfer", "evicting",
                 "removed", "lock", "last_use", "depth", "owner")

    def __init__(self, key: tuple, parent: Node | None, depth: int) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[tuple, Node] = {}
        self.device: np.ndarray | None = None     # device slots (also while a load fills them)
        self.host: np.ndarray | None = None       # completed host copy
        self.win_dev: np.ndarray | None = None    # window values on device
        self.win_host: np.ndarray | None = None   # window values in the host copy
        self.xfer: Any = None                     # the one pending transfer on this page
        self.evicting = False                     # a write-back started by evict()
        self.removed = False                      # quarantined while a transfer was pending
        self.lock = 0
        self.last_use = 0
        self.depth = depth                        # tokens from the root to this page's end
        self.owner: Any = None

    def path(self) -> list[Node]:
        nodes, n = [], self
        while n.parent is not None:
            nodes.append(n)
            n = n.parent
        return nodes[::-1]


class MyWindowTierCache:
    def __init__(self, allocator, host_pool, controller, page_size: int, write_policy: str,
                 window: int = WINDOW) -> None:
        self.allocator = allocator
        self.host_pool = host_pool
        self.controller = controller
        self.page_size = page_size
        self.write_policy = write_policy
        self.window = window
        self.roots: dict[Any, Node] = {}
        self.clock = 0
        self.pending: dict[int, Node] = {}    # id(transfer) -> node

    # -- helpers -------------------------------------------------------------------------
    def _root(self, namespace: Any) -> Node:
        if namespace not in self.roots:
            self.roots[namespace] = Node((), None, 0)
            self.roots[namespace].owner = self
        return self.roots[namespace]

    def _pages(self, tokens) -> list[tuple]:
        toks = [int(t) for t in tokens]
        ps = self.page_size
        return [tuple(toks[i:i + ps]) for i in range(0, len(toks) // ps * ps, ps)]

    def _walk(self, tokens, namespace: Any) -> list[Node]:
        node, out = self._root(namespace), []
        for key in self._pages(tokens):
            node = node.children.get(key)
            if node is None:
                break
            out.append(node)
        return out

    def _nodes(self):
        stack = list(self.roots.values())
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            if n.parent is not None:
                yield n

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _resumable(self, path: list[Node], live) -> int:
        """Index (in pages) of the longest prefix of ``path`` whose last min(W, L) tokens are live."""
        best, run = 0, 0        # run: live tokens counted back from the current end
        for i, node in enumerate(path):
            for j in range(self.page_size):
                run = run + 1 if live(node, j) else 0
            if run >= min(self.window, (i + 1) * self.page_size):
                best = i + 1
        return best

    @staticmethod
    def _live_dev(node: Node, j: int) -> bool:
        return node.device is not None and node.win_dev is not None and node.win_dev[j] != NONE

    @staticmethod
    def _live_any(node: Node, j: int) -> bool:
        if node.device is not None and node.win_dev is not None and node.win_dev[j] != NONE:
            return True
        win = MyWindowTierCache._host_win_of(node)
        return win is not None and win[j] != NONE

    @staticmethod
    def _host_win_of(node: Node) -> np.ndarray | None:
        return node.owner._host_win(node) if node.host is not None else None

    def _handle(self, path: list[Node], n: int, namespace: Any) -> Node:
        return path[n - 1] if n else self._root(namespace)

    def _device_values(self, path: list[Node]) -> np.ndarray:
        parts = [n.device for n in path]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)

    # -- the contract --------------------------------------------------------------------
    def match_prefix(self, tokens, namespace: Any = None) -> TierMatch:
        path = []
        for node in self._walk(tokens, namespace):
            if node.device is None and node.host is None:
                break
            path.append(node)
        on_device = 0
        while on_device < len(path) and path[on_device].device is not None:
            on_device += 1
        dev = self._resumable(path[:on_device], self._live_dev)
        full = max(self._resumable(path, self._live_any), dev)
        now = self._tick()
        for node in path[:full]:
            node.last_use = now
        dev_handle = self._handle(path, dev, namespace)
        host_len = (full - dev) * self.page_size
        return TierMatch(self._device_values(path[:dev]), dev_handle, host_len,
                         self._handle(path, full, namespace) if host_len else dev_handle)

    def load_back(self, host_handle: Node) -> tuple[np.ndarray, Node]:
        if host_handle.parent is None:
            return np.empty(0, dtype=np.int64), host_handle
        path = host_handle.path()
        end, failed, loaded = 0, False, 0
        for node in path:
            if node.device is None:
                t = self.controller.load(node.host)
                if t is None:
                    failed = True
                    break
                node.device = np.asarray(t.device_slots, dtype=np.int64).copy()
                node.win_dev = np.full(self.page_size, NONE, dtype=np.int64)
                node.xfer = t
                self.pending[id(t)] = node
                loaded += 1
            end += 1
        if failed and not loaded:
            # nothing moved: resume where the window is live on device
            dev = self._resumable(path[:end], self._live_dev)
            return self._device_values(path[:dev]), self._handle(path, dev, self._ns(host_handle))
        self._revive(path[:end])
        return self._device_values(path[:end]), self._handle(path, end, self._ns(host_handle))

    def _revive(self, path: list[Node]) -> None:
        """Revive each device tombstone on ``path`` from its own page's host copy."""
        for node in path:
            win = self._host_win(node) if node.host is not None else None
            if win is not None:
                dead = node.win_dev == NONE
                node.win_dev[dead] = win[dead]

    def _host_win(self, node: Node) -> np.ndarray | None:
        return node.win_host

    def _write_done(self, node: Node, transfer) -> None:
        node.host = np.asarray(transfer.host_slots, dtype=np.int64).copy()
        node.win_host = node.win_dev.copy()

    def _ns(self, node: Node) -> Any:
        while node.parent is not None:
            node = node.parent
        for ns, root in self.roots.items():
            if root is node:
                return ns
        return None

    def insert(self, tokens, values, window=None, namespace: Any = None) -> int:
        keys = self._pages(tokens)
        vals = np.asarray(values, dtype=np.int64)
        win = np.asarray(window, dtype=np.int64) if window is not None else np.full(len(vals), NONE)
        ps, now = self.page_size, self._tick()
        node, prefix, counting = self._root(namespace), 0, True
        for i, key in enumerate(keys):
            child = node.children.get(key)
            sl = slice(i * ps, (i + 1) * ps)
            if child is None:
                child = Node(key, node, (i + 1) * ps)
                child.owner = self
                node.children[key] = child
            if child.device is None:              # new, or on host only: take the caller's KV
                counting = False
                child.device = vals[sl].copy()
                child.win_dev = win[sl].copy()
            elif counting:
                prefix += ps
            child.last_use = now
            node = child
        if self.write_policy == "write_through" and keys:
            self._backup_chain(node.path())
        return prefix

    def _backup_chain(self, path: list[Node]) -> bool:
        """Back up every page of ``path`` without a host copy, top-down; False once one fails."""
        for node in path:
            if node.host is not None or (node.xfer is not None and node.xfer.kind == "write"):
                continue
            t = self.controller.write(node.device)
            if t is None:
                return False
            node.xfer = t
            self.pending[id(t)] = node
        return True

    def inc_lock_ref(self, handle: Node) -> None:
        while handle.parent is not None:
            handle.lock += 1
            handle = handle.parent

    def dec_lock_ref(self, handle: Node) -> None:
        while handle.parent is not None:
            handle.lock -= 1
            handle = handle.parent

    def _device_leaves(self) -> list[Node]:
        return [n for n in self._nodes() if n.device is not None and n.lock == 0 and n.xfer is None
                and not any(c.device is not None for c in n.children.values())]

    def evict(self, num_tokens: int) -> int:
        freed = counted = 0
        while counted < num_tokens:
            leaves = self._device_leaves()
            if not leaves:
                break
            leaf = min(leaves, key=lambda n: n.last_use)
            if leaf.host is not None:
                self.allocator.free(leaf.device)
                leaf.device = leaf.win_dev = None
                freed += self.page_size
                counted += self.page_size
            elif self.write_policy == "write_back" and self._backup_chain(leaf.path()):
                leaf.evicting = True
                counted += self.page_size
            else:                             # no host copy can be made: drop it and what hangs below
                self._drop(leaf)
                freed += self.page_size
                counted += self.page_size
        return freed

    def _drop(self, node: Node) -> None:
        del node.parent.children[node.key]
        stack = [node]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            if n.device is not None:
                self.allocator.free(n.device)
            if n.host is not None:
                self.host_pool.free(n.host)
            n.device = n.host = None

    def evict_host(self, num_tokens: int) -> int:
        freed = 0
        while freed < num_tokens:
            leaves = [n for n in self._nodes() if n.host is not None and n.device is None and not n.children
                      and n.lock == 0 and n.xfer is None]
            if not leaves:
                break
            leaf = min(leaves, key=lambda n: n.last_use)
            self.host_pool.free(leaf.host)
            leaf.host = None
            del leaf.parent.children[leaf.key]
            freed += self.page_size
        return freed

    def evict_prefix(self, tokens, namespace: Any = None) -> int:
        toks = [int(t) for t in tokens]
        cut = (len(toks) - 1) // self.page_size
        path = self._walk(toks[:cut * self.page_size], namespace)
        if len(path) < cut:
            return 0
        parent = path[-1] if path else self._root(namespace)
        head = tuple(toks[cut * self.page_size:])
        removed = 0
        for key in [k for k in parent.children if k[:len(head)] == head]:
            stack = [parent.children.pop(key)]
            while stack:
                n = stack.pop()
                stack.extend(n.children.values())
                removed += self.page_size
                if n.xfer is not None:
                    n.removed = True          # its slots go when the transfer lands
                    continue
                if n.device is not None:
                    self.allocator.free(n.device)
                if n.host is not None:
                    self.host_pool.free(n.host)
                n.device = n.host = None
        return removed

    def transfer_done(self, transfer) -> None:
        node = self.pending.pop(id(transfer))
        node.xfer = None
        if node.removed:
            if node.device is not None:
                self.allocator.free(node.device)
            host = node.host if node.host is not None else (transfer.host_slots if transfer.kind == "write" else None)
            if host is not None:
                self.host_pool.free(host)
            node.device = node.host = None
            return
        if transfer.kind == "write":
            self._write_done(node, transfer)
            if node.evicting:
                node.evicting = False
                if node.lock == 0 and not any(c.device is not None for c in node.children.values()):
                    self.allocator.free(node.device)
                    node.device = node.win_dev = None

    def windows(self, handle: Node) -> np.ndarray:
        parts = [n.win_dev if n.win_dev is not None else np.full(self.page_size, NONE) for n in handle.path()]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)

    def device_size(self) -> int:
        return sum(self.page_size for n in self._nodes() if n.device is not None and not n.removed)

    def host_size(self) -> int:
        return sum(self.page_size for n in self._nodes() if n.host is not None and not n.removed)


def make(allocator, host_pool, controller, page_size, write_policy):
    return MyWindowTierCache(allocator, host_pool, controller, page_size, write_policy)


make.tier_capabilities = TierCapabilities(
    write_policies=("write_through", "write_back"),
    page_sizes=(1, 2),
    namespaces=True,
    lifecycle="tree",
    second_pool=SlidingWindow(window=WINDOW),
)
