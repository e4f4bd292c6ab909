"""The vLLM adapter's size counts (``vllm_prefix.VLLMPrefixCache``: ``total_size``, ``evictable_size``,
``protected_size`` and the idle cached blocks ``evict`` reads) are kept as its calls change them;
here they must equal a rescan of vLLM's whole block pool after every call of a replay-like stream
(match, lock, evict when short, insert, unlock; locks held across requests; repeated aligned
prompts that make spare copies; bulk evictions). ``deep`` (importing vLLM takes ~30 s), and skipped
without vLLM (the audit environment, ``python -m radixcheck.reports.audit_env``).

The rescan reads only vLLM's blocks (``block_hash``, ``ref_cnt``), none of the adapter's records,
and an adapter that forgets an unlock is caught by it.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Any

import numpy as np
import pytest

from radixcheck.properties.cache.contract import SlotAllocator

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                                   reason="needs vLLM (python -m radixcheck.reports.audit_env)")]


def rescan(cache: Any) -> dict[str, int]:
    """The counts from vLLM's pool alone: a page is a block hash some block carries (copies share
    it), protected while any copy has ``ref_cnt > 0``; idle blocks are cached blocks nobody holds."""
    held: dict[Any, bool] = {}
    idle = 0
    for block in cache.pool.blocks:
        if block.block_hash is not None:
            held[block.block_hash] = held.get(block.block_hash, False) or block.ref_cnt > 0
            idle += block.ref_cnt == 0
    ps, protected = cache.page_size, sum(held.values())
    return {"total": len(held) * ps, "protected": protected * ps, "evictable": (len(held) - protected) * ps, "idle": idle}


def counted(cache: Any) -> dict[str, int]:
    return {"total": cache.total_size(), "protected": cache.protected_size(), "evictable": cache.evictable_size(),
            "idle": cache.idle_cached_blocks()}


def drive(cache: Any, allocator: SlotAllocator, seed: int, requests: int = 150) -> int:
    """A replay-like stream over a small pool; checks the counts after every call. Returns the checks made."""
    rng, ps = random.Random(seed), cache.page_size
    prompts = [[rng.randrange(50) for _ in range(rng.randrange(ps, 12 * ps))] for _ in range(12)]
    locked: list[Any] = []
    checks = 0

    def check(after: str) -> None:
        nonlocal checks
        assert counted(cache) == rescan(cache), f"after {after}"
        checks += 1

    for i in range(requests):
        base = rng.choice(prompts)
        tokens = base[: rng.randrange(1, len(base) + 1)] + [rng.randrange(50) for _ in range(rng.randrange(0, 3 * ps))]
        aligned = len(tokens) // ps * ps
        values, handle = cache.match_prefix(tokens)
        cache.inc_lock_ref(handle)
        check(f"request {i}: lock")
        need = aligned - len(values)
        if need > allocator.available():
            cache.evict(need - allocator.available())
            check(f"request {i}: evict")
        if need > allocator.available():  # every slot is locked: give up a lock and skip the request
            cache.dec_lock_ref(handle)
            check(f"request {i}: unlock")
            continue
        new = allocator.alloc(need)
        already = cache.insert(tokens[:aligned], np.concatenate([values, new]))
        allocator.free(new[: already - len(values)])
        check(f"request {i}: insert")
        if rng.random() < 0.3:
            locked.append(handle)  # held across requests
        else:
            cache.dec_lock_ref(handle)
            check(f"request {i}: unlock")
        if locked and rng.random() < 0.3:
            cache.dec_lock_ref(locked.pop(rng.randrange(len(locked))))
            check(f"request {i}: a held lock released")
        if rng.random() < 0.1:
            cache.evict(rng.randrange(1, 8 * ps))
            check(f"request {i}: bulk evict")
        cached, _ = cache.match_prefix(base)
        if len(cached) >= ps and len(cached) == len(base) // ps * ps and rng.random() < 0.2:
            cache.serve_aligned(base[: len(cached)])  # a spare copy of the last page
            check(f"request {i}: serve_aligned")
    for handle in locked:
        cache.dec_lock_ref(handle)
        check("the last unlocks")
    return checks


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_counts_match_a_rescan_of_the_pool_after_every_call(page_size: int, seed: int) -> None:
    from radixcheck.properties.adapters.vllm_prefix import VLLMPrefixCache

    allocator = SlotAllocator(40 * page_size, seed=seed)
    cache = VLLMPrefixCache(allocator, page_size)
    assert drive(cache, allocator, seed) > 150
    assert cache.total_size() > 0 and cache.protected_size() == 0  # the stream cached pages and let them all go


def test_an_adapter_that_forgets_an_unlock_fails_the_rescan() -> None:
    from radixcheck.properties.adapters.vllm_prefix import VLLMPrefixCache

    class ForgetsUnlocks(VLLMPrefixCache):
        def _unhold(self, request_id: str) -> None:
            pass  # vLLM drops the hold; the counts keep it

    allocator = SlotAllocator(40 * 16, seed=0)
    with pytest.raises(AssertionError, match="unlock"):
        drive(ForgetsUnlocks(allocator, 16), allocator, 0)
