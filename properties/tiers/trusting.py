"""Trusting its callers, as SGLang's HiRadixCache does: a mixin for the tier world's correct caches.

Lock, unlock and load-back check nothing of the handle they are given (no refusal of an unmatched
unlock, a stale or a foreign handle). The cache checks its own trees instead, before every
eviction (:meth:`TrustsItsCallers._assert_own_trees`, which a cache extends with what else it
keeps): a call the suite should not send would break them, so passing shows the tier machine
sends none.
"""

from __future__ import annotations

from typing import Any

from radixcheck.reference.tiered_cache import TierNode


class TrustsItsCallers:
    """Put before a tiered cache's class: its handle calls trust the handle; its evictions check its trees first."""

    def inc_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, handle: Any) -> None:
        node = handle
        while node.parent is not None:
            node.lock_ref -= 1
            node = node.parent

    def _path(self, handle: Any) -> list[TierNode]:
        path, node = [], handle
        while node.parent is not None:
            path.append(node)
            node = node.parent
        return path[::-1]

    def _assert_own_trees(self) -> None:
        for node in self._nodes():  # type: ignore[attr-defined]
            assert node.lock_ref >= 0, f"{node} has lock count {node.lock_ref}: an unpaired unlock was sent"

    def evict(self, num_tokens: int) -> int:
        self._assert_own_trees()
        return super().evict(num_tokens)  # type: ignore[misc]

    def evict_host(self, num_tokens: int) -> int:
        self._assert_own_trees()
        return super().evict_host(num_tokens)  # type: ignore[misc]
