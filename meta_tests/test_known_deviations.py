"""A waiver names one known order bug by its behaviour (issue 40 item 6): ``4 eviction order
known: <deviation>``. The machine keeps the statistics that bug makes beside the contract's and
accepts an eviction right by either; the deviation is reported once a run (``known_deviation``),
and any other order bug in the same cache is still a finding. The caches are the reference with
SGLang's #3 or #9 planted (meta_tests/planted_order.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.audit import AuditResult, Verdict, report_card
from radixcheck.cli import main
from radixcheck.oracles.deviation import Deviation, SplitParentFreshCreationTime, SuffixRefreshedOnMidEdgeUse
from radixcheck.oracles.policy import LeafStats
from radixcheck.oracles.prefix_set import PrefixSetModel
from radixcheck.oracles.violations import EvictionOrderViolation, LRUOrderViolation
from radixcheck.properties.cache.deviations import KNOWN, DeviationError, resolve
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import FifoPolicyReference, LfuReference, MruReference
from radixcheck.properties.findings.verdict import run_machine, waiving
from radixcheck.properties.findings.waivers import WaiverError, WaiverLog, parse_waivers, read_waivers

from . import planted_order as planted

KNOWN_3 = "* * 4 eviction order  known: suffix-refreshed-on-mid-edge-use  # SGLang #3 (known)"
KNOWN_9 = "* * 4 eviction order  known: split-parent-fresh-creation-time  # SGLang #9 (known)"
LRU_3 = "* * 4 LRU order  known: suffix-refreshed-on-mid-edge-use  # SGLang #3 (known), an LRU cache's"
LRU_9 = "* * 4 LRU order  known: split-parent-fresh-creation-time  # not an LRU cache's bug"
FEW = settings(profiles.SETTINGS["mutation"], max_examples=6)  # fast tier: each run well under a second
MORE = settings(profiles.SETTINGS["mutation"], max_examples=40)  # deep tier


def _log(text: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(text), ("x:y",), "test_cache_state_machine[page_size=1]")


def _run(cache: type, waiver: str, search: settings = FEW, page_size: int = 1) -> WaiverLog:
    log = _log(waiver)
    run_machine(machine_for(cache, cache.capabilities, page_size, f"known_{cache.__name__}_{page_size}"), search, waived=log)
    return log


# ---- the deviations, by eye: the model's hooks and what each makes of a leaf -------------------------------------


def _split_world(*deviations: Deviation) -> tuple[PrefixSetModel, Any, Any]:
    """insert [0, 0] (one node), insert [1, 1], match [0]: the match ends inside [0, 0]'s node."""
    model = PrefixSetModel(1)
    model.deviations = list(deviations)
    model.insert((0, 0), (10, 11))
    model.insert((1, 1), (12, 13))
    [upper] = model.match((0,))
    return model, upper, model.longest_cached((0, 0))[-1]


def test_suffix_refreshed_stamps_the_lower_half_with_the_use() -> None:
    model, upper, lower = _split_world(SuffixRefreshedOnMidEdgeUse())
    [d] = model.deviations
    assert model.leaf_stats(lower).last_use == 1  # the contract: [0, 0] was last used by its insert
    assert model.deviated_stats(lower, d).last_use == 3  # #3: stamped by the match that split it
    assert model.deviated_stats(lower, d).created == model.leaf_stats(lower).created == 1


def test_a_refreshed_stamp_passes_to_the_page_above_when_its_page_goes() -> None:
    model, upper, lower = _split_world(SuffixRefreshedOnMidEdgeUse())
    [d] = model.deviations
    model.insert((0, 0, 2), (10, 11, 14))  # [0, 0] is no leaf now
    model.remove_freed([14])
    assert model.deviated_stats(lower, d).last_use == 4  # its own use is newer
    model.remove_freed([11])  # the lower half goes: the page above keeps the newest stamp at or below it
    assert model.deviated_stats(upper, d).last_use == model.leaf_stats(upper).last_use == 4


def test_split_parent_fresh_creation_dates_the_upper_half_at_the_split() -> None:
    model, upper, lower = _split_world(SplitParentFreshCreationTime())
    [d] = model.deviations
    model.remove_freed([11])  # the lower half goes: the upper half is a leaf
    assert model.leaf_stats(upper).created == 1  # the contract: a split keeps the creation time
    assert model.deviated_stats(upper, d).created == 3  # #9: created by the split
    assert model.deviated_stats(upper, d).last_use == model.leaf_stats(upper).last_use


def test_a_use_that_ends_where_a_node_ends_splits_nothing() -> None:
    calls: list[tuple] = []

    class Spy(Deviation):
        def split(self, upper: Any, lower: Any, clock: int) -> None:
            calls.append((upper.prefix, lower.prefix, clock))

    model = PrefixSetModel(1)
    model.deviations = [Spy()]
    model.insert((0, 0), (10, 11))
    model.match((0, 0))
    model.insert((0, 0, 1), (10, 11, 12))  # extends the leaf's node: a child, no split
    assert calls == []
    model.match((0, 5))  # ends inside [0, 0]
    model.insert((0, 0, 2), (10, 11, 13))  # a fork at [0, 0]'s end: already a node's end
    assert calls == [((0,), (0, 0), 4)]


def test_no_deviation_leaves_the_statistics_alone() -> None:
    stats = LeafStats(last_use=1, created=2, hits=3, priority=0, depth=1, start=0, history=1)
    assert Deviation().stats(stats, None) is stats


# ---- the registry and the waiver line ------------------------------------------------------------------------------


def user_deviation() -> Deviation:
    """A user's own deviation, named ``meta_tests.test_known_deviations:user_deviation``."""
    return SuffixRefreshedOnMidEdgeUse()


def test_the_known_deviations_resolve_by_name_and_a_users_by_module_function() -> None:
    assert set(KNOWN) == {"suffix-refreshed-on-mid-edge-use", "split-parent-fresh-creation-time"}
    assert isinstance(resolve("split-parent-fresh-creation-time")(), SplitParentFreshCreationTime)
    made = resolve(f"{__name__}:user_deviation")()
    assert isinstance(made, SuffixRefreshedOnMidEdgeUse) and made.name == f"{__name__}:user_deviation"
    [waiver] = parse_waivers(f"* * 4 eviction order  known: {__name__}:user_deviation  # mine")
    assert waiver.known == f"{__name__}:user_deviation"
    assert str(waiver) == f"*  *  4 eviction order  known: {__name__}:user_deviation  # mine"


def test_a_waiver_with_known_waives_only_what_its_deviation_explains() -> None:
    [waiver] = parse_waivers(KNOWN_3)
    explained, unexplained, bare = (EvictionOrderViolation("x"), EvictionOrderViolation("x"), EvictionOrderViolation("x"))
    explained.explained_by = frozenset({"suffix-refreshed-on-mid-edge-use"})
    unexplained.explained_by = frozenset({"split-parent-fresh-creation-time"})
    assert waiver.waives(explained) and not waiver.waives(unexplained) and not waiver.waives(bare)
    assert [f().name for f in _log(KNOWN_3 + "\n" + KNOWN_3).deviations()] == ["suffix-refreshed-on-mid-edge-use"]
    assert _log("* * 4 eviction order  # whole").deviations() == []


def test_waiving_installs_the_named_deviations_in_the_machine() -> None:
    machine = machine_for(LfuReference, LfuReference.capabilities, 1, "known_install")
    assert machine.known_deviations == ()
    assert waiving(machine, _log("* * 4 eviction order  # whole")).known_deviations == ()
    assert [f().name for f in waiving(machine, _log(KNOWN_9)).known_deviations] == ["split-parent-fresh-creation-time"]


BAD_KNOWN = {
    "unknown name": ("* * 4 eviction order  known: suffix-refreshed  # r", "unknown deviation 'suffix-refreshed' .*did you mean"),
    "no name": ("* * 4 eviction order  known:  # r", "'known:' needs one deviation name"),
    "two names": ("* * 4 eviction order  known: a b  # r", "'known:' needs one deviation name"),
    "no module": ("* * 4 eviction order  known: no_such_module_x:f  # r", "cannot import 'no_such_module_x'"),
    "no function": ("* * 4 eviction order  known: os:no_such_function  # r", "os has no function 'no_such_function'"),
    "not a deviation": ("* * 4 eviction order  known: os:getcwd  # r", "returned str, not a .*Deviation"),
    "not an order oracle": ("* * 3 slot conservation  known: suffix-refreshed-on-mid-edge-use  # r",
                            "applies to .4 eviction order., .4 LRU order. or .a tier target's host tier. .4h host eviction order. alone"),
    "with as": ("* * 4 eviction order as lru  known: suffix-refreshed-on-mid-edge-use  # r", "'as <policy>' or 'known: <deviation>'"),
}


@pytest.mark.parametrize(("line", "phrase"), BAD_KNOWN.values(), ids=list(BAD_KNOWN))
def test_a_bad_known_line_is_refused_naming_its_line(line: str, phrase: str) -> None:
    with pytest.raises(WaiverError, match=f"known.txt:1: .*{phrase}") as caught:
        parse_waivers(line, "known.txt")
    assert "\n" not in str(caught.value)


def test_resolve_refuses_with_a_deviation_error() -> None:
    for name in ("suffix-refreshed", "no_such_module_x:f", "os:getcwd"):
        with pytest.raises(DeviationError):
            resolve(name)


@pytest.mark.parametrize("line", [v[0] for k, v in BAD_KNOWN.items() if k in ("unknown name", "no module", "not a deviation")],
                         ids=["unknown name", "no module", "not a deviation"])
def test_a_bad_known_line_is_exit_2_with_one_line(tmp_path: Path, capsys, line: str) -> None:
    path = tmp_path / "known.txt"
    path.write_text(f"# known order bugs\n{line}\n")
    assert main(["audit", "radixcheck.reference:RadixCache", "--waive", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("radixcheck: error: ") and err.count("\n") == 1 and "known.txt:2: " in err
    assert out == ""  # refused before the audit started


# ---- the planted caches ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cache", [planted.Lfu3, planted.Mru3], ids=["lfu", "mru"])
def test_the_3_cache_conforms_with_3_known(cache: type) -> None:
    with pytest.raises(EvictionOrderViolation):  # unwaived, #3 fails the order oracle
        _run(cache, "* * 4 LRU order  # another oracle's")
    [found] = _run(cache, KNOWN_3).findings()
    assert found["oracle"] == "4 eviction order" and found["known_deviation"] == "suffix-refreshed-on-mid-edge-use"


def test_the_3_lru_cache_conforms_with_3_known_to_the_lru_oracle() -> None:
    with pytest.raises(LRUOrderViolation):
        _run(planted.Lru3, KNOWN_3)  # the policies' line does not name the LRU oracle
    [found] = _run(planted.Lru3, LRU_3).findings()
    assert found["oracle"] == "4 LRU order" and found["known_deviation"] == "suffix-refreshed-on-mid-edge-use"


def test_the_9_cache_conforms_with_9_known() -> None:
    [found] = _run(planted.Fifo9, KNOWN_9).findings()
    assert found["known_deviation"] == "split-parent-fresh-creation-time"


@pytest.mark.parametrize(("cache", "waiver"), [(planted.Lfu3ReinsertNotCounted, KNOWN_3), (planted.Fifo9ByLastAccess, KNOWN_9),
                                               (planted.Lru3MostRecentFirst, LRU_3)],
                         ids=["3 and lfu reinsert not counted", "9 and fifo by last access", "3 and lru most recent first"])
def test_a_second_order_bug_behind_the_known_one_still_fails(cache: type, waiver: str) -> None:
    with pytest.raises((EvictionOrderViolation, LRUOrderViolation)) as caught:
        _run(cache, waiver, settings(FEW, max_examples=25))
    assert caught.value.explained_by == frozenset()


@pytest.mark.parametrize(("cache", "waiver"), [(planted.Lfu3, KNOWN_9), (planted.Mru3, KNOWN_9), (planted.Fifo9, KNOWN_3),
                                               (planted.Lru3, LRU_9)],
                         ids=["lfu 3 under 9", "mru 3 under 9", "fifo 9 under 3", "lru 3 under 9"])
def test_a_waiver_naming_one_known_bug_does_not_hide_the_other(cache: type, waiver: str) -> None:
    with pytest.raises((EvictionOrderViolation, LRUOrderViolation)) as caught:
        _run(cache, waiver, settings(FEW, max_examples=25))
    assert caught.value.explained_by == frozenset()


def test_the_card_and_the_json_say_known_deviation() -> None:
    waived = {"oracle": "4 eviction order", "type": "EvictionOrderViolation", "message": "evict(2) evicted leaf [1, 1] ...",
              "step": "hit_short_of_lru_leaf", "waiver": "known.txt:1: SGLang #3", "times_met": 3,
              "known_deviation": "suffix-refreshed-on-mid-edge-use"}
    result = AuditResult("mine:make", "Capabilities()", [], "audit",
                         [Verdict("test_cache_state_machine[page_size=1]", "passed", 1.0, waived=[waived])])
    card = report_card(result)
    assert "conforms, with 1 waived finding(s)" in card
    assert "4 eviction order (EvictionOrderViolation), known_deviation suffix-refreshed-on-mid-edge-use: " in card
    assert result.waived[0]["known_deviation"] == "suffix-refreshed-on-mid-edge-use"  # the JSON's "waived"


# ---- deep: more examples, page size 4, and correct caches meet the waiver nowhere ------------------------------------


@pytest.mark.deep
@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize(("cache", "waiver"), [(planted.Lfu3, KNOWN_3), (planted.Mru3, KNOWN_3), (planted.Fifo9, KNOWN_9),
                                               (planted.Lru3, LRU_3)],
                         ids=["lfu 3", "mru 3", "fifo 9", "lru 3"])
def test_each_planted_known_bug_conforms_over_a_longer_search(cache: type, waiver: str, page_size: int) -> None:
    [found] = _run(cache, waiver, MORE, page_size).findings()
    assert found["times_met"] > 1


@pytest.mark.deep
@pytest.mark.parametrize("cache", [LfuReference, MruReference, FifoPolicyReference, planted.Lru], ids=["lfu", "mru", "fifo", "lru"])
def test_a_correct_cache_meets_a_known_waiver_nowhere(cache: type) -> None:
    assert _run(cache, "\n".join([KNOWN_3, KNOWN_9, LRU_3]), MORE).findings() == []


@pytest.mark.deep
@pytest.mark.parametrize(("cache", "waiver"), [(planted.Lfu3ReinsertNotCounted, KNOWN_3), (planted.Fifo9ByLastAccess, KNOWN_9),
                                               (planted.Lru3MostRecentFirst, LRU_3)],
                         ids=["3 and lfu reinsert not counted", "9 and fifo by last access", "3 and lru most recent first"])
def test_a_second_order_bug_fails_at_page_size_4_too(cache: type, waiver: str) -> None:
    with pytest.raises((EvictionOrderViolation, LRUOrderViolation)):
        _run(cache, waiver, MORE, 4)



# ---- SGLang: the shipped waiver file and the planted order bugs (measured in the audit environment) ------------------

SGLANG = "radixcheck.properties.adapters."


def test_the_sglang_known_order_file_names_one_deviation_per_cache() -> None:
    waivers = read_waivers(Path(__file__).resolve().parents[1] / "reports" / "findings" / "sglang_known_order.txt")

    def named(spec: str) -> list[tuple[str, str | None]]:
        return [(w.finding, w.known) for w in waivers if w.applies_to((spec,), "test_cache_state_machine[page_size=1]")]

    three, nine = "suffix-refreshed-on-mid-edge-use", "split-parent-fresh-creation-time"
    assert named(SGLANG + "sglang_radix:radix_lru") == [("4 LRU order", three)]
    for policy in ("lfu", "mru", "slru"):
        assert named(f"{SGLANG}sglang_radix:radix_{policy}") == [("4 eviction order", three)]
    assert named(SGLANG + "sglang_radix:radix_fifo") == [("4 eviction order", nine)]
    assert named(SGLANG + "sglang_radix:radix_lru_strict") == []
    from radixcheck.properties.adapters.sglang_order_bugs import PLANTED

    for name, (policy, _, _) in PLANTED.items():  # each planted bug meets its policy's known bug, and only that
        assert named(f"{SGLANG}sglang_order_bugs:{name}") == [("4 eviction order", nine if policy == "fifo" else three)]


def test_the_planted_sglang_order_bugs_declare_their_policy_as_the_clean_caches_do() -> None:
    from radixcheck.properties.adapters import sglang_order_bugs, sglang_radix

    assert len(sglang_order_bugs.FACTORIES) == 5
    for name, factory in sglang_order_bugs.FACTORIES.items():
        policy = sglang_order_bugs.PLANTED[name][0]
        assert factory.capabilities == sglang_radix.FACTORIES[f"radix_{policy}"].capabilities
        assert getattr(sglang_order_bugs, name) is factory  # `module:<factory>` names it
