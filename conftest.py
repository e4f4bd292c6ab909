"""radixcheck's own test session (this checkout only; never shipped or imported by the kit).

Here radixcheck's Hypothesis profiles are the session's: registered over Hypothesis's names (so
`ci` is radixcheck's `ci`) and the default one loaded, as the self-tests and meta-tests expect.
The installed plugin does neither in other projects (``radixcheck.profiles``).
"""

from __future__ import annotations

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


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("hypothesis_profile", None):  # else Hypothesis's plugin has loaded the one asked for
        settings.load_profile(profiles.default_profile())
