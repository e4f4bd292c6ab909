"""A sliding window on the tiers (issue 39: HiCache over SWA trees): the window oracle (20w) can
fail, for the right reason, on each composed mutant; the reference and the trusting cache pass
the same story; the keyword is sent only to a target that declares the window."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import radixcheck
from radixcheck import profiles
from radixcheck.audit import Verdict, findings_of
from radixcheck.oracles.tier_states import TierStates
from radixcheck.oracles.tier_windows import NONE, sent_window, window_value
from radixcheck.oracles.violations import (
    LRUOrderViolation,
    SecondValueViolation,
    TenantIsolationViolation,
    TierWindowViolation,
    TombstoneViolation,
    WindowMatchViolation,
)
from radixcheck.properties.cache.contract import SlidingWindow
from radixcheck.properties.findings.failures import exceptions_of, oracle_of
from radixcheck.properties.findings.names import oracle_names
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.findings.waivers import WaiverLog, parse_waivers
from radixcheck.properties.target import Target, TargetError, check_target
from radixcheck.properties.tiers.contract import TierCapabilities, TieredCacheLike, TieredStateCacheLike, TieredWindowCacheLike
from radixcheck.properties.tiers.machine import TierStateRules, TierWindowRules, tier_machine_for
from radixcheck.properties.tiers.mutants import machines_for_mutant
from radixcheck.properties.tiers.window_mutants import (
    WINDOW_TIER_MUTANTS,
    BacksUpWindowOnInsert,
    FailedLoadResumesAtDeadWindow,
    HostMatchIgnoresWindow,
    KeepsStaleWindowOfReleasedDuplicate,
    LoadBackRestoresBeyondWindowFromWrongPage,
    LoadBackRestoresNoWindow,
    LoadBackSkipsDeviceWindow,
    ReleasesHostDuplicates,
    RestoresWholeHostSegment,
    TrustingWindowTiers,
    WriteBackDropsWindow,
)
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_window_cache import WINDOW, TieredWindowCache

PROMPT, LONGER = [1, 2], [1, 2, 0, 1, 2]  # the extension is a whole window (3 tokens) longer


def _to_host(world: TierWorld) -> None:
    for _ in range(6):
        world.evict(10**6)
        world.complete_all()


def _extension_loaded_back(factory: Any, policy: str) -> TierWorld:
    """[1, 2] and [1, 2, 0, 1, 2] cached (each with its window live at its end), both sent to host
    only, the extension loaded back and read (only its last 3 tokens' window comes back)."""
    world = TierWorld(factory, 1, policy)
    for tokens in (PROMPT, LONGER):
        world.serve(tokens)
        world.finish()
    _to_host(world)
    world.serve(LONGER)
    world.finish()
    return world


def _through_host(factory: Any, policy: str) -> TierWorld:
    """The extension loaded back (:func:`_extension_loaded_back`), both sent to host again, [1, 2]
    loaded back and read (its own window comes back)."""
    world = _extension_loaded_back(factory, policy)
    _to_host(world)
    world.serve(PROMPT)
    world.finish()
    return world


def _reported(world: TierWorld, tokens: list[int]) -> list[int]:
    return list(world.cache.windows(world.cache.match_prefix(tokens).device_handle))


@pytest.mark.deep  # fast: the write-back story of the reference, below
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("factory", [TieredWindowCache, TrustingWindowTiers], ids=lambda f: f.__name__)
def test_correct_window_caches_restore_only_the_window_at_the_end_of_a_load_back(factory: Any, policy: str) -> None:
    world = _through_host(factory, policy)
    kv = world.model.content_of(LONGER)
    assert _reported(world, LONGER) == [window_value(kv[0]), window_value(kv[1])]  # [1, 2] reloaded, the rest on host
    assert sent_window(kv, WINDOW) == [NONE, NONE] + [window_value(k) for k in kv[2:]]


def test_the_reference_restores_only_the_window_at_the_end_of_a_load_back() -> None:
    test_correct_window_caches_restore_only_the_window_at_the_end_of_a_load_back(TieredWindowCache, "write_back")


@pytest.mark.deep  # fast: the whole-path story, below
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("mutant, says", [(LoadBackRestoresBeyondWindowFromWrongPage, "reports window value .* neither its own"),
                                          (LoadBackRestoresNoWindow, r"reports -1 \(tombstoned\), but its window value"),
                                          (WriteBackDropsWindow, r"host part stops after 0 tokens, short of 5: the window "
                                                                 r"of token 2 is live in the host copy")],
                         ids=lambda x: getattr(x, "__name__", "msg"))
def test_each_window_mutant_fails_the_story_by_the_window_oracle(mutant: Any, says: str, policy: str) -> None:
    with pytest.raises(TierWindowViolation, match=says):
        _through_host(mutant, policy)


def _longer_loaded_back(factory: Any) -> TierWorld:
    """[1, 2] and the extension cached (each with its window live at its end), both on host only,
    the extension served again: its load-back's window is its last 3 tokens, [1, 2] lies further
    back (its host copy has its window live). Not finished: the forward reads it."""
    world = TierWorld(factory, 1, "write_through")
    for tokens in (PROMPT, LONGER):
        world.serve(tokens)
        world.finish()
    _to_host(world)
    world.serve(LONGER)
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, RestoresWholeHostSegment], ids=lambda f: f.__name__)
def test_a_load_back_may_restore_its_own_host_values_further_back_than_the_window(factory: Any) -> None:
    """The relaxed rule (SGLang restores a whole host segment): beyond the window a token may come
    back tombstoned or with its own host value; either passes, and the oracle then holds the
    cache to what it showed (a match resumes where it restored)."""
    world = _longer_loaded_back(factory)
    world.match(PROMPT)  # before the forward: the device part ends at 2 only if [1, 2] was restored
    world.finish()
    kv = world.model.content_of(LONGER)
    whole = factory is RestoresWholeHostSegment
    assert _reported(world, LONGER)[:2] == ([window_value(k) for k in kv[:2]] if whole else [NONE, NONE])
    world.serve(PROMPT)  # resumes on device at [1, 2] only where the cache restored its window
    world.finish()
    world.check()


def test_a_load_back_that_restores_another_pages_window_further_back_is_named_so() -> None:
    world = _longer_loaded_back(LoadBackRestoresBeyondWindowFromWrongPage)
    with pytest.raises(TierWindowViolation, match=r"token 0 \(in Page\(\[1\].*reports window value \d+, neither its own "
                                                   r"\d+ nor -1 \(loaded back .* further back than the window at the "
                                                   r"path's end, where its host copy's value and -1 are both its own"):
        world.finish()


def _whole_path_finding() -> TierWindowViolation:
    """Oracle 20w's finding on LoadBackRestoresBeyondWindowFromWrongPage (the story above)."""
    world = _longer_loaded_back(LoadBackRestoresBeyondWindowFromWrongPage)
    with pytest.raises(TierWindowViolation) as caught:
        world.finish()
    return caught.value


def _state_finding() -> SecondValueViolation:
    """Oracle 20's finding on the tiers (tier_states): a state reported where no insert left one."""
    class Page:
        parent = None
    with pytest.raises(SecondValueViolation) as caught:
        TierStates().check("match_prefix([1])", (1,), [Page()], [7])
    assert not isinstance(caught.value, TierWindowViolation)
    return caught.value


def test_oracle_20w_findings_carry_their_own_name_apart_from_oracle_20s() -> None:
    """The audit's card and grouping, the repro's oracle check and the waivers name a window finding
    on the tiers as oracle 20w, not as oracle 20 (they shared its label)."""
    window, state = _whole_path_finding(), _state_finding()
    assert oracle_of(window) == TierWindowViolation.oracle != oracle_of(state) == SecondValueViolation.oracle
    assert TierWindowViolation.oracle.startswith("20w ") and TierWindowViolation.oracle in oracle_names()
    verdicts = [Verdict(f"test_tier_machine[{name}]", "failed", 0.0, exceptions=exceptions_of(exc))
                for name, exc in (("window", window), ("state", state))]
    cards = {f.oracle: f.tests for f in findings_of(verdicts)}
    assert cards == {TierWindowViolation.oracle: ["test_tier_machine[window]"],
                     SecondValueViolation.oracle: ["test_tier_machine[state]"]}
    only_20 = WaiverLog(parse_waivers(f"* * {SecondValueViolation.oracle}  # oracle 20 only"))
    only_20w = WaiverLog(parse_waivers(f"* * {TierWindowViolation.oracle}  # oracle 20w only"))
    assert (only_20(state), only_20(window), only_20w(state), only_20w(window)) == (True, False, False, True)


def _revived(factory: Any, policy: str) -> TierWorld:
    """[1, 2] and [1, 2, 0, 1, 2] to host only, the extension loaded back ([1, 2] on device with its
    window tombstoned), the extension's leaves evicted, then [1, 2, 0] served: its load-back's
    window reaches back into [1, 2], whose host copy has its window."""
    world = _extension_loaded_back(factory, policy)
    world.complete_all()
    world.evict(3)
    world.complete_all()
    world.serve([1, 2, 0])
    world.finish()
    return world


@pytest.mark.deep
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_load_back_revives_the_tombstoned_window_of_device_pages_at_its_end(policy: str) -> None:
    for factory in (TieredWindowCache, TrustingWindowTiers):
        world = _revived(factory, policy)
        assert _reported(world, [1, 2, 0]) == [window_value(k) for k in world.model.content_of([1, 2, 0])]
    with pytest.raises(TierWindowViolation, match=r"token 0 \(in Page\(\[1\].*reports -1 \(tombstoned\).*revived from its host"):
        _revived(LoadBackSkipsDeviceWindow, policy)


def test_the_window_keyword_goes_only_to_a_target_that_declares_a_window() -> None:
    plain = TierWorld(TieredRadixCache, 1, "write_through")  # its insert takes no window=: a sent one would raise
    plain.serve(PROMPT)
    plain.finish()
    assert plain.windows is None and plain.states is None
    assert TierWindowRules not in tier_machine_for(TieredRadixCache).__mro__
    assert TierWindowRules not in tier_machine_for(TieredStateCache).__mro__
    assert TierWindowRules in tier_machine_for(TieredWindowCache).__mro__
    assert TierStateRules not in tier_machine_for(TieredWindowCache).__mro__
    gaps = TierCapabilities(second_pool=SlidingWindow(4)).not_exercised()
    assert any("evict_window" in gap for gap in gaps) and not any("resumable matches" in gap for gap in gaps)


class DeclaresWindowWithoutReporting(TieredRadixCache):
    """Declares a window but has no ``windows`` (nor takes ``window=``)."""

    tier_capabilities = TierCapabilities(second_pool=SlidingWindow(WINDOW))


def test_a_tier_target_declaring_a_window_without_windows_is_refused_at_load() -> None:
    spec = "meta_tests.test_tier_windows:DeclaresWindowWithoutReporting"
    with pytest.raises(TargetError, match="lacks windows"):
        check_target(Target(spec, DeclaresWindowWithoutReporting, DeclaresWindowWithoutReporting.tier_capabilities))
    check_target(Target("radixcheck.reference.tiered_window_cache:TieredWindowCache", TieredWindowCache,
                        TieredWindowCache.tier_capabilities))


@pytest.mark.deep
@pytest.mark.parametrize("mutant", WINDOW_TIER_MUTANTS, ids=lambda m: m.__name__)
def test_each_window_mutant_is_caught_by_the_window_oracle_in_the_tier_machine(mutant: type) -> None:
    says = {HostMatchIgnoresWindow: "its host part ends after .* a request resumes only where",
            FailedLoadResumesAtDeadWindow: r"its load moved nothing|windows\(\) of .* reports"}.get(
        mutant, r"windows\(\) of .* reports|is live in the host copy of")
    if getattr(mutant, "streams_to_catch", 1) > 1:  # a rare bug: caught in one of its first streams, by its oracle
        caught = []
        for k in range(mutant.streams_to_catch):
            for machine in machines_for_mutant(mutant, f"stream{k}_{mutant.__name__}"):
                try:
                    run_machine(machine, profiles.SETTINGS["mutation"])
                except mutant.caught_by as exc:
                    caught.append(str(exc))
        assert caught and all(re.search(says, message) for message in caught)
        return
    for machine in machines_for_mutant(mutant):
        with pytest.raises(mutant.caught_by, match=says):
            run_machine(machine, profiles.SETTINGS["mutation"])


@pytest.mark.deep
@pytest.mark.parametrize("mutant", WINDOW_TIER_MUTANTS, ids=lambda m: m.__name__)
def test_each_window_mutant_is_correct_without_a_trip_through_host(mutant: type) -> None:
    """Composed: the bug needs the host tier. Served and finished on device alone, it passes."""
    world = TierWorld(mutant, 1, "write_back")
    for tokens in (PROMPT, [1, 2, 0], LONGER, PROMPT):
        world.serve(tokens)
        world.finish()
    world.check()


# ---- resumable matches on the tiers: each part ends where the window at its end is live --------------

def _slid_out_to_host(factory: Any) -> TierWorld:
    """[1..6] cached (its window live on 4, 5, 6 only) and sent to host whole: the host copies of
    1, 2, 3 carry no window, so a request for [1, 2, 3] cannot resume on either tier."""
    world = TierWorld(factory, 1, "write_through")
    world.serve([1, 2, 3, 4, 5, 6])
    world.finish()
    _to_host(world)
    return world


def _tombstoned_on_device(factory: Any) -> TierWorld:
    """[1, 2, 3] cached with its window and backed up, then [1..6]; all to host, [1..6] loaded back:
    1, 2, 3 are on device with their window tombstoned (further back than the load's window) while
    their host copies keep it."""
    world = TierWorld(factory, 1, "write_through")
    for tokens in ([1, 2, 3], [1, 2, 3, 4, 5, 6]):
        world.serve(tokens)
        world.finish()
        world.complete_all()
    _to_host(world)
    world.serve([1, 2, 3, 4, 5, 6])
    world.finish()
    world.complete_all()
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, TrustingWindowTiers], ids=lambda f: f.__name__)
def test_correct_window_caches_match_where_a_request_resumes(factory: Any) -> None:
    world = _slid_out_to_host(factory)
    match = world.cache.match_prefix([1, 2, 3])
    assert (len(match.device_values), match.host_length) == (0, 0)  # the full KV is on host, its window nowhere
    world.serve([1, 2, 3])
    world.finish()  # the insert gives [1, 2, 3] the request's window
    world = _tombstoned_on_device(factory)
    match = world.cache.match_prefix([1, 2, 3])
    assert (len(match.device_values), match.host_length) == (0, 3)  # on device, resumable from the host copies
    world.serve([1, 2, 3])  # the load-back loads nothing and revives the window from host
    world.finish()
    kv = world.model.content_of([1, 2, 3])
    assert _reported(world, [1, 2, 3]) == [window_value(k) for k in kv]


def test_a_host_match_that_ignores_the_window_is_named_so() -> None:
    world = _slid_out_to_host(HostMatchIgnoresWindow)
    with pytest.raises(WindowMatchViolation, match=r"match\(\[1, 2, 3\]\): its host part ends after 3 tokens, but a request "
                                                    r"resumes only where the last 3 tokens have their window live on device "
                                                    r"or in a host copy: after 0"):
        world.serve([1, 2, 3])


def _slid_out_to_host_beside_a_twin(factory: Any) -> TierWorld:
    """``_slid_out_to_host``, tenant 'a''s, after tenant 'b' cached the same [1..6] (its twin, on
    host too): a's host copies of 1, 2, 3 carry no window, and so do b's."""
    world = TierWorld(type(factory.__name__, (factory,), {"tier_capabilities": replace(factory.tier_capabilities,
                                                                                           namespaces=True)}),
                      1, "write_through")
    for tenant in ("b", "a"):
        world.serve([1, 2, 3, 4, 5, 6], namespace=tenant)
        world.finish()
    _to_host(world)
    return world


def test_a_host_match_past_its_own_dead_window_beside_a_twin_is_a_window_slip_not_a_leak() -> None:
    """A window trial's B2 (a tombstone in a host copy reads as another page's old value) counted
    host tokens past its window: with another tenant's twin copies there, oracle 10 called it a leak
    ("counted 2 tokens on host past the 0 its namespace has: those are the host copies of ...
    under namespace None") although the tenant's own copies were there. It is 23's, as without a
    twin; a match that counts host copies a tenant does not have is still 10's (the tier
    catalogue's ``HostLookupIgnoresNamespace``)."""
    world = _slid_out_to_host_beside_a_twin(HostMatchIgnoresWindow)
    with pytest.raises(WindowMatchViolation, match=r"its host part ends after 3 tokens, but a request resumes only where"):
        world.serve([1, 2, 3], namespace="a")
    for correct in (TieredWindowCache, TrustingWindowTiers):
        world = _slid_out_to_host_beside_a_twin(correct)
        world.serve([1, 2, 3], namespace="a")
        world.finish()
        world.check()


def test_a_host_part_that_needs_the_window_on_device_is_named_so() -> None:
    """A host part judged by the device window alone (SGLang's ``match_device_only`` validator used
    for both parts) never resumes from host: the oracle names the host copy whose window it skipped."""

    class HostPartNeedsDeviceWindow(TieredWindowCache):
        def _resumable(self, path: list[Any], host_too: bool) -> int:
            return super()._resumable(path, False)

    with pytest.raises(TierWindowViolation, match=r"match\(\[1, 2, 3, 4, 5, 6\]\): its host part stops after 0 tokens, "
                                                   r"short of 6: the window of token 3 is live in the host copy"):
        _tombstoned_on_device(HostPartNeedsDeviceWindow)


def test_a_device_match_that_stops_at_the_first_tombstone_is_named_so() -> None:
    """Oracle 21 on the tiers: [1..6] cached on device with its window live on 4, 5, 6 only; a
    device part that stops at the first tombstone (sglang #35515's class) hides a resumable end."""

    class StopsAtFirstTombstone(TieredWindowCache):
        def _resumable(self, path: list[Any], host_too: bool) -> int:
            first = next((i for i, n in enumerate(path) if (self.device_window[n] == NONE).any()), len(path))
            return super()._resumable(path, host_too) if host_too else first

    world = TierWorld(StopsAtFirstTombstone, 1, "write_through")
    world.serve([1, 2, 3, 4, 5, 6])
    world.finish()
    with pytest.raises(TombstoneViolation, match=r"device part stops after 0 tokens, at the tombstoned window of token 0, "
                                                 r"but the last 3 tokens before 6 have their window live on device"):
        world.serve([1, 2, 3, 4, 5, 6])
    correct = TierWorld(TieredWindowCache, 1, "write_through")
    correct.serve([1, 2, 3, 4, 5, 6])
    correct.finish()
    correct.serve([1, 2, 3, 4, 5, 6])
    assert len(correct.running[-1].values) == 6


def _backed_up_on_insert(factory: Any) -> TierWorld:
    """``[1, 2, 0, 1, 2]`` goes to host with ``[1]``'s window tombstoned (out of the window at the
    end); ``[1]`` alone is served (recomputed: its host copy holds no window) and inserted with its
    window live; both go to host again; ``[1]`` is matched and served (a load-back)."""
    world = TierWorld(factory, page_size=1, write_policy="write_through")
    world.serve([1, 2, 0, 1, 2])
    world.finish()
    _to_host(world)
    world.serve([1])
    world.finish()
    world.complete_all()
    _to_host(world)
    world.match([1])
    world.serve([1])
    world.finish()
    world.check()
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, BacksUpWindowOnInsert])
def test_a_host_copy_may_gain_its_own_window_later(factory: Any) -> None:
    """SGLang's incremental SWA backup (the hicache_swa rows' oracle-23 failures): the copy that
    gains ``[1]``'s window makes its host match 1; the one that does not, 0. Both are right."""
    _backed_up_on_insert(factory)


def test_a_host_match_on_a_copy_whose_window_was_never_live_since_still_fails_23() -> None:
    """The maybe starts only once the device holds the window live beside the copy: before that
    (``[1]``'s first match), a host part counting the copy is the window ignored."""
    with pytest.raises(WindowMatchViolation, match=r"match\(\[1\]\): its host part ends after 1 tokens"):
        _backed_up_on_insert(HostMatchIgnoresWindow)


class _BacksUpAnotherValue(TieredWindowCache):
    """Broken: the window it backs up later into a host copy is not the token's own (plus one)."""

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0, window: Any = None) -> int:
        prefix_len = super().insert(tokens, values, namespace, priority, window=window)
        for node in self._walk(tuple(int(t) for t in tokens), namespace):
            host = self.host_window.get(node)
            if node.host is not None and host is not None and node in self.device_window:
                self.host_window[node] = np.where(host == NONE, self.device_window[node] + 1, host)
        return prefix_len


def test_a_later_window_copy_of_another_value_fails_at_the_load_back() -> None:
    """The host match relying on the later copy is taken; the load-back must then show the token's own value."""
    with pytest.raises(TierWindowViolation, match=r"token 0 .* reports window value \d+, neither its own \d+ nor -1"):
        _backed_up_on_insert(_BacksUpAnotherValue)


def _failed_load_at_a_dead_window(factory: Any) -> TierWorld:
    """Under write-back: [1..4] cached, then [1..8] (the window of 1..5 dies), written; the leaf's
    write-back evicts part of it, and the load-back of [1..8] fails (moves nothing): the device
    path ends where the window is dead (a new user's story, reports/findings/window_trial.md)."""
    world = TierWorld(factory, 1, "write_back")
    world.serve([1, 2, 3, 4])
    world.finish()
    world.serve([1, 2, 3, 4, 5, 6, 7, 8])
    world.finish()
    world.complete_all()
    world.evict(4)
    world.complete_all()
    world.fail_next([True] * 4)
    world.serve([1, 2, 3, 4, 5, 6, 7, 8])
    world.finish()
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, TrustingWindowTiers, RestoresWholeHostSegment, BacksUpWindowOnInsert],
                         ids=lambda f: f.__name__)
def test_a_failed_load_back_resumes_where_the_window_is_live(factory: Any) -> None:
    world = _failed_load_at_a_dead_window(factory)
    assert any("allocation failed" in line for line in world.log)  # the story reached its failed load


def test_a_failed_load_back_returning_the_whole_device_path_fails_21() -> None:
    with pytest.raises(TombstoneViolation, match=r"its load moved nothing, and it returned the whole device path"):
        _failed_load_at_a_dead_window(FailedLoadResumesAtDeadWindow)


# ---- a match cut short by a tombstone the model does not have names the window (20w, not 13) -----------

class WriteBackStartTombstonesWindow(TieredWindowCache):
    """Broken (a new user's trial, B9): ``evict`` tombstones a leaf's device window as soon as it
    starts the leaf's write-back (the values staged for the write), keeping its KV on device until
    the write lands: a match meanwhile stops before a window that is live."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._staged: dict[Any, np.ndarray] = {}

    def _write_back(self, node: Any) -> None:
        super()._write_back(node)
        if node.writing is not None and node in self.device_window:
            self._staged[node] = self.device_window[node]
            self.device_window[node] = self._none()

    def _copy_to_host(self, node: Any) -> None:
        staged = self._staged.pop(node, None)
        if staged is None:
            super()._copy_to_host(node)
        else:
            self.host_window[node] = staged.copy()


def _match_during_write_back(factory: Any) -> TierWorld:
    """[1, 2, 3] cached (its whole window live, W = 3); an eviction starts its leaf's write-back
    (its device copy stays until the write lands); a match before the write completes."""
    world = TierWorld(factory, 1, "write_back")
    world.serve([1, 2, 3])
    world.finish()
    world.evict(1)
    world.match([1, 2, 3])
    world.complete_all()
    world.check()
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, TrustingWindowTiers], ids=lambda f: f.__name__)
def test_correct_window_caches_match_a_page_whose_write_back_is_pending(factory: Any) -> None:
    _match_during_write_back(factory)


def test_a_match_stopped_at_a_tombstone_the_model_lacks_names_the_window() -> None:
    """Its device part stops at 2 (its own tombstone on token 2): 13 said only "returned device slots
    [..] (2), but the pages on device hold [..] (3)"; the window oracle names the token and its insert."""
    with pytest.raises(TierWindowViolation, match=r"match\(\[1, 2, 3\]\): its device part stops after 2 tokens, short of 3: "
                                                   r"the window of the 1 token\(s\) from token 2 is live on device \(token 2's in "
                                                   r"Page\(\[1, 2, 3\], device\), since operation 2: given by the insert; 1 "
                                                   r"operation\(s\) ran before this read\), with the full KV"):
        _match_during_write_back(WriteBackStartTombstonesWindow)


def test_a_match_stopped_short_of_one_token_or_of_several_is_one_finding() -> None:
    """B9 read "the window of token 0 ... with its full KV" at page size 1 and "of tokens 2 to 3 ...
    with their full KV" at 2: two shapes, two findings of one bug. One wording now."""
    from meta_tests.test_root_cause import _verdict
    from radixcheck.audit import findings_of

    def story(page_size: int, tokens: list[int]) -> None:  # the leaf's write-back starts: its window is lost
        world = TierWorld(WriteBackStartTombstonesWindow, page_size, "write_back")
        world.serve(tokens)
        world.finish()
        world.evict(page_size)
        world.match(tokens)

    verdicts = [_verdict(f"test_tier_state_machine[page_size={n}]", lambda n=n, t=t: story(n, t)) for n, t in ((1, [1, 2, 3]), (2, [1, 2]))]
    reasons = [v.reason for v in verdicts]
    assert "the 1 token(s) from token 2" in reasons[0] and "the 2 token(s) from token 0" in reasons[1], reasons
    assert [f.tests for f in findings_of(verdicts)] == [[v.test for v in verdicts]], reasons


# ---- a window value leaked from another tenant is named as a leak (10, not 20w) --------------------------

class TwinWindowOverwrite(TieredWindowCache):
    """Broken (a new user's trial, B10): an insert's window values land on the other namespaces'
    twin pages on device too (a window table keyed by the path's tokens, not its namespace)."""

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0, window: Any = None) -> int:
        prefix_len = super().insert(tokens, values, namespace, priority, window=window)
        key = tuple(int(t) for t in tokens)
        mine = self._walk(key, namespace)
        for other in [ns for ns in self.roots if ns != namespace]:
            for twin, own in zip(self._walk(key, other), mine, strict=False):
                if twin.device is not None:
                    self.device_window[twin] = self.device_window[own].copy()
        return prefix_len


def _twins(factory: Any) -> TierWorld:
    """[1, 2, 3] cached under namespace 'a', then under 'b', then served under 'a' again."""
    world = TierWorld(factory, 1, "write_through")
    for namespace in ("a", "b", "a"):
        world.serve([1, 2, 3], namespace=namespace)
        world.finish()
    world.check()
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, TrustingWindowTiers], ids=lambda f: f.__name__)
def test_correct_window_caches_keep_each_tenants_window(factory: Any) -> None:
    _twins(factory)


def test_a_window_value_of_another_tenant_is_named_a_leak() -> None:
    """20w said only "reports window value X, not its own Y"; the value is namespace b's for that token."""
    with pytest.raises(TenantIsolationViolation, match=r"windows\(\) of Request\(\[1, 2, 3\], namespace='a', 3 cached\)'s "
                                                       r"handle: it read another tenant's window on device: token 0 "
                                                       r"\(in Page\(\[1\] under namespace 'a', device\)\) "
                                                       r"reports window value \d+: namespace 'b''s window value of that token, "
                                                       r"not its own \d+"):
        _twins(TwinWindowOverwrite)


def _twin_window_matched(factory: Any) -> TierWorld:
    """[2, 1, 2, 1] cached under 'b' (its first token's window slid: tombstoned), then [2, 1, 2] under
    'a' (all live), then [2] served under 'b': a match under b may end only where b's window is live."""
    world = TierWorld(factory, 1, "write_through")
    for tokens, namespace in (([2, 1, 2, 1], "b"), ([2, 1, 2], "a"), ([2], "b")):
        world.serve(tokens, namespace=namespace)
        world.finish()
    world.check()
    return world


@pytest.mark.parametrize("factory", [TieredWindowCache, TrustingWindowTiers], ids=lambda f: f.__name__)
def test_correct_window_caches_match_by_their_own_tenants_window(factory: Any) -> None:
    _twin_window_matched(factory)


def test_a_match_reaching_on_another_tenants_window_is_named_a_leak() -> None:
    """B10 at page size 1: a's insert gives b's twin page a's live window, and b's match ends on it.
    It was 23 (match length); the window it read is another tenant's, as the value read is at page
    size 2 (oracle 10 there): a leak, named."""
    with pytest.raises(TenantIsolationViolation, match=r"match\(\[2\] under namespace 'b'\): it read another tenant's window "
                                                       r"on device: its device part ends after 1 "
                                                       r"tokens, where only Page\(\[2\] under namespace 'a', device\), its "
                                                       r"twin, has the window of the last 1 tokens live on device"):
        _twin_window_matched(TwinWindowOverwrite)


def test_the_second_pool_protocols_hold_the_calls_a_window_or_state_target_adds() -> None:
    """``TieredWindowCacheLike`` and ``TieredStateCacheLike`` (a new user's trial: ``TieredCacheLike``
    had neither ``windows`` nor ``states``, so a type checker did not help a window target)."""
    window, state, plain = (TierWorld(f, 1, "write_through").cache for f in (TieredWindowCache, TieredStateCache, TieredRadixCache))
    assert isinstance(window, TieredWindowCacheLike) and isinstance(window, TieredCacheLike)
    assert isinstance(state, TieredStateCacheLike) and not isinstance(state, TieredWindowCacheLike)
    assert not isinstance(plain, TieredWindowCacheLike) and not isinstance(plain, TieredStateCacheLike)
    assert radixcheck.TieredWindowCacheLike is TieredWindowCacheLike


def test_one_window_leak_read_two_ways_is_one_finding() -> None:
    """B10 read as a window value at page size 2 and as a match's end at 1: both oracle 10, saying
    ``TWIN_WINDOW``, one finding. A KV leak in the same audit (another bug) stays a finding of its own."""
    from meta_tests.test_root_cause import _verdict
    from meta_tests.test_tier_compose import ReadsTwinsKv
    from radixcheck.audit import findings_of

    window = [_verdict("test_tier_state_machine[page_size=2]", lambda: _twins(TwinWindowOverwrite)),
              _verdict("test_tier_state_machine[page_size=1]", lambda: _twin_window_matched(TwinWindowOverwrite))]
    assert [v.oracle for v in window] == ["10 tenant isolation"] * 2 and window[0].reason != window[1].reason
    assert [f.tests for f in findings_of(window)] == [sorted(v.test for v in window)]
    kv_story = _verdict("test_tier_lifecycle[page_size=1]", lambda: _kv_leak(ReadsTwinsKv))
    assert kv_story.oracle == "10 tenant isolation" and len(findings_of([*window, kv_story])) == 2


def _kv_leak(factory: Any) -> None:
    """a's [1] loaded back from host reads b's KV (``ReadsTwinsKv``: a KV leak, not a window's)."""
    world = TierWorld(factory, 1, "write_through")
    for namespace in ("a", "b"):
        world.serve([1], namespace=namespace)
        world.finish()
        world.complete_all()
    world.evict(100)
    world.complete_all()
    world.serve([1], namespace="a")
    world.finish()


# ---- a window host copy may outlive its page's KV host copy (SGLang's write-back duplicate release) ----

class _CountsKeptWindows(ReleasesHostDuplicates):
    """The correct variant, counting its releases and the revives that read a kept copy."""

    released = revived = 0

    def _release_host_duplicates(self, wanted: int, spared: set[Any]) -> None:
        before = len(self.kept_window)
        super()._release_host_duplicates(wanted, spared)
        type(self).released += len(self.kept_window) - before

    def _revive(self, node: Any) -> None:
        kept, own = self.kept_window.get(node), self.device_window.get(node)
        if kept is not None and own is not None and ((own == NONE) & (kept != NONE)).any():
            type(self).revived += 1
        super()._revive(node)


class _UsesOnlyWhatItReachesWithoutKeptCopies(ReleasesHostDuplicates):
    """Broken: a match counts a kept window host copy in its answer, but uses (stamps) only the
    nodes it would reach without kept copies, so a node loaded back through one looks older than it is."""

    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> Any:
        kept, self.kept_window = self.kept_window, {}
        try:
            super().match_prefix(tokens, namespace, priority)  # stamps what it reaches without them
        finally:
            self.kept_window = kept
        stamps = {node: node.last_access for node in self._nodes()}  # naive: a test cache
        match = super().match_prefix(tokens, namespace, priority)  # the answer, counting them
        for node, stamp in stamps.items():
            node.last_access = stamp
        return match


def _used_through_a_kept_window(factory: Any, page_size: int) -> TierWorld:
    """A prompt's last page, shorter than the window, on host only, under the prompt's other pages
    recomputed on device (their window at the prompt's end tombstoned there) whose KV host copies a
    write-back into a full host released, their window host copies kept; the prompt is served: its
    match reaches the last page only through a kept window host copy, and loads it back. A mass
    evict then frees the older fresh prompt's pages first (the session-56 false alarm, reduced from
    480 operations of the ``duplicate_through_a_full_host`` story run four times)."""
    p = page_size
    world = TierWorld(factory, p, "write_back")
    prompt, end = (0, 1, 2, 0) * p, (1,) * p
    for tokens in (prompt, prompt + end):  # the prompt's end is live in its window host copy
        world.serve(tokens)
        world.finish()
    for _ in range(len(prompt + end) // p + 2):
        world.evict(10**6)
        world.complete_all()
    world.serve((3,) * (world.host.available() // p * p + len(prompt)))  # fills the host past the prompt's copies
    world.finish()
    world.serve(prompt + (2,) * 3 * p, load=False)  # recomputed: duplicates, their window tombstoned on device
    world.finish()
    world.evict(p)  # the fresh prompt's write-back releases the duplicates' KV host copies
    world.complete_all()
    world.serve(prompt + end)
    world.finish()
    world.evict(10**6)
    return world


@pytest.mark.parametrize("page_size", [1, 2])
def test_a_match_through_a_kept_window_host_copy_uses_what_it_counted(page_size: int) -> None:
    """Oracle 4t's recency follows the match's answer: a match that counted a kept window host copy
    used every node it counted. The model used to re-derive the match's end without the answer (a
    kept copy is a maybe each match anew) and flagged the correct cache's mass evict (4 LRU order,
    the fresh prompt freed while the loaded-back page, used since, stayed); a cache that does not
    use what it counted through a kept copy is caught by 4t, naming that page."""
    _CountsKeptWindows.released = _CountsKeptWindows.revived = 0
    _used_through_a_kept_window(_CountsKeptWindows, page_size)
    assert _CountsKeptWindows.released > 0 and _CountsKeptWindows.revived > 0
    _used_through_a_kept_window(TrustingWindowTiers, page_size)
    last = re.escape(repr(list((0, 1, 2, 0) * page_size + (1,) * page_size)))
    with pytest.raises(LRUOrderViolation, match=rf"evict\(1000000\) freed Page\({last}, device\+host\) \(last used by the "
                                                 rf"match_prefix\({last}\) of operation \d+\) while the unlocked device "
                                                 r"leaf Page\(\[3, 3"):
        _used_through_a_kept_window(_UsesOnlyWhatItReachesWithoutKeptCopies, page_size)


@pytest.mark.deep
@pytest.mark.parametrize("page_size", [1, 2])
def test_a_cache_that_releases_host_duplicates_and_keeps_their_window_passes(page_size: int) -> None:
    """Under write-back, KV host copies of pages on device freed, their window host copies kept
    (SGLang 0.5.23's ``_release_full_host_duplicate``): the tier machine passes over several
    streams, and those streams did release duplicates (the rule was exercised, not skipped)."""
    _CountsKeptWindows.released = _CountsKeptWindows.revived = 0
    for k in range(7):
        run_machine(tier_machine_for(_CountsKeptWindows, page_size, "write_back", name=f"stream{k}_kept_p{page_size}"),
                    profiles.SETTINGS["mutation"])
    assert _CountsKeptWindows.released > 0


def _full_host_story(factory: Any, page_size: int) -> None:
    """The tier machine's ``duplicate_through_a_full_host`` story, once, under write-back: a prompt
    (5 pages) recomputed over its host copies (duplicates, their window at the prompt's end live
    on host only), a fresh prompt written back into a full host, then the prompt served again."""
    machine = tier_machine_for(factory, page_size, "write_back")()
    machine.duplicate_through_a_full_host(base=(0, 1, 2, 0, 1) * page_size, tail=[1])
    machine.world.check()


@pytest.mark.parametrize("page_size", [1, 2])
def test_the_full_host_story_revives_a_kept_window_host_copy(page_size: int) -> None:
    """The story releases the prompt's duplicates with live window host copies kept, and the
    load-back that follows revives from one: the correct cache passes with each token's own values,
    as does one that trusts its callers; a kept copy read one value off is caught by oracle 20w,
    which says the value came from the kept copy."""
    _CountsKeptWindows.released = _CountsKeptWindows.revived = 0
    _full_host_story(_CountsKeptWindows, page_size)
    assert _CountsKeptWindows.released > 0 and _CountsKeptWindows.revived > 0
    _full_host_story(TrustingWindowTiers, page_size)
    with pytest.raises(TierWindowViolation, match=r"neither its own \d+ nor -1 \(revived from its window host copy, kept"):
        _full_host_story(KeepsStaleWindowOfReleasedDuplicate, page_size)
