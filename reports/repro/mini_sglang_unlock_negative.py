"""mini-sglang (20fcd7f): an unmatched unlock trips ``assert node.ref_count >= 0`` only after it has
set the counter to -1; the next request's lock then protects nothing and its KV is evicted while
it holds the lock. (Under ``python -O`` the unlock is accepted silently with the same effect.)

    export RADIXCHECK_MINISGLANG_SRC=~/src/mini-sglang    # your clone of github.com/sgl-project/mini-sglang
    .audit-venv/bin/python reports/repro/mini_sglang_unlock_negative.py    # 20fcd7f; `worktree`: the clone as it is

Exits 1 while the behaviour is present (prints what happened), 0 once it is fixed (the unmatched
unlock is refused and leaves every counter as it was), 2 without the checkout. Runs
``python/minisgl/kvcache/radix_cache.py`` of the clone's 20fcd7f, unchanged (see ``_engine_checkout.py``).
The engine's own scheduler pairs every lock with one unlock, so this needs a caller bug to happen.
"""

import sys

import torch
from _engine_checkout import engine_module

from radixcheck.properties.adapters._minisgl_stubs import global_ctx

radix, commit = engine_module("mini_sglang", "20fcd7f")
with global_ctx(page_size=1):  # the engine's global Context.page_size
    cache = radix.RadixPrefixCache(torch.device("cpu"))


def match(ids):
    return cache.match_prefix(ids).cuda_handle


def t(*xs):
    return torch.tensor(xs, dtype=torch.int32)


print(f"mini-sglang {commit}")
cache.insert_prefix(t(7), t(30))  # an unrelated entry, so a lock on root..[7] is not the point
cache.insert_prefix(t(1, 2, 3), t(10, 11, 12))
handle = match(t(1, 2, 3))

problems = []
try:
    cache.lock_handle(handle, unlock=True)  # unmatched: nobody locked this handle
except Exception as exc:  # noqa: BLE001 - whatever it raises, look at what it left behind
    print(f"unmatched unlock raised {type(exc).__name__}: {exc}")
else:
    problems.append("unmatched unlock accepted")
if handle.node.ref_count != 0:
    problems.append(f"the refused unlock left ref_count={handle.node.ref_count} on the matched node")

# A request now matches the prefix and locks it, as CacheManager.lock does.
handle = match(t(1, 2, 3))
cache.lock_handle(handle)
print(f"after a request's lock_handle: ref_count={handle.node.ref_count} size_info={cache.size_info}")
if cache.size_info.protected_size != 3:
    problems.append(f"the request's lock protects {cache.size_info.protected_size} of its 3 tokens")
evictable = cache.size_info.evictable_size
evicted = cache.evict(evictable).tolist() if evictable else []
print(f"evict({evictable}) -> {evicted}")
locked = sorted(set(evicted) & {10, 11, 12})
if locked:
    problems.append(f"evict() freed KV slots {locked} that the running request holds a lock on")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
