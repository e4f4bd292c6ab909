"""The reference radix cache with a state pool (the contract's "A second pool": ``StatePool``).

A hybrid SSM model (SGLang's FULL+MAMBA tree) resumes a request from a recurrent state, which
exists only where an earlier request ended: one state slot per cached request end. This cache is
:class:`~radixcheck.reference.radix_cache.RadixCache` plus ``state``: node -> the slot of the
state after the node's last token (the node ends exactly where the request ended: an insert ends a
node there). A split keeps the state with the lower half, which still ends there.

* A match is the plain match cut back to the deepest node on it that has a state, then matched
  (split, stamped) as a plain match of that prefix.
* A lock pins the state of the handle's node; the unlock unpins it.
* A node's state is freed with its KV, or alone by :meth:`evict_states` (least recently used
  first, unpinned only), which keeps the KV.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities, StatePool
from radixcheck.reference.radix_cache import Node, RadixCache
from radixcheck.reference.validation import as_count, as_tokens

NONE = -1


def as_state(state: Any) -> int:
    """An insert's state slot: an int >= 0, or -1 (none)."""
    if isinstance(state, (bool, np.bool_)) or not isinstance(state, (int, np.integer)):
        raise TypeError(f"state must be an int slot id (or -1 for none), got {type(state).__name__} {state!r}")
    if state < NONE:
        raise ValueError(f"state must be a slot id >= 0 or -1, got {state}")
    return int(state)


class StateRadixCache(RadixCache):
    """Reference cache with a state pool: KV slots from ``allocator``, states from ``second_allocator``."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), second_pool=StatePool())
    page_size_for_test = 4  # as a correct variant (the catalogue's false-alarm streams)

    def __init__(self, allocator: Any, page_size: int = 1, second_allocator: Any = None) -> None:
        super().__init__(allocator, page_size)
        if second_allocator is None:
            raise TypeError("StateRadixCache needs second_allocator= (the state pool)")
        self.second_allocator = second_allocator
        self.state: dict[Node, int] = {}  # node -> the slot of the state after its last token
        self.pins: dict[Node, int] = {}  # node -> locks pinning its state

    def _free(self, node: Node) -> None:
        super()._free(node)
        if node in self.state:
            self.second_allocator.free(np.asarray([self.state.pop(node)], dtype=np.int64))
        self.pins.pop(node, None)

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               state: Any = NONE) -> int:
        """Cache ``tokens``; the node ending at them takes ``state`` if it has none (see the contract)."""
        key = as_tokens(tokens, "tokens")
        slot = as_state(state)
        prefix_len = super().insert(tokens, values, namespace, priority)
        if slot != NONE and key and len(key) % self.page_size == 0:
            node = self._node_ending(key, namespace)
            if node not in self.state:
                self.state[node] = slot
        return prefix_len

    def _node_ending(self, key: tuple[int, ...], namespace: Hashable) -> Node:
        node, pos = self._root_for(namespace), 0
        while pos < len(key):
            node = self._child(node, key[pos : pos + self.page_size])
            pos += len(node.key)
        return node

    def _deepest_state(self, key: tuple[int, ...], namespace: Hashable) -> int:
        """The length of the deepest prefix of ``key`` that ends at a node with a state (read only)."""
        node, pos, best = self._root_for(namespace), 0, 0
        while pos < len(key):
            child = self._child(node, key[pos : pos + self.page_size])
            if child is None or self._shared_length(child.key, key[pos : pos + len(child.key)]) < len(child.key):
                break
            node, pos = child, pos + len(child.key)
            if node in self.state:
                best = pos
        return best

    def match_prefix(self, tokens: Sequence[int], namespace: Hashable = None, priority: int = 0) -> tuple[np.ndarray, Node, int]:
        key = as_tokens(tokens, "tokens")
        length = self._deepest_state(key, namespace)
        values, handle = super().match_prefix(np.asarray(key[:length], dtype=np.int64), namespace, priority)  # checked once
        return values, handle, self.state.get(handle, NONE)

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle.parent is not None:
            self.pins[handle] = self.pins.get(handle, 0) + 1

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(handle)
        if handle.parent is not None and handle in self.pins:
            self.pins[handle] -= 1

    def evict_states(self, num_states: int) -> int:
        """Free unpinned states, least recently used node first, until ``num_states`` are freed or
        none is left; the KV stays cached."""
        wanted = as_count(num_states, "num_states", minimum=0)
        doomed = [n for n in sorted(self.state, key=lambda n: (n.last_access, n.serial))
                  if n.state == "linked" and not self.pins.get(n, 0)][:wanted]
        if doomed:
            self.second_allocator.free(np.asarray([self.state.pop(n) for n in doomed], dtype=np.int64))
        return len(doomed)

    def reset(self) -> None:
        super().reset()
        self.state.clear()
        self.pins.clear()
