"""UnifiedRadixCache, Python tree core: an unmatched dec_lock_ref on a partly locked path is
refused only after it has released the locks below the first unlocked node. The refusal
(AssertionError) leaves the cache changed: tokens a running request still holds move from
protected to evictable, and its own later unlock is then refused too.

    .audit-venv/bin/python reports/repro/sglang_unified_partial_unlock.py

Exits 1 while the refused unlock changes the sizes.
"""

import sys
from array import array

import _sglang_cpu
import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache


def sizes(cache):
    return cache.total_size(), cache.evictable_size(), cache.protected_size()


def node_for(cache, ids):
    return cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", ids)))).last_device_node


cache = UnifiedRadixCache(CacheInitParams(
    disable=False, req_to_token_pool=None, page_size=1,
    token_to_kv_pool_allocator=_sglang_cpu.RecordingAllocator(),
    tree_components=(ComponentType.FULL,), tree_core_backend="python"))
cache.insert(InsertParams(key=RadixKey(array("q", [1, 2])), value=torch.tensor([10, 11]), prev_prefix_len=2))

whole = node_for(cache, [1, 2])
receipt_a = cache.inc_lock_ref(whole).to_dec_params()  # request A runs on [1, 2]
head = node_for(cache, [1])                              # splits the edge: [1] and [2]
receipt_b = cache.inc_lock_ref(head).to_dec_params()    # request B runs on [1]
cache.dec_lock_ref(head, receipt_b)                      # B finishes
cache.dec_lock_ref(head, receipt_b)                      # a stray second release (accepted: A's lock on [1])
print("after the stray release:", sizes(cache), "(total, evictable, protected)")

before = sizes(cache)
try:
    cache.dec_lock_ref(whole, receipt_a)                 # A finishes: [1] now has lock_ref 0
    print("A's unlock accepted")
except AssertionError as exc:
    print(f"A's unlock refused: AssertionError: {str(exc)[:80]}")
after = sizes(cache)
changed = before != after
print(f"sizes before {before}, after the refused call {after}" + (": BUG: a refused call changed the cache" if changed else ""))
sys.exit(1 if changed else 0)
