"""Mutants of a tier cache's own request methods with a second pool (``lifecycle="requests"`` and a
``StatePool`` or a ``SlidingWindow``: the tier contract's "A second pool with the request
methods"), and the correct caches the tier machine must pass.

Each is a one-idea change to the request methods of
:class:`~radixcheck.reference.tier_requests.RequestStateTiers` or ``RequestWindowTiers`` (the
tree under them is the reference's); each needs both parts to show: without a second pool there
is no state or window for the request methods to get wrong, and with the tier calls
(``lifecycle="tree"``) the suite would carry the request's state or window itself.
``radixcheck.properties.tiers.mutants`` lists them with the other tier mutants.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radixcheck.oracles import violations as v
from radixcheck.properties.cache.contract import SlidingWindow, StatePool
from radixcheck.properties.tiers.contract import TierCapabilities, TierRequest
from radixcheck.properties.tiers.trusting import TrustsItsCallers
from radixcheck.reference.state_cache import NONE
from radixcheck.reference.tier_requests import RequestStateTiers, RequestWindowTiers
from radixcheck.reference.tiered_window_cache import WINDOW


class PoolRequestMutant:
    """The attributes the tier catalogue reads, for a mutant of either reference."""

    bug_class = ""
    sources: tuple[str, ...] = ()
    policies: tuple[str, ...] = ("write_through", "write_back")
    caught_by: type[BaseException] | tuple[type[BaseException], ...] = v.ContractViolation


STATE_REQUESTS = TierCapabilities(page_sizes=(1, 2), second_pool=StatePool(), lifecycle="requests")
WINDOW_REQUESTS = TierCapabilities(page_sizes=(1, 2), second_pool=SlidingWindow(WINDOW), lifecycle="requests")


class PublishWithoutState(PoolRequestMutant, RequestStateTiers):
    """A publish inserts the request's chunks without its state: the state goes to the tree only at
    the finish (as if the request's running state could not be shared before it ends). The page a
    publish ends has no state, though the request's forward reads it as its prefix's end."""

    tier_capabilities = STATE_REQUESTS
    bug_class = "publish-caches-kv-without-the-requests-state"
    caught_by = v.SecondValueViolation

    def cache_unfinished_req(self, req: TierRequest) -> None:
        state, req.state = req.state, NONE
        try:
            super().cache_unfinished_req(req)
        finally:
            req.state = state


class PublishStateOnAlignedPart(PoolRequestMutant, RequestStateTiers):
    """A publish whose filled tokens end inside a page inserts their page-aligned part with the
    request's state, the state after *all* its filled tokens: the last whole page keeps the state of
    a longer prefix (a resumed request would start a few tokens late). With chunks that end on a
    page boundary (page size 1) it is correct."""

    tier_capabilities = TierCapabilities(page_sizes=(2,), second_pool=StatePool(), lifecycle="requests")
    bug_class = "publish-gives-the-aligned-prefix-the-state-of-the-unaligned-end"
    caught_by = v.SecondValueViolation

    def _insert_req(self, req: TierRequest) -> int:
        aligned = req.filled // self.page_size * self.page_size
        prefix_len = self.insert(req.tokens[:aligned], req.slots[:aligned], namespace=req.namespace,
                                 priority=req.priority, state=req.state)
        self._free_own(req.slots[req.protected : prefix_len])
        return aligned


class AbortLeavesStateOnItsNode(PoolRequestMutant, RequestStateTiers):
    """A retract or an abort gives the request's state to the node it holds locked (the end of its
    cached prefix) when that node has none, as a finish hands its state to the tree: but the state is
    of every token it filled, past that node. A request resumed there starts from a later state."""

    tier_capabilities = STATE_REQUESTS
    bug_class = "abort-leaves-the-requests-state-on-its-prefix"
    caught_by = v.SecondValueViolation

    def cache_finished_req(self, req: TierRequest, insert: bool = True) -> None:
        node = req.handle
        if not insert and req.filled > req.protected and req.state != NONE and node.parent is not None:
            if node not in self.device_state:
                self.device_state[node] = req.state
        super().cache_finished_req(req, insert)


class PublishWithoutWindow(PoolRequestMutant, RequestWindowTiers):
    """A publish inserts the request's chunks with every window value tombstoned: the request's window
    goes to the tree only at the finish. The pages the publish puts on device have no live window,
    so its own re-match stops short of them where the request's window was live."""

    tier_capabilities = WINDOW_REQUESTS
    bug_class = "publish-caches-kv-without-the-requests-window"
    # its re-match stops short where the model has the window live: lost values (20w), or short at a
    # tombstone of a page the tree had, with the live window beyond (21)
    caught_by = (v.TierWindowViolation, v.TombstoneViolation)

    def cache_unfinished_req(self, req: TierRequest) -> None:
        window, req.window = req.window, np.full(len(req.window), NONE, dtype=np.int64)
        try:
            super().cache_unfinished_req(req)
        finally:
            req.window = window


class ShortRematchKeepsItsTail(PoolRequestMutant, RequestWindowTiers):
    """A publish whose re-match a tombstoned window stops short moves the request back to it, but
    keeps the slots it computed after the inserted pages (it means to reuse them, though it will
    recompute them): nobody frees them. With no window tombstoned on a page the tree already had,
    the re-match reaches the inserted pages and it is correct; so it is with whole-page chunks (page
    size 1: no tail after the inserted pages)."""

    tier_capabilities = TierCapabilities(page_sizes=(2,), second_pool=SlidingWindow(WINDOW), lifecycle="requests")
    bug_class = "short-window-rematch-leaks-the-requests-tail"
    caught_by = v.SlotViolation

    def cache_unfinished_req(self, req: TierRequest) -> None:
        aligned = self._insert_req(req)
        match = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        values = match.device_values
        if len(values) < aligned:  # the bug: the tail after the inserted pages leaves the row, unfreed
            req.slots, req.filled = req.slots[: len(values)].copy(), len(values)
        req.slots[: len(values)] = values
        self.inc_lock_ref(match.device_handle)
        self.dec_lock_ref(req.handle)
        req.handle, req.protected = match.device_handle, len(values)


class TrustingRequestStateTiers(TrustsItsCallers, RequestStateTiers):
    """Correct, with namespaces, its own request methods and a state pool, trusting its callers as
    SGLang's HiCache does (no handle checked; its lock counts asserted before every eviction)."""


class TrustingRequestWindowTiers(TrustsItsCallers, RequestWindowTiers):
    """Correct, with namespaces, its own request methods and a sliding window, trusting its callers."""


POOL_REQUEST_MUTANTS: list[type[Any]] = [PublishWithoutState, PublishStateOnAlignedPart, AbortLeavesStateOnItsNode,
                                         PublishWithoutWindow, ShortRematchKeepsItsTail]
CORRECT_POOL_REQUEST_TIERS: dict[str, Any] = {"RequestStateTiers": RequestStateTiers,
                                              "TrustingRequestStateTiers": TrustingRequestStateTiers,
                                              "RequestWindowTiers": RequestWindowTiers,
                                              "TrustingRequestWindowTiers": TrustingRequestWindowTiers}
