"""The factory refuses configurations that make no sense, and a foreign handle is refused."""

from __future__ import annotations

import numpy as np
import pytest

from properties.contract import SlotAllocator


@pytest.mark.parametrize("page_size", [0, -1, 1.5, True], ids=repr)
def test_bad_page_size_is_refused(target, page_size) -> None:
    with pytest.raises((ValueError, TypeError)):
        target.factory(SlotAllocator(64), page_size)


def test_handle_from_another_cache_is_refused(target) -> None:
    if not target.capabilities.checks_locks:
        pytest.skip(f"{target.spec} does not check handles (capabilities.checks_locks=False)")
    mine, theirs = SlotAllocator(64), SlotAllocator(64)
    cache, other = target.factory(mine, 1), target.factory(theirs, 1)
    other.insert([1, 2, 3], theirs.alloc(3))
    _, foreign = other.match_prefix([1, 2, 3])
    cache.insert([1, 2, 3], mine.alloc(3))
    before = (cache.total_size(), cache.protected_size(), set(mine.in_use))
    for op in (cache.inc_lock_ref, cache.dec_lock_ref):
        with pytest.raises(Exception):  # noqa: B017 - any clear exception; the state must not move
            op(foreign)
        assert (cache.total_size(), cache.protected_size(), set(mine.in_use)) == before
    assert np.array_equal(cache.match_prefix([1, 2, 3])[0], np.arange(3))
