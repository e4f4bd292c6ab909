"""UnifiedRadixCache with the Rust tree core: node ids (the handles match_prefix returns) are
per-cache counters, so a handle from another cache names a *different, live* node of this
cache. Locking it is accepted and locks that unrelated node. The Python core's ids come from one
process-wide counter, so it refuses the foreign handle (KeyError). Both cores refuse a handle
held across reset() (their counters do not restart), which the script checks too.

    .audit-venv/bin/python reports/repro/sglang_unified_rust_node_ids.py

Exits 1 while the Rust core accepts such a handle.
"""

import os
import sys
from array import array

os.environ.setdefault("RUST_BACKTRACE", "0")
import _sglang_cpu
import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache


def new_cache(backend):
    return UnifiedRadixCache(CacheInitParams(
        disable=False, req_to_token_pool=None, page_size=1,
        token_to_kv_pool_allocator=_sglang_cpu.RecordingAllocator(),
        tree_components=(ComponentType.FULL,), tree_core_backend=backend))


def cached(cache, tokens, slots):
    key = RadixKey(array("q", tokens))
    cache.insert(InsertParams(key=key, value=torch.tensor(slots), prev_prefix_len=len(tokens)))
    return cache.match_prefix(MatchPrefixParams(key=key)).last_device_node


def accepted(cache, node, what: str, detail: str) -> bool:
    """Lock ``node`` in ``cache``; report and return whether the cache took it."""
    try:
        cache.inc_lock_ref(node)
    except Exception as exc:
        print(f"{what} refused: {type(exc).__name__} {exc}")
        return False
    print(f"BUG: {what} was accepted ({detail}); protected_size={cache.protected_size()}")
    return True


bad = 0
for backend in ("python", "rust"):
    theirs, mine = new_cache(backend), new_cache(backend)
    foreign = cached(theirs, [7, 8, 9], [0, 1, 2])
    own = cached(mine, [1, 2, 3], [0, 1, 2])
    bad += accepted(mine, foreign, f"[{backend}] another cache's node {foreign}", f"this cache's own is {own}")

    cache = new_cache(backend)
    old = cached(cache, [1, 2, 3], [0, 1, 2])
    cache.reset()
    new = cached(cache, [4, 5, 6], [3, 4, 5])
    bad += accepted(cache, old, f"[{backend}] node {old} from before reset()", f"the new tree's node is {new}")
sys.exit(1 if bad else 0)
