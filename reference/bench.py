"""Throughput of the reference cache on a prefix-heavy request stream (a benchmark, not a test).

    python -m radixcheck.reference.bench [--requests 20000] [--seed 0]

The stream mimics serving: a few system prompts, conversations that grow turn by turn, and
branching continuations, so most requests match a long prefix and many diverge mid-edge.
Each request is one match_prefix + one insert (+ lock/unlock), as a server would do.
"""

from __future__ import annotations

import platform
import time

import numpy as np

from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int
from radixcheck.properties.cache.contract import SlotAllocator
from radixcheck.reference import RadixCache


def prefix_heavy_stream(n: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    systems = [rng.integers(0, 32000, 256).tolist() for _ in range(4)]
    live: list[list[int]] = []
    stream = []
    for _ in range(n):
        if live and rng.random() < 0.7:
            base = live[rng.integers(len(live))]
            cut = int(rng.integers(len(base) // 2, len(base) + 1))  # continue, or branch mid-way
            req = base[:cut] + rng.integers(0, 32000, int(rng.integers(8, 64))).tolist()
        else:
            req = systems[rng.integers(len(systems))] + rng.integers(0, 32000, 32).tolist()
        live = (live + [req])[-64:]
        stream.append(req)
    return stream


def run(requests: int, seed: int) -> dict[str, float]:
    stream = prefix_heavy_stream(requests, seed)
    allocator = SlotAllocator(sum(map(len, stream)) + 1)
    cache = RadixCache(allocator)
    start = time.perf_counter()
    reused = 0
    for tokens in stream:
        values, handle = cache.match_prefix(tokens)
        cache.inc_lock_ref(handle)
        new = allocator.alloc(len(tokens) - len(values))
        prefix_len = cache.insert(tokens, np.concatenate([values, new]))
        allocator.free(new[: prefix_len - len(values)])
        cache.dec_lock_ref(handle)
        reused += len(values)
    elapsed = time.perf_counter() - start
    total = sum(map(len, stream))
    return {"requests": requests, "seconds": elapsed, "ops_per_s": 2 * requests / elapsed,
            "requests_per_s": requests / elapsed, "hit_rate": reused / total}


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reference.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=positive_int, default=20000, help="requests in the stream (default 20000)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="stream seed (default 0)")
    args = parser.parse_args(argv)
    r = run(args.requests, args.seed)
    print(f"reference RadixCache, {r['requests']} requests (match+insert each), hit rate {r['hit_rate']:.1%}")
    print(f"{r['ops_per_s']:,.0f} match+insert operations/s ({r['requests_per_s']:,.0f} requests/s, {r['seconds']:.2f} s)")
    print(f"python {platform.python_version()} on {platform.machine()}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
