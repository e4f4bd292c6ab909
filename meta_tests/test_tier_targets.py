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


@pytest.mark.deep  # an audit in a subprocess, then its repro file
def test_the_audit_fails_a_tier_mutant_with_a_repro_that_exits_1(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "radixcheck", "audit", MUTANT, "--page-sizes", "1", "-n", "0", "--repro", str(tmp_path)]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "19 write-through persists" in result.stdout and "write policy write_through" in result.stdout
    (repro,) = tmp_path.glob("repro-*.py")
    text = repro.read_text()
    assert "TierWorld(make, page_size=1, write_policy='write_through')" in text and "import hypothesis" not in text
    ran = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1 and "BUG (radixcheck oracle 19 write-through persists)" in ran.stdout, ran.stdout + ran.stderr


def _leaf_first(write_back_order: str) -> type:
    """The reference tiered cache, but under write-back it writes the evicted leaf alone (SGLang's
    order), and a page whose write-back fails leaves with its host-only subtree."""
    from radixcheck.reference.tiered_cache import TieredRadixCache

    class LeafFirst(TieredRadixCache):
        tier_capabilities = TierCapabilities(page_sizes=(1,), write_back_order=write_back_order)

        def _write_back(self, node) -> None:
            if node.host is None and node.writing is None and self._write(node):
                node.evict_when_written = True

        def _drop(self, node) -> int:
            below = list(node.children.values())
            while below:  # host-only pages (the node is a device leaf): they leave with it
                child = below.pop()
                below.extend(child.children.values())
                child.linked = False
                if child.host is not None:
                    self.host_pool.free(child.host)
                    child.host = None
            node.children.clear()
            return super()._drop(node)

    return LeafFirst


@pytest.mark.deep  # two tier machines run to a verdict
def test_a_leaf_first_write_back_passes_when_declared_and_fails_the_chain_when_not(monkeypatch) -> None:
    from radixcheck.oracles.violations import BackupChainViolation
    from radixcheck.properties.findings.verdict import run_machine
    from radixcheck.properties.tiers.machine import tier_machine_for

    budget = settings(max_examples=40, stateful_step_count=40, derandomize=True, database=None, deadline=None)
    run_machine(tier_machine_for(_leaf_first("leaf_first"), 1, "write_back", name="LeafFirstDeclared"), budget)
    with pytest.raises(BackupChainViolation):
        run_machine(tier_machine_for(_leaf_first("top_down"), 1, "write_back", name="LeafFirstUndeclared"), budget)


def test_a_backup_given_up_with_host_room_left_is_refused() -> None:
    from radixcheck.oracles.violations import HostSlotViolation
    from radixcheck.properties.tiers.world import TierWorld
    from radixcheck.reference.tiered_cache import TieredRadixCache

    world = TierWorld(TieredRadixCache, 1, "write_through", host_slots=4)
    world.serve([1, 2])
    world.finish()  # the reference backs [1, 2] up: 2 of 4 host slots taken
    with pytest.raises(HostSlotViolation, match="2 host slots are free"):
        world.controller.refused(world.model.pages_of([1, 2])[0].device)


@pytest.mark.deep  # a production-scale world
def test_the_production_scale_tier_world_passes_the_reference_and_catches_a_partial_persist() -> None:
    from radixcheck.oracles.violations import PersistViolation
    from radixcheck.reports import tier_scale

    row = tier_scale.run(tier_scale.REFERENCE, "write_through", 40, 1, 512, 1024, 10)
    assert row["transfers"] > 0 and row["peak_host_tokens"] > 0
    with pytest.raises(PersistViolation):
        tier_scale.run("radixcheck.properties.tiers.mutants:PartialPersist", "write_through", 40, 1, 512, 1024, 10)
