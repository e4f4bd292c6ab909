"""mini-sglang (f074873, before the fix for mini-sglang#52): ``lock_handle`` skips the handle's own
node, so a request's lock does not protect the KV it matched: ``evict`` frees it while it is locked.

    export RADIXCHECK_MINISGLANG_SRC=~/src/mini-sglang    # your clone of github.com/sgl-project/mini-sglang
    .audit-venv/bin/python reports/repro/mini_sglang_lock_misses_node.py            # f074873: exits 1
    .audit-venv/bin/python reports/repro/mini_sglang_lock_misses_node.py 20fcd7f    # newest: exits 0

Exits 1 while the bug is present (prints what happened), 0 once it is fixed, 2 without the
checkout. Runs ``python/minisgl/kvcache/radix_manager.py`` (f074873) or ``radix_cache.py``
(20fcd7f), unchanged, from that commit of the clone's history (``worktree``: the clone as it is);
see ``_engine_checkout.py``.
Fixed upstream by 8827b0f (https://github.com/sgl-project/mini-sglang/pull/52).
"""

import sys

import torch
from _engine_checkout import engine_module

radix, commit = engine_module("mini_sglang", "f074873")
if hasattr(radix, "RadixCacheManager"):  # before the cache was paged (f074873)
    cache = radix.RadixCacheManager(torch.device("cpu"))

    def match(ids):
        handle, _ = cache.match_prefix(ids)
        return handle
else:
    from radixcheck.properties.adapters._minisgl_stubs import global_ctx

    with global_ctx(page_size=1):  # the engine's global Context.page_size
        cache = radix.RadixPrefixCache(torch.device("cpu"))

    def match(ids):
        return cache.match_prefix(ids).cuda_handle


print(f"mini-sglang {commit}")
ids = torch.tensor([1, 2, 3], dtype=torch.int32)
cache.insert_prefix(ids, torch.tensor([10, 11, 12], dtype=torch.int32))  # a finished request's prompt

# A new request with the same prompt matches it and locks the handle, as CacheManager.lock does.
handle = match(ids)
cache.lock_handle(handle)
print(f"after lock_handle: cached_len={handle.cached_len} size_info={cache.size_info}")

problems = []
if cache.size_info.protected_size != 3:
    problems.append(f"the request's lock protects {cache.size_info.protected_size} of its 3 matched tokens")
# Memory pressure: the scheduler evicts what the cache says is evictable.
evictable = cache.size_info.evictable_size
evicted = cache.evict(evictable).tolist() if evictable else []
print(f"evict({evictable}) -> {evicted}")
if evicted:
    problems.append(f"evict() freed KV slots {evicted} that the running request holds a lock on")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
