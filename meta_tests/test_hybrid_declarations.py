"""The two second-pool declarations SGLang's hybrid trees need (issue 32, part 6), each shown to be
what lets a correct cache of that design pass, and the oracle it relaxes still to catch the cache
that does not declare it:

* ``SlidingWindow(pins_whole_nodes=True)``: a lock pins the window values of whole nodes (SGLang's
  ``SWAComponent.acquire_component_lock``), more than the pages of the last W tokens; the stop of
  ``evict_window`` while contract-unpinned values are left is then not judged.
* ``StatePool(stateless_inserts=False)``: the cache caches KV only with the state after it (SGLang's
  ``MambaComponent`` asserts one); the machine then never inserts with ``state=-1``."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import EvictionAmountViolation
from radixcheck.properties.cache.contract import SlidingWindow, StatePool
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference.hybrid_cache import NONE, WINDOW, WindowRadixCache
from radixcheck.reference.state_cache import StateRadixCache
from radixcheck.reference.validation import as_count

SEARCH = settings(profiles.SETTINGS["mutation"], max_examples=40)  # finds the undeclared failure early
PASSING = settings(SEARCH, max_examples=12)  # a declared run goes the whole way: kept short for the gate


class WholeNodePins(WindowRadixCache):
    """A lock pins every window value of each node it pins a token of (as SGLang's SWA lock does)."""

    def evict_window(self, num_tokens: int) -> int:
        wanted, freed = as_count(num_tokens, "num_tokens", minimum=0), 0
        for node in sorted(self.window, key=lambda n: (n.last_access, n.serial)):
            if freed >= wanted:
                break
            window = self.window[node]
            if node.state != "linked" or self._pins_of(node).any():
                continue  # a pinned token pins its whole node
            doomed = window != NONE
            if doomed.any():
                self.second_allocator.free(window[doomed])
                window[doomed] = NONE
                freed += int(doomed.sum())
        return freed


class StateRequired(StateRadixCache):
    """Caches KV only with its state: an insert without one is refused (as SGLang's Mamba tree)."""

    def insert(self, tokens, values, *args, state: int = -1, **kwargs) -> int:
        if state == -1:
            raise ValueError("this cache caches KV only with the state after it")
        return super().insert(tokens, values, *args, state=state, **kwargs)


def _declaring(cls: type, **pool: bool):
    caps = dataclasses.replace(cls.capabilities, page_sizes=(1,), lifecycle="off",
                               second_pool=dataclasses.replace(cls.capabilities.second_pool, **pool))
    return caps


def test_the_declarations_are_validated() -> None:
    with pytest.raises(TypeError, match="pins_whole_nodes"):
        SlidingWindow(WINDOW, pins_whole_nodes=1)
    with pytest.raises(TypeError, match="stateless_inserts"):
        StatePool(stateless_inserts=None)


@pytest.mark.deep  # two hybrid machines run to a verdict
def test_whole_node_pins_pass_declared_and_fail_the_amount_undeclared() -> None:
    run_machine(machine_for(WholeNodePins, _declaring(WholeNodePins, pins_whole_nodes=True), 1, "meta_whole_nodes_declared"),
                PASSING)
    with pytest.raises(EvictionAmountViolation, match="stopped while"):
        run_machine(machine_for(WholeNodePins, _declaring(WholeNodePins), 1, "meta_whole_nodes"), SEARCH)


@pytest.mark.deep  # two hybrid machines run to a verdict
def test_a_cache_that_needs_its_state_passes_declared_and_is_sent_none_undeclared() -> None:
    run_machine(machine_for(StateRequired, _declaring(StateRequired, stateless_inserts=False), 1, "meta_state_required_declared"),
                PASSING)
    with pytest.raises(ValueError, match="only with the state"):
        run_machine(machine_for(StateRequired, _declaring(StateRequired), 1, "meta_state_required"), SEARCH)




@pytest.mark.parametrize("second_pool", [SlidingWindow(4), StatePool()], ids=["window", "state"])
def test_the_card_does_not_list_second_pool_repro_files_as_not_exercised(second_pool) -> None:
    """Every second-pool finding gets a standalone repro file (findings/second_pool_repro.py): the report card's
    'not exercised' list must not say otherwise."""
    from radixcheck.properties.cache.contract import Capabilities

    gaps = Capabilities(second_pool=second_pool).not_exercised()
    assert not [gap for gap in gaps if "repro" in gap], gaps
