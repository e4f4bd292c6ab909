"""radixcheck tier adapters for SGLang's HiCache over hybrid trees (sglang 0.5.23, CPU): FULL+MAMBA.

What ``--enable-hierarchical-cache`` builds for a hybrid Mamba model in 0.5.23
-------------------------------------------------------------------------------
``UnifiedRadixCache`` with components FULL and MAMBA, then ``init_hicache``:
``hybrid_pool_assembler._select_strategy`` picks ``_MambaStrategy`` (a ``HybridLinearKVPool``
device pool and the components {FULL, MAMBA}), whose ``build_hybrid_mamba_stack`` adds a
``MambaPoolHost`` (the Mamba states' host pool) beside the KV host pool, both under one
``HybridCacheController``. Older SGLang called this tree ``HiMambaRadixCache``.

The factories (``factory(allocator, host_pool, controller, page_size, write_policy)``)
-------------------------------------------------------------------------------------
``hicache_mamba_{python,rust}``
    That tree over either core, with ``hicache_write_policy`` = the suite's ``write_policy``
    (``write_through``, ``write_through_selective``, ``write_back``). Page size 1 only:
    ``MambaComponent`` asserts ``page_size == 1`` unless the mamba extra buffer is on.

How it is run on CPU (on top of ``sglang_hicache``'s seams, which it inherits)
-------------------------------------------------------------------------------
* The device pool is SGLang's own ``HybridLinearKVPool`` (one full-attention layer of one head of
  width 1, over the CPU ``MambaPool`` of a real ``HybridReqToTokenPool``: a one-layer Mamba2 state
  of a few elements per slot, as ``sglang_trees``' Mamba adapter builds). With a stand-in device
  pool ``_select_strategy`` finds no strategy (the round before this one stopped there).
* ``hicache_mem_layout="page_first_direct"``: ``MambaPoolHost`` only supports ``page_first_direct``
  (``build_hybrid_mamba_stack`` says so; ``layer_first`` is refused by its constructor). The KV
  host pool takes the same layout with the ``direct`` io backend.
* The tier machine speaks the plain (one-pool) tier contract: it sends tokens and KV slots, never
  a Mamba state. Every cached request end carries a state in SGLang (``insert`` asserts a
  ``mamba_value``), so the adapter hands each insert a fresh state slot from a private state pool
  (``mamba_allocator`` forwards to it: the tree's frees and its load-back allocations land
  there). The states are not judged: the suite's checks are the FULL KV's (tiers, slots,
  contents, backup chain). Only the KV host pool's slots are the suite's; the Mamba host pool
  keeps SGLang's own slots, and since the transfer engine is the suite's (it copies nothing of
  SGLang's), no Mamba state is ever copied.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import sglang_hicache as _hc
from radixcheck.properties.adapters import sglang_trees as _trees
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.tiers.contract import TierCapabilities

PIP_REQUIREMENTS: list[str] = []
"""No packages beyond the audit environment's."""

_STATES = 1 << 12
"""The private state pool's size (the tier worlds cache at most a few hundred request ends)."""


class _Polling(_hc.SGLangHiCache):
    """What both hybrid trees add to ``sglang_hicache``'s seams: the scheduler's per-step poll."""

    def _poll(self) -> None:
        """The scheduler polls ``check_hicache_events`` every step. The FULL adapter polls after each
        completion the suite delivers; here SGLang also makes copies that move no KV slot (a node's
        Mamba state alone: a 0-slot KV write), whose completion the suite never delivers (it copies
        no suite slot), so the adapter polls after each call that can start one too. Without it
        such a write kept its node locked for good (never evicted)."""
        self.cache.check_hicache_events()

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, Any]:
        result = super().load_back(host_handle)
        self._poll()
        return result

    def evict(self, num_tokens: int) -> int:
        evicted = super().evict(num_tokens)
        self._poll()
        return evicted

    def _inserted(self, result: Any, tokens: Any, values: np.ndarray) -> None:
        self._poll()


class SGLangHiCacheMamba(_Polling):
    """``UnifiedRadixCache`` FULL+MAMBA + ``init_hicache`` (``_MambaStrategy``), the KV transfers and
    host slots the suite's, each request end's Mamba state a private slot."""

    components = ("MAMBA",)
    mem_layout = "page_first_direct"

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 backend: str = "python") -> None:
        _trees._page_one(page_size, "HiCache over UnifiedRadixCache FULL+MAMBA")
        self.states = SlotAllocator(_STATES, seed=2, churned=False)
        super().__init__(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    def _prepare_args(self, args: Any) -> None:
        args._mamba_cache_chunk_size = 64  # MambaComponent reads it at construction (sglang_trees does the same)

    def _req_to_token_pool(self) -> Any:
        tx = _trees._load()
        shape = tx.Mamba2StateShape.create(tp_world_size=1, **_trees._MAMBA_SHAPE)
        self.req_pool = tx.HybridReqToTokenPool(
            size=1, mamba_size=_STATES, mamba_spec_state_size=1, max_context_len=8, device="cpu",
            enable_memory_saver=False, cache_params=tx.Mamba2CacheParams(shape=shape, layers=[0]),
            mamba_layer_ids=[0], enable_mamba_extra_buffer=False)
        self.req_pool.mamba_allocator = _trees._ForwardingStates(self.states)
        return self.req_pool

    def _device_kv_pool(self) -> Any:
        from sglang.srt.mem_cache.memory_pool import HybridLinearKVPool

        if not hasattr(self, "req_pool"):
            self._req_to_token_pool()
        return HybridLinearKVPool(size=self.allocator.pool_size, dtype=self.sg.torch.float16, page_size=self.page_size,
                                  head_num=1, head_dim=1, full_attention_layer_ids=[1], device="cpu",
                                  mamba_pool=self.req_pool.mamba_pool)

    def _insert_extra(self, length: int) -> dict[str, Any]:
        self._state = self.states.alloc(1)
        return {"mamba_value": self.sg.torch.from_numpy(np.asarray(self._state, dtype=np.int64))}

    def _inserted(self, result: Any, tokens: Any, values: np.ndarray) -> None:
        """Free the request's state when the tree kept its own (``mamba_exist``: the scheduler frees
        it then), then cache every shorter prefix of the request with a state of its own: SGLang's
        match stops at the deepest node holding a state, and the plain tier contract's match
        answers every cached token, so each token boundary is made a request end (as a chunked
        prefill checkpoints its state at every chunk, with chunks of one token)."""
        if result.mamba_exist:
            self.states.free(self._state)
        if result.last_device_node is None or len(tokens) < 2:
            return
        path = self.cache.path_device_indices(result.last_device_node)
        for end in range(len(tokens) - 1, 0, -1):
            key = self._key(list(tokens)[:end])
            again = self.cache.insert(self.sg.InsertParams(key=key, value=path[:end].clone(), prev_prefix_len=end,
                                                           **self._insert_extra(end)))
            self.cache.flush_pending_backups()
            if again.mamba_exist:
                self.states.free(self._state)
        self._poll()

    def __repr__(self) -> str:
        return f"SGLangHiCacheMamba({self.backend}, {self.write_policy})"


_WINDOW_SLOTS = 1 << 14
"""The private window pool's size (SGLang's own SWA allocator side; never judged)."""


class SGLangHiCacheSWA(_Polling):
    """``UnifiedRadixCache`` FULL+SWA + ``init_hicache`` (``_SwaStrategy``) over SGLang's own
    ``SWAKVPool`` and ``SWATokenToKVPoolAllocator``, whose FULL side forwards to the suite (the
    KV transfers and host slots the suite's, as in ``sglang_hicache``) and whose SWA side is
    SGLang's own allocator: the window is hidden (every newly cached token gets a live SWA peer,
    the window never slides), so it is a target of the plain tier contract."""

    components = ("SWA",)

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 backend: str = "python") -> None:
        _trees._page_one(page_size, "HiCache over UnifiedRadixCache FULL+SWA")
        super().__init__(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    def _device_kv_pool(self) -> Any:
        from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

        return SWAKVPool(size=self.allocator.pool_size, size_swa=_WINDOW_SLOTS, page_size=self.page_size,
                         dtype=self.sg.torch.float16, head_num=1, head_dim=1, swa_attention_layer_ids=[0],
                         full_attention_layer_ids=[1], device="cpu", enable_memory_saver=False)

    def _tree_allocator(self, kv: Any) -> Any:
        from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator

        swa = SWATokenToKVPoolAllocator(self.allocator.pool_size, _WINDOW_SLOTS, self.page_size, self.sg.torch.int64,
                                        "cpu", kv, False)
        swa.full_attn_allocator = self.kv_allocator  # FULL slots: the suite's (and a load's, the suite controller's)
        self.swa = swa
        return swa

    def _params_extra(self) -> dict[str, Any]:
        return {"sliding_window_size": _trees.SLIDING_WINDOW}

    def _insert_extra(self, length: int) -> dict[str, Any]:
        return {}

    def _insert(self, tokens: Any, values: Any, priority: int) -> int:
        """Give the tokens the tree has not cached on device an SWA peer each (as the server's
        allocator pairs a FULL slot with one when it hands it out), then insert."""
        key = self._key(tokens)
        arr = np.asarray(values)
        if arr.ndim == 1 and len(arr) == len(key):
            cached = int(self.cache.tree_core.match_full_device_prefix(key)[0])  # read-only: no split, no recency
            new = arr[cached:].astype(np.int64)
            if len(new):
                torch = self.sg.torch
                peers = self.swa.swa_attn_allocator.alloc(len(new))
                self.swa.set_full_to_swa_mapping(torch.from_numpy(new.copy()), peers)
        return super()._insert(tokens, values, priority)

    def __repr__(self) -> str:
        return f"SGLangHiCacheSWA({self.backend}, {self.write_policy})"


def _factory(name: str, backend: str, cls: type = SGLangHiCacheMamba):
    def factory(allocator: Any, host_pool: Any, controller: Any, page_size: int = 1,
                write_policy: str = "write_through") -> Any:
        return cls(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    factory.__name__ = factory.__qualname__ = name
    factory.tier_capabilities = TierCapabilities(  # type: ignore[attr-defined]
        write_policies=_hc.POLICIES, page_sizes=(1,), supports_quarantine=False, write_back_order="leaf_first")
    tree = "FULL+MAMBA" if cls is SGLangHiCacheMamba else "FULL+SWA (window hidden)"
    factory.__doc__ = f"radixcheck tier target {name}: UnifiedRadixCache {tree} ({backend} core) + init_hicache"
    return factory


FACTORIES: dict[str, Any] = {f"hicache_mamba_{b}": _factory(f"hicache_mamba_{b}", b) for b in ("python", "rust")}
FACTORIES.update({f"hicache_swa_{b}": _factory(f"hicache_swa_{b}", b, SGLangHiCacheSWA) for b in ("python", "rust")})

__getattr__ = factory_lookup(__name__, FACTORIES)

__all__ = ["FACTORIES", "SGLangHiCacheMamba", "SGLangHiCacheSWA", *FACTORIES]
