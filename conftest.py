"""radixcheck's own test session (this checkout only; never shipped or imported by the kit).

Here radixcheck's Hypothesis profiles are the session's: registered over Hypothesis's names (so
`ci` is radixcheck's `ci`) and the default one loaded, as the self-tests and meta-tests expect.
The installed plugin does neither in other projects (``radixcheck.profiles``).
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType

import pytest
from hypothesis import settings


class _MutatedReference(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Under mutmut (which sets MUTANT_UNDER_TEST), ``radixcheck.reference.X`` is mutmut's copy
    ``mutants/reference/X.py``, imported as ``reference.X``: mutmut names each mutant after its
    file's path and activates it only when the function's ``__module__`` matches that name, while
    the package-dir mapping would import the unmutated ``reference/`` as ``radixcheck.reference``."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == "radixcheck.reference" or fullname.startswith("radixcheck.reference."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == "radixcheck.reference")
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(spec.name.removeprefix("radixcheck."))  # the same module object, two names

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed under its own name


if "MUTANT_UNDER_TEST" in os.environ:  # before anything imports radixcheck.reference
    sys.meta_path.insert(0, _MutatedReference())

from radixcheck import profiles  # noqa: E402 - after the finder, which must see the first import

for _name, _settings in profiles.SETTINGS.items():
    settings.register_profile(_name, _settings)

# The docs' and README's examples (tests/doc_examples.py); pyproject's testpaths name docs/ and README.md.
from tests.doc_examples import DOCS, keep_pages_whole  # noqa: E402

pytest_collect_file = DOCS.pytest()


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("hypothesis_profile", None):  # else Hypothesis's plugin has loaded the one asked for
        settings.load_profile(profiles.default_profile())


@pytest.fixture(autouse=True)
def _collector_left_on():  # noqa: ANN202 - a fixture
    """A test that leaves the garbage collector off or frozen (the step-cost metering and the
    throughput replay switch it off for a while) fails itself, and the collector is put back:
    else a later test of the same xdist worker that checks it (tests/test_throughput.py) failed
    instead, in one run of many, for a reason of another test's."""
    yield
    if not gc.isenabled() or gc.get_freeze_count():
        gc.unfreeze()
        gc.enable()
        pytest.fail("this test left the garbage collector off or frozen", pytrace=False)


# ---- Test tiers (docs/reference/test-tiers.md) ---------------------------------------------------------------------
# The README's `pytest -n auto` runs the fast tier: every test not marked `deep` (pyproject's addopts). `.ci/run` then
# runs `pytest -n auto -m deep`, so the two together run every test once. Families that grow with each contract (a
# catalogue's mutants, its correct variants) are marked `sampled`: the fast tier runs FAST_SAMPLE of their members in
# all, one family after another in turn, and the deep tier the rest. A contract that adds mutants, or a whole new
# catalogue, therefore adds nothing to the fast tier's sampled share; which members are sampled is fixed by a hash of
# their ids, so every run of one checkout runs the same tests.
FAST_SAMPLE = 12

# Shipped conformance tests that are deep in radixcheck's own run. Their modules are the user's conformance suite and
# are shipped unmarked (a `deep` mark would be an unknown marker in the user's project).
DEEP_CONFORMANCE = {"test_cache_at_production_scale"}  # a production-scale world per target and page size


def _stable_rank(name: str) -> str:
    return hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


def fast_sample(families: dict[str, list[pytest.Item]], budget: int) -> set[str]:
    """The node ids of the sampled members the fast tier runs: ``budget`` in all, the families taking turns (each
    family's members and the families themselves in hash order), so each family has a member before any has two."""
    queues = [sorted(families[name], key=lambda m: _stable_rank(m.nodeid)) for name in sorted(families, key=_stable_rank)]
    chosen: list[str] = []
    while len(chosen) < budget and any(queues):
        for queue in queues:
            if queue and len(chosen) < budget:
                chosen.append(queue.pop(0).nodeid)
    return set(chosen)


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection (and pytest-xdist's groups) read the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep_pages_whole(items)  # one docs page's examples on one worker, in order
    deep = pytest.mark.deep
    families: dict[str, list[pytest.Item]] = {}
    for item in items:
        if isinstance(item, pytest.Function) and item.originalname in DEEP_CONFORMANCE:
            item.add_marker(deep)
        if item.get_closest_marker("sampled") and not item.get_closest_marker("deep"):
            families.setdefault(item.nodeid.split("[")[0], []).append(item)
    chosen = fast_sample(families, FAST_SAMPLE)
    for members in families.values():
        for item in members:
            if item.nodeid not in chosen:
                item.add_marker(deep)


# The SIMD level the kernels use, named by the best compiled path the CPU's flags allow.
_SIMD = {"avx512": "AVX-512 VNNI", "avx2": "AVX2", "portable": "none (portable C)"}


def pytest_report_header(config: pytest.Config) -> str:
    """Every gate log names the CPU it ran on, its SIMD level and the kernel path chosen. From the
    CPU's flags only: building a path (about a second each) waits for the first test that needs it,
    whose self-test may still pass it over (a skip or warning in the log then says so). Under
    xdist only the controller prints the header."""
    import platform

    from radixcheck.model import kernel_build, q8kernel

    runs = [p.name for p in kernel_build.PATHS if not kernel_build.missing_flags(p)]
    try:
        want = q8kernel.chosen()
    except ValueError as e:  # a bad RADIXCHECK_Q8_KERNEL fails the tests that read it, not the header
        want = str(e)
    if want == "auto":
        kernel = f"{runs[0]} (auto: the best path the CPU's flags allow)"
    elif want in q8kernel.PATHS and want not in runs:
        kernel = f"numpy ({q8kernel.ENV}={want}, which this CPU lacks)"
    else:
        kernel = f"{want} ({q8kernel.ENV})" if want in q8kernel.CHOICES else want
    return f"CPU: {kernel_build.cpu_name()}, {platform.machine()}, SIMD: {_SIMD[runs[0]]}; Q8_0 kernel path: {kernel}"

