"""mini-sglang: a match (or insert) that ends inside an edge splits it, but the matched half keeps
the edge's old timestamp; LRU eviction then frees that just-used prefix before older entries.

    export RADIXCHECK_MINISGLANG_SRC=~/src/mini-sglang    # your clone of github.com/sgl-project/mini-sglang
    .audit-venv/bin/python reports/repro/mini_sglang_split_keeps_stale_stamp.py            # 20fcd7f (newest)
    .audit-venv/bin/python reports/repro/mini_sglang_split_keeps_stale_stamp.py f074873    # the same before #52

Exits 1 while the behaviour is present (prints what happened), 0 once it is fixed, 2 without the
checkout. Runs ``python/minisgl/kvcache/radix_cache.py`` (20fcd7f) or ``radix_manager.py``
(f074873), unchanged, from that commit of the clone's history (``worktree``: the clone as it is);
see ``_engine_checkout.py``.
Cause: ``_tree_walk`` (``_walk`` at f074873) stamps ``node.timestamp = tic`` only on fully matched
nodes; on a partial match it returns ``node.split_at(match_len)``, a new node that copies the old
``self.timestamp``.
"""

import sys
import time

import torch
from _engine_checkout import engine_module

radix, commit = engine_module("mini_sglang", "20fcd7f")
if hasattr(radix, "RadixCacheManager"):  # before the cache was paged (f074873)
    cache = radix.RadixCacheManager(torch.device("cpu"))

    def matched_len(ids):
        return cache.match_prefix(ids)[0].cached_len
else:
    from radixcheck.properties.adapters._minisgl_stubs import global_ctx

    with global_ctx(page_size=1):  # the engine's global Context.page_size
        cache = radix.RadixPrefixCache(torch.device("cpu"))

    def matched_len(ids):
        return cache.match_prefix(ids).cuda_handle.cached_len


def t(*xs):
    return torch.tensor(xs, dtype=torch.int32)


def tick():
    time.sleep(0.002)  # keep the monotonic_ns stamps of the steps apart


print(f"mini-sglang {commit}")
cache.insert_prefix(t(1, 2), t(10, 11))  # request A: prompt [1, 2] in slots 10, 11
tick()
cache.insert_prefix(t(5), t(20))  # request B: prompt [5] in slot 20 (used after A)
tick()
print("match([1]) ->", matched_len(t(1)), "token(s)")  # request C reuses A's first token only (newest use)
tick()

evicted = cache.evict(2).tolist()
print(f"evict(2) -> slots {evicted}")
# LRU: the leaf [2] (slot 11, last used by A) goes first; then the least recently used leaf is
# B's [5] (slot 20), not [1] (slot 10), which C used last.
expected = [11, 20]
after = matched_len(t(1))
print(f"match([1]) now -> {after} token(s); match([5]) -> {matched_len(t(5))} token(s)")
if sorted(evicted) != sorted(expected):
    print(
        f"BUG: LRU eviction freed {evicted}, expected {expected}: the prefix [1] that the last match "
        f"used kept the stamp of A's insert when the match split its edge"
    )
    sys.exit(1)
sys.exit(0)
