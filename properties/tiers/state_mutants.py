"""Composed mutants of the tiered cache with a state pool (a state pool + the host tier: each bug
needs both to show), and the correct state-pool tiered caches the tier machine must pass.

Each is a one-idea change to :class:`~radixcheck.reference.tiered_state_cache.TieredStateCache`;
``radixcheck.properties.tiers.mutants`` lists them with the other tier mutants, so the tier
catalogue measures them. Without a host tier (a state that never leaves the device) each is
correct; without a state pool there is nothing for it to get wrong.
"""

from __future__ import annotations

from typing import Any

from radixcheck.oracles import violations as v
from radixcheck.properties.cache.contract import StatePool
from radixcheck.properties.tiers.contract import TierCapabilities, Transfer
from radixcheck.properties.tiers.trusting import TrustsItsCallers
from radixcheck.reference.tiered_cache import TierNode
from radixcheck.reference.tiered_state_cache import TieredStateCache

STATE_TIERS = TierCapabilities(page_sizes=(1, 2), second_pool=StatePool())  # the tier and a state pool


class StateTierMutant(TieredStateCache):
    """A one-idea mutant of the tiered cache with a state pool (the attributes the tier catalogue reads)."""

    tier_capabilities = STATE_TIERS
    bug_class = ""
    sources: tuple[str, ...] = ()
    policies: tuple[str, ...] = ("write_through", "write_back")
    caught_by: type[BaseException] = v.SecondValueViolation


class LoadBackRestoresParentState(StateTierMutant):
    """Composed (state pool + host tier): a load's completion restores each loaded node's state
    from its parent's host copy (an off-by-one in the host state index: the state *before* the
    page instead of after it). The loaded-back prompt resumes from another node's state."""

    bug_class = "load-back-restores-another-nodes-state"
    sources = ()  # issue 39: "window or state values on a node that is written to host and loaded back"

    def _restore(self, node: TierNode) -> None:
        parent = node.parent
        if parent is not None and parent in self.host_state:
            self.device_state[node] = self.host_state[parent]
        else:
            self.device_state.pop(node, None)


class WriteBackDropsState(StateTierMutant):
    """Composed (state pool + host tier): a write's completion copies the KV to host but not the
    state, so the host copy has none; a node loaded back from it has no state (a Mamba state that
    never reached the host pool)."""

    bug_class = "host-copy-without-state"
    sources = ()  # issue 39: "window or state values on a node that is written to host and loaded back"

    def transfer_done(self, transfer: Transfer) -> None:
        if transfer.kind != "write":
            super().transfer_done(transfer)
            return
        nodes = list(self._pending.get(transfer.number, ()))
        kept = {n: self.host_state.get(n) for n in nodes}
        super().transfer_done(transfer)
        for node, state in kept.items():  # undo the copy to host the write just made
            if state is None:
                self.host_state.pop(node, None)


class HostEvictionFreesDeviceState(StateTierMutant):
    """Composed (state pool + host tier): evicting a host-only page from host frees the state of
    the parent it leaves a leaf, as if that parent were host-only as well (it tests
    ``parent.host`` where it means ``parent.device is None``): a parent still on device loses its
    state."""

    bug_class = "host-eviction-frees-a-device-nodes-state"
    sources = ()  # issue 39: "window or state values on a node that is written to host and loaded back"

    def evict_host(self, num_tokens: int) -> int:
        host_only = [n for n in self._nodes() if n.device is None and n.host is not None]
        freed = super().evict_host(num_tokens)
        for node in host_only:
            parent = node.parent
            if (not node.linked and parent.parent is not None and parent.linked and parent.host is not None
                    and not parent.children):
                self.device_state.pop(parent, None)
        return freed


class TrustingStateTiers(TrustsItsCallers, TieredStateCache):
    """Correct, with namespaces, the request lifecycle and a state pool on both tiers, trusting its callers as SGLang's
    HiRadixCache does (:class:`~radixcheck.properties.tiers.trusting.TrustsItsCallers`: ``states``
    checks nothing of its handle either). Before every eviction it checks, besides its lock counts,
    that no state is kept for a node that left the cache."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, second_pool=StatePool(), lifecycle="tree")

    def _assert_own_trees(self) -> None:
        super()._assert_own_trees()
        for node in self.device_state:
            assert node.device is not None, f"{node} keeps a device state without its device copy"
        for node in self.host_state:
            assert node.host is not None or node.writing is not None, f"{node} keeps a host state without its host copy"


STATE_TIER_MUTANTS: list[type[StateTierMutant]] = [LoadBackRestoresParentState, WriteBackDropsState,
                                                   HostEvictionFreesDeviceState]
CORRECT_STATE_TIERS: dict[str, Any] = {"TieredStateCache": TieredStateCache, "TrustingStateTiers": TrustingStateTiers}
