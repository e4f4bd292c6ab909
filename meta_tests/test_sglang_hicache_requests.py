"""SGLang's HiCache driven through its own request methods (``sglang_hicache:hicache_*_requests``,
``lifecycle="requests"``), on the real engine: ``deep``, and skipped without SGLang (the audit
environment, ``python -m radixcheck.reports.audit_env``).

* SGLang passes the request stories of ``test_tier_requests`` (an abort while its load-back is in
  flight, an eviction under a publish whose backups landed, a racing publish of duplicates, a finish
  after a load) on both tree cores and with tenants, under write_through and write_back.
* The adapter drives SGLang as its scheduler does, and a mistake in that shows for its reason: an
  admission that leaves ``cache_protected_len`` short of the loaded pages (as if
  ``load_back_is_cache_owned`` were ignored) has ``release_kv_cache`` free pages a load still fills
  (oracle 14); a release that drops the request's lock unreleased leaves pages nobody holds
  unevictable (oracle 4t).
* A request under one tenant never reads another's pages through the host tier (oracle 10).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from radixcheck.oracles.violations import EvictionAmountViolation, LRUOrderViolation, TransferInFlightViolation
from radixcheck.properties.tiers.contract import TierRequest
from radixcheck.properties.tiers.requests import RequestsTierWorld

from .test_tier_requests import _finishes_after_a_load, _on_host, abort_during_load, evict_after_the_backups_land, racing_publish

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]

NAMES = ["hicache_python_requests", "hicache_rust_requests", "hicache_python_fifo_salted_requests",
         "hicache_rust_fifo_salted_requests"]
POLICIES = ["write_through", "write_back"]  # write_through_selective backs nothing up on a first insert: no load-back story


def _factory(name: str) -> Any:
    from radixcheck.properties.adapters import sglang_hicache

    return sglang_hicache.FACTORIES[name]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", NAMES)
def test_sglang_passes_the_request_stories(name: str, policy: str) -> None:
    for story in (abort_during_load, evict_after_the_backups_land, racing_publish, _finishes_after_a_load):
        story(_factory(name), policy)


def _built(backend: str, mistake: type) -> Any:
    """A factory of the requests adapter with ``mistake`` mixed in (the same capabilities)."""
    from radixcheck.properties.adapters.sglang_hicache_requests import SGLangHiCacheRequests

    cls = type(f"{mistake.__name__}_{backend}", (mistake, SGLangHiCacheRequests), {})

    def factory(allocator: Any, host_pool: Any, controller: Any, page_size: int = 1,
                write_policy: str = "write_through") -> Any:
        return cls(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    factory.tier_capabilities = _factory(f"hicache_{backend}_requests").tier_capabilities  # type: ignore[attr-defined]
    return factory


class LoadNotProtected:
    """Admission as a scheduler that keeps ``cache_protected_len`` at the device match after
    ``init_load_back`` (``PrefillAdder.add_one_req`` sets it to ``prefix_len`` when
    ``load_back_is_cache_owned``): the loaded pages count as the request's own."""

    def lock_req(self, request: TierRequest) -> None:
        before = self._req(request).kv.cache_protected_len  # type: ignore[attr-defined]
        super().lock_req(request)  # type: ignore[misc]
        self._req(request).kv.cache_protected_len = before  # type: ignore[attr-defined]


class ReleaseKeepsLock:
    """An end that forgets the request's lock (``req.lock`` dropped before ``release_kv_cache``)."""

    def cache_finished_req(self, request: TierRequest, insert: bool = True) -> None:
        self._req(request).lock = None  # type: ignore[attr-defined]
        super().cache_finished_req(request, insert)  # type: ignore[misc]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("backend", ["python", "rust"])
def test_an_unprotected_load_is_freed_under_the_transfer(backend: str, policy: str) -> None:
    with pytest.raises(TransferInFlightViolation, match=r"freed while a transfer still reads or fills them"):
        abort_during_load(_built(backend, LoadNotProtected), policy)


@pytest.mark.parametrize("backend", ["python", "rust"])
def test_an_unprotected_load_without_a_load_back_is_correct(backend: str) -> None:
    evict_after_the_backups_land(_built(backend, LoadNotProtected), "write_through")


@pytest.mark.parametrize("backend", ["python", "rust"])
def test_a_lock_left_behind_keeps_pages_nobody_holds(backend: str) -> None:
    with pytest.raises((LRUOrderViolation, EvictionAmountViolation), match=r"unlocked device leaf Page\(\[1, 2\]"):
        abort_during_load(_built(backend, ReleaseKeepsLock), "write_through")


@pytest.mark.parametrize("backend", ["python", "rust"])
def test_a_tenant_reads_no_other_tenants_host_copy(backend: str) -> None:
    world = _on_host(_factory(f"hicache_{backend}_fifo_salted_requests"), "write_through", [1, 2])
    live = world.admit([1, 2], namespace=(None, "B"))
    assert live.values == [] and world.lives[0].request is not None and world.lives[0].request.host_length == 0
    world.compute(0, 2)
    world.end(0, "finish")
    world.complete_all()
    world.check()
    again = world.admit([1, 2])  # the default tenant's copy is on host still: it loads back
    assert len(again.values) == 2
    world.end(0, "finish")
    world.complete_all()
    world.check()
    assert isinstance(world, RequestsTierWorld)
