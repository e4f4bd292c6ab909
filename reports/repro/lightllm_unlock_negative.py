"""LightLLM: an unmatched ``dec_node_ref_counter`` is accepted silently and drives
``ref_counter`` to -1. Afterwards either the next request's lock protects nothing (its KV slots
are evicted while it runs), or the next eviction that reaches the node fails its
``assert ... "error evict tree node state"`` half-way, after which eviction is broken for good.

    export RADIXCHECK_LIGHTLLM_SRC=~/src/lightllm    # your clone of github.com/ModelTC/lightllm
    .audit-venv/bin/python reports/repro/lightllm_unlock_negative.py    # fc72ffa; `worktree`: the clone as it is

ModelTC/lightllm fc72ffab9a3455cfb571f22d45ab777cc29de0de,
lightllm/server/router/dynamic_prompt/radix_cache.py, RadixCache.dec_node_ref_counter (no check
that the counters are positive) / match_prefix(update_refs=True) (moves tokens to "refed" only on
0 -> 1) / evict. Runs that file of the clone, unchanged (its shared-memory
counters and memory manager are radixcheck's stand-ins, see ``_engine_checkout.py``). Exits 1
while the behaviour is present, 0 once the release is refused, 2 without the checkout.
"""

import sys

import torch
from _engine_checkout import engine_module

RadixCache = engine_module("lightllm_radix", "fc72ffa")[0].RadixCache


def t(*ids):
    return torch.tensor(ids, dtype=torch.int64)


def release_twice(cache, key):
    """A request matches and locks ``key``, finishes, and its node is released a second time."""
    node, _, _ = cache.match_prefix(key, update_refs=True)
    cache.dec_node_ref_counter(node)
    try:
        cache.dec_node_ref_counter(node)  # unmatched: nothing holds this lock any more
    except Exception as exc:  # the fix: refuse it
        print(f"unmatched dec_node_ref_counter raised {type(exc).__name__}: {exc}")
        return node, False
    return node, True


problems = []

# 1. The next request's lock protects nothing.
cache = RadixCache("repro_unlock_negative_1", 100, 0)
cache.insert(t(1, 2, 3), t(10, 11, 12))
node, accepted = release_twice(cache, t(1, 2, 3))
if accepted:
    problems.append(f"unmatched release accepted: ref_counter={node.ref_counter}, root ref_counter={cache.root_node.ref_counter}")
    node, _, _ = cache.match_prefix(t(1, 2, 3), update_refs=True)  # request 2 runs on [1, 2, 3]
    print(f"request 2 holds [1, 2, 3]: ref_counter={node.ref_counter} refed_tokens={cache.get_refed_tokens_num()}")
    freed = []
    cache.evict(3, lambda idx: freed.extend(idx.tolist()))
    if freed:
        problems.append(f"evict(3) freed the KV slots {freed} of a request that holds them")

# 2. The next eviction asserts half-way, then eviction stays broken.
cache = RadixCache("repro_unlock_negative_2", 100, 0)
cache.insert(t(1, 2, 3), t(10, 11, 12))
cache.insert(t(5, 6), t(20, 21))
node, accepted = release_twice(cache, t(1, 2, 3))
if accepted:
    print(f"tree holds {cache.get_tree_total_tokens_num()} tokens, {cache.get_refed_tokens_num()} refed: evict(5) is legal")
    freed = []
    try:
        cache.evict(5, lambda idx: freed.extend(idx.tolist()))
    except AssertionError as exc:
        problems.append(f"evict(5) raised AssertionError({str(exc)!r}) after handing slots {freed} to the callback "
                        f"(free_radix_cache_to_get_enough_token never frees them)")
    try:
        cache.evict(1, lambda idx: None)
    except Exception as exc:  # noqa: BLE001 - whatever it is, eviction no longer works
        problems.append(f"every later evict fails: evict(1) raised {type(exc).__name__}: {exc}; "
                        f"{cache.get_tree_total_tokens_num()} tokens stay in the tree, none evictable")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
