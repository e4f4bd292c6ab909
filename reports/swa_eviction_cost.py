"""What one mass eviction costs SGLang's FULL+SWA tree through its adapter (issue 32: the 500-leaf
eviction of the production-scale test once exceeded the 5 s per-operation limit).

    .audit-venv/bin/python -m radixcheck.reports.swa_eviction_cost [FACTORY] [--requests N]

Builds ``FACTORY`` (default ``unified_swa_python_lru``, the window hidden: every new token gets a live
window slot) at page size 1, inserts ``N`` requests of a 64-token shared prompt plus 16 tokens of
their own (each matched first, as a server admits it), then evicts everything in one call. Prints the
wall time of the inserts and of the eviction, the leaves and tokens evicted, and the machine (CPU,
load average): the figures of ``reports/findings/sglang_trees.md`` ("The CPU cost ...").
"""

from __future__ import annotations

import argparse
import os
import random
import time

import numpy as np

from radixcheck.properties.cache.contract import SlotAllocator


def measure(factory_name: str, requests: int) -> dict[str, float]:
    from radixcheck.properties.adapters import sglang_trees

    allocator = SlotAllocator(1 << 24)
    cache = sglang_trees.FACTORIES[factory_name](allocator, 1)
    stream = random.Random(0)
    prompt = [stream.randrange(150_000) for _ in range(64)]
    started = time.perf_counter()
    for _ in range(requests):
        tokens = prompt + [stream.randrange(150_000) for _ in range(16)]
        cached = cache.match_prefix(tokens)[0]
        cache.insert(tokens, np.concatenate([cached, allocator.alloc(len(tokens) - len(cached))]))
    inserts = time.perf_counter() - started
    held = cache.total_size()
    started = time.perf_counter()
    evicted = cache.evict(held)
    return {"inserts_s": inserts, "evict_s": time.perf_counter() - started, "tokens": evicted, "held": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("factory", nargs="?", default="unified_swa_python_lru")
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()
    if args.requests < 1:
        parser.error("--requests must be >= 1")
    from radixcheck.reports.machine import cpu_line  # the CPU, as every report names it

    got = measure(args.factory, args.requests)
    print(f"{args.factory}: {args.requests} inserts in {got['inserts_s']:.2f} s; one evict of {got['tokens']} tokens "
          f"(all {got['held']} cached, {args.requests * 2 + 3} nodes at most) in {got['evict_s']:.2f} s")
    print(f"machine: {cpu_line()}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
