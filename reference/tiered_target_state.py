"""The reference tiered cache whose load-backs restore their target's state only (the tier
contract's "A load-back that restores only its target's state",
``TierCapabilities(state_load_back="target")``), as SGLang's ``MambaComponent.prepare_load_back``
does: :class:`~radixcheck.reference.tiered_state_cache.TieredStateCache` plus a set of *parked*
nodes, whose KV a load-back brought to device while their state stayed on host.

* ``load_back(h)`` parks every node whose KV it loads, and unparks ``h``'s node when it reaches
  it (its state comes to device, from its host copy).
* A match's device part ends at the deepest device node not parked; the parked nodes after it go
  to the host part (a request resumes only from a state on device).
* An insert unparks the nodes it covers (its caller brings the state after each); a node that
  leaves the device is no longer parked.

``states`` reports a parked node's host state. Everything else is the state cache's.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.tiers.contract import TierCapabilities, TierMatch
from radixcheck.reference.state_cache import NONE
from radixcheck.reference.tiered_cache import TierNode
from radixcheck.reference.tiered_state_cache import TieredStateCache

_EMPTY = np.zeros(0, dtype=np.int64)


class TargetStateCache(TieredStateCache):
    """Reference tiered cache with a state pool whose load-back restores only its target's state."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, second_pool=StatePool(),
                                         state_load_back="target")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parked: set[TierNode] = set()  # on device, their state on host only

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> TierMatch:
        match = super().match_prefix(tokens, namespace, priority)
        path = self._path(match.device_handle)
        end = len(path)
        while end and path[end - 1] in self.parked:
            end -= 1
        if end == len(path):
            return match
        crossed = sum(len(node.key) for node in path[end:])
        handle = path[end - 1] if end else path[0].parent
        values = np.concatenate([node.device for node in path[:end]]) if end else _EMPTY.copy()
        last = match.host_handle if match.host_length else match.device_handle
        return TierMatch(values, handle, match.host_length + crossed, last)

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, TierNode]:
        loading = [node for node in self._path(host_handle) if node.device is None]
        values, last = super().load_back(host_handle)
        self.parked.update(node for node in loading if node.device is not None)
        if last is host_handle:  # it reached its target: that state comes to device
            self._unpark(last)
        return values, last

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               state: Any = NONE) -> int:
        prefix_len = super().insert(tokens, values, namespace, priority, state)
        for node in self._walk(tuple(int(t) for t in tokens), namespace):
            self._unpark(node)
        return prefix_len

    def states(self, handle: Any) -> list[int]:
        return [self.host_state.get(node, NONE) if node in self.parked else self.device_state.get(node, NONE)
                for node in self._path(handle)]

    def _unpark(self, node: TierNode) -> None:
        if node in self.parked:
            self.parked.discard(node)
            self._restore(node)

    def _restore(self, node: TierNode) -> None:
        """A parked node's load completes with its KV only: its state stays on host."""
        if node not in self.parked:
            super()._restore(node)

    def _free_device(self, node: TierNode) -> int:
        self.parked.discard(node)
        return super()._free_device(node)

    def _forget(self, node: TierNode) -> None:
        self.parked.discard(node)
        super()._forget(node)

    def reset(self) -> None:
        super().reset()
        self.parked.clear()
