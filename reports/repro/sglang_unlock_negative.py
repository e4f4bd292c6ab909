"""SGLang RadixCache: an unmatched dec_lock_ref silently drives lock_ref to -1, and the next
request's lock then protects nothing: its KV slots are evicted while it holds the lock.

    .audit-venv/bin/python reports/repro/sglang_unlock_negative.py

Exits 1 while the bug is present (prints what happened), 0 once it is fixed.
sglang 0.5.23: sglang/srt/mem_cache/radix_cache.py, RadixCache.dec_lock_ref / inc_lock_ref.
"""

import sys
from array import array

import _sglang_cpu  # noqa: F401  (CPU stand-ins for triton/torchvision; a no-op with triton)
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey


def key(*tokens):
    return RadixKey(array("q", tokens))


alloc = _sglang_cpu.RecordingAllocator()
cache = RadixCache(CacheInitParams(disable=False, req_to_token_pool=None,
                                   token_to_kv_pool_allocator=alloc, page_size=1))
cache.insert(InsertParams(key=key(1, 2, 3), value=torch.tensor([10, 11, 12])))
node = cache.match_prefix(MatchPrefixParams(key=key(1, 2, 3))).last_device_node

problems = []
try:
    cache.dec_lock_ref(node)  # unmatched: nobody locked this node
except Exception as exc:  # the fix: refuse it
    print(f"unmatched dec_lock_ref raised {type(exc).__name__}: {exc}")
else:
    problems.append(f"unmatched dec_lock_ref accepted; lock_ref is now {node.lock_ref}")

# A request now matches the prefix and locks it, as the scheduler does.
cache.inc_lock_ref(node)
print(f"after a request's inc_lock_ref: lock_ref={node.lock_ref} "
      f"protected_size={cache.protected_size()} evictable_size={cache.evictable_size()}")
if cache.protected_size() != 3:
    problems.append(f"the request's lock protects {cache.protected_size()} of 3 tokens")

evicted = cache.evict(EvictParams(num_tokens=3)).num_tokens_evicted
if evicted:
    problems.append(f"evict() freed the locked request's KV slots {alloc.freed} ({evicted} tokens)")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
