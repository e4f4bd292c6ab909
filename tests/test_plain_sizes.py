"""The plain reference cache keeps its sizes as the tree changes (``total_size``/``protected_size``/
``evictable_size`` are O(1): a scheduler reads them every step, and the production worlds hold thousands
of nodes). The kept counts must equal a walk of the tree after every call, on every path a node takes
(insert and split, lock and unlock, eviction, a quarantine with locks held, the last unlock of a
quarantined node, a reset), in every namespace and page size; and a size call must not walk the tree."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from radixcheck.properties.cache.mutants import KeyedRootsTree
from radixcheck.reference import RadixCache

CALLS = ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "evict_prefix", "reset")
CHECKED: list[tuple[int, int, int]] = []  # (total, protected, evictable) after each call


class Frees:
    def free(self, slots: Any) -> None:
        pass


def _walked(cache: RadixCache) -> tuple[int, int, int]:
    """The sizes by the contract's definition, walked here (no code shared with the cache's counts):
    every node reachable from a namespace's root; protected = locked, evictable = unlocked."""
    total = protected = evictable = 0
    stack = [child for root in cache.roots.values() for child in root.children.values()]
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        total += len(node.key)
        protected += len(node.key) if node.lock_ref > 0 else 0
        evictable += len(node.key) if node.lock_ref == 0 else 0
    return total, protected, evictable


def _recounted(base: type) -> type:
    """``base`` with its sizes compared with a walk of its tree after every call (raised or not)."""

    def wrap(name: str) -> Any:
        method = getattr(base, name)

        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            finally:
                kept = (self.total_size(), self.protected_size(), self.evictable_size())
                assert kept == _walked(self), f"after {name}{args[:1]}: kept sizes {kept}, a walk counts {_walked(self)}"
                CHECKED.append(kept)
        return call

    return type(f"Recounted{base.__name__}", (base,), {name: wrap(name) for name in CALLS})


def _drive(cache: RadixCache, rng: random.Random, steps: int) -> None:
    """Requests over shared prefixes in three namespaces, held and released in any order, evictions,
    quarantines (some while a request under them is held), a reset midway, and a few refused calls."""
    p = cache.page_size
    prefixes = [[rng.randrange(50) for _ in range(12 * p)] for _ in range(5)]
    held: list[Any] = []
    slot = 0
    for step in range(steps):
        namespace = rng.choice([None, "a", ("b", 1)])
        tokens = rng.choice(prefixes)[: rng.randrange(1, 12) * p] + [rng.randrange(50) for _ in range(rng.randrange(0, 3 * p))]
        values = np.arange(slot, slot + len(tokens), dtype=np.int64)
        slot += len(tokens)
        cache.insert(tokens, values, namespace)
        _, handle = cache.match_prefix(tokens[: rng.randrange(1, len(tokens) + 1)], namespace)
        if rng.random() < 0.6:
            cache.inc_lock_ref(handle)
            held.append(handle)
        while len(held) > rng.randrange(0, 4):
            cache.dec_lock_ref(held.pop(rng.randrange(len(held))))
        if rng.random() < 0.3:
            cache.evict(rng.randrange(1, 30))
        if rng.random() < 0.15:
            cache.evict_prefix(rng.choice(prefixes)[: rng.randrange(1, 6) * p + 1], namespace)
        if rng.random() < 0.05:
            with pytest.raises(ValueError):
                cache.insert(tokens, values[:-1] if len(values) else np.zeros(1, dtype=np.int64), namespace)
        if step == steps // 2:
            for handle in held:
                cache.dec_lock_ref(handle)
            held.clear()
            cache.reset()
    for handle in held:  # the last unlock of a quarantined node frees it (detached nodes are never counted)
        cache.dec_lock_ref(handle)
    cache.evict(10**9)


@pytest.mark.parametrize("base", [RadixCache, KeyedRootsTree], ids=lambda c: c.__name__)
@pytest.mark.parametrize("page_size", [1, 4])
def test_the_kept_sizes_equal_a_walk_of_the_tree_after_every_call(base: type, page_size: int) -> None:
    CHECKED.clear()
    cache = _recounted(base)(Frees(), page_size)
    _drive(cache, random.Random(7), steps=120)
    assert len(CHECKED) > 300 and any(p for _, p, _ in CHECKED) and any(e for _, _, e in CHECKED), len(CHECKED)
    assert CHECKED[-1] == (0, 0, 0)


def test_a_size_call_does_not_walk_the_tree() -> None:
    cache = RadixCache(Frees(), 1)
    _drive(cache, random.Random(3), steps=40)
    cache.insert(list(range(30)), np.arange(1000, 1030, dtype=np.int64))
    expected = _walked(cache)

    def no_walk(*_: Any) -> Any:
        raise AssertionError("a size call walked the tree")

    cache._subtree = cache._linked_nodes = no_walk  # type: ignore[method-assign]
    assert (cache.total_size(), cache.protected_size(), cache.evictable_size()) == expected
