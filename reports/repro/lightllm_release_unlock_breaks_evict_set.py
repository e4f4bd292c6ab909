"""LightLLM 0.0.1, the package registry's one release: releasing a request's lock on a leaf changes
the leaf's sort key while it sits in ``evict_tree_set`` (a ``SortedSet``); the next match of that
prompt raises ``ValueError: <TreeNode ...> not in list``.

    .audit-venv/bin/pip install --no-deps lightllm==0.0.1    # python -m radixcheck.reports.audit_env does it
    .audit-venv/bin/python reports/repro/lightllm_release_unlock_breaks_evict_set.py           # 0.0.1: exits 1
    export RADIXCHECK_LIGHTLLM_SRC=~/src/lightllm            # your clone of github.com/ModelTC/lightllm
    .audit-venv/bin/python reports/repro/lightllm_release_unlock_breaks_evict_set.py fc72ffa   # fixed: exits 0

lightllm/server/router/dynamic_prompt/radix_cache.py at 0.0.1: ``evict_tree_set`` orders leaves
by ``TreeNode.get_compare_key()``, ``(0 if ref_counter == 0 else 1, len(children), time_id)``.
``match_prefix`` and ``insert`` take a leaf out of the set before changing it and put it back
after; ``dec_node_ref_counter`` lowers ``ref_counter`` without doing so, so the set can no longer
find the leaf by its key: the next ``discard`` (the next match of the same prompt) raises, and
``evict`` orders it as still referenced. Fixed upstream by 06afb4a (2024-11-18, "PD Mode
Support (#607)"), which discards the leaf before the decrement and adds it back after; not
released on the registry since. In 0.0.1's server, ``_free_a_req_mem`` inserts the finished
request's tokens before the release, so this needs the released node to be a leaf still: a
request whose cached KV ends where its match ended.

With no argument this runs the installed registry release, imported as installed (its
shared-memory counters are real; the repro unlinks their names at once). With a commit (or
``worktree``) it runs that commit of your clone instead (see ``_engine_checkout.py``). Exits 1
while the behaviour is present, 0 once it is gone, 2 when the code is not here.
"""

import os
import sys

import torch

if len(sys.argv) > 1:
    from _engine_checkout import engine_module

    RadixCache = engine_module("lightllm_radix", "fc72ffa")[0].RadixCache
    release = False
else:
    try:
        from lightllm.server.router.dynamic_prompt.radix_cache import RadixCache
    except ImportError:
        print("not run: LightLLM 0.0.1 is not installed: pip install --no-deps lightllm==0.0.1", file=sys.stderr)
        sys.exit(2)
    from importlib.metadata import version

    print(f"LightLLM {version('lightllm')} (package registry)")
    release = True


def t(*ids):
    return torch.tensor(ids, dtype=torch.int64)


cache = RadixCache(f"repro_release_unlock_{os.getpid()}", 100, 0)
if release:  # real POSIX shared memory: leave nothing behind in /dev/shm
    for shared in (cache.refed_tokens_num, cache.tree_total_tokens_num, cache.shared_idx_manager._shm_array):
        shared.shm.unlink()

cache.insert(t(1, 2, 3), t(10, 11, 12))  # a finished request's prompt, cached
node, _, _ = cache.match_prefix(t(1, 2, 3), update_refs=True)  # a request is admitted on it (lock)
cache.dec_node_ref_counter(node)  # it ends: its lock is released

problems = []
try:
    _, length, _ = cache.match_prefix(t(1, 2, 3))  # the next request with the same prompt
    print(f"the next match of [1, 2, 3] found {length} tokens")
except ValueError as exc:
    problems.append(f"the next match of the same prompt raised ValueError: {exc}")
freed = []
try:
    cache.evict(3, lambda idx: freed.extend(idx.tolist()))
    print(f"evict(3) freed {freed}")
except Exception as exc:  # noqa: BLE001 - whatever it is, the cached prompt can no longer be evicted
    problems.append(f"evict(3) of the 3 unreferenced tokens raised {type(exc).__name__}: {exc}")

for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
