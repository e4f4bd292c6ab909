"""PureSWARadixCache (all-SWA models) caches KV slots that the request's sliding window already freed.

A request decodes past its window: the scheduler's ``maybe_evict_swa`` calls
``tree_cache.evict_sliding_windows(req, seqlen - 1)``, which frees the SWA slots of the tokens that
slid out of the window (``free_swa_out_of_window_slots``: ``[cache_protected_len, evicted_seqlen)``).
When the request finishes, ``release_kv_cache`` calls ``tree_cache.checkpoint(req, up_to=...)``, and
``RadixCache.checkpoint`` caps the key at ``req.kv.swa_evict_floor`` only when that floor is > 0.
The scheduler sets the floor only for prefill-aware SWA models (``model.is_prefill_aware_swa()``,
one model in 0.5.23); for every other all-SWA model it stays 0, so the whole row is inserted,
freed slots included. ``PureSWATokenToKVPoolAllocator`` has one pool, so those slots are already
back in its free list: the next allocation hands them to another request while the tree serves
them as a cache hit (stale KV), and evicting the node frees them a second time. sglang PR #31486
("do not re-cache window-evicted KV") described this and was closed unmerged.

    .audit-venv/bin/python reports/repro/sglang_pure_swa_caches_freed_window.py

Exits 1 while the tree caches slots that are in the allocator's free list.
"""

import sys
import types
from array import array

import _sglang_cpu  # noqa: F401  (CPU stand-ins for triton/torchvision)
import torch
from sglang.srt.managers.schedule_batch import ReqKvInfo
from sglang.srt.mem_cache.allocator.swa import PureSWATokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
from sglang.srt.mem_cache.base_swa_memory_pool import BaseSWAKVPool
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
from sglang.srt.mem_cache.pure_swa_radix_cache import PureSWARadixCache
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType


class MappingOnlySWAPool(BaseSWAKVPool):
    """An SWA KV pool without buffers: the allocator only registers its index mapping."""

    full_kv_pool = swa_kv_pool = None

    def __init__(self):
        self.full_to_swa_index_mapping = None

    def register_mapping(self, mapping):
        self.full_to_swa_index_mapping = mapping

    def translate_loc_from_full_to_swa(self, kv_indices):
        return kv_indices

    def _no_kv(self, *args, **kwargs):
        raise NotImplementedError("no KV data here")

    get_state_buf_infos = get_kv_buffer = get_key_buffer = get_value_buffer = set_kv_buffer = _no_kv


WINDOW = 4
allocator = PureSWATokenToKVPoolAllocator(64, 1, torch.int64, "cpu", MappingOnlySWAPool(), False)
rows = ReqToTokenPool(size=2, max_context_len=64, device="cpu", enable_memory_saver=False)
cache = PureSWARadixCache(CacheInitParams(disable=False, req_to_token_pool=rows, token_to_kv_pool_allocator=allocator,
                                          page_size=1, sliding_window_size=WINDOW))

ids = list(range(100, 104)) + list(range(200, 212))  # a 4-token prompt, then 12 decoded tokens
row = rows.alloc_rows(1)[0]
slots = allocator.alloc(len(ids))
rows.write((row, slice(0, len(ids))), slots)
req = types.SimpleNamespace(  # the fields of Req that the two calls below read
    kv=ReqKvInfo(req_pool_idx=row, kv_allocated_len=len(ids), kv_committed_len=len(ids)),
    full_untruncated_fill_ids=array("q", ids), origin_input_ids=ids[:4], extra_key=None, cache_salt=None,
    priority=None, lock=None, last_node=None, rid="r0")

cache.evict_sliding_windows(req, len(ids) - 1)  # decode slid the window (ScheduleBatch.maybe_evict_swa)
free = set(allocator.swa_attn_allocator.free_pages.tolist())
print(f"decode freed the window of tokens [0, {req.kv.get_evicted_seqlen(ComponentType.SWA)}) "
      f"(swa_evict_floor={req.kv.swa_evict_floor}): slots {[s for s in slots.tolist() if s in free]}")

cache.checkpoint(req, up_to=len(ids))  # the request finishes (release_kv_cache)
match = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", ids))))
cached = cache.path_device_indices(match.last_device_node).tolist()
stale = sorted(set(cached) & set(allocator.swa_attn_allocator.free_pages.tolist()))
if not stale:
    print(f"ok: the tree caches {len(cached)} tokens, none of their slots is free")
    sys.exit(0)
print(f"BUG: the tree caches {len(cached)} tokens and serves slots {stale} as a hit; they are in the free list")
handed = sorted(set(allocator.alloc(allocator.available_size()).tolist()) & set(stale))
print(f"     allocations for other requests hand out {handed} too: the cached prefix's KV is overwritten while cached")
sys.exit(1)
