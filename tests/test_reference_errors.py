"""The reference's own promise about bad input: the exception names the argument and the value.

The contract only asks any target to raise and change nothing; the reference also promises a
message a user can act on. These tests run against the reference whatever the selected target.
"""

from __future__ import annotations

import numpy as np
import pytest

from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.reference import RadixCache


@pytest.fixture
def cache() -> RadixCache:
    allocator = SlotAllocator(64)
    c = RadixCache(allocator)
    c.insert([1, 2, 3], allocator.alloc(3))
    return c


def test_page_size_defaults_to_one() -> None:
    assert RadixCache(SlotAllocator(8)).page_size == 1


@pytest.mark.parametrize(
    ("call", "error", "phrases"),
    [
        (lambda c: c.match_prefix([1.5, 2]), TypeError, ["tokens", "integer", "float", "1.5"]),
        (lambda c: c.match_prefix([1, -2]), ValueError, ["tokens", "negative", "-2"]),
        (lambda c: c.match_prefix(np.array([1, -2])), ValueError, ["tokens holds negative token id -2"]),
        (lambda c: c.match_prefix([1], priority=1.5), TypeError, ["priority must be an int, got float 1.5"]),
        (lambda c: c.match_prefix(np.array([[1, 2]])), ValueError, ["tokens", "1-D", "(1, 2)"]),
        (lambda c: c.match_prefix(np.array([1.0, 2.0])), TypeError, ["tokens", "integer", "float64"]),
        (lambda c: c.match_prefix("abc"), TypeError, ["tokens", "str"]),
        (lambda c: c.insert([4, 5.5], np.arange(2)), TypeError, ["tokens", "integer", "5.5"]),
        (lambda c: c.insert([4, 5], [7, 8]), TypeError, ["values", "ndarray", "list"]),
        (lambda c: c.insert([4, 5], np.arange(3)), ValueError, ["values", "(2,)", "(3,)"]),
        (lambda c: c.insert([4, 5], np.array([1.0, 2.0])), TypeError, ["values", "float64"]),
        (lambda c: c.insert([4, 5], np.array([1, -9])), ValueError, ["values", "negative", "-9"]),
        (lambda c: c.evict(-1), ValueError, ["num_tokens", ">= 0", "-1"]),
        (lambda c: c.evict(1.5), TypeError, ["num_tokens", "integer", "float", "1.5"]),
        (lambda c: c.evict_prefix([]), ValueError, ["evict_prefix", "non-empty"]),
        (lambda c: c.evict_prefix(["x"]), TypeError, ["tokens", "str", "'x'"]),
        (lambda c: c.inc_lock_ref(object()), ValueError, ["unknown handle", "not a node of this cache"]),
        (lambda c: RadixCache(SlotAllocator(8), page_size=0), ValueError, ["page_size", ">= 1", "0"]),
    ],
    ids=lambda x: getattr(x, "__name__", None) if isinstance(x, type) else None,
)
def test_bad_input_names_the_problem(cache, call, error, phrases) -> None:
    with pytest.raises(error) as raised:
        call(cache)
    message = str(raised.value)
    missing = [p for p in phrases if p not in message]
    assert not missing, f"message {message!r} does not mention {missing}"


def test_lock_errors_name_the_node(cache) -> None:
    _, handle = cache.match_prefix([1, 2, 3])
    with pytest.raises(ValueError, match=r"unmatched unlock: Node\(key=\(1, 2, 3\), lock_ref=0"):
        cache.dec_lock_ref(handle)
    cache.evict(3)
    with pytest.raises(ValueError, match=r"stale handle Node\(key=\(1, 2, 3\).*evicted or reset"):
        cache.inc_lock_ref(handle)
    cache.insert([1, 2, 3], cache.allocator.alloc(3))
    _, held = cache.match_prefix([1, 2, 3])
    cache.inc_lock_ref(held)
    cache.evict_prefix([1])
    with pytest.raises(ValueError, match=r"cannot lock Node\(key=\(1, 2, 3\).*quarantined"):
        cache.inc_lock_ref(held)


@pytest.mark.parametrize(
    ("call", "error", "phrases"),
    [
        (lambda c: c.match_prefix([1.5, 2]), TypeError, ["tokens", "1.5"]),
        (lambda c: c.match_prefix([1, 2], priority=1.5), TypeError, ["priority", "1.5"]),
        (lambda c: c.insert([4, 5.5], np.arange(2)), TypeError, ["tokens", "5.5"]),
        (lambda c: c.evict_prefix([7]), ValueError, ["evict_prefix", "two raw tokens"]),
    ],
    ids=["match-tokens", "match-priority", "insert-tokens", "evict_prefix-one-token"],
)
def test_the_bigram_reference_names_the_problem(call, error, phrases) -> None:
    """The bigram reference's bad input (its own checks, before the plain cache's) says what was wrong."""
    from radixcheck.reference.bigram import BigramRadixCache

    cache = BigramRadixCache(SlotAllocator(64))
    with pytest.raises(error) as raised:
        call(cache)
    message = str(raised.value)
    assert not [p for p in phrases if p not in message], message


def test_the_bigram_reference_keys_eviction_on_the_request_priority() -> None:
    """Under the priority policy, a bigram request's priority (0 unless given) reaches the tree:
    a newer request without one goes before an older one with priority 1."""
    from radixcheck.properties.cache import policies
    from radixcheck.reference.bigram import BigramRadixCache

    allocator = SlotAllocator(64)
    cache = BigramRadixCache.with_policy(policies.priority())(allocator)
    cache.insert([1, 2, 3], allocator.alloc(3), priority=1)  # older, priority 1: two keys
    cache.insert([7, 8, 9], allocator.alloc(3))  # newer, priority 0
    assert cache.evict(2) == 2
    assert len(cache.match_prefix([1, 2, 3])[0]) == 2 and len(cache.match_prefix([7, 8, 9])[0]) == 0


def test_the_edges_of_legal_input_are_taken() -> None:
    """Slot 0 and token 0 are legal (non-negative ids), and so are NumPy integers in a list and an
    empty array: the checks refuse below 0, not at it."""
    allocator = SlotAllocator(8)
    cache = RadixCache(allocator)
    slots = allocator.take([0, 5])
    cache.insert([0, np.int32(3)], slots)
    assert cache.match_prefix(np.array([0, 3]))[0].tolist() == [0, 5]
    assert cache.match_prefix(np.array([], dtype=np.int64))[0].tolist() == []


def test_an_unhashable_namespace_is_named() -> None:
    cache = RadixCache(SlotAllocator(8))
    for call in (lambda: cache.match_prefix([1], namespace=["a"]), lambda: cache.insert([1], np.array([2]), namespace={}),
                 lambda: cache.match_prefix([1], namespace=("a", ["b"])), lambda: cache.evict_prefix([1], namespace=["a"])):
        with pytest.raises(TypeError, match=r"namespace must be hashable \(a str, an int, None or a tuple of those\), got"):
            call()
