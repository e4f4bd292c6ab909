"""UnifiedRadixCache: an unmatched dec_lock_ref is refused, differently per tree core. The
Python core raises AssertionError and leaves the tree as it was (so it vanishes under
``python -O``); the Rust core panics, and the panic poisons the core's mutex: every later call
on that cache, even total_size(), raises "mutex poisoned". One stray unlock takes the whole
cache out of service.

    .audit-venv/bin/python reports/repro/sglang_unified_rust_unlock_poisons.py

Exits 1 while the Rust core stays unusable after the refused unlock.
"""

import os
import sys
from array import array

os.environ.setdefault("RUST_BACKTRACE", "0")
import _sglang_cpu
import torch
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

verdicts = {}
for backend in ("python", "rust"):
    cache = UnifiedRadixCache(CacheInitParams(
        disable=False, req_to_token_pool=None, page_size=1,
        token_to_kv_pool_allocator=_sglang_cpu.RecordingAllocator(),
        tree_components=(ComponentType.FULL,), tree_core_backend=backend))
    cache.insert(InsertParams(key=RadixKey(array("q", [1, 2, 3])), value=torch.tensor([0, 1, 2]),
                              prev_prefix_len=3))
    node = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", [1, 2, 3])))).last_device_node
    print(f"[{backend}] tree core: {type(cache.tree_core).__name__}")
    try:
        cache.dec_lock_ref(node, DecLockRefParams(node_id=node))  # nobody locked it
        print(f"[{backend}] unmatched dec_lock_ref accepted")
    except BaseException as exc:
        print(f"[{backend}] unmatched dec_lock_ref raised {type(exc).__name__}: {str(exc)[:90]}")
    try:
        sizes = (cache.total_size(), cache.evictable_size(), cache.protected_size())
        receipt = cache.inc_lock_ref(node).to_dec_params()
        cache.dec_lock_ref(node, receipt)
        print(f"[{backend}] cache still usable; sizes {sizes}")
        verdicts[backend] = True
    except BaseException as exc:
        print(f"[{backend}] BUG: cache unusable afterwards: {type(exc).__name__}: {str(exc)[:90]}")
        verdicts[backend] = False
sys.exit(0 if all(verdicts.values()) else 1)
