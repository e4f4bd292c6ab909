"""The reference caches with a second pool and the request lifecycle (the contract's "A second
pool" with "The request lifecycle").

Each is a reference hybrid cache plus its request methods, written over its own tree calls as
:class:`~radixcheck.reference.requests.RequestSteps` writes them over the plain ones:

* :class:`WindowRequestSteps` (a sliding window): ``Request.window`` holds the window slots the
  request holds of its own (``-1`` elsewhere). An insert brings them; afterwards the request holds
  none of the tokens the tree newly cached (it took them), frees its duplicates where the tree's
  value is live, and keeps its own where the tree's is tombstoned. An end frees every window slot
  it still holds.
* :class:`StateRequestSteps` (a state pool): ``Request.state`` is the state after the request's
  filled tokens, its own. An insert that ends on a page boundary brings it, and the tree takes it
  where that prefix has no live state (the request then holds none); an end frees a state it
  still holds.

:class:`StateTreeCache` is the state reference declaring ``lifecycle="tree"`` (the suite plays the
engine's steps with the tree calls): the state cache needs nothing more for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import Capabilities, SlidingWindow, StatePool
from radixcheck.reference.hybrid_cache import NONE, WINDOW, WindowRadixCache
from radixcheck.reference.requests import RequestSteps
from radixcheck.reference.state_cache import StateRadixCache
from radixcheck.reference.validation import as_tokens


class SecondPoolRequestSteps(RequestSteps):
    """What both pools' request methods share: a publish inserts (:meth:`_insert_req`, per pool), then
    re-matches its page-aligned prefix, whose ``match_prefix`` has three answers, and moves the lock there."""

    def _insert_req(self, req: Any) -> int:
        raise NotImplementedError

    def cache_unfinished_req(self, req: Any) -> None:
        aligned = self._insert_req(req)
        values, handle, _second = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        req.slots[: len(values)] = values
        self.inc_lock_ref(handle)
        self.dec_lock_ref(req.handle)
        req.handle, req.protected = handle, len(values)


class WindowRequestSteps(SecondPoolRequestSteps):
    """The request methods over a window cache's ``match_prefix`` (three answers) and ``insert(window=)``."""

    second_allocator: Any
    _cached_windows: Any

    def match_req(self, req: Any) -> None:
        values, handle, _window = self.match_prefix(req.tokens, namespace=req.namespace, priority=req.priority)
        req.slots = np.array(values, dtype=np.int64)
        req.filled = req.protected = len(values)
        req.handle = handle
        req.window = np.full(len(values), NONE, dtype=np.int64)  # the tree's window is read through the handle

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        end = self._insert_req(req) if insert else req.protected
        self._free_slots(req.slots[end : req.filled])
        self._free_own_window(req, np.flatnonzero(self._own_window(req) != NONE))
        self.dec_lock_ref(req.handle)
        req.handle = None

    @staticmethod
    def _own_window(req: Any) -> np.ndarray:
        window = np.asarray(req.window, dtype=np.int64)[: req.filled]
        return np.concatenate([window, np.full(req.filled - len(window), NONE, dtype=np.int64)])

    def _free_own_window(self, req: Any, positions: Any) -> None:
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions):
            self.second_allocator.free(req.window[positions].copy())
            req.window[positions] = NONE

    def _insert_req(self, req: Any) -> int:
        own = self._own_window(req)
        req.window = own
        prefix_len = self.insert(req.tokens[: req.filled], req.slots[: req.filled], namespace=req.namespace,
                                 priority=req.priority, window=own.copy())
        self._free_slots(req.slots[req.protected : prefix_len])
        aligned = req.filled // self.page_size * self.page_size
        req.window[prefix_len:aligned] = NONE  # the tree took them
        tree = self._cached_windows(as_tokens(req.tokens[:prefix_len], "tokens"), req.namespace)
        duplicates = [i for i in range(req.protected, prefix_len) if req.window[i] != NONE and tree[i] != NONE]
        self._free_own_window(req, duplicates)  # where the tree's is tombstoned the request keeps its own
        return aligned


class StateRequestSteps(SecondPoolRequestSteps):
    """The request methods over a state cache's ``match_prefix`` (three answers) and ``insert(state=)``."""

    second_allocator: Any
    state: dict
    _node_ending: Any

    def match_req(self, req: Any) -> None:
        values, handle, _state = self.match_prefix(req.tokens, namespace=req.namespace, priority=req.priority)
        req.slots = np.array(values, dtype=np.int64)
        req.filled = req.protected = len(values)
        req.handle = handle

    def cache_finished_req(self, req: Any, insert: bool = True) -> None:
        end = self._insert_req(req) if insert else req.protected
        self._free_slots(req.slots[end : req.filled])
        self._free_own_state(req)
        self.dec_lock_ref(req.handle)
        req.handle = None

    def _free_own_state(self, req: Any) -> None:
        if req.state != NONE:
            self.second_allocator.free(np.asarray([req.state], dtype=np.int64))
            req.state = NONE

    def _insert_req(self, req: Any) -> int:
        aligned = req.filled // self.page_size * self.page_size
        brings = req.state != NONE and aligned == req.filled > 0
        prefix_len = self.insert(req.tokens[: req.filled], req.slots[: req.filled], namespace=req.namespace, priority=req.priority,
                                 state=req.state if brings else NONE)
        self._free_slots(req.slots[req.protected : prefix_len])
        if brings and self.state.get(self._node_ending(as_tokens(req.tokens[:aligned], "tokens"), req.namespace)) == req.state:
            req.state = NONE  # the tree took it
        return aligned


class WindowRequestsCache(WindowRequestSteps, WindowRadixCache):
    """The reference window cache with ``lifecycle="requests"``."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), second_pool=SlidingWindow(WINDOW), lifecycle="requests")
    page_size_for_test = 4


class StateRequestsCache(StateRequestSteps, StateRadixCache):
    """The reference state cache with ``lifecycle="requests"``."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), second_pool=StatePool(), lifecycle="requests")
    page_size_for_test = 4


class StateTreeCache(StateRadixCache):
    """The reference state cache with ``lifecycle="tree"``."""

    capabilities = Capabilities(page_sizes=(1, 4, 16), second_pool=StatePool(), lifecycle="tree")
    page_size_for_test = 4
