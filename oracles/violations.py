"""One exception class per oracle, so a failure is classified by its type, never by its wording.

Each is an ``AssertionError`` (a violated property, as pytest and Hypothesis expect) carrying the
name of the oracle that judged it, and the check that failed as a repro file states it
(:class:`Check`), so ``radixcheck audit --repro`` can write the check out as plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    """A failed check, as a standalone repro file states it right after the call that failed it.

    ``holds`` is a Python expression that is true while the cache is right, ``got`` one that shows
    what it did instead, and ``names`` the expected values they refer to (written out as
    assignments above them). Both use the names a repro file defines: ``result`` (what the last
    call returned), ``values`` (a match's slot ids), ``freed`` (the slots freed during the last
    call, in order), ``free_calls`` (the same, one list per ``free()`` call), ``raised`` (the
    exception the last call raised, or ``None``), ``before`` (``state()`` before the last call),
    ``sizes()`` (a dict: total, evictable, protected), ``state()`` (sizes, slots freed so far, refused
    frees), ``allocator``, ``PAGE`` and ``np``; with a second pool also ``second_allocator``,
    ``second_freed`` (its slots freed during the last call) and ``window`` or ``state`` (a match's
    third answer)."""

    holds: str
    got: str
    names: dict[str, Any] = field(default_factory=dict)


class ContractViolation(AssertionError):
    """The cache broke the contract (``radixcheck.properties.cache.contract``)."""

    oracle = "contract"

    def __init__(self, message: str = "", check: Check | None = None) -> None:
        super().__init__(message)
        self.check = check


class PrefixSetViolation(ContractViolation):
    oracle = "1 prefix-set model"


class RefcountViolation(ContractViolation):
    oracle = "2 refcount safety"


class SlotViolation(ContractViolation):
    oracle = "3 slot conservation"


class LRUOrderViolation(ContractViolation):
    """An LRU cache evicted a page while an older one survived, or evicted more than asked."""

    oracle = "4 LRU order"


class EvictionOrderViolation(ContractViolation):
    """A cache with a declared :class:`~radixcheck.properties.cache.policies.Policy` evicted a leaf
    while one its policy says goes first survived, or went later."""

    oracle = "4 eviction order"


class HostEvictionOrderViolation(ContractViolation):
    """A tiered cache's ``evict_host`` freed a host-only leaf while one its order (the declared
    Policy's, least recently used first by default) puts first stayed."""

    oracle = "4h host eviction order"


class EvictionAmountViolation(ContractViolation):
    """``evict(n)`` stopped before freeing ``n`` tokens although something was still evictable, or
    went on after it had freed them (on a tier: counting the write-backs it started, oracle 4t's amount)."""

    oracle = "4 eviction amount"


class HostEvictionAmountViolation(ContractViolation):
    """A tiered cache's ``evict_host(n)`` stopped before freeing ``n`` host tokens although a
    host-only leaf was left, or went on after it had freed them."""

    oracle = "4h host eviction amount"


class NeverSawViolation(ContractViolation):
    oracle = "5 evict-equals-never-saw"


class DFSBoundViolation(ContractViolation):
    oracle = "6 DFS bound"


class BadInputViolation(ContractViolation):
    """Bad input was accepted, or refused only after it changed the cache."""

    oracle = "bad input refused, state unchanged"


class ReturnValueViolation(ContractViolation):
    """A method returned something of the wrong type or shape, or a count that is not what it did."""

    oracle = "return values"


class IndexViolation(ContractViolation):
    """A KV-event index (a router's view) disagrees with the blocks its events say each rank holds:
    a match, a size or the dump, or it refused a legal event."""

    oracle = "7 index model"


class IndexMemoryViolation(ContractViolation):
    """A KV-event index keeps entries for blocks nobody holds: not empty once every block is gone,
    or growing beyond what is held under churn."""

    oracle = "8 index memory"


class EngineEventsViolation(ContractViolation):
    """An engine's KV events do not describe its cache: a router that mirrors them exactly (the
    index model) disagrees with the prefix the engine itself matches."""

    oracle = "9 engine events"


class TenantIsolationViolation(ContractViolation):
    """A namespace saw another's cache: a match or an insert under N found what was inserted under
    M, or an eviction under N changed M (the contract's "Namespaces")."""

    oracle = "10 tenant isolation"


class TenantTreeViolation(ContractViolation):
    """A router's tenant prefix tree answered other than what was inserted for each tenant says: a
    match longer than the query or than any available tenant holds, shorter than its declared
    granularity allows, naming a tenant that is unavailable or does not hold the prefix; or a size."""

    oracle = "11 tenant-tree model"


class TenantTreeEvictionViolation(ContractViolation):
    """A tenant's LRU eviction took less than asked, more than the group it reached the amount in,
    other prefixes than the least recently used, or anything of another tenant."""

    oracle = "11 tenant-tree eviction"


class TenantTreeMemoryViolation(ContractViolation):
    """A tenant tree keeps nodes no present tenant holds (a removed tenant never purged)."""

    oracle = "12 tenant-tree memory"


def shown(tokens: tuple[int, ...] | list[int]) -> str:
    """Tokens for a message: in full when short, else the ends and the length (prompts can be
    thousands of tokens long)."""
    items = list(tokens)
    if len(items) <= 12:
        return str(items)
    return f"[{', '.join(map(str, items[:6]))}, … {', '.join(map(str, items[-2:]))}] ({len(items)} tokens)"


def shown_namespace(namespace: object) -> str:
    """A namespace for a message: its repr when short, else its ends and its length (the suite's
    250-character tenant keys would fill a line twice; the ends tell its pair apart). A repro file
    keeps the namespace whole: this is for messages only."""
    text = repr(namespace)
    if len(text) <= 40:
        return text
    return f"{text[:16]}…{text[-8:]} ({len(text)} characters)"


class TierResidencyViolation(ContractViolation):
    """A tiered cache's answer disagrees with where its pages are: a match's device slot ids or
    host length, a load-back's slot ids, the sizes, or the KV a copy between tiers carried."""

    oracle = "13 tier residency and KV"


class TransferInFlightViolation(ContractViolation):
    """A slot was freed while a transfer still read or wrote it, or a transfer read a freed slot."""

    oracle = "14 transfers in flight"


class FailedBackupViolation(ContractViolation):
    """A page whose backup failed to allocate was counted as on host."""

    oracle = "15 failed backup never backed up"


class HostOrphanViolation(ContractViolation):
    """Host eviction freed a page while pages below it stay cached: their subtree is orphaned."""

    oracle = "16 host eviction orphans nothing"


class HostGapViolation(ContractViolation):
    """A match or load-back went past the first page that is not on host, or a page left both
    tiers on device eviction while pages below it stay cached (a gap in the path)."""

    oracle = "17 no host gap"


class BackupChainViolation(ContractViolation):
    """A page was backed up while its parent was neither on host nor being written: a gap in
    the backup chain (SGLang's write-through #22062, write-back #24585)."""

    oracle = "18 backup chain"


class PersistViolation(ContractViolation):
    """Write-through: a page left the device without a host copy although no backup on its chain
    failed (it was never fully persisted)."""

    oracle = "19 write-through persists"


class HostSlotViolation(ContractViolation):
    """Host slot conservation: a host slot leaked, was freed twice, or the host size is wrong."""

    oracle = "3h host slot conservation"


class SecondSlotViolation(ContractViolation):
    """The second pool (a sliding window's KV, a state pool) lost count: a slot leaked, was freed
    twice or while the cache still held it live, or a free was refused."""

    oracle = "3s second-pool conservation"


class SecondValueViolation(ContractViolation):
    """A second-pool value served or kept that is not live: a match returned a window slot or a
    state the cache had freed (cached as live), or another than was inserted there."""

    oracle = "20 second-pool value live or tombstoned"


class TierWindowViolation(SecondValueViolation):
    """A sliding window's values through a host tier (:mod:`radixcheck.oracles.tier_windows`): a
    load-back restored window values past the last ``W`` tokens of the path it loaded, or dropped
    them, or a host copy lost them. Oracle 20w: its own name, so that its findings are grouped,
    counted and waived apart from oracle 20's (a subclass: what catches 20 catches it too)."""

    oracle = "20w window values through the host tier"


class TombstoneViolation(ContractViolation):
    """A match stopped at a tombstone although the window (or state) it needs lies beyond it: a
    tombstone hid its descendants (sglang #35515)."""

    oracle = "21 tombstone hides nothing"


class PinViolation(ContractViolation):
    """A lock did not protect both pools: a second-pool value a lock pins was freed (another lock's
    release took its pin, sglang #27038), or a KV eviction took a leaf whose second-pool value a
    lock pins (lmdeploy #4700)."""

    oracle = "22 locks hold both pools"


class WindowMatchViolation(ContractViolation):
    """A hybrid match is not the longest cached prefix a request can resume from (the last
    ``min(W, L)`` tokens live, or a live state at its end), or its second-pool answer has the
    wrong shape."""

    oracle = "23 hybrid match length"


class StepCostViolation(ContractViolation):
    """In the production world, the CPU time of a per-request call grew with the cache: calls of one kind
    and size cost several times more in a tree many times larger (an O(n) scan per step;
    :mod:`radixcheck.properties.cache.step_cost`). A measurement, not a program: it has no repro file."""

    oracle = "S step cost"
