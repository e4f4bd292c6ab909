"""Composed mutants of the tiered cache with a sliding window (a window pool + the host tier: each
bug needs both to show), and the correct window tiered caches the tier machine must pass.

Each is a one-idea change to :class:`~radixcheck.reference.tiered_window_cache.TieredWindowCache`;
``radixcheck.properties.tiers.mutants`` lists them with the other tier mutants, so the tier
catalogue measures them. Without a host tier (window values that never leave the device) each is
correct; without a window pool there is nothing for it to get wrong.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from radixcheck.oracles import violations as v
from radixcheck.properties.cache.contract import SlidingWindow
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.trusting import TrustsItsCallers
from radixcheck.reference.hybrid_cache import NONE
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


class LoadBackRestoresBeyondWindowFromWrongPage(WindowTierMutant):
    """Composed (window + host tier): a load-back restores window values on every page it loads,
    as SGLang does (a host segment longer than the window restored whole: correct under the
    relaxed rule, the host copy's own values), but a loaded page further back than the window
    takes the host copy of the last page of the path (the window's), not its own: an offset into
    the loaded segment not advanced per page. Window values of other tokens come back live where
    its own host copy had its own, or none."""

    bug_class = "load-back-restores-another-pages-window"
    sources = ()  # SGLang's SWAComponent.commit_hicache_transfer (LOAD_BACK) slices each node's SWA chunk at a running offset

    def load_back(self, host_handle: Any) -> tuple[Any, TierNode]:
        off_device = {n for n in self._path(host_handle) if n.device is None}
        values, last = super().load_back(host_handle)
        length = len(values)
        start = length - min(self.window_size, length)
        donor = self.host_window.get(last)
        for node in self._path(last) if last.parent is not None else []:
            if node in off_device and node.depth <= start and donor is not None:
                self.device_window[node] = donor.copy()
        return values, last


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


class FailedLoadResumesAtDeadWindow(WindowTierMutant):
    """Composed (window + host tier + a failed load): a load-back whose load moved nothing returns
    the whole device path, as after a load that succeeded, though the window of its last tokens is
    tombstoned on device and no host copy revives it: the request resumes where its window is dead
    (the contract wants the match's device end, as SGLang's ``init_load_back`` keeps the match's
    device node when ``load_back`` fails). The reference did this until a new user's trial found
    that no oracle judged it (``reports/findings/window_trial.md``)."""

    bug_class = "failed-load-resumes-at-a-dead-window"
    sources = ()  # SGLang's UnifiedRadixCache.init_load_back returns (0, req.last_node) when load_back fails
    # 21 where the returned end's window is dead; 20w where the model, taking the whole path as a
    # load-back's, expects the window at its end revived from host copies the cache did not revive
    caught_by = (v.TombstoneViolation, v.TierWindowViolation)
    # caught in its first stream: the window rules' failed_load_at_a_dead_window lines a failed load up
    # with a dead device end (before that rule, 129 of 200 streams, and not the first: streams_to_catch was 5)

    def _resume_after_failed_load(self, last: TierNode) -> tuple[np.ndarray, TierNode] | None:
        return None


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


class RestoresWholeHostSegment(TieredWindowCache):
    """Correct under the relaxed rule: a load-back restores the host copy's window values on every
    page it loads, not only on the pages of the window at the path's end, as SGLang 0.5.23 does
    (the TODO in ``SWAComponent.finalize_match_result_in_tree_core``: a host segment longer than
    the window is restored whole). Each value is its own token's, from its own host copy: it
    spends window memory no request resuming there reads, but shows no value from nowhere."""

    def _restore(self, node: TierNode, in_window: bool) -> None:
        super()._restore(node, True)


class BacksUpWindowOnInsert(TieredWindowCache):
    """Correct under the relaxed rule: an insert onto nodes that already have a host copy backs
    their live window values up into that copy, alone (no KV moves), as SGLang 0.5.23 does
    (``UnifiedTreeCore._should_backup_after_insert`` -> ``SWAComponent._collect_unbacked_swa_nodes_in_window``).
    Each value is its own token's: a later host match may count that copy."""

    def insert(self, tokens: Sequence[int], values: np.ndarray, namespace: Hashable = None, priority: int = 0,
               window: Any = None) -> int:
        prefix_len = super().insert(tokens, values, namespace, priority, window=window)
        for node in self._walk(tuple(int(t) for t in tokens), namespace):
            host = self.host_window.get(node)
            if node.host is not None and host is not None and node in self.device_window:
                self.host_window[node] = np.where(host == NONE, self.device_window[node], host)
        return prefix_len


class ReleasesHostDuplicates(TieredWindowCache):
    """Correct under the "may be kept" rule: under write-back, a backup that finds the host full
    first frees the KV host copies of nodes also on device (host duplicates), and keeps their
    window host copies, as SGLang 0.5.23 does (``UnifiedTreeCore.drive_host_eviction`` ->
    ``_reclaim_full_host_duplicates`` -> ``_release_full_host_duplicate``: "Free only the Full host
    layer; aux host slices stay under their own pools' LRU"). A match counts a kept copy and a
    load-back revives from it, with the token's own values. Any duplicate but those
    the path being backed up hangs from is released; a released node whose write-back then fails
    leaves the cache with the host-only pages below it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kept_window: dict[TierNode, np.ndarray] = {}  # node on device -> its window host copy, KV host copy freed

    def _write(self, node: TierNode) -> bool:
        if self.write_policy != "write_back":
            return super()._write(node)
        transfer = self.controller.write(self._write_source(node))
        if transfer is None:  # the host is full: free duplicates first, then host-only leaves
            self._release_host_duplicates(len(node.key), set(self._path(node)))
            transfer = self.controller.write(self._write_source(node))
        if transfer is None:
            return super()._write(node)
        node.writing = transfer
        self._pending[transfer.number] = [node]
        return True

    def _release_host_duplicates(self, wanted: int, spared: set[TierNode]) -> None:
        """Free KV host copies of nodes on device until ``wanted`` tokens; ``spared``: the path being
        backed up (its parents' host copies are what its backup hangs from)."""
        freed = 0
        nodes = list(self._nodes())  # naive: a scan of the tree, only when the host is full
        # as SGLang's two passes: inner nodes first (a device leaf's eviction would free its copy anyway)
        for dup in sorted(nodes, key=self._device_leaf):
            if freed >= wanted:
                return
            if dup in spared or dup.device is None or dup.host is None or dup.writing is not None or dup.loading is not None \
                    or dup.pin:
                continue
            self.host_pool.free(dup.host)
            freed += len(dup.host)
            dup.host = None
            self.kept_window[dup] = self._kept(self.host_window.pop(dup))

    def _kept(self, host: np.ndarray) -> np.ndarray:
        """The window host copy that stays when its KV host copy goes: as it was."""
        return host

    def _after_failed_write_back(self, node: TierNode) -> int:
        """A released duplicate may have host-only pages below: if its write-back cannot be
        allocated, it leaves the cache with them (the tiered cache's own nodes have none)."""
        stack = list(node.children.values())
        while stack:
            victim = stack.pop()
            stack.extend(victim.children.values())
            victim.linked = False
            self._release_removed(victim)
        return super()._after_failed_write_back(node)

    def _host_values(self, node: TierNode) -> np.ndarray | None:
        kept = self.kept_window.get(node) if node.device is not None else None
        return kept if kept is not None else super()._host_values(node)

    def _copy_to_host(self, node: TierNode) -> None:
        kept = self.kept_window.pop(node, None)
        super()._copy_to_host(node)
        if kept is not None:  # a new write keeps the kept values where the device window is tombstoned (SGLang's)
            self.host_window[node] = np.where(self.host_window[node] == NONE, kept, self.host_window[node])

    def _free_device(self, node: TierNode) -> int:
        self.kept_window.pop(node, None)
        return super()._free_device(node)

    def _forget(self, node: TierNode) -> None:
        self.kept_window.pop(node, None)
        super()._forget(node)


class KeepsStaleWindowOfReleasedDuplicate(ReleasesHostDuplicates, WindowTierMutant):
    """Composed (window + host tier + write-back's duplicate release): the window host copy kept
    when a host duplicate's KV host copy is freed is not the token's own: its slice is read one
    value off (each live value plus one), as an aux host slice left pointing at the wrong place
    would be. A load-back that revives from it gives a value no token has."""

    bug_class = "kept-window-host-copy-with-wrong-values"
    sources = ()  # SGLang's _release_full_host_duplicate keeps the SWA host slice; the contract's "may be kept"
    policies = ("write_back",)
    # it shows only when a load-back revives from a kept copy: a page whose window is tombstoned on
    # device and live on host, released by a write-back into a full host, then in a load-back's window.
    # Random rules drew that in 12 of 20 streams; the tier machine's duplicate_through_a_full_host
    # story draws it in one step (caught in stream 0)

    def _kept(self, host: np.ndarray) -> np.ndarray:
        return np.where(host == NONE, NONE, host + 1)


WINDOW_TIER_MUTANTS: list[type[WindowTierMutant]] = [LoadBackRestoresBeyondWindowFromWrongPage, LoadBackRestoresNoWindow,
                                                     WriteBackDropsWindow, LoadBackSkipsDeviceWindow,
                                                     HostMatchIgnoresWindow, FailedLoadResumesAtDeadWindow,
                                                     KeepsStaleWindowOfReleasedDuplicate]
CORRECT_WINDOW_TIERS: dict[str, Any] = {"TieredWindowCache": TieredWindowCache, "TrustingWindowTiers": TrustingWindowTiers,
                                         "RestoresWholeHostSegment": RestoresWholeHostSegment,
                                         "ReleasesHostDuplicates": ReleasesHostDuplicates}
