"""The cache contract: what radixcheck expects of a radix-tree KV cache.

Read this module to write an adapter for your cache. It is modelled on SGLang's
``RadixCache`` so that SGLang, mini-sglang and most home-grown caches adapt in a few lines.

Vocabulary
----------
* A *token sequence* is a 1-D sequence of non-negative Python/NumPy integers (list, tuple or
  integer ndarray). Floats, bools, negative ids, nested sequences are bad input.
* *Values* are KV slot ids: a 1-D ``np.int64`` array, one slot per token. The suite owns the slot
  pool (a :class:`SlotAllocator`); the cache stores slot ids and hands them back to the allocator
  when it evicts. Reuse shares slot ids; the cache never copies or invents them.
* A *handle* (SGLang's ``TreeNode``) is an opaque object returned by ``match_prefix``. It denotes
  the matched prefix: locking it locks every node on the path root..handle.

The methods (``RadixCacheLike``)
-------------------------------
``match_prefix(tokens) -> (values, handle)``
    The slot ids of the longest cached prefix of ``tokens`` (length a multiple of ``page_size``)
    and a handle to the node that ends exactly there. If the query diverges in the middle of an
    edge the cache splits that edge, so that a lock on the handle covers exactly the matched
    prefix, no more. An empty match returns an empty int64 array and the *root handle*.
    Counts as a use of every matched node (recency for LRU).
``insert(tokens, values) -> prefix_len``
    Caches ``tokens`` (only the first ``len(tokens) // page_size * page_size`` of them when
    ``page_size > 1``) with ``values`` (same length as ``tokens``). ``prefix_len`` is how many
    leading tokens were already cached: for those the cache keeps its own values, and the caller
    still owns (and must free) ``values[:prefix_len]`` that it brought, as well as the unaligned
    tail. Counts as a use of every node on the inserted path.
``inc_lock_ref(handle)`` / ``dec_lock_ref(handle)``
    Add / remove one lock on every node of the path root..handle. A locked node is never evicted.
    ``dec_lock_ref`` raises (and changes nothing) if any counter on the path is already 0 or the
    handle is stale (its node was evicted, reset away, or belongs to another cache).
    ``inc_lock_ref`` on a stale or quarantined handle raises likewise.
    *The root handle* stands for the empty prefix: locking or unlocking it is a no-op that always
    succeeds (there is nothing to protect).
``evict(num_tokens) -> evicted``
    Evicts unlocked leaves in the order of the cache's policy (the reference: least recently used
    leaf first; a parent left childless becomes a leaf and is considered in turn) until at least
    ``num_tokens`` tokens have been freed or nothing is evictable. Returns the number of tokens
    evicted; their slot ids go back to the allocator. ``num_tokens`` must be >= 0.
``evict_prefix(tokens) -> removed``
    Policy eviction ("quarantine"). Afterwards no match returns a prefix that starts with
    ``tokens``, and the match of any query that does not start with ``tokens`` is unchanged.
    The cut falls at position ``(len(tokens) - 1) // page_size * page_size``: everything cached
    below it on the branch of ``tokens`` goes. Unlocked nodes are freed at once; locked ones are
    unlinked at once (no new request can match them) and freed when their last lock is released.
    Returns the number of tokens unlinked from the tree. ``tokens`` must be non-empty.
``total_size()``, ``evictable_size()``, ``protected_size()``
    Tokens in the tree; those on no locked path; those on a locked path. Unlinked (quarantined but
    still locked) nodes count in none of them. ``evictable + protected == total`` always.
``reset()``
    Empties the tree, frees every slot it holds (including quarantined ones still locked) and
    makes every handle stale. Slots that callers hold stay theirs.
``page_size``
    Attribute, the page size the cache was built with.

Target selection
----------------
The suite builds caches with a *factory*, named as ``package.module:attribute`` by the pytest
option ``--radix-target`` or the environment variable ``RADIXCHECK_TARGET`` (the option wins).
The default is ``reference:RadixCache``. The factory is called as::

    factory(allocator: SlotAllocator, page_size: int) -> RadixCacheLike

and may carry a ``capabilities`` attribute (a :class:`Capabilities`) telling the suite which
properties apply; without one the suite assumes :data:`DEFAULT_CAPABILITIES`. A property that
needs something the target does not offer is skipped with that reason, never failed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Capabilities:
    """What a target offers. The suite skips (with a reason) properties that need more."""

    eviction_policy: str = "lru"
    """Name of the eviction order. The LRU oracle applies only to ``"lru"``."""
    supports_quarantine: bool = True
    """Whether ``evict_prefix`` exists and follows the contract."""
    page_sizes: tuple[int, ...] = (1, 2, 4)
    """Page sizes the factory accepts; the suite runs each one it tests that is listed here."""
    checks_locks: bool = True
    """Whether an unmatched ``dec_lock_ref``, or a lock/unlock of a stale or foreign handle,
    raises. SGLang's does not (it trusts its callers); a target that says ``False`` skips those
    properties instead of failing them (and the conformance matrix says so)."""


DEFAULT_CAPABILITIES = Capabilities()


@runtime_checkable
class RadixCacheLike(Protocol):
    """The methods the suite calls. See the module docstring for their meaning."""

    page_size: int

    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]: ...

    def insert(self, tokens: Sequence[int], values: np.ndarray) -> int: ...

    def inc_lock_ref(self, handle: Any) -> None: ...

    def dec_lock_ref(self, handle: Any) -> None: ...

    def evict(self, num_tokens: int) -> int: ...

    def evict_prefix(self, tokens: Sequence[int]) -> int: ...

    def total_size(self) -> int: ...

    def evictable_size(self) -> int: ...

    def protected_size(self) -> int: ...

    def reset(self) -> None: ...


class SlotAllocator:
    """The suite's KV slot pool. The cache under test receives it and calls ``free`` on eviction.

    It refuses (raises ``ValueError``) a double free or a free of an id it never handed out, and
    remembers every refusal in ``violations`` so a cache that swallows the exception is still
    caught. Ids never handed out go first, then freed ones in the order they came back, so an
    id is not reused soon (a use-after-free then reads a slot nobody else holds).
    """

    def __init__(self, pool_size: int) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be a positive int, got {pool_size!r}")
        self.pool_size = pool_size
        self._never_used = 0  # ids >= this were never handed out; they go first
        self._recycled: deque[int] = deque()
        self.in_use: set[int] = set()
        self.freed_log: list[int] = []
        self.violations: list[str] = []

    def available(self) -> int:
        return self.pool_size - self._never_used + len(self._recycled)

    def alloc(self, n: int) -> np.ndarray:
        """Hand out ``n`` slot ids (int64). Raises ``MemoryError`` if fewer are available."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"alloc needs a non-negative int, got {n!r}")
        if n > self.available():
            raise MemoryError(f"slot pool exhausted: asked {n}, {self.available()} free")
        fresh = min(n, self.pool_size - self._never_used)
        ids = list(range(self._never_used, self._never_used + fresh))
        self._never_used += fresh
        ids += [self._recycled.popleft() for _ in range(n - fresh)]
        self.in_use.update(ids)
        return np.asarray(ids, dtype=np.int64)

    def free(self, ids: Any) -> None:
        """Return slot ids to the pool. Accepts any 1-D integer array-like (NumPy, torch, list)."""
        arr = np.asarray(ids).reshape(-1)
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            self.violations.append(f"free() got non-integer ids of dtype {arr.dtype}")
            raise ValueError(self.violations[-1])
        ids_list = [int(i) for i in arr]
        bad = [i for i in ids_list if i not in self.in_use]
        if bad or len(set(ids_list)) != len(ids_list):
            what = bad[:8] if bad else "duplicates within one call"
            self.violations.append(f"free() of ids not in use (double free or never allocated): {what}")
            raise ValueError(self.violations[-1])
        self.in_use.difference_update(ids_list)
        self._recycled.extend(ids_list)
        self.freed_log.extend(ids_list)
