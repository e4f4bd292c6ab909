"""The conformance properties as plain Hypothesis tests, for HypoFuzz (``hypothesis fuzz``).

The gate runs the state machine through :func:`radixcheck.properties.findings.verdict.run_machine`, a
find / bounded-shrink / replay wrapper around ``run_state_machine_as_test``. HypoFuzz cannot
fuzz that: it collects tests with pytest and drives the ``@given`` test underneath each one
with its own coverage-guided provider, and a test that *calls* a state machine hides that
``@given`` inside an ordinary function. What it does fuzz is a state machine's ``TestCase``
(Hypothesis's public API for running a machine under unittest and pytest): it recognises the
``runTest`` that Hypothesis builds and fuzzes the machine itself. A ``TestCase`` cannot be
parametrized, so this module builds one per page size the target declares, at import time.

Run a campaign (``reports/FUZZING.md``: install, status, results)::

    RADIXCHECK_TARGET=package.module:factory HYPOTHESIS_PROFILE=thorough \\
        hypothesis fuzz -n 1 -- properties/fuzzing/fuzz_targets.py

**The target comes from ``RADIXCHECK_TARGET``** (default: the reference), because the classes
are built when pytest imports this module and a module cannot see pytest's options then. A run
that also passes a different ``--radix-target`` errors rather than fuzz two caches. Select page
sizes with ``-k page4`` (say); ``--radix-page-sizes`` does not apply here.

HypoFuzz skips tests whose settings derandomize or use another database than the default, so
the ``ci`` and ``audit`` profiles fuzz nothing: use ``dev`` (50 steps a run) or ``thorough``
(200). A failure is shrunk by HypoFuzz (for up to an hour), not by ``run_machine``.

Known limits of HypoFuzz 25.11.1 (details in ``reports/FUZZING.md``): it needs a Hypothesis
that still has ``ConjectureResult.slice_comments`` (6.148.13 works; 6.170.17 kills the worker
when a shrink ends); it never keeps a state machine's coverage (its replay of a recorded input
is shifted by the machine's forced draws), so the machines are searched without coverage
guidance; and it cannot go back to a test with fixture arguments once it has left it, which is
why the scheduling properties are not here.
"""

from __future__ import annotations

import os

import pytest

from radixcheck.profiles import current
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.target import DEFAULT_TARGET, TARGET_ENV, Target, TargetError, check_target, load_target

# Only the state machines. The scheduling properties (oracle 6) take the plugin's `target`
# fixture, and HypoFuzz 25.11.1 cannot return to a test whose fixtures it tore down when it
# switched to another one (pytest: 'The fixture value for "target" is not available'): the
# worker dies. A TestCase takes no fixture argument, so the machines can be switched freely.
__all__: list[str] = []  # the TestCase classes, added below

TARGET: Target = load_target(os.environ.get(TARGET_ENV, DEFAULT_TARGET))
check_target(TARGET)  # a broken factory is one import error, not a fatal failure per fuzz target

# One state-machine TestCase per declared page size, e.g. `TestCacheMachine_page4`. The machine
# class is named after the target and page size, which keys HypoFuzz's database per target.
for _page_size in TARGET.capabilities.page_sizes_tested():
    _name = f"TestCacheMachine_page{_page_size}"
    globals()[_name] = machine_for(TARGET.factory, TARGET.capabilities, _page_size, TARGET.name).TestCase
    globals()[_name].settings = current()  # radixcheck's profile (HYPOTHESIS_PROFILE=dev / thorough): nothing is loaded globally
    __all__.append(_name)


@pytest.fixture(autouse=True)
def _one_target(target: Target) -> None:
    """Refuse to fuzz when the run also names another target (``--radix-target``): the machines
    above test ``RADIXCHECK_TARGET``'s cache, while the run's header would name the other one."""
    if target.spec != TARGET.spec:
        raise TargetError(f"the fuzz targets were built for {TARGET.spec!r} ({TARGET_ENV}), but this run names "
                          f"{target.spec!r}: name the target with {TARGET_ENV} only")
