"""radixcheck's pytest plugin (entry point ``pytest11``): the target under test, the Hypothesis
profiles and the report header.

Installed with radixcheck, so from any directory::

    pytest --pyargs radixcheck.properties.conformance --radix-target mymodule:make

runs the conformance tests, and only those, against ``mymodule.make`` (the working directory is
importable). Without ``--radix-target`` (or ``RADIXCHECK_TARGET``) the target is the reference.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from radixcheck import profiles
from radixcheck.properties.failures import describe_failure
from radixcheck.properties.target import DEFAULT_TARGET, TARGET_ENV, TIMEOUT_ENV, Target, TargetError, check_target, load_target, op_timeout

TARGET = pytest.StashKey[Target]()
PROFILE = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("radixcheck")
    group.addoption(
        "--radix-target",
        default=None,
        help=f"cache factory under test, 'package.module:factory' (env {TARGET_ENV}; default {DEFAULT_TARGET})",
    )
    group.addoption(
        "--radix-page-sizes",
        default=None,
        help="comma-separated page sizes to run, a subset of those the target declares (default: all up to 64)",
    )


def target_spec(config: pytest.Config) -> str:
    """The option wins over the environment; set but empty is an error, not the default."""
    option = config.getoption("--radix-target")
    if option is not None:
        return option
    return os.environ.get(TARGET_ENV, DEFAULT_TARGET)


def _explicit(config: pytest.Config) -> bool:
    """Whether this run names a target (option or environment) rather than using the default."""
    return config.getoption("--radix-target") is not None or TARGET_ENV in os.environ


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[PROFILE] = config.getoption("hypothesis_profile", None) or profiles.load_default()
    if _explicit(config):  # a named target is checked before anything runs: a typo is a usage error
        target_of(config)


def target_of(config: pytest.Config) -> Target:
    """The target under test, loaded and checked on first use (so that a pytest run that never
    touches a cache, in a venv where radixcheck happens to be installed, never loads one)."""
    if TARGET not in config.stash:
        try:
            target = load_target(target_spec(config))
            check_target(target)
            config.stash[TARGET] = restrict_page_sizes(target, config.getoption("--radix-page-sizes"))
        except TargetError as exc:
            raise pytest.UsageError(f"radixcheck: {exc}") from exc
    return config.stash[TARGET]


def restrict_page_sizes(target: Target, option: str | None) -> Target:
    """The target with only the page sizes asked for (each must be one it declares)."""
    if option is None:
        return target
    try:
        wanted = tuple(sorted({int(p) for p in option.split(",") if p.strip()}))
    except ValueError as exc:
        raise TargetError(f"page sizes {option!r} must be comma-separated integers") from exc
    undeclared = [p for p in wanted if p not in target.capabilities.page_sizes_tested()]
    if not wanted or undeclared:
        raise TargetError(f"page sizes {option!r}: {target.spec} declares (and the suite runs) only "
                          f"{list(target.capabilities.page_sizes_tested())}")
    return dataclasses.replace(target, capabilities=dataclasses.replace(target.capabilities, page_sizes=wanted))


def report_header(target: Target, profile: str) -> list[str]:
    module = target.spec.partition(":")[0]
    origin = getattr(__import__(module, fromlist=["_"]), "__file__", "?")
    env = {k: v for k, v in os.environ.items() if k.startswith(("RADIXCHECK_", "OPENBLAS_", "HYPOTHESIS_"))}
    lines = [
        f"radixcheck target: {target.spec} ({origin})",
        f"radixcheck capabilities: {target.capabilities}",
        f"radixcheck page sizes run: {list(target.capabilities.page_sizes_tested())}",
        f"radixcheck per-operation time limit: {op_timeout():g} s ({TIMEOUT_ENV})",
        f"radixcheck hypothesis profile: {profile}",
        f"radixcheck environment: {env or '-'}",
    ]
    lines += [f"radixcheck not exercised: {gap}" for gap in target.capabilities.not_exercised()]
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Only for runs that name a target, or run in a radixcheck checkout: not in every project."""
    if _explicit(config) or (config.rootpath / "properties" / "conformance").is_dir():
        return report_header(target_of(config), config.stash[PROFILE])
    return []


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Conformance tests that take ``page_size`` run at every page size the target declares;
    those that take ``extreme_page_size``, at the smallest and the largest."""
    if "target" not in metafunc.fixturenames:
        return
    sizes = target_of(metafunc.config).capabilities.page_sizes_tested()
    for name, values in (("page_size", sizes), ("extreme_page_size", sorted({sizes[0], sizes[-1]}))):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, values, ids=[f"page_size={p}" for p in values], scope="module")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the oracle that failed (by exception type) and the program that shows it to the
    report, where ``radixcheck audit`` reads them (also across pytest-xdist workers)."""
    report = yield
    if report.when == "call" and report.failed and call.excinfo is not None:
        for key, value in describe_failure(call.excinfo.value).items():
            report.user_properties.append((f"radixcheck_{key}", value))
    return report


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Target:
    """The cache factory under test, with its capabilities."""
    return target_of(request.config)
