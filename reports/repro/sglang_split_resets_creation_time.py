"""SGLang RadixCache's split gives the new parent a fresh creation_time: under FIFO (and FILO) a
shared prefix that a later request split looks newly created, and outlives (FILO: precedes)
leaves cached after it.

    .audit-venv/bin/python reports/repro/sglang_split_resets_creation_time.py

``RadixCache._split_node`` builds the parent with ``TreeNode()``, whose ``creation_time`` is
``time.monotonic()`` at the split; it copies ``hit_count`` and ``priority`` but not the time. The
unified tree core copies it (``new_node.creation_time = child.creation_time``), which is what the
radixcheck contract says a split keeps (the prefix is as old as before). Here [0, 0] is cached
first, then [1, 1], then a request matches [0] (splitting [0, 0]); eviction of three tokens under
FIFO must take [0, 0] whole (the oldest), then one token of [1, 1]: SGLang takes the lower [0],
then [1, 1], because the upper [0] looks created at the match. Exits 1 while the bug is present.
"""

import sys
import time
from array import array

import _sglang_cpu  # noqa: F401
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

allocator = _sglang_cpu.RecordingAllocator()
cache = RadixCache(CacheInitParams(disable=False, req_to_token_pool=None, page_size=1, eviction_policy="fifo",
                                   token_to_kv_pool_allocator=allocator))
cache.insert(InsertParams(key=RadixKey(array("q", [0, 0])), value=torch.tensor([10, 11])))
time.sleep(0.001)
cache.insert(InsertParams(key=RadixKey(array("q", [1, 1])), value=torch.tensor([20, 21])))
time.sleep(0.001)
cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", [0]))))
cache.evict(EvictParams(num_tokens=2))
if allocator.freed[:2] == [11, 10]:
    print("fixed: FIFO evicted [0, 0] (the oldest, split or not) first:", allocator.freed)
    sys.exit(0)
print(f"BUG: FIFO evicted slots {allocator.freed} for 2 tokens; [0, 0] (slots 11 then 10) was cached first, "
      "but the split made its upper half look created at the match")
sys.exit(1)
