"""The churn both reference-tier bookkeeping tests drive (kept sizes, eviction candidates): requests
over shared prefixes, transfers completed in random order, both tiers evicted, now and then a
quarantine, and optionally a reset midway; then the world's oracles judge the run."""

from __future__ import annotations

import random

from radixcheck.properties.tiers.world import TierWorld


def churn(world: TierWorld, rng: random.Random, steps: int, quarantine_rate: float, reset_at: int | None = None) -> None:
    prefixes = [[rng.randrange(1000) for _ in range(16 * world.page_size)] for _ in range(6)]
    page = 4 * world.page_size
    for step in range(steps):
        tokens = rng.choice(prefixes)[: rng.randrange(1, 5) * page] + [rng.randrange(1000) for _ in range(rng.randrange(2, 12))]
        world.serve(tokens, load=rng.random() < 0.8)
        while len(world.running) > rng.randrange(0, 3):
            world.finish(rng.randrange(len(world.running)))
        pending = world.pending()
        for number in rng.sample(pending, k=len(pending) // 2):
            if any(t.number == number for t in world.controller.pending):
                world.complete(number)
        if rng.random() < 0.3:
            world.evict(rng.randrange(1, 40))
        if rng.random() < 0.2:
            world.evict_host(rng.randrange(1, 40))
        if rng.random() < quarantine_rate and not world.running:
            world.quarantine(rng.choice(prefixes)[: rng.randrange(1, 5) * page])
        if step == reset_at:
            while world.running:
                world.finish(0)
            world.complete_all()
            world.reset()
