"""The request lifecycle (contract: "The request lifecycle"): the reference passes it driven either
way, a tree without request methods is never sent one, and what the suite hands a cache is checked.
The lifecycle mutants are in ``test_mutants.py`` with the others; their kill rates in BUG_CATALOGUE.md."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.properties.cache.contract import Capabilities, Request, required_methods
from radixcheck.properties.cache.lifecycle import LifecycleMachine
from radixcheck.properties.cache.machine import RadixCacheMachine, machine_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache

SEARCH = settings(profiles.SETTINGS["mutation"], max_examples=15)


def test_the_reference_passes_with_the_suite_playing_the_engine() -> None:
    """lifecycle='tree': the machine's own engine steps, on the reference (which checks its callers),
    free exactly what the model expects (the request-method side is the reference's own run)."""
    run_machine(machine_for(RadixCache, Capabilities(lifecycle="tree", page_sizes=(4,)), 4, "lifecycle_tree_reference"), SEARCH)


def test_machine_for_picks_the_lifecycle_rules_only_when_declared() -> None:
    assert not issubclass(machine_for(RadixCache, Capabilities(), 1, "plain"), LifecycleMachine)
    assert issubclass(machine_for(RadixCache, Capabilities(lifecycle="tree"), 1, "tree"), LifecycleMachine)
    both = machine_for(RadixCache, RadixCache.capabilities, 1, "both")
    assert issubclass(both, LifecycleMachine) and issubclass(both, RadixCacheMachine)
    assert "tenants_share_prompt" in dir(both) and "racing_prefill" in dir(both)


def test_request_methods_are_required_only_of_requests_targets() -> None:
    assert "cache_unfinished_req" not in required_methods(Capabilities(lifecycle="tree"))
    assert "cache_finished_req" in required_methods(Capabilities(lifecycle="requests"))
    with pytest.raises(ValueError, match="lifecycle must be one of"):
        Capabilities(lifecycle="chunked")


def test_a_compute_past_the_known_tokens_is_refused_and_changes_nothing() -> None:
    request = Request([1, 2, 3])
    request.compute(np.array([7, 8], dtype=np.int64))
    before = (request.tokens, request.slots.tolist(), request.filled)
    with pytest.raises(ValueError, match="2 slots after 2 filled, for 3 tokens"):
        request.compute([9, 10])
    assert (request.tokens, request.slots.tolist(), request.filled) == before
    request.compute([9, 10], more_tokens=[4])  # decode: the generated token comes with its slot
    assert request.tokens == (1, 2, 3, 4) and request.slots.tolist() == [7, 8, 9, 10] and request.filled == 4
