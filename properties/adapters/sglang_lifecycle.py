"""radixcheck adapters that drive SGLang 0.5.23's *request lifecycle* (CPU), beside its tree calls.

Select one with ``radixcheck audit radixcheck.properties.adapters.sglang_lifecycle:<factory>`` (the
audit environment, ``.audit-venv/``). Two kinds of factory (the contract's "The request lifecycle"):

``requests_<tree>``  ``Capabilities(lifecycle="requests")``: the suite's
                     :class:`~radixcheck.properties.cache.contract.Request` is mapped onto a real
                     SGLang ``Req`` (``managers.schedule_batch.Req``, built with a ``SamplingParams``
                     and nothing else) whose row lives in a real CPU ``ReqToTokenPool``, and each step
                     runs the scheduler's own functions of ``mem_cache/common.py``:

                     ============================  ===================================================
                     the contract                  SGLang 0.5.23
                     ============================  ===================================================
                     ``match_req(req)``            ``match_kv_cache(req, tree)`` (``init_next_round_input``:
                                                   ``cache_protected_len = prefix_len``)
                     ``lock_req(req)``             ``req.lock = tree.lock(req.last_node)``
                                                   (``_commit_prefill_admission``), then
                                                   ``ReqToTokenPool.alloc`` and the matched prefix
                                                   written into the row (``prepare_for_extend``)
                     a computed chunk              its slots written into the row, ``kv_committed_len``
                                                   = ``kv_allocated_len`` = ``extend_end`` = filled
                     ``cache_unfinished_req(req)`` ``checkpoint_kv_cache(req, tree)`` (formerly
                                                   ``cache_unfinished_req``; runs ``tree.checkpoint``)
                     ``cache_finished_req(req,     ``release_kv_cache(req, tree, checkpoint=insert)``:
                     insert)``                     a finish (``finished_reason`` set), or a retract /
                                                   abort / skipped insert (``checkpoint=False``, as
                                                   ``retract_req`` and the abort paths call it)
                     ============================  ===================================================

                     Tokens past the prompt (decode) go to ``req.output_ids``; ``refresh_fill_ids``
                     keeps ``full_untruncated_fill_ids`` as the scheduler's ``prepare_for_decode`` does.
                     The request reads back its row (``req_to_token``), ``kv.cache_protected_len`` and
                     ``last_node``. What a step frees goes through SGLang's ``free_kv_row`` /
                     ``free_segment`` into the forwarding allocator, so the suite counts every slot.
``tree_<tree>``      ``Capabilities(lifecycle="tree")``: the same trees as ``sglang_radix`` /
                     ``sglang_trees``, driven through the request steps with their tree calls, the
                     suite playing the scheduler.

Trees: ``radix_lru`` (``RadixCache``), ``unified_{python,rust}_lru`` (``UnifiedRadixCache`` FULL), and
for ``tree_`` also ``unified_swa_{python,rust}_lru`` (FULL+SWA, page size 1, as in ``sglang_trees``)
and ``pure_swa_lru``. ``*_eagle`` are the same trees built with ``is_eagle=True`` (bigram keys, see
the contract's "Key modes"): ``Capabilities(key_mode="bigram")``. ``requests_{radix,unified_python,
unified_rust}_priority`` are the ``requests_`` trees under ``--radix-eviction-policy priority``,
declared as ``policies.priority(prompt_bonus=1)``: the suite's ``Request.priority`` becomes the ``Req``'s
``priority`` (``Req(..., priority=)``), which SGLang's own request steps carry to the tree
(``cache_finished_req`` / ``cache_unfinished_req`` insert with ``priority=req.priority``), so the
order oracle judges a running request's pages by it. Those steps also insert the prompt's pages
again at ``req.priority + 1`` once a request cached tokens past its prompt (``checkpoint``: "so
eviction can drop the output KV without the prompt"), which the ``prompt_bonus`` declares.

Not built: Unified FULL+MAMBA through requests (its ``checkpoint`` of an unfinished request forks a
mamba state, the request owns a mamba slot from admission on: a second pool the contract does not
have yet; issue 32 part 3), and LoRA / salted requests (the lifecycle runs in the default namespace).
Findings and what each row shows: ``reports/findings/sglang_trees.md`` ("The request lifecycle").
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import sglang_radix as _sr
from radixcheck.properties.adapters import sglang_trees as _st
from radixcheck.properties.cache import policies as _policies
from radixcheck.properties.cache.contract import Capabilities, Request, SlotAllocator

ROWS = 16
"""Request rows of the CPU ``ReqToTokenPool`` (the suite keeps at most three lifecycle requests
running, plus the rows released ones leave behind for a while)."""
MAX_CONTEXT = 1 << 13
"""Tokens per row: longer than any lifecycle request the conformance machine sends."""

_rq: Any = None


def _load() -> Any:
    """SGLang's request, row pool and scheduler functions (once); the global server arguments a
    ``Req`` and ``release_kv_cache`` read (``get_serving()``, ``get_spec()``) are published as the
    scheduler does, with defaults (no speculative decoding), unless some are already in effect."""
    global _rq
    if _rq is not None:
        return _rq
    sg = _sr._load()
    import types
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
        from sglang.srt.mem_cache import common
        from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
        from sglang.srt.runtime_context import get_server_args
        from sglang.srt.sampling.sampling_params import SamplingParams
        from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
    try:
        get_server_args()
    except ValueError:  # "Global server args is not set yet!" (sglang_trees' Mamba sets the same ones)
        args = ServerArgs(model_path="dummy", page_size=1)
        args._mamba_cache_chunk_size = 64
        set_global_server_args_for_scheduler(args)
    _rq = types.SimpleNamespace(sg=sg, Req=Req, SamplingParams=SamplingParams, ReqToTokenPool=ReqToTokenPool, common=common,
                                FINISH_LENGTH=FINISH_LENGTH)
    return _rq


class _RequestSteps:
    """The contract's request steps over SGLang's scheduler functions (module docstring). Mixed
    into a ``sglang_radix`` adapter class whose tree was built with ``req_to_token_pool=self.pool``."""

    cache: Any
    page_size: int
    allocator: SlotAllocator

    def _make_pool(self) -> Any:
        rq = _load()
        self.pool = rq.ReqToTokenPool(size=ROWS, max_context_len=MAX_CONTEXT, device="cpu", enable_memory_saver=False)
        self._reqs: dict[int, Any] = {}  # id(Request) -> SGLang Req
        self._serial = 0
        return self.pool

    def _req(self, request: Request) -> Any:
        return self._reqs[id(request)]

    def match_req(self, request: Request) -> None:
        rq = _load()
        from array import array

        self._serial += 1
        req = rq.Req(f"radixcheck-{self._serial}", "", array("q", request.tokens), rq.SamplingParams(max_new_tokens=1 << 20),
                     priority=request.priority)
        req.refresh_fill_ids()
        rq.common.match_kv_cache(req, self.cache)
        req.kv.cache_protected_len = req.prefix_len  # init_next_round_input, for a tree that reports none
        prefix = _sr._np(self.cache.prefix_device_indices(req)) if req.prefix_len else np.empty(0, np.int64)
        self._reqs[id(request)] = req
        request.slots, request.filled, request.protected = prefix, len(prefix), req.kv.cache_protected_len
        request.handle = _sr.ROOT if self._is_root(req.last_node) else req.last_node

    def lock_req(self, request: Request) -> None:
        req = self._req(request)
        req.lock = self.cache.lock(req.last_node)
        self._alloc_row(req, request)

    def _alloc_row(self, req: Any, request: Request) -> None:
        """``prepare_for_extend``: a row, with the matched prefix in it. SGLang allocates it together
        with the first tokens it computes, so a request holds a row only once it has KV (a request
        that matched nothing gets one at its first chunk)."""
        if req.kv.holds_kv or request.filled == 0:
            return
        if self.pool.alloc([req]) is None:
            raise MemoryError("radixcheck adapter: no free ReqToTokenPool row")
        self.pool.req_to_token[req.kv.req_pool_idx].fill_(0)
        self._write_row(req, request, 0)

    def _write_row(self, req: Any, request: Request, start: int) -> None:
        """Copy what the request computed since ``start`` into its row, as the forward pass's
        allocation does, and say how far its KV is committed."""
        import torch

        if request.filled > MAX_CONTEXT:
            raise MemoryError(f"radixcheck adapter: a request of {request.filled} tokens exceeds the row ({MAX_CONTEXT})")
        fresh = np.asarray(request.slots[start : request.filled], dtype=np.int64)
        if len(fresh):
            self.pool.write((req.kv.req_pool_idx, slice(start, request.filled)), torch.from_numpy(fresh.astype(np.int32)))
        req.kv.kv_committed_len = req.kv.kv_allocated_len = request.filled
        req.extend_end = request.filled

    def _sync(self, request: Request) -> Any:
        """The request's new tokens (decode appends to ``output_ids``) and slots, into the ``Req``."""
        from array import array

        req = self._req(request)
        origin = len(req.origin_input_ids)
        if len(request.tokens) > origin + len(req.output_ids):
            req.output_ids.extend(array("q", request.tokens[origin + len(req.output_ids) :]))
        req.refresh_fill_ids()
        if req.kv.holds_kv:
            self._write_row(req, request, req.kv.kv_allocated_len)
        else:
            self._alloc_row(req, request)
        return req

    def _read_back(self, req: Any, request: Request) -> None:
        row = self.pool.req_to_token[req.kv.req_pool_idx, : request.filled]
        request.slots = row.numpy().astype(np.int64)
        request.protected = req.kv.cache_protected_len
        request.handle = _sr.ROOT if self._is_root(req.last_node) else req.last_node

    def cache_unfinished_req(self, request: Request) -> None:
        rq = _load()
        req = self._sync(request)
        if not req.kv.holds_kv:  # nothing computed yet: nothing to publish
            return
        rq.common.checkpoint_kv_cache(req, self.cache)
        self._read_back(req, request)

    def cache_finished_req(self, request: Request, insert: bool = True) -> None:
        rq = _load()
        req = self._sync(request)
        if not req.kv.holds_kv:
            # Ended before its first forward. SGLang admits and allocates in one step, so it has no
            # such path; release_kv_cache would only drop the lock (there is nothing to free).
            self.cache.unlock(req.lock)
            req.lock = None
        else:
            if insert:
                req.finished_reason = rq.FINISH_LENGTH(length=len(req.output_ids))
            rq.common.release_kv_cache(req, self.cache, checkpoint=insert)
        del self._reqs[id(request)]
        request.handle = None

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        self.pool.clear()
        self._reqs.clear()


class SGLangRadixRequests(_RequestSteps, _sr.SGLangRadixCache):
    """``RadixCache`` with its rows in a CPU ``ReqToTokenPool``, driven through the scheduler's steps."""

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru", is_eagle: bool = False):
        _sr._Adapter.__init__(self, allocator, page_size)
        params = self.sg.CacheInitParams(disable=False, req_to_token_pool=self._make_pool(),
                                         token_to_kv_pool_allocator=self.kv_allocator, page_size=page_size,
                                         eviction_policy=eviction_policy,
                                         eviction_policy_config=_sr._policy_config(eviction_policy), is_eagle=is_eagle)
        self.cache = self.sg.RadixCache(params)


class SGLangRadixEagle(_sr.SGLangRadixCache):
    """``RadixCache`` built with ``is_eagle=True``: keyed by bigrams (``key_mode="bigram"``)."""

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru"):
        _sr._Adapter.__init__(self, allocator, page_size)
        params = self.sg.CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=self.kv_allocator,
                                         page_size=page_size, eviction_policy=eviction_policy, is_eagle=True)
        self.cache = self.sg.RadixCache(params)


class SGLangUnifiedEagle(_st._UnifiedWith):
    """``UnifiedRadixCache`` (FULL) built with ``is_eagle=True`` (its tree core keys by bigrams)."""

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru", backend: str = "python"):
        _sr._Adapter.__init__(self, allocator, page_size)
        self.tx = _st._load()
        params = self.sg.CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=self.kv_allocator,
                                         page_size=page_size, eviction_policy=eviction_policy,
                                         tree_components=(self.sg.ComponentType.FULL,), tree_core_backend=backend, is_eagle=True)
        self.cache = self.sg.UnifiedRadixCache(params)
        core = type(self.cache.tree_core).__name__
        if core != {"python": "UnifiedTreeCore", "rust": "RustUnifiedTreeCore"}[backend]:
            raise RuntimeError(f"asked for the {backend} tree core, SGLang built {core}")
        if not self.cache.tree_core.is_eagle:
            raise RuntimeError("SGLang built the unified tree without bigram keys")
        self.backend = backend
        self._receipts: dict[Any, list[Any]] = {}


class SGLangUnifiedRequests(_RequestSteps, _st._UnifiedWith):
    """``UnifiedRadixCache`` (FULL) with its rows in a CPU ``ReqToTokenPool``."""

    def _req_to_token_pool(self):
        return self._make_pool()


def _factory(name: str, build: Callable[[SlotAllocator, int], Any], caps: Capabilities):
    return _sr._factory(name, build, caps)


def _caps(lifecycle: str, checks_locks: bool, page_sizes=_sr.PAGE_SIZES, key_mode: str = "tokens",
          policy: str = "lru") -> Capabilities:
    """``policy``: SGLang's ``--radix-eviction-policy`` the tree is built with, declared as the plain
    rows declare it (``sglang_radix.declared_policy``: ``"lru"``, or the named policy's key), except
    that SGLang's request steps give a prompt one more priority than its output (``checkpoint``'s
    prompt split: ``policies.priority(prompt_bonus=1)``, by design; findings/sglang_trees.md)."""
    declared = _policies.priority(prompt_bonus=1) if policy == "priority" and lifecycle == "requests" else _sr.declared_policy(policy)
    return Capabilities(supports_quarantine=False, page_sizes=page_sizes, checks_locks=checks_locks, lifecycle=lifecycle,
                        key_mode=key_mode, eviction_policy=declared)


REQUEST_POLICIES = ("priority",)
"""Policies besides LRU the ``requests_*`` rows are built with: ``priority``, the one whose key reads
what a running request carries (``req.priority``, which ``cache_finished_req`` /
``cache_unfinished_req`` pass to their inserts). The others' keys read only what the tree calls
already drive (``sglang_radix``'s rows)."""


FACTORIES: dict[str, Callable] = {
    "requests_radix_lru": _factory("requests_radix_lru", lambda a, p: SGLangRadixRequests(a, p), _caps("requests", False)),
    "tree_radix_lru": _factory("tree_radix_lru", lambda a, p: _sr.SGLangRadixCache(a, p), _caps("tree", False)),
    "eagle_radix_lru": _factory("eagle_radix_lru", lambda a, p: SGLangRadixEagle(a, p),
                                _caps("tree", False, key_mode="bigram")),
    "tree_pure_swa_lru": _factory("tree_pure_swa_lru", lambda a, p: _st.SGLangPureSWARadixCache(a, p),
                                  _caps("tree", False, page_sizes=(1,))),
}
for _b in ("python", "rust"):
    # The Rust core's node ids name nodes of other caches (sglang_findings.md #6, shown by
    # sglang_radix:unified_rust_lru): its lifecycle rows declare checks_locks=False to reach the lifecycle.
    _strict = _b == "python"
    FACTORIES[f"requests_unified_{_b}_lru"] = _factory(
        f"requests_unified_{_b}_lru", lambda a, p, b=_b: SGLangUnifiedRequests(a, p, backend=b), _caps("requests", _strict))
    FACTORIES[f"tree_unified_{_b}_lru"] = _factory(
        f"tree_unified_{_b}_lru", lambda a, p, b=_b: _sr.SGLangUnifiedRadixCache(a, p, backend=b), _caps("tree", _strict))
    FACTORIES[f"eagle_unified_{_b}_lru"] = _factory(
        f"eagle_unified_{_b}_lru", lambda a, p, b=_b: SGLangUnifiedEagle(a, p, backend=b), _caps("tree", _strict, key_mode="bigram"))
    # No max_cached_pages: the hidden window's peers come from the adapter's own 2**24-slot pool and
    # SGLang's mapping grows with the dense ids, as for sglang_trees' unified_swa_* (which dropped it).
    FACTORIES[f"tree_unified_swa_{_b}_lru"] = _factory(
        f"tree_unified_swa_{_b}_lru", lambda a, p, b=_b: _st.SGLangUnifiedSWA(a, p, backend=b),
        _caps("tree", _strict, page_sizes=(1,)))
for _p in REQUEST_POLICIES:
    FACTORIES[f"requests_radix_{_p}"] = _factory(
        f"requests_radix_{_p}", lambda a, p, q=_p: SGLangRadixRequests(a, p, eviction_policy=q), _caps("requests", False, policy=_p))
    for _b in ("python", "rust"):
        FACTORIES[f"requests_unified_{_b}_{_p}"] = _factory(
            f"requests_unified_{_b}_{_p}", lambda a, p, b=_b, q=_p: SGLangUnifiedRequests(a, p, eviction_policy=q, backend=b),
            _caps("requests", _b == "python", policy=_p))
del _b, _strict, _p

__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)

if os.environ.get("RADIXCHECK_SGLANG_LAZY") != "1" and importlib.util.find_spec("sglang") is not None:
    _load()

__all__ = ["FACTORIES", "SGLangRadixEagle", "SGLangRadixRequests", "SGLangUnifiedEagle", "SGLangUnifiedRequests", *FACTORIES]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.sglang_lifecycle:{_name}", _f.capabilities, file=sys.stdout)
