"""The reference tiered cache with a state pool (the tier contract's "A second pool on the tiers"):
:class:`~radixcheck.reference.tiered_cache.TieredRadixCache` plus one recurrent state per
cached request end, on whichever tier its page is, as SGLang's ``HiMambaRadixCache`` backs a
Mamba state up to host with its node.

Each node (one page) keeps its state in two places, as the KV is kept:

* ``device_state``: the state beside its device copy. An insert that ends at a node gives it the
  caller's state (if it has none); an insert that brings a host-only node back to device (the
  caller's KV) restores its state from the host copy; a load's completion restores it from the
  host copy too. It goes when the device copy goes.
* ``host_state``: the state beside its host copy, copied at the write's completion (the KV is
  copied then too), or at once when a node with a host copy takes a state. It goes when the host
  copy goes.

``states(handle)`` reports, page by page along the path, the device state (the caller holds the
path locked and on device). Everything else is the tiered cache's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.tiers.contract import TierCapabilities, Transfer
from radixcheck.reference.state_cache import NONE, as_state
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode
from radixcheck.reference.validation import as_namespace, as_tokens


class TieredStateCache(TieredRadixCache):
    """Reference tiered cache with a state pool: a node's state follows its KV between the tiers."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, second_pool=StatePool(), lifecycle="tree")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.device_state: dict[TierNode, int] = {}
        self.host_state: dict[TierNode, int] = {}

    # ---- the calls that change --------------------------------------------------------------

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               state: Any = NONE) -> int:
        """Cache ``tokens``; the node ending at them keeps ``state`` if it has none (see the contract)."""
        key = as_tokens(tokens, "tokens")  # named before anything reads them (int("x") would say less)
        as_namespace(namespace)
        slot = as_state(state)
        before = {n for n in self._walk(key, namespace) if n.device is None}  # host-only: rebuilt from the caller's KV
        prefix_len = super().insert(tokens, values, namespace, priority)
        path = self._walk(key, namespace)
        for node in path:
            if node in before:
                self._restore(node)
        if slot != NONE and key and len(key) % self.page_size == 0 and path and node not in self.device_state:
            self.device_state[node] = slot
            if node.host is not None:
                self.host_state[node] = slot  # its host copy carries it too
        return prefix_len

    def states(self, handle: Any) -> list[int]:
        """The state of each page on the path root..handle (-1: none)."""
        return [self.device_state.get(node, NONE) for node in self._path(handle)]

    # ---- where a state moves ----------------------------------------------------------------

    def _restore(self, node: TierNode) -> None:
        """The node is on device again (a load landed, or an insert rebuilt it): its state comes from host."""
        if node in self.host_state:
            self.device_state[node] = self.host_state[node]

    def transfer_done(self, transfer: Transfer) -> None:
        nodes = list(self._pending.get(transfer.number, ()))
        if transfer.kind == "write":  # the state goes to host with the KV (the device copy is still there)
            for node in nodes:
                if node in self.device_state:
                    self.host_state[node] = self.device_state[node]
        super().transfer_done(transfer)
        for node in nodes:
            if transfer.kind == "load" and node.linked and node.device is not None:
                self._restore(node)
            if not node.linked:
                self._forget(node)

    def _free_device(self, node: TierNode) -> int:
        self.device_state.pop(node, None)
        return super()._free_device(node)

    def evict_host(self, num_tokens: int) -> int:
        freed = super().evict_host(num_tokens)
        for node in [n for n in self.host_state if n.host is None]:
            del self.host_state[node]
        return freed

    def _release_removed(self, node: TierNode) -> None:
        super()._release_removed(node)
        if node.device is None:
            self.device_state.pop(node, None)
        if node.host is None:
            self.host_state.pop(node, None)

    def _forget(self, node: TierNode) -> None:
        self.device_state.pop(node, None)
        self.host_state.pop(node, None)
