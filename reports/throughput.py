"""Cache calls per second: the four ledger workloads replayed at scale through any target.

Each workload (``reports/workloads.py``: few-shot, multi-turn chat, tree-of-thought, agents) is
replayed as many disjoint copies (each copy's token ids shifted past the others'), one after
another, through a slot pool of ``capacity`` tokens: enough copies to bring ``fill`` times the
pool's size in distinct tokens, so the pool is full for the last two thirds of the replay and the
tree holds thousands of leaves, as a warm server's does; there every request evicts.
Each request makes the calls a scheduler makes: ``match_prefix``, ``inc_lock_ref`` on the hit,
``evict`` when the pool lacks room for the new tokens, ``insert``, ``dec_lock_ref``.

The figure is contract calls per CPU second of the cache (``time.process_time`` around the
calls only). Each request runs under the per-operation time limit (``target.guarded``).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.properties.target import Target, guarded
from radixcheck.reports.workloads import SEED_WORKLOADS, VOCAB, Workload

DEFAULT_SCALE = 1
DEFAULT_CAPACITY = 50_000
DEFAULT_FILL = 3
WALL_FACTOR = 15  # the wall backstop, in CPU bounds: at load 24 on 2 cores a process gets about 1/12 of a core
CUT_SHORT = "stopped after"  # how a replay stopped by a time bound says so


@dataclass
class Throughput:
    workload: str
    requests: int
    calls: int
    seconds: float  # CPU seconds inside the cache calls
    hit_rate: float
    evict_calls: int
    stopped: str = ""

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else float("nan")


def cached_tokens(workload: Workload) -> int:
    """Slots a cache needs to hold every request of ``workload`` at once: the nodes of the trie of
    its requests (a shared prefix counted once)."""
    root: dict[int, dict] = {}
    count = 0
    for req in workload.requests:
        node = root
        for t in req:
            if t not in node:
                node[t] = {}
                count += 1
            node = node[t]
    return count


def instances_for(workload: Workload, capacity: int, fill: int = DEFAULT_FILL) -> int:
    """Copies of ``workload`` that together need ``fill`` x ``capacity`` slots."""
    return max(1, -(-fill * capacity // cached_tokens(workload)))


def requests_at_scale(workload: Workload, instances: int) -> list[list[int]]:
    """``instances`` disjoint copies of the workload's requests, copy after copy."""
    return [[t + k * VOCAB for t in req] for k in range(instances) for req in workload.requests]


class _Replay:
    def __init__(self, target: Target, page_size: int, capacity: int) -> None:
        self.page_size = page_size
        self.allocator = SlotAllocator(capacity)
        self.cache = guarded("factory(allocator, page_size)", target.factory, self.allocator, page_size)
        self.calls = self.evict_calls = 0
        self.seconds = 0.0
        self.reused = self.total = 0

    def request(self, tokens: list[int]) -> None:
        cache, alloc, ps = self.cache, self.allocator, self.page_size
        aligned = len(tokens) // ps * ps
        t0 = time.process_time()
        values, handle = cache.match_prefix(tokens)
        cache.inc_lock_ref(handle)
        calls = 2
        need = aligned - len(values)
        if need > alloc.available():
            cache.evict(need - alloc.available())
            calls += 1
            self.evict_calls += 1
        spent = time.process_time() - t0
        if need > alloc.available():
            raise RuntimeError(f"evict left {alloc.available()} free slots, {need} needed (capacity too small for one request)")
        new = alloc.alloc(need)
        t1 = time.process_time()
        already = cache.insert(tokens[:aligned], np.concatenate([values, new]))
        cache.dec_lock_ref(handle)
        spent += time.process_time() - t1
        alloc.free(new[: already - len(values)])  # tokens the cache already had: the copies are ours
        self.calls += calls + 2
        self.seconds += spent
        self.reused += len(values)
        self.total += len(tokens)


def replay(target: Target, page_size: int, workload: Workload, instances: int,
           capacity: int = DEFAULT_CAPACITY, max_seconds: float = 60.0, wall_seconds: float | None = None) -> Throughput:
    """Replay ``workload`` x ``instances`` through a fresh cache of ``target``; stops early (and says
    so: see :func:`cut_short`) after ``max_seconds`` of this process's CPU time since the replay
    began, after ``wall_seconds`` of wall time (default ``WALL_FACTOR`` x ``max_seconds``), or at
    the first failure. The bound is CPU time so that a loaded machine gives the same complete
    replay, only later; the wall bound is a backstop against a machine that gives us almost no CPU."""
    run = _Replay(target, page_size, capacity)
    stream = requests_at_scale(workload, instances)
    wall = WALL_FACTOR * max_seconds if wall_seconds is None else wall_seconds
    cpu_deadline, wall_deadline = time.process_time() + max_seconds, time.monotonic() + wall
    stopped = ""
    enabled = gc.isenabled()
    gc.disable()  # as in the bench: collections land in whichever call is unlucky
    # The collections between requests then scan only the replay's objects: with an engine
    # imported (about 600k objects) each full one took 0.35 s CPU, more than the cache's own time.
    gc.freeze()
    done = 0
    try:
        for tokens in stream:
            bound = (f"{max_seconds:g} s CPU" if time.process_time() > cpu_deadline
                     else f"{wall:g} s wall" if time.monotonic() > wall_deadline else "")
            if bound:
                stopped = f"{CUT_SHORT} {done} of {len(stream)} requests ({bound})"
                break
            guarded("one request (match, lock, evict, insert, unlock)", run.request, tokens)
            done += 1
            if done % 256 == 0:
                gc.collect()
    except Exception as exc:  # noqa: BLE001 - the target's failure is the result
        stopped = f"request {done + 1}: {type(exc).__name__}: {str(exc)[:160]}"
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
    return Throughput(workload.name, done, run.calls, run.seconds, run.reused / max(1, run.total), run.evict_calls, stopped)


def cut_short(stopped: str) -> bool:
    """Whether a replay that says ``stopped`` was stopped by a time bound before its last request
    (a failure of the target is a result, not a cut; an empty ``stopped``: complete)."""
    return stopped.startswith(CUT_SHORT)


def ledger_workloads(scale: int = DEFAULT_SCALE) -> list[Workload]:
    """The four ledger workloads at ``scale``."""
    return [make(scale=scale) for make in SEED_WORKLOADS]


def describe_setup(scale: int, capacity: int, fill: int) -> dict[str, Any]:
    workloads = {}
    for w in ledger_workloads(scale):
        k = instances_for(w, capacity, fill)
        workloads[w.name] = {"instances": k, "requests": len(w.requests) * k, "tokens": w.total_tokens * k}
    return {"scale": scale, "capacity_tokens": capacity, "fill": fill, "workloads": workloads}
