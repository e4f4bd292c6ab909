"""LightLLM: matching or inserting along a path more than ~1,000 nodes deep raises RecursionError.

    export RADIXCHECK_LIGHTLLM_SRC=~/src/lightllm    # your clone of github.com/ModelTC/lightllm
    .audit-venv/bin/python reports/repro/lightllm_deep_path_recursion.py    # fc72ffa; `worktree`: the clone as it is

ModelTC/lightllm fc72ffab9a3455cfb571f22d45ab777cc29de0de,
lightllm/server/router/dynamic_prompt/radix_cache.py: ``RadixCache._match_prefix_helper`` and
``RadixCache._insert_helper`` call themselves once per node on the path, so a path deeper than
Python's recursion limit (1,000 frames by default) cannot be matched or extended. A path gets that
deep in ordinary serving: every turn of a long conversation (an agent loop) ends a node, and every
match that ends inside an edge splits it. SGLang had the same bug (sgl-project/sglang#154, #813)
and made its walks iterative. Here 1,200 splits of one cached conversation make the path 1,200
nodes deep; the next request on the whole conversation then raises RecursionError. The exception
escapes half-way through the walk (after some ``evict_tree_set.discard`` calls, before their
``finally`` re-adds), so the tree is left as the interrupted walk left it. Exits 1 while the
behaviour is present, 0 once both walks are iterative, 2 without the checkout.
"""

import sys

import torch
from _engine_checkout import engine_module

RadixCache = engine_module("lightllm_radix", "fc72ffa")[0].RadixCache

DEPTH = 1200  # past Python's default recursion limit of 1000 (sys.getrecursionlimit())
history = torch.arange(1, DEPTH + 1, dtype=torch.int64)  # one long conversation, one token per turn
cache = RadixCache("repro_deep_path", 10 * DEPTH, 0)
cache.insert(history, history + 1000)
for end in range(DEPTH - 1, 0, -1):  # requests that share a shorter prefix: each match splits the edge once
    node, length, _ = cache.match_prefix(history[:end], update_refs=False)
    assert length == end
print(f"a conversation of {DEPTH} tokens cached, split into {DEPTH} nodes by {DEPTH - 1} shorter requests "
      f"(recursion limit {sys.getrecursionlimit()})")

problems = []
for what, call in [
    ("match_prefix(whole conversation)", lambda: cache.match_prefix(history, update_refs=False)),
    ("insert(conversation + next turn)", lambda: cache.insert(torch.cat([history, torch.tensor([7])]),
                                                              torch.cat([history + 1000, torch.tensor([9999])]))),
]:
    try:
        call()
        print(f"{what}: ok")
    except RecursionError as exc:
        problems.append(f"{what} raised RecursionError: {exc}")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
