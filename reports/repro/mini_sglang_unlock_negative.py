"""mini-sglang (20fcd7f): an unmatched unlock trips ``assert node.ref_count >= 0`` only after it has
set the counter to -1; the next request's lock then protects nothing and its KV is evicted while
it holds the lock. (Under ``python -O`` the unlock is accepted silently with the same effect.)

    .audit-venv/bin/python reports/repro/mini_sglang_unlock_negative.py            # 20fcd7f (newest)

Exits 1 while the behaviour is present (prints what happened), 0 once it is fixed (the unmatched
unlock is refused and leaves every counter as it was). Runs the vendored copy of
``python/minisgl/kvcache/radix_cache.py`` (20fcd7f) from ``properties/adapters/vendored/``
(verbatim but for the ``minisgl`` imports, see ORIGIN.md there).
The engine's own scheduler pairs every lock with one unlock, so this needs a caller bug to happen.
"""

import importlib
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "properties" / "adapters" / "vendored"))

commit = "20fcd7f"
shims = importlib.import_module(f"mini_sglang_{commit}._shims")
with shims.global_ctx(page_size=1):  # the engine's global Context.page_size
    cache = importlib.import_module(f"mini_sglang_{commit}.radix_cache").RadixPrefixCache(torch.device("cpu"))


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
