"""A production-scale tier world: many requests over shared prefixes through a tiered cache, with
its transfers completed in random order, allocations failing now and then, and both tiers under
pressure; every event judged by the tier model's incremental hooks, conservation on both tiers
every ``--check-every`` operations and at the end.

    python -m radixcheck.reports.tier_scale                                    # the reference
    .audit-venv/bin/python -m radixcheck.reports.tier_scale --target radixcheck.properties.adapters.sglang_hicache:hicache_rust
    python -m radixcheck.reports.tier_scale --target radixcheck.properties.tiers.mutants:LoadLockedTiers --seeds 50 --requests 300

A target that declares ``lifecycle="tree"`` gets running requests too, half the arrivals
(:mod:`radixcheck.properties.tiers.lifecycle`): admitted with their load-backs in flight, computing
chunks, publishing them while backups are pending, and ending as a finish, a retract or an abort.
A target that declares a state pool (``TierCapabilities(second_pool=StatePool())``) gets requests
that end where a shared prefix's page ends (three in ten): the state inserted there is matched,
through both tiers, by the requests that share the prefix, and judged at each forward.

The tier model's hooks cost what each event touches (the pages of one request, the slots of one
transfer); only the conservation check reads every slot, which is why it runs every
``--check-every`` operations, not after each. Prints the requests served, the transfers (and the
load-backs among them: a run with none says so), the largest tree (pages on device and host) and
the time per request; exits 1 with the oracle's sentence if one fires, or with one paragraph if a
call overruns the per-operation limit (``RADIXCHECK_OP_TIMEOUT``): the seed, the call, the limit,
the request and the command that replays it (the seed reproduces either: the run is
deterministic). It runs the write policies the target declares (``TierCapabilities.write_policies``),
or those ``--policy`` names among them.

Each run starts with the audit's tier production world (:mod:`radixcheck.properties.tiers.scale`:
a wide tree then one mass eviction, and, in each policy's first seed, a conversation 1,200 pages
deep; ``--no-stories`` leaves it out), where an O(n) scan per evicted leaf or a recursive walk up a deep path fails in seconds.
The whole command is bounded by ``--budget`` seconds of wall clock: when it is spent, the run in
progress stops after its current request and says how far it got and that the rest was not judged
(a cache whose every call stays under the limit but whose traffic crawls no longer runs unbounded).
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
from typing import Any

from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.oracles.violations import ContractViolation
from radixcheck.properties.target import OperationTimeout, guarded
from radixcheck.properties.tiers.contract import TierCapabilities
from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld
from radixcheck.properties.tiers.requests import world_class_for
from radixcheck.properties.tiers.scale import production_stories, world_for
from radixcheck.reports.machine import cpu_line

REFERENCE = "radixcheck.reference.tiered_cache:TieredRadixCache"


def _factory(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class BudgetSpent(Exception):
    """The command's ``--budget`` ran out during a run: how far it got (no finding in what ran)."""


def run(spec: str, policy: str, requests: int, seed: int, device: int, host: int, check_every: int,
        page_size: int = 1, stories: str = "", deadline: float = float("inf")) -> dict[str, Any]:
    """One run; ``stories``: the tier production world first (module docstring), ``"wide"`` or
    ``"both"`` (with the deep conversation); ``deadline``: a ``time.monotonic()`` past which it stops
    (:class:`BudgetSpent`) after its current request."""
    rng = random.Random(seed)
    factory = _factory(spec)
    if stories:
        try:
            production_stories(world_for(factory, page_size, policy, seed=seed), random.Random(seed), deep=stories == "both")
        except OperationTimeout as hang:
            hang.stage = "; ".join(getattr(hang, "__notes__", [])).removeprefix("radixcheck: ")  # type: ignore[attr-defined]
            raise
    caps = getattr(factory, "tier_capabilities", None)
    lifecycle = caps is not None and caps.lifecycle in ("tree", "requests")
    world_class = world_class_for(caps)
    states = caps is not None and getattr(caps, "second_pool", None) is not None
    prefixes = [[rng.randrange(50_000) for _ in range(rng.choice((64, 128, 256)) * page_size)] for _ in range(24)]
    ops, peak_device, peak_host, start = 0, 0, 0, time.perf_counter()
    stage = "building the cache (its factory)"  # where the run is, for a hang's finding
    try:
        world = guarded("factory", world_class, factory, page_size, policy,
                        device_slots=device, host_slots=host, seed=seed)
        world.log = _Tail()  # the world's log is a repro's; at scale keep only the last lines
        for request in range(1, requests + 1):
            if time.monotonic() > deadline:
                raise BudgetSpent(f"--budget spent: served {request - 1} of {requests} requests in "
                                  f"{time.perf_counter() - start:.0f} s with no finding; the rest was not judged")
            stage = f"serving request {request} of {requests}"
            tokens = rng.choice(prefixes)[: rng.randrange(1, 9) * 32 * page_size] + [rng.randrange(50_000)
                                                                                     for _ in range(rng.randrange(8, 96))]
            if states and rng.random() < 0.3:  # a request that ends where its shared prefix's page ends: the state
                tokens = tokens[: len(tokens) // (32 * page_size) * 32 * page_size] or tokens  # inserted there is matched again
            if rng.random() < 0.05:
                world.fail_next([rng.random() < 0.5 for _ in range(3)])
            if lifecycle and rng.random() < 0.5:
                _lifecycle_step(world, rng, tokens)  # type: ignore[arg-type]
            else:
                world.serve(tokens, load=rng.random() < 0.9)
            while len(world.running) > rng.randrange(1, 9):
                world.finish(rng.randrange(len(world.running)))
            pending = world.pending()  # a random part of them completes, in random order; the rest stays in flight
            for number in rng.sample(pending, k=int(len(pending) * rng.random() ** 0.5)):
                if any(t.number == number for t in world.controller.pending):  # a cache that waited on a copy had it already
                    world.complete(number)
            if rng.random() < 0.1:
                world.evict_host(rng.randrange(1, 512))
            ops += 1
            if ops % check_every == 0:
                world.check()
            if ops % check_every == 0 or request == requests:  # the last request's too: a run shorter than
                # --check-every would otherwise print peaks of 0 after thousands of transfers
                peak_device, peak_host = max(peak_device, world.cache.device_size()), max(peak_host, world.cache.host_size())
        stage = "finishing, completing every transfer and checking, after the last request"
        while world.running:
            world.finish(0)
        if isinstance(world, LifecycleTierWorld):
            world.abort_all()
        world.complete_all()
        world.check()
    except OperationTimeout as hang:  # a call overran the per-operation limit: main() says it as a finding
        hang.stage = stage  # type: ignore[attr-defined]
        raise
    seconds = time.perf_counter() - start
    return {"target": spec, "policy": policy, "requests": requests, "seconds": round(seconds, 1),
            "ms_per_request": round(1000 * seconds / requests, 2), "transfers": world.controller.transfers, "loads": world.controller.loads,
            "peak_device_tokens": peak_device, "peak_host_tokens": peak_host, "device_slots": device, "host_slots": host}


def _lifecycle_step(world: LifecycleTierWorld, rng: random.Random, tokens: list[int]) -> None:
    """For a target declaring ``lifecycle="tree"`` (or ``"requests"``: the same steps, by the cache's
    own methods): a running request is admitted on ``tokens`` (its load-back left in flight), and
    each running one computes a chunk, perhaps publishes it, and perhaps ends (a finish, or a
    retract or an abort that does not wait for its transfers)."""
    for index in range(len(world.lives) - 1, -1, -1):
        if rng.random() < 0.1:  # before its next forward: its load-back may still be in flight
            world.end(index, rng.choice(("retract", "abort")))
            continue
        world.compute(index, rng.randrange(1, 65))
        if rng.random() < 0.7:
            world.publish(index)
        if rng.random() < 0.2:
            world.end(index, rng.choice(("finish", "finish", "retract", "abort")))
    if len(world.lives) < 6:
        world.admit(tokens, load=rng.random() < 0.9)  # computes from the next step on


class _Tail(list):
    """A log that keeps its last 200 lines (a scale run's repro would be its seed, not its log)."""

    def append(self, line: str) -> None:
        super().append(line)
        if len(self) > 400:
            del self[:200]


def hang_finding(args: argparse.Namespace, policy: str, seed: int, hang: OperationTimeout) -> str:
    """A call that overran the per-operation limit, as one paragraph (not a traceback): the run (seed
    and policy), the call and the limit (the timeout's own message), the request it was serving, and
    the command that replays it (a run is deterministic in its seed)."""
    replay = [f"--target {args.target}", f"--policy {policy}", f"--seed {seed}", f"--requests {args.requests}",
              f"--device-slots {args.device_slots}", f"--host-slots {args.host_slots}", f"--check-every {args.check_every}"]
    replay += ["--no-stories"] if args.no_stories else []
    where = getattr(hang, "stage", "")  # the timeout's message names the limit it met and how to change it: said once
    return (f"{args.target} {policy} seed {seed}: HANG, {where}: {hang}. The run is deterministic: "
            f"`python -m radixcheck.reports.tier_scale {' '.join(replay)}` replays it.")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m radixcheck.reports.tier_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default=REFERENCE, help=f"a tier factory, module:name (default {REFERENCE})")
    parser.add_argument("--policy", action="append", choices=("write_through", "write_back", "write_through_selective"))
    parser.add_argument("--requests", type=positive_int, default=2000)
    parser.add_argument("--device-slots", type=positive_int, default=8192)
    parser.add_argument("--host-slots", type=positive_int, default=16384)
    parser.add_argument("--check-every", type=positive_int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=positive_int, default=1, help="runs with seeds --seed, --seed + 1, ... (default 1)")
    parser.add_argument("--budget", type=positive_int, default=600,
                        help="seconds of wall clock for the whole command; a run in progress then stops (default 600)")
    parser.add_argument("--no-stories", action="store_true",
                        help="leave out the tier production world (a wide tree, a deep conversation) before each run")
    args = parser.parse_args(argv)
    try:
        factory = _factory(args.target)
    except (ImportError, AttributeError, ValueError) as exc:
        parser.error(f"--target {args.target!r}: not a tier factory module:name ({type(exc).__name__}: {exc})")
    declared = (getattr(factory, "tier_capabilities", None) or TierCapabilities()).write_policies
    undeclared = [p for p in args.policy or () if p not in declared]
    if undeclared:
        parser.error(f"--policy {undeclared[0]}: {args.target} declares write policies {', '.join(declared)} only")
    policies = args.policy or list(declared)  # a target is driven as its callers would: its declared policies only
    print(cpu_line())
    failed, deadline = 0, time.monotonic() + args.budget
    for policy in policies:
        for seed in range(args.seed, args.seed + args.seeds):
            if time.monotonic() > deadline:
                print(f"{args.target} {policy} seed {seed}: not run (--budget {args.budget} s spent)", flush=True)
                continue
            try:
                row = run(args.target, policy, args.requests, seed, args.device_slots, args.host_slots, args.check_every,
                          stories="" if args.no_stories else "both" if seed == args.seed else "wide", deadline=deadline)
                print(" ".join(f"{k}={v}" for k, v in row.items()) + f" seed={seed}", flush=True)
                if not row["loads"]:  # a pass that never brought a page back must not read as one that did
                    print(f"note: seed {seed} loaded nothing back from host (the device never had to evict what a later "
                          f"request needed): a pass here says little of the tiers; give more --requests or fewer "
                          "--device-slots", flush=True)
            except ContractViolation as bug:
                print(f"{args.target} {policy} seed {seed}: BUG (radixcheck oracle {bug.oracle}): {bug}", flush=True)
                failed += 1
            except OperationTimeout as hang:
                print(hang_finding(args, policy, seed, hang), flush=True)
                failed += 1
            except BudgetSpent as spent:
                print(f"{args.target} {policy} seed {seed}: CUT SHORT: {spent}", flush=True)
            except RecursionError as crash:  # a recursive walk at scale: the finding, not a traceback
                print(f"{args.target} {policy} seed {seed}: CRASH (RecursionError: {crash}): "
                      + "; ".join(getattr(crash, "__notes__", [])), flush=True)
                failed += 1
    if args.seeds > 1:
        print(f"{failed} of {args.seeds * len(policies)} runs failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
