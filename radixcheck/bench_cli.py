"""The ``radixcheck bench`` subcommand: its arguments, and the run from arguments to outputs.

    radixcheck bench mymodule:make                       # table; target beside the reference
    radixcheck bench mymodule:make --json cost.json --report cost.md --plot cost.png --max-seconds 60

A KV-event index or a tenant tree is measured on its own operations in a router's world
(:mod:`radixcheck.bench_router`), beside the reference of its kind.

Exit 0: measured (flags and failed operations are findings, printed); 1: with ``--fail-on-flag``,
the target has a flagged or failed operation; 2: usage or load error, a target the bench cannot
measure (a router pair), or no operation measured at all (one line).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

from radixcheck.argtypes import output_file, positive_int, positive_seconds
from radixcheck.bench import (
    DEFAULT_MAX_SECONDS,
    DEFAULT_MEMORY_MIB,
    DEFAULT_REPEATS,
    BenchPlan,
    bench,
    default_page_size,
    measurable,
    tier_write_policy,
)
from radixcheck.properties.target import (
    DEFAULT_TARGET,
    TARGET_ENV,
    TIMEOUT_ENV,
    Target,
    TargetError,
    check_target,
    load_target,
)

EXIT_MEASURED, EXIT_FLAGGED, EXIT_USAGE = 0, 1, 2
TIERED_REFERENCE = "radixcheck.reference.tiered_cache:TieredRadixCache"
"""What a tiered target is measured beside."""
INDEX_REFERENCE = "radixcheck.reference.kv_index:KvIndex"
TREE_REFERENCES = {"text": "radixcheck.reference.tenant_tree:TenantTree", "tokens": "radixcheck.reference.tenant_tree:TokenTenantTree"}
ROUTER_KINDS = {"index": "a KV-event index", "tenant_tree": "a tenant tree"}


def reference_for(target: Target) -> str:
    """The reference a target is measured beside: the one of its kind (and key kind)."""
    if target.kind == "tier":
        return TIERED_REFERENCE
    if target.kind == "index":
        return INDEX_REFERENCE
    if target.kind == "tenant_tree":
        return TREE_REFERENCES[target.capabilities.key_kind]
    return DEFAULT_TARGET


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from exc
    if len(sizes) < 2 or min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give two or more sizes, each >= 2")
    return tuple(sorted(set(sizes)))


def add_bench_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    bench_parser = sub.add_parser(
        "bench", help="measure how each cache (or index, or tenant tree) operation's cost grows with its size (target beside "
                      "the reference)",
        description="Measure FACTORY's cost per unit of work for each contract operation at cache sizes from ~10^2 to "
                    "~10^5 tokens (a KV-event index or a tenant tree: in a router's world of 16 to 12,500 prompts), fit "
                    "the growth exponent, and flag operations whose cost per unit grows about linearly with the size. "
                    "Exit 0: measured; 1: flagged (with --fail-on-flag); 2: usage or load error.")
    bench_parser.add_argument("factory", nargs="?",
                              help=f"the cache (or KV-event index, or tenant tree) factory, 'package.module:factory' "
                                   f"(default: ${TARGET_ENV}, else {DEFAULT_TARGET}, "
                                   "as the pytest plugin chooses)")
    bench_parser.add_argument("--json", type=output_file, help="write every point, fit and verdict (JSON) here")
    bench_parser.add_argument("--report", type=output_file, help="write a markdown report here (it shows the --plot, if one is written)")
    bench_parser.add_argument("--plot", type=output_file, help="write the log-log plot here (needs matplotlib: radixcheck[plots])")
    bench_parser.add_argument("--max-seconds", type=positive_seconds, default=str(DEFAULT_MAX_SECONDS),
                              help=f"bound on the whole run, s of wall-clock time (default {DEFAULT_MAX_SECONDS:g}; "
                                   "--cpu-budget: of CPU time)")
    bench_parser.add_argument("--cpu-budget", action="store_true",
                              help="count --max-seconds in CPU time (this process's and a wire server's), not wall-clock time: "
                                   "which sizes get measured then does not depend on the machine's load")
    bench_parser.add_argument("--op-timeout", type=positive_seconds, help="limit of each call into the target, s of CPU time (default 5)")
    bench_parser.add_argument("--max-memory-mib", type=positive_int, default=DEFAULT_MEMORY_MIB,
                              help=f"resident memory the target may add before it is stopped (default {DEFAULT_MEMORY_MIB})")
    bench_parser.add_argument("--sizes", type=_sizes, help="wide tree sizes in leaves of 8 tokens, or an index's or tenant tree's "
                                                          "world in prompts (default 16,128,1024,4096,12500)")
    bench_parser.add_argument("--deep-levels", type=_sizes, help="deep tree depths (default 16,64,256,1024)")
    bench_parser.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS,
                              help=f"timed batches a size (default {DEFAULT_REPEATS})")
    bench_parser.add_argument("--page-size", type=positive_int, help="page size (default 1 where offered, else the smallest declared)")
    bench_parser.add_argument("--no-reference", action="store_true", help="do not measure the reference beside the target")
    bench_parser.add_argument("--fail-on-flag", action="store_true", help="exit 1 when the target has a flagged operation")
    bench_parser.add_argument("--seed", type=int, default=0, help="seed of the query choices (default 0)")
    return bench_parser  # radixcheck.argtypes.ArgumentParser, as its parent: a usage error is one line, exit 2


def server_counted(target: Target) -> Callable[[], float]:
    """The clock a target's calls are timed on: this process's CPU time, and for a wire server its
    CPU time too (a call's cost is spent there; this side only encodes and waits). An idle server's
    clock stands still, so the reference, timed on the same clock, is measured as before."""
    from radixcheck.properties.adapters.wire import WireFactory

    return target.factory.cpu_time if isinstance(target.factory, WireFactory) else time.process_time


def run_bench(args: argparse.Namespace) -> int:
    from radixcheck.bench_report import markdown, plot, table, to_json, write_json
    from radixcheck.reports.machine import describe, one_line

    def fail(message: str) -> int:
        print(f"radixcheck bench: error: {message}", file=sys.stderr)
        return EXIT_USAGE

    if args.op_timeout:
        os.environ[TIMEOUT_ENV] = args.op_timeout
    spec = args.factory or os.environ.get(TARGET_ENV, DEFAULT_TARGET)
    name, eq, rest = spec.partition("=")
    if eq and ":" not in name:  # the plugin's '[name=]package.module:factory'
        spec = rest
    try:
        target = load_target(spec)
        refused = measurable(target)
        if refused:
            return fail(refused)
        check_target(target)
        reference = load_target(reference_for(target))
    except TargetError as exc:
        return fail(str(exc))
    router = ROUTER_KINDS.get(target.kind)
    if router:
        if args.page_size or args.deep_levels:
            return fail(f"{'--page-size' if args.page_size else '--deep-levels'}: {target.spec} is {router}, which has "
                        "neither pages nor a deep tree (--sizes counts its world's prompts)")
        page_size = 1  # no pages: the runner's slot for one
        with_reference = not args.no_reference and target.spec != reference.spec
    else:
        page_size = args.page_size or default_page_size(target)
        if page_size not in target.capabilities.page_sizes:
            return fail(f"--page-size {page_size}: {target.spec} declares page sizes {list(target.capabilities.page_sizes)}")
        with_reference = not args.no_reference and target.spec != reference.spec and page_size in reference.capabilities.page_sizes
    plot_path = args.plot
    try:
        plan = BenchPlan(**{k: v for k, v in (("wide_leaves", args.sizes), ("deep_levels", args.deep_levels)) if v},
                         repeats=args.repeats, max_seconds=float(args.max_seconds), memory_mib=args.max_memory_mib,
                         cpu_budget=args.cpu_budget)
    except ValueError as exc:
        return fail(str(exc))
    tiered = f", its device tier under {tier_write_policy(target)} (completions delivered at once)" if target.kind == "tier" else ""
    where = f"({router}) in a router's world" if router else f"at page size {page_size}{tiered}"
    print(f"radixcheck: bench {target.spec} {where}"
          + (" beside the reference (interleaved)" if with_reference else "")
          + f"; at most {plan.max_seconds:g} s{' of CPU time' if plan.cpu_budget else ''}", flush=True)
    pairs = [(target, page_size)] + ([(reference, page_size)] if with_reference else [])
    clock = server_counted(target)
    if clock is not time.process_time:
        print("radixcheck: a wire server: each call's cost is this process's CPU time and the server's", flush=True)
    results = bench(pairs, plan, seed=args.seed, progress=lambda line: print(f"radixcheck: {line}", flush=True), clock=clock,
                    references=True)
    mine, ref = results[0], (results[1] if with_reference else None)
    machine = describe()
    print()
    print(table(mine, ref))
    print(f"\nCPU: {machine['cpu']} ({machine['cores']} cores); {mine.seconds:.0f} s")
    if args.json:
        write_json(args.json, to_json(mine, ref, plan, machine))
    wrote_plot = bool(plot_path) and plot(results, plot_path, f"{target.spec}, page size {page_size}")
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(markdown(mine, ref, plan, one_line(machine), plot_path if wrote_plot else None))
    if not mine.measured():
        first = next((op for op in mine.ops.values() if op.stopped and not op.stopped.startswith("not offered")), None)
        return fail(f"nothing measured on {target.spec}" + (f": {first.name}: {first.stopped}" if first else ""))
    flags, failed = mine.flagged(), mine.failed()
    said = [f"{len(failed)} failed: " + "; ".join(f"{name} ({mine.ops[name].stopped})" for name in failed)] if failed else []
    grown = [name for name in flags if name not in failed]
    said += [f"{len(grown)} flagged: {', '.join(grown)}"] if grown else []
    unjudged = [name for name, op in mine.ops.items() if op.verdict.startswith("not judged")]
    said += [f"{len(unjudged)} not judged (too few sizes measured; see the table): {', '.join(unjudged)}"] if unjudged else []
    print(f"radixcheck: {target.spec}: " + ("; ".join(said) if said else "nothing flagged"))
    return EXIT_FLAGGED if flags and args.fail_on_flag else EXIT_MEASURED
