"""SGLang: ``all_values_flatten()`` raises RecursionError once the tree is ~1,000 nodes deep, in
RadixCache and in UnifiedRadixCache's Python tree core (the Rust core is fine).

    .audit-venv/bin/python reports/repro/sglang_all_values_flatten_recursion.py

sglang 0.5.23: ``RadixCache.all_values_flatten`` (srt/mem_cache/radix_cache.py) and
``UnifiedTreeCore.all_values_flatten`` (srt/mem_cache/unified_cache/unified_tree_core.py) collect
the values with a nested ``_dfs`` that calls itself once per tree level, the class of
sgl-project/sglang#1501 and #3029 (the eviction and size walks are loops now; these, and
``pretty_print``'s debugging helper, still recurse). The scheduler's invariant checker calls
``tree_cache.all_values_flatten()`` when it diagnoses a mamba-pool leak
(srt/managers/scheduler_components/invariant_checker.py, ``_check_mamba_pool``): with a
UnifiedRadixCache on the Python core and a deep tree, the leak report itself crashes.
A path 1,200 nodes deep is built the way serving builds one: a long conversation cached whole,
then requests sharing ever shorter prefixes of it, each split the edge once. Exits 1 while any
tree raises, 0 when all three return the 1,200 slots.
"""

import sys
from array import array

import _sglang_cpu
import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

DEPTH = 1200  # past Python's default recursion limit of 1000


def build(kind, alloc):
    p = dict(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=alloc, page_size=1)
    if kind == "RadixCache":
        return RadixCache(CacheInitParams(**p))
    return UnifiedRadixCache(CacheInitParams(**p, tree_components=(ComponentType.FULL,),
                                             tree_core_backend=kind.split(":")[1]))


bad = 0
history = list(range(1, DEPTH + 1))
for kind in ("RadixCache", "UnifiedRadixCache:python", "UnifiedRadixCache:rust"):
    cache = build(kind, _sglang_cpu.RecordingAllocator())
    cache.insert(InsertParams(key=RadixKey(array("q", history)), value=torch.arange(100, 100 + DEPTH)))
    for end in range(DEPTH - 1, 0, -1):  # each shorter request splits the edge once: DEPTH nodes on one path
        cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", history[:end]))))
    try:
        got = len(cache.all_values_flatten())
        verdict = "ok" if got == DEPTH else f"WRONG: {got} slots"
    except RecursionError as exc:
        verdict = f"RecursionError: {exc}"
    bad += verdict != "ok"
    print(f"{kind:26s} path {DEPTH} nodes deep; all_values_flatten(): {verdict}")
sys.exit(1 if bad else 0)
