"""The rules of the tier contract a new user found unsaid (composed trial, "Friction" 1) are pinned:

* a page whose load-back is pending is on device: it counts in a match's device part and in
  ``device_size()`` (a cache that waits for the load before counting it fails, oracle 13 and the
  sizes of device conservation);
* ``evict_prefix`` returns every cached token it removed, host-only pages included (a cache that
  counts only what it freed on device fails its return value).

* a write-back landing on a leaf that got a page below it on device meanwhile leaves it on device
  (the device pages stay prefix-closed: a cache that frees it fails oracle 13). Its other half, a
  leaf a request locked meanwhile, is pinned in ``test_tier_lifecycle.py`` (``WriteBackIgnoresLock``).

Each story is a few calls (the fast tier).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from radixcheck.oracles.violations import ReturnValueViolation, SlotViolation, TierResidencyViolation
from radixcheck.properties.tiers.contract import TierMatch, Transfer
from radixcheck.properties.tiers.mutants import LoadLockedTiers, TrustingTenantTiers
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache

CORRECT = [TieredRadixCache, TrustingTenantTiers, LoadLockedTiers]
POLICIES = ["write_through", "write_back"]


class SizeWaitsForLoads(TieredRadixCache):
    """``device_size()`` counts a loaded page only once its load landed."""

    def device_size(self) -> int:
        return sum(len(n.key) for n in self._nodes() if n.device is not None and n.loading is None)


class MatchWaitsForLoads(TieredRadixCache):
    """A match counts a page whose load is pending as on host still (its KV has not arrived)."""

    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> TierMatch:
        match = super().match_prefix(tokens, namespace, priority)
        path = self._walk(tuple(tokens), namespace)
        lead = 0  # the device part's nodes
        while lead < len(path) and path[lead].device is not None:
            lead += 1
        loading = next((i for i in range(lead) if path[i].loading is not None), None)
        if loading is None:
            return match
        kept, moved = path[:loading], path[loading:lead]
        values = np.concatenate([n.device for n in kept]) if kept else np.zeros(0, dtype=np.int64)
        handle = kept[-1] if kept else self._root_for(namespace)
        host_length = match.host_length + sum(len(n.key) for n in moved)
        return TierMatch(values, handle, host_length, match.host_handle if match.host_length else moved[-1])


class PrefixCountsDeviceOnly(TieredRadixCache):
    """``evict_prefix`` removes the whole branch but returns only the tokens it had on device."""

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        host_only = sum(len(n.key) for n in self._nodes() if n.linked and n.device is None and n.host is not None
                        and tuple(tokens) == tuple(self._prefix_of(n))[: len(tokens)])
        return super().evict_prefix(tokens, namespace) - host_only

    def _prefix_of(self, node: Any) -> list[int]:
        keys = []
        while node.parent is not None:
            keys.append(node.key)
            node = node.parent
        return [t for key in reversed(keys) for t in key]


class WriteBackFreesUnderAChild(TieredRadixCache):
    """A write-back's completion frees the leaf it was started for if no request holds it, even
    when an insert put a page below it on device meanwhile (a gap in the device path)."""

    def transfer_done(self, transfer: Transfer) -> None:
        marked = [n for n in self._pending.get(transfer.number, ()) if transfer.kind == "write" and n.evict_when_written]
        super().transfer_done(transfer)
        for node in marked:  # the reference frees it only while it is still a device leaf
            if node.linked and node.device is not None and node.lock_ref == 0:
                self._free_device(node)


def _loading_back(factory: Any, policy: str) -> TierWorld:
    """[1, 2, 3] cached, evicted to host only, then served again: its load-back is pending."""
    world = TierWorld(factory, 1, policy)
    world.serve([1, 2, 3])
    world.finish()
    world.complete_all()
    for _ in range(2):
        world.evict(100)
        world.complete_all()
    assert world.cache.match_prefix([1, 2, 3]).host_length == 3
    world.serve([1, 2, 3])
    assert [t.kind for t in world.controller.pending] == ["load"]
    world.check()  # device_size() while the load is pending
    world.match([1, 2, 3])  # the device part while the load is pending
    return world


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_page_loading_back_counts_on_device(factory: Any, policy: str) -> None:
    world = _loading_back(factory, policy)
    assert world.cache.device_size() == 3 and len(world.cache.match_prefix([1, 2, 3]).device_values) == 3
    world.finish()
    world.complete_all()
    world.check()


def test_a_device_size_that_waits_for_loads_fails_the_sizes() -> None:
    with pytest.raises(SlotViolation, match=r"device_size\(\) is 0, but its pages still hold 3"):
        _loading_back(SizeWaitsForLoads, "write_through")


def test_a_match_that_waits_for_loads_fails_residency() -> None:
    with pytest.raises(TierResidencyViolation, match=r"returned device slots \[\] \(0\), but the pages on device hold"):
        _loading_back(MatchWaitsForLoads, "write_back")


def _quarantine_below_host_only(factory: Any, policy: str) -> TierWorld:
    """[1, 2, 3] cached, its leaf [3] evicted to host only, then ``evict_prefix([1, 2])``: [2] is on
    device (and host), [3] on host only; both are removed, 2 tokens."""
    world = TierWorld(factory, 1, policy)
    world.serve([1, 2, 3])
    world.finish()
    world.complete_all()
    world.evict(1)
    world.complete_all()
    match = world.cache.match_prefix([1, 2, 3])
    assert (len(match.device_values), match.host_length) == (2, 1)
    world.quarantine([1, 2])
    return world


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", POLICIES)
def test_evict_prefix_removes_and_counts_host_only_pages(factory: Any, policy: str) -> None:
    world = _quarantine_below_host_only(factory, policy)
    world.check()
    assert world.cache.host_size() == world.model.sizes()[1]


def test_an_evict_prefix_that_counts_device_pages_only_fails_its_return_value() -> None:
    with pytest.raises(ReturnValueViolation, match=r"evict_prefix\(\[1, 2\]\) returned 1, but 2 cached tokens"):
        _quarantine_below_host_only(PrefixCountsDeviceOnly, "write_through")


def _write_back_lands_under_a_child(factory: Any) -> TierWorld:
    """[1, 2] cached and its write-back started by ``evict``; [1, 2, 3] inserted below it before the
    write lands (the request finishes, so nobody holds [1, 2] at the completion)."""
    world = TierWorld(factory, 1, "write_back")
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.evict(100)
    assert [t.kind for t in world.controller.pending] == ["write", "write"]
    world.serve([1, 2, 3])
    world.finish()
    world.complete_all()
    world.check()
    return world


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
def test_a_write_back_landing_above_a_new_device_page_leaves_it_on_device(factory: Any) -> None:
    world = _write_back_lands_under_a_child(factory)
    assert len(world.cache.match_prefix([1, 2, 3]).device_values) == 3


def test_a_write_back_that_frees_a_page_above_a_device_page_fails_residency() -> None:
    with pytest.raises(TierResidencyViolation, match=r"left the device while Page\(\[1, 2, 3\], device\) below it stays"):
        _write_back_lands_under_a_child(WriteBackFreesUnderAChild)
