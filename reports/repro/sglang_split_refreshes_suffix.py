"""SGLang LRU: a match that ends inside an edge refreshes the edge's *unmatched* remainder, so
LRU eviction then drops a more recently used leaf and keeps one nobody has used since.

    .audit-venv/bin/python reports/repro/sglang_split_refreshes_suffix.py

RadixCache._match_prefix_helper stamps ``child.last_access_time`` before it splits ``child``;
after the split ``child`` is the unmatched suffix, and it keeps the fresh stamp (the matched
prefix is the new node). The same happens in _insert_helper, and in UnifiedRadixCache with
either tree core (checked below). Under an LRU contract ("a match is a use of every matched
node") the suffix [3] below was last used when A was inserted, before B, so evict(1) must take
[3]; SGLang takes B. Exits 1 while the behaviour is present.
"""

import sys
import time
from array import array

import _sglang_cpu
import torch
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache


def key(*tokens):
    return RadixKey(array("q", tokens))


def build(kind, alloc):
    p = dict(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=alloc, page_size=1)
    if kind == "RadixCache":
        return RadixCache(CacheInitParams(**p))
    backend = kind.split(":")[1]
    return UnifiedRadixCache(CacheInitParams(**p, tree_components=(ComponentType.FULL,),
                                             tree_core_backend=backend))


bad = 0
for kind in ("RadixCache", "UnifiedRadixCache:python", "UnifiedRadixCache:rust"):
    alloc = _sglang_cpu.RecordingAllocator()
    cache = build(kind, alloc)
    cache.insert(InsertParams(key=key(1, 3), value=torch.tensor([10, 13])))  # A, used first
    time.sleep(0.01)
    cache.insert(InsertParams(key=key(0), value=torch.tensor([20])))  # B, used after A
    time.sleep(0.01)
    cache.match_prefix(MatchPrefixParams(key=key(1)))  # uses [1] only; splits [1,3] -> [1] + [3]
    cache.evict(EvictParams(num_tokens=1))
    verdict = "ok" if alloc.freed == [13] else "LRU VIOLATION"
    bad += verdict != "ok"
    print(f"{kind:26s} evict(1) freed {alloc.freed}; least recently used leaf is [3] (slot 13): {verdict}")
sys.exit(1 if bad else 0)
