"""Targets with two planted bugs each. A tiered cache with two bugs of two oracles, for the repro files of a run with waivers
(meta_tests/test_repro_waivers.py): its device eviction takes a leaf more than asked (``4 eviction
amount``, the known bug a waiver names) and its host eviction frees one leaf whatever it is asked for
(``4h host eviction amount``, the unknown one behind it). Each bug alone is its mutant's
(:mod:`radixcheck.properties.tiers.mutants`); the reference is the fix of both."""

from __future__ import annotations

from radixcheck.properties.tenant_tree.mutants import MatchNamesUnavailableTenant, SplitLosesOtherTenantsTimes
from radixcheck.properties.tiers.mutants import TierEvictHostStopsShort, TierEvictOvershoots, TierMutant


class OvershootsAndHostStopsShort(TierMutant):
    """Device eviction compares with ``<=`` (one leaf more); host eviction stops after one leaf."""

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        if tier == "device":
            return TierEvictOvershoots._wants_more(self, counted, wanted, tier)
        return TierEvictHostStopsShort._wants_more(self, counted, wanted, tier)


class LosesTimesAndNamesUnavailable(SplitLosesOtherTenantsTimes, MatchNamesUnavailableTenant):
    """A tenant tree with two bugs: a split loses the other tenants' times (``11 tenant-tree eviction``,
    the known one) and a match names a tenant that cannot serve it (the unknown one behind it)."""
