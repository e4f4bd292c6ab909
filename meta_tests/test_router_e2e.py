"""The end-to-end check proves it can fail for the right reason and does not cry wolf: the
reference cache publishing its own events into the reference index passes; a publisher that
forgets its removes is caught as a finding in the engine's events (oracle 9), an index that
ignores removes as one in the index (oracle 7); the deduplicating filter does what Dynamo's does."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import EngineEventsViolation, IndexViolation, TenantIsolationViolation
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.index.publishing_reference import PublishingRadixCache, router_pair
from radixcheck.properties.index.router_e2e import DedupFilter, router_machine_for
from radixcheck.properties.target import check_target, load_target
from radixcheck.reference.kv_index import KvIndex

SEARCH = settings(profiles.SETTINGS["mutation"], max_examples=12)  # the test engine walks its tree after every call


def _run(pair, page_size: int, name: str) -> None:
    run_machine(router_machine_for(pair, pair.capabilities, page_size, name), SEARCH)


def test_the_reference_pair_follows_its_engine() -> None:
    _run(router_pair(), 4, "meta_reference_pair")


class ForgetsRemoves(PublishingRadixCache):
    """Publishes its stores, not its evictions: a router keeps routing to what it evicted."""

    def _emit(self, event) -> None:  # noqa: ANN001
        if not isinstance(event, BlockRemoved):
            super()._emit(event)


class IgnoresRemoves(KvIndex):
    """Takes every BlockRemoved and changes nothing."""

    def _remove(self, rank, event) -> None:  # noqa: ANN001
        pass


def test_a_publisher_that_forgets_its_removes_is_a_finding_in_the_engine_events() -> None:
    with pytest.raises(EngineEventsViolation, match="the engine's events are wrong"):
        _run(router_pair(engine=ForgetsRemoves), 1, "meta_forgets_removes")


def test_an_index_that_ignores_removes_is_a_finding_in_the_index() -> None:
    """One tenant (the engine's namespaces left undeclared): nothing else can explain the stale count."""
    pair = router_pair(index=IgnoresRemoves)
    one_tenant = dataclasses.replace(pair.capabilities, engine=dataclasses.replace(pair.capabilities.engine, namespaces=False))
    with pytest.raises(IndexViolation, match="the index does not follow its events"):
        run_machine(router_machine_for(pair, one_tenant, 1, "meta_ignores_removes"), SEARCH)


def test_with_tenants_an_index_that_ignores_removes_is_still_a_finding_in_the_router() -> None:
    # With namespaces, a stale count can also be read as another tenant's: when a namespace that holds as much of the
    # same tokens exists, the isolation check (which runs first) names it. Telling a stale block from another tenant's
    # needs each namespace's history in the model (left open). Either way the finding is the router's, never the
    # engine's events'.
    with pytest.raises((IndexViolation, TenantIsolationViolation), match="the index does not follow its events|the router's index count"):
        _run(router_pair(index=IgnoresRemoves), 1, "meta_ignores_removes")


def test_a_pair_is_loaded_and_checked() -> None:
    target = load_target("radixcheck.properties.index.publishing_reference:reference_pair")
    assert target.kind == "router" and target.capabilities.page_sizes_tested() == (1, 4, 16)
    check_target(target)


def test_a_pair_does_not_claim_the_crowd_it_never_runs() -> None:
    """The end-to-end test drives the engine with the small machine only: its lock counters are not
    exercised at all there, so the pair says so instead of repeating the engine's '10 bits' line."""
    target = load_target("radixcheck.properties.index.publishing_reference:reference_pair")
    gaps = target.capabilities.not_exercised()
    assert not any("wider than" in gap for gap in gaps), gaps
    assert "engine: lock counters (the end-to-end test runs the small machine only: no production-scale crowd)" in gaps


def test_the_dedup_filter_passes_a_remove_with_the_last_copy() -> None:
    dedup = DedupFilter()
    store = BlockStored(None, (StoredBlock(10, 1),))
    assert dedup(store) is store and dedup(store) is store  # stores always pass
    assert dedup(BlockRemoved((10,))) is None  # a copy remains
    assert dedup(BlockRemoved((10,))) == BlockRemoved((10,))  # the last one
    dedup(store)
    assert isinstance(dedup(AllBlocksCleared()), AllBlocksCleared) and not dedup.stores


ignores_removes_pair = router_pair(index=IgnoresRemoves)


@pytest.mark.deep  # its repro file is run as a user runs it: a fresh interpreter
def test_an_end_to_end_finding_has_a_repro_file_that_shows_the_finding(monkeypatch) -> None:
    """No plain-call writer for this machine: the file is radixcheck's test as it is, run on the
    target as the audit loads it (it once failed with a NameError, and that exit 1 counted). Its
    run once fixed is a whole passing search (~10 s): checked by hand, not in the gate."""
    from radixcheck.properties.conformance.test_router import test_router_follows_engine
    from radixcheck.properties.findings.repro import repro_for

    monkeypatch.setattr(profiles, "_selected", "mutation")  # the file's own search: find, no shrinking
    with pytest.raises(IndexViolation) as caught:
        _run(ignores_removes_pair, 1, "meta_ignores_removes_repro")
    spec = "meta_tests.test_router_e2e:ignores_removes_pair"
    repro = repro_for(caught.value, spec, plain_test=(test_router_follows_engine, {"page_size": 1}, ignores_removes_pair.capabilities))
    assert repro.exit_code == 1 and "BUG (radixcheck oracle 7 index model)" in repro.output and not repro.notes, repro.output
    assert "load_target('meta_tests.test_router_e2e:ignores_removes_pair')" in repro.text


class DropsNamespaces(PublishingRadixCache):
    """Publishes every block's tokens hash without its namespace (a publisher that never learns the
    request's LoRA or salt), and its router hashes requests the same way: one tenant's blocks then
    answer another tenant's query."""

    def _tokens_hash(self, namespace, page):  # noqa: ANN001, ANN202
        return super()._tokens_hash(None, page)


def _blind_pair():
    from radixcheck.properties.index.publishing_reference import page_tokens_hashes

    pair = router_pair(engine=DropsNamespaces)

    def factory():  # noqa: ANN202
        return dataclasses.replace(pair(), tokens_hashes=lambda tokens, page_size, namespace=None: page_tokens_hashes(tokens, page_size))

    # deduplicated, as Dynamo's worker-side filter delivers it: two tenants' stores of one hash are two copies,
    # so one tenant's eviction does not hide the other's block; what remains is the over-count
    factory.capabilities = dataclasses.replace(pair.capabilities, deduplicated=True)
    return factory


def test_a_router_that_drops_the_namespace_counts_another_tenants_blocks() -> None:
    """The reference pair carries each namespace into its tokens hashes and passes (the first test
    here, with the tenants' rules); dropping it on both sides is a tenant-isolation finding on the
    router's view, naming the namespace whose blocks were counted."""
    assert router_pair().capabilities.engine.namespaces
    with pytest.raises(TenantIsolationViolation, match="they are the blocks namespace"):
        _run(_blind_pair(), 1, "meta_drops_namespaces")
