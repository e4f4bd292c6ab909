"""The audit's live lines hold a crash's FAIL line for the small machines' verdicts
(``radixcheck.audit._Collector``, ``radixcheck.pytest_plugin.SMALL_MACHINES``): a crash elsewhere is
often the echo of a cause a small machine names, but prints it only after shrinking."""

from __future__ import annotations

from radixcheck.audit import Verdict, _Collector
from radixcheck.properties.findings.names import conformance_test_names
from radixcheck.pytest_plugin import SMALL_MACHINES

TIER_MACHINE = "test_tier_machine.py::test_tier_state_machine[page_size=1]"
TIER_WORLD = "test_tier_machine.py::test_tier_at_production_scale[page_size=1]"


def _crash(test: str) -> Verdict:
    return Verdict(test, "failed", 1.0, "crash (ValueError raised during a legal call)", "stale handle", "state.evict(1)")


def test_every_small_state_machine_holds_a_crash_line() -> None:
    """Every ``*_state_machine`` conformance test is a small machine: the tier machine was left out, so a
    tier world's crash was printed at once, before the tier machine's cause (with -n 2 both run at once)."""
    machines = {name for name in conformance_test_names() if name.endswith("_state_machine")}
    assert machines == set(SMALL_MACHINES), sorted(machines ^ set(SMALL_MACHINES))


def test_a_tier_world_crash_waits_for_the_tier_machine(capsys) -> None:  # noqa: ANN001
    collector = _Collector(0.0)
    collector._expect([TIER_MACHINE, TIER_WORLD])
    collector._add(_crash("test_tier_at_production_scale[page_size=1]"))
    assert capsys.readouterr().out == ""  # held
    collector._add(Verdict("test_tier_state_machine[page_size=1]", "failed", 2.0, "4h host eviction order", "evicted 3 first"))
    first, second = capsys.readouterr().out.splitlines()
    assert "test_tier_state_machine" in first
    assert "test_tier_at_production_scale" in second and second.endswith("(possibly an echo of 4h host eviction order, FAIL above)")


def test_a_small_machine_own_crash_does_not_wait_for_itself(capsys) -> None:  # noqa: ANN001
    """The last small machine to report, crashing, is printed at once (it waited HOLD_SECONDS for itself)."""
    collector = _Collector(0.0)
    collector._expect(["test_cache_machine.py::test_cache_state_machine[page_size=1]", "x.py::test_dfs_order_meets_the_bound"])
    collector._add(_crash("test_cache_state_machine[page_size=1]"))
    assert "test_cache_state_machine" in capsys.readouterr().out
    assert not collector.held and not collector.machines_pending
