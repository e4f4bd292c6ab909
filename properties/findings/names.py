"""The names a waiver can give: radixcheck's oracles and its conformance tests.

Both are read from the code that defines them (the oracle classes of
:mod:`radixcheck.oracles.violations`, the names :func:`~radixcheck.properties.findings.failures.oracle_of`
gives the rest, the ``test_*`` functions of :mod:`radixcheck.properties.conformance`), so a new
oracle or test is known here without a list to keep up to date.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from radixcheck.oracles import violations
from radixcheck.properties.findings.failures import ASSERTION, CRASH, HANG

CONFORMANCE_PACKAGE = "radixcheck.properties.conformance"


@cache
def oracle_names() -> tuple[str, ...]:
    """Every oracle name a finding can carry, as the audit prints it; a crash's with ``*`` for its
    exception's class (``crash (* raised during a legal call)``)."""
    declared = [cls.oracle for cls in vars(violations).values()
                if isinstance(cls, type) and issubclass(cls, violations.ContractViolation)]
    return (*dict.fromkeys(declared), HANG, ASSERTION, CRASH.format("*"))


@cache
def conformance_test_names() -> tuple[str, ...]:
    """The names (without parameters) of the test functions pytest collects from the conformance package."""
    package = importlib.import_module(CONFORMANCE_PACKAGE)
    names: set[str] = set()
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("test_"):
            loaded = importlib.import_module(f"{CONFORMANCE_PACKAGE}.{module.name}")
            names.update(name for name, value in vars(loaded).items() if name.startswith("test_") and callable(value))
    return tuple(sorted(names))
