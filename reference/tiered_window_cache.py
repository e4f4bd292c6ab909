"""The reference tiered cache with a sliding window (the tier contract's "A sliding window on the
tiers"): :class:`~radixcheck.reference.tiered_cache.TieredRadixCache` plus, per node (one page),
a window value per token, as SGLang's HiCache keeps SWA KV beside the full KV of its SWA tree.

Each node keeps its window values in two places, as the KV is kept (``-1``: tombstoned):

* ``device_window``: beside its device copy. An insert that puts the node on device (new, or
  host-only and rebuilt from the caller's KV) gives it the caller's window values for its tokens;
  a load-back gives it its host copy's values if the node holds one of the last ``W`` tokens of
  the path loaded back, and all ``-1`` otherwise (and such a node that was on device already takes
  its host copy's values where its own are tombstoned). It goes when the device copy goes.
* ``host_window``: beside its host copy, copied from the device at the write's completion (the
  KV is copied then too). It goes when the host copy goes.

``windows(handle)`` reports, token by token along the path, the device values (the caller holds
the path locked and on device).

A match is resumable, as SGLang's HiCache over SWA (``SWAComponent.create_match_validator``): its
device part ends at the deepest node whose last ``W`` tokens (all of them, nearer the root) have
live device values, its host part at the deepest whose last ``W`` tokens have them live on device
or in a completed host copy; the host part may cross nodes on device whose window is tombstoned
there (a load-back revives it from the host copy). Only the nodes it answers are used. Everything
else is the tiered cache's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import SlidingWindow
from radixcheck.properties.tiers.contract import TierCapabilities, TierMatch, Transfer
from radixcheck.reference.hybrid_cache import NONE, as_window
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode
from radixcheck.reference.validation import as_namespace, as_priority, as_tokens

WINDOW = 3  # tokens: a page and a half at page size 2


class TieredWindowCache(TieredRadixCache):
    """Reference tiered cache with a sliding window: a node's window values follow its KV between
    the tiers, and a load-back restores them only at the end of the path it loads (the stricter
    choice the tier contract allows; ``RestoresWholeHostSegment`` takes the other)."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, second_pool=SlidingWindow(WINDOW),
                                         lifecycle="tree")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.window_size = WINDOW
        self.device_window: dict[TierNode, np.ndarray] = {}
        self.host_window: dict[TierNode, np.ndarray] = {}

    def _none(self) -> np.ndarray:
        return np.full(self.page_size, NONE, dtype=np.int64)

    # ---- the calls that change --------------------------------------------------------------

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        """Cache ``tokens``; each node the insert puts on device takes the caller's window values."""
        key = as_tokens(tokens, "tokens")  # named before anything reads them (int("x") would say less)
        as_namespace(namespace)
        slots = as_window(window, len(key))
        off_device = {n for n in self._walk(key, namespace) if n.device is None}
        prefix_len = super().insert(tokens, values, namespace, priority)
        for node in self._walk(key, namespace):
            if node in off_device or node not in self.device_window:  # host-only before, or new
                self.device_window[node] = slots[node.depth - len(node.key) : node.depth].copy()
        return prefix_len

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> TierMatch:
        """The longest prefix a request resumes from on device, then the host part a load-back makes
        resumable (the module docstring); the nodes of the answer are used now."""
        key = as_tokens(tokens, "tokens")
        as_namespace(namespace)
        as_priority(priority)
        path = []  # the nodes whose full KV is on device, then those on host only
        for node in self._walk(key, namespace):
            if node.device is None and not self._counts_as_host(node):
                break
            path.append(node)
        on_device = sum(1 for n in path if n.device is not None)
        device_end = self._resumable(path[:on_device], host_too=False)
        host_end = self._resumable(path, host_too=True)
        self._clock += 1
        for node in path[:host_end]:
            node.last_access = self._clock
            if self.policy is not None and self.policy.hits_on_match:
                node.hits += 1
        device_node = path[device_end - 1] if device_end else self._root_for(namespace)
        values = np.concatenate([n.device for n in path[:device_end]]) if device_end else np.zeros(0, dtype=np.int64)
        host_length = sum(len(n.key) for n in path[device_end:host_end])
        return TierMatch(values, device_node, host_length, path[host_end - 1] if host_length else device_node)

    def _resumable(self, path: list[TierNode], host_too: bool) -> int:
        """How many nodes of ``path`` the deepest resumable end takes: walking down, the run of
        tokens with a live window since the last tombstone must cover the window (or the whole path)."""
        best, run, depth = 0, 0, 0
        for i, node in enumerate(path):
            own = self.device_window.get(node) if node.device is not None else None
            host = self._host_values(node) if host_too else None
            for k in range(len(node.key)):
                live = (own is not None and own[k] != NONE) or (host is not None and host[k] != NONE)
                run = run + 1 if live else 0
            depth += len(node.key)
            if run >= min(self.window_size, depth):
                best = i + 1
        return best

    def windows(self, handle: Any) -> list[int]:
        """The window value of each token on the path root..handle (-1: tombstoned)."""
        return [int(v) for node in self._path(handle) for v in self.device_window.get(node, self._none())]

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, TierNode]:
        off_device = [n for n in self._path(host_handle) if n.device is None]
        values, last = super().load_back(host_handle)
        if off_device and all(n.device is None for n in off_device):  # the load failed and moved nothing
            resumed = self._resume_after_failed_load(last)
            if resumed is not None:
                return resumed
        length = len(values)
        start = length - min(self.window_size, length)  # the window at the end of the path loaded back
        for node in self._path(last) if last.parent is not None else []:
            if node in off_device:
                self._restore(node, node.depth > start)
            elif node.depth > start:
                self._revive(node)
        return values, last

    def _resume_after_failed_load(self, last: TierNode) -> tuple[np.ndarray, TierNode] | None:
        """A load-back whose load moved nothing, on a device path (root..``last``) that ends at a dead
        window: the request resumes at the match's device end (its window live on device), short of
        the path, and nothing is revived (the contract's "A sliding window on the tiers"). None when
        the path's window is live at its end (the whole path, as after any load-back)."""
        path = self._path(last) if last.parent is not None else []
        end = self._resumable(path, host_too=False)
        if end == len(path):
            return None
        values = np.concatenate([n.device for n in path[:end]]) if end else np.zeros(0, dtype=np.int64)
        return values, (path[end - 1] if end else path[0].parent)

    # ---- where window values move -------------------------------------------------------------

    def _restore(self, node: TierNode, in_window: bool) -> None:
        """A load gave the node its device copy: its window values come from host only within the window."""
        host = self.host_window.get(node)
        self.device_window[node] = host.copy() if in_window and host is not None else self._none()

    def _revive(self, node: TierNode) -> None:
        """A node of the window at the end of a load-back, on device already: its tombstoned
        window values come back from its host copy, if it has one."""
        host = self._host_values(node)
        if host is not None:
            own = self.device_window[node]
            self.device_window[node] = np.where(own == NONE, host, own)

    def _host_values(self, node: TierNode) -> np.ndarray | None:
        """The window values a match may count and a load-back revive from: its host copy's."""
        return self.host_window.get(node) if node.host is not None else None

    def _copy_to_host(self, node: TierNode) -> None:
        """A write of the node completed: its host copy carries its live window values."""
        self.host_window[node] = self.device_window.get(node, self._none()).copy()

    def transfer_done(self, transfer: Transfer) -> None:
        nodes = list(self._pending.get(transfer.number, ()))
        if transfer.kind == "write":  # before the device copy may go (a write-back frees it now)
            for node in nodes:
                self._copy_to_host(node)
        super().transfer_done(transfer)
        for node in nodes:
            if not node.linked:
                self._forget(node)

    def _free_device(self, node: TierNode) -> int:
        self.device_window.pop(node, None)
        return super()._free_device(node)

    def evict_host(self, num_tokens: int) -> int:
        freed = super().evict_host(num_tokens)
        for node in [n for n in self.host_window if n.host is None]:
            del self.host_window[node]
        return freed

    def _release_removed(self, node: TierNode) -> None:
        super()._release_removed(node)
        if node.device is None:
            self.device_window.pop(node, None)
        if node.host is None:
            self.host_window.pop(node, None)

    def _forget(self, node: TierNode) -> None:
        self.device_window.pop(node, None)
        self.host_window.pop(node, None)
