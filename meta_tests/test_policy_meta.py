"""The eviction-order oracle (any declared Policy) fails a broken cache for the right reason, and
no correct one: its comparison by hand, the general judge agreeing with the LRU oracle, ties,
the capability that keeps ``priority=`` from a target that does not take one, names that stay
"not exercised", and a new user's LFU-with-recency cache whose counter is not bumped on re-insert
(with its repro file)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from meta_tests import user_lfu_recency
from radixcheck import Capabilities, Policy, profiles
from radixcheck.oracles.lru import check_lru
from radixcheck.oracles.policy import check_order
from radixcheck.oracles.prefix_set import Entry, PrefixSetModel
from radixcheck.oracles.violations import EvictionOrderViolation, LRUOrderViolation
from radixcheck.properties.cache import policies
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import LfuReference, MostRecentFirst, PriorityReference
from radixcheck.properties.findings.repro import repro_for, run_repro
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache

FEW = 4  # examples: each test shows one thing; the catalogue's 200 streams are the evidence


def _leaf(tokens: tuple[int, ...], key: int, namespace: Any = None) -> Any:
    return SimpleNamespace(prefix=tokens, values=tokens, key=key, namespace=namespace)


def test_the_comparison_itself() -> None:
    """A victim hotter than a survivor fails, naming both with their statistics; a victim no
    hotter passes; a tie passes (any order within a tie); a colder leaf freed later is 'out of order'."""
    hot, cold = _leaf((1, 2), 7), _leaf((3, 4), 5)
    key, said = (lambda e: e.key), (lambda e: f"key-of {e.prefix}")
    with pytest.raises(EvictionOrderViolation, match=r"evicted leaf \[1, 2\] \(key-of \(1, 2\), key 7\) while leaf \[3, 4\]"):
        check_order([hot], cold, False, 2, key, said, "mine")
    with pytest.raises(EvictionOrderViolation, match="out of mine order"):
        check_order([hot], cold, True, 2, key, said, "mine")
    check_order([cold], hot, False, 2, key, said, "mine")
    check_order([hot], _leaf((5,), 7), False, 2, key, said, "mine")
    check_order([hot], None, False, 2, key, said, "mine")
    # the same tokens cached by two tenants are two leaves: the finding names their namespaces
    with pytest.raises(EvictionOrderViolation, match=r"leaf \[1, 2\] under namespace 'a' .* while leaf \[1, 2\] under namespace 'b'"):
        check_order([_leaf((1, 2), 7, "a")], _leaf((1, 2), 5, "b"), False, 2, key, said, "mine")


def test_the_lru_oracle_names_two_tenants_pages_of_the_same_tokens() -> None:
    newer = Entry((1, 2), (10, 11), None, 1, last_use=9, namespace="a")
    older = Entry((1, 2), (20, 21), None, 1, last_use=3, namespace="b")
    with pytest.raises(LRUOrderViolation, match=r"page \[1, 2\] under namespace 'a' .* before page \[1, 2\] under namespace 'b'"):
        check_lru([(0, newer), (1, older)], None, 2, 2)


def test_the_model_counts_what_the_contract_says() -> None:
    """Hits: each insert that covers a page, each match only with hits_on_match; a split needs no
    copy in a page model. Priority: the highest of the inserts. History: never falls. Start: where
    the cache's node begins (a match ending mid-edge splits it)."""
    model = PrefixSetModel(1, hits_on_match=False)
    model.insert((1, 2, 3, 4), [10, 11, 12, 13], priority=2)
    model.insert((1, 2), [20, 21], priority=0)
    model.match((1, 2, 3, 4))
    leaf = model.longest_cached((1, 2, 3, 4))[-1]
    stats = model.leaf_stats(leaf)
    assert (stats.hits, stats.priority, stats.depth, stats.start, stats.history) == (1, 2, 4, 2, 4)  # the insert of [1, 2] split it
    assert model.leaf_stats(model.longest_cached((1, 2))[-1]).hits == 2
    model.remove_freed([12, 13])
    upper = model.longest_cached((1, 2))[-1]
    assert model.leaf_stats(upper).history == 4 and model.leaf_stats(upper).created == 1  # as old as before, history kept


def test_the_general_judge_agrees_with_the_lru_oracle() -> None:
    """The LRU mutant the LRU oracle catches, declared with ``policies.lru()``, is caught by the
    eviction-order oracle; with a key that ties everything, no order is wrong and it passes."""
    search = settings(profiles.SETTINGS["mutation"], max_examples=50)
    with pytest.raises(EvictionOrderViolation):
        run_machine(machine_for(MostRecentFirst, Capabilities(eviction_policy=policies.lru()), 1, "meta_policy_lru"), search)
    everything_ties = Policy(key=lambda s: 0, name="any-order")
    run_machine(machine_for(MostRecentFirst, Capabilities(eviction_policy=everything_ties), 1, "meta_policy_tie"),
                settings(search, max_examples=FEW))


class NoPriorityKeyword(LfuReference):
    """Correct LFU whose methods take no ``priority=``: a policy without priorities never sends one."""

    def match_prefix(self, tokens: Any) -> tuple[np.ndarray, Any]:
        return super().match_prefix(tokens)

    def insert(self, tokens: Any, values: np.ndarray) -> int:
        return super().insert(tokens, values)


class PriorityCounted(PriorityReference):
    """Correct priority cache that counts the requests that carried a priority other than 0."""

    prioritized: dict[str, int] = {"match_prefix": 0, "insert": 0}

    def match_prefix(self, tokens: Any, priority: int = 0) -> tuple[np.ndarray, Any]:
        PriorityCounted.prioritized["match_prefix"] += priority != 0
        return super().match_prefix(tokens, priority=priority)

    def insert(self, tokens: Any, values: np.ndarray, priority: int = 0) -> int:
        PriorityCounted.prioritized["insert"] += priority != 0
        return super().insert(tokens, values, priority=priority)


def test_priority_is_sent_exactly_when_the_policy_takes_it() -> None:
    """A cache whose policy takes no priority is never sent the keyword (its methods have none); one
    whose policy takes it gets requests of several priorities, on both methods."""
    search = settings(profiles.SETTINGS["mutation"], max_examples=FEW)
    run_machine(machine_for(NoPriorityKeyword, NoPriorityKeyword.capabilities, 1, "meta_NoPriorityKeyword"), search)
    run_machine(machine_for(PriorityCounted, PriorityCounted.capabilities, 1, "meta_PriorityCounted"), search)
    assert min(PriorityCounted.prioritized.values()) > 0, PriorityCounted.prioritized


def test_a_name_is_not_exercised_and_says_so() -> None:
    """"lru" stays the LRU oracle's (backwards compatible); another name cannot be judged and the
    report says so; a Policy is judged, so the gap is gone."""
    assert not any("eviction order" in gap for gap in Capabilities().not_exercised())
    named = Capabilities(eviction_policy="lfu-with-decay").not_exercised()
    assert any(gap.startswith("eviction order (eviction_policy='lfu-with-decay' is a name") for gap in named), named
    assert not any("eviction order" in gap for gap in Capabilities(eviction_policy=policies.slru(3)).not_exercised())
    assert Capabilities(eviction_policy=policies.lfu()).policy.name == "lfu"
    with pytest.raises(ValueError, match="Policy or a non-empty str"):
        Capabilities(eviction_policy=3)
    with pytest.raises(TypeError, match="function of LeafStats"):
        Policy(key="hits")


@pytest.mark.deep  # its repro file is run as a user runs it: a fresh interpreter
def test_a_users_lfu_with_recency_cache_unbumped_on_reinsert_fails_with_a_repro() -> None:
    """The new user's cache: the right one passes; the one whose counter an insert does not bump
    fails by the eviction-order oracle, and its repro file exits 1 on it and 0 on the right one."""
    caps = user_lfu_recency.make.capabilities
    search = settings(profiles.SETTINGS["mutation"], max_examples=25)
    run_machine(machine_for(user_lfu_recency.make, caps, 1, "meta_user_lfu"), settings(search, max_examples=FEW))
    with pytest.raises(EvictionOrderViolation) as caught:
        run_machine(machine_for(user_lfu_recency.make_unbumped, caps, 1, "meta_user_lfu_unbumped"), search, transcript=True)
    repro = repro_for(caught.value, "meta_tests.user_lfu_recency:make_unbumped", seconds=float("inf"), replays=8)
    assert repro.exit_code == 1 and "BUG (radixcheck oracle 4 eviction order)" in repro.output, repro.output[-2000:]
    fixed = repro.text.replace("make_unbumped", "make")
    code, printed = run_repro(fixed)
    assert code == 0 and "no bug" in printed, printed[-2000:]


def test_the_reference_takes_a_policy() -> None:
    """``RadixCache.with_policy`` is the reference under that policy, declaring it."""
    fifo = RadixCache.with_policy(policies.fifo())
    assert fifo.capabilities.policy.name == "fifo" and issubclass(fifo, RadixCache)
