"""The ``radixcheck`` command.

    radixcheck audit mymodule:make                       # verdict in seconds; exit 0 / 1 / 2
    radixcheck audit mymodule:make --page-sizes 1,16 --report audit.md --json audit.json -n 2
    radixcheck audit mymodule:make --waive known.txt      # known findings: reported as waived, looked past
    radixcheck audit mymodule:make --repro repros/        # a standalone repro file per finding
    radixcheck audit mymodule:make --seed 3               # another stream of programs (independent of seed 2's)
    radixcheck audit mymodule:make --no-production        # iterating on a bug: the small worlds only (a partial verdict)
    radixcheck audit mymodule:make_index                 # a KV-event index (its capabilities: IndexCapabilities)
    radixcheck bench mymodule:make --report cost.md      # how each operation's cost grows (beside the reference)
    radixcheck reports --out my-reports                  # regenerate the ledger (python -m radixcheck.reports)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from radixcheck.argtypes import ArgumentParser, non_negative_int, output_file, page_sizes, positive_seconds, repro_dir, workers
from radixcheck.bench_cli import add_bench_parser
from radixcheck.profiles import PROFILES


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="radixcheck", description="Verification suite for radix-tree KV caches.")
    sub = parser.add_subparsers(dest="command", required=True)
    audit = sub.add_parser("audit", help="run the conformance tests against a cache factory",
                           description="Run the conformance tests against FACTORY ('package.module:factory'; the working "
                                       "directory is importable). Exit 0: conforms; 1: does not; 2: usage or load error.")
    audit.add_argument("factory", help="the factory of a cache, a KV-event index or a tenant tree, 'package.module:factory'")
    audit.add_argument("--index", action="store_true",
                       help="a factory that declares no capabilities is a KV-event index (one whose capabilities are "
                            "IndexCapabilities is one anyway)")
    audit.add_argument("--page-sizes", type=page_sizes,
                       help="comma-separated subset of the page sizes the factory declares (default: all up to 64)")
    audit.add_argument("--profile", default="ci", choices=PROFILES,
                       help="Hypothesis profile (default: ci, derandomized; dev and thorough replay the failures they "
                            "saved in earlier runs first)")
    audit.add_argument("--seed", type=non_negative_int, metavar="N",
                       help="run stream N: the profile's search, derandomized under N and without saved failures, so "
                            "runs under different seeds are independent and the same seed replays the same run "
                            "(default: the profile's own stream)")
    audit.add_argument("--report", type=output_file, help="write the report card (markdown) here")
    audit.add_argument("--json", type=output_file, help="write the results (JSON) here")
    audit.add_argument("--repro", type=repro_dir, metavar="DIR",
                       help="write a standalone repro file per finding into DIR (plain calls on your factory, then the "
                            "oracle's check; exits 1 while the bug is there, 0 once it is fixed)")
    audit.add_argument("--waive", type=Path, metavar="FILE",
                       help="known findings, one '<target glob> <test glob> <oracle or exception>  # reason' a line: "
                            "reported as waived, and the search goes on past them (exit 0 if nothing else fails)")
    audit.add_argument("--no-production", action="store_true",
                       help="leave the production-scale worlds out (a cache's or a tier target's: 10^4-node trees, a "
                            "deep conversation; most of an audit's time, minutes on a busy machine) while iterating on "
                            "a bug: the small worlds alone, whose verdict the card, the JSON ('partial') and the last "
                            "line call partial (exit 0 then means no finding in what ran). Without it they run after "
                            "the small worlds, whose verdicts come first")
    audit.add_argument("-n", dest="workers", default="auto", type=workers,
                       help="pytest-xdist workers (default: auto, one per core when about two cores are idle, else in "
                            "process; 0: in process)")
    audit.add_argument("--op-timeout", type=positive_seconds,
                       help="per-operation time limit in seconds of CPU time (default 5; a call that blocks meets "
                            "a wall-clock backstop, RADIXCHECK_OP_WALL_TIMEOUT, default 12 times it and at least 60 s)")
    audit.add_argument("--shrink-seconds", type=positive_seconds,
                       help="seconds of CPU time to shrink each failure (default 15; 5 for a KV-event index or a tenant tree; "
                            "a wall-clock backstop, RADIXCHECK_BUDGET_WALL_FACTOR, default 20 times it)")
    add_bench_parser(sub)
    reports = sub.add_parser("reports", help="regenerate the ledger reports (same as python -m radixcheck.reports)", add_help=False)
    reports.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _audit(args: argparse.Namespace) -> int:
    from radixcheck.audit import (
        EXIT_CONFORMS,
        EXIT_NONCONFORMING,
        EXIT_USAGE,
        LEFT_OUT,
        NO_PRODUCTION_OPTION,
        print_summary,
        run_audit,
        server_line,
        tier_lines,
        workers_for,
        write_outputs,
    )
    from radixcheck.properties.findings.verdict import SHRINK_ENV
    from radixcheck.properties.findings.waivers import WaiverError, read_waivers
    from radixcheck.properties.target import TIMEOUT_ENV, TargetError, check_target, load_target
    from radixcheck.pytest_plugin import no_world_problem, restrict_page_sizes

    if args.op_timeout:
        os.environ[TIMEOUT_ENV] = args.op_timeout  # read by the pytest-xdist workers too
    if args.shrink_seconds:
        os.environ[SHRINK_ENV] = args.shrink_seconds
    try:
        waivers = read_waivers(args.waive) if args.waive else []
    except WaiverError as exc:
        print(f"radixcheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = load_target(args.factory, index=args.index)
        check_target(target)
        target = restrict_page_sizes(target, args.page_sizes, origin="--page-sizes")
        if args.no_production and (problem := no_world_problem(target, NO_PRODUCTION_OPTION)):
            raise TargetError(problem)
    except TargetError as exc:
        print(f"radixcheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if target.defaults_warning():
        print(f"radixcheck: warning: {target.defaults_warning()}", file=sys.stderr, flush=True)
    print(f"radixcheck: auditing {target.spec}: {target.declared_capabilities()}", flush=True)  # the run's page sizes: next line
    if server_line(target):
        print(f"radixcheck: wire server: {server_line(target)}")
    if target.kind not in ("index", "tenant_tree"):
        print(f"radixcheck: page sizes: {target.page_sizes_shown()}")
    policies, worlds = tier_lines(target, production=not args.no_production)
    if policies:
        print(f"radixcheck: write policies: {policies}")
        print(f"radixcheck: worlds: {worlds}")
    for gap in target.capabilities.not_exercised():
        print(f"radixcheck: not exercised: {gap}")
    print(f"radixcheck: tenant isolation: {target.capabilities.tenant_isolation()}")
    if args.no_production:
        print(f"radixcheck: {LEFT_OUT}: the verdict will cover the small worlds only")
    if waivers:
        print(f"radixcheck: {len(waivers)} waiver(s) from {args.waive}")
    earlier = sorted(args.repro.glob("repro-*.py")) if args.repro and args.repro.is_dir() else []
    if earlier:
        print(f"radixcheck: {len(earlier)} repro file(s) from an earlier run in {args.repro}: a finding met again replaces its own")
    if args.seed is not None:
        print(f"radixcheck: seed {args.seed}: its own derandomized stream, no saved failures")
    workers, why = workers_for(args.workers)
    if why:
        print(f"radixcheck: {why}")
    result = run_audit(target, args.page_sizes, args.profile, workers, args.waive, args.repro, seed=args.seed,
                       production=not args.no_production)
    write_outputs(result, args.report, args.json)
    print_summary(result)
    if result.pytest_exit not in (0, 1, 5):  # interrupted, internal or usage error
        print(f"radixcheck: error: pytest stopped with exit code {result.pytest_exit}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_CONFORMS if result.conforms else EXIT_NONCONFORMING


class _OutputUntilTheReaderLeaves:
    """Standard output that, once its reader has gone (``radixcheck audit ... | head``), sends the
    rest to the null device, so the run still ends with its verdict's exit code, not a traceback."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _reader_left(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())  # what is still buffered, and the flush at exit, go there too
        os.close(null)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_left()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_left()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    stdout = sys.stdout
    sys.stdout = _OutputUntilTheReaderLeaves(stdout)
    try:
        return _run(argv)
    finally:
        sys.stdout = stdout


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, parsed. ``radixcheck reports ARGS`` hands ARGS to ``python -m radixcheck.reports``
    as they are (argparse's REMAINDER refuses a first argument that starts with ``-``, as in
    ``radixcheck reports --out DIR``), and that command's own parser checks them."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["reports"]:
        return argparse.Namespace(command="reports", args=argv[1:])
    return _parser().parse_args(argv)


def _run(argv: list[str] | None) -> int:
    args = parse_args(argv)
    if args.command == "audit":
        return _audit(args)
    if args.command == "bench":
        from radixcheck.bench_cli import run_bench

        return run_bench(args)
    from radixcheck.reports.__main__ import main as reports_main

    return reports_main(args.args) or 0


if __name__ == "__main__":
    sys.exit(main())
