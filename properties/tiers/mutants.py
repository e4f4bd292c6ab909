"""Catalogued one-idea mutants of the reference tiered cache, one per HiCache bug class, and the
correct variants the tier machine must pass (no false alarms).

Each mutant names the SGLang issue it re-creates (``sources``), the write policies where its bug
can happen (``policies``: the catalogue runs it there) and the oracle that must catch it
(``caught_by``); ``radixcheck.reports.tier_catalogue`` measures how often the gate's budget does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from radixcheck.oracles import violations as v
from radixcheck.properties.tiers.machine import TierMachine, tier_machine_for
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode


class TierMutant(TieredRadixCache):
    bug_class = ""
    sources: tuple[str, ...] = ()
    policies: tuple[str, ...] = ("write_through", "write_back")
    caught_by: type[BaseException] = v.ContractViolation


class EvictsToHostAfterFailedBackup(TierMutant):
    """Write-back eviction whose host allocation failed drops the device copy anyway and keeps the
    node as if it were on host."""

    bug_class = "evict-to-host-after-failed-backup"
    sources = ("sglang#27108",)
    policies = ("write_back",)
    caught_by = v.FailedBackupViolation

    def _after_failed_write_back(self, node: TierNode) -> int:
        return self._free_device(node)

    def _counts_as_host(self, node: TierNode) -> bool:
        return node.device is None  # "evicted" is taken to mean "backed up", as SGLang's match does


class WriteBackSkipsAncestors(TierMutant):
    """Write-back eviction backs up the leaf alone, although its ancestors are not backed up."""

    bug_class = "write-back-leaf-without-ancestors"
    sources = ("sglang#24585",)
    policies = ("write_back",)
    caught_by = v.BackupChainViolation

    def _write_back(self, node: TierNode) -> None:
        if self._write(node):
            node.evict_when_written = True


class NestedHostEvictionFreesLoading(TierMutant):
    """Load-back protects only the device part of its path: the eviction it re-enters (and the host
    eviction a write-back needs) may free the host pages it is about to load."""

    bug_class = "nested-host-eviction-frees-load-back-pages"
    sources = ("sglang#27631", "sglang#27562")
    policies = ("write_back",)
    caught_by = v.TransferInFlightViolation

    def _pinned_for_load(self, path: list[TierNode], to_load: list[TierNode]) -> list[TierNode]:
        return [n for n in path if n not in to_load]


class HostEvictionOrphansSubtree(TierMutant):
    """Host eviction takes internal host-only nodes too, detaching their subtree."""

    bug_class = "host-eviction-orphans-subtree"
    sources = ("sglang#27631", "sglang#27562")
    caught_by = v.HostOrphanViolation

    def _host_evictable(self, node: TierNode) -> bool:
        return node.linked and node.device is None and node.host is not None and node.pin == 0


class BackupChainGap(TierMutant):
    """Write-through goes on backing up the pages below one whose backup failed."""

    bug_class = "backup-chain-gap"
    sources = ("sglang#22062",)
    policies = ("write_through",)
    caught_by = v.BackupChainViolation

    def _back_up_path(self, last: TierNode) -> None:
        for node in self._path(last):
            if node.host is None and node.writing is None:
                self._write(node)


class PartialPersist(TierMutant):
    """Write-through backs up only the first page of what an insert adds."""

    bug_class = "write-through-partial-persist"
    sources = ("sglang#39444",)
    policies = ("write_through",)
    caught_by = v.PersistViolation

    def _back_up_path(self, last: TierNode) -> None:
        for node in self._path(last):
            if node.host is None and node.writing is None:
                if self._chain_ok(node):
                    self._write(node)
                return


class LoadBackPastHostGap(TierMutant):
    """Page-by-page load-back goes on after a page it could not load."""

    bug_class = "load-back-past-host-gap"
    sources = ()  # issue 31's list names the class without an SGLang issue
    caught_by = v.HostGapViolation

    def _skips_unloaded_page(self) -> bool:
        return True

    def _device_prefix(self, path: list[TierNode]) -> tuple[np.ndarray, TierNode]:
        on_device = [n for n in path if n.device is not None]
        values = np.concatenate([n.device for n in on_device]) if on_device else np.zeros(0, dtype=np.int64)
        return values, (on_device[-1] if on_device else self.root)


class QuarantineKeepsHostCopies(TierMutant):
    """``evict_prefix`` frees the device pages of the branch and leaves host-only pages linked."""

    bug_class = "quarantine-keeps-host-copies"
    sources = ()
    caught_by = v.NeverSawViolation

    def evict_prefix(self, tokens: Any) -> int:
        removed = 0
        path = self._walk(tuple(tokens))
        cut = (len(tokens) - 1) // self.page_size
        for node in path[cut:]:
            for n in [node, *self._below(node)]:
                if n.linked and n.device is not None and n.host is None:
                    return super().evict_prefix(tokens)
        for node in path[cut:cut + 1]:
            for n in [node, *self._below(node)]:
                removed += len(n.key)
                if n.device is not None:
                    self._free_device(n)
        return removed

    def _below(self, node: TierNode) -> list[TierNode]:
        out, stack = [], list(node.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out


class WritesPageReversed(TierMutant):
    """A backup copies the page's device slots in reverse order."""

    bug_class = "backup-copies-wrong-slots"
    sources = ()
    caught_by = v.TierResidencyViolation

    def _write_source(self, node: TierNode) -> np.ndarray:
        return node.device[::-1].copy() if len(node.device) > 1 else node.device


TIER_MUTANTS: list[type[TierMutant]] = [
    EvictsToHostAfterFailedBackup, WriteBackSkipsAncestors, NestedHostEvictionFreesLoading, HostEvictionOrphansSubtree,
    BackupChainGap, PartialPersist, LoadBackPastHostGap, QuarantineKeepsHostCopies, WritesPageReversed,
]

CORRECT_TIER_VARIANTS: dict[str, Callable[..., Any]] = {"TieredRadixCache": TieredRadixCache}


def page_size_for(mutant: type[TierMutant]) -> int:
    return 2 if mutant is WritesPageReversed else 1


def machines_for_mutant(mutant: type[TierMutant], name: str | None = None) -> list[type[TierMachine]]:
    """One machine per write policy where the mutant's bug can happen."""
    return [tier_machine_for(mutant, page_size_for(mutant), policy, name=f"{name or mutant.__name__}_{policy}")
            for policy in mutant.policies]
