"""SGLang RadixCache accepts eviction_policy="tlru" but its first evict() raises AttributeError.

    .audit-venv/bin/python reports/repro/sglang_tlru_attributeerror.py

TLRUStrategy.get_priority reads node._tlru_history_len / _tlru_cached_prefix_len, which only
the unified tree core maintains. The server refuses --radix-eviction-policy tlru for any cache
other than UnifiedRadixCache (mem_cache/registry.py), so this is reachable through the library
API (RadixCache(CacheInitParams(...)), as tests and embedders build it), not through the
server. The constructor validates the policy name through get_eviction_strategy but accepts
"tlru". Exits 1 while the bug is present, 0 once RadixCache refuses tlru or evicts with it.
"""

import sys
from array import array

import _sglang_cpu  # noqa: F401
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

params = CacheInitParams(disable=False, req_to_token_pool=None, page_size=1, eviction_policy="tlru",
                         token_to_kv_pool_allocator=_sglang_cpu.RecordingAllocator())
try:
    cache = RadixCache(params)
except ValueError as exc:
    print("fixed: RadixCache refuses tlru:", exc)
    sys.exit(0)
cache.insert(InsertParams(key=RadixKey(array("q", [1, 2, 3])), value=torch.tensor([10, 11, 12])))
try:
    result = cache.evict(EvictParams(num_tokens=1))
except AttributeError as exc:
    print(f"BUG: RadixCache(eviction_policy='tlru').evict() raised AttributeError: {exc}")
    sys.exit(1)
print("fixed: evicted", result.num_tokens_evicted)
sys.exit(0)
