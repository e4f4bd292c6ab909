"""TokenSpeed's Python prefix cache: matching, inserting or sizing a path ~1,000 nodes deep raises
RecursionError.

    git clone https://github.com/lightseekorg/tokenspeed ~/src/tokenspeed
    export RADIXCHECK_TOKENSPEED_SRC=~/src/tokenspeed     # 418ec9d is taken from its history
    pip install torch==2.13.0 && python reports/repro/tokenspeed_deep_path_recursion.py

lightseekorg/tokenspeed 418ec9d26dc3 (the last commit with the file; removed in f3e4d1e, #864),
``python/tokenspeed/runtime/cache/prefix_cache.py``: ``_match_prefix_helper``, ``_insert_helper``
and ``_total_size_helper`` call themselves once per node of the path, so a path deeper than
Python's recursion limit (1,000 frames) cannot be matched, extended or counted. A path gets that
deep in ordinary serving: every match that ends inside an edge splits it (an agent loop's turns).
SGLang had the same bug (sgl-project/sglang#154, #813) and made its walks iterative; radixcheck's
production-scale test found it here (a 3,000-turn conversation, page size 1). Exits 1 while any of
the three raises, 0 once they are iterative, 2 without the checkout.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a clone run without installing radixcheck

from radixcheck.properties.adapters.checkout import CheckoutMissing  # noqa: E402

try:
    from radixcheck.properties.adapters import tokenspeed_prefix  # noqa: E402

    prefix_cache, source = tokenspeed_prefix.load()
    import torch
except (CheckoutMissing, ImportError) as exc:
    print(f"not run: {exc}", file=sys.stderr)
    sys.exit(2)
print(source.describe())


class Pool:  # what PrefixCache calls on its KVAllocator (as TokenSpeed's own test_prefix_cache.py's MockAllocator)
    page_size = 1

    def append_to_later_free(self, page_ids):
        pass

    def free_group_end(self):
        pass


DEPTH = 1200  # past Python's default recursion limit of 1000
cache = prefix_cache.PrefixCache(prefix_cache.CacheInitParams(disable=False, req_to_token_pool=None,
                                                              token_to_kv_pool_allocator=Pool(), page_size=1))
history = [(t,) for t in range(1, DEPTH + 1)]  # one conversation, one page per turn
cache.insert(history, torch.arange(DEPTH))
for end in range(DEPTH - 1, 0, -1):  # shorter requests on the same conversation: each match splits the edge once
    cache.match_prefix([t for (t,) in history[:end]])
print(f"a conversation of {DEPTH} pages cached and split into {DEPTH} nodes (recursion limit {sys.getrecursionlimit()})")

problems = []
for what, call in [("match_prefix(whole conversation)", lambda: cache.match_prefix([t for (t,) in history])),
                   ("insert(conversation + next turn)", lambda: cache.insert(history + [(0,)], torch.arange(DEPTH + 1))),
                   ("total_size()", cache.total_size)]:
    try:
        call()
        print(f"{what}: ok")
    except RecursionError as exc:
        problems.append(f"{what} raised RecursionError: {exc}")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
