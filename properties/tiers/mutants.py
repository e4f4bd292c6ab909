"""Catalogued one-idea mutants of the reference tiered cache, one per HiCache bug class, and the
correct variants the tier machine must pass (no false alarms).

Each mutant names the SGLang issue it re-creates (``sources``), the write policies where its bug
can happen (``policies``: the catalogue runs it there) and the oracle that must catch it
(``caught_by``); ``radixcheck.reports.tier_catalogue`` measures how often the gate's budget does.

The single-part mutants declare the tier alone (no namespaces: their streams are those the
catalogue measured). A *composed* mutant declares more than the tier (``namespaces=True``) and its
bug needs both parts to show: with one tenant it is correct.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from radixcheck.oracles import violations as v
from radixcheck.properties.cache.policies import lfu, priority
from radixcheck.properties.tiers.contract import TierCapabilities, TierMatch, Transfer
from radixcheck.properties.tiers.machine import TierMachine, tier_machine_for
from radixcheck.properties.tiers.trusting import TrustsItsCallers
from radixcheck.reference.tiered_cache import TieredRadixCache, TierNode


class TierMutant(TieredRadixCache):
    tier_capabilities = TierCapabilities(page_sizes=(1, 2))  # the tier alone
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

    def _host_candidates(self) -> list[TierNode]:
        return list(self._nodes())  # internal nodes too: the reference keeps only the childless ones for it


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


class MruFirstTier(TierMutant):
    """Device eviction takes the most recently used unlocked device leaf first."""

    bug_class = "device-eviction-most-recent-first"
    sources = ()  # issue 39: a tiered cache evicting MRU-first conformed
    caught_by = v.LRUOrderViolation

    def _eviction_key(self, node: TierNode) -> tuple[int, int]:
        return -node.last_access, node.serial

    def _host_eviction_key(self, node: TierNode) -> tuple[Any, int]:
        return TieredRadixCache._eviction_key(self, node)  # the host tier keeps the right order: one idea per mutant


class MruHostFirst(TierMutant):
    """Host eviction takes the most recently used host-only leaf first."""

    bug_class = "host-eviction-most-recent-first"
    sources = ()  # issue 39: the host tier's eviction order was never judged
    caught_by = v.HostEvictionOrderViolation

    def _host_eviction_key(self, node: TierNode) -> tuple[int, int]:
        return -node.last_access, node.serial


class LfuHostByRecency(TierMutant):
    """Composed (LFU + host tier): the device tier evicts by LFU, the host tier by recency alone,
    as a host eviction written for LRU and never given the declared strategy would. A frequently
    hit prompt on host then goes before a rarely hit one used later. Under LRU it is correct."""

    policy = lfu()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), eviction_policy=lfu())
    bug_class = "host-eviction-ignores-declared-policy"
    sources = ()  # issue 39: "the declared Policy's order on the device tier, and the host tier's eviction order"
    caught_by = v.HostEvictionOrderViolation

    def _host_eviction_key(self, node: TierNode) -> tuple[int, int]:
        return node.last_access, node.serial


class TierEvictOvershoots(TierMutant):
    """Device eviction compares with ``<=``: once the tokens it freed (and, under write-back, those
    whose write-back it started) reach ``num_tokens`` it takes one leaf more."""

    bug_class = "device-eviction-overshoots"
    sources = ()  # the tier contract's amount rule (SGLang's _evict_components stops once its tracker reaches num_tokens)
    caught_by = v.EvictionAmountViolation

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        return counted <= wanted if tier == "device" else counted < wanted


class TierEvictStopsShort(TierMutant):
    """Device eviction takes one leaf, whatever it was asked for."""

    bug_class = "device-eviction-stops-short"
    sources = ()  # issue: a tiered cache that stops after one page when asked for ten conformed
    caught_by = v.EvictionAmountViolation

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        return (counted == 0 if tier == "device" else True) and counted < wanted


class TierEvictHostOvershoots(TierMutant):
    """Host eviction compares with ``<=``: once the host tokens it freed reach ``num_tokens`` it
    frees one host-only leaf more."""

    bug_class = "host-eviction-overshoots"
    sources = ()  # SGLang's FullComponent.drive_host_eviction stops once its tracker reaches num_tokens
    caught_by = v.HostEvictionAmountViolation

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        return counted <= wanted if tier == "host" else counted < wanted


class TierEvictHostStopsShort(TierMutant):
    """Host eviction frees one host-only leaf, whatever it was asked for."""

    bug_class = "host-eviction-stops-short"
    sources = ()
    caught_by = v.HostEvictionAmountViolation

    def _wants_more(self, counted: int, wanted: int, tier: str) -> bool:
        return (counted == 0 if tier == "host" else True) and counted < wanted


class HostLookupIgnoresNamespace(TierMutant):
    """Composed (namespaces + host tier): the host copies are also indexed by their tokens alone,
    as a host store keyed by a hash of the token ids without the LoRA id or ``extra_key`` is; where
    a tenant's own tree has nothing more on host, the match goes on through that index, so a
    load-back under N reads another tenant's host copy. With one tenant the index is the tree."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True)
    bug_class = "host-lookup-ignores-namespace"
    sources = ()  # the composed bug class of issue 39 ("a load-back under N returns only N's host copies")
    caught_by = v.TenantIsolationViolation

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._host_index: dict[tuple[int, ...], TierNode] = {}

    def _tokens_of(self, node: TierNode) -> tuple[int, ...]:
        return tuple(t for n in self._path(node) for t in n.key)

    def transfer_done(self, transfer: Transfer) -> None:
        nodes = list(self._pending.get(transfer.number, ()))
        super().transfer_done(transfer)
        if transfer.kind == "write":
            for node in nodes:
                if node.linked:
                    self._host_index[self._tokens_of(node)] = node

    def match_prefix(self, tokens: Any, namespace: Hashable = None) -> TierMatch:
        match = super().match_prefix(tokens, namespace)
        key, p = tuple(int(t) for t in tokens), self.page_size
        at = len(match.device_values) + match.host_length
        host_length, host_node = match.host_length, match.host_handle
        while at + p <= len(key):
            node = self._host_index.get(key[: at + p])
            if node is None or not node.linked or not self._counts_as_host(node):
                break
            host_length, host_node, at = host_length + p, node, at + p
        return TierMatch(match.device_values, match.device_handle, host_length, host_node)


class LoadBackForgetsHits(TierMutant):
    """Composed (LFU + host tier): a page loaded back from host starts its hit count again, as a
    device node rebuilt from its host copy does when the count lives on the device node only. The
    frequent prompt then goes before a rarely used one. Without a host tier (or under LRU) it is correct."""

    policy = lfu()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), eviction_policy=lfu())
    bug_class = "load-back-forgets-hit-count"
    sources = ()  # the composed bug class of issue 39 ("a load-back that forgets the hit count its policy keys on")
    # the page's statistics are one on both tiers: the forgotten hits show in whichever order is judged first
    caught_by = (v.EvictionOrderViolation, v.HostEvictionOrderViolation)

    def _load(self, to_load: list[TierNode], hosts: list[np.ndarray]) -> None:
        super()._load(to_load, hosts)
        for node in to_load:
            if node.device is not None:
                node.hits = 0


class RevivedPageKeepsOldPriority(TierMutant):
    """Composed (priority + host tier): an insert that revives a host-only page (recomputed, not
    loaded back: it takes the caller's new device slots) keeps the page's old priority, as an insert
    that raises the priority only of the nodes it finds on device does. A low-priority prompt on host,
    recomputed by a higher-priority request, then goes before a leaf of a priority between the two.
    Without a host tier (no page is ever host-only) or under LRU (no priority) it is correct."""

    policy = priority()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), eviction_policy=priority())
    bug_class = "insert-reviving-host-page-keeps-old-priority"
    sources = ()  # a new user's planted bug (reports/findings/layers_trial.md: revive_keeps_old_priority)
    # the page's statistics are one on both tiers: the kept priority shows in whichever order is judged first
    caught_by = (v.EvictionOrderViolation, v.HostEvictionOrderViolation)

    def insert(self, tokens: Any, values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        try:
            path = self._walk(tuple(int(t) for t in tokens), namespace)
        except (TypeError, ValueError):
            path = []  # bad input: the reference's insert refuses it
        revived = {node: node.priority for node in path if node.device is None}
        prefix = super().insert(tokens, values, namespace, priority)
        for node, old in revived.items():
            node.priority = old
        return prefix


class TieredLfu(TieredRadixCache):
    """Correct, composed: namespaces and LFU (SGLang's ``--radix-eviction-policy lfu``) on the device tier."""

    policy = lfu()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, eviction_policy=lfu())


class TieredPriority(TieredRadixCache):
    """Correct, composed: namespaces and request priorities (``priority=``) on the device tier."""

    policy = priority()
    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, eviction_policy=priority())


class TrustingTenantTiers(TrustsItsCallers, TieredRadixCache):
    """Correct, with namespaces on both tiers, and trusting its callers as SGLang's HiRadixCache
    does (:class:`~radixcheck.properties.tiers.trusting.TrustsItsCallers`). Before every eviction it
    checks, besides its lock counts, that every namespace's root is still a root."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True)

    def _assert_own_trees(self) -> None:
        for namespace, root in self.roots.items():
            assert root.parent is None and root.lock_ref == 1, f"the root of namespace {namespace!r} changed"
        super()._assert_own_trees()


TIER_MUTANTS: list[type[TierMutant]] = [
    EvictsToHostAfterFailedBackup, WriteBackSkipsAncestors, NestedHostEvictionFreesLoading, HostEvictionOrphansSubtree,
    BackupChainGap, PartialPersist, LoadBackPastHostGap, QuarantineKeepsHostCopies, WritesPageReversed,
    MruFirstTier, HostLookupIgnoresNamespace, LoadBackForgetsHits, RevivedPageKeepsOldPriority, MruHostFirst,
    LfuHostByRecency,
    TierEvictOvershoots, TierEvictStopsShort, TierEvictHostOvershoots, TierEvictHostStopsShort,
]

CORRECT_TIER_VARIANTS: dict[str, Callable[..., Any]] = {
    "TieredRadixCache": TieredRadixCache, "TrustingTenantTiers": TrustingTenantTiers, "TieredLfu": TieredLfu,
    "TieredPriority": TieredPriority,
}


def page_size_for(mutant: type[TierMutant]) -> int:
    """The page size a mutant's machine runs at: 2 for a bug inside a page, else its smallest declared."""
    return 2 if mutant is WritesPageReversed else min(mutant.tier_capabilities.page_sizes)


def machines_for_mutant(mutant: type[TierMutant], name: str | None = None) -> list[type[TierMachine]]:
    """One machine per write policy where the mutant's bug can happen."""
    return [tier_machine_for(mutant, page_size_for(mutant), policy, name=f"{name or mutant.__name__}_{policy}")
            for policy in mutant.policies]


# ---- the request lifecycle on the tiers (composed: lifecycle="tree" + the host tier) --------------

class LoadLockedTiers(TieredRadixCache):
    """Correct, with the request lifecycle, protecting a load-back as SGLang's ``HiRadixCache``
    does: ``load_back`` locks the path it loads (the *load lock*, SGLang's ``ongoing_load_back``)
    and the load's completion releases it; a page being loaded is kept on device by that lock alone
    (eviction does not look at the transfer). A request retracted or aborted while its load is in
    flight only unlocks its own handle: the load lock keeps the pages until the load lands."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, lifecycle="tree")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._load_locks: dict[int, TierNode] = {}  # a pending load's number -> the last node it loads

    def _lock_path(self, node: TierNode, delta: int) -> None:
        while node.parent is not None:
            node.lock_ref += delta
            node = node.parent

    def _load(self, to_load: list[TierNode], hosts: list[np.ndarray]) -> None:
        super()._load(to_load, hosts)
        for node in to_load:
            transfer = node.loading
            if transfer is not None and transfer.number not in self._load_locks:
                last = [n for n in to_load if n.loading is transfer][-1]
                self._load_locks[transfer.number] = last
                self._lock_path(last, +1)

    def _device_leaf(self, node: TierNode) -> bool:
        return (node.linked and node.device is not None and node.lock_ref == 0 and node.pin == 0 and node.writing is None
                and not node.evict_when_written and all(c.device is None for c in node.children.values()))

    def transfer_done(self, transfer: Transfer) -> None:
        super().transfer_done(transfer)
        if transfer.kind == "load":
            self._release_load_lock(transfer.number)

    def _release_load_lock(self, number: int) -> None:
        self._lock_path(self._load_locks.pop(number), -1)


class TrustingLifecycleTiers(TrustingTenantTiers):
    """Correct, with the request lifecycle and namespaces, trusting its callers as real engines do
    (no handle checked, its own trees asserted before every eviction: an unlock the suite sent
    twice, or for a request that never locked, would drive a lock count below zero)."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, lifecycle="tree")


class LifecycleTierMutant(LoadLockedTiers, TierMutant):
    """A one-idea mutant of :class:`LoadLockedTiers` (the tier and the request lifecycle)."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), lifecycle="tree")


class AbortCancelsLoad(LifecycleTierMutant):
    """Composed (lifecycle + host tier): an unlock while a load-back is in flight on its path is
    taken for the abort of the request that asked for it, so the load is cancelled: when it lands,
    the pages go back to host only. Right for the request's own load when nobody else holds the
    pages; but another request admitted on the loading pages holds them locked, and they leave
    the device under it. With finishes only (a finish waits for its loads) it is correct."""

    bug_class = "abort-cancels-another-requests-load-back"
    sources = ()  # issue 39's "a retract or an abort while a load-back is in flight"
    caught_by = v.RefcountViolation

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cancelled: set[TierNode] = set()

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(handle)
        self._cancelled.update(n for n in self._path(handle) if n.loading is not None)

    def transfer_done(self, transfer: Transfer) -> None:
        nodes = [n for n in self._pending.get(transfer.number, ()) if n in self._cancelled]
        super().transfer_done(transfer)
        for node in reversed(nodes):
            self._cancelled.discard(node)
            if node.linked and node.device is not None and node.host is not None:
                self._free_device(node)


class AbortKeepsLoadLock(LifecycleTierMutant):
    """Composed (lifecycle + host tier): the load lock is released by the first unlock on its path
    after the load landed (the request that waited for it being done), not by the load's
    completion. A request retracted or aborted before its load landed has unlocked already: the
    load lock stays, and the pages can never be evicted though nobody holds them. With finishes
    only (a finish waits for its loads) it is correct."""

    bug_class = "abort-leaves-the-load-lock"
    sources = ()  # issue 39's "a retract or an abort while a load-back is in flight"
    # the page nobody holds is a candidate: a newer one goes first (4t's order), or nothing goes (4t's amount)
    caught_by = (v.LRUOrderViolation, v.EvictionAmountViolation)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._landed: set[int] = set()

    def _release_load_lock(self, number: int) -> None:
        self._landed.add(number)  # released at the next unlock on its path

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(handle)
        on_path = set(self._path(handle))
        for number in [k for k in self._landed if self._load_locks[k] in on_path]:
            self._landed.discard(number)
            super()._release_load_lock(number)


class WriteBackIgnoresLock(LifecycleTierMutant):
    """Composed (lifecycle + write-back): an eviction under write-back starts the leaf's write and
    marks it to leave the device when the write lands; a request admitted on it meanwhile locks it,
    and the completion frees its device pages anyway, under the lock. Without a request admitted
    between the eviction and the completion it is correct (a new user's cache in issue 39's
    trial: caught only by the thorough profile before ``publish_during_backup`` drew ``early``)."""

    bug_class = "write-back-completion-frees-locked-pages"
    sources = ()
    policies = ("write_back",)
    caught_by = v.RefcountViolation

    def transfer_done(self, transfer: Transfer) -> None:
        marked = [n for n in self._pending.get(transfer.number, ()) if transfer.kind == "write" and n.evict_when_written]
        super().transfer_done(transfer)
        for node in marked:  # the reference keeps a node a request locked meanwhile; the bug does not look
            if node.linked and node.device is not None and all(c.device is None for c in node.children.values()):
                self._free_device(node)


LIFECYCLE_TIER_MUTANTS: list[type[TierMutant]] = [AbortCancelsLoad, AbortKeepsLoadLock, WriteBackIgnoresLock]
TIER_MUTANTS += LIFECYCLE_TIER_MUTANTS
CORRECT_TIER_VARIANTS |= {"LoadLockedTiers": LoadLockedTiers, "TrustingLifecycleTiers": TrustingLifecycleTiers}


# ---- composed mutants whose bug needs two parts to show (issue 39, "composed correctness figures") ----

class RetractFreesWritingHost(LifecycleTierMutant):
    """Composed (lifecycle + host tier): a request that published a chunk (``cache_unfinished_req``:
    an insert, then the inserted pages locked through a fresh handle) and is then retracted or
    aborted (its handle unlocked with no final insert since) is taken to drop what it published:
    the pending backups on its path that no one else holds are cancelled by freeing their host
    slots, while the copy still writes into them. A finish inserts before it unlocks, and without
    the lifecycle an insert is always followed by its own request's unlock, so no handle is ever
    published: with either part alone it is correct."""

    bug_class = "retract-frees-host-of-page-being-written"
    sources = ()  # issue 39's "a retract that frees the host copy of a page still being written"
    caught_by = v.TransferInFlightViolation

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._inserts = 0  # inserts so far
        self._fresh: set[TierNode] = set()  # the last insert's path, until an unlock follows it
        self._published: dict[int, int] = {}  # id(handle) -> the insert that published it

    def insert(self, tokens: Any, values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        prefix = super().insert(tokens, values, namespace, priority)
        self._inserts += 1
        self._fresh = set(self._walk(tuple(int(t) for t in tokens), namespace))
        return prefix

    def inc_lock_ref(self, handle: Any) -> None:
        super().inc_lock_ref(handle)
        if handle in self._fresh:  # locked right after the insert that made it, before any unlock: published
            self._published[id(handle)] = self._inserts

    def dec_lock_ref(self, handle: Any) -> None:
        super().dec_lock_ref(handle)
        self._fresh = set()
        if self._published.pop(id(handle), None) == self._inserts:  # no insert since: retracted or aborted
            for node in self._path(handle):
                if node.lock_ref == 0 and node.writing is not None and node.host is None:
                    self.host_pool.free(node.writing.host_slots)  # "cancelled": the copy still lands there


class WriteBackAckWrongTenant(TierMutant):
    """Composed (namespaces + write-back): a write-back's completion finds its node again by walking
    the token ids under the namespace of the latest request (the scheduler's current ``extra_key``),
    not the namespace of the node it backed up. Where that tenant has a node at the same tokens that
    waits for its own write-back (both tenants' copies of one prompt evicted together), the
    completion is taken for that node's: its device pages go while its own write still reads them,
    and the node that was written stays "being written". With one tenant the walk finds the node
    itself: it is correct."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True)
    bug_class = "write-back-ack-applied-to-another-tenants-node"
    sources = ()  # issue 39's "a write-back completion applied to another tenant's node"
    policies = ("write_back",)
    caught_by = v.TransferInFlightViolation

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._current: Hashable = None  # the namespace of the latest match or insert

    def match_prefix(self, tokens: Any, namespace: Hashable = None, priority: int = 0) -> TierMatch:
        self._current = namespace
        return super().match_prefix(tokens, namespace, priority)

    def insert(self, tokens: Any, values: np.ndarray, namespace: Hashable = None, priority: int = 0) -> int:
        self._current = namespace
        return super().insert(tokens, values, namespace, priority)

    def transfer_done(self, transfer: Transfer) -> None:
        nodes = self._pending.get(transfer.number, [])
        if transfer.kind == "write" and len(nodes) == 1 and nodes[0].linked:
            tokens = tuple(t for n in self._path(nodes[0]) for t in n.key)
            path = self._walk(tokens, self._current)
            if path and len(path) == len(self._path(nodes[0])) and path[-1] is not nodes[0] and self._waits(path[-1]):
                self._pending[transfer.number] = [path[-1]]
        super().transfer_done(transfer)

    @staticmethod
    def _waits(node: TierNode) -> bool:
        """``node`` is a device leaf nobody holds, waiting for its own write-back to land (as the written node was)."""
        return (node.host is None and node.evict_when_written and node.lock_ref == 0
                and all(c.device is None for c in node.children.values()))


COMPOSED_TIER_MUTANTS: list[type[TierMutant]] = [RetractFreesWritingHost, WriteBackAckWrongTenant]
TIER_MUTANTS += COMPOSED_TIER_MUTANTS


# ---- a state pool on the tiers (composed: StatePool + the host tier) ------------------------------
from radixcheck.properties.tiers.state_mutants import CORRECT_STATE_TIERS, STATE_TIER_MUTANTS  # noqa: E402

TIER_MUTANTS += STATE_TIER_MUTANTS  # type: ignore[arg-type]
CORRECT_TIER_VARIANTS |= CORRECT_STATE_TIERS


# ---- a sliding window on the tiers (composed: SlidingWindow + the host tier) ----------------------
from radixcheck.properties.tiers.window_mutants import CORRECT_WINDOW_TIERS, WINDOW_TIER_MUTANTS  # noqa: E402

TIER_MUTANTS += WINDOW_TIER_MUTANTS  # type: ignore[arg-type]
CORRECT_TIER_VARIANTS |= CORRECT_WINDOW_TIERS


# ---- a tier cache's own request methods (lifecycle="requests" + the host tier) ---------------------
from radixcheck.properties.tiers.request_mutants import CORRECT_REQUEST_TIERS, REQUEST_TIER_MUTANTS  # noqa: E402
from radixcheck.reference.tier_requests import TierRequestSteps  # noqa: E402

TIER_MUTANTS += REQUEST_TIER_MUTANTS  # type: ignore[arg-type]
CORRECT_TIER_VARIANTS |= CORRECT_REQUEST_TIERS


class LoadLockedRequestTiers(TierRequestSteps, LoadLockedTiers):
    """Correct, running its own request methods with namespaces, its load-back protected by the load
    lock of :class:`LoadLockedTiers` (released when the load lands, as SGLang's ``load_back`` holds
    the path it loads until ``loading_check`` consumes the ack): a request retracted or aborted while
    its load is in flight drops only its own lock, and the load lock keeps the loading pages."""

    tier_capabilities = TierCapabilities(page_sizes=(1, 2), namespaces=True, lifecycle="requests")


CORRECT_TIER_VARIANTS["LoadLockedRequestTiers"] = LoadLockedRequestTiers


# ---- the request methods with a second pool (lifecycle="requests" + a state or a window + the host tier)
from radixcheck.properties.tiers.pool_request_mutants import CORRECT_POOL_REQUEST_TIERS, POOL_REQUEST_MUTANTS  # noqa: E402

TIER_MUTANTS += POOL_REQUEST_MUTANTS
CORRECT_TIER_VARIANTS |= CORRECT_POOL_REQUEST_TIERS
