"""TokenSpeed's Python prefix cache with KV events on: every insert that adds a node raises, and the
BlockRemoved hashes it would publish never name a block it stored.

    git clone https://github.com/lightseekorg/tokenspeed ~/src/tokenspeed
    export RADIXCHECK_TOKENSPEED_SRC=~/src/tokenspeed     # 418ec9d is taken from its history
    pip install torch==2.13.0 msgspec pyzmq pydantic && python reports/repro/tokenspeed_kv_events.py

lightseekorg/tokenspeed 418ec9d26dc3 (the last commit with the file; removed in f3e4d1e, #864),
``python/tokenspeed/runtime/cache/prefix_cache.py``, ``PrefixCache`` with
``CacheInitParams(enable_kv_cache_events=True)``:

1. ``_record_store_event`` builds ``BlockStored(..., lora_id=None)``, but ``runtime/pd/kv_events.py``'s
   ``BlockStored`` (a ``msgspec.Struct``) has no ``lora_id`` field: ``TypeError: Unexpected keyword
   argument 'lora_id'`` from the first ``insert`` that creates a node. Both files have been so since the
   initial release (205c53c); the engine itself no longer built this cache at 418ec9d (only its tests
   and benchmarks did, with events off), which is why nobody met it.
2. With 1 fixed (here: ``lora_id`` dropped before ``BlockStored`` is built), the events still do not
   describe the tree: ``BlockStored`` hashes each page tuple, ``hash(page)``, but ``_record_remove_event``
   walks ``node.key`` (a list of page tuples) ``page_size`` *pages* at a time and hashes
   ``tuple(node.key[start:start + page_size])``, a tuple of tuples. No ``BlockRemoved`` names a stored
   block, at any page size, and at page size > 1 there is one remove per ``page_size`` pages. A router
   index fed these events keeps every evicted block forever.

Exits 1 while either is present, 0 once both are fixed, 2 without the checkout.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a clone run without installing radixcheck

from radixcheck.properties.adapters.checkout import CheckoutMissing  # noqa: E402

try:
    from radixcheck.properties.adapters import tokenspeed_prefix  # noqa: E402

    prefix_cache, source = tokenspeed_prefix.load()
    import torch
except CheckoutMissing as exc:
    print(f"not run: {exc}", file=sys.stderr)
    sys.exit(2)
except ImportError as exc:
    print(f"not run: {exc}", file=sys.stderr)
    sys.exit(2)
print(source.describe())


class Pool:  # what PrefixCache calls on its KVAllocator (as TokenSpeed's own test_prefix_cache.py's MockAllocator)
    def __init__(self, page_size):
        self.page_size = page_size

    def append_to_later_free(self, page_ids):
        pass

    def free_group_end(self):
        pass


def make(page_size):
    params = prefix_cache.CacheInitParams(disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=Pool(page_size),
                                          page_size=page_size, enable_kv_cache_events=True)
    return prefix_cache.PrefixCache(params)


problems = []
cache = make(1)
try:
    cache.insert([(1,), (2,)], torch.tensor([10, 11]))
    print("1. insert with KV events on: ok")
except TypeError as exc:
    problems.append(f"1. insert with KV events on raised TypeError: {exc}")

stored_cls = prefix_cache.BlockStored
prefix_cache.BlockStored = lambda lora_id=None, **fields: stored_cls(**fields)  # as if finding 1 were fixed
try:
    for page_size in (1, 2):
        cache = make(page_size)
        pages = [tuple(range(i * page_size, (i + 1) * page_size)) for i in range(4)]
        cache.insert(pages, torch.tensor(list(range(100, 104))))
        cache.evict(4)
        stored = {h for e in cache.kv_event_queue if type(e).__name__ == "BlockStored" for h in e.block_hashes}
        removed = [h for e in cache.kv_event_queue if type(e).__name__ == "BlockRemoved" for h in e.block_hashes]
        print(f"page size {page_size}: {len(stored)} blocks stored, {len(removed)} removes, "
              f"{sum(h in stored for h in removed)} of them name a stored block")
        if set(removed) != stored:
            problems.append(f"2. page size {page_size}: the cache evicted all {len(stored)} stored blocks, but its "
                            f"{len(removed)} BlockRemoved events name {sum(h in stored for h in removed)} of them")
finally:
    prefix_cache.BlockStored = stored_cls

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
