"""How close a correct cache comes to the step-cost watch's verdict: one production world, every
comparison the watch makes printed as its highest ratio per kind of call.

    python -m radixcheck.reports.step_cost_margin                              # the reference, page 1
    .audit-venv/bin/python -m radixcheck.reports.step_cost_margin --page-size 16 --declared \
        --target radixcheck.properties.adapters.vllm_prefix:vllm_prefix
    python -m radixcheck.reports.step_cost_margin --tiers --target radixcheck.reference.tiered_cache:TieredRadixCache

The watch (:mod:`radixcheck.properties.cache.step_cost`) fails a world once the large trees' median
cost is ``GROWTH`` times the small trees' over a span of ``SPAN``; a correct cache's highest ratio
is its margin. The plain world is built as the deep meta-tests build it (the page size declared
alone, so the deep history runs there; ``--declared``: as an audit builds it, the history at the
smallest declared page size only); ``--tiers``: the tier production world's watched story
(:mod:`radixcheck.properties.tiers.scale`). Prints one line per kind of call and size (the highest
ratio among the comparisons judged: span at least ``SPAN``), then the verdict; exits 1 on a finding, 2 when
another oracle's finding ended the world (a known one: SGLang HiCache's order, #3, ends its wide tree at the
mass evict, after every watched call).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from radixcheck import profiles
from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.oracles.violations import StepCostViolation
from radixcheck.properties.cache import step_cost

REFERENCE = "radixcheck.reference:RadixCache"
TIER_REFERENCE = "radixcheck.reference.tiered_cache:TieredRadixCache"


def _factory(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def watched() -> list[step_cost.StepCostWatch]:
    """Every watch made from now on (the world makes its own and drops it when built): kept here to read its margin."""
    made: list[step_cost.StepCostWatch] = []
    init = step_cost.StepCostWatch.__init__

    def keeping(watch: step_cost.StepCostWatch, *args: Any, **keywords: Any) -> None:
        init(watch, *args, **keywords)
        made.append(watch)

    step_cost.StepCostWatch.__init__ = keeping  # type: ignore[method-assign]
    return made


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", help=f"module:factory (default: {REFERENCE}, or {TIER_REFERENCE} with --tiers)")
    parser.add_argument("--page-size", type=positive_int, default=None, help="default: the target's smallest")
    parser.add_argument("--declared", action="store_true",
                        help="keep the target's declared page sizes (as an audit that builds a world at each: the deep history "
                             "only at the smallest); default: the page size declared alone, the deep history there")
    parser.add_argument("--dump", metavar="FILE", help="write every watched call (kind, size class, tree, seconds, probe seconds) as JSON")
    parser.add_argument("--tiers", action="store_true", help="the tier production world (its write policy: the first declared)")
    args = parser.parse_args(argv)
    factory = _factory(args.target or (TIER_REFERENCE if args.tiers else REFERENCE))
    watches = watched()
    started, cpu = time.monotonic(), time.process_time()
    try:
        if args.tiers:
            from radixcheck.properties.tiers.scale import production_stories, world_for

            caps = factory.tier_capabilities
            page = args.page_size or min(caps.page_sizes_tested())
            production_stories(world_for(factory, page, caps.write_policies[0]), random.Random(0), deep=False)
        else:
            from radixcheck.properties.cache.scale_machine import scale_machine_for
            from radixcheck.properties.findings.verdict import run_machine

            caps = factory.capabilities
            page = args.page_size or min(caps.page_sizes_tested())
            declared = caps if args.declared else dataclasses.replace(caps, page_sizes=(page,))
            run_machine(scale_machine_for(factory, declared, page, "step_cost_margin"), profiles.SETTINGS["ci"])
        verdict, code = "passes the watch", 0
    except StepCostViolation as exc:
        verdict, code = f"FAILS the watch: {exc}", 1
    except Exception as exc:  # noqa: BLE001 - another oracle's finding ends the world: the calls watched till then still count
        first = str(exc).splitlines()[0] if str(exc) else ""
        verdict, code = f"stopped by another finding, not the watch's ({type(exc).__name__}: {first[:200]})", 2
    highest = [(key, growth) for watch in watches for key, growth in watch.highest.items()]
    for (what, size), growth in sorted(highest, key=lambda item: -item[1].ratio)[:8]:
        print(f"{what:>13} ~{2 ** (size / step_cost.SHAPES_PER_OCTAVE):6.0f} tokens: highest ratio {growth.ratio:5.2f} "
              f"(span {growth.span:5.1f}, groups of {growth.calls} calls: {growth.small_cost * 1e6:,.0f} us in "
              f"{growth.small_tree:,.0f} tokens, {growth.large_cost * 1e6:,.0f} us in {growth.large_tree:,.0f}; "
              f"probe {growth.load:4.2f}x, unprobed {growth.large_cost / max(growth.small_cost, 1e-9):5.2f})")
    if args.dump:
        rows = [[what, size, tree, seconds, probe] for watch in watches for (what, size), calls in watch.calls.items()
                for tree, seconds, probe in calls]
        Path(args.dump).write_text(json.dumps(rows))
    print(f"{factory.__name__} page {page}: {verdict}; GROWTH {step_cost.GROWTH}, SPAN {step_cost.SPAN}; "
          f"{time.monotonic() - started:.0f} s wall, {time.process_time() - cpu:.0f} s CPU")
    return code


if __name__ == "__main__":
    sys.exit(main())
