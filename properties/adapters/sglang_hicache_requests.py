"""SGLang's HiCache driven through its own request methods (``TierCapabilities(lifecycle="requests")``).

The ``hicache_*_requests`` factories of :mod:`~radixcheck.properties.adapters.sglang_hicache` build
this class: the same ``UnifiedRadixCache`` + ``init_hicache`` (FULL) with the suite's transfers and
host slots, its request rows in a real CPU ``ReqToTokenPool``, and each step of the tier contract's
"The request lifecycle on the tiers" run by the functions SGLang 0.5.23's scheduler runs:

============================  ===========================================================================
the contract                  SGLang 0.5.23 (CPU; nothing of it copied)
============================  ===========================================================================
``match_req(req)``            ``mem_cache/common.py:match_kv_cache`` on a real ``Req`` (``_request``: the
                              namespace in ``cache_salt``/``extra_key`` + ``lora_id``, as
                              ``sglang_hicache`` keys one); the host part is ``req.host_hit_length``,
                              ending at ``req.best_match_node`` (what ``init_load_back`` is given)
``lock_req(req)``             ``managers/schedule_policy.py:PrefillAdder.add_one_req``: under its
                              temporary pin of ``req.last_node`` (``_lock_node``) and, when the request
                              needs a load-back (``Req.needs_host_load_back``), its host pin of
                              ``req.best_match_node`` (``_lock_node(..., lock_host=True)``),
                              ``UnifiedRadixCache.init_load_back``; then ``prefix_len +=
                              host_loaded_length``, ``cache_protected_len = prefix_len``
                              (``load_back_is_cache_owned``) and the request's lock
                              (``_commit_prefill_admission``: ``req.lock = tree_cache.lock(req.last_node)``);
                              then ``ready_to_load_host_cache()`` (``Scheduler``'s batch build starts the
                              loads: ``new_batch.hicache_consumer_index``). A load-back the suite declines
                              (``host_length`` zeroed) is not asked for: the admission only locks.
``cache_unfinished_req(req)`` ``common.py:checkpoint_kv_cache`` (``UnifiedRadixCache.checkpoint``), then
                              ``flush_pending_backups()`` (the merged D2H submission
                              ``check_hicache_events`` makes for the chunked-prefill stash)
``cache_finished_req(req,     ``common.py:release_kv_cache(req, tree, checkpoint=insert)`` then
insert)``                     ``flush_pending_backups()``
============================  ===========================================================================

The row, the ``Req``'s fill ids and its committed length are kept as ``sglang_lifecycle``'s
``requests_unified_*`` rows keep them (:class:`~radixcheck.properties.adapters.sglang_lifecycle._RequestSteps`,
reused here); what a step frees goes through SGLang's ``free_kv_row`` into the forwarding allocator,
so the suite counts every slot. The tier calls (``match_prefix``, ``insert``, ``load_back``, locks,
``evict``, ``evict_host``, completions) stay those of
:class:`~radixcheck.properties.adapters.sglang_hicache.SGLangHiCache`: the suite still evicts and
delivers transfers through them.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import numpy as np

from radixcheck.properties.adapters import sglang_hicache as _sh
from radixcheck.properties.adapters import sglang_lifecycle as _sl
from radixcheck.properties.adapters import sglang_radix as _sr
from radixcheck.properties.tiers.contract import TierRequest


def _params() -> Any:
    from sglang.srt.mem_cache.base_prefix_cache import InitLoadBackParams

    return InitLoadBackParams


class SGLangHiCacheRequests(_sl._RequestSteps, _sh.SGLangHiCache):
    """``UnifiedRadixCache`` + ``init_hicache`` whose running requests are SGLang ``Req`` objects."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._roots: set[Any] = set()  # the tenants' roots (extra_key) met so far: handle ROOT
        super().__init__(*args, **kwargs)

    def _req_to_token_pool(self) -> Any:
        return self._make_pool()

    def _is_root(self, node: Any) -> bool:
        return node == self.cache.root_node_handle() or node in self._roots

    def _new_req(self, tokens: tuple[int, ...], namespace: Any) -> Any:
        """A ``Req`` on ``tokens``: under ``namespace`` as ``sglang_hicache`` keys one (its ``_request``)."""
        from array import array

        rq = _sl._load()
        self._serial += 1
        ids = array("q", tokens)
        if self.salt_field is None:
            if namespace is not None:
                raise ValueError(f"namespace={namespace!r} for a factory without namespaces (it is never sent one)")
            return rq.Req(f"radixcheck-hicache-req-{self._serial}", "", ids, rq.SamplingParams(max_new_tokens=1 << 20))
        return _sh._request(ids, namespace, self.salt_field)

    def match_req(self, request: TierRequest) -> None:  # type: ignore[override]
        rq = _sl._load()
        req = self._new_req(request.tokens, request.namespace)
        req.refresh_fill_ids()
        rq.common.match_kv_cache(req, self.cache)
        req.kv.cache_protected_len = req.prefix_len  # init_next_round_input
        self._roots.add(self.cache.root_node_handle(req.extra_key))
        self._reqs[id(request)] = req
        self._read_prefix(req, request)
        request.host_length = int(req.host_hit_length)
        request.host_handle = req.best_match_node if request.host_length else None

    def _read_prefix(self, req: Any, request: TierRequest) -> None:
        """The request's cached prefix (device part, loading pages included) before it has a row."""
        prefix = _sr._np(self.cache.prefix_device_indices(req)) if req.prefix_len else np.empty(0, np.int64)
        request.slots, request.filled, request.protected = prefix, len(prefix), req.kv.cache_protected_len
        request.handle = _sr.ROOT if self._is_root(req.last_node) else req.last_node

    @contextmanager
    def _pin(self, node: Any, host: bool = False):
        """``PrefillAdder._lock_node``: a temporary lock (and host lock) while admission decides."""
        host_receipt = self.cache.inc_host_lock_ref(node).to_dec_params() if host else None
        try:
            lock = self.cache.lock(node)
            try:
                yield
            finally:
                self.cache.unlock(lock)
        finally:
            if host_receipt is not None:
                self.cache.dec_host_lock_ref(node, host_receipt)

    def lock_req(self, request: TierRequest) -> None:  # type: ignore[override]
        req = self._req(request)
        with self._pin(req.last_node):
            if request.host_length and req.needs_host_load_back():
                with self._pin(req.best_match_node, host=True):
                    loaded = self.cache.init_load_back(_params()(
                        best_match_node=req.best_match_node, host_hit_length=req.host_hit_length, req=req))
                if loaded is None:
                    raise AssertionError("init_load_back returned None (buffer mode only), outside buffer mode")
                req.host_loaded_length, req.last_node = loaded
                req.prefix_len += req.host_loaded_length
                if self.cache.load_back_is_cache_owned():
                    req.kv.cache_protected_len = req.prefix_len
            req.lock = self.cache.lock(req.last_node)  # _commit_prefill_admission
        self.cache.ready_to_load_host_cache()  # the batch build starts the queued loads
        self._read_prefix(req, request)
        request.host_length, request.host_handle = 0, None
        self._alloc_row(req, request)

    def cache_unfinished_req(self, request: TierRequest) -> None:  # type: ignore[override]
        super().cache_unfinished_req(request)
        self.cache.flush_pending_backups()

    def cache_finished_req(self, request: TierRequest, insert: bool = True) -> None:  # type: ignore[override]
        super().cache_finished_req(request, insert)
        self.cache.flush_pending_backups()

    def __repr__(self) -> str:
        return super().__repr__().replace("SGLangHiCache(", "SGLangHiCacheRequests(", 1)


__all__ = ["SGLangHiCacheRequests"]
