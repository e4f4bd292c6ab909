"""How fast the conformance machine steps in a production-sized world, on the reference cache.

    python -m radixcheck.reports.machine_speed                    # 10^5 cached tokens, 300 steps of each kind
    python -m radixcheck.reports.machine_speed --tokens 20000 --steps 100

It fills the reference (page size 1) with requests of 8-16 tokens on four shared prompts until
``--tokens`` are cached, through the machine's own request helper (so every oracle runs), then
times three kinds of step, each followed by the two invariants as in a run: a match of a cached
request, a new request inserted, and an eviction of 8 tokens. CPU time, one process: steps per
second in all, and the suite's own milliseconds per step (the step less the time inside the
reference's calls, which walks its whole tree for every size it reports). It uses only helpers the machine has had since before its
oracles were incremental, so the same command measures an older checkout.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.properties.cache import machine as cache_machine
from radixcheck.properties.cache.machine import machine_for
from radixcheck.reference import RadixCache
from radixcheck.reports.machine import cpu_model


def _request(stream: random.Random, prompts: list[tuple[int, ...]]) -> tuple[int, ...]:
    return stream.choice(prompts) + tuple(stream.randrange(151_936) for _ in range(stream.randint(8, 16)))


class _TargetClock:
    """Wraps the machine's ``guarded`` to add up the CPU time spent inside the target's calls."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._guarded = cache_machine.guarded

    def __call__(self, *args: object) -> object:
        begin = time.process_time()
        try:
            return self._guarded(*args)
        finally:
            self.seconds += time.process_time() - begin


def measure(tokens: int, steps: int, seed: int = 0) -> dict[str, float]:
    """Seconds to build the world, and steps per second (CPU) of each kind of step in it: all of
    a step, and the suite's own part (the step less the time inside the reference's calls)."""
    clock = _TargetClock()
    cache_machine.guarded = clock
    try:
        return _measure(tokens, steps, seed, clock)
    finally:
        cache_machine.guarded = clock._guarded


def _measure(tokens: int, steps: int, seed: int, clock: _TargetClock) -> dict[str, float]:
    machine = machine_for(RadixCache, RadixCache.capabilities, 1, "machine_speed")()
    stream = random.Random(seed)
    prompts = [tuple(stream.randrange(151_936) for _ in range(64)) for _ in range(4)]
    cached: list[tuple[int, ...]] = []
    start = time.process_time()
    while machine.model.total() < tokens:
        cached.append(_request(stream, prompts))
        machine._insert_request(cached[-1])
    figures = {"build_seconds": time.process_time() - start, "cached_tokens": float(machine.model.total())}

    def timed(kind: str, step: Callable[[], object]) -> None:
        begin, in_target = time.process_time(), clock.seconds
        for _ in range(steps):
            step()
            machine.sizes_add_up()
            machine.slots_conserved()
        total = time.process_time() - begin
        figures[f"{kind}_steps_per_s"] = steps / total
        figures[f"{kind}_suite_ms_per_step"] = 1000 * (total - (clock.seconds - in_target)) / steps

    timed("match", lambda: machine._match(stream.choice(cached)))
    timed("insert", lambda: machine._insert_request(_request(stream, prompts)))
    timed("evict", lambda: machine._evict(8))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.machine_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=positive_int, default=100_000, help="cached tokens in the world (default 10^5)")
    parser.add_argument("--steps", type=positive_int, default=300, help="steps of each kind to time")
    args = parser.parse_args(argv)
    figures = measure(args.tokens, args.steps)
    print(f"CPU: {cpu_model()}")
    for name, value in figures.items():
        print(f"{name:26s} {value:12.2f}")


if __name__ == "__main__":
    main()
