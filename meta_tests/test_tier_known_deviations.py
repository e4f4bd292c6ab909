"""A ``known:`` waiver reaches the tier order oracle (4t): ``4 LRU order  known:
suffix-refreshed-on-mid-edge-use`` waives SGLang #3 on a tiered cache the way it does on the plain
machine. The tier model marks where a cache's nodes end and tells the deviation of each split and
of each page that leaves the device; an order finding right by the deviation's statistics is
waived (said once a run), and a second order bug behind it is still a finding. The caches are the
reference tiered cache with #3 planted, alone and with a FIFO order behind it
(meta_tests/planted_tier_order.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.deviation import SuffixRefreshedOnMidEdgeUse
from radixcheck.oracles.violations import HostEvictionOrderViolation, LRUOrderViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import WaiverLog, parse_waivers
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache

from . import planted_tier_order as planted

LRU_3 = ("* * 4 LRU order  known: suffix-refreshed-on-mid-edge-use  # SGLang #3 (known), on the tiers\n"
         # #3 shows on the host tier too (a refreshed suffix goes to host with its fresh stamp); `known:` reaches 4t, not
         # 4h, so 4h is waived whole, as reports/waivers/sglang_hicache.txt does for SGLang's LRU rows
         "* * 4h host eviction order  # SGLang #3 on the host tier")
OTHER = "* * 5 evict-equals-never-saw  # another oracle's"
POLICIES = ["write_through", "write_back"]
FEW = settings(profiles.SETTINGS["mutation"], max_examples=25)  # fast tier: about a second each
MORE = settings(profiles.SETTINGS["mutation"], max_examples=200)  # deep tier


def _log(text: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(text), ("x:y",), "test_tier_state_machine[write_through-1]")


def _run(cache: type, waiver: str, policy: str, search: settings = FEW, page_size: int = 1) -> WaiverLog:
    log = _log(waiver)
    run_machine(tier_machine_for(cache, page_size, policy, name=f"tierknown_{cache.__name__}_{policy}_p{page_size}"), search,
                waived=log)
    return log


def _story(cache: type, deviation: bool) -> TierWorld:
    """[0, 0, 0] cached (one node), then [1]; a match of [0] ends inside [0, 0, 0]'s node; evict(1)."""
    world = TierWorld(cache, 1, "write_through")
    if deviation:
        world.model.deviations = [SuffixRefreshedOnMidEdgeUse()]
    for tokens in ([0, 0, 0], [1]):
        world.serve(tokens)
        world.finish()
    world.match([0])
    world.complete_all()
    world.evict(1)
    return world


def test_the_planted_3_fails_4t_unwaived_and_is_explained_by_the_deviation() -> None:
    with pytest.raises(LRUOrderViolation, match=r"freed Page\(\[1\]"):
        _story(planted.SuffixRefreshedTiers, deviation=False)
    world = None
    with pytest.raises(LRUOrderViolation) as caught:
        world = _story(planted.SuffixRefreshedTiers, deviation=True)
    assert world is None and caught.value.explained_by == frozenset({"suffix-refreshed-on-mid-edge-use"})


def test_the_deviation_is_said_once_a_run_then_accepted() -> None:
    world = TierWorld(planted.SuffixRefreshedTiers, 1, "write_through")
    world.model.deviations = [SuffixRefreshedOnMidEdgeUse()]
    world.deviation_met = {"suffix-refreshed-on-mid-edge-use"}  # said already in this run
    for tokens in ([0, 0, 0], [1]):
        world.serve(tokens)
        world.finish()
    world.match([0])
    world.complete_all()
    assert world.evict(1) == 1  # accepted: [1] went, as the deviating cache keeps its stamps
    world.check()


def test_the_reference_needs_no_deviation_on_the_same_story() -> None:
    world = _story(TieredRadixCache, deviation=True)
    assert world.cache.match_prefix([1]).device_values.size == 1  # [0, 0, 0]'s last page went, [1] stayed


@pytest.mark.parametrize("policy", POLICIES)
def test_the_3_tier_cache_conforms_with_3_known(policy: str) -> None:
    with pytest.raises((LRUOrderViolation, HostEvictionOrderViolation)):  # unwaived, #3 fails a tier order oracle (4t or 4h)
        _run(planted.SuffixRefreshedTiers, OTHER, policy)
    [found] = [f for f in _run(planted.SuffixRefreshedTiers, LRU_3, policy).findings() if f["oracle"] == "4 LRU order"]
    assert found["oracle"] == "4 LRU order" and found["known_deviation"] == "suffix-refreshed-on-mid-edge-use"


@pytest.mark.parametrize("policy", POLICIES)
def test_a_second_order_bug_behind_3_still_fails_4t(policy: str) -> None:
    with pytest.raises(LRUOrderViolation) as caught:
        _run(planted.SuffixRefreshedFifoTiers, LRU_3, policy)
    assert caught.value.explained_by == frozenset()


# ---- deep: a longer search, both page sizes ---------------------------------------------------------------------

@pytest.mark.deep
@pytest.mark.parametrize("page_size", [1, 2])
@pytest.mark.parametrize("policy", POLICIES)
def test_the_3_tier_cache_conforms_over_a_longer_search(policy: str, page_size: int) -> None:
    found = _run(planted.SuffixRefreshedTiers, LRU_3, policy, MORE, page_size).findings()
    assert [f["known_deviation"] for f in found if f["oracle"] == "4 LRU order"] == ["suffix-refreshed-on-mid-edge-use"]


@pytest.mark.deep
@pytest.mark.parametrize("cache", [TieredRadixCache, planted.SuffixRefreshedFifoTiers], ids=lambda c: c.__name__)
@pytest.mark.parametrize("policy", POLICIES)
def test_the_waiver_hides_nothing_else(cache: Any, policy: str) -> None:
    """The reference meets the waiver nowhere; the FIFO cache behind #3 is still caught at page size 2 too."""
    if cache is TieredRadixCache:
        assert _run(cache, LRU_3, policy, MORE, 2).findings() == []
        return
    with pytest.raises(LRUOrderViolation) as caught:
        _run(cache, LRU_3, policy, MORE, 2)
    assert caught.value.explained_by == frozenset()
