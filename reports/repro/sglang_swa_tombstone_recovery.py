"""sglang #27586 checked on 0.5.23: reviving an SWA tombstone must not free a live SWA slot.

UnifiedRadixCache FULL + SWA (window 4), both tree cores, over SGLang's own SWA allocator (CPU).
A request caches 16 tokens; SWA pressure tombstones the older node (its window KV freed, its FULL
KV kept); the same 16 tokens are then inserted again the way the scheduler does after a request
recomputed them (fresh slots, ``prev_prefix_len=0``, nothing slid), which revives the tombstone
from the incoming slots (``SWAComponent.update_component_on_insert_overlap``). #27586: the revival
freed the tombstone's old FULL value through ``free_swa``, whose stale FULL-to-SWA mapping could
name an SWA slot already reused: a live slot went back to the free list. Checked twice, with the
tombstone's FULL KV unlocked (the node takes the incoming KV) and locked (it keeps its own).

After each step: every SWA slot the tree holds is live (not in the SWA free list), the SWA slots
in use are exactly the tree's, and the FULL slots in use are exactly the tree's.

    .audit-venv/bin/python reports/repro/sglang_swa_tombstone_recovery.py            # 0.5.23: exit 0
    .audit-venv/bin/python reports/repro/sglang_swa_tombstone_recovery.py --pre-fix  # exit 1

``--pre-fix`` frees the revived node's old FULL value with ``free`` (FULL and SWA through the
mapping) instead of ``free_full_segment``, as the code did before the fix, to show the check fails.
"""

import os
import sys
from array import array

os.environ.setdefault("RUST_BACKTRACE", "0")
import _sglang_cpu  # noqa: F401  (CPU stand-ins for triton/torchvision)
import torch
from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.base_swa_memory_pool import BaseSWAKVPool
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache import cache_action
from sglang.srt.mem_cache.unified_cache.components import ComponentType as CT
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

PRE_FIX = "--pre-fix" in sys.argv
POOL = 256


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


def live_window(cache, tokens) -> int:
    """How many of ``tokens``' cached tokens have live SWA KV."""
    m = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
    n = 0
    for info in cache.tree_core.collect_path_info([m.last_device_node])[0]:
        value = cache.tree_core.get_component_device_value(info.node_id, CT.SWA)
        n += 0 if value is None else len(value)
    return n


def problems(cache, kv, tokens) -> list[str]:
    """What is wrong with the two pools after a step (empty: conserved)."""
    m = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))
    full = cache.path_device_indices(m.last_device_node).tolist()
    swa = []
    for info in cache.tree_core.collect_path_info([m.last_device_node])[0]:
        value = cache.tree_core.get_component_device_value(info.node_id, CT.SWA)
        swa += [] if value is None else value.tolist()
    out = []
    free_swa = set(kv.swa_attn_allocator.free_pages.tolist())
    if set(swa) & free_swa:
        out.append(f"live SWA slots {sorted(set(swa) & free_swa)} are in the SWA free list")
    in_use = kv.swa_attn_allocator.size - kv.swa_attn_allocator.available_size()
    if in_use != len(swa):
        out.append(f"{in_use} SWA slots in use, the tree holds {len(swa)}")
    in_use = kv.full_attn_allocator.size - kv.full_attn_allocator.available_size()
    if in_use != int(cache.total_size()[0]) or in_use != len(full):
        out.append(f"{in_use} FULL slots in use, the tree holds {len(full)}")
    return out


def run(backend: str, lock_during_revival: bool) -> list[str]:
    kv = SWATokenToKVPoolAllocator(POOL, POOL, 1, torch.int64, "cpu", MappingOnlySWAPool(), False)
    cache = UnifiedRadixCache(CacheInitParams(
        disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=kv, page_size=1,
        tree_components=(CT.FULL, CT.SWA), tree_core_backend=backend, sliding_window_size=4))
    if PRE_FIX:  # the revival freed the old FULL value with free(): FULL and SWA through the mapping
        real = cache._apply_cache_action

        def apply(action):
            if isinstance(action, cache_action.FreeDeviceKVFullOnly):
                action = cache_action.FreeDeviceKV(action.indices)
            return real(action)

        cache._apply_cache_action = apply
    tokens = list(range(1, 17))
    key = RadixKey(array("q", tokens))

    def insert():
        cache.insert(InsertParams(key=key, value=kv.alloc(len(tokens)), prev_prefix_len=0))

    insert()  # the leaf splits at the window: [0, 12) and [12, 16)
    leaf = cache.match_prefix(MatchPrefixParams(key=key)).last_device_node
    lock = cache.inc_lock_ref(leaf)  # a request runs on it: its window [12, 16) is pinned
    cache.evict(EvictParams(swa_num_tokens=12))  # SWA pressure tombstones [0, 12)
    if not lock_during_revival:
        cache.dec_lock_ref(leaf, lock.to_dec_params())
    found = [f"after the tombstone: {p}" for p in problems(cache, kv, tokens)]
    tombstoned = len(tokens) - live_window(cache, tokens)
    insert()  # recomputed: the tombstone revives from the incoming slots
    found += [f"after the revival: {p}" for p in problems(cache, kv, tokens)]
    revived = live_window(cache, tokens) - (len(tokens) - tombstoned)
    if tombstoned == 0 or revived != tombstoned:
        found.append(f"the scenario did not happen: {tombstoned} tokens tombstoned, {revived} revived")
    if lock_during_revival:
        cache.dec_lock_ref(leaf, lock.to_dec_params())
    cache.evict(EvictParams(num_tokens=POOL))
    found += [f"after evicting everything: {p}" for p in problems(cache, kv, [])]
    return found


bad = 0
for backend in ("python", "rust"):
    for locked in (False, True):
        where = f"[{backend}, FULL {'locked' if locked else 'unlocked'} during the revival]"
        try:
            found = run(backend, locked)
        except Exception as exc:  # noqa: BLE001 - an assertion or a Rust panic is a failure too
            import traceback

            last = traceback.extract_tb(exc.__traceback__)[-1]
            found = [f"raised {type(exc).__name__} at {os.path.basename(last.filename)}:{last.lineno} ({last.line})"]
        print(f"{'BUG' if found else 'ok'} {where} (12 tokens tombstoned, then revived)" + "".join(f"\n    {p}" for p in found))
        bad += bool(found)
sys.exit(1 if bad else 0)
