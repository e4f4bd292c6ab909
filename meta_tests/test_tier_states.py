"""A state pool on the tiers (issue 39: "window or state values on a node that is written to host
and loaded back"): the state oracle can fail, for the right reason, on each composed mutant; the
reference and the trusting cache pass the same stories; the keyword is sent only to a target that
declares the pool; a window pool on a tier is refused at load with its reason."""

from __future__ import annotations

from typing import Any

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import SecondValueViolation
from radixcheck.properties.cache.contract import SlidingWindow, StatePool
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import Target, TargetError, check_target
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.machine import TierStateRules, tier_machine_for
from radixcheck.properties.tiers.mutants import machines_for_mutant
from radixcheck.properties.tiers.state_mutants import (
    STATE_TIER_MUTANTS,
    HostEvictionFreesDeviceState,
    LoadBackRestoresParentState,
    TrustingStateTiers,
    WriteBackDropsState,
)
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reference.tiered_state_cache import TieredStateCache


def _through_host(factory: Any, policy: str) -> TierWorld:
    """[1, 2] and [1, 2, 0, 1] cached (a state at each end), both sent to host only, [1, 2] loaded
    back and read, the extension evicted from host, [1, 2] read again."""
    world = TierWorld(factory, 1, policy)
    for tokens in ([1, 2], [1, 2, 0, 1]):
        world.serve(tokens)
        world.finish()
    for _ in range(4):
        world.evict(10**6)
        world.complete_all()
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.evict_host(10**6)
    world.serve([1, 2])
    world.finish()
    return world


@pytest.mark.deep  # fast: the write-back story of the reference, below
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("factory", [TieredStateCache, TrustingStateTiers], ids=lambda f: f.__name__)
def test_correct_state_caches_keep_each_state_through_the_host(factory: Any, policy: str) -> None:
    world = _through_host(factory, policy)
    assert world.states is not None and len(world.states.inserted) == 2  # a state at each of the two ends
    match = world.cache.match_prefix([1, 2, 0, 1])
    assert list(world.cache.states(match.device_handle)) == [-1, world.states.inserted[world.model.pages_of([1, 2])[-1]]]


def test_the_reference_keeps_each_state_through_the_host() -> None:
    test_correct_state_caches_keep_each_state_through_the_host(TieredStateCache, "write_back")


@pytest.mark.deep  # fast: the parent's-state story, below
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("mutant, says", [(WriteBackDropsState, "reports state -1, but it has the state"),
                                          (LoadBackRestoresParentState, "reports state -1, but it has the state"),
                                          (HostEvictionFreesDeviceState, "reports state -1, but it has the state")],
                         ids=lambda x: getattr(x, "__name__", "msg"))
def test_each_state_mutant_fails_the_story_by_the_state_oracle(mutant: Any, says: str, policy: str) -> None:
    with pytest.raises(SecondValueViolation, match=says):
        _through_host(mutant, policy)


def test_a_load_back_with_the_parents_state_is_named_so() -> None:
    world = TierWorld(LoadBackRestoresParentState, 1, "write_through")
    for tokens in ([1], [1, 2]):  # a state after [1] and after [1, 2]
        world.serve(tokens)
        world.finish()
    world.complete_all()  # both backed up, each with its state
    world.evict(1)  # the leaf [1, 2] goes to host only
    world.serve([1, 2])
    with pytest.raises(SecondValueViolation, match=r"Page\(\[1, 2\].*\(its parent's\)"):
        world.finish()


def test_the_state_keyword_goes_only_to_a_target_that_declares_a_state_pool() -> None:
    plain = TierWorld(TieredRadixCache, 1, "write_through")  # its insert takes no state=: a sent one would raise
    plain.serve([1, 2])
    plain.finish()
    assert plain.states is None
    assert TierStateRules not in tier_machine_for(TieredRadixCache).__mro__
    assert TierStateRules in tier_machine_for(TieredStateCache).__mro__


def test_a_second_pool_on_a_tier_is_a_state_pool_or_a_plain_window() -> None:
    with pytest.raises(ValueError, match="not driven on a tier"):
        TierCapabilities(second_pool=SlidingWindow(4, refills_tombstones=True))
    with pytest.raises(ValueError, match="must be None, a StatePool or a SlidingWindow"):
        TierCapabilities(second_pool="state")  # type: ignore[arg-type]
    assert any("evict_states" in gap for gap in TierCapabilities(second_pool=StatePool()).not_exercised())


class DeclaresStatesWithoutReporting(TieredRadixCache):
    """Declares a state pool but has no ``states`` (nor takes ``state=``)."""

    tier_capabilities = TierCapabilities(second_pool=StatePool())


def test_a_tier_target_declaring_a_state_pool_without_states_is_refused_at_load() -> None:
    spec = "meta_tests.test_tier_states:DeclaresStatesWithoutReporting"
    with pytest.raises(TargetError, match="lacks states"):
        check_target(Target(spec, DeclaresStatesWithoutReporting, DeclaresStatesWithoutReporting.tier_capabilities))
    check_target(Target("radixcheck.reference.tiered_state_cache:TieredStateCache", TieredStateCache,
                        TieredStateCache.tier_capabilities))


@pytest.mark.deep
@pytest.mark.parametrize("mutant", STATE_TIER_MUTANTS, ids=lambda m: m.__name__)
def test_each_state_mutant_is_caught_by_the_state_oracle_in_the_tier_machine(mutant: type) -> None:
    for machine in machines_for_mutant(mutant):
        with pytest.raises(SecondValueViolation, match=r"states\(\) of .* reports state"):
            run_machine(machine, profiles.SETTINGS["mutation"])


@pytest.mark.deep
@pytest.mark.parametrize("mutant", STATE_TIER_MUTANTS, ids=lambda m: m.__name__)
def test_each_state_mutant_is_correct_without_a_trip_through_host(mutant: type) -> None:
    """Composed: the bug needs the host tier. Served and finished on device alone, it passes."""
    world = TierWorld(mutant, 1, "write_back")
    for tokens in ([1, 2], [1, 2, 0], [1, 2, 0, 1], [1, 2]):
        world.serve(tokens)
        world.finish()
    world.check()


class _StatesByTokens(TieredStateCache):
    """A state table keyed by the tokens alone (the hybrid trial's ``HostStatesByTokens``, in small):
    a tenant's page reports the state another tenant inserted for the same tokens."""

    tier_capabilities = TierCapabilities(namespaces=True, second_pool=StatePool())

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.by_tokens: dict[tuple[int, ...], int] = {}

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0, state: Any = -1) -> int:
        if len(tokens) and len(tokens) % self.page_size == 0 and state != -1:
            self.by_tokens[tuple(int(t) for t in tokens)] = int(state)
        return super().insert(tokens, values, namespace=namespace, priority=priority, state=state)

    def states(self, handle: Any) -> list[int]:
        path = self._path(handle)
        keys = [sum((node.key for node in path[:i + 1]), ()) for i in range(len(path))]
        return [self.by_tokens.get(key, -1) for key in keys]


def test_a_state_from_another_tenant_names_the_page_it_was_inserted_at() -> None:
    world = TierWorld(_StatesByTokens, 1, "write_through")
    world.serve([1, 2], namespace="a")
    world.finish()
    world.serve([1, 2], namespace="b")  # the same tokens, another tenant: the table now holds b's state
    world.finish()
    world.serve([1, 2], namespace="a")
    with pytest.raises(SecondValueViolation, match=r"under namespace 'a'.* \(another tenant's: the state inserted at "
                                                   r"Page\(\[1, 2\] under namespace 'b'"):
        world.finish()


def test_the_reference_reads_each_tenants_own_state() -> None:
    world = TierWorld(TieredStateCache, 1, "write_through")  # the same story on the correct cache: no finding
    for namespace in ("a", "b", "a"):
        world.serve([1, 2], namespace=namespace)
        world.finish()
