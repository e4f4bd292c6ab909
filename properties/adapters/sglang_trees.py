"""radixcheck adapters for SGLang's *other* radix trees (sglang 0.5.23, CPU).

``sglang_radix.py`` covers ``RadixCache`` and ``UnifiedRadixCache`` with the FULL component.
This module covers every other prefix tree sglang 0.5.23 builds, reusing that module's
conversion layer (:class:`~radixcheck.properties.adapters.sglang_radix._Adapter`, its
``_ForwardingAllocator``, ``ROOT``, ``_factory``) by import. Select a factory with
``radixcheck audit radixcheck.properties.adapters.sglang_trees:<factory>``; the findings are
in ``reports/findings/sglang_trees.md``.

Which trees exist in 0.5.23
---------------------------
The per-model tree files of older releases (``swa_radix_cache.py``, ``mamba_radix_cache.py``,
``lora_radix_cache.py``, ``hiradix_cache.py``, ``radix_cache_cpp.py``) are gone: SWA, Mamba and
HiCache are *components* / attachments of ``UnifiedRadixCache``, LoRA adapters are namespaces
(``RadixKey.extra_key``) of the one tree, and the C++ tree was replaced by the Rust tree core.
``mem_cache/registry.py`` (``default_radix_cache_factory``) builds one of:

====================================  =======================================================
tree                                  here
====================================  =======================================================
``RadixCache``                        ``sglang_radix.py``
``UnifiedRadixCache`` FULL            ``sglang_radix.py``
``PureSWARadixCache``                 ``pure_swa_*`` (all-SWA models; a RadixCache subclass)
``UnifiedRadixCache`` FULL+SWA        ``unified_swa_{python,rust}_*`` (hybrid SWA models)
``UnifiedRadixCache`` FULL+MAMBA      ``unified_mamba_{python,rust}_*`` (hybrid SSM models)
LoRA namespaces (``extra_key``)       ``*_lora`` (RadixCache and Unified FULL, both cores)
``UnifiedRadixCache`` + HiCache       ``sglang_hicache.py`` (a tier target: ``properties/tiers``)
``LMCacheUnifiedRadixCache``          not built: needs the ``lmcache`` package (GPU-only)
``FlexKVRadixCache``                  not built: needs the ``flexkv`` package (GPU-only)
C128 / MLX aux components             not built: NPU-only / Apple-MLX-only components
====================================  =======================================================

(the findings document says exactly which call fails for the ones not built).

Factories (each ``factory(allocator, page_size) -> cache`` with a ``capabilities`` attribute)
---------------------------------------------------------------------------------------------
``pure_swa_lru``, ``pure_swa_lru_strict``
    ``PureSWARadixCache`` (``sliding_window_size=4``) over the suite's slot pool.
    ``checks_locks`` False / True as for ``radix_lru`` / ``radix_lru_strict``: it inherits
    ``RadixCache``'s locking. ``page_sizes=(1,)``: the server pairs it only with
    ``PureSWATokenToKVPoolAllocator``, which asserts ``page_size == 1``.
``unified_swa_{python,rust}_lru_window`` (+ ``_lenient``)
    ``UnifiedRadixCache`` with components FULL and SWA (``sliding_window_size=4``), Python or
    Rust tree core, with the suite's window pool: ``second_pool=SlidingWindow(window=4,
    pins_whole_nodes=True)`` (the hybrid contract: ``insert(..., window=)``, a match answers the
    window, ``evict_window``) and ``lifecycle="tree"`` (requests published chunk by chunk under
    their lock, retracted, aborted, their window sliding as they run: the tree calls a scheduler
    makes). ``checks_locks=True`` like ``unified_*_lru`` (the unified tree
    refuses an unmatched unlock); ``_lenient`` declares False. ``page_sizes=(1,)`` (see below).
``unified_swa_{python,rust}_lru`` (+ ``_lenient``)
    The same tree with the window hidden: the adapter keeps a private window pool and gives
    every newly cached token a live window slot (the window never slides), so it is a one-pool
    target of the plain contract, production-scale test included.
``unified_mamba_{python,rust}_lru`` (+ ``_lenient``)
    ``UnifiedRadixCache`` with components FULL and MAMBA, with the suite's state pool:
    ``second_pool=StatePool(stateless_inserts=False)`` (``insert(..., state=)``, a match answers
    the state it ends at, ``evict_states``). ``page_sizes=(1,)``: SGLang's ``MambaComponent``
    asserts ``page_size == 1`` unless the mamba extra buffer is on.
``radix_lru_lora``, ``unified_{python,rust}_lru_lora``
    The same trees as ``sglang_radix.radix_lru`` / ``unified_*_lru`` with every key in one
    LoRA namespace (``RadixKey(..., extra_key=LORA_ID)``), as ``Req`` builds keys for a
    request that names a LoRA adapter. Capabilities as their ``sglang_radix`` counterparts.

No tree has ``evict_prefix``: every factory declares ``supports_quarantine=False``. The
adapters add no checks to SGLang's locking, matching or eviction; input validation at the
type boundary is ``sglang_radix._Adapter``'s (see that module), so ``validates_input`` stays
True on the adapter's account, as there.

What the extra components mean for the contract
------------------------------------------------
The contract's values are the FULL (plain attention) KV slots: the suite's
:class:`SlotAllocator` is the FULL pool, sizes are the FULL component's (``total_size()``
returns ``(full, aux)``; the adapters report ``full``; ``evictable_size`` and
``protected_size`` are the FULL component's in SGLang already). The second pool is the
suite's too (``second_allocator=``, the contract's "A second pool"):

* **SWA** keeps, besides the FULL slots, a sliding-window KV slot ("SWA peer") per token,
  found through the allocator's ``full_to_swa_index_mapping``. A match is valid only where the
  last ``sliding_window_size`` tokens still have SWA KV (``SWAComponent.create_match_validator``);
  SWA KV is dropped ("tombstoned") by an SWA eviction (``evict_window(n)`` =
  ``EvictParams(swa_num_tokens=n)``) or never given, for tokens the request already freed
  (``window[i] == -1``, sent as ``InsertParams`` ``component_evicted_seqlens[SWA]``, SGLang's
  ``swa_evicted_seqlen``: the ``-1`` s must come first among the new tokens, as a request frees
  its window from its start). A lock pins whole nodes up to the window
  (``pins_whole_nodes=True``). Inserts pass ``prev_prefix_len=len(key)`` (the caller keeps its
  duplicates), so a tombstone is never revived by an insert: ``refills_tombstones=False``.
* **Mamba** keeps one recurrent-state slot per *node that ends a cached request*; a prefix
  can be resumed only where a state exists, so ``match_prefix`` returns the longest cached
  prefix *that ends at a mamba state* (``StatePool``). SGLang caches KV only with the state
  after it (``commit_insert_component_data`` asserts ``mamba_value``): ``stateless_inserts=False``,
  and ``insert(..., state=-1)`` is refused.

Stand-ins and differences (each keeps SGLang's behaviour on the tree's code path)
---------------------------------------------------------------------------------
* Everything ``sglang_radix.py`` lists (triton/torchvision stand-ins, ``RadixKey`` from
  ``array('q')``, ``torch.int64`` values, the forwarding FULL allocator, root sentinel,
  ``reset`` freeing the tree's slots first, ``prev_prefix_len=len(key)`` on unified
  inserts, receipts for unified unlocks).
* ``_SWAPoolStub``: a ``BaseSWAKVPool`` with no KV buffers (the tree never reads or writes KV
  data; every buffer accessor raises). It holds the ``full_to_swa_index_mapping`` the
  allocator registers and translates through it, which is all the SWA allocator and component
  use it for.
* SWA allocator: SGLang's own ``SWATokenToKVPoolAllocator`` (CPU, ``need_sort=False``) whose
  two sides are forwarding allocators: ``full_attn_allocator`` frees to the suite's KV pool,
  ``swa_attn_allocator`` to the suite's window pool, SGLang's SWA id ``k`` being window slot
  ``k - 1`` (SGLang reads 0 as "no SWA peer"; a free of 0 reaches the suite as -1 and is
  refused, which is how a stale mapping shows). SGLang's tree and mapping see dense local FULL
  ids (:class:`_DenseIds`): the mapping is a tensor indexed by FULL id, and over the suite's
  2**24 ids it would cost 128 MB per cache. The adapter writes the new tokens' mapping before
  each insert (the server's allocator pairs a FULL slot with its SWA peer when it hands it out);
  the tree's own code clears it on every SWA free. ``reset`` frees the tree's FULL slots and its
  live SWA peers (the mapped ones) to the suite, then clears the mapping.
* Why SWA runs at page size 1 only: SGLang's paged SWA frees work on whole pages of FULL ids
  (``free_index[::page_size]`` stands for its page), which presumes the paged allocator's
  aligned runs of slot ids; the suite's slot ids are arbitrary, so at page size > 1 the SWA
  side would free other slots' peers because of the adapter, not the engine.
* Mamba: a real ``HybridReqToTokenPool`` on CPU with a one-layer Mamba2 state of a few
  elements per slot (``_MAMBA_SHAPE``); global ``ServerArgs(model_path="dummy")`` set with
  ``_mamba_cache_chunk_size = 64`` if none are set (``MambaComponent`` reads them at
  construction; 64 is FLA's chunk size, what SGLang's own unit-test fixture presets). Its
  ``mamba_allocator`` is :class:`_ForwardingStates`, the suite's state pool. Each insert brings
  the finishing request's state (``InsertParams.mamba_value``); a state the tree does not adopt
  is the caller's to free (the contract's caller, as the scheduler's ``cleanup_after_caching_req``).
* LoRA: keys carry ``extra_key=LORA_ID``; the root test uses ``root_node_handle(LORA_ID)``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import sglang_radix as _sr
from radixcheck.properties.adapters.sglang_radix import ROOT, _factory, _np
from radixcheck.properties.cache.contract import Capabilities, SlidingWindow, SlotAllocator, StatePool

PIP_REQUIREMENTS: list[str] = []
"""No packages beyond the audit environment's: every tree built here needs only sglang/torch."""

SLIDING_WINDOW = 4
"""Tokens of sliding window: shorter than most suite sequences, so windows split and lock."""
LORA_ID = "0123456789abcdef0123456789abcdef"
"""A LoRA namespace as ``Req`` appends it to ``extra_key`` (a 32-hex-digit ``lora_id``)."""
_SWA_MAPPING0 = 1 << 17
_MAMBA_SLOTS = 4096
_MAMBA_SHAPE = dict(intermediate_size=8, n_groups=1, num_heads=1, head_dim=8, state_size=2, conv_kernel=2)

_tx: Any = None  # the extra sglang names this module uses, filled by _load()


def _load() -> Any:
    global _tx
    if _tx is not None:
        return _tx
    sg = _sr._load()
    import types
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
        from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
        from sglang.srt.mem_cache.base_swa_memory_pool import BaseSWAKVPool
        from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool
        from sglang.srt.mem_cache.pure_swa_radix_cache import PureSWARadixCache
        from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    class _SWAPoolStub(BaseSWAKVPool):
        """A BaseSWAKVPool without KV buffers: it only keeps and applies the index mapping."""

        full_kv_pool = None
        swa_kv_pool = None

        def __init__(self) -> None:  # no buffers: the tree never touches KV data
            self.full_to_swa_index_mapping = None

        def register_mapping(self, full_to_swa_index_mapping) -> None:
            self.full_to_swa_index_mapping = full_to_swa_index_mapping

        def translate_loc_from_full_to_swa(self, kv_indices):
            return self.full_to_swa_index_mapping[kv_indices]

        def _no_kv(self, *args, **kwargs):
            raise NotImplementedError("radixcheck's SWA pool stand-in holds no KV data")

        get_state_buf_infos = get_kv_buffer = get_key_buffer = get_value_buffer = set_kv_buffer = _no_kv

    _tx = types.SimpleNamespace(
        sg=sg,
        torch=sg.torch,
        PureSWARadixCache=PureSWARadixCache,
        SWATokenToKVPoolAllocator=SWATokenToKVPoolAllocator,
        SWAPoolStub=_SWAPoolStub,
        HybridReqToTokenPool=HybridReqToTokenPool,
        Mamba2CacheParams=Mamba2CacheParams,
        Mamba2StateShape=Mamba2StateShape,
        ServerArgs=ServerArgs,
        set_global_server_args_for_scheduler=set_global_server_args_for_scheduler,
    )
    return _tx


def _page_one(page_size: int, what: str) -> None:
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"page_size must be a positive int, got {page_size!r}")
    if page_size != 1:
        raise ValueError(f"{what} is adapted at page_size 1 only (see sglang_trees' docstring), got {page_size}")


# -- PureSWARadixCache ------------------------------------------------------------------


class SGLangPureSWARadixCache(_sr.SGLangRadixCache):
    """``PureSWARadixCache``: RadixCache with an all-SWA eviction entry point."""

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru"):
        _page_one(page_size, "PureSWARadixCache")
        _sr._Adapter.__init__(self, allocator, page_size)
        tx = _load()
        params = self.sg.CacheInitParams(
            disable=False,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=self.kv_allocator,
            page_size=page_size,
            eviction_policy=eviction_policy,
            sliding_window_size=SLIDING_WINDOW,
        )
        self.cache = tx.PureSWARadixCache(params)


# -- UnifiedRadixCache with extra components ----------------------------------------------


class _UnifiedWith(_sr.SGLangUnifiedRadixCache):
    """``UnifiedRadixCache`` with FULL plus the components a subclass names."""

    components: tuple[str, ...] = ()

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru", backend: str = "python"):
        _sr._Adapter.__init__(self, allocator, page_size)
        self.tx = _load()
        CT = self.sg.ComponentType
        params = self.sg.CacheInitParams(
            disable=False,
            req_to_token_pool=self._req_to_token_pool(),
            token_to_kv_pool_allocator=self._kv_allocator(),
            page_size=page_size,
            eviction_policy=eviction_policy,
            tree_components=(CT.FULL, *(getattr(CT, c) for c in self.components)),
            tree_core_backend=backend,
            sliding_window_size=SLIDING_WINDOW if "SWA" in self.components else None,
        )
        self.cache = self.sg.UnifiedRadixCache(params)
        core = type(self.cache.tree_core).__name__
        want = {"python": "UnifiedTreeCore", "rust": "RustUnifiedTreeCore"}[backend]
        if core != want:  # SGLang silently falls back to Python when Rust is unusable
            raise RuntimeError(f"asked for the {backend} tree core, SGLang built {core}")
        self.backend = backend
        self._receipts: dict[Any, list[Any]] = {}

    def _req_to_token_pool(self):
        return None

    def _kv_allocator(self):
        return self.kv_allocator


class _DenseIds:
    """A bijection between the suite's slot ids (anywhere in its 2**24-slot pool) and dense local
    ids ``1, 2, ...`` that SGLang's tree and its FULL-to-SWA mapping see. SGLang's mapping is a
    tensor indexed by FULL id; over the suite's ids it would be 128 MB per cache, over local ids it
    is as long as the slots in play. Local id 0 is never handed out (SGLang's padding slot)."""

    def __init__(self) -> None:
        self.to_local: dict[int, int] = {}
        self.to_suite: list[int] = [-1]  # local 0: the padding slot, never a suite slot
        self.spare: list[int] = []

    def local(self, suite_ids: Sequence[int]) -> tuple[list[int], list[int]]:
        """The local ids of ``suite_ids`` (assigned where new), and the positions assigned now."""
        out, fresh = [], []
        for i, s in enumerate(suite_ids):
            loc = self.to_local.get(s)
            if loc is None:
                loc = self.spare.pop() if self.spare else len(self.to_suite)
                if loc == len(self.to_suite):
                    self.to_suite.append(s)
                else:
                    self.to_suite[loc] = s
                self.to_local[s] = loc
                fresh.append(i)
            out.append(loc)
        return out, fresh

    def suite(self, local_ids: Sequence[int]) -> list[int]:
        return [self.to_suite[loc] for loc in local_ids]

    def release(self, local_ids: Sequence[int]) -> list[int]:
        """Forget ``local_ids`` (their slots go back to the suite); returns their suite ids. A local
        id freed twice, or one never assigned, reads as suite id -1 (the suite's allocator refuses it)."""
        out = []
        for loc in local_ids:
            s = self.to_suite[loc] if 0 < loc < len(self.to_suite) else -1
            if s >= 0 and self.to_local.get(s) == loc:
                del self.to_local[s]
                self.to_suite[loc] = -1
                self.spare.append(loc)
            out.append(s)
        return out

    def clear(self) -> None:
        self.__init__()


def _flat(index) -> list[int]:
    if hasattr(index, "numpy"):
        index = index.detach().cpu().numpy()
    return np.asarray(index, dtype=np.int64).reshape(-1).tolist()


class SGLangUnifiedSWA(_UnifiedWith):
    """``UnifiedRadixCache`` with FULL + SWA over SGLang's own ``SWATokenToKVPoolAllocator``, both of
    whose sides forward to the suite: FULL slots to ``allocator`` (through :class:`_DenseIds`), SWA
    slots to ``second_allocator`` (SGLang's SWA id = the suite's window slot + 1, so that 0 stays
    SGLang's "no SWA peer"). Given ``second_allocator``, it is a hybrid target
    (``SlidingWindow``: ``insert(..., window=)``, a match answers the window, ``evict_window``);
    without it (``hidden=True``) the adapter keeps a private window pool and gives every newly
    cached token a live window slot (the window never slides: the plain contract)."""

    components = ("SWA",)

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru", backend: str = "python",
                 second_allocator: SlotAllocator | None = None):
        _page_one(page_size, "UnifiedRadixCache FULL+SWA")
        self.hidden = second_allocator is None
        self.second = SlotAllocator(1 << 24, seed=1, churned=False) if self.hidden else second_allocator
        self.ids = _DenseIds()
        super().__init__(allocator, page_size, eviction_policy, backend)

    def _kv_allocator(self):
        tx = _load()
        torch = tx.torch
        ids, suite, second = self.ids, self.allocator, self.second

        class _Full(self.sg.ForwardingAllocator):
            """FULL side: local ids back to the suite's slots."""

            def free(self, free_index) -> None:
                if self.free_group is not None:
                    self.free_group.append(free_index)
                    return
                gone = ids.release(_flat(free_index))
                if gone:
                    suite.free(np.asarray(gone, dtype=np.int64))

        class _Window(self.sg.ForwardingAllocator):
            """SWA side: SGLang's SWA id ``k`` is the suite's window slot ``k - 1``."""

            def free(self, free_index) -> None:
                if self.free_group is not None:
                    self.free_group.append(free_index)
                    return
                gone = [k - 1 for k in _flat(free_index)]
                if gone:
                    second.free(np.asarray(gone, dtype=np.int64))

            free_page_ids = free  # page size 1: a page id is a slot id

            def alloc(self, need_size: int):
                return torch.from_numpy(second.alloc(need_size) + 1)

            def available_size(self) -> int:
                return second.available()

        swa = tx.SWATokenToKVPoolAllocator(
            _SWA_MAPPING0, _SWA_MAPPING0, self.page_size, torch.int64, "cpu", tx.SWAPoolStub(), False
        )
        swa.full_attn_allocator = _Full(suite, self.page_size)
        swa.swa_attn_allocator = _Window(second, self.page_size)
        self.swa = swa
        return swa

    def _grow_mapping(self, max_id: int) -> None:
        torch = self.tx.torch
        mapping = self.swa.full_to_swa_index_mapping
        usable = len(mapping) - 1 - self.page_size  # layout: size + page_size entries, then -1
        if max_id < usable:
            return
        new_size = max(2 * usable, max_id + 1)
        grown = torch.cat([mapping[:-1], torch.zeros(new_size - usable, dtype=torch.int64), mapping[-1:]])
        self.swa.full_to_swa_index_mapping = grown
        self.swa.get_kvcache().register_mapping(grown)

    def _window(self, window, n: int) -> list[int]:
        if window is None:
            return [-1] * n
        arr = np.asarray(window)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"window must be a 1-D integer array, got {arr.dtype}{arr.shape}")
        if len(arr) != n:
            raise ValueError(f"window has {len(arr)} slots for {n} tokens")
        if n and int(arr.min()) < -1:
            raise ValueError(f"window holds slot id {int(arr.min())} (only ids >= 0, or -1 for none)")
        return arr.astype(np.int64).tolist()

    def insert(self, tokens: Sequence[int], values, window=None) -> int:
        key = self._key(tokens)
        n = len(key)
        suite_ids = _np(self._value(values, n)).tolist()
        if self.hidden:
            if window is not None:
                raise TypeError("this factory hides the window pool: insert takes no window=")
        w = self._window(window, n)
        cached = int(self.cache.tree_core.match_full_device_prefix(key)[0])  # read-only: no split, no recency
        new = w[cached:]
        if self.hidden:
            new = (self.second.alloc(n - cached)).tolist()
        dead = max((i + 1 for i, k in enumerate(new) if k < 0), default=0)  # SGLang's swa_evicted_seqlen, from `cached`
        if any(k >= 0 for k in new[:dead]):
            raise ValueError("window: a newly cached token without a window value after one with a value (the request "
                             "frees its window from its start: -1s first)")
        local, fresh = self.ids.local(suite_ids)
        torch = self.tx.torch
        self._grow_mapping(max(local, default=0))
        if len(new) > dead:  # the new tokens' SWA peers, as the server's allocator pairs them when it hands them out
            self.swa.set_full_to_swa_mapping(torch.tensor(local[cached + dead:], dtype=torch.int64),
                                             torch.tensor(new[dead:], dtype=torch.int64) + 1)
        params = self.sg.InsertParams(key=key, value=torch.tensor(local, dtype=torch.int64), prev_prefix_len=n)
        params.set_evicted_seqlen(self.sg.ComponentType.SWA, cached + dead if dead else 0)
        try:
            result = self.cache.insert(params)
        finally:
            mine = [local[i] for i in fresh if i < cached]  # the caller's duplicates: not the tree's, forget them
            self.ids.release(mine)
        return int(result.prefix_len)

    def match_prefix(self, tokens: Sequence[int]):
        result = self.cache.match_prefix(self.sg.MatchPrefixParams(key=self._key(tokens)))
        node = result.last_device_node
        local = _flat(self.cache.path_device_indices(node))
        if len(local) != result.device_prefix_len:
            raise AssertionError(f"SGLang reported a {result.device_prefix_len}-token match but its path holds {len(local)} slots")
        values = np.asarray(self.ids.suite(local), dtype=np.int64)
        handle = ROOT if self._is_root(node) else node
        if self.hidden:
            return values, handle
        window: list[int] = []
        if handle is not ROOT:
            for info in self.cache.tree_core.collect_path_info([node])[0]:
                swa = self.cache.tree_core.get_component_device_value(info.node_id, self.sg.ComponentType.SWA)
                span = info.path_end - info.path_start
                window += [-1] * span if swa is None else [k - 1 for k in _flat(swa)]
        if len(window) != len(values):
            raise AssertionError(f"SGLang's path holds {len(values)} FULL slots but {len(window)} SWA entries")
        return values, handle, np.asarray(window, dtype=np.int64)

    def evict_window(self, num_tokens: int) -> int:
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, (int, np.integer)):
            raise TypeError(f"num_tokens must be an int, got {num_tokens!r}")
        if num_tokens < 0:
            raise ValueError(f"num_tokens must be >= 0, got {num_tokens}")
        result = self.cache.evict(self.sg.EvictParams(swa_num_tokens=int(num_tokens)))
        return int(result.swa_num_tokens_evicted)

    def _tree_locals(self) -> list[int]:
        return _flat(super()._tree_values()) if self.total_size() else []

    def reset(self) -> None:
        """Free the tree's FULL slots and its live SWA ones (a FULL slot whose mapping is non-zero:
        tombstoning clears it), then SGLang's reset; the server's flush clears the whole allocator."""
        held = self._tree_locals()
        if held:
            mapping = self.swa.full_to_swa_index_mapping
            peers = [k - 1 for k in _flat(mapping[self.tx.torch.tensor(held, dtype=self.tx.torch.int64)]) if k > 0]
            self.allocator.free(np.asarray(self.ids.suite(held), dtype=np.int64))
            if peers:
                self.second.free(np.asarray(peers, dtype=np.int64))
        self.cache.reset()
        self._receipts.clear()
        self.swa.full_to_swa_index_mapping[:-1].fill_(0)
        self.ids.clear()


class _ForwardingStates:
    """``HybridReqToTokenPool.mamba_allocator`` stand-in: the state slots are the suite's second
    pool's. Only what the tree calls on its own is offered (``free``; ``alloc`` for a
    copy-on-write match, which the contract never asks for)."""

    def __init__(self, second: SlotAllocator) -> None:
        self.second = second
        self.size = second.pool_size

    def available_size(self) -> int:
        return self.second.available()

    schedulable_available_size = available_size  # MambaSlotAllocator's planner view: the same for a static pool

    def alloc(self, need_size: int):
        return _load().torch.from_numpy(self.second.alloc(need_size))

    def free(self, free_index) -> None:
        slots = _flat(free_index)
        if slots:
            self.second.free(np.asarray(slots, dtype=np.int64))

    def clear(self) -> None:  # the suite owns the pool
        pass


class SGLangUnifiedMamba(_UnifiedWith):
    """``UnifiedRadixCache`` with FULL + MAMBA over a real CPU ``HybridReqToTokenPool`` whose
    ``mamba_allocator`` is the suite's state pool (``StatePool``: ``insert(..., state=)``, a match
    answers the state it ends at, ``evict_states``)."""

    components = ("MAMBA",)

    def __init__(self, allocator: SlotAllocator, page_size: int, eviction_policy: str = "lru", backend: str = "python",
                 second_allocator: SlotAllocator | None = None):
        _page_one(page_size, "UnifiedRadixCache FULL+MAMBA")
        if second_allocator is None:
            raise TypeError("UnifiedRadixCache FULL+MAMBA needs second_allocator= (the state pool)")
        self.second = second_allocator
        super().__init__(allocator, page_size, eviction_policy, backend)

    def _req_to_token_pool(self):
        tx = _load()
        from sglang.srt.runtime_context import get_server_args

        try:
            get_server_args()
        except ValueError:  # "Global server args is not set yet!"
            args = tx.ServerArgs(model_path="dummy", page_size=1)
            args._mamba_cache_chunk_size = 64
            tx.set_global_server_args_for_scheduler(args)
        shape = tx.Mamba2StateShape.create(tp_world_size=1, **_MAMBA_SHAPE)
        self.pool = tx.HybridReqToTokenPool(
            size=1,
            mamba_size=_MAMBA_SLOTS,
            mamba_spec_state_size=1,
            max_context_len=8,
            device="cpu",
            enable_memory_saver=False,
            cache_params=tx.Mamba2CacheParams(shape=shape, layers=[0]),
            mamba_layer_ids=[0],
            enable_mamba_extra_buffer=False,
        )
        self.pool.mamba_allocator = _ForwardingStates(self.second)
        return self.pool

    def insert(self, tokens: Sequence[int], values, state: int = -1) -> int:
        key = self._key(tokens)
        value = self._value(values, len(key))
        if isinstance(state, bool) or not isinstance(state, (int, np.integer)) or state < -1:
            raise TypeError(f"state must be a slot id or -1, got {state!r}")
        if state < 0:  # SGLang's insert asserts a mamba value: a request end always has a state
            raise ValueError("UnifiedRadixCache FULL+MAMBA caches a request only with its state (state=-1 given)")
        torch = self.tx.torch
        params = self.sg.InsertParams(key=key, value=value, prev_prefix_len=len(key),
                                      mamba_value=torch.tensor([int(state)], dtype=torch.int64))
        return int(self.cache.insert(params).prefix_len)

    def match_prefix(self, tokens: Sequence[int]):
        values, handle = super().match_prefix(tokens)
        if handle is ROOT:
            return values, handle, -1
        kept = self.cache.tree_core.get_component_device_value(handle, self.sg.ComponentType.MAMBA)
        return values, handle, (-1 if kept is None else int(_flat(kept)[0]))

    def evict_states(self, num_states: int) -> int:
        if isinstance(num_states, bool) or not isinstance(num_states, (int, np.integer)):
            raise TypeError(f"num_states must be an int, got {num_states!r}")
        if num_states < 0:
            raise ValueError(f"num_states must be >= 0, got {num_states}")
        result = self.cache.evict(self.sg.EvictParams(mamba_num=int(num_states)))
        return int(result.mamba_num_evicted)

    def reset(self) -> None:
        """Free the tree's FULL slots and its states, then SGLang's reset."""
        states = (_flat(self.cache.tree_core.all_mamba_values_flatten()) if self.backend == "rust"
                  else _flat(self._component_values(self.sg.ComponentType.MAMBA)))
        super().reset()
        if states:
            self.second.free(np.asarray(states, dtype=np.int64))

    def _component_values(self, ct) -> np.ndarray:
        """Every value of component ``ct`` in the Python tree, walked with a stack (SGLang's own
        walk recurses once per node: finding #8)."""
        values, stack = [], list(self._children(self._root()))
        while stack:
            node = stack.pop()
            value = node.component_data[ct].value
            if value is not None and len(value):
                values.append(_np(value))
            stack.extend(self._children(node))
        return np.concatenate(values) if values else np.empty(0, np.int64)



# -- LoRA namespaces ------------------------------------------------------------------------


class _LoRAKeys:
    def _key(self, tokens: Sequence[int]):
        return self.sg.RadixKey(_sr._token_array(tokens), extra_key=LORA_ID)


class SGLangRadixCacheLoRA(_LoRAKeys, _sr.SGLangRadixCache):
    """``RadixCache`` with every key in one LoRA namespace."""


class SGLangUnifiedRadixCacheLoRA(_LoRAKeys, _sr.SGLangUnifiedRadixCache):
    """``UnifiedRadixCache`` (FULL) with every key in one LoRA namespace."""

    def _is_root(self, node: Any) -> bool:
        return node == self.cache.root_node_handle(LORA_ID) or node == self.cache.root_node_handle()


# -- factories --------------------------------------------------------------------------


def _caps(policy: str = "lru", checks_locks: bool = True, page_sizes=(1,), second_pool=None, lifecycle: str = "off") -> Capabilities:
    return Capabilities(eviction_policy=policy, supports_quarantine=False, page_sizes=page_sizes, checks_locks=checks_locks,
                        second_pool=second_pool, lifecycle=lifecycle)


def _make(name: str, cls: type, caps: Capabilities, **kwargs):
    return _factory(name, lambda a, p: cls(a, p, **kwargs), caps)


def _hybrid(name: str, cls: type, caps: Capabilities, **kwargs):
    """A factory that takes the suite's second pool (``second_allocator=``, the contract's hybrid form)."""

    def factory(allocator: SlotAllocator, page_size: int, second_allocator: SlotAllocator | None = None):
        return cls(allocator, page_size, second_allocator=second_allocator, **kwargs)

    factory.__name__ = factory.__qualname__ = name
    factory.capabilities = caps  # type: ignore[attr-defined]
    factory.__doc__ = f"radixcheck target {name}: {caps}"
    return factory


FACTORIES: dict[str, Callable] = {
    "pure_swa_lru": _make("pure_swa_lru", SGLangPureSWARadixCache, _caps(checks_locks=False)),
    "pure_swa_lru_strict": _make("pure_swa_lru_strict", SGLangPureSWARadixCache, _caps(checks_locks=True)),
    "radix_lru_lora": _make("radix_lru_lora", SGLangRadixCacheLoRA, _caps(checks_locks=False, page_sizes=_sr.PAGE_SIZES)),
}
for _b in ("python", "rust"):
    for _lenient in ("", "_lenient"):
        _locks = not _lenient
        # the window hidden (a private window pool, never slid): the plain contract, production scale included
        FACTORIES[f"unified_swa_{_b}_lru{_lenient}"] = _make(f"unified_swa_{_b}_lru{_lenient}", SGLangUnifiedSWA,
                                                             _caps(checks_locks=_locks), backend=_b)
        # the suite's window pool: the hybrid contract (SlidingWindow)
        FACTORIES[f"unified_swa_{_b}_lru_window{_lenient}"] = _hybrid(
            f"unified_swa_{_b}_lru_window{_lenient}", SGLangUnifiedSWA,
            _caps(checks_locks=_locks, second_pool=SlidingWindow(window=SLIDING_WINDOW, pins_whole_nodes=True), lifecycle="tree"),
            backend=_b)
        # the suite's state pool: the hybrid contract (StatePool)
        FACTORIES[f"unified_mamba_{_b}_lru{_lenient}"] = _hybrid(
            f"unified_mamba_{_b}_lru{_lenient}", SGLangUnifiedMamba,
            _caps(checks_locks=_locks, second_pool=StatePool(stateless_inserts=False)), backend=_b)
    FACTORIES[f"unified_{_b}_lru_lora"] = _make(
        f"unified_{_b}_lru_lora", SGLangUnifiedRadixCacheLoRA, _caps(page_sizes=_sr.PAGE_SIZES), backend=_b
    )
del _b, _lenient, _locks


__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)


if os.environ.get("RADIXCHECK_SGLANG_LAZY") != "1" and importlib.util.find_spec("sglang") is not None:
    _load()

__all__ = [
    "FACTORIES",
    "PIP_REQUIREMENTS",
    "SGLangPureSWARadixCache",
    "SGLangUnifiedSWA",
    "SGLangUnifiedMamba",
    "SGLangRadixCacheLoRA",
    "SGLangUnifiedRadixCacheLoRA",
    *FACTORIES,
]

if __name__ == "__main__":  # list the factories
    for _name, _f in FACTORIES.items():
        print(f"radixcheck.properties.adapters.sglang_trees:{_name}", _f.capabilities, file=sys.stdout)
