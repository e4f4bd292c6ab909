"""The words of a finding a user pastes into an issue, on small in-repo mutants rebuilding a new
user's planted bugs (``reports/findings/hicache_like_trial.md``, session 61): each message names
the cause the program shows, and its counts agree with what it names."""

from __future__ import annotations

import re

import pytest

from meta_tests.nu_trial import BackupSkipsFailed, KeyedByText, UnlockSkipsLoading
from radixcheck.oracles.violations import (
    BackupChainViolation,
    EvictionAmountViolation,
    LRUOrderViolation,
    TenantIsolationViolation,
)
from radixcheck.properties.findings.failures import shape_of
from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld
from radixcheck.properties.tiers.repro import reduced
from radixcheck.reference.tiered_cache import TieredRadixCache


def _complete_all(w: LifecycleTierWorld) -> None:
    w.complete(*[t.number for t in w.controller.pending])


def test_a_lock_left_behind_by_an_unlock_during_a_load_is_named() -> None:
    """B3's program (its repro file, 12 operations): the retracted request's unlock came while its
    load was in flight; the leaf it left locked stays at the next evict. The message said only "the
    unlocked device leaf … stayed" (an order bug); it now names the lock left behind, the unlock
    that came during the load, and the operation that took the lock."""
    w = LifecycleTierWorld(UnlockSkipsLoading, page_size=1, write_policy="write_through")
    w.serve([0, 0], load=True)
    w.finish(-1)
    _complete_all(w)
    w.evict(1000000)
    w.admit([0, 0], load=True)
    w.end(0, "retract")  # its load still in flight
    w.complete(max(t.number for t in w.controller.pending))
    w.serve([3, 0], load=True)
    w.finish(-1)
    _complete_all(w)
    with pytest.raises(LRUOrderViolation) as raised:
        w.evict(1000000)
    message = str(raised.value)
    assert "while the unlocked device leaf Page([0, 0], device+host)" in message  # what the oracle saw, as before
    assert shape_of(message) == shape_of(message.partition(". Likely cause")[0])  # a hint: the finding's shape as before
    assert ("Likely cause, a lock left behind: Page([0, 0], device+host) holds no lock in radixcheck's "
            "count, but its unlock by w.end(0, 'retract') (operation 7) came while its load was in flight (taken by "
            "w.admit([0, 0], load=True) (operation 6))") in message


def test_an_order_bug_without_an_unlock_in_transfer_names_no_lock() -> None:
    """The same program on a cache whose unlocks are right: no finding; and an unlock in transfer on
    a page the cache later frees leaves no note behind (a freed page held no lock)."""
    w = LifecycleTierWorld(TieredRadixCache, page_size=1, write_policy="write_through")
    w.serve([0, 0], load=True)
    w.finish(-1)
    _complete_all(w)
    w.evict(1000000)
    w.admit([0, 0], load=True)
    w.end(0, "retract")
    _complete_all(w)
    w.evict(1000000)
    assert all(not page.released_in_flight for page in w.model.pages_of((0, 0), None))


@pytest.mark.parametrize("page_size", [1, 2])
def test_a_tenant_leak_names_every_page_it_counted(page_size: int) -> None:
    """B1: "counted 2 tokens … the host copies of Page([0], host) under namespace None" named one
    page of two, its namespace outside the parentheses. Now every page counted is named (the count
    agrees), their namespace said once before them; one shape at both page sizes."""
    w = LifecycleTierWorld(KeyedByText, page_size=page_size, write_policy="write_through")
    w.serve([0, 0, 0, 0], load=True, namespace=None)
    w.finish(-1)
    _complete_all(w)
    w.evict(1000000)
    with pytest.raises(TenantIsolationViolation) as raised:
        w.serve([0, 0, 0, 0], load=True, namespace="None")
    message = str(raised.value)
    counted = int(re.search(r"counted (\d+) tokens", message).group(1))
    said = int(re.search(r"host copies of (\d+) pages? under namespace None: ", message).group(1))
    pages = re.findall(r"Page\((\[[\d, ]*\]), host\)", message.partition("under namespace None: ")[2])
    assert counted == 4 and said * page_size == counted
    assert len(pages) == min(said, 3)  # more than three: the first two, "…", the last
    assert ") under namespace" not in message  # no page with its tenant outside its parentheses
    assert shape_of(message) == ("match_prefix([…]) counted N tokens on host past the N its namespace has: those are "
                                 "the host copies of N pages: Page([…], host)")


def _failing(factory: type, program: list[str]) -> tuple[LifecycleTierWorld, BaseException]:
    w = LifecycleTierWorld(factory, page_size=1, write_policy="write_through")
    try:
        for line in program:
            exec(line, {"w": w, "done": _complete_all})  # noqa: S102 - the test's own program
        w.check()
    except Exception as exc:  # noqa: BLE001 - the finding the reduction starts from
        return w, exc
    raise AssertionError("the program did not fail")


def test_a_reduced_file_drops_a_namespace_the_finding_does_not_need() -> None:
    """B2's and B3's files kept ``namespace=('X', None)`` though neither bug needs a tenant: the
    reducer now tries each namespace left out (the default one) and keeps it only if the failure
    needs it. B3's program, its first request a tenant's."""
    program = ["w.serve([0, 0], load=True, namespace=('X', None))", "w.finish(-1)", "done(w)", "w.evict(1000000)",
               "w.admit([0, 0], load=True, namespace=('X', None))", "w.end(0, 'retract')",
               "w.complete(max(t.number for t in w.controller.pending))", "w.serve([3, 0], load=True)", "w.finish(-1)",
               "done(w)", "w.evict(1000000)"]
    world, failure = _failing(UnlockSkipsLoading, program)
    assert isinstance(failure, LRUOrderViolation) and "namespace ('X', None)" in str(failure)
    best, _ = reduced(UnlockSkipsLoading, world, failure, seconds=5.0)
    assert best is not None and isinstance(best.failure, LRUOrderViolation)
    assert not any("namespace" in line for line in best.operations), best.operations


def test_a_reduced_file_keeps_the_namespace_a_tenant_leak_needs() -> None:
    """B1 needs ``'None'`` beside the default namespace: it stays; the explicit ``namespace=None`` goes."""
    program = ["w.serve([0, 0], load=True, namespace=None)", "w.finish(-1)", "done(w)", "w.evict(1000000)",
               "w.serve([0, 0], load=True, namespace='None')"]
    world, failure = _failing(KeyedByText, program)
    best, _ = reduced(KeyedByText, world, failure, seconds=5.0)
    assert best is not None and isinstance(best.failure, TenantIsolationViolation)
    said = [line for line in best.operations if "namespace" in line]
    assert said == ["w.serve([0, 0], load=True, namespace='None')"], best.operations


def test_a_tenant_that_only_adds_pages_becomes_other_tokens() -> None:
    """B2's file (6 operations): two tenants' requests of the same tokens only fill the host pool, so
    the default namespace cannot take them (their pages would be shared), but no tenant is needed:
    each tenant's calls move to tokens past every other's, under the default namespace."""
    program = ["w.serve([0] * 10, load=True, namespace=(None, 'X'))", "w.finish(-1)",
               "w.serve([0] * 8, load=True, namespace=('X', None))", "w.finish(-1)", "w.serve([0] * 8, load=True)",
               "w.finish(-1)"]
    world, failure = _failing(BackupSkipsFailed, program)
    assert isinstance(failure, BackupChainViolation)
    best, _ = reduced(BackupSkipsFailed, world, failure, seconds=5.0)
    assert best is not None and isinstance(best.failure, BackupChainViolation)
    assert [line for line in best.operations if line.startswith("w.serve")] == [
        f"w.serve({[10] * 10}, load=True)", f"w.serve({[20] * 8}, load=True)", f"w.serve({[0] * 8}, load=True)"]


def test_an_evict_that_stops_short_at_a_lock_left_behind_names_it() -> None:
    """B3 with nothing else on device: the evict frees nothing, oracle 4t's amount finding ("stopped
    while the unlocked device leaf … stayed") names the lock left behind too."""
    w = LifecycleTierWorld(UnlockSkipsLoading, page_size=1, write_policy="write_through")
    w.serve([0, 0], load=True)
    w.finish(-1)
    _complete_all(w)
    w.evict(1000000)
    w.admit([0, 0], load=True)
    w.end(0, "retract")
    _complete_all(w)
    with pytest.raises(EvictionAmountViolation, match=r"stopped while the unlocked device leaf Page\(\[0, 0\].*Likely "
                       r"cause, a lock left behind: .* its unlock by w.end\(0, 'retract'\) \(operation \d+\) "
                       r"came while its load was in flight"):
        w.evict(1000000)
