"""The tier machine's tenants meet generated namespace pairs too, as the plain machine's do: a tier
cache that keys its trees by ``str(namespace)`` (``5`` and ``"5"`` one tenant) was told it conforms,
since the tier stories drew only the fixed list's pairs (NU trial, hicache_like_trial.md)."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import TenantIsolationViolation, TierResidencyViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.reference.tiered_cache import TieredRadixCache


class KeyedByText(TieredRadixCache):
    """Each namespace's tree found by the namespace's text: ``5`` / ``"5"`` and ``None`` / ``"None"`` share."""

    def _root_for(self, namespace: Hashable) -> object:
        return super()._root_for(str(namespace))


@pytest.mark.parametrize("seed", [0])
def test_a_tier_cache_keying_namespaces_by_their_text_fails_isolation(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    machine = tier_machine_for(KeyedByText, 1, "write_through", name=f"keyed_by_text_{seed}")
    # 5 / "5" share a tree (oracle 10), or 1 / 1.0, one namespace, do not (the match finds less than is cached)
    with pytest.raises((TenantIsolationViolation, TierResidencyViolation), match="namespace"):
        run_machine(machine, profiles.SETTINGS["mutation"])


@pytest.mark.deep
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_the_reference_passes_the_generated_pairs(policy: str) -> None:
    """Pairs the contract calls one namespace (``1`` / ``1.0`` / ``True``) must share: no false alarm."""
    run_machine(tier_machine_for(TieredRadixCache, 1, policy, name=f"generated_pairs_{policy}"), profiles.SETTINGS["mutation"])
