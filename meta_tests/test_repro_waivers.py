"""A repro file written in a run with waivers goes on past what the run waived (after_verdict_trial.md
friction 4: a tier finding met past a waived one got no file, since its file stopped at the waived
finding, "exited 2, not 1"). Exit 1 on its own bug, whether the waived one is there or fixed; 0 once
its own is fixed. The file embeds the waivers it meets and reads no waiver file."""

from __future__ import annotations

import pytest

from radixcheck.oracles.violations import HostEvictionAmountViolation
from radixcheck.properties.findings.standalone import run_file, run_repro
from radixcheck.properties.findings.waivers import WaiverLog, parse_waivers
from radixcheck.properties.tiers.repro import reduced, tier_repro, tier_script
from radixcheck.properties.tiers.world import TierWorld

from .two_bugs import OvershootsAndHostStopsShort

SPEC = "meta_tests.two_bugs:OvershootsAndHostStopsShort"
KNOWN = "*  *  4 eviction amount  # known: device eviction takes a leaf more (ticket 1)"
# the file's factory import, and the caches it is run on in its place: each bug alone, and the fix of both
IMPORT = "from meta_tests.two_bugs import OvershootsAndHostStopsShort as make"
ONLY_WAIVED = "from radixcheck.properties.tiers.mutants import TierEvictOvershoots as make"
ONLY_ITS_OWN = "from radixcheck.properties.tiers.mutants import TierEvictHostStopsShort as make"
FIXED = "from radixcheck.reference.tiered_cache import TieredRadixCache as make"
STORY = ["w.serve([1, 2])", "w.finish()", "w.serve([3, 4])", "w.finish()", "w.complete_all()", "w.evict(1)", "w.complete_all()",
         "w.evict(10**6)", "w.complete_all()", "w.evict_host(10**6)"]


def _log() -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(KNOWN, "waive.txt"), (SPEC,), "test_tier_state_machine[page_size=1]")


def _run_past_the_waived_finding() -> tuple[TierWorld, BaseException]:
    """The story as the tier machine runs it with the waiver: the device eviction's finding (waived) ends
    its operation, the host eviction's is the finding."""
    world, log = TierWorld(OvershootsAndHostStopsShort, 1, "write_through"), _log()
    for step in STORY:
        try:
            exec(step, {"w": world})  # noqa: S102 - the story's own lines
        except Exception as exc:  # noqa: BLE001
            if not log(exc):
                assert isinstance(exc, HostEvictionAmountViolation), exc
                assert [w["oracle"] for w in log.findings()] == ["4 eviction amount"]
                return world, exc
    raise AssertionError("the host eviction's bug was not met")


def test_the_tier_reduction_replays_past_a_waived_finding() -> None:
    world, failure = _run_past_the_waived_finding()
    best, said = reduced(OvershootsAndHostStopsShort, world, failure, seconds=30, replays=1, waived=_log())  # the run's own
    assert best is not None, said  # it used to stop at the waived finding: "did not fail the same way"
    assert isinstance(best.failure, HostEvictionAmountViolation) and [e.oracle for e in best.waived] == ["4 eviction amount"]


@pytest.mark.parametrize(("factory", "code"), [(IMPORT, 1), (ONLY_ITS_OWN, 1), (ONLY_WAIVED, 0), (FIXED, 0)],
                         ids=["both bugs", "its own bug alone", "the waived bug alone", "fixed"])
def test_a_tier_file_goes_on_past_the_waived_finding_its_run_met(factory: str, code: int) -> None:
    world, failure = _run_past_the_waived_finding()
    text = tier_script(world, failure, SPEC, waivers=_log().applicable)
    assert IMPORT in text and "waive.txt" not in text.split('"""', 2)[2].split("WAIVED = [")[0]  # embedded, not read
    exit_code, printed = run_repro(text.replace(IMPORT, factory))
    assert exit_code == code, printed
    assert ("BUG (radixcheck oracle 4h host eviction amount)" in printed) == (code == 1), printed
    if factory in (IMPORT, ONLY_WAIVED):
        assert "waived (waive.txt:1: known: device eviction takes a leaf more (ticket 1)): 4 eviction amount: evict(1)" in printed


def test_without_the_waivers_the_file_stops_at_the_waived_finding() -> None:
    """What the file was before: it cannot say (exit 2), and it never waives what its run did not."""
    world, failure = _run_past_the_waived_finding()
    exit_code, printed = run_repro(tier_script(world, failure, SPEC))
    assert exit_code == 2 and "did not run to the check: EvictionAmountViolation" in printed, printed
    assert "WAIVED" not in tier_script(world, failure, SPEC, waivers=[])


@pytest.mark.deep  # a reduction, then the file run in fresh interpreters on each cache
def test_the_written_tier_file_exits_1_on_its_bug_and_0_once_fixed_in_a_run_with_waivers() -> None:
    world, failure = _run_past_the_waived_finding()
    log = _log()
    repro = tier_repro(world, failure, SPEC, OvershootsAndHostStopsShort, seconds=10, waived=log, waivers=log.applicable)
    assert repro.text is not None and repro.exit_code == 1, repro.why_not  # (its reduction may leave the waived one out)
    for factory, code in [(ONLY_ITS_OWN, 1), (ONLY_WAIVED, 0), (FIXED, 0)]:
        assert run_file(repro.text.replace(IMPORT, factory))[0] == code, factory


def test_a_file_that_reruns_radixcheck_s_test_gets_the_run_s_waivers_as_its_fixture() -> None:
    """A tenant tree's file (or a tier production world's) is radixcheck's test, rerun: it was run with
    ``radix_waivers=None``, so it stopped at the finding its run had waived (exit 2)."""
    from radixcheck.properties.conformance.test_tenant_tree_machine import test_tenant_tree_state_machine
    from radixcheck.properties.findings.repro import _plain_test_script
    from radixcheck.properties.tenant_tree.contract import TenantTreeCapabilities

    waivers = parse_waivers("*  *  11 tenant-tree model  said: which are not available  # known (ticket 4)", "w.txt")
    text = _plain_test_script(HostEvictionAmountViolation("x"), test_tenant_tree_state_machine, {}, TenantTreeCapabilities(),
                              "mymodule:make", "test_tenant_tree_state_machine", waivers=waivers)
    compile(text, "repro.py", "exec")
    assert f"radix_waivers = WaiverLog([\n    {waivers[0]!r},\n])" in text
    assert "test_tenant_tree_state_machine(target, radix_waivers=radix_waivers)" in text
    assert "radix_waivers=None" in _plain_test_script(HostEvictionAmountViolation("x"), test_tenant_tree_state_machine, {},
                                                      TenantTreeCapabilities(), "mymodule:make", "t")
