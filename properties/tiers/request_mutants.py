"""Mutants of a tiered cache's own request methods (``TierCapabilities(lifecycle="requests")``), and
the correct request-running tiered caches the tier machine must pass.

Each is a one-idea change to :class:`~radixcheck.reference.tier_requests.RequestTiers`'s request
methods (the tree under them is the reference's); ``radixcheck.properties.tiers.mutants`` lists
them with the other tier mutants, so the tier catalogue measures them. Each is a bug a cache can
only have in its request methods: driven with the tier calls (``lifecycle="tree"``) the suite
would do the step right itself.
"""

from __future__ import annotations

from typing import Any

from radixcheck.oracles import violations as v
from radixcheck.properties.tiers.contract import TierCapabilities, TierRequest
from radixcheck.properties.tiers.trusting import TrustsItsCallers
from radixcheck.reference.tier_requests import RequestTiers
from radixcheck.reference.tiered_cache import TierNode

REQUEST_TIERS = TierCapabilities(page_sizes=(1, 2), lifecycle="requests")  # the tier and its own request methods


class RequestTierMutant(RequestTiers):
    """A one-idea mutant of a tiered cache's request methods (the attributes the tier catalogue reads)."""

    tier_capabilities = REQUEST_TIERS
    bug_class = ""
    sources: tuple[str, ...] = ()
    policies: tuple[str, ...] = ("write_through", "write_back")
    caught_by: type[BaseException] | tuple[type[BaseException], ...] = v.ContractViolation


class LoadedByRequest(RequestTierMutant):
    """Notes, per request, the nodes its ``lock_req`` loaded back (what two of the mutants misuse)."""

    def lock_req(self, req: TierRequest) -> None:
        path = self._path(req.host_handle) if req.host_length else []
        super().lock_req(req)
        req.loaded = [n for n in path if n.loading is not None]  # type: ignore[attr-defined]


class AbortFreesLoadingPages(LoadedByRequest):
    """An abort (or a retract) frees, with the request's own slots, the device slots of the pages
    its admission is still loading back: it takes the load's destination for the request's own
    (SGLang's request row holds the loaded indices beside its computed ones). The load still fills
    them. With finishes only (a finish waits for its loads) it is correct."""

    bug_class = "abort-frees-the-pages-its-load-back-fills"
    sources = ()  # issue 39's "a retract or an abort while a load-back is in flight"
    caught_by = v.TransferInFlightViolation

    def cache_finished_req(self, req: TierRequest, insert: bool = True) -> None:
        loading: list[TierNode] = [n for n in getattr(req, "loaded", []) if n.loading is not None and n.device is not None]
        super().cache_finished_req(req, insert)
        if not insert:
            for node in loading:
                self.allocator.free(node.device)


class AbortKeepsItsLock(LoadedByRequest):
    """An abort (or a retract) of a request whose admission loaded pages back leaves its lock: it
    expects the load's completion to release it (as SGLang's load lock, ``ongoing_load_back``, is
    released in ``loading_check``), but that lock is the request's own. The pages can never be
    evicted though nobody holds them. With finishes only, or without a load-back, it is correct."""

    bug_class = "abort-after-a-load-back-leaves-its-lock"
    sources = ()
    # the page nobody holds is a candidate: a newer one goes first (4t's order), or nothing goes (4t's amount)
    caught_by = (v.LRUOrderViolation, v.EvictionAmountViolation)

    def cache_finished_req(self, req: TierRequest, insert: bool = True) -> None:
        if insert or not getattr(req, "loaded", []):
            super().cache_finished_req(req, insert)
            return
        self._free_own(req.slots[req.protected : req.filled])
        req.handle = None  # ... and no dec_lock_ref


class PublishSkipsRelockWhileBacking(RequestTierMutant):
    """A publish whose new pages' write-through backups are still in flight keeps the request's lock
    where it was: it counts on the pending writes to keep those pages on device. Once the writes
    land nothing holds them, and an eviction takes pages the request still reads. Under write-back
    (no backup at an insert) it is correct."""

    bug_class = "publish-does-not-relock-while-a-write-through-is-in-flight"
    sources = ()
    policies = ("write_through",)
    caught_by = v.RefcountViolation

    def cache_unfinished_req(self, req: TierRequest) -> None:
        aligned = self._insert_req(req)
        match = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        values = match.device_values
        req.slots[: len(values)] = values
        req.protected = len(values)
        if any(n.writing is not None for n in self._path(match.device_handle)):
            return  # the bug: the lock stays on the old handle
        self.inc_lock_ref(match.device_handle)
        self.dec_lock_ref(req.handle)
        req.handle = match.device_handle


class PublishReadsFreedDuplicates(RequestTierMutant):
    """A publish frees the request's copies of pages the tree already had but leaves its row pointing
    at them (mini-sglang #142 on the tiers): the request reads slots that are free, or another's.
    Without a duplicate (no other request published those pages first) it is correct."""

    bug_class = "publish-leaves-the-row-on-freed-duplicates"
    sources = ("mini-sglang #142",)
    caught_by = v.SlotViolation

    def cache_unfinished_req(self, req: TierRequest) -> None:
        aligned = self._insert_req(req)
        match = self.match_prefix(req.tokens[:aligned], namespace=req.namespace, priority=req.priority)
        self.inc_lock_ref(match.device_handle)
        self.dec_lock_ref(req.handle)
        req.handle, req.protected = match.device_handle, len(match.device_values)  # the row is not updated


class TrustingRequestTiers(TrustsItsCallers, RequestTiers):
    """Correct, running its own request methods with namespaces, trusting its callers as SGLang's
    HiRadixCache does (no handle checked; its lock counts asserted before every eviction)."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, lifecycle="requests")


REQUEST_TIER_MUTANTS: list[type[RequestTierMutant]] = [AbortFreesLoadingPages, AbortKeepsItsLock,
                                                       PublishSkipsRelockWhileBacking, PublishReadsFreedDuplicates]
CORRECT_REQUEST_TIERS: dict[str, Any] = {"RequestTiers": RequestTiers, "TrustingRequestTiers": TrustingRequestTiers}
