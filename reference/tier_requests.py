"""The request lifecycle of the reference tiered cache, run by the cache itself
(``TierCapabilities(lifecycle="requests")``; the tier contract's "The request lifecycle on the tiers").

Each step is a sequence of the tier's own calls, as SGLang's scheduler and HiCache run them
(``match_prefix``, then ``init_load_back`` and the lock at admission; ``cache_unfinished_req``,
``cache_finished_req``): nothing here touches a node. The request
(:class:`~radixcheck.properties.tiers.contract.TierRequest`) is the caller's; the cache reads it,
frees into the suite's device pool what it must, and updates the request's row, its protected
length, its handle and its host part. Over a tier with a second pool (``RequestStateTiers``,
``RequestWindowTiers``) its inserts carry the request's state or window values, and a publish whose
re-match a tombstoned window stops short resumes there (the tier contract's "A second pool with the
request methods").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import SlidingWindow, StatePool
from radixcheck.properties.tiers.contract import TierCapabilities, TierRequest
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import WINDOW, TieredWindowCache


class TierRequestSteps:
    """``match_req``, ``lock_req``, ``cache_unfinished_req`` and ``cache_finished_req`` over the
    tier calls (a mixin of :class:`~radixcheck.reference.tiered_cache.TieredRadixCache`, which has them)."""

    page_size: int
    allocator: Any
    tier_capabilities: TierCapabilities
    match_prefix: Any
    load_back: Any
    insert: Any
    inc_lock_ref: Any
    dec_lock_ref: Any

    def match_req(self, req: TierRequest) -> None:
        """Admission's match: the row starts with the device part; the host part is noted; no lock."""
        match = self.match_prefix(req.tokens, namespace=req.namespace, priority=req.priority)
        self._set_prefix(req, match.device_values, match.device_handle)
        req.host_length, req.host_handle = int(match.host_length), match.host_handle

    def lock_req(self, req: TierRequest) -> None:
        """The admission succeeded: load the host part back (its loads may stay in flight), then lock."""
        if req.host_length:
            values, handle = self.load_back(req.host_handle)
            self._set_prefix(req, values, handle)
        req.host_length, req.host_handle = 0, None
        self.inc_lock_ref(req.handle)

    def cache_unfinished_req(self, req: TierRequest) -> None:
        """Publish every whole page computed so far; the request then reads the tree's copy and its
        lock moves to the node the publish ended on (the lock, not a pending backup, keeps them)."""
        aligned = self._insert_req(req)
        match = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        values = match.device_values
        if len(values) < aligned:  # a window tombstoned on pages the tree had: resume at the re-match, recompute the rest
            self._free_own(req.slots[aligned : req.filled])
            req.slots, req.filled = req.slots[: len(values)].copy(), len(values)
        req.slots[: len(values)] = values  # the duplicates just freed are never read again
        self.inc_lock_ref(match.device_handle)
        self.dec_lock_ref(req.handle)
        req.handle, req.protected = match.device_handle, len(values)

    def cache_finished_req(self, req: TierRequest, insert: bool = True) -> None:
        """End the request: with ``insert``, cache what it computed (its duplicates and unaligned tail
        freed); without (retract, abort), free every slot of its own, and nothing its load fills."""
        end = self._insert_req(req) if insert else req.protected
        self._free_own(req.slots[end : req.filled])
        self.dec_lock_ref(req.handle)
        req.handle = None

    def _set_prefix(self, req: TierRequest, values: Any, handle: Any) -> None:
        req.slots = np.array(values, dtype=np.int64)
        req.filled = req.protected = len(req.slots)
        req.handle = handle

    def _insert_req(self, req: TierRequest) -> int:
        """Insert ``req.tokens[:req.filled]`` with the request's row and free the slots of it the tree
        already had, behind the protected prefix; returns the page-aligned length."""
        prefix_len = self.insert(req.tokens[: req.filled], req.slots[: req.filled], namespace=req.namespace,
                                 priority=req.priority, **self._second_of(req))
        self._free_own(req.slots[req.protected : prefix_len])
        return req.filled // self.page_size * self.page_size

    def _second_of(self, req: TierRequest) -> dict[str, Any]:
        """What an insert of the request carries for a second pool: its state, or its window values."""
        pool = self.tier_capabilities.second_pool
        if isinstance(pool, StatePool):
            return {"state": req.state}
        if isinstance(pool, SlidingWindow):
            return {"window": req.window[: req.filled]}
        return {}

    def _free_own(self, slots: np.ndarray) -> None:
        if len(slots):
            self.allocator.free(slots)


class RequestTiers(TierRequestSteps, TieredRadixCache):
    """The reference tiered cache running its own request methods (with namespaces)."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, lifecycle="requests")


class RequestStateTiers(TierRequestSteps, TieredStateCache):
    """The reference tiered cache with a state pool running its own request methods (with
    namespaces): its inserts carry the request's state (the tier contract's "A second pool with
    the request methods")."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, second_pool=StatePool(),
                                         lifecycle="requests")


class RequestWindowTiers(TierRequestSteps, TieredWindowCache):
    """The reference tiered cache with a sliding window running its own request methods (with
    namespaces): its inserts carry the request's window values, and a publish whose re-match a
    tombstoned window stops short resumes there."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, supports_reset=True, second_pool=SlidingWindow(WINDOW),
                                         lifecycle="requests")
