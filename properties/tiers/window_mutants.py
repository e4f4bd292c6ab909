"""Composed mutants of the tiered cache with a sliding window (a window pool + the host tier: each
bug needs both to show), and the correct window tiered caches the tier machine must pass.

Each is a one-idea change to :class:`~radixcheck.reference.tiered_window_cache.TieredWindowCache`;
``radixcheck.properties.tiers.mutants`` lists them with the other tier mutants, so the tier
catalogue measures them. Without a host tier (window values that never leave the device) each is
correct; without a window pool there is nothing for it to get wrong.
"""

from __future__ import annotations

from typing import Any

from radixcheck.oracles import violations as v
from radixcheck.properties.cache.contract import SlidingWindow
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.trusting import TrustsItsCallers
from radixcheck.reference.tiered_cache import TierNode
from radixcheck.reference.tiered_window_cache import WINDOW, TieredWindowCache

WINDOW_TIERS = TierCapabilities(page_sizes=(1, 2), second_pool=SlidingWindow(WINDOW))  # the tier and a window pool


class WindowTierMutant(TieredWindowCache):
    """A one-idea mutant of the tiered cache with a sliding window (the attributes the tier catalogue reads)."""

    tier_capabilities = WINDOW_TIERS
    bug_class = ""
    sources: tuple[str, ...] = ()
    policies: tuple[str, ...] = ("write_through", "write_back")
    caught_by: type[BaseException] = v.TierWindowViolation


class LoadBackRestoresWholePath(WindowTierMutant):
    """Composed (window + host tier): a load-back restores the host copy's window values on every
    page it loads, not only on the pages of the window at the path's end (SGLang's own TODO: a
    host segment longer than the window restored whole). Window KV further back than the window
    comes back live: the SWA pool holds what no request resuming there reads."""

    bug_class = "load-back-restores-window-beyond-the-path-end"
    sources = ()  # issue 39: "HiCache over SWA trees (sglang #33713)"; the TODO in SWAComponent.finalize_match_result_in_tree_core

    def _restore(self, node: TierNode, in_window: bool) -> None:
        super()._restore(node, True)


class LoadBackRestoresNoWindow(WindowTierMutant):
    """Composed (window + host tier): a load-back loads the full KV but none of the window KV (the
    SWA transfer of the load is never built), so a prompt loaded back has its window tombstoned
    where its host copy had it: a request resuming there reads no window."""

    bug_class = "load-back-without-window"
    sources = ()  # issue 39: "window or state values on a node that is written to host and loaded back"

    def _restore(self, node: TierNode, in_window: bool) -> None:
        super()._restore(node, False)


class WriteBackDropsWindow(WindowTierMutant):
    """Composed (window + host tier): a write's completion copies the full KV to host but not the
    window values (the SWA backup is skipped), so the host copy has none; a page loaded back from
    it at the path's end has its window tombstoned."""

    bug_class = "host-copy-without-window"
    sources = ()  # issue 39: "window or state values on a node that is written to host and loaded back"

    def _copy_to_host(self, node: TierNode) -> None:
        self.host_window[node] = self._none()


class LoadBackSkipsDeviceWindow(WindowTierMutant):
    """Composed (window + host tier): a load-back restores the window only on the pages it loads;
    a page of the window at the path's end whose full KV is on device but whose window values are
    tombstoned is skipped (the SWA load is built from the host-only pages alone), so the window a
    request resumes from has a hole where the host copy had it."""

    bug_class = "load-back-skips-the-windows-device-pages"
    sources = ()  # SGLang's SWAComponent.build_hicache_transfers (LOAD_BACK) loads every window node without SWA on device

    def _revive(self, node: TierNode) -> None:
        pass


class HostMatchIgnoresWindow(WindowTierMutant):
    """Composed (window + host tier), resumable matching: the device part stops where the window is
    not live on device, but the host part runs on over the full KV, as the tiered cache without a
    window does: to pages whose window is live on neither tier. A load-back of it returns a path
    whose end has no window KV to attend to (SGLang's combined ``create_match_validator`` stops
    the load-back target where neither ``value`` nor ``host_value`` is there)."""

    bug_class = "host-match-ignores-the-window"
    sources = ()  # the tier contract's resumable match; SGLang: SWAComponent.create_match_validator(match_device_only=False)
    caught_by = v.WindowMatchViolation

    def _resumable(self, path: list[TierNode], host_too: bool) -> int:
        return len(path) if host_too else super()._resumable(path, host_too)


class TrustingWindowTiers(TrustsItsCallers, TieredWindowCache):
    """Correct, with namespaces, the request lifecycle and a sliding window on both tiers, trusting
    its callers as SGLang's HiRadixCache does
    (:class:`~radixcheck.properties.tiers.trusting.TrustsItsCallers`: ``windows`` checks nothing
    of its handle either). Before every eviction it checks, besides its lock counts, that no window
    value is kept for a node without the copy it belongs to."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, second_pool=SlidingWindow(WINDOW),
                                         lifecycle="tree")

    def _assert_own_trees(self) -> None:
        super()._assert_own_trees()
        for node in self.device_window:
            assert node.device is not None, f"{node} keeps device window values without its device copy"
        for node in self.host_window:
            assert node.host is not None or node.writing is not None, f"{node} keeps host window values without its host copy"


WINDOW_TIER_MUTANTS: list[type[WindowTierMutant]] = [LoadBackRestoresWholePath, LoadBackRestoresNoWindow,
                                                     WriteBackDropsWindow, LoadBackSkipsDeviceWindow,
                                                     HostMatchIgnoresWindow]
CORRECT_WINDOW_TIERS: dict[str, Any] = {"TieredWindowCache": TieredWindowCache, "TrustingWindowTiers": TrustingWindowTiers}
