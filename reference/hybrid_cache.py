"""The reference radix cache with a sliding-window second pool (the contract's "A second pool").

A hybrid model (SGLang's FULL+SWA trees) keeps, beside each token's KV slot, a slot of
sliding-window KV that a request needs only for the last ``W`` tokens it resumes from. This cache
is :class:`~radixcheck.reference.radix_cache.RadixCache` plus, per node, two arrays as long as its
edge: ``window`` (each token's window slot, ``-1`` where it has none: never given, or tombstoned)
and ``pins`` (how many locks pin each token's window value). Nothing is cached twice: the KV
tree, its locks, its splits and its LRU order are the parent class's.

* A match is the longest page-aligned prefix ``L`` of the plain match whose last ``min(W, L)``
  tokens have live window values, found by reading the window arrays along the plain match
  without touching the tree, then matched (split, stamped) as a plain match of ``tokens[:L]``.
* A lock pins the window values of the pages holding the last ``min(W, L)`` tokens of the
  handle's path, and the unlock unpins exactly those (the handle's depth fixes them).
* A node's window slots are freed with its KV (every path that frees a node goes through
  ``_free``), or alone by :meth:`evict_window`, least recently used node first, which tombstones
  the unpinned ones (sets them to ``-1``) and keeps the KV.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities, SlidingWindow
from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.validation import as_count, as_tokens

NONE = -1  # a token without a window value
WINDOW = 8  # tokens: two blocks at page size 4, half a page at 16


def as_window(window: Any, length: int) -> np.ndarray:
    """The window slots of an insert: ``None`` (no token has one) or a 1-D integer array of
    ``length`` ids, each a slot id or ``-1``."""
    if window is None:
        return np.full(length, NONE, dtype=np.int64)
    if not isinstance(window, np.ndarray):
        raise TypeError(f"window must be a 1-D integer ndarray or None, got {type(window).__name__}")
    if window.ndim != 1 or len(window) != length:
        raise ValueError(f"window must have shape ({length},) to match tokens, got {window.shape}")
    if length and not np.issubdtype(window.dtype, np.integer):
        raise TypeError(f"window must be integer slot ids, got dtype {window.dtype}")
    if length and window.min() < NONE:
        raise ValueError(f"window holds slot id {int(window.min())} (only ids >= 0, or -1 for none)")
    return window.astype(np.int64)


class WindowRadixCache(RadixCache):
    """Reference hybrid cache: KV slots from ``allocator``, window slots from ``second_allocator``."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), second_pool=SlidingWindow(WINDOW), lifecycle="tree")
    page_size_for_test = 16  # as a correct variant (the catalogue's false-alarm streams): a window shorter than a page

    def __init__(self, allocator: Any, page_size: int = 1, second_allocator: Any = None) -> None:
        super().__init__(allocator, page_size)
        if second_allocator is None:
            raise TypeError("WindowRadixCache needs second_allocator= (the window pool)")
        self.second_allocator = second_allocator
        self.window_size = self.capabilities.second_pool.window
        self.window: dict[Node, np.ndarray] = {}  # node -> a window slot per token of its edge (-1: none)
        self.pins: dict[Node, np.ndarray] = {}  # node -> locks pinning each token's window value

    # ---- the window arrays follow the tree ------------------------------------------------------

    def _window_of(self, node: Node) -> np.ndarray:
        return self.window.get(node, np.full(len(node.key), NONE, dtype=np.int64))

    def _pins_of(self, node: Node) -> np.ndarray:
        if node not in self.pins:
            self.pins[node] = np.zeros(len(node.key), dtype=np.int64)
        return self.pins[node]

    def _split(self, child: Node, at: int) -> Node:
        window, pins = self._window_of(child), self._pins_of(child)
        upper = super()._split(child, at)
        self.window[upper], self.window[child] = window[:at].copy(), window[at:].copy()
        self.pins[upper], self.pins[child] = pins[:at].copy(), pins[at:].copy()
        return upper

    def _free(self, node: Node) -> None:
        super()._free(node)
        live = self._window_of(node)
        live = live[live != NONE]
        if len(live):
            self.second_allocator.free(live)
        self.window.pop(node, None)
        self.pins.pop(node, None)

    # ---- insert and match ---------------------------------------------------------------------------

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        """Cache ``tokens``; the new tokens take their window slots from ``window`` (see the contract)."""
        key = as_tokens(tokens, "tokens")
        slots = as_window(window, len(key))
        aligned = len(key) // self.page_size * self.page_size
        prefix_len = super().insert(tokens, values, namespace, priority)
        if prefix_len < aligned:  # one new leaf holds tokens[prefix_len:aligned]
            leaf = self._node_ending(key[:aligned], namespace)
            self.window[leaf] = slots[prefix_len:aligned].copy()
            self.pins[leaf] = np.zeros(aligned - prefix_len, dtype=np.int64)
        return prefix_len

    def _node_ending(self, key: tuple[int, ...], namespace: Hashable) -> Node:
        """The node whose edge ends at ``key`` (there is one: an insert just ended there)."""
        node, pos = self._root_for(namespace), 0
        while pos < len(key):
            node = self._child(node, key[pos : pos + self.page_size])
            pos += len(node.key)
        return node

    def _cached_windows(self, key: tuple[int, ...], namespace: Hashable) -> np.ndarray:
        """The window values of the longest cached prefix of ``key``, read without touching the tree."""
        node, pos, pieces = self._root_for(namespace), 0, []
        while pos < len(key):
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None:
                break
            shared = self._shared_length(child.key, key[pos : pos + len(child.key)])
            pieces.append(self._window_of(child)[:shared])
            if shared < len(child.key):
                break
            node, pos = child, pos + shared
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)

    def resumable_length(self, live: np.ndarray) -> int:
        """The longest page-aligned ``L <= len(live)`` whose last ``min(W, L)`` tokens are live."""
        for end in range(len(live) // self.page_size * self.page_size, 0, -self.page_size):
            if live[max(0, end - self.window_size) : end].all():
                return end
        return 0

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None,
                     priority: int = 0) -> tuple[np.ndarray, Node, np.ndarray]:
        key = as_tokens(tokens, "tokens")
        key = key[: len(key) // self.page_size * self.page_size]
        length = self.resumable_length(self._cached_windows(key, namespace) != NONE)
        values, handle = super().match_prefix(np.asarray(key[:length], dtype=np.int64), namespace, priority)  # checked once
        return values, handle, self._path_windows(handle)

    def _path_windows(self, handle: Node) -> np.ndarray:
        pieces, node = [], handle
        while node.parent is not None:
            pieces.append(self._window_of(node))
            node = node.parent
        return np.concatenate(pieces[::-1]) if pieces else np.zeros(0, dtype=np.int64)

    # ---- locks pin the window ----------------------------------------------------------------------

    def _window_span(self, handle: Node) -> list[tuple[Node, int]]:
        """(node, first pinned token of its edge) for every node holding the pages of the last
        ``min(W, L)`` tokens of the path root..handle."""
        length = handle.depth_end
        start = (length - min(self.window_size, length)) // self.page_size * self.page_size
        span, node = [], handle
        while node.parent is not None and node.depth_end > start:
            span.append((node, max(0, start - (node.depth_end - len(node.key)))))
            node = node.parent
        return span

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle.parent is not None:
            for node, first in self._window_span(handle):
                self._pins_of(node)[first:] += 1

    def dec_lock_ref(self, handle: Any) -> None:
        self._path(handle)  # a foreign or stale handle is refused before anything changes
        span = self._window_span(handle) if handle.parent is not None else []
        super().dec_lock_ref(handle)
        for node, first in span:
            if node in self.pins:  # a detached node freed by this unlock took its arrays with it
                self.pins[node][first:] -= 1

    # ---- window eviction ---------------------------------------------------------------------------

    def evict_window(self, num_tokens: int) -> int:
        """Tombstone unpinned window values, least recently used node first, until ``num_tokens``
        window slots are freed or none is left; the KV stays cached."""
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        freed = 0
        for node in sorted(self.window, key=lambda n: (n.last_access, n.serial)):
            if freed >= wanted:
                break
            if node.state != "linked":
                continue
            window = self.window[node]
            doomed = (window != NONE) & (self._pins_of(node) == 0)
            if doomed.any():
                self.second_allocator.free(window[doomed])
                window[doomed] = NONE
                freed += int(doomed.sum())
        return freed

    def reset(self) -> None:
        super().reset()
        self.window.clear()
        self.pins.clear()
