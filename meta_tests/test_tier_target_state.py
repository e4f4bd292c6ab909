"""A state pool whose load-back restores only its target's state (``TierCapabilities(state_load_back=
"target")``, SGLang's ``MambaComponent.prepare_load_back``): a cache that does exactly that
conforms, a match then resumes only where the state is on device; one that loses the target's state
too, or restores the whole path while declaring the target only, is caught; the default ("path")
is unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from radixcheck import profiles
from radixcheck.oracles.violations import TierResidencyViolation
from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.world import TierWorld
from radixcheck.reference.tiered_state_cache import TieredStateCache
from radixcheck.reference.tiered_target_state import TargetStateCache

TARGET = TierCapabilities(page_sizes=(1, 2), second_pool=StatePool(), state_load_back="target")


class LoadBackLosesTargetState(TargetStateCache):
    """Planted: a load-back parks every page it loads, its target's too (the state at the end of the
    loaded path never comes to device: a Mamba load-back that allocates no state slot at all)."""

    tier_capabilities = TARGET

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, Any]:
        loading = [node for node in self._path(host_handle) if node.device is None]
        values, last = TieredStateCache.load_back(self, host_handle)
        self.parked.update(node for node in loading if node.device is not None)
        return values, last


class RestoresThePathDeclaringTheTarget(TieredStateCache):
    """Declares the target-only load-back but restores every loaded page's state (and resumes there)."""

    tier_capabilities = TARGET


def _loaded_back(factory: Any, policy: str = "write_through", page_size: int = 1) -> TierWorld:
    """SGLang's shape (session 61's Mamba audit, shrunk): ``[0]*8`` and ``[0]*7`` cached, both to
    host only, ``[0]*8`` loaded back (its target) and matched, then, while it runs, ``[0]*7``
    served without a load-back; both finish."""
    world = TierWorld(factory, page_size, policy)
    for tokens in ([0] * 7 * page_size, [0] * 8 * page_size):
        world.serve(tokens)
        world.finish()
    for _ in range(4):
        world.evict(10**6)
        world.complete_all()
    world.serve([0] * 8 * page_size)  # loads the eight pages back: only the eighth's state comes to device
    world.match([0] * 8 * page_size)  # resumes at the target: all eight on device
    world.serve([0] * 7 * page_size, load=False)  # [0]*7's state is on host only: its device part ends at 0
    world.finish()
    world.finish()
    world.complete_all()
    return world


@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_a_cache_restoring_only_the_target_conforms(policy: str) -> None:
    world = _loaded_back(TargetStateCache, policy)
    world.check()
    assert world.states is not None and not world.states.parked  # the insert of [0]*7 brought its state back
    match = world.cache.match_prefix([0] * 7)
    assert len(match.device_values) == 7  # resumable again: the insert covered it


def test_the_device_part_ends_at_the_deepest_state_on_device() -> None:
    world = TierWorld(TargetStateCache, 1, "write_through")
    for tokens in ([0] * 3, [0] * 5):
        world.serve(tokens)
        world.finish()
    for _ in range(4):  # every write lands, every page goes to host only
        world.evict(10**6)
        world.complete_all()
    world.serve([0] * 5)  # loads all five pages back: only [0]*5's state comes to device (it runs on)
    world.match([0] * 4)  # judged: device 0, host 4 (the parked pages are the host part)
    match = world.cache.match_prefix([0] * 4)
    assert (len(match.device_values), match.host_length) == (0, 4)
    world.serve([0] * 3)  # its load-back moves no KV and ends at [0]*3: that state comes to device
    world.match([0] * 4)  # judged: device 3, host 1
    assert world.states is not None and world.model.pages_of([0] * 3)[-1] not in world.states.parked
    world.finish()
    world.finish()  # both fully cached: no insert is sent, so [0], [0]*2 and [0]*4 stay parked
    assert {len(page.prefix) for page in world.states.parked} == {1, 2, 4}
    world.check()


def test_a_cache_losing_the_targets_state_too_is_caught() -> None:
    with pytest.raises(TierResidencyViolation, match=r"match\(\[0, 0, 0, 0, 0, 0, 0, 0\]\) returned device slots \[\] \(0\)"):
        _loaded_back(LoadBackLosesTargetState)  # the match of the loaded [0]*8: 0 on device, 8 expected


def test_a_cache_restoring_the_whole_path_while_declaring_the_target_is_caught() -> None:
    with pytest.raises(TierResidencyViolation, match=r"returned device slots .* \(7\), but the pages on device hold \[\] \(0\)"):
        _loaded_back(RestoresThePathDeclaringTheTarget)


def test_the_declaration_is_checked_and_the_default_restores_the_path() -> None:
    assert TierCapabilities(second_pool=StatePool()).state_load_back == "path"
    with pytest.raises(ValueError, match="state_load_back must be one of 'path', 'target'"):
        TierCapabilities(second_pool=StatePool(), state_load_back="deepest")
    with pytest.raises(ValueError, match="needs second_pool=StatePool"):
        TierCapabilities(state_load_back="target")
    world = _loaded_back(TieredStateCache)  # the default: a state follows its page, every match to the full KV
    assert world.model.parking is None and world.states is not None and not world.states.parked


@pytest.mark.deep
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
@pytest.mark.parametrize("page_size", [1, 2])
def test_the_tier_machine_is_silent_on_the_target_only_reference(policy: str, page_size: int) -> None:
    run_machine(tier_machine_for(TargetStateCache, page_size, policy), profiles.SETTINGS["mutation"])


@pytest.mark.deep
def test_the_tier_machine_catches_a_load_back_that_loses_its_targets_state() -> None:
    with pytest.raises(TierResidencyViolation):
        run_machine(tier_machine_for(LoadBackLosesTargetState, 1, "write_through"), profiles.SETTINGS["mutation"])
