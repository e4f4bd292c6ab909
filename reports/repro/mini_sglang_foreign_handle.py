"""mini-sglang (20fcd7f): ``lock_handle`` accepts a handle of another cache. It locks the other tree's
nodes but moves *this* cache's ``evictable_size``/``protected_size``, which then describe neither
tree: here ``evictable_size`` goes negative, and the owner's lock count is raised behind its back.

    export RADIXCHECK_MINISGLANG_SRC=~/src/mini-sglang    # your clone of github.com/sgl-project/mini-sglang
    .audit-venv/bin/python reports/repro/mini_sglang_foreign_handle.py    # 20fcd7f; `worktree`: the clone as it is

Exits 1 while the behaviour is present (prints what happened), 0 once a foreign handle is refused
with this cache left unchanged, 2 without the checkout. Runs ``python/minisgl/kvcache/radix_cache.py``
of the clone's 20fcd7f, unchanged (see ``_engine_checkout.py``). The engine builds one cache per scheduler and never passes handles between
caches, so this needs a caller bug (or a future multi-cache design, e.g. one cache per adapter
or per data-parallel rank sharing request objects) to happen.
"""

import sys

import torch
from _engine_checkout import engine_module

from radixcheck.properties.adapters._minisgl_stubs import global_ctx

radix_cache, commit = engine_module("mini_sglang", "20fcd7f")
with global_ctx(page_size=1):  # the engine's global Context.page_size
    mine = radix_cache.RadixPrefixCache(torch.device("cpu"))
    other = radix_cache.RadixPrefixCache(torch.device("cpu"))


def t(*xs):
    return torch.tensor(xs, dtype=torch.int32)


mine.insert_prefix(t(1, 2), t(10, 11))
other.insert_prefix(t(5, 6, 7), t(20, 21, 22))
foreign = other.match_prefix(t(5, 6, 7)).cuda_handle
before = mine.size_info
print(f"mini-sglang {commit}")
print(f"this cache before: {before}")

problems = []
try:
    mine.lock_handle(foreign)
except Exception as exc:  # noqa: BLE001 - the fix: refuse it
    print(f"lock_handle(foreign handle) raised {type(exc).__name__}: {exc}")
else:
    problems.append("lock_handle accepted a handle of another cache")
after = mine.size_info
print(f"this cache after:  {after}  (it still holds 2 tokens, none locked)")
if after != before:
    problems.append(f"this cache's sizes moved from {tuple(before)} to {tuple(after)}")
if foreign.node.ref_count:
    problems.append(f"the other cache's node now has ref_count={foreign.node.ref_count} that its owner never took")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
