"""hybridcache: a home-grown radix KV cache shaped like SGLang's HiCache on a hybrid (Mamba) model.

Every part at once:
* one tree root per tenant (``namespace=``),
* eviction by request priority, then fewest hits, then least recently used (a lazy heap per tier),
* two tiers (device + host) under write-through and write-back (leaf first, as SGLang writes back),
* a second pool: one Mamba-like state per cached request end, which follows its page across tiers,
* the request lifecycle as the engine drives it (match, load-back, lock, publish, unlock),
* and it trusts its callers: no lock, handle or argument is checked.

One node holds one page. The suite owns both KV pools and the transfer controller.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from radixcheck import Policy, StatePool, TierCapabilities, TierMatch


def _key(s: Any) -> tuple[int, int, int]:
    return s.priority, s.hits, s.last_use


PRIORITY_LFU = Policy(_key, name="priority-then-lfu", takes_priority=True)


class Node:
    __slots__ = ("key", "parent", "children", "device", "host", "writing", "loading", "evicting", "lock",
                 "hits", "created", "last_use", "priority", "state", "dev_children", "removed", "version", "root")

    def __init__(self, key: tuple[int, ...], parent: Node | None, clock: int = 0) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}
        self.device: np.ndarray | None = None    # device slots (a pending load's included)
        self.host: np.ndarray | None = None      # host slots of a completed copy
        self.writing: Any = None                 # pending write transfer
        self.loading: Any = None                 # pending load transfer
        self.evicting = False                    # the pending write is a write-back started by evict
        self.lock = 0
        self.hits, self.created, self.last_use, self.priority = 1, clock, clock, 0
        self.state = -1
        self.dev_children = 0                    # children with a device copy
        self.removed = False
        self.version = 0
        self.root = parent is None


class HybridHiCache:
    """Device + host radix cache with tenants, a priority/LFU order and a Mamba state per page."""

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str) -> None:
        self.allocator, self.host_pool, self.controller = allocator, host_pool, controller
        self.page_size = page_size
        self.write_policy = write_policy
        self.roots: dict[Any, Node] = {}
        self.clock = 0
        self._dev_tokens = 0
        self._host_tokens = 0
        self._pending: dict[Any, list[Node]] = {}
        self._dev_heap: list[tuple[Any, int, int, Node]] = []
        self._host_heap: list[tuple[Any, int, int, Node]] = []
        self._seq = itertools.count()

    # ---- helpers -----------------------------------------------------------------------------
    def _root(self, namespace: Any) -> Node:
        root = self.roots.get(namespace)
        if root is None:
            root = self.roots[namespace] = Node((), None)
        return root

    def _pages(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        ps = self.page_size
        return [tuple(int(t) for t in tokens[i:i + ps]) for i in range(0, len(tokens) // ps * ps, ps)]

    def _order(self, node: Node) -> Any:
        return node.priority, node.hits, node.last_use

    def _push(self, node: Node) -> None:
        """Re-enter a node in its tier's heap: its key or its candidacy may have changed."""
        if node.root or node.removed:
            return
        node.version += 1
        entry = (self._order(node), next(self._seq), node.version, node)
        if node.device is not None:
            heapq.heappush(self._dev_heap, entry)
        elif node.host is not None:
            heapq.heappush(self._host_heap, entry)

    def _device_candidate(self, node: Node) -> bool:
        return (node.device is not None and not node.removed and node.lock == 0 and node.dev_children == 0
                and node.writing is None and node.loading is None)

    def _host_candidate(self, node: Node) -> bool:
        return (node.device is None and node.host is not None and not node.removed and not node.children
                and node.lock == 0)

    def _pop(self, heap: list, candidate: Any) -> Node | None:
        while heap:
            _, _, version, node = heapq.heappop(heap)
            if version == node.version and candidate(node):
                return node
        return None

    def _set_device(self, node: Node, slots: np.ndarray | None) -> None:
        had = node.device is not None
        node.device = slots
        has = slots is not None
        if had != has:
            self._dev_tokens += len(node.key) if has else -len(node.key)
            node.parent.dev_children += 1 if has else -1
            if not has and node.parent.dev_children == 0:
                self._push(node.parent)

    def _set_host(self, node: Node, slots: np.ndarray | None) -> None:
        if (node.host is not None) != (slots is not None):
            self._host_tokens += len(node.key) if slots is not None else -len(node.key)
        node.host = slots

    def _unlink(self, node: Node) -> None:
        """Take a node off the tree (its slots are the caller's business)."""
        parent = node.parent
        del parent.children[node.key]
        node.removed = True
        if not parent.children:
            self._push(parent)

    def _write(self, node: Node, write_back: bool) -> bool:
        transfer = self.controller.write(node.device)
        if transfer is None and write_back:              # make host room, as SGLang's write-back does
            self.evict_host(len(node.key))
            transfer = self.controller.write(node.device)
        if transfer is None:
            return False
        node.writing, node.evicting = transfer, write_back
        self._pending[transfer] = [node]
        return True

    def _drop(self, node: Node) -> int:
        """A device leaf without a host copy leaves both tiers, its host-only subtree along."""
        stack = list(node.children.values())
        while stack:
            below = stack.pop()
            stack.extend(below.children.values())
            self.host_pool.free(below.host)
            self._set_host(below, None)
            below.removed = True
        node.children.clear()
        self.allocator.free(node.device)
        self._set_device(node, None)
        self._unlink(node)
        return len(node.key)

    def _backup_path(self, path: list[Node]) -> None:
        """Write-through: back every page of the path up, top-down, until an allocation fails."""
        for node in path:
            if node.host is not None or node.writing is not None:
                continue
            parent = node.parent
            if not (parent.root or parent.host is not None or parent.writing is not None):
                return
            if not self._write(node, write_back=False):
                return

    def _demote(self, node: Node) -> None:
        """A backed-up device page leaves the device; its state stays with its host copy."""
        self.allocator.free(node.device)
        self._set_device(node, None)
        self._push(node)

    def _promote(self, node: Node, slots: np.ndarray) -> None:
        """A host-only page takes an inserting caller's device KV (it is on both tiers again)."""
        self._set_device(node, slots)

    def _loaded(self, node: Node) -> None:
        """A load-back's completion: the page's KV has arrived (its state never left the node)."""
        node.loading = None

    def _path(self, handle: Node) -> list[Node]:
        path = []
        while not handle.root:
            path.append(handle)
            handle = handle.parent
        return path[::-1]

    # ---- the contract --------------------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int], namespace: Any = None, priority: int = 0) -> TierMatch:
        self.clock += 1
        node = self._root(namespace)
        device, dev_node, host_len, host_node = [], node, 0, node
        for page in self._pages(tokens):
            child = node.children.get(page)
            if child is None:
                break
            if child.device is not None and host_len == 0:
                device.append(child.device)
                dev_node = host_node = child
            elif child.host is not None and child.device is None:
                host_len += len(page)
                host_node = child
            else:
                break
            child.last_use = self.clock
            self._push(child)
            node = child
        values = np.concatenate(device) if device else np.empty(0, dtype=np.int64)
        return TierMatch(values, dev_node, host_len, host_node)

    def load_back(self, host_handle: Node) -> tuple[np.ndarray, Node]:
        path = self._path(host_handle)
        on_host = [n for n in path if n.device is None]
        if on_host:
            host_slots = np.concatenate([n.host for n in on_host])
            transfer = self.controller.load(host_slots)
            if transfer is None:                       # make room, with the device part held
                self.inc_lock_ref(host_handle)        # the pages it loads, and their parents
                self.evict(len(host_slots))
                self.dec_lock_ref(host_handle)
                transfer = self.controller.load(host_slots)
            if transfer is None:
                path = path[:len(path) - len(on_host)]
            else:
                at = 0
                for node in on_host:
                    self._set_device(node, transfer.device_slots[at:at + len(node.key)])
                    node.loading = transfer
                    at += len(node.key)
                self._pending[transfer] = on_host
        values = np.concatenate([n.device for n in path]) if path else np.empty(0, dtype=np.int64)
        return values, (path[-1] if path else self._root_of(host_handle))

    def _root_of(self, node: Node) -> Node:
        while not node.root:
            node = node.parent
        return node

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Any = None, priority: int = 0,
               state: int | None = None) -> int:
        self.clock += 1
        node, prefix, at, path = self._root(namespace), 0, 0, []
        values = np.asarray(values)
        for page in self._pages(tokens):
            child = node.children.get(page)
            mine = np.array(values[at:at + len(page)], dtype=np.int64)
            if child is None:
                child = node.children[page] = Node(page, node, self.clock)
                self._set_device(child, mine)
                child.hits = 0
            elif child.device is not None:
                prefix += len(page)
            else:                                       # on host only: it takes the caller's KV
                self._promote(child, mine)
            child.hits += 1
            child.priority = max(child.priority, priority)
            child.last_use = self.clock
            self._push(child)
            path.append(child)
            node, at = child, at + len(page)
        if path and len(tokens) % self.page_size == 0 and state is not None:
            path[-1].state = state
        if self.write_policy == "write_through":
            self._backup_path(path)
        return prefix

    def states(self, handle: Node) -> list[int]:
        return [n.state for n in self._path(handle)]

    def inc_lock_ref(self, handle: Node) -> None:
        while not handle.root:
            handle.lock += 1
            handle = handle.parent

    def dec_lock_ref(self, handle: Node) -> None:
        while not handle.root:
            handle.lock -= 1
            if handle.lock == 0:
                self._push(handle)
            handle = handle.parent

    def evict(self, num_tokens: int) -> int:
        counted = freed = 0
        while counted < num_tokens:
            node = self._pop(self._dev_heap, self._device_candidate)
            if node is None:
                break
            size = len(node.key)
            counted += size
            if node.host is not None:                   # backed up: demote to host
                self._demote(node)
                freed += size
            elif self.write_policy == "write_back" and self._write(node, write_back=True):
                continue                                # freed at the write's completion
            else:
                freed += self._drop(node)
        return freed

    def evict_host(self, num_tokens: int) -> int:
        freed = 0
        while freed < num_tokens:
            node = self._pop(self._host_heap, self._host_candidate)
            if node is None:
                break
            self.host_pool.free(node.host)
            self._set_host(node, None)
            self._unlink(node)
            freed += len(node.key)
        return freed

    def evict_prefix(self, tokens: Sequence[int], namespace: Any = None) -> int:
        ps = self.page_size
        cut = (len(tokens) - 1) // ps
        node = self._root(namespace)
        for page in self._pages(tokens[:cut * ps]):
            node = node.children.get(page)
            if node is None:
                return 0
        rest = tuple(int(t) for t in tokens[cut * ps:])
        removed = 0
        keys = [rest] if len(rest) == ps else [k for k in node.children if k[:len(rest)] == rest]   # a partial page: scan
        for key in [k for k in keys if k in node.children]:
            top = node.children[key]
            if top.device is not None:
                node.dev_children -= 1
            self._unlink(top)
            stack = [top]
            while stack:
                below = stack.pop()
                stack.extend(below.children.values())
                below.removed = True
                removed += len(below.key)
                if below.writing is None and below.loading is None:
                    self._free_slots(below)
                else:                                   # its slots go at the transfer's completion
                    self._uncount(below)
        self._push(node)                                # its device children may be gone
        return removed

    def _uncount(self, node: Node) -> None:
        if node.device is not None:
            self._dev_tokens -= len(node.key)
        if node.host is not None:
            self._host_tokens -= len(node.key)

    def _free_slots(self, node: Node) -> None:
        self._uncount(node)
        if node.device is not None:
            self.allocator.free(node.device)
        if node.host is not None:
            self.host_pool.free(node.host)
        node.device = node.host = None

    def transfer_done(self, transfer: Any) -> None:
        nodes = self._pending.pop(transfer)
        for node in nodes:
            if transfer.kind == "write":
                node.writing = None
                if node.removed:
                    self.allocator.free(node.device)
                    self.host_pool.free(transfer.host_slots)
                    continue
                self._set_host(node, transfer.host_slots)
                if node.evicting and node.lock == 0 and node.dev_children == 0:
                    self._demote(node)
                node.evicting = False
            else:
                self._loaded(node)
                if node.removed:
                    self.allocator.free(node.device)
                    self.host_pool.free(node.host)
                    continue
            self._push(node)

    def device_size(self) -> int:
        return self._dev_tokens

    def host_size(self) -> int:
        return self._host_tokens


def make(allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str) -> HybridHiCache:
    return HybridHiCache(allocator, host_pool, controller, page_size, write_policy)


make.tier_capabilities = TierCapabilities(
    write_policies=("write_through", "write_back"),
    page_sizes=(1, 2),
    namespaces=True,
    eviction_policy=PRIORITY_LFU,
    lifecycle="tree",
    write_back_order="leaf_first",     # a write-back writes the evicted leaf alone (SGLang's design)
    second_pool=StatePool(),
)
