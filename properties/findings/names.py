"""The names a waiver can give: radixcheck's oracles and its conformance tests.

Both are read from the code that defines them (the oracle classes of
:mod:`radixcheck.oracles.violations`, the names :func:`~radixcheck.properties.findings.failures.oracle_of`
gives the rest, the ``test_*`` functions of :mod:`radixcheck.properties.conformance`), so a new
oracle or test is known here without a list to keep up to date.
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

from radixcheck.oracles import violations
from radixcheck.properties.findings.failures import ASSERTION, CRASH, CRASH_SAID, HANG

CONFORMANCE_PACKAGE = "radixcheck.properties.conformance"


@cache
def oracle_names() -> tuple[str, ...]:
    """Every oracle name a finding can carry, as the audit prints it; a crash's with ``*`` for its
    exception's class (``crash (* raised during a legal call)``), or a wire server's with what
    happened (``crash (*: *)``: ``crash (WireServerDied: the wire server stopped)``)."""
    declared = [cls.oracle for cls in vars(violations).values()
                if isinstance(cls, type) and issubclass(cls, violations.ContractViolation)]
    return (*dict.fromkeys(declared), HANG, ASSERTION, CRASH.format("*"), CRASH_SAID.format("*", "*"))


@cache
def conformance_tests() -> frozenset[tuple[str, str, bool]]:
    """(module file, test name, whether it takes ``target``) of each test function in the
    conformance package: parsed, not imported (importing them first would keep pytest from
    rewriting their asserts, and the plugin's controller needs them before any collection)."""
    here = Path(importlib.import_module(CONFORMANCE_PACKAGE).__file__).resolve().parent
    tests = set()
    for path in here.glob("test_*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                tests.add((path.name, node.name, any(a.arg == "target" for a in node.args.args)))
    return frozenset(tests)


def conformance_test_names() -> tuple[str, ...]:
    """The names (without parameters) of the test functions pytest collects from the conformance package."""
    return tuple(sorted({name for _, name, _ in conformance_tests()}))
