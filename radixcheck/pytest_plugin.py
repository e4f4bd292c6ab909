"""radixcheck's pytest plugin (entry point ``pytest11``): the target under test, the Hypothesis
profile of radixcheck's own tests, and the report header.

Installed with radixcheck, so from any directory::

    pytest --pyargs radixcheck.properties.conformance --radix-target mymodule:make

runs the conformance tests, and only those, against ``mymodule.make`` (the working directory is
importable). Without ``--radix-target`` (or ``RADIXCHECK_TARGET``) the target is the reference.

Given several times (``--radix-target ref=radixcheck.reference:RadixCache --radix-target
mine=mymodule:make``), one run tests every target: each test is parametrized by target and page
size (ids ``ref-page_size=4``), so pytest-xdist spreads the target x test items over any workers,
local or remote (``-n 2``, ``--tx ssh=host//python=...``). That is how the conformance matrix runs.
A target that cannot be loaded then fails its own items (with the reason), not the whole run.

A target is a radix cache or a KV-event index (a router's view, ``radixcheck.properties.index.contract``),
told apart by the type of its ``capabilities`` (``--radix-index``: a factory that declares none is
an index), or a router pair (an engine publishing KV events and an index reading them,
``radixcheck.properties.index.router_contract``: ``RouterCapabilities``), or a router's tenant prefix
tree (``radixcheck.properties.tenant_tree.contract``: ``TenantTreeCapabilities``). The cache tests run
on cache targets, the index tests (marked ``radix_index``) on index targets, the end-to-end test
(marked ``radix_router``) on pairs and the tenant-tree tests (marked ``radix_tenant_tree``) on tenant
trees; a test of another kind is deselected, so one run can hold every kind.

The target comes from ``--radix-target``, else ``RADIXCHECK_TARGET``, else the ini option
``radix_target``, else the reference; the page sizes from ``--radix-page-sizes``, else the ini
option ``radix_page_sizes``. A good citizen in every other pytest run of the environment: it loads
no Hypothesis profile (radixcheck's tests and machines carry their own settings,
:mod:`radixcheck.profiles`), and it loads a target from the environment or the ini file, and
prints its header, only when conformance tests are collected.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from pathlib import Path
from typing import Any

import pytest

from radixcheck import profiles
from radixcheck.argtypes import non_negative_int, writable_dir_problem
from radixcheck.cache_dir import HYPOTHESIS_STORAGE_ENV, cache_dir, hypothesis_storage_in_cache, storage_set_here
from radixcheck.properties.findings.failures import describe_failure, explaining_the_cache
from radixcheck.properties.findings.names import CONFORMANCE_PACKAGE, conformance_tests
from radixcheck.properties.findings.waivers import Waiver, WaiverError, WaiverLog, read_waivers, unmatched, unmatched_warning
from radixcheck.properties.layer_tally import TALLY
from radixcheck.properties.target import (
    DEFAULT_TARGET,
    TARGET_ENV,
    TIMEOUT_ENV,
    Target,
    TargetError,
    check_target,
    forget_hangs,
    load_target,
    op_timeout,
    op_wall_timeout,
)

TARGET = pytest.StashKey[Target]()
TARGETS = pytest.StashKey[dict[str, "Target | TargetError"]]()
PROFILE = pytest.StashKey[str]()
STORAGE = pytest.StashKey[bool]()  # radixcheck's tests keep Hypothesis's storage in its cache (a --radix-target run)
HEADER_SHOWN = pytest.StashKey[bool]()
WAIVERS = pytest.StashKey[list[Waiver]]()
WAIVER_LOG = pytest.StashKey[WaiverLog]()
WAIVED_PREFIX = "radixcheck waiver"  # report.wasxfail of a test whose only failures were waived
LAYERS_DRIVEN = "radixcheck_layers"  # report property: the test's steps per set of layers they touched together
WAIVERS_MET = "radixcheck_waivers_met"  # report property: the waivers (file:line) that waived a finding in the test
FAILED = pytest.StashKey[BaseException]()  # a failure whose repro file is written at the test's teardown
_REDUCED: dict[str, tuple[str, int, list]] = {}  # in this process (a worker): repro file name -> the test it was written from,
# its calls and what its program shows (radixcheck.properties.findings.root_cause)
SHORT_REPRO = 100  # a finding whose file has at most this many calls is not reduced again (a longer one may come out shorter)
INDEX_MARK = "radix_index"  # the conformance tests of KV-event indexes (the rest are the caches')
ROUTER_MARK = "radix_router"  # the end-to-end test of an engine and a router index (a pair target)
TENANT_TREE_MARK = "radix_tenant_tree"  # the conformance tests of routers' tenant prefix trees
TIER_MARK = "radix_tier"  # the conformance test of tiered caches (a host tier: radixcheck.properties.tiers.contract)
OTHER_KIND_MARKS = (INDEX_MARK, ROUTER_MARK, TENANT_TREE_MARK, TIER_MARK)  # the tests of targets other than caches
NO_PAGE_SIZES = ("index", "tenant_tree")  # target kinds whose tests take no page size
KIND_SHOWN = {"index": "KV-event index (radixcheck.properties.index.contract)",
              "tenant_tree": "tenant prefix tree (radixcheck.properties.tenant_tree.contract)"}
NO_PRODUCTION = "--radix-no-production"  # leaves the production-scale worlds out (radixcheck audit --no-production)
WORLD_KINDS = ("cache", "tier")  # the target kinds whose tests build a production-scale world (PRODUCTION_WORLDS)


def production_not_run(option: str) -> str:
    """What a run that left the production-scale worlds out says of them (skip reason, header, verdict)."""
    return f"production-scale worlds: not run ({option})"


def no_world_problem(target: Target, option: str) -> str:
    """Why ``option`` (leave the production-scale worlds out) cannot apply to ``target``, or "" if it can."""
    if target.kind in WORLD_KINDS:
        return ""
    shown = KIND_SHOWN.get(target.kind, "router pair (an engine and its index)").partition(" (")[0]
    return f"{option}: {target.spec} is a {shown}, whose tests build no production-scale world (nothing to leave out)"


class _OtherKind:
    """The parameter of a conformance test that no target of its kind takes: deselected."""

    def __repr__(self) -> str:
        return "no-target-of-this-kind"


OTHER_KIND = _OtherKind()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("radixcheck")
    group.addoption(
        "--radix-target",
        action="append",
        default=None,
        help=f"cache factory under test, '[name=]package.module:factory' (env {TARGET_ENV}; default {DEFAULT_TARGET}); "
        "give it several times to test several targets in one run",
    )
    group.addoption(
        "--radix-page-sizes",
        default=None,
        help="comma-separated page sizes to run, a subset of those the target declares (default: all up to 64; ini radix_page_sizes)",
    )
    group.addoption(
        "--radix-waive",
        action="append",
        default=None,
        metavar="FILE",
        help="known findings to report as waived and look past (one '<target glob> <test glob> <oracle or exception>  # reason' "
        "a line); repeatable",
    )
    group.addoption(
        "--radix-repro",
        default=None,
        metavar="DIR",
        help="write a standalone repro file (plain contract calls, then the oracle's check; exit 1 while the bug is "
        "there) for each distinct finding into DIR",
    )
    group.addoption(
        "--radix-index",
        action="store_true",
        default=False,
        help="a target factory that declares no `capabilities` is a KV-event index (default: a radix cache)",
    )
    group.addoption(
        "--radix-seed",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="run the conformance tests' own derandomized stream N (independent of the default stream and of other "
        "seeds; no saved failures are replayed); the same N replays the same run",
    )
    group.addoption(
        NO_PRODUCTION,
        action="store_true",
        default=False,
        help="leave the production-scale worlds out (the cache's and the tier's: thousands of requests, a deep "
        "conversation); their tests are skipped and the verdict line says the run was partial",
    )
    parser.addini("radix_target", help=f"cache factory the conformance tests run against (--radix-target and {TARGET_ENV} win)")
    parser.addini("radix_page_sizes", help="comma-separated page sizes the conformance tests run (--radix-page-sizes wins)")


def target_specs(config: pytest.Config) -> list[str]:
    """The option wins over the environment, the environment over the ini file; set but empty is
    an error, not the default."""
    option = config.getoption("--radix-target")
    if option is not None:
        return list(option)
    if TARGET_ENV in os.environ:
        return [os.environ[TARGET_ENV]]
    return [config.getini("radix_target") or DEFAULT_TARGET]


def page_sizes_option(config: pytest.Config) -> str | None:
    return config.getoption("--radix-page-sizes") or config.getini("radix_page_sizes") or None


def page_sizes_origin(config: pytest.Config) -> str:
    """Where the run's page sizes came from (shown beside them)."""
    return "--radix-page-sizes" if config.getoption("--radix-page-sizes") else "ini radix_page_sizes"


def target_spec(config: pytest.Config) -> str:
    """The one target of a single-target run (a ``name=`` in front is dropped)."""
    entry = target_specs(config)[0]
    return entry.partition("=")[2] if "=" in entry else entry


def _several(config: pytest.Config) -> bool:
    return len(target_specs(config)) > 1


def named_specs(config: pytest.Config) -> dict[str, str]:
    """``name -> spec`` for a several-target run; a spec without ``name=`` is its own name."""
    named: dict[str, str] = {}
    for entry in target_specs(config):
        name, sep, spec = entry.partition("=")
        name, spec = (name.strip(), spec.strip()) if sep else (entry.strip(), entry.strip())
        if not name or name in named or "[" in name or "]" in name:
            raise pytest.UsageError(f"radixcheck: target name {name!r} in {entry!r} is empty, repeated or has brackets")
        named[name] = spec
    return named


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # radixcheck's tests and machines take this profile's settings (radixcheck.profiles.current());
    # nothing is loaded into Hypothesis, so the project's own profile and settings stay as they are.
    config.addinivalue_line("markers", f"{INDEX_MARK}: a conformance test of KV-event indexes (radixcheck)")
    config.addinivalue_line("markers", f"{ROUTER_MARK}: the end-to-end test of an engine and a router index (radixcheck)")
    config.addinivalue_line("markers", f"{TENANT_TREE_MARK}: a conformance test of routers' tenant prefix trees (radixcheck)")
    config.addinivalue_line("markers", f"{TIER_MARK}: the conformance test of tiered caches (radixcheck)")
    # A conformance run from the user's project (--radix-target): Hypothesis's .hypothesis/ goes to radixcheck's
    # cache, as an audit's does, for radixcheck's own tests only (pytest_runtest_protocol): the project's own
    # Hypothesis tests in the same session keep theirs. A user who set HYPOTHESIS_STORAGE_DIRECTORY keeps theirs.
    config.stash[STORAGE] = (config.getoption("--radix-target") is not None
                             and not os.environ.get(HYPOTHESIS_STORAGE_ENV))
    config.add_cleanup(profiles.saved_selection())  # an in-process audit leaves no profile or seed behind
    config.stash[PROFILE] = profiles.select(config.getoption("hypothesis_profile", None), config.getoption("hypothesis_verbosity", None),
                                            seeded=config.getoption("--radix-seed") is not None)
    try:
        config.stash[WAIVERS] = [w for path in config.getoption("--radix-waive") or [] for w in read_waivers(path)]
    except WaiverError as exc:
        raise pytest.UsageError(f"radixcheck: {exc}") from exc
    if config.stash[WAIVERS] and not hasattr(config, "workerinput"):  # the controller hears from every test
        config.pluginmanager.register(WaiverUse(config.stash[WAIVERS]), "radixcheck-waiver-use")
    repro_dir = config.getoption("--radix-repro")
    if repro_dir is not None and (problem := writable_dir_problem(repro_dir)):
        raise pytest.UsageError(f"radixcheck: --radix-repro {problem}")
    if repro_dir and not hasattr(config, "workerinput"):  # the controller writes the files
        config.pluginmanager.register(ReproFiles(Path(config.getoption("--radix-repro")).resolve()), "radixcheck-repro-files")
    if _several(config):
        named_specs(config)  # a malformed list is a usage error; the targets load on first use
    elif config.getoption("--radix-target") is not None:  # named on the command line: a typo stops the run at once
        target_of(config)
    # A target from RADIXCHECK_TARGET or the ini file loads only when a conformance test is collected
    # (pytest_generate_tests): an exported variable must not break an unrelated project's run.


def target_of(config: pytest.Config) -> Target:
    """The target under test, loaded and checked on first use (so that a pytest run that never
    touches a cache, in a venv where radixcheck happens to be installed, never loads one)."""
    if TARGET not in config.stash:
        try:
            target = load_target(target_spec(config), index=config.getoption("--radix-index"))
            check_target(target)
            target = restrict_page_sizes(target, page_sizes_option(config), origin=page_sizes_origin(config))
            if config.getoption(NO_PRODUCTION) and (problem := no_world_problem(target, NO_PRODUCTION)):
                raise TargetError(problem)
            config.stash[TARGET] = dataclasses.replace(target, seed=config.getoption("--radix-seed"))
        except TargetError as exc:
            raise pytest.UsageError(f"radixcheck: {exc}") from exc
    return config.stash[TARGET]


def targets_of(config: pytest.Config) -> dict[str, Target | TargetError]:
    """Every target of a several-target run, loaded and checked on first use; one that cannot be
    tested is kept as its :class:`TargetError`, so that only its own items fail."""
    if TARGETS not in config.stash:
        loaded: dict[str, Target | TargetError] = {}
        for name, spec in named_specs(config).items():
            try:
                target = load_target(spec, index=config.getoption("--radix-index"))
                check_target(target)
                target = restrict_page_sizes(target, page_sizes_option(config), strict=False, origin=page_sizes_origin(config))
                loaded[name] = dataclasses.replace(target, seed=config.getoption("--radix-seed"))
            except TargetError as exc:
                loaded[name] = exc
        config.stash[TARGETS] = loaded
    return config.stash[TARGETS]


def restrict_page_sizes(target: Target, option: str | None, strict: bool = True, origin: str = "--radix-page-sizes") -> Target:
    """The target with only the page sizes asked for (each must be one it declares; ``origin``: the
    option that asked, shown with them). An index has no page sizes: asked for some in a
    single-target run, that is an error; else they are ignored."""
    if option is None:
        return target
    if target.kind in NO_PAGE_SIZES:
        if strict:
            raise TargetError(f"page sizes {option!r}: {target.spec} is a {KIND_SHOWN[target.kind].partition(' (')[0]}, "
                              "which has no page sizes")
        return target
    try:
        wanted = tuple(sorted({int(p) for p in option.split(",") if p.strip()}))
    except ValueError as exc:
        raise TargetError(f"page sizes {option!r} must be comma-separated integers") from exc
    undeclared = [p for p in wanted if p not in target.capabilities.page_sizes_tested()]
    if not strict:  # several targets: each runs the sizes it declares among those asked for
        wanted = tuple(p for p in wanted if p not in undeclared)
        undeclared = []
    if not wanted or undeclared:
        raise TargetError(f"page sizes {option!r}: {target.spec} declares (and the suite runs) only "
                          f"{list(target.capabilities.page_sizes_tested())}")
    caps = target.capabilities
    declared = dict(declared_page_sizes=(caps.engine if target.kind == "router" else caps).page_sizes, page_sizes_from=origin)
    if target.kind == "router":  # a pair's page sizes are its engine's
        engine = dataclasses.replace(caps.engine, page_sizes=wanted)
        return dataclasses.replace(target, capabilities=dataclasses.replace(caps, engine=engine), **declared)
    return dataclasses.replace(target, capabilities=dataclasses.replace(caps, page_sizes=wanted), **declared)


def report_header(target: Target, profile: str, no_production: bool = False, storage: Path | None = None) -> list[str]:
    """The lines that say what the run tests; ``storage``: where radixcheck's tests keep Hypothesis's
    storage in this run (its own setting, said apart from the user's environment)."""
    module = target.spec.partition(":")[0]
    origin = getattr(__import__(module, fromlist=["_"]), "__file__", "?")
    ours = storage or storage_set_here()  # radixcheck's own setting: said as such, not as the user's environment
    env = {k: v for k, v in os.environ.items() if k.startswith(("RADIXCHECK_", "OPENBLAS_", "HYPOTHESIS_"))
           and not (k == HYPOTHESIS_STORAGE_ENV and ours)}
    lines = [
        f"radixcheck target: {target.spec} ({origin})",
        f"radixcheck capabilities: {target.declared_capabilities()}",
        (f"radixcheck page sizes: {target.page_sizes_shown()}" if target.kind not in NO_PAGE_SIZES
         else f"radixcheck kind: {KIND_SHOWN[target.kind]}"),
        f"radixcheck per-operation time limit: {op_timeout():g} s of CPU time ({TIMEOUT_ENV}), {op_wall_timeout():g} s of wall clock",
        f"radixcheck hypothesis profile: {profile}"
        + ("" if target.seed is None else f", seed {target.seed} (derandomized, no saved failures)"),
        f"radixcheck environment: {env or '-'}",
    ]
    if ours:
        lines.append(f"radixcheck hypothesis storage: {ours} (radixcheck's cache, for radixcheck's tests only: "
                     f"{HYPOTHESIS_STORAGE_ENV} is restored after each)")
    lines += [f"radixcheck not exercised: {gap}" for gap in target.capabilities.not_exercised()]
    lines.append(f"radixcheck tenant isolation: {target.capabilities.tenant_isolation()}")
    if no_production:
        lines.append(f"radixcheck {production_not_run(NO_PRODUCTION)}: the verdict covers the small worlds only")
    if target.defaults_warning():
        lines.append(f"radixcheck WARNING: {target.defaults_warning()}")
    return lines


def header_lines(config: pytest.Config) -> list[str]:
    """What the run tests, printed once conformance tests are collected (never in other runs)."""
    if HEADER_SHOWN in config.stash:
        return []
    config.stash[HEADER_SHOWN] = True
    if _several(config):
        lines = [f"radixcheck targets: {len(named_specs(config))}, hypothesis profile {config.stash[PROFILE]}"]
        for name, loaded in targets_of(config).items():
            pair = "router pair, " if isinstance(loaded, Target) and loaded.kind == "router" else ""
            detail = (f"CANNOT BE TESTED: {loaded}" if not isinstance(loaded, Target)
                      else KIND_SHOWN[loaded.kind].partition(" (")[0] if loaded.kind in NO_PAGE_SIZES
                      else f"{pair}page sizes {loaded.page_sizes_shown()}")
            if isinstance(loaded, Target) and loaded.defaults_warning():
                detail += "; WARNING: no `capabilities`, the defaults apply"
            lines.append(f"radixcheck target {name}: {named_specs(config)[name]} ({detail})")
        if config.getoption(NO_PRODUCTION):  # each target's worlds skipped: the matrix's verdicts are partial too
            lines.append(f"radixcheck {production_not_run(NO_PRODUCTION)}: the verdicts cover the small worlds only")
        return lines
    try:
        return report_header(target_of(config), config.stash[PROFILE], config.getoption(NO_PRODUCTION),
                             storage=cache_dir() / "hypothesis" if config.stash.get(STORAGE, False) else None)
    except pytest.UsageError as exc:  # already reported where the tests were collected
        return [f"radixcheck target: cannot be tested: {exc}"]


def _is_conformance(item: pytest.Item) -> bool:
    return "target" in getattr(item, "fixturenames", ())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """A conformance test of a --radix-target run keeps Hypothesis's storage in radixcheck's cache,
    restored after it (the variable, and the directory Hypothesis keeps once read): not in the
    project, and not for the project's own tests in the same session (they wrote there before)."""
    if not (item.config.stash.get(STORAGE, False) and _is_conformance(item)):
        return (yield)
    with hypothesis_storage_in_cache():
        return (yield)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """The header, under "collected N items", if any conformance test was collected."""
    return header_lines(config) if any(map(_is_conformance, items)) else []


def in_short(not_exercised: list[str]) -> str:
    """What a run left out, each gap up to its reason, for a verdict line ("" if nothing)."""
    return ", ".join(gap.partition(" (")[0] for gap in not_exercised)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The run's last radixcheck lines, once conformance tests ran: each target's verdict and what
    it did not check (a passing verdict is a verdict on the rest only); in a several-target run one
    line per target, named. Nothing otherwise: a run that printed no header collected no conformance
    test, and pays nothing here."""
    if HEADER_SHOWN not in config.stash:
        return
    reports = [r for outcome in ("passed", "failed", "xfailed", "error") for r in terminalreporter.stats.get(outcome, [])
               if getattr(r, "when", "call") == "call" and is_conformance_id(r.nodeid)]
    if _several(config):
        for name, loaded in targets_of(config).items():
            if isinstance(loaded, TargetError):
                terminalreporter.write_line(f"radixcheck: {name}: cannot be tested: {loaded}", red=True)
                continue
            own = [r for r in reports if _target_in_id(r.nodeid, targets_of(config)) == name]
            if own:
                _verdict_line(terminalreporter, config, loaded, own, f"{name} ({loaded.spec})")
        return
    if not reports:
        return
    try:
        target = target_of(config)
    except pytest.UsageError:
        return
    _verdict_line(terminalreporter, config, target, reports, target.spec)


def _verdict_line(terminalreporter: Any, config: pytest.Config, target: Target, reports: list[Any], shown: str) -> None:
    """One target's verdict line, from its conformance tests' reports."""
    failed = sum(1 for r in reports if r.outcome == "failed")
    gaps = in_short(target.capabilities.not_exercised())
    verdict = f"does not conform ({failed} conformance test(s) failed)" if failed else "conforms"
    if config.getoption(NO_PRODUCTION) and target.kind in WORLD_KINDS:  # a partial run is never a plain "conforms"
        verdict += f" in a partial run ({production_not_run(NO_PRODUCTION)})"
    terminalreporter.write_line(f"radixcheck: {shown} {verdict}" + (f"; not checked: {gaps}" if gaps else ""),
                                red=bool(failed), green=not failed)


def _target_in_id(nodeid: str, names: dict[str, Any]) -> str | None:
    """The target a several-target test id names (its parameters start ``NAME-`` or are ``NAME``;
    the longest such name, so ``a-b`` is not read as ``a``), or None."""
    params = nodeid.partition("[")[2].removesuffix("]")
    return max((n for n in names if params == n or params.startswith(f"{n}-")), key=len, default=None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:  # noqa: ANN001 - xdist's WorkerController
    """Under pytest-xdist the workers collect (their header goes nowhere): the controller prints it
    once, from the first worker's ids, if they hold a conformance test."""
    config = node.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and HEADER_SHOWN not in config.stash and any(map(is_conformance_id, ids)):
        reporter.write_line("")
        for line in header_lines(config):
            reporter.write_line(line)


def is_conformance_id(nodeid: str) -> bool:
    """Whether a node id names a conformance test that takes a target. Only its last parts can be
    trusted (``--pyargs`` ids are relative to the package, or have no file at all when one module
    is named; others are relative to the rootdir), so it is matched by module file and test name,
    both read from the conformance package's source."""
    path, _, name = nodeid.partition("::")
    module, test = Path(path).name, name.partition("[")[0]
    return any(test == known_test and module in ("", known_module) and takes_target
               for known_module, known_test, takes_target in conformance_tests())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Conformance tests that take ``page_size`` run at every page size the target declares;
    those that take ``extreme_page_size``, at the smallest and the largest."""
    if "target" not in metafunc.fixturenames:
        return
    if _several(metafunc.config):
        _parametrize_targets(metafunc)
        return
    target = target_of(metafunc.config)
    if target.kind != _kind_of(metafunc):  # deselected (pytest_collection_modifyitems)
        metafunc.parametrize("target", [OTHER_KIND], ids=["other-kind"], indirect=True, scope="session")
        for name in ("page_size", "extreme_page_size"):
            if name in metafunc.fixturenames:
                metafunc.parametrize(name, [0], ids=["-"], scope="module")
        return
    if target.kind in NO_PAGE_SIZES:
        return  # an index's or a tenant tree's tests take no page size
    sizes = target.capabilities.page_sizes_tested()
    for name, values in (("page_size", sizes), ("extreme_page_size", _extremes(sizes))):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, values, ids=[f"page_size={p}" for p in values], scope="module")


def _kind_of(metafunc: pytest.Metafunc) -> str:
    if metafunc.definition.get_closest_marker(INDEX_MARK):
        return "index"
    if metafunc.definition.get_closest_marker(TENANT_TREE_MARK):
        return "tenant_tree"
    if metafunc.definition.get_closest_marker(TIER_MARK):
        return "tier"
    return "router" if metafunc.definition.get_closest_marker(ROUTER_MARK) else "cache"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Conformance tests of the other kind than every target (cache tests in an index's run, and
    the other way round) are deselected, not skipped: they do not apply."""
    other = [item for item in items if getattr(getattr(item, "callspec", None), "params", {}).get("target") is OTHER_KIND]
    if _no_caches(config):  # the cache tests that take no target (the scheduler's own order) do not apply either
        here = _conformance_dir()
        other += [item for item in items if Path(item.path).resolve().parent == here
                  and not _is_conformance(item) and not any(item.get_closest_marker(m) for m in OTHER_KIND_MARKS)]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]
    cause_first(items)
    if config.getoption(NO_PRODUCTION):
        skip = pytest.mark.skip(reason=production_not_run(NO_PRODUCTION))
        for item in items:
            if _is_conformance(item) and _function_name(item) in PRODUCTION_WORLDS:
                item.add_marker(skip)


# The small machines find most bugs in a few calls and name the cause (an oracle's verdict); the
# other tests meet the same bug later or only as its echo (a crash in the serving protocol). Every
# pytest-xdist scheduler (load, loadgroup, worksteal) hands items out from the front of the
# collection, so the small machines go first, the other small tests next and the production-scale
# worlds last: in process (what -n auto picks on a busy machine) a world of 10^4 nodes took 38-366 s
# of a tier audit, and a small world's FAIL waited for it (reports/findings/layers_trial.md). Under
# pytest-xdist each worker runs its share in this order too (``radixcheck audit --no-production`` skips them).
# The audit's live lines hold a crash's FAIL line for these machines' verdicts (``radixcheck.audit._Collector``):
# every ``*_state_machine`` conformance test is one (a fast meta-test keeps the list whole: the tier machine
# was once left out, so a tier world's crash was printed before the tier machine's cause).
SMALL_MACHINES = ("test_cache_state_machine", "test_index_state_machine", "test_tenant_tree_state_machine",
                  "test_tier_state_machine")
PRODUCTION_WORLDS = ("test_cache_at_production_scale", "test_tier_at_production_scale")
DISPATCH_ORDER = (*SMALL_MACHINES, "(the rest)", *PRODUCTION_WORLDS)


def _function_name(item: pytest.Item) -> str:
    """The test's function name, without its parameters."""
    return getattr(item, "originalname", None) or item.name.partition("[")[0]


def _dispatch_rank(item: pytest.Item) -> int:
    name = _function_name(item)
    return DISPATCH_ORDER.index(name) if name in DISPATCH_ORDER else DISPATCH_ORDER.index("(the rest)")


def cause_first(items: list[pytest.Item]) -> None:
    """Reorder the conformance tests among themselves, in place, by :data:`DISPATCH_ORDER` (a stable
    sort: the rest keep pytest's order); every other test keeps its place."""
    here = _conformance_dir()
    slots = [i for i, item in enumerate(items) if Path(item.path).resolve().parent == here]
    for i, item in zip(slots, sorted((items[i] for i in slots), key=_dispatch_rank), strict=True):
        items[i] = item


def _conformance_dir() -> Path:
    return Path(importlib.import_module(CONFORMANCE_PACKAGE).__file__).resolve().parent


def _no_caches(config: pytest.Config) -> bool:
    """Whether every target already loaded in this run is an index, a router pair or a tenant tree, not a cache."""
    loaded = [config.stash[TARGET]] if TARGET in config.stash else list(config.stash.get(TARGETS, {}).values())
    return bool(loaded) and all(isinstance(t, Target) and t.kind != "cache" for t in loaded)


def _extremes(sizes: tuple[int, ...]) -> list[int]:
    return sorted({sizes[0], sizes[-1]})


def _parametrize_targets(metafunc: pytest.Metafunc) -> None:
    """target x page size for a several-target run (a target that cannot be tested gets one item,
    which fails at setup with the reason)."""
    kind = _kind_of(metafunc)
    targets = {name: loaded for name, loaded in targets_of(metafunc.config).items()
               if not isinstance(loaded, Target) or loaded.kind == kind}  # an unloadable one fails in both kinds
    if not targets:
        metafunc.parametrize("target", [OTHER_KIND], ids=["other-kind"], indirect=True)
        for name in ("page_size", "extreme_page_size"):
            if name in metafunc.fixturenames:
                metafunc.parametrize(name, [0], ids=["-"])
        return
    for size_name in ("page_size", "extreme_page_size"):
        if size_name in metafunc.fixturenames:
            pairs, ids = [], []
            for name, loaded in targets.items():
                sizes: list[int | None] = [None]
                if isinstance(loaded, Target):
                    tested = loaded.capabilities.page_sizes_tested()
                    sizes = list(tested) if size_name == "page_size" else list(_extremes(tested))
                pairs += [(name, p) for p in sizes]
                ids += [f"{name}-page_size={p}" if p is not None else f"{name}-unloadable" for p in sizes]
            metafunc.parametrize(["target", size_name], pairs, ids=ids, indirect=["target"])
            return
    metafunc.parametrize("target", list(targets), ids=list(targets), indirect=True)


def _waiver_log(item: pytest.Item) -> WaiverLog:
    """The waivers of ``--radix-waive`` that apply to this test of its target (one log per item)."""
    if WAIVER_LOG not in item.stash:
        config = item.config
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("target") if callspec is not None else None
        if isinstance(name, str):  # a several-target run: the item's target by name and spec
            names = (name, named_specs(config).get(name, name))
        else:
            names = (target_spec(config), target_spec(config).replace(":", "."))
        item.stash[WAIVER_LOG] = WaiverLog.for_test(config.stash.get(WAIVERS, []), names, item.name)
    return item.stash[WAIVER_LOG]


def pytest_runtest_setup(item: pytest.Item) -> None:
    forget_hangs()  # a hang is remembered within one test only
    if _is_conformance(item):
        TALLY.reset()  # the layers this test's machines drive together (carried on its report: LAYERS_DRIVEN)
        _start_afresh(item)


def _start_afresh(item: pytest.Item) -> None:
    """A factory that serves every cache from one long-lived process (a wire server) starts it
    afresh for each test (its ``start_afresh``): a bug that leaks between a server's caches then
    shows the same way whichever tests ran before in that worker, and whatever a reduction
    before it did, so a verdict and its grouping do not depend on pytest-xdist's schedule."""
    name = getattr(getattr(item, "callspec", None), "params", {}).get("target")
    if name is OTHER_KIND:
        return
    target = target_of(item.config) if name is None else targets_of(item.config).get(name)
    start_afresh = getattr(getattr(target, "factory", None), "start_afresh", None)
    if callable(start_afresh):
        start_afresh()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the oracle that failed (by exception type), the program that shows it and every
    exception inside a group to the report, where ``radixcheck audit`` reads them (also across
    pytest-xdist workers); with ``--radix-repro``, the repro file to the teardown's report (it
    takes a reduction, and the verdict must not wait for it). A failure that a waiver covers is reported as an expected failure
    (``xfailed``, like array-api-tests' xfails file), and the findings waived on the way as
    ``radixcheck_waived``. Hypothesis's "Explanation" keeps only lines outside radixcheck's own
    code (:func:`~radixcheck.properties.findings.failures.explaining_the_cache`), before pytest
    shows the failure."""
    if call.when == "call" and call.excinfo is not None and _is_conformance(item):
        explaining_the_cache(call.excinfo.value)
    report = yield
    if report.when == "teardown" and FAILED in item.stash:  # the verdict went out with the call's report; now its repro
        report.user_properties.append(("radixcheck_repro", _repro_of(item, item.stash[FAILED], _waiver_log(item))))
        del item.stash[FAILED]
    if report.when != "call":
        return report
    log = _waiver_log(item) if _is_conformance(item) else WaiverLog([])
    if report.failed and call.excinfo is not None:
        exc = call.excinfo.value
        for key, value in describe_failure(exc).items():
            report.user_properties.append((f"radixcheck_{key}", value))
        waiver = log.waiver_for(exc)
        if item.config.getoption("--radix-repro") and _is_conformance(item) and waiver is None:  # a waived finding is no finding: no file
            item.stash[FAILED] = exc
        if waiver is not None and log(exc, "the test's last failure"):
            report.outcome = "skipped"
            report.wasxfail = f"{WAIVED_PREFIX} {waiver.where}: {waiver.reason}"
    if log.findings():
        report.user_properties.append(("radixcheck_waived", log.findings()))
    if _is_conformance(item) and TALLY.steps:  # to the audit, also from pytest-xdist's workers
        report.user_properties.append((LAYERS_DRIVEN, TALLY.as_dict()))
    if _is_conformance(item) and item.config.stash.get(WAIVERS, []):  # carried to the controller (WaiverUse), also from workers
        report.user_properties.append((WAIVERS_MET, log.met()))
    return report


def _spec_of(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("target") if callspec is not None else None
    return named_specs(item.config).get(name, name) if isinstance(name, str) else target_spec(item.config)


def _repro_of(item: pytest.Item, exc: BaseException, log: WaiverLog) -> dict:
    """The repro file of a failing conformance test (built here, in the worker that has the failing
    machine), as a report property: its text, or why there is none."""
    from radixcheck.properties.findings.failures import signature_of
    from radixcheck.properties.findings.repro import file_name, finding_site, repro_for  # only when asked for: it imports the reducer
    from radixcheck.properties.findings.standalone import small_repro_of

    described = describe_failure(exc)
    name = file_name(described["oracle"], described["reason"], _spec_of(item), finding_site(exc))
    if 0 < _REDUCED.get(name, (None, 0, []))[1] <= SHORT_REPRO:  # a short program for it already: reducing again costs time
        return {"text": None, "why_not": f"written from {_REDUCED[name][0]}", "oracle": described["oracle"], "message": described["reason"],
                "name": name, "shows": _REDUCED[name][2]}
    directory = item.config.getoption("--radix-repro")
    small = small_repro_of(Path(directory).resolve(), _spec_of(item), described["oracle"],
                           signature_of(described["oracle"], described["reason"])) if directory else None
    if small is not None:  # this finding has a pasteable file already (another test's, another worker's): not a second copy
        return {"text": None, "why_not": f"written already: {small.name} shows the same finding", "oracle": described["oracle"],
                "message": described["reason"], "name": small.name, "shows": _REDUCED.get(small.name, (None, 0, []))[2]}
    callspec = getattr(item, "callspec", None)
    parameters = {k: v for k, v in (callspec.params.items() if callspec else ()) if k != "target"}
    met: set[str] = set()  # the oracles of the waived findings the replays of its program met (an echo needs one)

    def waived(e: BaseException) -> bool:
        if log.waiver_for(e) is None:
            return False
        met.add(describe_failure(e)["oracle"])
        return True

    try:
        repro = repro_for(exc, _spec_of(item), item.name, waived=waived,
                          plain_test=(item.function, parameters, item.funcargs["target"].capabilities),
                          seed=item.funcargs["target"].seed, waivers=log.applicable)
    except Exception as error:  # noqa: BLE001 - a repro that cannot be made must not hide the finding
        return {"text": None, "why_not": f"radixcheck could not write it: {type(error).__name__}: {error}"}
    if repro.text is not None:
        _REDUCED[name] = (item.name, repro.calls, [list(s) for s in repro.shows])
    return {"text": repro.text, "why_not": repro.why_not, "calls": repro.calls, "notes": repro.notes, "size": repro.size,
            "shows": [list(s) for s in repro.shows], "waived_shown": sorted(met),
            "exit_code": repro.exit_code, "oracle": described["oracle"], "message": described["reason"],
            "printed_finding": "BUG (radixcheck" in repro.output, "name": name}


def _size(repro: dict) -> tuple[bool, int, int]:
    """How long a repro is: a program of plain calls before a file that reruns radixcheck's test (no
    calls: a tier production world's), then its calls, then its lines (two files that rerun tests, as
    a tenant tree's machine and threaded test write for one finding)."""
    return repro["calls"] == 0, repro["calls"], repro["text"].count("\n")


class ReproFiles:
    """Writes each failing test's repro file into ``--radix-repro DIR`` as its report arrives (in
    the controller, also under pytest-xdist): one file per distinct finding (its oracle, the
    shape of its message, the target and a crash's site: :func:`~radixcheck.properties.findings.repro.file_name`),
    the shortest kept (:func:`_size`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written: dict[str, dict] = {}  # file name -> the repro written there, with its path and test
        self.not_offered: list[str] = []  # files radixcheck ran that did not show their finding: why, per test

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        repro = dict(report.user_properties).get("radixcheck_repro")
        if repro and not repro.get("text") and str(repro.get("why_not", "")).startswith("not offered"):
            self.not_offered.append(f"{report.nodeid.rpartition('::')[2]} ({repro.get('oracle', '')}): {repro['why_not']}")
        if not repro or not repro.get("text"):
            return
        from radixcheck.properties.findings.repro import file_name

        name = repro.get("name") or file_name(repro["oracle"], repro["message"])
        if name in self.written and _size(self.written[name]) <= _size(repro):
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / name).write_text(repro["text"], encoding="utf-8")
        self.written[name] = {**repro, "path": str(self.directory / name), "test": report.nodeid.rpartition("::")[2]}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for repro in self.written.values():
            terminalreporter.write_line(f"radixcheck repro: {repro['path']} ({repro['oracle']}: {repro['message'][:100]})")
        for line in self.not_offered:
            terminalreporter.write_line(f"radixcheck repro: none for {line}", yellow=True)


class WaiverUse:
    """Which waivers of ``--radix-waive`` waived a finding, read from each conformance test's report
    (in the controller: under pytest-xdist the waivers match in the workers); one that waived
    nothing is a warning in the terminal summary, once a conformance test has run."""

    def __init__(self, waivers: list[Waiver]) -> None:
        self.waivers = waivers
        self.met: set[str] | None = None  # None: no conformance test reported

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == WAIVERS_MET:
                self.met = (self.met or set()) | set(value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for waiver in unmatched(self.waivers, self.met) if self.met is not None else []:
            terminalreporter.write_line(f"radixcheck: {unmatched_warning(waiver)}", yellow=True)


@pytest.fixture
def radix_repro(request: pytest.FixtureRequest) -> bool:
    """Whether this run writes repro files (``--radix-repro``): the machines then keep a transcript."""
    return bool(request.config.getoption("--radix-repro"))


@pytest.fixture
def radix_waivers(request: pytest.FixtureRequest) -> WaiverLog:
    """A predicate ``waived(exc, step) -> bool`` for :func:`~radixcheck.properties.findings.verdict.run_machine`:
    the findings ``--radix-waive`` waives for this test of its target, recorded as they are met."""
    return _waiver_log(request.node)


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Target:
    """The cache (or index) factory under test, with its capabilities (in a several-target run, this item's)."""
    name = getattr(request, "param", None)
    if name is OTHER_KIND:
        pytest.skip("no target of this kind")
    if name is None:
        return target_of(request.config)
    loaded = targets_of(request.config)[name]
    if isinstance(loaded, TargetError):
        pytest.fail(f"radixcheck: {loaded}", pytrace=False)
    return loaded
