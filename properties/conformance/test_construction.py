"""The factory refuses configurations that make no sense, and a foreign handle is refused."""

from __future__ import annotations

import numpy as np
import pytest
from radixcheck.properties.contract import SlotAllocator


@pytest.mark.parametrize("bad_page_size", [0, -1, 1.5, True, None], ids=repr)
def test_bad_page_size_is_refused(target, bad_page_size) -> None:
    with pytest.raises((ValueError, TypeError)):
        target.factory(SlotAllocator(64), bad_page_size)


def test_handle_from_another_cache_is_refused(target, page_size: int) -> None:
    if not target.capabilities.checks_locks:
        pytest.skip(f"{target.spec} trusts its callers (capabilities.checks_locks=False): a foreign handle is never sent")
    mine, theirs = SlotAllocator(1024), SlotAllocator(1024)
    cache, other = target.factory(mine, page_size), target.factory(theirs, page_size)
    tokens = list(range(1, 2 * page_size + 1))
    other.insert(tokens, theirs.alloc(len(tokens)))
    _, foreign = other.match_prefix(tokens)
    other.inc_lock_ref(foreign)  # so that unlocking it is legal in the cache it came from
    cache.insert(tokens, mine.alloc(len(tokens)))
    before = (cache.total_size(), cache.protected_size(), set(mine.in_use))
    for op in (cache.inc_lock_ref, cache.dec_lock_ref):
        with pytest.raises(Exception):  # noqa: B017 - any clear exception; the state must not move
            op(foreign)
        assert (cache.total_size(), cache.protected_size(), set(mine.in_use)) == before
    assert np.array_equal(cache.match_prefix(tokens)[0], np.arange(len(tokens)))
