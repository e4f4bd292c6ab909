"""sglang #27038 checked on 0.5.23: a Mamba copy-on-write must not release other requests' SWA locks.

UnifiedRadixCache with FULL + SWA + MAMBA (window 4), both tree cores. ``match_prefix(...,
cow_mamba=True)`` copies the matched state into a fresh slot; when the state pool is full it
locks the matched node, evicts one state, and unlocks. Before #27038 that unlock carried no SWA
window boundary, so it walked to the root and took the SWA window lock of another request
running on an ancestor (here request R0, locked on the 8-token prompt P): its window became
evictable while R0 used it, or the walk hit ``lock_ref == 0`` and the server crashed.

    .audit-venv/bin/python reports/repro/sglang_mamba_cow_swa_locks.py            # 0.5.23: exit 0
    .audit-venv/bin/python reports/repro/sglang_mamba_cow_swa_locks.py --pre-fix  # exit 1

``--pre-fix`` replays the release as it was before the fix (the receipt's SWA boundary ``None``,
"walk to the root"), to show the check fails on that code. Exits 1 when the COW match raises,
changes the SWA protected size, or leaves R0's prompt unmatchable after an SWA eviction.
"""

import inspect
import os
import sys
import types
from array import array

os.environ.setdefault("RUST_BACKTRACE", "0")
import _sglang_cpu  # noqa: F401  (CPU stand-ins for triton/torchvision)
import torch
from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
from sglang.srt.managers.schedule_batch import ReqKvInfo
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.base_swa_memory_pool import BaseSWAKVPool
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType as CT
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

PRE_FIX = "--pre-fix" in sys.argv


class MappingOnlySWAPool(BaseSWAKVPool):
    """An SWA KV pool without buffers: the tree only uses its FULL-to-SWA index mapping."""

    full_kv_pool = swa_kv_pool = None

    def __init__(self):
        self.full_to_swa_index_mapping = None

    def register_mapping(self, mapping):
        self.full_to_swa_index_mapping = mapping

    def translate_loc_from_full_to_swa(self, kv_indices):
        return self.full_to_swa_index_mapping[kv_indices]

    def _no_kv(self, *args, **kwargs):
        raise NotImplementedError("no KV data here")

    get_state_buf_infos = get_kv_buffer = get_key_buffer = get_value_buffer = set_kv_buffer = _no_kv


def build(backend):
    args = ServerArgs(model_path="dummy", page_size=1)
    args._mamba_cache_chunk_size = 64  # as SGLang's own unit-test fixture presets it
    set_global_server_args_for_scheduler(args)
    shape = Mamba2StateShape.create(tp_world_size=1, intermediate_size=8, n_groups=1, num_heads=1, head_dim=8,
                                    state_size=2, conv_kernel=2)
    pool = HybridReqToTokenPool(size=1, mamba_size=64, mamba_spec_state_size=1, max_context_len=8, device="cpu",
                                enable_memory_saver=False, cache_params=Mamba2CacheParams(shape=shape, layers=[0]),
                                mamba_layer_ids=[0], enable_mamba_extra_buffer=False)
    real_alloc, tries = pool.mamba_allocator.alloc, []

    def alloc(n):  # the state pool is full at the COW's first try, so it locks, evicts one state, unlocks
        tries.append(n)
        return None if len(tries) == 3 else real_alloc(n)  # tries 1-2: the two cached states below

    pool.mamba_allocator.alloc = alloc
    kv = SWATokenToKVPoolAllocator(1 << 12, 1 << 12, 1, torch.int64, "cpu", MappingOnlySWAPool(), False)
    cache = UnifiedRadixCache(CacheInitParams(
        disable=False, req_to_token_pool=pool, token_to_kv_pool_allocator=kv, page_size=1,
        tree_components=(CT.FULL, CT.SWA, CT.MAMBA), tree_core_backend=backend, sliding_window_size=4))
    return cache, kv, pool


def broken(backend: str) -> bool:
    """Run the scenario on one core; True if the COW match broke another request's window lock."""
    cache, kv, pool = build(backend)

    def key(ids):
        return RadixKey(array("q", ids))

    def insert(ids):
        cache.insert(InsertParams(key=key(ids), value=kv.alloc(len(ids)), prev_prefix_len=len(ids),
                                  mamba_value=pool.mamba_allocator.alloc(1).reshape(-1)))

    prompt = list(range(8))
    insert(prompt)  # P, with a state
    insert(prompt + [50, 51, 52, 53, 54, 55])  # a branch under P, with a state
    r0 = cache.match_prefix(MatchPrefixParams(key=key(prompt))).last_device_node
    cache.inc_lock_ref(r0)  # request R0 runs on P: its SWA window lock covers P's last tokens
    before = cache.tree_core.component_protected_size(CT.SWA)
    if PRE_FIX:  # the release as it was before the fix: no SWA boundary, walk to the root
        real_dec = cache.dec_lock_ref

        def dec_lock_ref(node, params=None, **kw):
            if any(f.function == "finalize_match_result_in_cache" for f in inspect.stack()):
                params = DecLockRefParams(node_id=params.node_id,
                                          component_lock_uuids={**params.component_lock_uuids, CT.SWA: None})
            return real_dec(node, params, **kw)

        cache.dec_lock_ref = dec_lock_ref
    req = types.SimpleNamespace(kv=ReqKvInfo(), session=None, rid="cow")
    try:
        cache.match_prefix(MatchPrefixParams(key=key(prompt + [50, 51, 52, 53, 54, 55]), cow_mamba=True, req=req))
    except Exception as exc:  # noqa: BLE001 - the crash #27038 describes (a Rust panic poisons the core)
        print(f"BUG [{backend}]: the COW match raised {type(exc).__name__}: {str(exc)[:120]}")
        return True
    after = cache.tree_core.component_protected_size(CT.SWA)
    cache.evict(EvictParams(swa_num_tokens=100))
    still = cache.match_prefix(MatchPrefixParams(key=key(prompt))).device_prefix_len
    ok = before == after and still == len(prompt)
    print(f"{'ok' if ok else 'BUG'} [{backend}]: SWA protected {before} before the COW match, {after} after; after an SWA "
          f"eviction R0's prompt matches {still} of {len(prompt)} tokens")
    return not ok


sys.exit(1 if sum(broken(backend) for backend in ("python", "rust")) else 0)
