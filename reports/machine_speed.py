"""How fast the conformance machine steps in a production-sized world, on the reference cache.

    python -m radixcheck.reports.machine_speed                    # 10^5 cached tokens, 300 steps of each kind
    python -m radixcheck.reports.machine_speed --tokens 20000 --steps 100

It fills the reference (page size 1) with requests of 8-16 tokens on four shared prompts until
``--tokens`` are cached, through the machine's own request helper (so every oracle runs), then
times three kinds of step, each followed by the two invariants as in a run: a match of a cached
request, a new request inserted, and an eviction of 8 tokens. CPU time, one process; the figures
are for comparing oracles, not caches. It uses only helpers the machine has had since before its
oracles were incremental, so the same command measures an older checkout.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.properties.cache_machine import machine_for
from radixcheck.reference import RadixCache
from radixcheck.reports.machine import cpu_model


def _request(stream: random.Random, prompts: list[tuple[int, ...]]) -> tuple[int, ...]:
    return stream.choice(prompts) + tuple(stream.randrange(151_936) for _ in range(stream.randint(8, 16)))


def measure(tokens: int, steps: int, seed: int = 0) -> dict[str, float]:
    """Seconds to build the world, and steps per second (CPU) of each kind of step in it."""
    machine = machine_for(RadixCache, RadixCache.capabilities, 1, "machine_speed")()
    stream = random.Random(seed)
    prompts = [tuple(stream.randrange(151_936) for _ in range(64)) for _ in range(4)]
    cached: list[tuple[int, ...]] = []
    start = time.process_time()
    while machine.model.total() < tokens:
        cached.append(_request(stream, prompts))
        machine._insert_request(cached[-1])
    figures = {"build_seconds": time.process_time() - start, "cached_tokens": float(machine.model.total())}

    def timed(step: Callable[[], object]) -> float:
        begin = time.process_time()
        for _ in range(steps):
            step()
            machine.sizes_add_up()
            machine.slots_conserved()
        return steps / (time.process_time() - begin)

    figures["match_steps_per_s"] = timed(lambda: machine._match(stream.choice(cached)))
    figures["insert_steps_per_s"] = timed(lambda: machine._insert_request(_request(stream, prompts)))
    figures["evict_steps_per_s"] = timed(lambda: machine._evict(8))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.machine_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=positive_int, default=100_000, help="cached tokens in the world (default 10^5)")
    parser.add_argument("--steps", type=positive_int, default=300, help="steps of each kind to time")
    args = parser.parse_args(argv)
    figures = measure(args.tokens, args.steps)
    print(f"CPU: {cpu_model()}")
    for name, value in figures.items():
        print(f"{name:22s} {value:12.1f}")


if __name__ == "__main__":
    main()
