"""The tier contract's new judgements can fail, for the right reason, and correct caches pass them:

* the device tier's eviction order (oracle 4t): a cache that evicts its most recently used device
  leaf first fails, whether it frees the leaf (write-through) or starts its write-back;
* namespaces through the tier (oracle 10 on both tiers): a match under N that returns another
  namespace's device slots, or counts its host copies, and a load-back under N that reads another
  namespace's host copy, each fail; the reference and a cache that trusts its callers pass.

The stories here are a few calls each (the fast tier); the kill rates over the tier machine are
the catalogue's (``python -m radixcheck.reports.tier_catalogue``) and the ``deep`` tests below.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import EvictionOrderViolation, LRUOrderViolation, TenantIsolationViolation
from radixcheck.properties.cache.layers import UNSAID, NamespaceLayer, PriorityLayer, Tags, keywords_for, layers_for
from radixcheck.properties.cache.policies import lfu, priority, tlru
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.machine import TierTenantRules, tier_machine_for
from radixcheck.properties.tiers.mutants import (
    CORRECT_TIER_VARIANTS,
    HostLookupIgnoresNamespace,
    LoadBackForgetsHits,
    MruFirstTier,
    TieredLfu,
    TieredPriority,
    TrustingTenantTiers,
)
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode

CORRECT = [TieredRadixCache, TrustingTenantTiers, TieredLfu, TieredPriority]


# ---- the device tier's eviction order -------------------------------------------------------

def _two_prompts(factory: Any, policy: str) -> TierWorld:
    """[1] then [2] cached (and, under write-through, backed up): [1] is the least recently used."""
    world = TierWorld(factory, 1, policy)
    for tokens in ([1], [2]):
        world.serve(tokens)
        world.finish()
    world.complete_all()
    return world


@pytest.mark.parametrize("policy, how", [("write_through", "freed"), ("write_back", "wrote back")])
def test_most_recent_first_fails_the_order(policy: str, how: str) -> None:
    world = _two_prompts(MruFirstTier, policy)
    with pytest.raises(LRUOrderViolation, match=rf"evict\(1\) {how} Page\(\[2\].*while the unlocked device leaf Page\(\[1\]"):
        world.evict(1)


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_least_recent_first_passes(factory: Any, policy: str) -> None:
    world = _two_prompts(factory, policy)
    world.evict(1)  # under write-back nothing is freed during the call: it writes [1] back, then [2]
    world.complete_all()
    world.check()
    if policy == "write_through":
        assert world.cache.match_prefix([2]).device_values.tolist() != []  # [2] stayed on device
    world.match([1])  # [1] went to host: the model agrees (checked in match)


def test_a_match_is_a_use_so_the_order_follows_it() -> None:
    """After a match of [1], [2] is the least recently used: an LRU cache frees it, MRU-first frees [1]."""
    for factory, fails in ((TieredRadixCache, False), (MruFirstTier, True)):
        world = _two_prompts(factory, "write_through")
        world.match([1])
        if fails:
            with pytest.raises(LRUOrderViolation, match=r"freed Page\(\[1\]"):
                world.evict(1)
        else:
            world.evict(1)
            world.check()


def test_locked_and_in_flight_leaves_are_not_candidates() -> None:
    """A running request's leaf, and a leaf whose backup is pending, may stay while a newer one goes."""
    world = TierWorld(TieredRadixCache, 1, "write_through")
    world.serve([1])
    world.finish()
    world.serve([1])  # running: [1] locked
    world.serve([2])
    world.finish()  # [2]: its backup is pending
    world.serve([3])
    world.finish()
    world.complete(world.pending()[-1])  # [3] backed up: the only candidate
    world.evict(1)
    world.check()


# ---- namespaces through the tier --------------------------------------------------------------

class DeviceMatchIgnoresNamespace(TieredRadixCache):
    """Matches every namespace in the default namespace's tree."""

    def match_prefix(self, tokens: Any, namespace: Any = None) -> Any:
        return super().match_prefix(tokens)


class LoadBackByTokens(TieredRadixCache):
    """Loads back the host copy last written for the same tokens, whichever tenant's it is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.by_tokens: dict[tuple[int, ...], Any] = {}

    def _tokens(self, node: TierNode) -> tuple[int, ...]:
        return tuple(t for n in self._path(node) for t in n.key)

    def transfer_done(self, transfer: Any) -> None:
        nodes = list(self._pending.get(transfer.number, ()))
        super().transfer_done(transfer)
        for node in nodes if transfer.kind == "write" else ():
            self.by_tokens[self._tokens(node)] = node.host

    def _load(self, to_load: list[TierNode], hosts: list[Any]) -> None:
        super()._load(to_load, [self.by_tokens.get(self._tokens(n), h) for n, h in zip(to_load, hosts, strict=True)])


def _on_host_only(world: TierWorld, tokens: list[int], namespace: Any) -> None:
    world.serve(tokens, namespace=namespace)
    world.finish()
    world.complete_all()
    world.evict(100)
    world.complete_all()


def test_a_match_counting_another_tenants_host_copies_fails_isolation() -> None:
    world = TierWorld(HostLookupIgnoresNamespace, 1, "write_through")
    _on_host_only(world, [1, 2], "a")
    with pytest.raises(TenantIsolationViolation, match=r"under namespace 'b'\) counted 2 tokens on host .* namespace 'a'"):
        world.serve([1, 2], namespace="b")


def test_a_match_returning_another_tenants_device_slots_fails_isolation() -> None:
    world = TierWorld(DeviceMatchIgnoresNamespace, 1, "write_through")
    world.serve([1, 2])
    world.finish()
    with pytest.raises(TenantIsolationViolation, match=r"under namespace 'a'\) returned device slot .* namespace None"):
        world.serve([1, 2], namespace="a")


def test_a_load_back_reading_another_tenants_host_copy_fails_isolation() -> None:
    world = TierWorld(LoadBackByTokens, 1, "write_through")
    for namespace in ("a", "b"):
        world.serve([1], namespace=namespace)
        world.finish()
        world.complete_all()
    world.evict(100)
    with pytest.raises(TenantIsolationViolation, match=r"a load-back under namespace 'a' reads host slots .* namespace 'b'"):
        world.serve([1], namespace="a")


class QuarantineHidesTwins(TieredRadixCache):
    """Remembers what ``evict_prefix`` removed by its tokens alone, and every match, under any
    namespace, stops there: another tenant's copy of those tokens is no longer found (a new user's
    host index keyed by token ids did the same)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hidden: set[tuple[int, ...]] = set()

    def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
        self.hidden.add(tuple(int(t) for t in tokens))
        return super().evict_prefix(tokens, namespace)

    def match_prefix(self, tokens: Any, namespace: Any = None, priority: int = 0) -> Any:
        match = super().match_prefix(tokens, namespace, priority)
        key, at = tuple(int(t) for t in tokens), len(match.device_values)
        for end in range(at + 1, at + match.host_length + 1):
            if key[:end] in self.hidden:
                return dataclasses.replace(match, host_length=(end - 1 - at) // self.page_size * self.page_size)
        return match


def test_a_match_stopping_where_another_tenant_quarantined_its_copy_fails_isolation() -> None:
    """A new user's trial: tenant b's evict_prefix hid tenant a's host page of the same tokens; the
    short match under a was filed under oracle 13 (residency), as any slip would be. The twin
    quarantined at the very page where a's answer stops names the cause: oracle 10."""
    world = TierWorld(QuarantineHidesTwins, 1, "write_through")
    for namespace in ("a", "b"):
        world.serve([1, 2], namespace=namespace)
        world.finish()
    for _ in range(3):
        world.evict(100)
        world.complete_all()
    world.quarantine([1, 2], namespace="b")
    with pytest.raises(TenantIsolationViolation, match=r"match\(\[1, 2\] under namespace 'a'\) stops after 1 tokens, before "
                       r"Page\(\[1, 2\] under namespace 'a', host\): its twin Page\(\[1, 2\] under namespace 'b', nowhere, "
                       r"gone by quarantine\) was quarantined"):
        world.match([1, 2], namespace="a")


class ReadsTwinsKv(TieredRadixCache):
    """A load-back copies the KV of the newest host copy of the same tokens, whichever tenant's
    (its controller reads the right slots: only the KV the request then reads shows the leak)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.by_tokens: dict[tuple[int, ...], list[int]] = {}

    def transfer_done(self, transfer: Any) -> None:
        nodes = list(self._pending.get(transfer.number, ()))
        super().transfer_done(transfer)
        kv = self.controller.host_kv if transfer.kind == "write" else self.controller.device_kv
        if transfer.kind == "write":
            for node in nodes:
                tokens = tuple(t for n in self._path(node) for t in n.key)
                self.by_tokens[tokens] = [kv[int(s)] for s in node.host]
        else:
            for node in nodes:
                twin = self.by_tokens.get(tuple(t for n in self._path(node) for t in n.key))
                for slot, value in zip(node.device, twin or (), strict=False):
                    self.controller.device_kv[int(slot)] = value  # a copy of the twin's, not of its own host copy


@pytest.mark.parametrize(("owner", "reader", "named"), [("b", "a", "namespace 'b'"), ("a", UNSAID, "namespace 'a'"),
                                                      (UNSAID, "a", "namespace None")],
                         ids=["between-tenants", "into-the-default", "out-of-the-default"])
def test_a_request_reading_another_tenants_kv_fails_isolation(owner: Any, reader: Any, named: str) -> None:
    """The request's forward reads KV that is exactly another tenant's for the same tokens: oracle
    10 (each namespace's KV differs from its first token on), not 13; the default namespace is a
    tenant like any other, from or into it (its key is ``None``: a leak from it was filed as 13)."""
    world = TierWorld(ReadsTwinsKv, 1, "write_through")
    for namespace in (reader, owner):  # the owner's copy is written last: the one the bug reads
        world.serve([1], namespace=namespace)
        world.finish()
        world.complete_all()
    world.evict(100)
    world.complete_all()
    world.serve([1], namespace=reader)
    with pytest.raises(TenantIsolationViolation, match=rf"reads KV .* {re.escape(named)}'s KV of those tokens"):
        world.finish()


def test_pages_are_named_with_their_tenant() -> None:
    """Two tenants' pages of the same tokens are two pages: a message names which (a new user's
    trial read "Page([0], device+host) left the device" on a tenant target)."""
    world = TierWorld(TieredRadixCache, 1, "write_through")
    for namespace in ("a", UNSAID):
        world.serve([1, 2], namespace=namespace)
        world.finish()
    pages = [world.model.pages_of([1, 2], namespace)[-1] for namespace in ("a", None)]
    assert [repr(p) for p in pages] == ["Page([1, 2] under namespace 'a', device)", "Page([1, 2], device)"]


@pytest.mark.parametrize("factory", [*CORRECT, HostLookupIgnoresNamespace, LoadBackByTokens], ids=lambda f: f.__name__)
def test_one_tenant_alone_passes_the_same_stories(factory: Any) -> None:
    """The composed bugs need two tenants: with one, each cache above is correct."""
    world = TierWorld(factory, 1, "write_through")
    _on_host_only(world, [1, 2], "a")
    world.serve([1, 2], namespace="a")  # loads its own host copies back
    world.finish()
    world.serve([1, 2, 3], namespace="a")
    world.finish()
    world.complete_all()
    world.check()


@pytest.mark.parametrize("factory", CORRECT, ids=lambda f: f.__name__)
def test_correct_caches_keep_tenants_apart_on_both_tiers(factory: Any) -> None:
    world = TierWorld(factory, 1, "write_through")
    _on_host_only(world, [1, 2], "a")
    world.serve([1, 2], namespace="b")  # nothing of a's
    world.finish()
    world.serve([1, 2], namespace=UNSAID)
    world.finish()
    world.serve([1, 2], namespace="a")  # a's own, loaded back
    world.finish()
    world.complete_all()
    world.quarantine([1], namespace="b")
    world.match([1, 2], namespace="a")
    world.check()


def test_a_namespace_for_a_target_that_declares_none_is_refused_and_never_sent() -> None:
    world = TierWorld(MruFirstTier, 1, "write_through")  # the single-part mutants declare the tier alone
    with pytest.raises(ValueError, match="declares no namespaces"):
        world.serve([1], namespace="a")
    assert world.log == [] and world.cache.device_size() == 0


def test_the_tier_machine_has_the_tenant_rules_only_when_namespaces_are_declared() -> None:
    assert issubclass(tier_machine_for(TieredRadixCache), TierTenantRules)
    assert not issubclass(tier_machine_for(MruFirstTier), TierTenantRules)
    assert "not exercised" in MruFirstTier.tier_capabilities.tenant_isolation()
    assert TieredRadixCache.tier_capabilities.tenant_isolation().startswith("checked (oracle 10) on both tiers")
    with pytest.raises(ValueError, match="namespaces must be a bool"):
        TierCapabilities(namespaces="yes")


def test_the_layers_send_only_what_is_declared() -> None:
    assert keywords_for(layers_for(namespaces=False), "insert", Tags()) == {}
    assert keywords_for(layers_for(namespaces=True), "insert", Tags("a")) == {"namespace": "a"}
    assert keywords_for(layers_for(namespaces=True), "insert", Tags(UNSAID)) == {}
    assert keywords_for(layers_for(namespaces=True), "match_prefix", Tags(None)) == {"namespace": None}

    class TakesPriority:
        takes_priority = True

    layers = layers_for(namespaces=True, policy=TakesPriority())
    assert [type(layer) for layer in layers] == [NamespaceLayer, PriorityLayer]
    assert keywords_for(layers, "insert", Tags("a", 3)) == {"namespace": "a", "priority": 3}
    assert keywords_for(layers, "evict_prefix", Tags("a", 3)) == {"namespace": "a"}


# ---- the tier machine (deep: each is a full run at the gate's budget) -----------------------

@pytest.mark.deep
@pytest.mark.parametrize("name", CORRECT_TIER_VARIANTS)
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("page_size", [1, 2])
def test_correct_composed_caches_pass_the_tier_machine(name: str, policy: str, page_size: int) -> None:
    run_machine(tier_machine_for(CORRECT_TIER_VARIANTS[name], page_size, policy, name=f"compose_{name}_{policy}_p{page_size}"),
                profiles.SETTINGS["mutation"])


# ---- a declared Policy on the device tier --------------------------------------------------

def _frequent_then_rare(factory: Any, policy: str = "write_through") -> TierWorld:
    """[1] cached by three requests (three hits), [2] by one; both to host; [1] loaded back first
    (so it is the older), then [2]: under LFU [2] is the one to go."""
    world = TierWorld(factory, 1, policy)
    for tokens in ([1, 4], [1, 5], [1, 6], [2]):
        world.serve(tokens)
        world.finish()
    world.complete_all()
    for _ in range(3):
        world.evict(100)
        world.complete_all()
    for tokens in ([1], [2]):
        world.serve(tokens)
        world.finish()
    world.complete_all()
    return world


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_load_back_that_forgets_the_hits_fails_the_policy_order(policy: str) -> None:
    world = _frequent_then_rare(LoadBackForgetsHits, policy)
    with pytest.raises(EvictionOrderViolation, match=r"evict\(1\) (freed|wrote back) Page\(\[1\].*3 hits.*under lfu"):
        world.evict(1)


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_correct_lfu_tier_keeps_the_frequent_prompt(policy: str) -> None:
    world = _frequent_then_rare(TieredLfu, policy)
    world.evict(1)
    world.complete_all()
    world.check()
    assert world.cache.match_prefix([1]).device_values.tolist() != []


def _frequent_prefix(factory: Any) -> TierWorld:
    """[1] cached by three requests ([1, 4], [1, 5], [1, 6]: three hits), then [2] (one hit, the
    newest), all backed up: after the three tails, LFU takes [2] before [1], LRU takes [1]."""
    world = TierWorld(factory, 1, "write_through")
    for tokens in ([1, 4], [1, 5], [1, 6], [2]):
        world.serve(tokens)
        world.finish()
    world.complete_all()
    return world


@pytest.mark.parametrize("factory", [LoadBackForgetsHits, TieredLfu], ids=lambda f: f.__name__)
def test_the_forgetful_load_back_is_correct_without_a_trip_through_host(factory: Any) -> None:
    """The composed bug needs the host tier: with no load-back, the same cache keeps LFU order."""
    world = _frequent_prefix(factory)
    world.evict(4)
    world.check()
    assert world.cache.match_prefix([1]).device_values.tolist() != []  # [1] (three hits) stayed


class DeclaresLfuEvictsLru(TieredRadixCache):
    """Declares LFU, evicts by recency."""

    tier_capabilities = TierCapabilities(page_sizes=(1,), eviction_policy=lfu())


class IgnoresPriority(TieredRadixCache):
    """Declares the priority policy (so it is sent ``priority=``), evicts by recency."""

    tier_capabilities = TierCapabilities(page_sizes=(1,), eviction_policy=priority())


def test_a_declared_policy_is_judged_by_its_key() -> None:
    world = _frequent_prefix(DeclaresLfuEvictsLru)
    with pytest.raises(EvictionOrderViolation, match=r"freed Page\(\[1\].*3 hits.*while the unlocked device leaf "
                                                     r"Page\(\[2\].*1 hits"):
        world.evict(4)


@pytest.mark.parametrize("factory, fails", [(IgnoresPriority, True), (TieredPriority, False)], ids=["ignores", "keeps"])
def test_request_priorities_reach_the_cache_and_order_eviction(factory: Any, fails: bool) -> None:
    world = TierWorld(factory, 1, "write_through")
    world.next_priority(3)
    world.serve([1])
    world.finish()
    world.next_priority(0)
    world.serve([2])
    world.finish()
    world.complete_all()
    if fails:
        with pytest.raises(EvictionOrderViolation, match=r"freed Page\(\[1\].*priority 3.*Page\(\[2\].*priority 0"):
            world.evict(1)
    else:
        world.evict(1)
        world.check()


def test_priority_is_sent_only_to_a_policy_that_takes_one() -> None:
    class NoPriorityKeyword(TieredLfu):
        def match_prefix(self, tokens: Any, namespace: Any = None) -> Any:
            return super().match_prefix(tokens, namespace)

        def insert(self, tokens: Any, values: Any, namespace: Any = None) -> int:
            return super().insert(tokens, values, namespace)

    world = TierWorld(NoPriorityKeyword, 1, "write_through")
    world.next_priority(2)
    world.serve([1])
    world.finish()
    world.check()


def test_a_policy_over_node_boundaries_is_refused_at_load_with_the_reason() -> None:
    with pytest.raises(ValueError, match="reads LeafStats.start or history"):
        TierCapabilities(eviction_policy=tlru(threshold=4))
    with pytest.raises(ValueError, match="must be a radixcheck Policy"):
        TierCapabilities(eviction_policy="lfu")
    assert TierCapabilities(eviction_policy=lfu()).policy is not None


def test_a_tier_message_shortens_a_long_namespace_and_the_repro_line_keeps_it_whole() -> None:
    """The suite's 250-character tenant keys are said by their ends and length in a message (the
    layers trial's FAIL line named one twice, 600 characters of 'x'), whole in a repro line."""
    from radixcheck.oracles.violations import TenantIsolationViolation
    from radixcheck.properties.cache.tenants import LONG_KEY
    from radixcheck.properties.tiers.mutants import HostLookupIgnoresNamespace
    from radixcheck.properties.tiers.world import TierWorld

    first, second = LONG_KEY + "-1", LONG_KEY + "-2"
    w = TierWorld(HostLookupIgnoresNamespace, page_size=1, write_policy="write_through")
    w.serve([1, 2], namespace=first)
    w.finish()
    w.complete_all()
    w.evict(100)
    w.complete_all()
    with pytest.raises(TenantIsolationViolation) as caught:
        w.serve([1, 2, 0], namespace=second)
    message = str(caught.value)
    assert LONG_KEY not in message and len(message) < 300
    assert "xx-1' (251 characters)" in message and "xx-2' (251 characters)" in message  # the pair told apart
    assert f"namespace={second!r})" in w.log[-1]  # the repro line: whole


def _quarantine_beside_a_twin(factory: Any) -> None:
    """Tenants 'a' and 'b' cache [1, 2] (and 'a' [3] too), all on host only; 'a' quarantines [1, 2]."""
    from radixcheck.properties.tiers.world import TierWorld

    w = TierWorld(factory, page_size=1, write_policy="write_through")
    for namespace, tokens in (("a", [1, 2]), ("b", [1, 2]), ("a", [3])):
        w.serve(tokens, namespace=namespace)
        w.finish()
        w.complete_all()
    w.evict(100)
    w.complete_all()
    w.quarantine([1, 2], namespace="a")
    w.check()


def test_a_quarantine_that_frees_pages_off_its_branch_fails_and_the_reference_passes() -> None:
    """A free inside ``evict_prefix`` of a page not at or below its cut is judged: another tenant's is
    oracle 10, one's own the never-saw oracle. Before, the tier model took it as a nested host
    eviction, so the layers trial's ``quarantine_purges_host_twins`` (a quarantine that purges the
    host copies of its tokens in every namespace) conformed."""
    from radixcheck.oracles.violations import NeverSawViolation, TenantIsolationViolation
    from radixcheck.reference.tiered_cache import TieredRadixCache

    class QuarantineTrimsTheHostTier(TieredRadixCache):
        def evict_prefix(self, tokens: Any, namespace: Any = None) -> int:
            removed = super().evict_prefix(tokens, namespace=namespace)
            self.evict_host(10**6)  # every host-only leaf, whoever's
            return int(removed)

    _quarantine_beside_a_twin(TieredRadixCache)
    with pytest.raises((TenantIsolationViolation, NeverSawViolation)) as caught:
        _quarantine_beside_a_twin(QuarantineTrimsTheHostTier)
    assert "evict_prefix under namespace 'a' freed the host copy of Page(" in str(caught.value)
