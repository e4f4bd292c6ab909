"""LightLLM LRU: an insert that ends inside an edge refreshes the *whole* edge, so LRU eviction
then drops a more recently used leaf and keeps tokens nobody has used since they were cached.

    export RADIXCHECK_LIGHTLLM_SRC=~/src/lightllm    # your clone of github.com/ModelTC/lightllm
    .audit-venv/bin/python reports/repro/lightllm_insert_refreshes_suffix.py    # fc72ffa; `worktree`: the clone as it is

ModelTC/lightllm fc72ffab9a3455cfb571f22d45ab777cc29de0de,
lightllm/server/router/dynamic_prompt/radix_cache.py, RadixCache._insert_helper: when the key
ends inside a child's edge (``prefix_len == len(key) < len(child.token_id_key)``) it calls
``child.update_time()`` on the unsplit child. The same use through ``match_prefix`` splits the
edge and stamps only the matched part, so the two paths disagree: after a match, evict(1) takes
the stale suffix [3]; after an insert, it takes B, which was used later. And when the unsplit
edge is evicted, the prefix the request has just used goes with its stale remainder. Runs that file of the
clone, unchanged (its shared-memory counters and memory manager are radixcheck's stand-ins, see
``_engine_checkout.py``). Exits 1 while the behaviour is present, 0 once it is gone, 2 without
the checkout.
"""

import sys

import torch
from _engine_checkout import engine_module

RadixCache = engine_module("lightllm_radix", "fc72ffa")[0].RadixCache


def t(*ids):
    return torch.tensor(ids, dtype=torch.int64)


def run(use):
    cache = RadixCache(f"repro_insert_refresh_{use}", 100, 0)
    cache.insert(t(1, 3), t(10, 13))  # A: a request's KV, used first
    cache.insert(t(0), t(20))  # B: another request's KV, used after A
    if use == "insert":
        # A request whose KV is a prefix of A finishes: LightLLM inserts [1] (it is already
        # cached, prefix_len == 1, the caller frees its own slot 30). It used [1] only.
        assert cache.insert(t(1), t(30)) == 1
    else:
        cache.match_prefix(t(1), update_refs=False)  # the same use, through a match
    freed = []
    cache.evict(1, lambda idx: freed.extend(idx.tolist()))
    return freed


def run_single_edge(use):
    """The other face of the same cause: the unsplit edge is later evicted as one unit, and the
    prefix a request has just used goes with its stale remainder."""
    cache = RadixCache(f"repro_insert_refresh_edge_{use}", 100, 0)
    cache.insert(t(1, 2, 3, 4), t(10, 11, 12, 13))  # one edge
    if use == "insert":
        assert cache.insert(t(1, 2), t(30, 31)) == 2  # a request used [1, 2] (caller frees 30, 31)
    else:
        cache.match_prefix(t(1, 2), update_refs=False)
    freed = []
    cache.evict(1, lambda idx: freed.extend(idx.tolist()))
    return freed


bad = 0
for use in ("match", "insert"):
    freed = run(use)
    verdict = "ok" if freed == [13] else "LRU VIOLATION"
    bad += verdict != "ok"
    print(f"use of [1] through {use:6s}: evict(1) freed {freed}; the least recently used tokens are [3] (slot 13): {verdict}")
for use in ("match", "insert"):
    freed = run_single_edge(use)
    verdict = "ok" if freed == [12, 13] else "LRU VIOLATION"
    bad += verdict != "ok"
    print(f"use of [1, 2] of the edge [1, 2, 3, 4] through {use:6s}: evict(1) freed {freed}; "
          f"LRU frees only the unused [3, 4] (slots 12, 13): {verdict}")
sys.exit(1 if bad else 0)
