"""Targets with two planted bugs each, for the repro files of a run with waivers (the known bug is waived, the
unknown one behind it is the finding). A tiered cache with two bugs of two oracles, for the repro files of a run with waivers
(meta_tests/test_repro_waivers.py): its device eviction takes a leaf more than asked (``4 eviction
amount``, the known bug a waiver names) and its host eviction frees one leaf whatever it is asked for
(``4h host eviction amount``, the unknown one behind it). Each bug alone is its mutant's
(:mod:`radixcheck.properties.tiers.mutants`); the reference is the fix of both."""

from __future__ import annotations

from typing import Any

from meta_tests.planted_tier_order import SuffixRefreshedTiers
from radixcheck.properties.cache.mutants import EvictOvershoots
from radixcheck.properties.cache.policies import lfu
from radixcheck.properties.index.contract import AllBlocksCleared
from radixcheck.properties.index.mutants import ClearedClearsEveryRank
from radixcheck.properties.tenant_tree.mutants import MatchNamesUnavailableTenant, SplitLosesOtherTenantsTimes
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.mutants import TierEvictHostStopsShort, TierEvictOvershoots, TierMutant
from radixcheck.reference.kv_index import KvIndex
from radixcheck.reference.radix_cache import RadixCache
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode


class OvershootsAndHostStopsShort(TierMutant):
    """Device eviction compares with ``<=`` (one leaf more); host eviction stops after one leaf."""

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        if tier == "device":
            return TierEvictOvershoots._wants_more(self, counted, wanted, tier)
        return TierEvictHostStopsShort._wants_more(self, counted, wanted, tier)


class LosesTimesAndNamesUnavailable(SplitLosesOtherTenantsTimes, MatchNamesUnavailableTenant):
    """A tenant tree with two bugs: a split loses the other tenants' times (``11 tenant-tree eviction``,
    the known one) and a match names a tenant that cannot serve it (the unknown one behind it)."""


class SuffixRefreshedAndHostStopsShort(SuffixRefreshedTiers, TierEvictHostStopsShort):
    """SGLang's #3 on the tiers (``4 LRU order``, the known bug a ``known:`` line names) and a host eviction
    that stops after one leaf (``4h host eviction amount``, the unknown one behind it)."""


class EmptyEvictRaises(RadixCache):
    """``evict()`` with nothing evictable raises (the contract: it evicts nothing and returns 0)."""

    def evict(self, num_tokens: int) -> int:
        if self.evictable_size() == 0:
            raise RuntimeError("evict of an empty tree")
        return super().evict(num_tokens)


class EmptyEvictMiscounts(RadixCache):
    """``evict()`` with nothing evictable counts a phantom token in ``total_size()``."""

    phantom = 0

    def evict(self, num_tokens: int) -> int:
        if self.evictable_size() == 0:
            self.phantom += 1
        return super().evict(num_tokens)

    def total_size(self) -> int:
        return super().total_size() + self.phantom


class EmptyEvictMiscountsAndRaises(EmptyEvictMiscounts, EmptyEvictRaises):
    """Both: the crash (the known bug, waived) in the very call that miscounts (the unknown one)."""


class ClearedThenRaises(KvIndex):
    """Clears its rank on ``AllBlocksCleared``, then raises: a legal event refused (the known bug)."""

    def apply_event(self, worker_id: int, dp_rank: int, event: Any) -> None:
        super().apply_event(worker_id, dp_rank, event)
        if isinstance(event, AllBlocksCleared):
            raise RuntimeError("cleared: the flush hook failed")


class ClearsEveryRankThenRaises(ClearedThenRaises, ClearedClearsEveryRank):
    """Both: the refusal (waived) in the very event that clears every rank of the worker (the unknown bug)."""


class LfuEvictsByRecency(TieredRadixCache):
    """Declares LFU; its device eviction takes the least recently used leaf (an LFU that never reads its
    counts): the known bug an ``as lru`` line names. The host tier keeps the declared order."""

    policy = lfu()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), eviction_policy=lfu())

    def _eviction_key(self, node: TierNode) -> tuple[Any, int]:
        return node.last_access, node.serial

    def _host_eviction_key(self, node: TierNode) -> tuple[Any, int]:
        return TieredRadixCache._eviction_key(self, node)


class LfuHostStopsShort(TierEvictHostStopsShort):
    """Declares LFU and keeps it on both tiers; host eviction stops after one leaf (the unknown bug)."""

    policy = lfu()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), eviction_policy=lfu())


class LfuByRecencyAndHostStopsShort(LfuEvictsByRecency, LfuHostStopsShort):
    """Both: ``4 eviction order`` (waived ``as lru``) and ``4h host eviction amount`` behind it."""


TieredLfuOnly = TieredRadixCache.with_policy(lfu(), "TieredLfuOnly")  # the fix of both


class LockRefused(RadixCache):
    """``inc_lock_ref`` refuses every (legal) lock: ``2 refcount safety``, the known bug a ``said:`` line names."""

    def inc_lock_ref(self, *args: Any, **keywords: Any) -> Any:
        raise RuntimeError("lock table full")


class LockRefusedAndEmptyEvictMiscounts(EmptyEvictMiscounts, LockRefused):
    """Both: a refused lock (waived) and a phantom token counted by an evict of the empty tree (the finding)."""


class EvictOvershootsAndEmptyEvictMiscounts(EmptyEvictMiscounts, EvictOvershoots):
    """Both: an evict that empties everything (``4 eviction amount``, waived: an oracle finding, no call raises)
    and a phantom token counted by an evict of the empty tree (the finding)."""
