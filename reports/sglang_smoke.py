"""Smoke test of the SGLang adapters: build each factory at each page size, run a few calls.

    .audit-venv/bin/python reports/sglang_smoke.py            # every factory
    .audit-venv/bin/python reports/sglang_smoke.py radix_lru  # just these

For each factory and page size 1/2/4 it inserts two sequences sharing a prefix, matches a
third (which splits an edge), locks the match, evicts everything evictable, checks that the
locked prefix survived and that every slot the cache freed reached the suite's allocator,
unlocks, evicts the rest and resets. It prints one line per run: ``ok`` or the exception.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from radixcheck.argtypes import ArgumentParser  # noqa: E402
from radixcheck.properties.adapters import sglang_radix  # noqa: E402
from radixcheck.properties.cache.contract import SlotAllocator  # noqa: E402


def smoke(factory, page_size: int) -> str:
    slots = SlotAllocator(64)
    cache = factory(slots, page_size)
    assert cache.page_size == page_size

    a = [1, 2, 3, 4, 5, 6, 7, 8]
    b = [1, 2, 3, 4, 9, 10, 11, 12]
    va = slots.alloc(len(a))
    assert cache.insert(a, va) == 0
    vb = slots.alloc(len(b))
    pb = cache.insert(b, vb)
    # The caller still owns what the cache did not keep: the duplicated prefix.
    slots.free(vb[:pb])
    assert pb == 4, pb
    assert cache.total_size() == 12, cache.total_size()
    assert cache.evictable_size() == 12 and cache.protected_size() == 0

    # A query diverging mid-edge: longest page-aligned prefix, handle ends exactly there.
    q = [1, 2, 3, 4, 5, 6, 99, 100]
    values, handle = cache.match_prefix(q)
    want = 6 // page_size * page_size
    assert values.dtype == np.int64 and list(values) == list(va[:want]), (values, va)

    cache.inc_lock_ref(handle)
    assert cache.protected_size() == want, (cache.protected_size(), want)
    assert cache.evictable_size() + cache.protected_size() == cache.total_size()

    freed_before = len(slots.freed_log)
    evicted = cache.evict(100)
    assert evicted == 12 - want, (evicted, want)
    assert len(slots.freed_log) - freed_before == evicted
    again, _ = cache.match_prefix(q)
    assert list(again) == list(va[:want]), "a locked prefix was evicted"

    cache.dec_lock_ref(handle)
    assert cache.protected_size() == 0 and cache.evictable_size() == want
    assert cache.evict(100) == want
    assert cache.total_size() == 0

    # Root handle: empty match, lock/unlock are no-ops.
    empty, root = cache.match_prefix([42])
    assert len(empty) == 0
    cache.inc_lock_ref(root)
    cache.dec_lock_ref(root)

    vc = slots.alloc(4)
    cache.insert([5, 6, 7, 8], vc)
    cache.reset()
    assert cache.total_size() == 0
    assert not slots.in_use, f"slots leaked: {sorted(slots.in_use)}"
    assert not slots.violations, slots.violations
    return "ok"


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="reports/sglang_smoke.py", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="factory", help=f"factories to run (default: all of {sorted(sglang_radix.FACTORIES)})")
    names = parser.parse_args(argv).names or list(sglang_radix.FACTORIES)
    unknown = sorted(set(names) - set(sglang_radix.FACTORIES))
    if unknown:
        parser.error(f"argument factory: unknown {unknown}; known: {sorted(sglang_radix.FACTORIES)}")
    failures = 0
    for name in names:
        factory = sglang_radix.FACTORIES[name]
        for ps in factory.capabilities.page_sizes:
            t0 = time.perf_counter()
            try:
                res = smoke(factory, ps)
            except Exception as exc:  # report and carry on
                failures += 1
                tb = traceback.extract_tb(exc.__traceback__)[-1]
                res = f"FAIL {type(exc).__name__}: {exc} ({Path(tb.filename).name}:{tb.lineno})"
            print(f"{name:28s} page_size={ps}  {res}  [{(time.perf_counter() - t0) * 1e3:.0f} ms]")
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
