"""A deliberately simple tiered radix cache (SGLang's HiCache layout): device pages backed by a
host pool, moved by the suite's transfer controller, whose completions arrive in any order.

One node per page (no multi-page edges, no splitting): a node holds its page's device slot ids
(``device``), its host slot ids once its backup completed (``host``), and the transfers pending
on it. The rules it keeps, which make every interleaving of completions safe:

* A node's device copy stays while a write reads it or a load fills it (it is *pinned*), and a
  node whose load is pending is on device (its slots are allocated; the KV arrives at the ack).
* Backups go top-down (``_back_up_path``): a node is written only when its parent is on host or
  being written, so a node without a host copy has no host-only children, and dropping it drops
  nothing else.
* ``load_back`` pins the whole path before it may evict: the nested device eviction (and the
  host eviction a write-back may need) leaves the path alone.
* Host eviction takes host-only leaves only, in the device tier's order (least recently used
  first, or the policy's key); a quarantined node's slots are freed once its transfers completed.
* Namespaces (``namespace=`` on ``match_prefix``, ``insert`` and ``evict_prefix``) are one tree
  each, as in :mod:`radixcheck.reference.radix_cache`: ``roots`` maps each namespace, by its own
  equality, to its tree's root. A handle is a node, so ``load_back`` and the locks need no
  namespace; both pools and one eviction order are shared.
* Running requests (``lifecycle="tree"``) need nothing more: a retract or an abort is an
  unlock, and a page a load fills or a write reads is pinned by its transfer, not by the lock of
  the request that asked for it.
* Device eviction takes the least recently used leaf first, or with a policy
  (:meth:`TieredRadixCache.with_policy`) the leaf with the smallest key of that
  :class:`~radixcheck.properties.cache.policies.Policy`: a node keeps its hits, priority and
  creation time through every move between the tiers.
* Neither eviction walks the tree: the candidates (nodes on device without a child on device;
  nodes without children) are kept as nodes move between the tiers and leave the tree, and each
  eviction's rule picks its leaves among them, so a call costs the candidates, not the tree. The
  device candidates are also kept queued by eviction key (a heap; a node's recency, hits, creation
  and priority setters re-queue it under its new key, the old entry dropped when it surfaces), so
  ``evict(1)`` takes a few queue steps, not a heap built over every candidate
  (``tests/test_tier_eviction_queue.py``: the same leaves in the same order as that heap).
* Neither size walks the tree (a scheduler reads them every step): ``device_size`` and
  ``host_size`` are counts kept as a node's copies come and go (its ``device`` and ``host``
  setters) and as a subtree leaves the tree (``_unlink``: a subclass takes a node out through it,
  not by editing ``children``); ``_recounted_sizes`` is the walk they must equal
  (``tests/test_tier_sizes.py`` compares them after every call).

The contract is ``radixcheck.properties.tiers.contract``.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from radixcheck.oracles.policy import LeafStats
from radixcheck.properties.cache.policies import Policy
from radixcheck.properties.tiers.contract import TierCapabilities, TierMatch, Transfer
from radixcheck.reference.validation import as_count, as_namespace, as_priority, as_tokens, as_values

_EMPTY = np.zeros(0, dtype=np.int64)


class TierNode:
    __slots__ = ("owner", "parent", "key", "children", "_device", "device_children", "_host", "writing", "loading", "lock_ref",
                 "pin", "_last_access", "serial", "linked", "in_tree", "evict_when_written", "_hits", "_created", "_priority", "depth")
    _serials = itertools.count()

    def __init__(self, owner: TieredRadixCache, parent: TierNode | None, key: tuple[int, ...]) -> None:
        self.owner = owner
        self.parent = parent
        self.key = key
        self.children: dict[tuple[int, ...], TierNode] = {}
        self._device: np.ndarray | None = None
        self.device_children = 0  # children with a device copy: a node is a device leaf only without one
        self._host: np.ndarray | None = None  # set when its write completed
        self.writing: Transfer | None = None
        self.loading: Transfer | None = None
        self.lock_ref = 0
        self.pin = 0  # load_back in progress on its path
        self._last_access = 0
        self.serial = next(TierNode._serials)
        self.linked = True
        self.in_tree = True  # reachable from its root: its copies count in the sizes (made with none)
        self.evict_when_written = False
        self._hits = 0  # inserts that covered it (and matches, if its policy counts them)
        self._created = 0
        self._priority = 0
        self.depth = (parent.depth if parent is not None else 0) + len(key)  # tokens from its root to its end

    @property
    def device(self) -> np.ndarray | None:
        return self._device

    @device.setter
    def device(self, slots: np.ndarray | None) -> None:
        """Every move on or off device goes through here, so the eviction candidates and the device size stay current."""
        was = self._device is not None
        self._device = slots
        if was != (slots is not None):
            if self.in_tree:
                self.owner._device_tokens += len(self.key) if slots is not None else -len(self.key)
            self.owner._device_moved(self)

    @property
    def host(self) -> np.ndarray | None:
        return self._host

    @host.setter
    def host(self, slots: np.ndarray | None) -> None:
        """Every move on or off host goes through here, so the host size stays current."""
        if self.in_tree and (self._host is not None) != (slots is not None):
            self.owner._host_tokens += len(self.key) if slots is not None else -len(self.key)
        self._host = slots

    # What an eviction key reads (recency, hits, creation, priority): a change re-queues a candidate
    # with its new key (TieredRadixCache._rekey), so the kept queue orders by the keys of now.
    @property
    def last_access(self) -> int:
        return self._last_access

    @last_access.setter
    def last_access(self, clock: int) -> None:
        self._last_access = clock
        self.owner._rekey(self)

    @property
    def hits(self) -> int:
        return self._hits

    @hits.setter
    def hits(self, hits: int) -> None:
        self._hits = hits
        self.owner._rekey(self)

    @property
    def created(self) -> int:
        return self._created

    @created.setter
    def created(self, clock: int) -> None:
        self._created = clock
        self.owner._rekey(self)

    @property
    def priority(self) -> int:
        return self._priority

    @priority.setter
    def priority(self, priority: int) -> None:
        self._priority = priority
        self.owner._rekey(self)

    def __repr__(self) -> str:
        where = "+".join(t for t, v in (("device", self.device), ("host", self.host)) if v is not None) or "nowhere"
        return f"TierNode({list(self.key)}, {where}{', linked' if self.linked else ', removed'})"


class TieredRadixCache:
    """Reference tiered cache: ``allocator`` (device pool), ``host_pool``, ``controller``."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, lifecycle="tree")
    policy: Policy | None = None  # None: least recently used first; else the key of this Policy (see with_policy)

    @classmethod
    def with_policy(cls, policy: Policy, name: str | None = None) -> type[TieredRadixCache]:
        """This cache evicting its device leaves by ``policy``'s key, declaring it."""
        caps = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, eviction_policy=policy, lifecycle="tree")
        return type(name or f"{cls.__name__}_{policy.name}", (cls,), {"policy": policy, "tier_capabilities": caps,
                                                                   "__module__": cls.__module__})

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int = 1,
                 write_policy: str = "write_through") -> None:
        self.page_size = as_count(page_size, "page_size", minimum=1)
        if write_policy not in self.tier_capabilities.write_policies:
            raise ValueError(f"write_policy must be one of {self.tier_capabilities.write_policies}, got {write_policy!r}")
        self.allocator, self.host_pool, self.controller = allocator, host_pool, controller
        self.write_policy = write_policy
        self.root = self._new_root()  # the default namespace's
        self.roots: dict[Hashable, TierNode] = {None: self.root}
        self._clock = 0
        self._pending: dict[int, list[TierNode]] = {}  # transfer number -> the nodes it moves
        # The eviction candidates, kept as the tree changes so an eviction does not walk the tree:
        # nodes on device with no child on device, and nodes with no children. Each eviction takes
        # from them the nodes its rule admits (_device_leaf, _host_evictable), in the same order.
        self._device_tips: set[TierNode] = set()
        self._childless: set[TierNode] = set()
        # The device tips queued by eviction key, so an eviction takes the smallest without sorting them
        # all: each tip's key of now is in _tip_keys and in the heap; older entries (the key changed, the
        # node stopped being a tip) are dropped as they surface. Rebuilt when stale entries outnumber live.
        self._tip_heap: list[tuple[Any, ...]] = []
        self._tip_keys: dict[TierNode, tuple[Any, int]] = {}
        # The sizes, kept as nodes move (TierNode's device and host setters, _leaves_the_sizes): tokens
        # of the nodes in the tree with a device copy, with a host copy. A scheduler reads them every step.
        self._device_tokens = 0
        self._host_tokens = 0

    # ---- lookup ------------------------------------------------------------------------------

    def _new_root(self) -> TierNode:
        root = TierNode(self, None, ())
        root.lock_ref = 1  # a root is never evictable
        return root

    def _root_for(self, namespace: Hashable) -> TierNode:
        """The root of ``namespace``'s tree, made on its first use."""
        if namespace not in self.roots:
            self.roots[namespace] = self._new_root()
        return self.roots[namespace]

    def _walk(self, key: tuple[int, ...], namespace: Hashable = None) -> list[TierNode]:
        p, node, path = self.page_size, self._root_for(namespace), []
        for pos in range(0, len(key) // p * p, p):
            node = node.children.get(key[pos : pos + p])
            if node is None:
                break
            path.append(node)
        return path

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> TierMatch:
        key = as_tokens(tokens, "tokens")
        as_namespace(namespace)
        as_priority(priority)
        self._clock += 1
        device, device_node, host_length, host_node = [], self._root_for(namespace), 0, None
        for node in self._walk(key, namespace):
            node.last_access = self._clock
            if node.device is not None and not host_length:
                device.append(node.device)
                device_node = node
            elif self._counts_as_host(node):
                host_length += len(node.key)
                host_node = node
            else:
                break
            if self.policy is not None and self.policy.hits_on_match:
                node.hits += 1
        values = np.concatenate(device) if device else _EMPTY.copy()
        return TierMatch(values, device_node, host_length, host_node if host_length else device_node)

    def _counts_as_host(self, node: TierNode) -> bool:
        return node.device is None and node.host is not None

    def _path(self, handle: Any) -> list[TierNode]:
        if not isinstance(handle, TierNode) or handle.owner is not self:
            raise ValueError(f"unknown handle {handle!r}: not a node of this cache")
        if not handle.linked:
            raise ValueError(f"stale handle {handle!r}: its node was removed")
        path, node = [], handle
        while node.parent is not None:
            path.append(node)
            node = node.parent
        return path[::-1]

    # ---- load-back ---------------------------------------------------------------------------

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, TierNode]:
        path = self._path(host_handle)
        to_load = [n for n in path if n.device is None]
        hosts = [n.host for n in to_load]  # read before any nested eviction: the pins keep them
        pinned = self._pinned_for_load(path, to_load)
        for node in pinned:
            node.pin += 1
        try:
            if to_load:
                self._load(to_load, hosts)
        finally:
            for node in pinned:
                node.pin -= 1
        return self._device_prefix(path)

    def _pinned_for_load(self, path: list[TierNode], to_load: list[TierNode]) -> list[TierNode]:
        """The nodes a nested eviction must leave alone while ``load_back`` runs: the whole path."""
        return path

    def _load(self, to_load: list[TierNode], hosts: list[np.ndarray]) -> None:
        transfer = self.controller.load(np.concatenate(hosts))
        if transfer is not None:
            self._pending[transfer.number] = list(to_load)
            at = 0
            for node in to_load:
                node.device, node.loading = transfer.device_slots[at : at + len(node.key)].copy(), transfer
                at += len(node.key)
            return
        self.evict(sum(len(h) for h in hosts))  # may re-enter host eviction (a write-back needs room)
        for node, host in zip(to_load, hosts, strict=True):
            transfer = self.controller.load(host)
            if transfer is None:
                if self._skips_unloaded_page():
                    continue
                break  # the rest stays on host: a device path has no gap
            self._pending[transfer.number] = [node]
            node.device, node.loading = transfer.device_slots.copy(), transfer

    def _skips_unloaded_page(self) -> bool:
        return False

    def _device_prefix(self, path: list[TierNode]) -> tuple[np.ndarray, TierNode]:
        values, last = [], (path[0].parent if path else self.root)
        for node in path:
            if node.device is None:
                break
            values.append(node.device)
            last = node
        return (np.concatenate(values) if values else _EMPTY.copy()), last

    # ---- insertion and backup ----------------------------------------------------------------

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        key = as_tokens(tokens, "tokens")
        vals = as_values(values, len(key))
        as_namespace(namespace)
        priority = as_priority(priority)
        p = self.page_size
        self._clock += 1
        node, prefix, on_device = self._root_for(namespace), 0, True
        for pos in range(0, len(key) // p * p, p):
            page = key[pos : pos + p]
            child = node.children.get(page)
            if child is None:
                child = TierNode(self, node, page)
                child.created, child.priority = self._clock, priority
                node.children[page] = child
                self._childless.discard(node)
                self._childless.add(child)
            child.hits += 1
            child.priority = max(child.priority, priority)
            if child.device is None:  # new, or on host only: takes the caller's slots
                child.device = vals[pos : pos + p].copy()
                on_device = False
            elif on_device:
                prefix = pos + p
            child.last_access = self._clock
            node = child
        if self.write_policy == "write_through" and node.parent is not None:
            self._back_up_path(node)
        return prefix

    def _chain_ok(self, node: TierNode) -> bool:
        parent = node.parent
        return parent.parent is None or parent.host is not None or parent.writing is not None

    def _back_up_path(self, last: TierNode) -> None:
        """Write every node of root..last without a host copy, top-down, stopping at the first
        that cannot be written (its parent is not backed up, or allocation failed)."""
        for node in self._path(last):
            if node.host is not None or node.writing is not None:
                continue
            if not self._chain_ok(node) or not self._write(node):
                return

    def _write(self, node: TierNode) -> bool:
        transfer = self.controller.write(self._write_source(node))
        if transfer is None:
            self.evict_host(len(node.key))
            transfer = self.controller.write(self._write_source(node))
        if transfer is None:
            return False
        node.writing = transfer
        self._pending[transfer.number] = [node]
        return True

    def _write_source(self, node: TierNode) -> np.ndarray:
        return node.device

    # ---- locks -------------------------------------------------------------------------------

    def inc_lock_ref(self, handle: Any) -> None:
        for node in self._path(handle):
            node.lock_ref += 1

    def dec_lock_ref(self, handle: Any) -> None:
        path = self._path(handle)
        if any(n.lock_ref <= 0 for n in path):
            raise ValueError(f"unmatched unlock through {handle!r}")
        for node in path:
            node.lock_ref -= 1

    # ---- eviction candidates -----------------------------------------------------------------

    def _in_tree(self, node: TierNode) -> bool:
        return node.linked and node.parent is not None and node.parent.children.get(node.key) is node

    def _retip(self, node: TierNode) -> None:
        if node.device is not None and node.device_children == 0 and self._in_tree(node):
            self._device_tips.add(node)
            self._rekey(node)
        else:
            self._device_tips.discard(node)
            self._tip_keys.pop(node, None)  # its entry in the heap is stale now

    def _rekey(self, node: TierNode) -> None:
        """Queue tip ``node`` under its key of now, if that is not the key it is queued under."""
        if node in self._device_tips:
            key = self._eviction_key(node)
            if self._tip_keys.get(node) != key:
                self._tip_keys[node] = key
                heapq.heappush(self._tip_heap, (*key, node))
                if len(self._tip_heap) > 2 * len(self._tip_keys) + 64:
                    self._requeue()

    def _requeue(self) -> None:
        """Drop the stale entries: the heap again holds one entry per queued node."""
        self._tip_heap = [(*key, node) for node, key in self._tip_keys.items()]
        heapq.heapify(self._tip_heap)

    def _next_tip(self) -> TierNode | None:
        """Take the queued tip with the smallest key (None if none is left); it leaves the queue."""
        while self._tip_heap:
            *key, node = heapq.heappop(self._tip_heap)
            if self._tip_keys.get(node) != tuple(key):
                continue  # queued again since, under another key
            del self._tip_keys[node]
            if node not in self._device_tips or not node.linked:
                continue  # no longer a tip
            now = self._eviction_key(node)
            if now != tuple(key):  # changed where no setter saw it: queued under its key of now
                self._tip_keys[node] = now
                heapq.heappush(self._tip_heap, (*now, node))
                continue
            return node
        return None

    def _device_moved(self, node: TierNode) -> None:
        """``node`` came on device or left it: it and its parent may become, or stop being, tips."""
        if self._in_tree(node):
            node.parent.device_children += 1 if node.device is not None else -1
            self._retip(node.parent)
        self._retip(node)

    def _unlink(self, node: TierNode) -> None:
        """Take ``node`` (and so its subtree) out of its parent's children."""
        parent = node.parent
        del parent.children[node.key]
        node.linked = False
        self._leaves_the_sizes(node)
        self._device_tips.discard(node)
        self._childless.discard(node)
        if node.device is not None:
            parent.device_children -= 1
        self._retip(parent)
        if not parent.children and parent.parent is not None:
            self._childless.add(parent)

    def _leaves_the_sizes(self, top: TierNode) -> None:
        """``top``'s subtree is out of the tree: its copies leave the sizes (a walk of the subtree, once:
        the reference unlinks only childless nodes and quarantined subtrees, which it walks anyway)."""
        stack = [top]
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if node.in_tree:
                node.in_tree = False
                self._device_tokens -= len(node.key) if node.device is not None else 0
                self._host_tokens -= len(node.key) if node.host is not None else 0

    def _device_candidates(self) -> list[TierNode]:
        """A superset of the device leaves: on device, no child on device."""
        self._device_tips = {n for n in self._device_tips if n.linked}  # a quarantined subtree's nodes leave here
        return list(self._device_tips)

    def _host_candidates(self) -> list[TierNode]:
        """A superset of the host-evictable nodes: no children."""
        self._childless = {n for n in self._childless if n.linked}  # a quarantined subtree's nodes leave here
        return list(self._childless)

    # ---- device eviction ---------------------------------------------------------------------

    def _device_leaf(self, node: TierNode) -> bool:
        return (node.linked and node.device is not None and node.lock_ref == 0 and node.pin == 0 and node.writing is None
                and node.loading is None and not node.evict_when_written
                and all(c.device is None for c in node.children.values()))

    def _nodes(self) -> Iterator[TierNode]:
        stack = [child for root in self.roots.values() for child in root.children.values()]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def evict(self, num_tokens: int) -> int:
        """Device leaves in order until the tokens freed, plus under write-back those whose write-back
        it started, reach ``num_tokens`` (the tier contract's rule, SGLang's: a started write-back frees
        its page, there within the call, here at its completion); returns the tokens freed."""
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        passed: list[TierNode] = []  # tips it may not take now (locked, pinned, in transfer): queued again after
        freed = writing = 0
        while self._wants_more(freed + writing, wanted, "device"):
            node = self._next_tip()
            if node is None:
                break
            if not self._device_leaf(node):
                passed.append(node)
                continue
            if node.host is not None:
                freed += self._free_device(node)
            elif self.write_policy == "write_back":
                self._write_back(node)
                if node.writing is None:
                    freed += self._after_failed_write_back(node)
                else:
                    writing += len(node.device)  # freed when its write completes
            else:
                freed += self._drop(node)
            if node in self._device_tips:  # a write-back in flight: still on device, and still a tip
                passed.append(node)
        for node in passed:  # its parent, a tip now, was queued as it became one (_retip)
            self._rekey(node)
        return freed

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        """Whether an eviction on ``tier`` that has counted ``counted`` tokens takes another leaf."""
        return counted < wanted

    def _eviction_key(self, node: TierNode) -> tuple[Any, int]:
        """Least recently used first, or the policy's key (the serial only breaks ties)."""
        if self.policy is None:
            return node.last_access, node.serial
        stats = LeafStats(node.last_access, node.created, node.hits, node.priority, node.depth, node.depth - len(node.key),
                          node.depth)
        return self.policy.key(stats), node.serial

    def _write_back(self, node: TierNode) -> None:
        """Back up ``node`` (and first every ancestor without a host copy); its device copy goes
        when the write completes."""
        self._back_up_path(node)
        if node.writing is not None:
            node.evict_when_written = True

    def _after_failed_write_back(self, node: TierNode) -> int:
        """Its backup could not be allocated: it is not on host, so it leaves the cache."""
        return self._drop(node)

    def _free_device(self, node: TierNode) -> int:
        self.allocator.free(node.device)
        freed, node.device = len(node.device), None
        return freed

    def _drop(self, node: TierNode) -> int:
        """Remove a node without a host copy (it has no children: see the module's rules)."""
        self._unlink(node)
        return self._free_device(node)

    # ---- host eviction -----------------------------------------------------------------------

    def _host_evictable(self, node: TierNode) -> bool:
        return node.linked and node.device is None and node.host is not None and node.pin == 0 and not node.children

    def evict_host(self, num_tokens: int) -> int:
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        heap = [(*self._host_eviction_key(n), n) for n in self._host_candidates() if self._host_evictable(n)]
        heapq.heapify(heap)
        freed = 0
        while self._wants_more(freed, wanted, "host") and heap:
            *_, node = heapq.heappop(heap)
            if not self._host_evictable(node):
                continue  # queued twice
            self.host_pool.free(node.host)
            freed += len(node.host)
            node.host = None
            self._unlink(node)
            parent = node.parent
            if parent.parent is not None and self._host_evictable(parent):
                heapq.heappush(heap, (*self._host_eviction_key(parent), parent))
        return freed

    def _host_eviction_key(self, node: TierNode) -> tuple[Any, int]:
        """The host tier's order is the device tier's (SGLang heap-orders its host leaves by the same strategy)."""
        return self._eviction_key(node)

    # ---- quarantine --------------------------------------------------------------------------

    def evict_prefix(self, tokens: Sequence[int], namespace: Hashable = None) -> int:
        key = as_tokens(tokens, "tokens")
        as_namespace(namespace)
        if not key:
            raise ValueError("evict_prefix needs a non-empty token sequence")
        p = self.page_size
        cut = (len(key) - 1) // p * p
        path = self._walk(key[:cut], namespace)
        if len(path) * p < cut:
            return 0
        node = path[-1] if path else self._root_for(namespace)
        head = key[cut:]
        removed = 0
        for top in [c for c in node.children.values() if c.key[: len(head)] == head]:
            self._unlink(top)
            stack = [top]
            while stack:
                victim = stack.pop()
                stack.extend(victim.children.values())
                removed += len(victim.key)
                victim.linked = False
                self._release_removed(victim)
        return removed

    def _release_removed(self, node: TierNode) -> None:
        """Free what a removed node holds, except what a pending transfer still uses (freed at its ack)."""
        if node.device is not None and node.writing is None and node.loading is None:
            self._free_device(node)
        if node.host is not None and node.loading is None:
            self.host_pool.free(node.host)
            node.host = None

    def reset(self) -> None:
        """Flush both tiers (SGLang's ``HiRadixCache.reset`` clears the host pool too): every node's
        device and host slots freed, then the cache starts over. Sent with no request running and
        no transfer in flight; the nodes are walked with a stack (a tree thousands of pages deep)."""
        for node in list(self._nodes()):
            node.linked = node.in_tree = False  # out of the new tree's sizes as well
            self._release_removed(node)
        type(self).__init__(self, self.allocator, self.host_pool, self.controller, self.page_size, self.write_policy)

    # ---- completions -------------------------------------------------------------------------

    def transfer_done(self, transfer: Transfer) -> None:
        nodes = self._pending.pop(transfer.number, None)
        if nodes is None:
            raise ValueError(f"unknown or already completed transfer {transfer!r}")
        for node in nodes:
            if transfer.kind == "write":
                node.writing, node.host = None, transfer.host_slots.copy()
                if node.evict_when_written:
                    node.evict_when_written = False
                    if node.linked and self._device_leaf(node):
                        self._free_device(node)
            else:
                node.loading = None
            if not node.linked:
                self._release_removed(node)

    # ---- sizes -------------------------------------------------------------------------------

    def device_size(self) -> int:
        """Tokens of the tree's nodes on device (kept as they move: O(1); ``_recounted_sizes`` walks)."""
        return self._device_tokens

    def host_size(self) -> int:
        return self._host_tokens

    def _recounted_sizes(self) -> tuple[int, int]:
        """The sizes by a walk of the tree (what the kept counts must equal; the tests compare them)."""
        nodes = list(self._nodes())
        return sum(len(n.key) for n in nodes if n.device is not None), sum(len(n.key) for n in nodes if n.host is not None)

    def __repr__(self) -> str:
        return f"TieredRadixCache({self.write_policy}, page_size={self.page_size})"
