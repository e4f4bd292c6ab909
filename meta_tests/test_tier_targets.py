"""A tier target (a factory with ``tier_capabilities``) is audited through the user paths: the
loader tells it apart, ``radixcheck audit`` and the plugin run the tier machine on it, the reference
tiered cache passes, a tier mutant fails, and its repro file exits 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from radixcheck.properties.conformance.test_tier_machine import test_tier_state_machine as tier_conformance
from radixcheck.properties.target import TargetError, check_target, load_target
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.pytest_plugin import report_header, restrict_page_sizes

REFERENCE = "radixcheck.reference.tiered_cache:TieredRadixCache"
MUTANT = "radixcheck.properties.tiers.mutants:PartialPersist"


def test_a_tier_factory_loads_as_a_tier_target() -> None:
    target = load_target(REFERENCE)
    assert target.kind == "tier" and isinstance(target.capabilities, TierCapabilities)
    check_target(target)  # builds it in a tier world at each page size
    assert restrict_page_sizes(target, "2").capabilities.page_sizes == (2,)
    header = report_header(target, "ci")
    assert any("write_back_order='top_down'" in line for line in header)


def _tiered(tier_capabilities):
    def make(allocator, host_pool, controller, page_size, write_policy):  # pragma: no cover - never built
        raise AssertionError("not built")

    make.tier_capabilities = tier_capabilities
    return make


def test_tier_capabilities_of_the_wrong_type_are_a_clear_error(monkeypatch) -> None:
    module = type(sys)("radixcheck_tier_probe")
    module.make = _tiered({"write_policies": ("write_through",)})
    monkeypatch.setitem(sys.modules, "radixcheck_tier_probe", module)
    with pytest.raises(TargetError, match="tier_capabilities"):
        load_target("radixcheck_tier_probe:make")


def test_a_target_without_quarantine_is_never_sent_evict_prefix(monkeypatch) -> None:
    """The reference with ``supports_quarantine=False`` and ``evict_prefix`` removed passes the
    conformance test (a small budget): the machine never sends what it does not offer."""
    from radixcheck.properties.findings import verdict
    from radixcheck.reference.tiered_cache import TieredRadixCache

    class NoQuarantine(TieredRadixCache):
        tier_capabilities = TierCapabilities(page_sizes=(1,), supports_quarantine=False)

        def evict_prefix(self, tokens):
            raise AssertionError("evict_prefix sent to a target that declared supports_quarantine=False")

    module = type(sys)("radixcheck_tier_probe2")
    module.NoQuarantine = NoQuarantine
    monkeypatch.setitem(sys.modules, "radixcheck_tier_probe2", module)
    monkeypatch.setattr(verdict, "current", lambda: settings(max_examples=15, stateful_step_count=30, derandomize=True,
                                                             database=None, deadline=None))
    target = load_target("radixcheck_tier_probe2:NoQuarantine")
    assert "evict_prefix on both tiers (supports_quarantine=False)" in target.capabilities.not_exercised()
    tier_conformance(target, 1, None)


def test_the_audit_fails_a_tier_mutant_with_a_repro_that_exits_1(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "radixcheck", "audit", MUTANT, "--page-sizes", "1", "-n", "0", "--repro", str(tmp_path)]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "19 write-through persists" in result.stdout and "write policy write_through" in result.stdout
    (repro,) = tmp_path.glob("repro-*.py")
    text = repro.read_text()
    assert "TierWorld(factory, page_size=1, write_policy='write_through')" in text and "import hypothesis" not in text
    ran = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1 and "BUG (radixcheck oracle 19 write-through persists)" in ran.stdout, ran.stdout + ran.stderr
