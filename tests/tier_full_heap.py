"""The tiered reference's device eviction as it was before its tips were queued (main until session 62):
a heap built, per call, over every candidate admitted as a leaf. The naive order the kept queue must
reproduce: the same leaves, in the same order, in every call."""

from __future__ import annotations

import heapq
from typing import Any

from radixcheck.reference.validation import as_count


def full_heap_evict(self: Any, num_tokens: int) -> int:
    wanted = as_count(num_tokens, "num_tokens", minimum=0)
    heap = [(*self._eviction_key(n), n) for n in self._device_candidates() if self._device_leaf(n)]
    heapq.heapify(heap)
    freed = writing = 0
    while self._wants_more(freed + writing, wanted, "device") and heap:
        *_, node = heapq.heappop(heap)
        if not self._device_leaf(node):
            continue  # pinned by a write this eviction started
        if node.host is not None:
            freed += self._free_device(node)
        elif self.write_policy == "write_back":
            self._write_back(node)
            if node.writing is None:
                freed += self._after_failed_write_back(node)
            else:
                writing += len(node.device)
        else:
            freed += self._drop(node)
        parent = node.parent
        if parent.parent is not None and self._device_leaf(parent):
            heapq.heappush(heap, (*self._eviction_key(parent), parent))
    return freed


def traced(base: type, trace: list[Any]) -> type:
    """``base`` recording each device eviction's call and the pages it takes, in order (by their tokens
    from the root: serials differ between runs). The old way is had by patching ``TieredRadixCache.evict``
    with :func:`full_heap_evict` (so a subclass's own ``evict`` calling ``super()`` gets it too)."""

    def where(node: Any) -> tuple:
        keys = []
        while node is not None:
            keys.append(node.key)
            node = node.parent
        return tuple(keys)

    def evict(self: Any, num_tokens: int) -> int:
        trace.append(("evict", num_tokens))
        freed = base.evict(self, num_tokens)
        trace.append(("freed", freed))
        return freed

    def free_device(self: Any, node: Any) -> int:
        trace.append(("free", where(node)))
        return base._free_device(self, node)

    def write_back(self: Any, node: Any) -> None:
        trace.append(("write_back", where(node)))
        base._write_back(self, node)

    return type(base.__name__, (base,), {"evict": evict, "_free_device": free_device, "_write_back": write_back})
