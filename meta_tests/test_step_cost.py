"""The production world's step-cost watch (radixcheck.properties.cache.step_cost): a cache whose every
match or insert scans the tree fails the world in its first story, with the figures, instead of
running it for half an hour; a correct cache is never flagged.

The gate's tests feed the watch made-up costs and probes (no clock is read): they are exact. The deep ones run
production worlds on caches whose touch scans a recency list and on correct caches, on whatever
machine and load they get: the verdict rests on a ratio of like calls' CPU times within one run."""

from __future__ import annotations

import importlib
import math
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import StepCostViolation
from radixcheck.properties.cache.scale_machine import scale_machine_for
from radixcheck.properties.cache.slow_variants import TouchScansRecencyList
from radixcheck.properties.cache.step_cost import SPAN, StepCostWatch
from radixcheck.properties.findings.repro import repro_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import guarded, metering
from radixcheck.reference import RadixCache

TRIAL = Path(__file__).resolve().parents[1] / "reports" / "findings" / "vllm_trial"


def crowd_trees() -> Iterator[int]:
    """Cache sizes as the crowd story grows them: four times from a prompt to a thousand or two tokens."""
    for top in (300, 2064, 1040, 1040):
        yield from range(16, top, 4)


def fed(costs: Callable[[int, int], float], trees: Iterator[int], tokens: Callable[[int], int] = lambda tree: 20,
        checked: bool = True, load: Callable[[int], float] = lambda tree: 1.0) -> StepCostWatch:
    """A watch told one insert per cache size in ``trees`` that cost ``costs(tree, tokens)`` seconds, and
    checked whenever due, as the production world checks it (``checked=False``: never). ``load(tree)``: what
    the probe beside that call cost (1 us at 1.0)."""
    size = [0]
    watch = StepCostWatch(lambda: size[0], probe=lambda: 1e-6 * load(size[0]))
    for tree in trees:
        size[0] = tree
        sent = tokens(tree)
        watch.observe("insert", (list(range(sent)),), costs(tree, sent))
        if checked and watch.due:
            watch.check()
    return watch


def test_a_cost_that_grows_with_the_cache_is_a_finding_with_its_figures() -> None:
    with pytest.raises(StepCostViolation, match=r"^insert of 20 tokens costs \d+\.\dx more CPU time in a cache of [\d,]+ "
                                                r"tokens than in one of [\d,]+ \(median of \d+ calls each, "
                                                r"each call in the time of a fixed probe beside it: .* "
                                                r"By cache size: 16: 21 us"
                                                r".* radixcheck bench measures it per operation\."):
        fed(lambda tree, _: 20e-6 + 0.05e-6 * tree, crowd_trees())  # TouchWalksQueue's shape: a scan per call


def test_a_scan_small_next_to_the_call_s_fixed_cost_is_a_finding() -> None:
    """TouchWalksQueue at page 4 (a copy of its queue on every touch): 12 us a call, 12 ns more per cached token."""
    with pytest.raises(StepCostViolation, match=r"^insert of 20 tokens costs 2\.\dx more"):
        fed(lambda tree, _: 12e-6 + 0.012e-6 * tree, crowd_trees())


def test_a_growth_measured_only_as_the_tree_grew_is_a_finding_at_its_second_check() -> None:
    """The traffic's shape: every small-tree call came before every large-tree one."""
    def grown(calls: int) -> Iterator[int]:
        return (int(16 * 1.03**i) for i in range(calls))

    watch = fed(lambda tree, _: 1e-6 * tree, grown(128))  # one check, that reads it: remembered
    assert watch.flagged
    with pytest.raises(StepCostViolation, match=r"It read 2.5x or more at two checks, 128 calls apart \(its small trees were "
                                                r"all measured before its large ones\)\.$"):
        fed(lambda tree, _: 1e-6 * tree, grown(256))


def test_a_growth_measured_side_by_side_is_a_finding_at_its_first_check() -> None:
    """The crowd's shape, once it alternates: small trees measured after large ones."""
    watch = fed(lambda tree, _: 1e-6 * tree, crowd_trees(), checked=False)
    with pytest.raises(StepCostViolation, match=r"per operation\.$"):
        watch.check()


def test_one_check_that_reads_growth_is_not_a_verdict_until_the_next_reads_it_too() -> None:
    """A burst of load on the latest calls (the large trees' group, where the tree grows as calls come)
    reads as growth at one check: the next one, 128 calls later, judges other calls."""
    trees = list(range(16, 16 + 4 * 400, 4))  # the tree grows as the calls come, as in the traffic story
    burst = set(range(len(trees) - 60, len(trees)))  # the last 60 calls ran under a burst of load: 4x slower

    size = [0]
    watch = StepCostWatch(lambda: size[0], probe=lambda: 1e-6)  # a burst the probe does not see (it sees the load's)
    for i, size[0] in enumerate(trees):
        watch.observe("insert", (list(range(20)),), 20e-6 * (4 if i in burst else 1))
    watch.check(final=True)  # reads 4x: remembered, no verdict
    assert watch.flagged and next(iter(watch.highest.values())).ratio == pytest.approx(4)
    for size[0] in range(trees[-1], trees[-1] + 4 * 128, 4):  # the burst is over: the next check reads the same cost
        watch.observe("insert", (list(range(20)),), 20e-6)
    watch.check(final=True)
    assert not watch.flagged


def test_a_load_that_rises_as_the_tree_grows_is_read_in_probes_and_is_not_a_finding() -> None:
    """The traffic's shape on a machine whose load rises as it goes (vLLM's adapter read 1.3-2.5, once 3.3,
    before the probe): a flat cost that every call pays 4x by the end, the probe beside it too."""
    def grown(calls: int) -> Iterator[int]:
        return (int(16 * 1.01**i) for i in range(calls))

    def load(tree: int) -> float:
        return 1 + 3 * math.log(tree / 16) / math.log(16 * 1.01**1024 / 16)  # from 1x to 4x

    watch = fed(lambda tree, _: 20e-6 * load(tree), grown(1024), load=load)
    watch.check(final=True)
    [growth] = watch.highest.values()
    assert growth.ratio == pytest.approx(1, rel=0.05) and growth.load > 1.5  # dearer by half, in probes flat
    with pytest.raises(StepCostViolation):  # the same costs, with a probe that did not see the load: read as growth
        fed(lambda tree, _: 20e-6 * load(tree), grown(1024))
    with pytest.raises(StepCostViolation, match=r"the probe \d\.\d\dx dearer in the large"):  # growth, in probes
        fed(lambda tree, _: 1e-7 * tree * load(tree), grown(1024), load=load)


def test_a_flat_or_logarithmic_cost_is_not_even_with_noise() -> None:
    """Each call's cost jitters by up to 2x either way (a loaded machine), as a heap's log n grows."""
    jitter = random.Random(0)
    flat = fed(lambda tree, _: 20e-6 * jitter.uniform(0.5, 2.0), crowd_trees())
    logarithmic = fed(lambda tree, _: 2e-6 * math.log2(tree) * jitter.uniform(0.5, 2.0), crowd_trees())
    for watch in (flat, logarithmic):
        watch.check(final=True)
        watch.check(final=True)  # twice, with no new calls: no verdict either


def test_a_growth_over_a_narrow_span_of_sizes_is_not_judged() -> None:
    """Costs proportional to the cache, over caches from 100 to 100 * (SPAN - 1) tokens: not yet evidence."""
    watch = fed(lambda tree, _: 1e-6 * tree, iter(range(100, 100 * (SPAN - 1), 10)))
    watch.check(final=True)


def test_calls_are_compared_only_with_calls_of_their_size() -> None:
    """Longer requests arrive as the cache grows (a conversation's later turns), each costing its length:
    never compared with the short requests of a small cache."""
    def length(tree: int) -> int:
        return 16 + tree // 100

    fed(lambda tree, tokens: 1e-6 * tokens, iter(range(16, 64_000, 16)), tokens=length).check(final=True)
    with pytest.raises(StepCostViolation):  # the same costs, said of 20-token calls
        fed(lambda tree, _: 1e-6 * length(tree), iter(range(16, 64_000, 16)))


def test_the_watch_records_as_calls_come_and_judges_only_when_checked() -> None:
    watch = fed(lambda tree, _: 1e-6 * tree, crowd_trees(), checked=False)  # observe raised nothing while told every call
    assert watch.due
    with pytest.raises(StepCostViolation):
        watch.check()
    assert not watch.due


def test_metering_tells_the_calls_named_their_cpu_time_and_only_within_its_block() -> None:
    told: list[tuple[str, tuple, float]] = []
    with metering(lambda what, args, seconds: told.append((what, args, seconds)), ("insert",)):
        assert guarded("insert", lambda tokens: len(tokens), [1, 2, 3]) == 3
        guarded("total_size", lambda: 0)  # not watched
    guarded("insert", lambda tokens: len(tokens), [4])
    assert [(what, args) for what, args, _ in told] == [("insert", ([1, 2, 3],))] and told[0][2] >= 0


def test_a_step_cost_finding_has_no_repro_file_and_says_where_to_measure_it() -> None:
    repro = repro_for(StepCostViolation("insert of 20 tokens costs 4.0x more"), "mymodule:make")
    assert repro.text is None and "radixcheck bench" in repro.why_not


def test_a_step_cost_finding_ranks_after_every_finding_about_answers() -> None:
    from radixcheck.audit import RANKS, rank_of

    assert rank_of(StepCostViolation.oracle) == len(RANKS) - 1 and RANKS[-1][0] == "the cost of a step"


# ---- production worlds (deep): the verdict on real CPU times ------------------------------------------------------


@pytest.fixture
def trial(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], type]]:
    """The vLLM-shaped trial's classes (reports/findings/vllm_trial: its modules import each other by name)."""
    monkeypatch.syspath_prepend(str(TRIAL))
    yield lambda name: getattr(importlib.import_module("bugs"), name)
    for module in ("bugs", "vllm_like"):
        sys.modules.pop(module, None)


def _world(factory: Callable, capabilities, page_size: int, name: str) -> None:  # noqa: ANN001 - a Capabilities
    """One production world at ``page_size``, as if the target declared it alone (so the deep history runs there)."""
    import dataclasses

    declared = dataclasses.replace(capabilities, page_sizes=(page_size,))
    run_machine(scale_machine_for(factory, declared, page_size, f"meta_step_cost_{name}"), profiles.SETTINGS["ci"])


@pytest.mark.deep  # a production world's crowd
@pytest.mark.parametrize("page_size", [1, 2])  # at 16 the crowd's 5-page touches are cheap next to a call: the traffic finds it
def test_a_cache_whose_touch_scans_fails_in_the_first_story(page_size: int) -> None:
    with pytest.raises(StepCostViolation, match=r"(insert|match_prefix) of .* tokens costs") as failure:
        _world(TouchScansRecencyList, RadixCache.capabilities, page_size, f"touch_scans_{page_size}")
    assert "requests admitted on one prompt" in "\n".join(failure.value.__notes__)


@pytest.mark.deep  # a production world's crowd
@pytest.mark.parametrize("page_size", [2, 4])  # at 4 its crowd reads 2.7-2.9 (in probes, at loads of ~18): above GROWTH
def test_the_trial_s_touch_walks_queue_fails_in_the_first_story(trial: Callable[[str], type], page_size: int) -> None:
    """The trial's audit ran this cache's world for 25 min without a verdict (reports/findings/vllm_trial.md)."""
    bug = trial("TouchWalksQueue")
    with pytest.raises(StepCostViolation, match=r"insert of .* tokens costs") as failure:
        _world(bug, bug.capabilities, page_size, f"touch_walks_queue_{page_size}")
    assert "requests admitted on one prompt" in "\n".join(failure.value.__notes__)


@pytest.mark.deep  # whole production worlds, the deep history included
def test_correct_caches_pass_the_watch(trial: Callable[[str], type]) -> None:
    """The reference at page 1 and the trial's correct cache at page 2 (both with the 3,000-deep history),
    the reference at 16 (its largest calls): a whole world each, however loaded the machine."""
    correct = importlib.import_module("vllm_like").make
    _world(RadixCache, RadixCache.capabilities, 1, "reference_1")
    _world(RadixCache, RadixCache.capabilities, 16, "reference_16")
    _world(correct, correct.capabilities, 2, "vllm_like_2")
