"""``radixcheck bench`` on a router's structures: how a KV-event index's and a tenant tree's costs grow.

A router's index or tree can pass every conformance property and still be unusable once its
workers have cached a day of prompts: a lookup that scans every known block, an eviction that
walks the whole tree. The bench builds a *router's world* at several sizes (two to three decades
of prompts), drives the target only through its contract (``properties/index/contract.py``,
``properties/tenant_tree/contract.py``; what its capabilities exclude is never sent), and measures
each operation's cost per unit of work, judged as the cache bench judges it
(:class:`radixcheck.bench.OpCost`: Theil-Sen exponent, flag at
:data:`~radixcheck.properties.growth.FLAG_EXPONENT`, the same limits and clock).

The world: :data:`WORKERS` workers (index) or tenants (tree) share a system prompt; each prompt
is that prefix plus a suffix of its own, routed to one worker, and every fourth prompt to a second
one too (a re-route). A size is what the target holds: (rank, block) pairs for an index, the
tenants' held elements (the sum of their sizes) for a tree.

================ ============== ===============================================================
operation        unit           where
================ ============== ===============================================================
apply_stored     stored block   a ``BlockStored`` of a new prompt's blocks on one worker
apply_removed    removed block  the ``BlockRemoved`` of those blocks (leaves first): size restored
find_matches     query block    a held prompt's tokens hashes, the shared prefix first
remove_worker    leaver's block ``remove_worker`` of a worker that joined holding the shared prefix
                                and :data:`LEAVER_PROMPTS` held prompts (re-routed to it)
apply_cleared    leaver's block the same worker's ``AllBlocksCleared`` (it stays, empty)
insert           key element    a new prompt routed to one tenant
match            key element    a held prompt, every tenant available
evict            call           ``evict(tenant, one prompt's suffix)``: a router trimming a
                                replica a little (``supports_eviction`` only)
remove_tenants   leaver's elem. ``remove_tenants`` of a tenant that joined holding
                                :data:`LEAVER_PROMPTS` held prompts (``supports_removal`` only)
================ ============== ===============================================================

A leaving worker's or tenant's cost is per unit of its share, which is the same at every size: a
removal that walks the whole index or tree grows with the world, and is flagged. Not measured:
the optional reads (sizes, dump, memory counts).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from radixcheck.bench import BATCH_CALLS, OpCost, Operation, TargetCost, _Runner, _Timed
from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.target import Target, guarded

WORKERS = 4
"""Workers (an index's ranks, dp_rank 0 each) or tenants (a tree's replicas) in the world."""
SHARED_BLOCKS = 2
"""Blocks of the system prompt every worker holds (an index)."""
PROMPT_BLOCKS = 4
"""Blocks of a prompt's own suffix (an index)."""
SHARED_ELEMENTS = 16
"""Characters (or token ids) of the system prompt every tenant holds (a tree)."""
SUFFIX_ELEMENTS = 24
"""Characters (or token ids) of a prompt's own suffix (a tree): random, so the tree branches as real prompts do."""
LEAVER_PROMPTS = 2
"""Held prompts a worker (or tenant) joins with before it is measured leaving: its share, the same at every size."""
LEAVERS = 4
"""Leaves timed per batch (each after an untimed join)."""
SECOND_WORKER_EVERY = 4
"""Every this-many-th prompt is also routed to the next worker: shared holders below the prefix."""
WORLD = "world"

ROUTER_OPERATIONS: dict[str, dict[str, Operation]] = {
    "index": {op.name: op for op in [
        Operation("apply_stored", "stored block", WORLD, f"a BlockStored of a new prompt's {PROMPT_BLOCKS} blocks on one worker"),
        Operation("apply_removed", "removed block", WORLD, "the BlockRemoved of those blocks, leaves first"),
        Operation("find_matches", "query block", WORLD, f"a held prompt's {SHARED_BLOCKS + PROMPT_BLOCKS} tokens hashes, "
                  f"the shared prefix ({WORKERS} holders) first"),
        Operation("remove_worker", "leaver's block", WORLD, f"remove_worker of a worker holding the shared prefix and "
                  f"{LEAVER_PROMPTS} held prompts"),
        Operation("apply_cleared", "leaver's block", WORLD, "AllBlocksCleared of such a worker"),
    ]},
    "tenant_tree": {op.name: op for op in [
        Operation("insert", "key element", WORLD, f"a new prompt ({SHARED_ELEMENTS} shared + {SUFFIX_ELEMENTS} own) "
                  "routed to one tenant"),
        Operation("match", "key element", WORLD, f"a held prompt, all {WORKERS} tenants available"),
        Operation("evict", "call", WORLD, f"evict(tenant, {SUFFIX_ELEMENTS}): one prompt's suffix trimmed by LRU"),
        Operation("remove_tenants", "leaver's element", WORLD, f"remove_tenants of a tenant holding {LEAVER_PROMPTS} "
                  "held prompts"),
    ]},
}
SIZE_UNITS = {"index": "held blocks", "tenant_tree": "held elements"}


def _spread(i: int) -> int:
    """The i-th hash: a bijection of the counter onto [0, 2**64), so values above 2**63 come too."""
    return (i * 0x9E3779B97F4A7C15 + 0x7F4A7C15) % 2**64


class IndexWorld:
    """A target's index fed the events of :data:`WORKERS` workers holding ``n`` prompts."""

    shape, unit = WORLD, SIZE_UNITS["index"]

    def __init__(self, target: Target, n: int, counter: Any, clock: Any, rng: np.random.Generator) -> None:
        self.clock, self.counter, self.rng = clock, counter, rng
        self.cache = guarded("factory()", target.factory)  # the name _Timed reads: the object measured
        self.shared = [self._block() for _ in range(SHARED_BLOCKS)]
        for worker in range(WORKERS):
            self.store(worker, None, self.shared)
        self.prompts: list[list[StoredBlock]] = []
        self.held = SHARED_BLOCKS * WORKERS
        for i in range(n):
            blocks = [self._block() for _ in range(PROMPT_BLOCKS)]
            for worker in self._workers(i):
                self.store(worker, self.shared[-1].block_hash, blocks)
                self.held += PROMPT_BLOCKS
            self.prompts.append(blocks)
        self.size = self.held

    def _block(self) -> StoredBlock:
        return StoredBlock(_spread(next(self.counter)), _spread(next(self.counter)))

    @staticmethod
    def _workers(i: int) -> list[int]:
        return [i % WORKERS] + ([(i + 1) % WORKERS] if i % SECOND_WORKER_EVERY == 0 else [])

    def store(self, worker: int, parent: int | None, blocks: list[StoredBlock]) -> None:
        guarded("apply_event", self.cache.apply_event, worker, 0, BlockStored(parent, tuple(blocks)))

    def query(self, blocks: list[StoredBlock]) -> list[int]:
        return [b.tokens_hash for b in self.shared + blocks]

    def join(self, worker: int, rng: np.random.Generator) -> int:
        """Untimed: ``worker`` stores the shared prefix and :data:`LEAVER_PROMPTS` held prompts; the blocks it holds."""
        self.store(worker, None, self.shared)
        for i in rng.integers(0, len(self.prompts), size=LEAVER_PROMPTS):
            self.store(worker, self.shared[-1].block_hash, self.prompts[int(i)])
        return SHARED_BLOCKS + LEAVER_PROMPTS * PROMPT_BLOCKS  # a prompt drawn twice is counted twice: stored twice


def _find_matches(world: IndexWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    queries = [world.query(world.prompts[i]) for i in rng.integers(0, len(world.prompts), size=BATCH_CALLS)]
    with _Timed(world) as timed:
        for q in queries:
            timed("find_matches", q)
    return {"find_matches": (timed.cost, sum(map(len, queries)))}


def _store_and_remove(world: IndexWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    parent = world.shared[-1].block_hash
    new = [(int(w), [world._block() for _ in range(PROMPT_BLOCKS)]) for w in rng.integers(0, WORKERS, size=BATCH_CALLS)]
    with _Timed(world) as stored:
        for worker, blocks in new:
            stored("apply_event", worker, 0, BlockStored(parent, tuple(blocks)))
    with _Timed(world) as removed:  # the same blocks go: the world keeps its size
        for worker, blocks in new:
            removed("apply_event", worker, 0, BlockRemoved(tuple(b.block_hash for b in reversed(blocks))))
    units = BATCH_CALLS * PROMPT_BLOCKS
    return {"apply_stored": (stored.cost, units), "apply_removed": (removed.cost, units)}


def _leaving_worker(world: IndexWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """A worker outside the world joins (untimed) and leaves, by ``remove_worker`` and by ``AllBlocksCleared``:
    the world is as it was after each."""
    leaver, held = WORKERS, 0
    with _Timed(world) as removed:
        for _ in range(LEAVERS):
            held += world.join(leaver, rng)
            removed("remove_worker", leaver)
    with _Timed(world) as cleared:
        for _ in range(LEAVERS):
            world.join(leaver, rng)
            cleared("apply_event", leaver, 0, AllBlocksCleared())
    return {"remove_worker": (removed.cost, held), "apply_cleared": (cleared.cost, held)}


class TreeWorld:
    """A target's tenant tree holding ``n`` prompts routed among :data:`WORKERS` tenants."""

    shape, unit = WORLD, SIZE_UNITS["tenant_tree"]

    def __init__(self, target: Target, n: int, counter: Any, clock: Any, rng: np.random.Generator) -> None:
        self.clock, self.counter, self.rng = clock, counter, rng
        self.text = target.capabilities.key_kind == "text"
        self.evicts = target.capabilities.supports_eviction
        self.cache = guarded("factory()", target.factory)
        self.tenants = [f"w{i}" for i in range(WORKERS)]
        self.available = frozenset(self.tenants)
        guarded("add_tenants", self.cache.add_tenants, list(self.tenants), 0.0)
        self.system = self._elements(SHARED_ELEMENTS)
        self.prompts: list[Any] = []  # oldest first
        self.held: dict[str, list[Any]] = {t: [] for t in self.tenants}  # each tenant's prompts, oldest first
        for i in range(n):
            key = self.new_key()
            for t in [i % WORKERS] + ([(i + 1) % WORKERS] if i % SECOND_WORKER_EVERY == 0 else []):
                self.insert(key, self.tenants[t])
            self.prompts.append(key)

    @property
    def size(self) -> int:
        """The tenants' held elements (random suffixes share their first character or two at most)."""
        return sum(SHARED_ELEMENTS + SUFFIX_ELEMENTS * len(keys) for keys in self.held.values() if keys)

    def _elements(self, n: int) -> Any:
        values = self.rng.integers(0, 26 if self.text else 32000, size=n)
        return "".join(chr(97 + int(v)) for v in values) if self.text else tuple(int(v) for v in values)

    def new_key(self) -> Any:
        return self.system + self._elements(SUFFIX_ELEMENTS)

    def now(self) -> float:
        """A fresh time: never repeated, never going backwards (the contract's promise)."""
        return float(next(self.counter))

    def insert(self, key: Any, tenant: str) -> None:
        guarded("insert", self.cache.insert, key, tenant, self.now())
        self.held[tenant].append(key)

    def trim(self, tenant: str) -> None:
        """An untimed eviction of the tenant's oldest prompt (where offered), after an insert."""
        if self.evicts and self.held[tenant]:
            guarded("evict", self.cache.evict, tenant, SUFFIX_ELEMENTS)
            self.held[tenant].pop(0)

    def young(self) -> list[Any]:
        """Prompts certainly held: the newer half."""
        return self.prompts[-max(1, len(self.prompts) // 2):]

    def join(self, tenant: str, rng: np.random.Generator) -> int:
        """Untimed: ``tenant`` joins and is routed :data:`LEAVER_PROMPTS` held prompts; the elements it holds."""
        guarded("add_tenants", self.cache.add_tenants, [tenant], self.now())
        young = self.young()
        keys = {young[int(i)]: None for i in rng.integers(0, len(young), size=LEAVER_PROMPTS)}
        for key in keys:
            guarded("insert", self.cache.insert, key, tenant, self.now())
        return SHARED_ELEMENTS + SUFFIX_ELEMENTS * len(keys)


def _match(world: TreeWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    young = world.young()
    queries = [young[i] for i in rng.integers(0, len(young), size=BATCH_CALLS)]
    with _Timed(world) as timed:
        for key in queries:
            timed("match", key, world.available)
    return {"match": (timed.cost, sum(map(len, queries)))}


def _insert(world: TreeWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    new = [(world.new_key(), world.tenants[int(t)]) for t in rng.integers(0, WORKERS, size=BATCH_CALLS)]
    with _Timed(world) as timed:
        for key, tenant in new:
            timed("insert", key, tenant, world.now())
    for key, tenant in new:
        world.held[tenant].append(key)
        world.prompts.append(key)
        world.trim(tenant)  # back to the world's size, where the tree evicts; else it grows by a batch
    return {"insert": (timed.cost, sum(len(k) for k, _ in new))}


def _evict(world: TreeWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    calls = min(BATCH_CALLS // 2, max(1, len(world.prompts) // 4))
    tenants = [world.tenants[int(t)] for t in rng.integers(0, WORKERS, size=calls)]
    with _Timed(world) as timed:
        for tenant in tenants:
            timed("evict", tenant, SUFFIX_ELEMENTS)
    for tenant in tenants:  # each gets a new prompt in place of the one it lost
        if world.held[tenant]:
            world.held[tenant].pop(0)
        key = world.new_key()
        world.insert(key, tenant)
        world.prompts.append(key)
    return {"evict": (timed.cost, calls)}


def _leaving_tenant(world: TreeWorld, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """A tenant outside the world joins (untimed) and leaves by ``remove_tenants``: the world is as it was after each."""
    held = 0
    with _Timed(world) as timed:
        for _ in range(LEAVERS):
            held += world.join("leaver", rng)
            timed("remove_tenants", ["leaver"])
    return {"remove_tenants": (timed.cost, held)}


_Steps = list[tuple[tuple[str, ...], Any]]
STEPS: dict[str, _Steps] = {
    "index": [(("find_matches",), _find_matches), (("apply_stored", "apply_removed"), _store_and_remove),
              (("remove_worker", "apply_cleared"), _leaving_worker)],
    "tenant_tree": [(("match",), _match), (("insert",), _insert), (("evict",), _evict), (("remove_tenants",), _leaving_tenant)],
}
WORLDS = {"index": IndexWorld, "tenant_tree": TreeWorld}


class RouterRunner(_Runner):
    """The cache bench's runner (sizes interleaved across targets, limits, verdicts) over a router's
    world: the plan's ``wide_leaves`` are its prompt counts; there is no deep family."""

    def __init__(self, targets: Sequence[tuple[Target, int]], *args: Any) -> None:
        kinds = {t.kind for t, _ in targets}
        if len(kinds) != 1 or not kinds <= set(WORLDS):
            raise ValueError(f"a router bench measures targets of one kind, an index or a tenant tree; got {sorted(kinds)}")
        self.kind = kinds.pop()
        super().__init__(targets, *args)
        self.counter = itertools.count(1)

    def _empty(self, target: Target, page_size: int) -> TargetCost:  # type: ignore[override]
        ops = {}
        for name, op in ROUTER_OPERATIONS[target.kind].items():
            ops[name] = OpCost(op.name, op.unit, op.tree, op.what, size_unit=SIZE_UNITS[target.kind])
        if target.kind == "tenant_tree" and not target.capabilities.supports_eviction:
            ops["evict"].stopped = "not offered (supports_eviction=False: never sent)"
        if target.kind == "tenant_tree" and not target.capabilities.supports_removal:
            ops["remove_tenants"].stopped = "not offered (supports_removal=False: never sent)"
        return TargetCost(target.spec, page_size, str(target.capabilities), ops, sizes={WORLD: []},
                          size_unit=SIZE_UNITS[target.kind])

    def _families(self):  # noqa: ANN202 - as the base's
        yield WORLD, self.plan.wide_leaves, STEPS[self.kind]

    def _build(self, target: Target, page_size: int, shape: str, n: int) -> Any:
        return WORLDS[self.kind](target, n, self.counter, self.clock, self.rng)

    def _planned(self, shape: str, n: int, page_size: int) -> int:  # type: ignore[override]
        return n * (PROMPT_BLOCKS if self.kind == "index" else SUFFIX_ELEMENTS)

    def _built_by(self, shape: str) -> str:  # type: ignore[override]
        return "apply_stored" if self.kind == "index" else "insert"
