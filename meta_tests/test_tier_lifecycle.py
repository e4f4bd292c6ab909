"""The request lifecycle on the tiers (``TierCapabilities(lifecycle="tree")``) can fail, for the
right reason, and correct caches pass it:

* an abort while another request's load-back is in flight that cancels it (``AbortCancelsLoad``)
  frees pages that request holds (oracle 2); with one request it is correct;
* an abort before its load landed that leaves the load lock (``AbortKeepsLoadLock``) keeps pages
  nobody holds from eviction: a newer page goes first (oracle 4t); with finishes only it is correct;
* a chunk published while its backups (or its prefix's write-back) are pending, a retract and an
  abort at every point of it, pass on the reference, on a cache protecting loads by a load lock as
  SGLang does, and on one that trusts its callers;
* device conservation counts the running requests' own slots, and still finds a leak beside them;
  a publish's ``prefix_len`` below what the request had locked is refused;
* ``lifecycle="requests"`` with a second pool on a tier is driven (``test_tier_pool_requests``); a target
  declaring it without the methods is refused at load in one line; the lifecycle is a layer.

The stories are a few calls each (the fast tier); the kill rates over the tier machine are the
catalogue's (``python -m radixcheck.reports.tier_catalogue --only AbortCancelsLoad --only
AbortKeepsLoadLock``) and the ``deep`` tests below.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.tier_model import check_conservation
from radixcheck.oracles.violations import LRUOrderViolation, RefcountViolation, ReturnValueViolation, SlotViolation
from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.cache.layers import LifecycleLayer, NamespaceLayer, Tags, keywords_for, layers_for, with_lifecycle
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.target import TIMEOUT_ENV, OperationTimeout, TargetError, check_target, forget_hangs, load_target
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld, TierLifecycleRules
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import (
    AbortCancelsLoad,
    AbortKeepsLoadLock,
    LoadLockedTiers,
    MruFirstTier,
    TrustingLifecycleTiers,
    WriteBackIgnoresLock,
    machines_for_mutant,
)
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode
from radixcheck.reference.tiered_state_cache import TieredStateCache

CORRECT = [TieredRadixCache, LoadLockedTiers, TrustingLifecycleTiers]
POLICIES = ["write_through", "write_back"]


def _on_host(factory: Any, policy: str, tokens: list[int], page_size: int = 1,
             world_class: type[LifecycleTierWorld] = LifecycleTierWorld) -> LifecycleTierWorld:
    """``tokens`` cached, then evicted to host only (every transfer landed)."""
    world = world_class(factory, page_size, policy)
    world.serve(tokens)
    world.finish()
    world.complete_all()
    for _ in range(3):
        world.evict(100)
        world.complete_all()
    assert world.cache.match_prefix(tokens).host_length == len(tokens)
    return world


# ---- the declaration and the layer ----------------------------------------------------------------

def test_requests_lifecycle_with_a_second_pool_on_a_tier_is_declared() -> None:
    assert TierCapabilities(lifecycle="requests").lifecycle == "requests"
    assert isinstance(TierCapabilities(lifecycle="requests", second_pool=StatePool()).second_pool, StatePool)
    with pytest.raises(ValueError, match="lifecycle must be one of 'off', 'tree', 'requests'"):
        TierCapabilities(lifecycle="trees")


def test_a_tier_target_declaring_requests_with_a_state_pool_lacking_their_calls_is_refused_at_load_in_one_line(
        tmp_path: Any, monkeypatch: Any) -> None:
    (tmp_path / "requests_tier.py").write_text(
        "from radixcheck.properties.cache.contract import StatePool\n"
        "from radixcheck.properties.tiers.contract import TierCapabilities\n"
        "from radixcheck.reference.tiered_cache import TieredRadixCache\n"
        "class Cache(TieredRadixCache):\n"
        "    tier_capabilities = TierCapabilities(lifecycle='requests', second_pool=StatePool())\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TargetError) as refused:
        check_target(load_target("requests_tier:Cache"))
    assert "lacks states, match_req, lock_req, cache_unfinished_req, cache_finished_req" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_lifecycle_is_declared_by_the_reference_and_off_by_default() -> None:
    assert TieredRadixCache.tier_capabilities.lifecycle == "tree"
    assert TierCapabilities().lifecycle == "off"
    assert any("request lifecycle" in gap for gap in TierCapabilities().not_exercised())
    assert not any("request lifecycle" in gap for gap in TierCapabilities(lifecycle="tree").not_exercised())


def test_the_lifecycle_is_a_layer_that_adds_steps_not_keywords() -> None:
    layers = with_lifecycle(layers_for(namespaces=True), "tree")
    assert [type(layer) for layer in layers] == [NamespaceLayer, LifecycleLayer]
    assert keywords_for(layers, "insert", Tags("a")) == {"namespace": "a"}
    assert with_lifecycle(layers_for(namespaces=True), "off") == layers_for(namespaces=True)
    assert any(isinstance(layer, LifecycleLayer) for layer in LifecycleTierWorld(TieredRadixCache).layers)


def test_the_tier_machine_has_the_lifecycle_rules_only_when_declared() -> None:
    machine = tier_machine_for(TieredRadixCache)
    assert issubclass(machine, TierLifecycleRules) and machine.world_class is LifecycleTierWorld
    plain = tier_machine_for(MruFirstTier)
    assert not issubclass(plain, TierLifecycleRules)
    assert callable(getattr(machine, "abort_during_load", None)) and not hasattr(plain, "abort_during_load")


# ---- an abort while a load-back is in flight -------------------------------------------------------

def _abort_during_load(factory: Any, policy: str, second: bool, outcome: str = "abort") -> LifecycleTierWorld:
    """[1, 2] on host only; a request admitted on it (its load in flight), perhaps a second one on
    [1, 2, 3]; the first ends as ``outcome`` before the load lands."""
    world = _on_host(factory, policy, [1, 2])
    world.admit([1, 2])
    assert any(t.kind == "load" for t in world.controller.pending)
    if second:
        world.admit([1, 2, 3])
    world.end(0, outcome)
    return world


@pytest.mark.parametrize("outcome", ["abort", "retract"])
@pytest.mark.parametrize("policy", POLICIES)
def test_an_abort_cancelling_another_requests_load_fails_refcount(policy: str, outcome: str) -> None:
    world = _abort_during_load(AbortCancelsLoad, policy, second=True, outcome=outcome)
    with pytest.raises(RefcountViolation, match=r"Page\(\[1(, 2)?\].*left the device while a request holds a lock"):
        world.compute(0, 1)  # the second request waits for the load: it lands


@pytest.mark.parametrize("policy", POLICIES)
def test_cancelling_ones_own_load_is_correct(policy: str) -> None:
    """With one request the cancelled load's pages go back to host only, legally."""
    world = _abort_during_load(AbortCancelsLoad, policy, second=False)
    world.complete_all()
    world.check()
    assert world.cache.match_prefix([1, 2]).host_length == 2


@pytest.mark.parametrize("policy", POLICIES)
def test_an_abort_leaving_the_load_lock_fails_the_eviction_order(policy: str) -> None:
    world = _abort_during_load(AbortKeepsLoadLock, policy, second=False)
    world.complete_all()
    world.serve([3])  # the newest page
    world.finish()
    world.complete_all()
    with pytest.raises(LRUOrderViolation, match=r"evict\(100\) (freed|wrote back) Page\(\[3\].*while the unlocked device "
                                                 r"leaf Page\(\[1, 2\]"):
        world.evict(100)


def _land_all_then_evict_everything(world: LifecycleTierWorld) -> None:
    """Every transfer lands, a fresh prompt is served, and the device is evicted: a page held by a
    lock nobody owns, or freed under one, shows here."""
    world.complete_all()
    world.serve([3])
    world.finish()
    world.complete_all()
    world.evict(100)
    world.complete_all()
    world.check()


@pytest.mark.parametrize("factory", [AbortKeepsLoadLock, AbortCancelsLoad], ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", POLICIES)
def test_the_lifecycle_mutants_are_correct_when_requests_finish(factory: Any, policy: str) -> None:
    """A finish waits for its loads: the composed bugs need an abort (or a retract) to show."""
    world = _on_host(factory, policy, [1, 2])
    world.admit([1, 2])
    world.admit([1, 2, 3])
    world.compute(1, 1)
    world.end(1, "finish")
    world.end(0, "finish")
    _land_all_then_evict_everything(world)


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("second", [False, True])
def test_correct_caches_pass_an_abort_during_a_load(factory: Any, policy: str, second: bool) -> None:
    world = _abort_during_load(factory, policy, second)
    if second:
        world.compute(0, 1)
        world.publish(0)
        world.end(0, "finish")
    _land_all_then_evict_everything(world)


# ---- publishing while backups are in flight --------------------------------------------------------

@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("outcome", ["finish", "retract", "abort"])
def test_chunks_published_while_backups_are_pending(factory: Any, policy: str, outcome: str) -> None:
    """A request on [1, 2] (under write-back, its write-back pending) publishes two chunks while
    the backups are in flight, reading the tree's slots after each, and ends before they land."""
    world = LifecycleTierWorld(factory, 1, policy)
    world.serve([1, 2])
    world.finish()
    if policy == "write_back":
        world.evict(2)
        assert world.pending()
    live = world.admit([1, 2, 3, 4, 5])
    for size in (2, 1):
        world.compute(0, size)
        world.publish(0)
        assert live.own == [] and live.values == world.cache.match_prefix(live.tokens[: live.filled]).device_values.tolist()
    assert world.pending()
    world.check()
    world.end(0, outcome)
    world.complete_all()
    world.check()
    if outcome == "retract":
        world.admit(*world.requeued.pop())  # runs again: it matches what it published (checked in the match)
        assert len(world.lives[0].values) == 5
        world.end(0, "finish")
    world.evict(100)
    world.complete_all()
    world.check()


def test_page_size_two_publishes_whole_pages_and_keeps_the_tail_its_own() -> None:
    world = LifecycleTierWorld(TieredRadixCache, 2, "write_through")
    live = world.admit([1, 1, 2, 2, 3])
    world.compute(0, 3)
    world.publish(0)
    assert len(live.values) == 2 and len(live.own) == 1
    world.check()
    world.compute(0, 2)
    world.end(0, "finish")
    world.complete_all()
    world.check()
    assert world.cache.device_size() == 4


# ---- the checks the lifecycle adds ----------------------------------------------------------------

def test_conservation_counts_the_running_requests_own_slots() -> None:
    world = LifecycleTierWorld(TieredRadixCache, 1, "write_through")
    live = world.admit([1, 2, 3])
    world.compute(0, 2)
    assert set(live.own) == world.callers_slots() and len(live.own) == 2
    world.check()
    with pytest.raises(SlotViolation, match="leaked"):  # without them, the request's slots look leaked
        check_conservation(world.model, set(world.device.in_use), set(), set(world.host.in_use),
                           int(world.cache.device_size()), int(world.cache.host_size()))


class DropLeaksDevice(TieredRadixCache):
    """Unlinks a page it drops without freeing its device slots."""

    def _drop(self, node: TierNode) -> int:
        self._unlink(node)  # out of the tree (and so of its kept sizes), its device slots never freed
        return 0


def test_a_leak_beside_running_requests_fails_conservation() -> None:
    world = LifecycleTierWorld(DropLeaksDevice, 1, "write_through")
    world.fail_next([True, True])  # the backup (and its retry) fail: the page is device-only
    world.serve([1])
    world.finish()
    world.admit([2, 3])
    world.compute(0, 2)
    with pytest.raises(SlotViolation, match="leaked"):  # named by the eviction's amount check, before its echo
        world.evict(1)
        world.check()


class PublishReturnsZero(TieredRadixCache):
    """``insert`` returns 0, whatever was cached."""

    def insert(self, tokens: Any, values: np.ndarray, namespace: Any = None, priority: int = 0) -> int:
        super().insert(tokens, values, namespace, priority)
        return 0


def test_a_publish_whose_prefix_len_falls_below_the_locked_prefix_is_refused() -> None:
    world = LifecycleTierWorld(PublishReturnsZero, 1, "write_through")
    world.admit([1, 2, 3])
    world.compute(0, 2)
    world.publish(0)  # nothing was cached before: 0 is right
    world.compute(0, 1)
    with pytest.raises(ReturnValueViolation, match="insert returned 0; 2 tokens were cached and locked"):
        world.publish(0)


def test_an_end_outcome_is_one_of_three() -> None:
    world = LifecycleTierWorld(TieredRadixCache)
    world.admit([1])
    with pytest.raises(ValueError, match="outcome must be one of"):
        world.end(0, "vanish")


def test_a_quarantine_aborts_the_running_requests_first() -> None:
    world = LifecycleTierWorld(TieredRadixCache, 1, "write_through")
    world.admit([1, 2])
    world.compute(0, 2)
    world.publish(0)
    world.quarantine([1])
    assert world.lives == [] and "w.end(0, 'abort')" in world.log
    world.complete_all()
    world.check()


# ---- the tier machine (deep: each is a full run at the gate's budget) -----------------------------

@pytest.mark.deep
@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("page_size", [1, 2])
def test_correct_lifecycle_caches_pass_the_tier_machine(factory: Any, policy: str, page_size: int) -> None:
    run_machine(tier_machine_for(factory, page_size, policy, name=f"tierlife_{factory.__name__}_{policy}_p{page_size}"),
                profiles.SETTINGS["mutation"])


@pytest.mark.deep
@pytest.mark.parametrize("mutant", [AbortCancelsLoad, AbortKeepsLoadLock, WriteBackIgnoresLock], ids=lambda m: m.__name__)
def test_lifecycle_mutants_die_in_every_write_policy_by_their_oracle(mutant: Any) -> None:
    for machine in machines_for_mutant(mutant):
        with pytest.raises(mutant.caught_by):
            run_machine(machine, profiles.SETTINGS["mutation"])


# ---- a write-back that lands under a request admitted meanwhile ------------------------------------

def _write_back_lands_under_a_request(factory: Any) -> LifecycleTierWorld:
    world = LifecycleTierWorld(factory, 1, "write_back")
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.evict(100)  # its write-back starts; the pages leave the device when it lands
    world.admit([1, 2])  # a request locks them meanwhile
    world.complete_all()
    world.check()
    return world


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
def test_a_write_back_landing_under_a_lock_leaves_the_pages_on_device(factory: Any) -> None:
    world = _write_back_lands_under_a_request(factory)
    world.end(0, "finish")
    world.complete_all()
    world.check()


def test_a_write_back_that_frees_locked_pages_fails_refcount() -> None:
    with pytest.raises(RefcountViolation):
        _write_back_lands_under_a_request(WriteBackIgnoresLock)


# ---- a load cut off by evict_prefix while in flight ------------------------------------------------

@pytest.mark.parametrize("policy", POLICIES)
def test_a_cache_may_keep_the_path_of_a_load_cut_off_while_in_flight(policy: str) -> None:
    """[1] on device, [1, 2] loading from host, then cut off by ``evict_prefix``: [1] looks like the
    oldest leaf, but LoadLockedTiers (as SGLang) keeps the load's path locked until it lands, so an
    eviction that takes the newer [3] instead is no order violation (a false alarm in the catalogue's
    LoadLockedTiers write_back stream 30). Once the load lands, [1] is a candidate again."""
    world = LifecycleTierWorld(LoadLockedTiers, 1, policy)
    world.serve([1, 2])
    world.finish()
    world.complete_all()
    world.evict(1)  # the leaf [1, 2] goes to host only
    world.complete_all()
    assert world.cache.match_prefix([1, 2]).host_length == 1
    world.admit([1, 2])
    loads = [t.number for t in world.controller.pending if t.kind == "load"]
    assert loads
    world.end(0, "abort")
    world.quarantine([1, 2])
    world.serve([3])  # the newest page
    world.finish()
    for number in [t.number for t in world.controller.pending if t.kind == "write"]:
        world.complete(number)
    world.evict(100)  # keeps [1] (load-locked), takes [3]
    for number in loads:
        world.complete(number)
    world.complete_all()
    world.evict(100)
    world.complete_all()
    world.check()
    assert len(world.cache.match_prefix([1]).device_values) == 0  # [1] went once its load landed


# ---- the per-operation limit --------------------------------------------------------------------

class _HangsOnEvict(TieredRadixCache):
    def evict(self, num_tokens: int) -> int:
        start = time.process_time()
        while time.process_time() - start < 3:  # computes past the limit (CPU time is what it counts)
            pass
        return super().evict(num_tokens)


def test_a_tier_call_that_hangs_fails_under_the_per_operation_limit(monkeypatch: Any) -> None:
    """The tier world calls its cache under the same per-operation limit as the plain machine, so a
    hung tier cache fails the audit instead of hanging it."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    forget_hangs()
    world = LifecycleTierWorld(_HangsOnEvict, 1, "write_through")
    world.serve([1, 2])
    world.finish()
    with pytest.raises(OperationTimeout, match="evict"):
        world.evict(100)
    forget_hangs()


class _ChecksEveryCall(TieredStateCache):
    """The reference, refusing (by assertion) any call a correct engine would not send: an unlock with
    no earlier lock through the same handle, a handle the cache no longer holds, malformed arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held: dict[int, int] = {}

    def _live(self, handle: Any) -> None:
        node = handle
        while node is not None and node.parent is not None:
            assert node.parent.children.get(node.key) is node, f"a stale or quarantined handle {handle!r} was sent"
            node = node.parent

    def inc_lock_ref(self, handle: Any) -> None:
        self._live(handle)
        self.held[id(handle)] = self.held.get(id(handle), 0) + 1
        super().inc_lock_ref(handle)

    def dec_lock_ref(self, handle: Any) -> None:
        assert self.held.get(id(handle), 0) > 0, "an unlock with no earlier lock through this handle was sent"
        self.held[id(handle)] -= 1
        super().dec_lock_ref(handle)

    def insert(self, tokens: Any, values: Any, namespace: Any = None, **kwargs: Any) -> int:
        hash(namespace)
        assert len(tokens) == len(values) and all(isinstance(t, int) and t >= 0 for t in tokens), "malformed insert"
        return super().insert(tokens, values, namespace=namespace, **kwargs)


@pytest.mark.parametrize("policy", [pytest.param("write_through", marks=pytest.mark.deep), "write_back"])
def test_the_tier_machine_sends_only_what_a_correct_engine_sends(policy: str) -> None:
    # TierCapabilities has no checks_locks/validates_input because of this: a cache that checks every call passes
    assert _ChecksEveryCall.tier_capabilities.lifecycle == "tree" and _ChecksEveryCall.tier_capabilities.namespaces
    run_machine(tier_machine_for(_ChecksEveryCall, 1, policy, name="checks_every_call"),
                search=settings(max_examples=15, stateful_step_count=25, deadline=None, database=None))
