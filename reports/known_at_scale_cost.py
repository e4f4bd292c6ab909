"""What re-judging a ``known:`` waiver costs the tier production world's mass eviction.

    python -m radixcheck.reports.known_at_scale_cost SPEC [--policy write_through] [--deviation NAME]

Builds the wide tree of the tier production world (:mod:`radixcheck.properties.tiers.scale`) for
the tier target ``SPEC`` at its smallest page size, once with the tier model alone and once with the
known deviation ``NAME`` kept beside it (what a ``known:`` waiver makes the world do), and prints the
CPU time of the one mass ``evict``, how the world ended (passed, or the finding and the deviations
that explain it) and the machine's load. On SGLang HiCache run it in the audit venv
(``radixcheck.properties.adapters.sglang_hicache:hicache_python`` / ``hicache_rust``); the figures of
reports/findings/sglang_trees.md ("Since then", session 56).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from radixcheck.argtypes import ArgumentParser
from radixcheck.properties.cache.deviations import resolve
from radixcheck.properties.target import load_target
from radixcheck.properties.tiers.scale import production_stories, world_for


def measure(spec: str, policy: str, deviation: str | None) -> dict[str, Any]:
    """The wide tree once: the mass evict's CPU seconds and how the world ended."""
    target = load_target(spec)
    world = world_for(target.factory, min(target.capabilities.page_sizes_tested()), policy)
    world.model.deviations = [resolve(deviation)()] if deviation else []
    evict, spent = world.evict, []

    def timed(num_tokens: int, said: bool = True) -> int:
        start = time.process_time()
        try:
            return evict(num_tokens, said)
        finally:
            spent.append(time.process_time() - start)

    world.evict = timed  # type: ignore[method-assign]
    try:
        production_stories(world, random.Random(0), deep=False)
        ended = "passed"
    except Exception as exc:  # noqa: BLE001 - how the world ended is the figure
        explained = sorted(getattr(exc, "explained_by", ()))
        ended = f"{type(exc).__name__}" + (f", explained by {', '.join(explained)}" if explained else ", explained by none")
    return {"evict_cpu_s": max(spent, default=float("nan")), "ended": ended}


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--policy", default="write_through")
    parser.add_argument("--deviation", default="suffix-refreshed-on-mid-edge-use")
    args = parser.parse_args()
    for kept in (None, args.deviation):
        row = measure(args.spec, args.policy, kept)
        print(f"{args.spec} {args.policy} deviation={kept or 'none'}: evict {row['evict_cpu_s']:.2f} s CPU; {row['ended']}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
