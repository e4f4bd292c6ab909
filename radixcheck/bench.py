"""``radixcheck bench module:factory``: how the cost of each cache operation grows with the cache.

A cache can pass every conformance property and still be unusable at production size: an
eviction that re-collects every leaf on each call, a child lookup that scans. The bench drives a
target through the contract alone (``radixcheck.properties.cache.contract``; the suite's
:class:`SlotAllocator` owns the slots, and what the target's capabilities exclude is never sent),
at several cache sizes spanning two to three decades, and measures each operation's CPU time per
unit of work:

================== ============== ===========================================================
operation          unit           where
================== ============== ===========================================================
match_prefix       query token    a full hit on one leaf of a *wide* tree (n leaves under one node)
insert             query token    a new leaf under that node
inc/dec_lock_ref   call           a leaf's handle (depth 2) on the wide tree
evict              evicted leaf   one ``evict`` freeing a quarter of the wide tree
evict_small        call           ``evict(1)``: one leaf, the engine's "free a little under pressure"
evict_prefix       call           one leaf's branch (``supports_quarantine`` only)
total_size,        call           a size read on the wide tree with one leaf locked, as a scheduler
evictable_size,                     reads them every step (a tiered cache: ``device_size`` as
protected_size                      ``total_size``; its contract has no other two)
match_prefix_deep  query token    a full hit down a *deep* tree (a chain of d one-page nodes,
insert_deep        query token      each with a one-page side leaf), and a new leaf at depth d-1
inc/dec_lock_ref_  locked node    the handle at depth d (the cost per call divided by d)
deep
================== ============== ===========================================================

Each repeat at each size is a point; :func:`radixcheck.properties.growth.growth_exponent` fits
the log-log slope over all of them, and an operation is flagged when it reaches
:data:`~radixcheck.properties.growth.FLAG_EXPONENT` (cost per unit growing about linearly with the
cache) or when it exceeded the per-operation time or memory limit at some size. CPU time
(``time.process_time``, every thread of this process) rather than wall time, with the garbage
collector off inside a timed batch (as ``timeit`` does), so other processes on a shared machine
move the figures less; ratios between targets measured side by side in one run (interleaved:
each size builds every target's tree in turn) are the figures to trust.

A tiered target (a factory with ``tier_capabilities``: a device tier and a host tier, see
:mod:`radixcheck.properties.tiers.contract`) is driven as an engine drives it: the bench's device
pool, a host pool as large, and a transfer controller whose copies are instant; each completion is
delivered (``transfer_done``) as soon as the call that started it returns, inside that call's
timed cost (an eviction under ``write_back`` frees its device slots only then). Its operations
are the device tier's: a match is its device part, its handle the device handle; the write
policy is ``write_through`` where offered (SGLang's default), else the first declared. Its host
tier adds :data:`TIER_OPERATIONS` (``evict_host(1)`` and ``host_size()``). Any other
KV-event index and a tenant tree are measured on their own operations, in a router's world
(:mod:`radixcheck.bench_router`); a router pair is refused (:func:`measurable` says why).

An operation whose measurement raised (the target's exception, or the bench's) has the verdict
``failed``, counted with the flags: never "nothing flagged".

Every call into the target runs under the per-operation time limit (``target.guarded``) and a
resident-memory limit, and the whole run under ``max_seconds``; a deep size whose build would
take longer than ``max_build_seconds`` (estimated from the size before) is skipped, and says so.
"""

from __future__ import annotations

import gc
import itertools
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import SlotAllocator, second_pool_keywords
from radixcheck.properties.growth import FLAG_EXPONENT, grows_too_fast, growth_exponent
from radixcheck.properties.memory_limit import MemoryLimitExceeded, MemoryWatch, memory_limit, resident_bytes
from radixcheck.properties.target import BudgetSpent, OperationTimeout, Target, guarded, op_timeout, time_budget
from radixcheck.properties.tiers.contract import HostPool, Transfer

DEFAULT_WIDE_LEAVES = (16, 128, 1024, 4096, 12500)
"""Leaves of the wide tree at each size: 12,500 leaves of 8 tokens is 10^5 cached tokens."""
DEFAULT_DEEP_LEVELS = (16, 64, 256, 1024)
"""Depths of the deep tree. Building depth d costs d^2/2 page-steps in any cache (each insert that
reaches depth i carries its i-page prefix): 1024 levels is ~5x10^5 page-steps, a few seconds in Python."""
DEEP_BUILD_TOKENS = 2_200_000  # page_size * d^2 / 2 beyond which a deep size is skipped (page sizes > 1)
LEAF_TOKENS = 8
"""Tokens in a wide tree's leaf (and its shared prefix): rounded up to whole pages."""
DEFAULT_REPEATS = 5
DEFAULT_MAX_SECONDS = 120.0
DEFAULT_MEMORY_MIB = 4096
EVICT_FRACTION = 0.25
FAILED_MARK = "raised"
"""How an operation's ``stopped`` says its measurement raised (see :attr:`OpCost.failed`)."""
BATCH_CALLS = 16
"""Calls per timed batch (one repeat) for the per-token and per-call operations."""


@dataclass(frozen=True)
class Operation:
    name: str
    unit: str
    tree: str
    what: str
    needs_quarantine: bool = False


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in [
        Operation("match_prefix", "query token", "wide", "a full hit on one leaf among n under one node"),
        Operation("insert", "query token", "wide", "a new leaf under the node with n children"),
        Operation("inc_lock_ref", "call", "wide", "lock a leaf's handle (depth 2) straight after its match"),
        Operation("dec_lock_ref", "call", "wide", "release that lock"),
        Operation("evict", "evicted leaf", "wide", f"one evict() freeing {EVICT_FRACTION:.0%} of the cache"),
        Operation("evict_small", "call", "wide", "evict(1): one leaf freed, as an engine frees a little under pressure"),
        Operation("evict_prefix", "call", "wide", "evict_prefix of one leaf's branch", needs_quarantine=True),
        *(Operation(name, "call", "wide", f"{name}() with one leaf locked, as a scheduler reads it every step")
          for name in ("total_size", "evictable_size", "protected_size")),
        Operation("match_prefix_deep", "query token", "deep", "a full hit down a chain of d one-page nodes"),
        Operation("insert_deep", "query token", "deep", "a new one-page leaf at depth d-1"),
        Operation("inc_lock_ref_deep", "locked node", "deep", "lock the handle at depth d (cost per call / d)"),
        Operation("dec_lock_ref_deep", "locked node", "deep", "release that lock (cost per call / d)"),
    ]
}
TIER_OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in [
        Operation("evict_host_small", "call", "wide",
                  "evict_host(1) with host-only leaves: one host leaf freed, as an engine makes a little host room"),
        Operation("host_size", "call", "wide", "host_size() with one leaf locked, as a scheduler reads it every step"),
    ]
}
"""A tiered target's host-tier operations, measured on it alone (a one-tier cache has none: no row)."""


@dataclass
class OpCost:
    """One operation of one target: every repeat's cost per unit, the fit, and the verdict."""

    name: str
    unit: str
    tree: str
    what: str
    points: list[tuple[int, float]] = field(default_factory=list)  # (cached tokens, CPU seconds per unit)
    exponent: float | None = None  # fitted over every size but the smallest when there are four or more (see finish)
    exponent_all_sizes: float | None = None
    flagged: bool = False
    verdict: str = ""  # "" while measuring; then "ok", "flagged", or what stopped it
    stopped: str = ""  # why the larger sizes were not measured (limit hit, error, budget, not offered)
    size_unit: str = "tokens"  # what a size counts (see TargetCost.size_unit)

    def medians(self) -> list[tuple[int, float]]:
        """The median cost per unit at each size measured."""
        by_size: dict[int, list[float]] = {}
        for size, cost in self.points:
            by_size.setdefault(size, []).append(cost)
        return [(s, float(np.median(c))) for s, c in sorted(by_size.items())]

    def finish(self) -> None:
        """Fit and judge. With four sizes or more the flag reads the fit over every size but the
        smallest: on the smallest tree a fixed per-call cost (argument conversion, allocation)
        hides a linear term that is plain once the tree outgrows it, and large trees are where
        deployments live. A flag from the fit needs three sizes or more in it: two sizes are one
        ratio, which one noisy size can tip. The fit over all sizes is reported beside it."""
        sizes = sorted({s for s, _ in self.points})
        self.exponent_all_sizes = growth_exponent(self.points) if len(sizes) >= 2 else None
        fitted = [(s, c) for s, c in self.points if s != sizes[0]] if len(sizes) >= 4 else self.points
        self.exponent = growth_exponent(fitted) if len(sizes) >= 2 else None
        judged = len(sizes) >= 3
        limit_hit = self.stopped.startswith(("exceeded", "memory"))
        self.flagged = (judged and grows_too_fast(self.exponent)) or limit_hit or self.failed
        if self.stopped.startswith("not offered"):
            self.verdict = self.stopped
        elif self.failed:
            self.verdict = f"failed: {self.stopped}"
        elif self.flagged:
            self.verdict = "flagged" + (f": {self.stopped}" if limit_hit else "")
        elif self.exponent is None or not judged:
            self.verdict = f"not judged: {len(sizes)} size(s) measured, a flag needs 3" + (f"; {self.stopped}" if self.stopped else "")
        else:
            self.verdict = "ok" + (f" up to {sizes[-1]:,} {self.size_unit}; then {self.stopped}" if self.stopped else "")

    @property
    def failed(self) -> bool:
        """Whether a measurement raised (the target's exception, or the bench's own): a finding to
        show, never a silent gap."""
        return self.stopped.startswith(FAILED_MARK) or f": {FAILED_MARK} " in self.stopped  # "building the wide tree: raised ..."

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["points"] = [[s, c] for s, c in self.points]
        d["medians"] = [[s, c] for s, c in self.medians()]
        return d


@dataclass
class TargetCost:
    """Every operation's cost for one target at one page size."""

    spec: str
    page_size: int
    capabilities: str
    ops: dict[str, OpCost]
    seconds: float = 0.0
    sizes: dict[str, list[int]] = field(default_factory=lambda: {"wide": [], "deep": []})
    size_unit: str = "tokens"
    """What a size counts: cached tokens (a cache); held blocks (an index); held elements (a tenant tree)."""

    def flagged(self) -> list[str]:
        """The operations flagged, those that failed included."""
        return [name for name, op in self.ops.items() if op.flagged]

    def failed(self) -> list[str]:
        """The operations whose measurement raised."""
        return [name for name, op in self.ops.items() if op.failed]

    def measured(self) -> list[str]:
        """The operations with at least one point."""
        return [name for name, op in self.ops.items() if op.points]

    def to_json(self) -> dict[str, Any]:
        return {"target": self.spec, "page_size": self.page_size, "capabilities": self.capabilities,
                "seconds": round(self.seconds, 2), "sizes": self.sizes, "size_unit": self.size_unit,
                "ops": {n: op.to_json() for n, op in self.ops.items()}}


@dataclass
class BenchPlan:
    """What to measure: sizes, repeats and the limits."""

    wide_leaves: tuple[int, ...] = DEFAULT_WIDE_LEAVES
    deep_levels: tuple[int, ...] = DEFAULT_DEEP_LEVELS
    repeats: int = DEFAULT_REPEATS
    max_seconds: float = DEFAULT_MAX_SECONDS
    memory_mib: int = DEFAULT_MEMORY_MIB
    max_build_seconds: float = 60.0
    """Skip a deep size whose build, extrapolated from the size before (build cost ~ depth^2), would take longer."""
    cpu_budget: bool = False
    """Count ``max_seconds`` (and each target's share) in CPU time, this process's and a wire server's, not
    wall-clock time: which sizes get measured then does not depend on the machine's load."""

    def __post_init__(self) -> None:
        for name in ("wide_leaves", "deep_levels"):
            sizes = getattr(self, name)
            if len(sizes) < 2 or any(isinstance(s, bool) or not isinstance(s, int) or s < 2 for s in sizes):
                raise ValueError(f"{name} needs two or more sizes, each an int >= 2; got {sizes!r}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0, got {self.max_seconds}")


# ---- the trees --------------------------------------------------------------------------------


def _built(shape: str) -> str:
    """What a size of ``shape`` builds, for a message: a cache's wide or deep tree, a router's world."""
    return "the router's world" if shape == "world" else f"the {shape} tree"


class RestoreFailed(Exception):
    """An untimed call that puts the tree back after a measurement failed: the measured operation
    is not to blame, so it is stopped without a flag."""


def planned_tokens(shape: str, n: int, page_size: int) -> int:
    """Tokens a tree of ``n`` leaves (wide) or levels (deep) caches."""
    leaf = page_size * math.ceil(LEAF_TOKENS / page_size)
    return (n + 1) * leaf if shape == "wide" else 2 * n * page_size


class _Tokens:
    """Fresh token ids: no two segments share a token, so trees have exactly the shape built."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def __call__(self, n: int) -> list[int]:
        return [next(self._next) for _ in range(n)]


class _Tree:
    """A target's cache holding a wide or a deep tree, and the sequences the bench knows it holds.

    Wide: a shared prefix of one leaf's length and ``n`` leaves under it. Deep: a chain of ``n``
    one-page nodes, each with a one-page side leaf. Leaves are listed oldest first; evictions take
    the oldest, so the newest ``n`` are the ones cached (for an LRU cache; another policy only
    makes some queries partial hits)."""

    def __init__(self, target: Target, page_size: int, shape: str, n: int, tokens: _Tokens, clock: Clock) -> None:
        self.page_size, self.shape, self.n, self.tokens, self.clock = page_size, shape, n, tokens, clock
        self.leaf = page_size * math.ceil(LEAF_TOKENS / page_size) if shape == "wide" else page_size
        cached = planned_tokens(shape, n, page_size)
        # A pool just large enough, as under memory pressure: a cache that evicts lazily from its
        # own free pool (vLLM) then has no idle blocks to hand out first.
        headroom = 4 * BATCH_CALLS * self.leaf if shape == "wide" else (n + 1 + 4 * BATCH_CALLS) * page_size
        self.allocator = SlotAllocator(cached + headroom + 64 * page_size)
        self.cache = guarded("factory(...)", build_cache, target, self.allocator, page_size)
        self.leaves: list[list[int]] = []
        if shape == "wide":
            self.prefix = tokens(self.leaf)
            for _ in range(n):
                self.add_leaf()
        else:
            self.base = tokens(n * page_size)
            for i in range(1, n + 1):
                self.insert(self.base[: i * page_size] + tokens(page_size))
            self.refresh_chain()
        reported = guarded("total_size", self.cache.total_size)
        self.size = reported if isinstance(reported, int) and reported > 0 else cached  # what the cache says it holds

    def insert(self, seq: list[int]) -> None:
        values = self.allocator.alloc(len(seq))
        already = guarded("insert", self.cache.insert, seq, values)
        self.allocator.free(values[:already])  # the caller keeps what the cache already had

    def add_leaf(self) -> list[int]:
        seq = self.prefix + self.tokens(self.leaf)
        self.insert(seq)
        self.leaves.append(seq)
        return seq

    def young(self) -> list[list[int]]:
        """Leaves certainly cached: the newer half of the newest ``n``."""
        return self.leaves[-max(1, self.n // 2) :]

    def evict(self, num_tokens: int) -> int:
        """An untimed eviction that restores the tree's size after a measurement."""
        before = len(self.allocator.freed_log)
        try:
            guarded("evict", self.cache.evict, num_tokens)
        except (BudgetSpent, KeyboardInterrupt, MemoryLimitExceeded):
            raise
        except BaseException as exc:  # noqa: BLE001 - evict's own verdict comes from its own measurement
            raise RestoreFailed(f"the evict() that restores the tree failed ({type(exc).__name__}); see evict") from exc
        return len(self.allocator.freed_log) - before

    def refresh_chain(self) -> Any:
        """Match the whole chain (deep tree): its nodes become the most recent, so evictions take
        side leaves, never the chain; returns the handle at depth n."""
        return guarded("match_prefix", self.cache.match_prefix, self.base)[1]


def measurable(target: Target) -> str | None:
    """``None`` if the bench can measure ``target``, else why not (one line)."""
    if target.kind in ("cache", "tier", "index", "tenant_tree"):
        return None
    return (f"{target.spec} is a router pair: the bench measures a cache, a tiered cache, a KV-event index or a tenant "
            "tree, one at a time; bench the pair's index (or engine) on its own, and audit the pair with `radixcheck audit`")


def tier_write_policy(target: Target) -> str:
    """The write policy a tiered target is benched under: write_through where offered (SGLang's default)."""
    policies = target.capabilities.write_policies
    return "write_through" if "write_through" in policies else policies[0]


class _InstantCopies:
    """The bench's transfer controller for a tiered cache: allocates and starts a copy on each
    ``write``/``load`` (``None`` when the pool is full), pending until delivered."""

    def __init__(self, device: SlotAllocator, host: HostPool) -> None:
        self.device, self.host = device, host
        self.pending: list[Transfer] = []
        self._count = 0

    def _start(self, kind: str, device: np.ndarray, host: np.ndarray) -> Transfer:
        self._count += 1
        self.pending.append(Transfer(kind, device, host, self._count))
        return self.pending[-1]

    def write(self, device_slots: Any) -> Transfer | None:
        device = np.asarray(device_slots, dtype=np.int64).reshape(-1).copy()
        host = self.host.alloc(len(device))
        return None if host is None else self._start("write", device, host)

    def load(self, host_slots: Any) -> Transfer | None:
        host = np.asarray(host_slots, dtype=np.int64).reshape(-1).copy()
        if len(host) > self.device.available():
            return None
        return self._start("load", self.device.alloc(len(host)), host)

    def refused(self, device_slots: Any) -> None:
        """The cache gave a backup up for lack of host room: nothing to do here."""


class TieredAsCache:
    """A tiered cache behind the base contract's calls, as the bench sends them (module docstring):
    each call returns after the completions of the transfers it started were delivered."""

    def __init__(self, target: Target, allocator: SlotAllocator, page_size: int) -> None:
        self.host = HostPool(allocator.pool_size)
        self.controller = _InstantCopies(allocator, self.host)
        self.tiered = target.factory(allocator, self.host, self.controller, page_size, tier_write_policy(target))
        self.page_size = page_size

    def _settled(self, result: Any) -> Any:
        while self.controller.pending:
            self.tiered.transfer_done(self.controller.pending.pop(0))
        return result

    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]:
        found = self._settled(self.tiered.match_prefix(tokens))
        return found.device_values, found.device_handle

    def insert(self, tokens: Sequence[int], values: np.ndarray) -> int:
        return self._settled(self.tiered.insert(tokens, values))

    def inc_lock_ref(self, handle: Any) -> None:
        self._settled(self.tiered.inc_lock_ref(handle))

    def dec_lock_ref(self, handle: Any) -> None:
        self._settled(self.tiered.dec_lock_ref(handle))

    def evict(self, num_tokens: int) -> int:
        return self._settled(self.tiered.evict(num_tokens))

    def evict_prefix(self, tokens: Sequence[int]) -> int:
        return self._settled(self.tiered.evict_prefix(tokens))

    def total_size(self) -> int:
        return self.tiered.device_size()

    def evict_host(self, num_tokens: int) -> int:
        return self._settled(self.tiered.evict_host(num_tokens))

    def host_size(self) -> int:
        return self.tiered.host_size()


def build_cache(target: Target, allocator: SlotAllocator, page_size: int) -> Any:
    """One cache of ``target`` over ``allocator``: a tiered one behind :class:`TieredAsCache`."""
    if target.kind == "tier":
        return TieredAsCache(target, allocator, page_size)
    second = second_pool_keywords(target.capabilities)  # a hybrid cache's second pool (its inserts here bring no values)
    return target.factory(allocator, page_size, **second)


# ---- the measurements: each returns {operation: (cost, units of work)} ------------------------

Clock = Callable[[], float]
_Measure = Callable[[_Tree, np.random.Generator], dict[str, tuple[float, float]]]


class _Timed:
    """One timed batch: each call runs under the per-operation limit (``guarded``: the alarm is
    set outside the timed region), its cost read on the clock around the call alone; the garbage
    collector is off for the batch (as ``timeit`` does), so no collection lands in one call."""

    def __init__(self, tree: _Tree) -> None:
        self.tree = tree
        self.cost = 0.0

    def __enter__(self) -> _Timed:
        self._gc = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._gc:
            gc.enable()

    def __call__(self, name: str, *args: Any) -> Any:
        method, clock = getattr(self.tree.cache, name), self.tree.clock

        def measured() -> Any:
            start = clock()
            result = method(*args)
            self.cost += clock() - start
            return result

        return guarded(f"{name} on the {self.tree.shape} tree of {self.tree.size:,} {getattr(self.tree, 'unit', 'tokens')}", measured)


def _untimed(tree: _Tree, name: str, *args: Any) -> Any:
    return guarded(name, getattr(tree.cache, name), *args)


def _sample(rng: np.random.Generator, items: Sequence[Any], k: int) -> list[Any]:
    return [items[i] for i in rng.integers(0, len(items), size=k)]


def _match_wide(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    queries = _sample(rng, tree.young(), BATCH_CALLS)
    with _Timed(tree) as timed:
        for q in queries:
            timed("match_prefix", q)
    return {"match_prefix": (timed.cost, sum(map(len, queries)))}


def _insert_wide(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    seqs = [tree.prefix + tree.tokens(tree.leaf) for _ in range(BATCH_CALLS)]
    with _Timed(tree) as timed:
        for seq in seqs:
            values = tree.allocator.alloc(len(seq))
            tree.allocator.free(values[: timed("insert", seq, values)])  # the caller keeps what was cached
    tree.leaves += seqs
    tree.evict(BATCH_CALLS * tree.leaf)  # back to n leaves: the oldest go, the new ones are the newest
    return {"insert": (timed.cost, sum(map(len, seqs)))}


def _locks(tree: _Tree, rng: np.random.Generator, suffix: str = "") -> dict[str, tuple[float, float]]:
    if tree.shape == "wide":
        queries, per_call = _sample(rng, tree.young(), BATCH_CALLS), 1
    else:
        queries, per_call = [tree.base] * BATCH_CALLS, tree.n
    with _Timed(tree) as lock, _Timed(tree) as unlock:
        for q in queries:
            handle = _untimed(tree, "match_prefix", q)[1]  # straight before the lock (locks_only_after_match)
            lock("inc_lock_ref", handle)
            unlock("dec_lock_ref", handle)
    units = len(queries) * per_call
    return {"inc_lock_ref" + suffix: (lock.cost, units), "dec_lock_ref" + suffix: (unlock.cost, units)}


def _evict_bulk(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    leaves = max(1, round(tree.n * EVICT_FRACTION))
    before = len(tree.allocator.freed_log)
    with _Timed(tree) as timed:
        timed("evict", leaves * tree.leaf)
    freed_leaves = (len(tree.allocator.freed_log) - before) / tree.leaf
    if freed_leaves < 1:
        raise RuntimeError(f"evict({leaves * tree.leaf}) freed no slots on a tree of {tree.n} unlocked leaves")
    for _ in range(round(freed_leaves)):
        tree.add_leaf()
    return {"evict": (timed.cost, freed_leaves)}


def _evict_small(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    calls = min(BATCH_CALLS // 2, max(1, tree.n // 4))
    before = len(tree.allocator.freed_log)
    with _Timed(tree) as timed:
        for _ in range(calls):
            timed("evict", 1)
    freed = len(tree.allocator.freed_log) - before
    if freed < calls:
        raise RuntimeError(f"{calls} calls of evict(1) freed {freed} slots on a tree of {tree.n} unlocked leaves")
    for _ in range(max(1, round(freed / tree.leaf))):
        tree.add_leaf()
    return {"evict_small": (timed.cost, calls)}


def _evict_host_small(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """``evict_host(1)`` calls on the host-only leaves the steps before left (each eviction moved
    device leaves to host only): the device tree is unchanged."""
    host = tree.cache.host
    calls = min(BATCH_CALLS // 2, max(1, tree.n // 4))
    before = len(host.freed_log)
    with _Timed(tree) as timed:
        for _ in range(calls):
            timed("evict_host", 1)
    freed = len(host.freed_log) - before
    if freed < calls:
        raise RuntimeError(f"{calls} calls of evict_host(1) freed {freed} host slots after device evictions of a tree "
                           f"of {tree.n} leaves")
    return {"evict_host_small": (timed.cost, calls)}


def _evict_prefix(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    young = tree.young()
    picks = sorted(set(rng.choice(len(young), size=min(BATCH_CALLS // 2, len(young)), replace=False).tolist()))
    doomed = [young[i] for i in picks]
    with _Timed(tree) as timed:
        for seq in doomed:
            timed("evict_prefix", seq[: tree.leaf + tree.page_size])  # the shared prefix + the leaf's first page
    gone = {id(s) for s in doomed}
    tree.leaves = [s for s in tree.leaves if id(s) not in gone]
    for _ in doomed:
        tree.add_leaf()
    return {"evict_prefix": (timed.cost, len(doomed))}


def _size_read(name: str) -> _Measure:
    """Times ``BATCH_CALLS`` calls of the size method ``name``, one young leaf locked meanwhile
    (a scheduler reads the sizes while requests hold their prefixes)."""

    def measure(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
        handle = _untimed(tree, "match_prefix", _sample(rng, tree.young(), 1)[0])[1]
        _untimed(tree, "inc_lock_ref", handle)
        try:
            with _Timed(tree) as timed:
                for _ in range(BATCH_CALLS):
                    timed(name)
        finally:
            _untimed(tree, "dec_lock_ref", handle)
        return {name: (timed.cost, BATCH_CALLS)}

    return measure


def _match_deep(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    with _Timed(tree) as timed:
        for _ in range(BATCH_CALLS):
            timed("match_prefix", tree.base)
    return {"match_prefix_deep": (timed.cost, BATCH_CALLS * len(tree.base))}


def _insert_deep(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    above = tree.base[: (tree.n - 1) * tree.page_size]
    seqs = [above + tree.tokens(tree.page_size) for _ in range(BATCH_CALLS)]
    with _Timed(tree) as timed:
        for seq in seqs:  # one at a time: each brings values for its whole sequence (n pages)
            values = tree.allocator.alloc(len(seq))
            tree.allocator.free(values[: timed("insert", seq, values)])
    tree.refresh_chain()  # the chain newest: the eviction below takes side leaves only
    tree.evict(BATCH_CALLS * tree.page_size)
    return {"insert_deep": (timed.cost, sum(map(len, seqs)))}


def _locks_deep(tree: _Tree, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    return _locks(tree, rng, suffix="_deep")


TIER_LACKS = ("evictable_size", "protected_size")
"""Size calls the base contract has and the tiered contract does not (``radixcheck.properties.tiers.contract``)."""

# In the order they run on one tree: the destructive ones last.
WIDE_STEPS: list[tuple[tuple[str, ...], _Measure]] = [
    (("match_prefix",), _match_wide),
    (("inc_lock_ref", "dec_lock_ref"), _locks),
    *(((name,), _size_read(name)) for name in ("total_size", "evictable_size", "protected_size", "host_size")),
    (("insert",), _insert_wide),
    (("evict_prefix",), _evict_prefix),
    (("evict_small",), _evict_small),
    (("evict",), _evict_bulk),
    (("evict_host_small",), _evict_host_small),  # after the evictions that left host-only leaves
]
DEEP_STEPS: list[tuple[tuple[str, ...], _Measure]] = [
    (("match_prefix_deep",), _match_deep),
    (("inc_lock_ref_deep", "dec_lock_ref_deep"), _locks_deep),
    (("insert_deep",), _insert_deep),
]


# ---- the run ----------------------------------------------------------------------------------


def _stopped_reason(exc: BaseException, size: int, unit: str = "tokens") -> str:
    if isinstance(exc, RestoreFailed):
        return f"not measured beyond {size:,} {unit}: {exc}"
    if isinstance(exc, OperationTimeout):
        return f"exceeded the {op_timeout():g} s operation limit at {size:,} {unit}"
    if isinstance(exc, MemoryLimitExceeded):
        return f"memory: {exc} at {size:,} {unit}"
    if isinstance(exc, RecursionError):
        return f"{FAILED_MARK} RecursionError at {size:,} {unit} (recursion deeper than Python's limit)"
    return f"{FAILED_MARK} {type(exc).__name__} at {size:,} {unit}: {str(exc)[:200]}"


class _Runner:
    """Measures several targets side by side: for each size, each target's tree in turn."""

    def __init__(self, targets: Sequence[tuple[Target, int]], plan: BenchPlan, seed: int, progress: Callable[[str], None],
                 clock: Clock, references: bool = False) -> None:
        self.targets, self.plan, self.progress, self.clock = targets, plan, progress, clock
        self.references = references  # the targets after the first are references beside it (run())
        self.rng = np.random.default_rng(seed)
        self.tokens = _Tokens()
        self.results = [self._empty(t, p) for t, p in targets]
        self._memory = MemoryWatch(sys.maxsize)  # no limit until run() sets its watch
        self._builds: dict[tuple[int, str], tuple[int, float]] = {}  # (target index, shape) -> last (n, build seconds)

    @staticmethod
    def _empty(target: Target, page_size: int) -> TargetCost:
        ops = {}
        for name, op in OPERATIONS.items():
            cost = OpCost(op.name, op.unit, op.tree, op.what)
            if op.needs_quarantine and not target.capabilities.supports_quarantine:
                cost.stopped = "not offered (supports_quarantine=False: never sent)"
            if target.kind == "tier" and name in TIER_LACKS:
                cost.stopped = "not offered (a tiered cache's contract has device_size, measured as total_size: never sent)"
            ops[name] = cost
        if target.kind == "tier":
            ops.update((name, OpCost(op.name, op.unit, op.tree, op.what)) for name, op in TIER_OPERATIONS.items())
        return TargetCost(target.spec, page_size, str(target.capabilities), ops)

    def run(self) -> list[TargetCost]:
        """Every size of every family, smallest first, each target's tree in turn. With ``references``
        the first target (the one asked about) comes first: the others are measured only at the sizes
        it reached, and each within its share of ``max_seconds`` (:meth:`_beside`); a new user's
        tiered cache got 6 s of 120 while the reference's 8,200-token tree took 36 s, and stopped there.
        Without (the COST report's field of engines), every target is measured alike."""
        started = time.monotonic()
        self._spent = [0.0] * len(self.targets)  # seconds (the budget's clock) each target's measurements took
        try:
            with memory_limit(resident_bytes() + self.plan.memory_mib * 2**20) as self._memory, \
                    time_budget(self.plan.max_seconds, wall_clock=not self.plan.cpu_budget) as whole:  # wall: how long the user waits
                for shape, sizes, steps, index in self._smallest_first():
                    reached = False  # whether the first target measured this size
                    for i, (result, (target, page_size)) in enumerate(zip(self.results, self.targets, strict=True)):
                        n = self._size(shape, sizes, index, page_size)
                        if n is None or (self.references and i > 0 and not reached) or not self._affordable(i, result, shape, n):
                            continue
                        if i == 0 or not self.references:
                            before = len(result.sizes[shape])
                            self._measure(i, result, target, page_size, shape, n, steps)
                            reached = len(result.sizes[shape]) > before
                        else:
                            self._beside(i, result, target, page_size, shape, n, steps, whole)
        except BudgetSpent:
            self._stop_all(f"not measured: --max-seconds {self.plan.max_seconds:g} reached{self._in_cpu()}")
        for result in self.results:
            for op in result.ops.values():
                op.finish()
            result.seconds = time.monotonic() - started
        return self.results

    def _build(self, target: Target, page_size: int, shape: str, n: int) -> Any:
        """The target's cache holding a tree of this shape and size (anything with ``cache``,
        ``clock``, ``shape`` and ``size``, as :class:`_Timed` needs)."""
        return _Tree(target, page_size, shape, n, self.tokens, self.clock)

    @staticmethod
    def _planned(shape: str, n: int, page_size: int) -> int:
        return planned_tokens(shape, n, page_size)

    @staticmethod
    def _built_by(shape: str) -> str:
        """The operation whose calls build a tree of this shape: a limit hit while building is its."""
        return "insert" if shape == "wide" else "insert_deep"

    def _smallest_first(self) -> Iterator[tuple[str, tuple[int, ...], list[tuple[tuple[str, ...], _Measure]], int]]:
        """Every family's sizes, interleaved by rank (wide 1, deep 1, wide 2, ...): a spent
        ``--max-seconds`` then cuts the largest sizes of each, not a whole family (a new user's
        tiered cache, at load 9, never reached the deep tree, where recursive walks break)."""
        families = list(self._families())
        for index in range(max((len(sizes) for _, sizes, _ in families), default=0)):
            for shape, sizes, steps in families:
                if index < len(sizes):
                    yield shape, sizes, steps, index

    def _families(self) -> Iterator[tuple[str, tuple[int, ...], list[tuple[tuple[str, ...], _Measure]]]]:
        yield "wide", self.plan.wide_leaves, WIDE_STEPS
        yield "deep", self.plan.deep_levels, DEEP_STEPS

    def _size(self, shape: str, sizes: tuple[int, ...], index: int, page_size: int) -> int | None:
        n = sizes[index]
        if shape == "deep" and page_size * n * n / 2 > DEEP_BUILD_TOKENS and index >= 2:
            return None  # see DEFAULT_DEEP_LEVELS: past this the build, not the bench, is the cost
        return n

    def _affordable(self, i: int, result: TargetCost, shape: str, n: int) -> bool:
        """Whether the tree's build, extrapolated from this target's last build of the shape, fits
        ``max_build_seconds`` (deep: build cost ~ depth^2; wide: ~ leaves). Otherwise stop the shape."""
        if (i, shape) not in self._builds:
            return True
        last_n, last_s = self._builds[(i, shape)]
        estimate = last_s * (n / last_n) ** (2 if shape == "deep" else 1)
        if estimate <= self.plan.max_build_seconds:
            return True
        for op in result.ops.values():
            if op.tree == shape and not op.stopped:
                op.stopped = (f"not measured beyond {result.sizes[shape][-1]:,} {result.size_unit}: building the next "
                              f"{_built(shape).removeprefix('the ')} would take ~{estimate:.0f} s "
                              f"(max_build_seconds {self.plan.max_build_seconds:g})")
        self.progress(f"{result.spec}: {_built(shape)} of {n}: skipped, build would take ~{estimate:.0f} s")
        return False

    def _beside(self, i: int, result: TargetCost, target: Target, page_size: int, shape: str, n: int,
                steps: list[tuple[tuple[str, ...], _Measure]], whole: Any) -> None:
        """Measure a target beside the first (a reference) within its share of ``max_seconds`` (an
        equal split): past it, its larger sizes are left out and the rest of the budget is the first's."""
        share = self.plan.max_seconds / len(self.targets)
        reason = (f"not measured: its share of --max-seconds ({share:.3g} of {self.plan.max_seconds:g} s{self._in_cpu()}) "
                  f"spent; the rest went to {self.results[0].spec}")
        now = whole.cpu if self.plan.cpu_budget else time.monotonic  # the clock the budget counts
        if self._spent[i] < share:
            started = now()
            try:
                with time_budget(min(share - self._spent[i], whole.left()), wall_clock=not self.plan.cpu_budget):
                    self._measure(i, result, target, page_size, shape, n, steps)
                return
            except BudgetSpent:
                if whole.spent():
                    raise
            finally:
                self._spent[i] += now() - started
        if any(not op.stopped for op in result.ops.values()):
            self.progress(f"{target.spec}: {reason}")
        for op in result.ops.values():
            op.stopped = op.stopped or reason

    def _in_cpu(self) -> str:
        return " (of CPU time)" if self.plan.cpu_budget else ""

    def _stop_all(self, reason: str) -> None:
        for result in self.results:
            for op in result.ops.values():
                op.stopped = op.stopped or reason

    def _measure(self, i: int, result: TargetCost, target: Target, page_size: int, shape: str, n: int,
                 steps: list[tuple[tuple[str, ...], _Measure]]) -> None:
        live = [(names, fn) for names, fn in steps if all(x in result.ops and not result.ops[x].stopped for x in names)]
        if not live:
            return
        tree: _Tree | None = None
        t0, cpu0 = time.monotonic(), time.process_time()
        try:
            tree = self._build(target, page_size, shape, n)
            self._memory.check()
        except (BudgetSpent, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - the target's failure is the verdict
            reason = _stopped_reason(exc, self._planned(shape, n, page_size), result.size_unit)
            for names, _ in live:
                for x in names:
                    result.ops[x].stopped = f"building {_built(shape)}: {reason}"
            if isinstance(exc, (OperationTimeout, MemoryLimitExceeded)):  # a tree is built by inserts: theirs is the limit
                result.ops[self._built_by(shape)].stopped = f"{reason} (building {_built(shape)})"
            self.progress(f"{target.spec}: {_built(shape)} of {n} {'prompts' if shape == 'world' else 'leaves/levels'}: {reason}")
            return
        self._builds[(i, shape)] = (n, time.monotonic() - t0)
        result.sizes[shape].append(tree.size)
        for names, fn in live:
            try:
                for _ in range(self.plan.repeats):
                    for name, (seconds, units) in fn(tree, self.rng).items():
                        result.ops[name].points.append((tree.size, seconds / units))
                self._memory.check()
            except (BudgetSpent, KeyboardInterrupt):
                raise
            except BaseException as exc:  # noqa: BLE001 - a hang, a memory runaway or an error: its verdict
                reason = _stopped_reason(exc, tree.size, result.size_unit)
                for x in names:
                    result.ops[x].stopped = reason
                self.progress(f"{target.spec}: {'/'.join(names)}: {reason}")
                if isinstance(exc, MemoryLimitExceeded):
                    return  # the tree itself may be the memory: the rest of this size is skipped
                tree = self._rebuild(tree, target, page_size, shape, n)
                if tree is None:
                    return
        # wall and this process's CPU: on a loaded machine the wall is mostly waiting for a core, which read as the
        # reference beside a target slowing the target's own trees (its CPU per operation did not change)
        self.progress(f"{target.spec}: {shape} {'tree' if shape != 'world' else ''}, {tree.size:,} {result.size_unit}: "
                      f"{time.monotonic() - t0:.1f} s ({time.process_time() - cpu0:.1f} s CPU)".replace(" ,", ","))
        if tree.size > 1_000:  # 10,000 left the tiered reference's 8,200-token tree to the collector, during the target's next tree
            del tree
            gc.collect()  # a tree is full of parent <-> child cycles: free a big one before the next is built

    def _rebuild(self, tree: _Tree, target: Target, page_size: int, shape: str, n: int) -> _Tree | None:
        """A fresh tree after a failed measurement (the old one may be half-changed)."""
        del tree
        try:
            return self._build(target, page_size, shape, n)
        except (BudgetSpent, KeyboardInterrupt):
            raise
        except BaseException:  # noqa: BLE001 - the remaining operations at this size are skipped
            return None


def bench(targets: Sequence[tuple[Target, int]], plan: BenchPlan | None = None, seed: int = 0,
          progress: Callable[[str], None] = lambda line: None, clock: Clock = time.process_time,
          references: bool = False) -> list[TargetCost]:
    """Measure each ``(target, page_size)`` side by side (interleaved, one size at a time).

    ``clock`` measures cost: CPU seconds by default; any non-decreasing counter works (the
    meta-tests count executed lines, which no other process can disturb). KV-event indexes and
    tenant trees are measured in a router's world instead (:mod:`radixcheck.bench_router`).
    ``references``: the targets after the first are references beside it (``radixcheck bench``):
    measured only as far as it got, each within an equal share of ``max_seconds`` (:meth:`_Runner.run`)."""
    if targets and targets[0][0].kind in ("index", "tenant_tree"):
        from radixcheck.bench_router import RouterRunner

        return RouterRunner(targets, plan or BenchPlan(), seed, progress, clock, references).run()
    return _Runner(targets, plan or BenchPlan(), seed, progress, clock, references).run()


def default_page_size(target: Target) -> int:
    """Page size 1 where the target offers it (token-granular, as most engines run), else its smallest."""
    sizes = target.capabilities.page_sizes_tested()
    return 1 if 1 in sizes else min(sizes)


__all__ = ["FLAG_EXPONENT", "OPERATIONS", "TIER_OPERATIONS", "BenchPlan", "OpCost", "TargetCost", "TieredAsCache", "bench",
           "default_page_size", "measurable"]
