"""SGLang RadixCache: locking or unlocking a node of another tree (a handle from another cache,
or one held across reset()) changes this cache's accounting before it fails, and an unlock of a
node held across reset() makes that dead node evictable, so the next evict() frees its KV slots
a second time.

    .audit-venv/bin/python reports/repro/sglang_stale_handle.py

inc_lock_ref / dec_lock_ref walk ``node.parent`` until they reach *this* cache's root, updating
evictable_size_/protected_size_ and evictable_leaves on the way; a foreign node's chain ends at
another root and then at None (AttributeError in inc_lock_ref, an assert in dec_lock_ref), after
the damage is done. SGLang's scheduler never passes such handles (flush_cache runs only when no
request holds a lock), so this is a contract difference (radixcheck's checks_locks), reported
for embedders and for the bug class of sgl-project/sglang#29291. Exits 1 while present.
"""

import sys
from array import array

import _sglang_cpu
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey


def key(*tokens):
    return RadixKey(array("q", tokens))


def new_cache(alloc):
    return RadixCache(CacheInitParams(disable=False, req_to_token_pool=None,
                                      token_to_kv_pool_allocator=alloc, page_size=1))


problems = []

# 1. A handle from another cache.
mine, theirs = new_cache(_sglang_cpu.RecordingAllocator()), new_cache(_sglang_cpu.RecordingAllocator())
theirs.insert(InsertParams(key=key(1, 2, 3), value=torch.tensor([0, 1, 2])))
foreign = theirs.match_prefix(MatchPrefixParams(key=key(1, 2, 3))).last_device_node
mine.insert(InsertParams(key=key(1, 2, 3), value=torch.tensor([0, 1, 2])))
try:
    mine.inc_lock_ref(foreign)
except Exception as exc:
    print(f"inc_lock_ref(foreign node) raised {type(exc).__name__}: {exc}")
if (mine.evictable_size(), mine.protected_size()) != (3, 0):
    problems.append(f"a foreign handle moved this cache's sizes to evictable={mine.evictable_size()} "
                    f"protected={mine.protected_size()} (nothing here is locked)")

# 2. A handle held across reset(), then unlocked; reset() is paired with freeing the tree's
#    slots, as the server's flush_cache does with allocator.clear().
alloc = _sglang_cpu.RecordingAllocator()
cache = new_cache(alloc)
cache.insert(InsertParams(key=key(1), value=torch.tensor([7])))
old = cache.match_prefix(MatchPrefixParams(key=key(1))).last_device_node
alloc.free(cache.all_values_flatten())  # what allocator.clear() does for these slots
cache.reset()
try:
    cache.dec_lock_ref(old)
except Exception as exc:
    print(f"dec_lock_ref(node from before reset) raised {type(exc).__name__}: {exc}")
try:
    n = cache.evict(EvictParams(num_tokens=1)).num_tokens_evicted
    if n:
        problems.append(f"evict() on the empty tree evicted {n} token(s) of a dead node")
except AssertionError as exc:
    problems.append(f"evict() on the empty tree freed a dead node's slot again: {exc}")
except Exception as exc:
    problems.append(f"evict() on the empty tree crashed: {type(exc).__name__}: {exc}")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
