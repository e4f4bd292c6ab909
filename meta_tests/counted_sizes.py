"""A reference cache whose size calls are O(1): for the bench's size-call meta-tests.

The reference keeps its sizes as nodes join and leave the tree (a walk, ``_recounted_sizes``, checks
them). This subclass keeps two running counts of its own instead, as engines do (SGLang's ``evictable_size_``/``protected_size_``):
``total`` moves by what ``insert`` added and ``evict`` freed, ``protected`` by the nodes a lock
takes from 0 to 1 (an unlock, 1 to 0). A split keeps both (both halves keep the lock count).
``evict_prefix`` is not offered, so a locked node never leaves the tree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.reference import RadixCache


class CountedSizes(RadixCache):
    capabilities = dataclasses.replace(RadixCache.capabilities, supports_quarantine=False)

    def __init__(self, allocator: Any, page_size: int = 1) -> None:
        super().__init__(allocator, page_size)
        self._total = self._protected = 0

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        already = super().insert(tokens, values, namespace, priority)
        self._total += len(tokens) // self.page_size * self.page_size - already  # insert caches whole pages only
        return already

    def evict(self, num_tokens: int) -> int:
        freed = super().evict(num_tokens)
        self._total -= freed
        return freed

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        self._protected += sum(len(n.key) for n in self._path(handle) if n.lock_ref == 1)

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(handle)
        self._protected -= sum(len(n.key) for n in self._path(handle) if n.lock_ref == 0)

    def reset(self) -> None:
        super().reset()
        self._total = self._protected = 0

    def total_size(self) -> int:
        return self._total

    def protected_size(self) -> int:
        return self._protected

    def evictable_size(self) -> int:
        return self._total - self._protected


class RecountsSizes(RadixCache):
    """The reference with size calls that walk every node each call (the reference's own before it kept its
    counts, as the vllm trial's SizesScanEveryBlock did): the bench's O(n) size-call control."""

    def total_size(self) -> int:
        return self._recounted_sizes()[0]

    def protected_size(self) -> int:
        return self._recounted_sizes()[1]

    def evictable_size(self) -> int:
        return self._recounted_sizes()[2]
