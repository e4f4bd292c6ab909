"""Construction, foreign handles and reset, outside the state machine: the factory refuses
configurations that make no sense, a handle from another cache is refused, and reset empties
the cache."""

from __future__ import annotations

import numpy as np
import pytest

from radixcheck.oracles.violations import BadInputViolation, RefcountViolation, SecondSlotViolation, SlotViolation
from radixcheck.properties.cache.contract import SlidingWindow, SlotAllocator, StatePool, second_pool_keywords
from radixcheck.properties.findings.construction_replay import foreign_handle_ops, foreign_handle_tokens
from radixcheck.properties.target import NOT_A_REFUSAL


def _second_values(capabilities, second: dict, length: int) -> dict:  # noqa: ANN001 - a Capabilities
    """An insert's second-pool keyword: a live window slot per token, or the state after them."""
    if isinstance(capabilities.second_pool, SlidingWindow):
        return {"window": second["second_allocator"].alloc(length)}
    if isinstance(capabilities.second_pool, StatePool):
        return {"state": int(second["second_allocator"].alloc(1)[0])}
    return {}


@pytest.mark.parametrize("bad_page_size", [0, -1, 1.5, True, None], ids=repr)
def test_bad_page_size_is_refused(target, bad_page_size) -> None:
    if not target.capabilities.validates_input:
        pytest.skip(f"{target.spec} trusts its callers with arguments (capabilities.validates_input=False)")
    try:
        target.factory(SlotAllocator(64), bad_page_size, **second_pool_keywords(target.capabilities))
    except (ValueError, TypeError):
        return
    raise BadInputViolation(f"the factory accepted page_size={bad_page_size!r} (it must raise ValueError or TypeError)")


def test_handle_from_another_cache_is_refused(target, page_size: int) -> None:
    if target.capabilities.key_mode != "tokens":
        pytest.skip(f"{target.spec} keys by {target.capabilities.key_mode} (capabilities.key_mode): this test sends raw "
                    "sequences of its own; the state machines judge it in keys")
    if not target.capabilities.checks_locks:
        pytest.skip(f"{target.spec} trusts its callers (capabilities.checks_locks=False): a foreign handle is never sent")
    mine, theirs = SlotAllocator(1024), SlotAllocator(1024)
    second = second_pool_keywords(target.capabilities)  # a hybrid cache: each has its own second pool
    other_second = second_pool_keywords(target.capabilities)
    cache = target.factory(mine, page_size, **second)
    other = target.factory(theirs, page_size, **other_second)
    tokens = foreign_handle_tokens(page_size)
    other.insert(tokens, theirs.alloc(len(tokens)), **_second_values(target.capabilities, other_second, len(tokens)))
    foreign = other.match_prefix(tokens)[1]  # a hybrid match answers (values, handle, window or state)
    other.inc_lock_ref(foreign)  # so that unlocking it is legal in the cache it came from
    slots = mine.alloc(len(tokens))
    cache.insert(tokens, slots.copy(), **_second_values(target.capabilities, second, len(tokens)))
    before = (cache.total_size(), cache.protected_size(), set(mine.in_use))
    ops = [getattr(cache, name) for name in foreign_handle_ops(target.capabilities)]
    for op in ops:
        try:
            op(foreign)
        except NOT_A_REFUSAL:  # a wire server that broke the protocol or crashed did not refuse it
            raise
        except Exception:  # noqa: BLE001 - any clear exception; the state must not move
            pass
        else:
            # the state machine's sentence for the same event (its foreign_handle rule): one finding when both meet it
            raise RefcountViolation(f"{op.__name__} of a handle from another cache: {op.__name__} accepted it instead of raising")
        after = (cache.total_size(), cache.protected_size(), set(mine.in_use))
        if after != before:
            raise RefcountViolation(f"{op.__name__} refused a foreign handle but changed the cache: {before[:2]} -> {after[:2]}")
    if not np.array_equal(cache.match_prefix(tokens)[0], slots):
        raise RefcountViolation("after refusing a foreign handle, the cache's own prefix matches differently")


def test_reset_empties_the_cache(target, page_size: int) -> None:
    """reset() frees every slot the cache holds and leaves it empty (also a locked path)."""
    if target.capabilities.key_mode != "tokens":
        pytest.skip(f"{target.spec} keys by {target.capabilities.key_mode} (capabilities.key_mode): this test sends raw "
                    "sequences of its own; the state machines judge it in keys")
    if not target.capabilities.supports_reset:
        pytest.skip(f"{target.spec} has no reset (capabilities.supports_reset=False): reset is never sent")
    allocator = SlotAllocator(1024)
    second = second_pool_keywords(target.capabilities)
    cache = target.factory(allocator, page_size, **second)
    for first in (1, 2):
        tokens = [first] + list(range(3, 3 * page_size + 2))
        cache.insert(tokens, allocator.alloc(len(tokens)), **_second_values(target.capabilities, second, len(tokens)))
    handle = cache.match_prefix([1] + list(range(3, 3 * page_size + 2)))[1]
    cache.inc_lock_ref(handle)
    cache.reset()
    sizes = (cache.total_size(), cache.evictable_size(), cache.protected_size())
    if sizes != (0, 0, 0):
        raise SlotViolation(f"after reset(), total/evictable/protected sizes are {sizes}, not 0")
    if allocator.in_use:
        raise SlotViolation(f"reset() kept slots {sorted(allocator.in_use)[:8]}")
    if second and second["second_allocator"].in_use:
        raise SecondSlotViolation(f"reset() kept second-pool slots {sorted(second['second_allocator'].in_use)[:8]}")
    if len(cache.match_prefix([1, 3, 4])[0]):
        raise SlotViolation("after reset(), a prefix cached before still matches")
