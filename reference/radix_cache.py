"""A deliberately simple, readable radix-tree KV cache (SGLang's RadixAttention layout).

Each node holds the token ids of its own edge (``key``) and the KV slot ids for exactly those
tokens (``value``). A match walks down from the root; reuse shares the slot ids, nothing is
copied. The tree is paged: children are keyed by their first page of ``page_size`` tokens, and
every edge length is a multiple of ``page_size``.

Namespaces (the contract's tenant isolation) are one tree each: ``roots`` maps each namespace,
by its own equality, to the root of its tree (the default namespace ``None`` is ``root``). Every
tree shares the slot pool, the clock and the eviction order.

The request lifecycle (``match_req`` ... ``cache_finished_req``) is
:class:`~radixcheck.reference.requests.RequestSteps`: sequences of the calls below.

Sizes are counts kept as the tree changes (a scheduler reads them every step, and the production
worlds hold thousands of nodes: a walk per call made the reference O(tree) per step). They are kept
at the three places a size can move, so a subclass that edits the tree in its own way is still
counted as a walk would count it: a node's ``lock_ref`` and ``key`` setters, and its ``children``
(a :class:`Children` dict: a subtree joining a counted node is counted, one leaving it is not).
``_recounted_sizes`` is the walk they must equal (``tests/test_plain_sizes.py`` compares them after
every call). The contract this implements is documented in ``properties/cache/contract.py``.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities, LeafStats, Policy
from radixcheck.reference.requests import RequestSteps
from radixcheck.reference.validation import as_count, as_namespace, as_priority, as_tokens, as_values

_EMPTY = np.zeros(0, dtype=np.int64)


class Children(dict):
    """A node's children, keyed by first page; adding or removing one moves the owner's kept sizes.
    Replacing a child keeps the old one counted (a split re-hangs it under the new upper node)."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node

    def __setitem__(self, page: Any, child: Node) -> None:
        super().__setitem__(page, child)
        if self.node.in_tree:
            self.node.owner._count_in(child)

    def __delitem__(self, page: Any) -> None:
        child = self[page]
        super().__delitem__(page)
        self.node.owner._count_out(child)

    def pop(self, page: Any, *default: Any) -> Any:
        if page not in self:
            return super().pop(page, *default)
        child = self[page]
        del self[page]
        return child

    def popitem(self) -> tuple[Any, Node]:
        page, child = super().popitem()
        self.node.owner._count_out(child)
        return page, child

    def clear(self) -> None:
        children = list(self.values())
        super().clear()
        for child in children:
            self.node.owner._count_out(child)

    def setdefault(self, page: Any, child: Any = None) -> Any:
        if page not in self:
            self[page] = child
        return self[page]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for page, child in dict(*args, **kwargs).items():
            self[page] = child


class Node:
    """One edge of the tree. ``state`` is "linked" (in the tree), "detached" (quarantined while
    still locked: unreachable, slots not yet freed) or "dead" (slots freed; handle is stale)."""

    __slots__ = ("owner", "parent", "_key", "value", "children", "_lock_ref", "last_access", "state", "serial",
                 "created", "hits", "priority", "depth_end", "history", "in_tree")
    _serials = itertools.count()

    def __init__(self, owner: RadixCache, parent: Node | None, key: tuple[int, ...], value: np.ndarray) -> None:
        self.in_tree = False  # counted in its owner's sizes (reachable from a root); a root is made counted
        self.owner = owner
        self.parent = parent
        self.key = key
        self.value = value
        self.children: dict[tuple[int, ...], Node] = Children(self)
        self.lock_ref = 0
        self.last_access = 0
        self.state = "linked"
        self.serial = next(Node._serials)  # tie-breaker that makes eviction order deterministic
        # what an eviction policy reads (the contract's "Eviction policies"; LeafStats)
        self.created = 0  # the clock of the insert that cached it (a split copies it)
        self.hits = 0  # inserts that covered it (and matches, if the policy counts them); a split copies it
        self.priority = 0  # the highest priority of the inserts that covered it; a split copies it
        self.depth_end = (parent.depth_end if parent is not None else 0) + len(key)  # tokens from the root to its end
        self.history = self.depth_end  # the deepest its branch reached (TLRU's L); never lowered

    @property
    def key(self) -> tuple[int, ...]:
        return self._key

    @key.setter
    def key(self, key: tuple[int, ...]) -> None:
        """A counted node's edge changing length (a split) moves the sizes by the difference."""
        if self.in_tree:
            self.owner._tally(self, -1)
            self._key = key
            self.owner._tally(self, +1)
        else:
            self._key = key

    @property
    def lock_ref(self) -> int:
        return self._lock_ref

    @lock_ref.setter
    def lock_ref(self, count: int) -> None:
        """A counted node locked or unlocked moves its tokens between protected and evictable."""
        if self.in_tree:
            self.owner._tally(self, -1)
            self._lock_ref = count
            self.owner._tally(self, +1)
        else:
            self._lock_ref = count

    def __repr__(self) -> str:
        return f"Node(key={self.key!r}, lock_ref={self.lock_ref}, {self.state})"


class RadixCache(RequestSteps):
    """Reference radix cache. ``allocator`` receives ``free(slot_ids)`` for every evicted slot.

    The root handle (returned by an empty match) stands for the empty prefix; locking and
    unlocking it are no-ops. It runs the request lifecycle itself (:class:`RequestSteps`).
    """

    # 16: a production page size (vLLM's default block)
    capabilities = Capabilities(page_sizes=(1, 4, 16), namespaces=True, lifecycle="requests")
    policy: Policy | None = None  # None: least recently used first; else the key of this Policy (see with_policy)

    @classmethod
    def with_policy(cls, policy: Policy, name: str | None = None) -> type[RadixCache]:
        """This cache evicting by ``policy``'s key (ties by age of the node), declaring it; every
        other part (key mode, second pool, lifecycle, namespaces) is the class's own."""
        capabilities = dataclasses.replace(cls.capabilities, eviction_policy=policy)
        return type(name or f"{cls.__name__}_{policy.name}", (cls,), {"policy": policy, "capabilities": capabilities,
                                                                   "__module__": cls.__module__})

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        self.page_size = as_count(page_size, "page_size", minimum=1)
        self.allocator = allocator
        self._clock = 0  # logical time: one tick per match/insert, shared by all nodes it touches
        # The sizes, kept as nodes join and leave the tree and are locked (Node's setters, Children):
        # tokens of the counted nodes, of those locked (lock_ref > 0), of those unlocked (lock_ref == 0).
        self._kept_total = self._kept_protected = self._kept_evictable = 0
        self.root = self._new_root()  # the default namespace's
        self.roots: dict[Hashable, Node] = {self._key(None): self.root}
        self._detached: list[Node] = []

    def _new_root(self) -> Node:
        root = Node(self, None, (), _EMPTY)
        root.lock_ref = 1  # a root is never evictable
        root.in_tree = True  # holds no tokens; what hangs below it is counted
        return root

    def _key(self, namespace: Hashable) -> Hashable:
        """What tells namespaces apart: the namespace itself (its equality, nothing rendered)."""
        return namespace

    def _root_for(self, namespace: Hashable) -> Node:
        """The root of ``namespace``'s tree, made on its first use."""
        key = self._key(namespace)
        if key not in self.roots:
            self.roots[key] = self._new_root()
        return self.roots[key]

    # ---- lookup and insertion -------------------------------------------------------------

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> tuple[np.ndarray, Node]:
        """Slot ids of the longest prefix of ``tokens`` cached under ``namespace``, and the node ending
        there. ``priority`` is the request's (a match leaves the nodes' own as they are)."""
        key = as_tokens(tokens, "tokens")
        as_namespace(namespace)
        as_priority(priority)
        hits = self.policy is not None and self.policy.hits_on_match
        key = key[: len(key) // self.page_size * self.page_size]
        self._clock += 1
        node, pos, pieces = self._root_for(namespace), 0, []
        while pos < len(key):
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None:
                break
            shared = self._shared_length(child.key, key[pos : pos + len(child.key)])
            if shared < len(child.key):
                child = self._split(child, shared)  # so a lock covers exactly what matched
            child.last_access = self._clock
            if hits:
                self._hit(child, "match")
            pieces.append(child.value)
            node, pos = child, pos + shared
        values = np.concatenate(pieces) if pieces else _EMPTY.copy()
        return values, node

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        """Cache ``tokens`` -> ``values`` under ``namespace``; returns how many leading tokens were already
        cached there. Each node it covers counts a hit and takes ``priority`` if higher."""
        key = as_tokens(tokens, "tokens")
        vals = as_values(values, len(key))
        as_namespace(namespace)
        as_priority(priority)
        aligned = len(key) // self.page_size * self.page_size
        self._clock += 1
        node, pos = self._root_for(namespace), 0
        while pos < aligned:
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None:
                leaf = Node(self, node, key[pos:aligned], vals[pos:aligned].copy())
                leaf.last_access = leaf.created = self._clock
                leaf.hits, leaf.priority = 1, priority
                node.children[leaf.key[: self.page_size]] = leaf
                self._raise_history(leaf)
                return pos
            shared = self._shared_length(child.key, key[pos : min(aligned, pos + len(child.key))])
            if shared < len(child.key):
                child = self._split(child, shared)
            child.last_access = self._clock
            self._hit(child, "insert")
            child.priority = max(child.priority, priority)
            node, pos = child, pos + shared
        return pos

    def _child(self, node: Node, page: tuple[int, ...]) -> Node | None:
        """The child of ``node`` whose edge starts with ``page`` (children are keyed by it)."""
        return node.children.get(page)

    def _shared_length(self, edge: tuple[int, ...], query: tuple[int, ...]) -> int:
        """Length of the common prefix of ``edge`` and ``query``, rounded down to whole pages."""
        n = min(len(edge), len(query))
        if edge[:n] != query[:n]:  # one comparison in C for the usual case, a long shared edge
            n = next(i for i in range(n) if edge[i] != query[i])
        return n // self.page_size * self.page_size

    def _split(self, child: Node, at: int) -> Node:
        """Cut ``child``'s edge at ``at``; returns the new upper node (same locks and recency)."""
        upper = Node(self, child.parent, child.key[:at], child.value[:at])
        upper.lock_ref = child.lock_ref
        upper.last_access = child.last_access
        upper.created, upper.hits, upper.priority, upper.history = child.created, child.hits, child.priority, child.history
        child.parent.children[upper.key[: self.page_size]] = upper
        child.key, child.value, child.parent = child.key[at:], child.value[at:], upper
        upper.children[child.key[: self.page_size]] = child
        return upper

    # ---- locks ------------------------------------------------------------------------------

    def _path(self, handle: Any) -> list[Node]:
        """The nodes from ``handle`` up to (not including) the root; raises on a foreign/stale one."""
        if not isinstance(handle, Node) or handle.owner is not self:
            raise ValueError(f"unknown handle {handle!r}: not a node of this cache")
        if handle.state == "dead":
            raise ValueError(f"stale handle {handle!r}: its node was evicted or reset")
        path, node = [], handle
        while node.parent is not None:  # up to its namespace's root
            path.append(node)
            node = node.parent
        return path

    def inc_lock_ref(self, handle: Any) -> None:
        """Lock every node on the path root..handle so none of it can be evicted."""
        path = self._path(handle)
        if handle.state != "linked":
            raise ValueError(f"cannot lock {handle!r}: it was quarantined (evict_prefix)")
        for node in path:
            node.lock_ref += 1

    def dec_lock_ref(self, handle: Any) -> None:
        """Release one lock on the path root..handle; raises, changing nothing, if unmatched."""
        path = self._path(handle)
        unlocked = [node for node in path if node.lock_ref <= 0]
        if unlocked:
            raise ValueError(f"unmatched unlock: {unlocked[0]!r} on the path has lock_ref 0")
        for node in path:
            node.lock_ref -= 1
            if node.lock_ref == 0 and node.state == "detached":
                self._free(node)  # quarantined earlier; its last lock is gone now
                self._detached.remove(node)

    # ---- eviction ---------------------------------------------------------------------------

    def _free(self, node: Node) -> None:
        node.state = "dead"
        if len(node.value):
            self.allocator.free(node.value)

    def _unlink(self, node: Node) -> None:
        del node.parent.children[node.key[: self.page_size]]

    def evict(self, num_tokens: int) -> int:
        """Evict least-recently-used unlocked leaves until ``num_tokens`` are freed (or none left)."""
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        heap = [(self._eviction_key(n), n) for n in self._linked_nodes() if self._evictable_leaf(n)]
        heapq.heapify(heap)
        evicted = leaves = 0
        while self._wants_more(evicted, wanted, leaves) and heap:
            _, leaf = heapq.heappop(heap)
            self._unlink(leaf)
            self._free(leaf)
            evicted, leaves = evicted + len(leaf.key), leaves + 1
            parent = leaf.parent
            if self._evictable_leaf(parent):
                heapq.heappush(heap, (self._eviction_key(parent), parent))
        return evicted

    def _hit(self, node: Node, by: str) -> None:
        """``node`` was covered by a hit: a match (``by="match"``, if the policy counts those) or an insert."""
        node.hits += 1

    @staticmethod
    def _raise_history(leaf: Node) -> None:
        """A new leaf: every node above it has reached its depth (TLRU's history never falls)."""
        node = leaf.parent
        while node is not None and node.history < leaf.depth_end:
            node.history = leaf.depth_end
            node = node.parent

    def _stats(self, node: Node) -> LeafStats:
        return LeafStats(last_use=node.last_access, created=node.created, hits=node.hits, priority=node.priority,
                         depth=node.depth_end, start=node.depth_end - len(node.key), history=node.history)

    def _wants_more(self, evicted: int, wanted: int, leaves: int) -> bool:
        """Whether eviction goes on after ``leaves`` leaves freed ``evicted`` of ``wanted`` tokens."""
        return evicted < wanted

    def _eviction_key(self, node: Node) -> tuple:
        """The policy: least recently used first, or ``policy``'s key (serial breaks ties deterministically)."""
        if self.policy is not None:
            return self.policy.key(self._stats(node)), node.serial
        return node.last_access, node.serial

    def _evictable_leaf(self, node: Node) -> bool:
        return node.parent is not None and not node.children and node.lock_ref == 0

    def evict_prefix(self, tokens: Sequence[int], namespace: Hashable = None) -> int:
        """Quarantine: remove everything cached under ``namespace`` on the branch of ``tokens`` (see the contract)."""
        key = as_tokens(tokens, "tokens")
        if not key:
            raise ValueError("evict_prefix needs a non-empty token sequence")
        as_namespace(namespace)
        cut = (len(key) - 1) // self.page_size * self.page_size
        head = key[cut:]  # the doomed subtrees' edges start with these tokens
        node, pos = self._root_for(namespace), 0
        while pos < cut:
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None:
                return 0
            shared = self._shared_length(child.key, key[pos : min(cut, pos + len(child.key))])
            if shared < len(child.key) and pos + shared < cut:
                return 0  # diverges before the cut: nothing cached on this branch
            if shared < len(child.key):
                if child.key[shared : shared + len(head)] != head:
                    return 0
                child = self._split(child, shared)
            node, pos = child, pos + shared
        removed = 0
        for subtree in self._branches(node, head):
            self._unlink(subtree)
            for victim in self._subtree(subtree):
                removed += len(victim.key)
                self._retire(victim)
        return removed

    def _branches(self, node: Node, head: tuple[int, ...]) -> list[Node]:
        """The children of ``node`` whose edge starts with ``head``."""
        return [c for c in node.children.values() if c.key[: len(head)] == head]

    def _retire(self, node: Node) -> None:
        """A quarantined node: freed now if unlocked, else detached until its last unlock."""
        if node.lock_ref == 0:
            self._free(node)
        else:
            node.state = "detached"
            self._detached.append(node)

    def reset(self) -> None:
        """Free every slot the cache holds, quarantined ones included; every handle goes stale."""
        for node in list(self._linked_nodes()) + self._detached:
            if node.parent is not None:
                self._free(node)
        for root in self.roots.values():
            root.children.clear()  # the root objects stay: a root handle is always valid
        self._detached.clear()

    # ---- sizes (kept counts: O(1); _recounted_sizes is the walk they must equal) ----------------

    def _tally(self, node: Node, sign: int) -> None:
        """Add (``sign`` +1) or take away (-1) ``node``'s tokens in the sizes, by its lock."""
        n = sign * len(node._key)
        self._kept_total += n
        if node._lock_ref > 0:
            self._kept_protected += n
        elif node._lock_ref == 0:
            self._kept_evictable += n

    def _count_in(self, top: Node) -> None:
        """``top`` hangs below a counted node: count every node of its subtree not yet counted (a new
        leaf is one node; a counted node re-hung by a split is already counted, with its subtree)."""
        stack = [top]
        while stack:
            node = stack.pop()
            if not node.in_tree:
                node.in_tree = True
                self._tally(node, +1)
                stack.extend(node.children.values())

    def _count_out(self, top: Node) -> None:
        """``top`` left its parent's children: its subtree leaves the sizes (a walk of the subtree, once:
        the reference unlinks only leaves and quarantined subtrees, which it walks anyway)."""
        stack = [top]
        while stack:
            node = stack.pop()
            if node.in_tree:
                node.in_tree = False
                self._tally(node, -1)
                stack.extend(node.children.values())

    def _recounted_sizes(self) -> tuple[int, int, int]:
        """(total, protected, evictable) by a walk of the tree: what the kept counts must equal."""
        nodes = list(self._linked_nodes())
        return (sum(len(n.key) for n in nodes), sum(len(n.key) for n in nodes if n.lock_ref > 0 and n.parent is not None),
                sum(len(n.key) for n in nodes if n.lock_ref == 0))

    def _subtree(self, top: Node) -> Iterator[Node]:
        stack = [top]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def _linked_nodes(self) -> Iterator[Node]:
        for root in list(self.roots.values()):
            yield from self._subtree(root)

    def total_size(self) -> int:
        return self._kept_total

    def protected_size(self) -> int:
        return self._kept_protected

    def evictable_size(self) -> int:
        return self._kept_evictable

    def __repr__(self) -> str:
        return f"RadixCache(page_size={self.page_size}, total={self.total_size()})"
