"""Suite-wide configuration: the target under test, Hypothesis profiles, the report header."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.conjecture import providers as _hypothesis_providers

from properties.target import DEFAULT_TARGET, TARGET_ENV, TIMEOUT_ENV, load_target, op_timeout

# Profiles. `dev` is the default on a laptop; `ci` (derandomized, no example database) is picked
# automatically when CI is set; `thorough` is for long audits: --hypothesis-profile=thorough.
_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=100, stateful_step_count=50, **_common)
settings.register_profile("ci", max_examples=100, stateful_step_count=50, derandomize=True, database=None, print_blob=True, **_common)
settings.register_profile("thorough", max_examples=600, stateful_step_count=200, **_common)
# `audit`: ci's search, stopping at the first distinct bug per test (reports.matrix, the SGLang audit).
settings.register_profile("audit", settings.get_profile("ci"), report_multiple_bugs=False)
# `mutation`: ci's search without shrinking; a mutant is killed by its first failing example
# (the meta-tests, the catalogue's time to kill, mutmut).
settings.register_profile("mutation", settings.get_profile("audit"), phases=[Phase.explicit, Phase.generate])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Hypothesis also draws "local constants" mined from every project module in sys.modules, so a
# derandomized run's examples depended on which modules happened to be imported before it (test
# order, xdist's split): a mutant could be caught in one run of the gate and missed in another.
# An empty pool makes each derandomized stream a function of its test alone. Private API, which
# is one reason hypothesis is pinned in pyproject.toml; the assert makes an upgrade notice.
assert hasattr(_hypothesis_providers, "_get_local_constants"), "hypothesis changed: revisit conftest.py"
_hypothesis_providers._get_local_constants = _hypothesis_providers.Constants


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("radixcheck")
    group.addoption(
        "--radix-target",
        default=None,
        help=f"cache factory under test, 'package.module:factory' (env {TARGET_ENV}; default {DEFAULT_TARGET})",
    )


def _target_spec(config: pytest.Config) -> str:
    return config.getoption("--radix-target") or os.environ.get(TARGET_ENV) or DEFAULT_TARGET


def pytest_configure(config: pytest.Config) -> None:
    try:
        config._radix_target = load_target(_target_spec(config))  # type: ignore[attr-defined]
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_report_header(config: pytest.Config) -> list[str]:
    target = config._radix_target  # type: ignore[attr-defined]
    module = target.spec.partition(":")[0]
    origin = getattr(__import__(module, fromlist=["_"]), "__file__", "?")
    env = {k: v for k, v in os.environ.items() if k.startswith(("RADIXCHECK_", "OPENBLAS_", "HYPOTHESIS_"))}
    return [
        f"radixcheck target: {target.spec} ({origin})",
        f"radixcheck capabilities: {target.capabilities}",
        f"radixcheck per-operation time limit: {op_timeout():g} s ({TIMEOUT_ENV})",
        f"radixcheck hypothesis profile: {settings._current_profile}",  # noqa: SLF001
        f"radixcheck environment: {env or '-'}",
    ]


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest):
    return request.config._radix_target
