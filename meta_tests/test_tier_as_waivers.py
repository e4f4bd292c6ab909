"""An ``as <policy>`` waiver on a tier target (s61 WV left it: a tier order finding carried no ``choice``, so the
line waived nothing in the tier machine and the known bug stayed the finding). The tier model now keeps the pick's
choice on its device order finding as the cache machine does: the line waives the known order bug, the finding
behind it is the run's, another order bug is still caught, and the repro file written from the run judges the line
as the run did (exit 1 on both bugs and on its own alone, 0 on the waived one alone and on the fix)."""

from __future__ import annotations

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import EvictionOrderViolation, HostEvictionAmountViolation
from radixcheck.properties.findings.standalone import run_repro
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import NOT_REJUDGED, WaiverLog, parse_waivers
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.repro import tier_script
from radixcheck.properties.tiers.world import TierWorld

from .two_bugs import LfuByRecencyAndHostStopsShort, LfuEvictsByRecency, TieredLfuOnly

SPEC = "meta_tests.two_bugs:LfuByRecencyAndHostStopsShort"
AS_LRU = "*  *  4 eviction order as lru  # an LFU that evicts as LRU (ticket 7)"
AS_MRU = "*  *  4 eviction order as mru  # not this cache's order"
IMPORT = "from meta_tests.two_bugs import LfuByRecencyAndHostStopsShort as make"
ONLY_WAIVED = "from meta_tests.two_bugs import LfuEvictsByRecency as make"
ONLY_ITS_OWN = "from meta_tests.two_bugs import LfuHostStopsShort as make"
FIXED = "from meta_tests.two_bugs import TieredLfuOnly as make"
# [1] (2 hits, older) and [5] (1 hit, newer) are the device leaves at evict(1): LFU takes [5], LRU takes [1]
STORY = ["w.serve([1, 2])", "w.finish()", "w.serve([1, 3])", "w.finish()", "w.complete_all()", "w.evict(2)", "w.complete_all()",
         "w.serve([5])", "w.finish()", "w.complete_all()", "w.evict(1)", "w.complete_all()", "w.evict(10**6)", "w.complete_all()",
         "w.evict_host(10**6)"]
FEW = settings(profiles.SETTINGS["mutation"], max_examples=25, derandomize=True, database=None)


def _log(line: str = AS_LRU, test: str = "test_tier_state_machine[page_size=1]") -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(line, "waive.txt"), (SPEC,), test)


def _story(factory: type, log: WaiverLog) -> tuple[TierWorld, BaseException | None]:
    """The story with ``log``'s waivers, as a machine runs it: a waived finding ends its step; the first other one is returned."""
    world = TierWorld(factory, 1, "write_through")
    for step in STORY:
        try:
            exec(step, {"w": world})  # noqa: S102 - the story's own lines
        except Exception as exc:  # noqa: BLE001
            if not log(exc):
                return world, exc
    return world, None


def test_a_tier_order_finding_carries_the_choice_an_as_line_judges() -> None:
    _, failure = _story(LfuEvictsByRecency, _log("*  *  4 eviction amount  # nothing here"))
    assert isinstance(failure, EvictionOrderViolation), failure
    assert failure.choice.made_by(lambda s: s.last_use) and not failure.choice.made_by(lambda s: (s.hits, s.last_use))


def test_the_tier_story_goes_past_the_order_bug_an_as_line_names_to_the_one_behind_it() -> None:
    log = _log()
    _, failure = _story(LfuByRecencyAndHostStopsShort, log)
    assert isinstance(failure, HostEvictionAmountViolation), failure
    assert [(w["oracle"], w["waiver"]) for w in log.findings()] == [("4 eviction order", f"waive.txt:1: {AS_LRU.split('# ')[1]}")]
    other = _log(AS_MRU)
    _, failure = _story(LfuByRecencyAndHostStopsShort, other)
    assert isinstance(failure, EvictionOrderViolation) and other.findings() == []  # not the order mru makes: still the finding


@pytest.mark.deep  # three tier machine runs (~9 s)
def test_the_tier_machine_waives_the_order_bug_an_as_line_names_and_no_other() -> None:
    """The tier machine, pinned: the known order bug alone passes past its waiver (it was the run's finding), an
    ``as`` line naming another order does not waive it, and with both bugs the host amount bug is the finding."""
    log = _log()
    run_machine(tier_machine_for(LfuEvictsByRecency, 1, "write_through", name="meta_as_lru"), FEW, waived=log)
    [found] = log.findings()
    assert found["oracle"] == "4 eviction order" and found["times_met"] > 1, found
    with pytest.raises(EvictionOrderViolation):
        run_machine(tier_machine_for(LfuEvictsByRecency, 1, "write_through", name="meta_as_mru"), FEW, waived=_log(AS_MRU))
    with pytest.raises(HostEvictionAmountViolation):
        run_machine(tier_machine_for(LfuByRecencyAndHostStopsShort, 1, "write_through", name="meta_as_two"), FEW, waived=_log())
    fixed = _log()  # the fix: the waiver meets nothing, and the correct cache passes
    run_machine(tier_machine_for(TieredLfuOnly, 1, "write_through", name="meta_as_fixed"), FEW, waived=fixed)
    assert fixed.findings() == []


def test_the_tier_production_world_judges_an_as_line_on_the_choice() -> None:
    """``at_scale`` judges a finding that carries a choice (nothing said of matching by oracle); one without a choice
    it matches by its oracle, as before, and says so."""
    _, failure = _story(LfuEvictsByRecency, _log("*  *  4 eviction amount  # nothing here"))
    scale = "test_tier_at_production_scale[page_size=1]"
    assert not _log(AS_MRU, scale).at_scale(failure)
    log = _log(test=scale)
    assert log.at_scale(failure) and "not_rejudged" not in log.findings()[0]
    bare = _log(AS_MRU, scale)
    assert bare.at_scale(EvictionOrderViolation("no choice")) and bare.findings()[0]["not_rejudged"] == NOT_REJUDGED


@pytest.mark.parametrize(("factory", "code"), [(IMPORT, 1), (ONLY_ITS_OWN, 1), (ONLY_WAIVED, 0), (FIXED, 0)],
                         ids=["both bugs", "its own bug alone", "the waived bug alone", "fixed"])
def test_the_tier_file_judges_the_as_line_as_its_run_did(factory: str, code: int) -> None:
    world, failure = _story(LfuByRecencyAndHostStopsShort, _log())
    text = tier_script(world, failure, SPEC, waivers=_log().applicable)
    assert IMPORT in text and "'lru'" in text.split("WAIVED = [")[1].split("]")[0]
    exit_code, printed = run_repro(text.replace(IMPORT, factory))
    assert exit_code == code, printed
    assert ("BUG (radixcheck oracle 4h host eviction amount)" in printed) == (code == 1), printed
    if factory in (IMPORT, ONLY_WAIVED):
        assert "waived (waive.txt:1: an LFU that evicts as LRU (ticket 7)): 4 eviction order: evict(1)" in printed


def test_the_tier_file_does_not_waive_an_order_its_as_line_does_not_name() -> None:
    """The file's ``as`` judgement is the run's: with ``as mru`` embedded, the LRU-ordered eviction stops the file (exit 2)."""
    world, failure = _story(LfuByRecencyAndHostStopsShort, _log())
    text = tier_script(world, failure, SPEC, waivers=_log().applicable).replace("'lru',", "'mru',")
    exit_code, printed = run_repro(text)
    assert exit_code == 2 and "EvictionOrderViolation" in printed, printed
