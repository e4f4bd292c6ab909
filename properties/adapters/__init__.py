"""Adapters that put third-party radix caches behind radixcheck's cache contract.

Each module here is a thin factory layer for one implementation. Importing a module never
imports the third-party package: that happens inside the factory, so the main gate can
collect the suite without it. See ``sglang_radix.py``.
"""

from collections.abc import Callable


def factory_lookup(module: str, factories: dict[str, Callable]) -> Callable[[str], Callable]:
    """A module ``__getattr__`` (PEP 562) by which ``module:<factory>`` names a factory of ``factories``."""

    def __getattr__(name: str) -> Callable:
        try:
            return factories[name]
        except KeyError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None

    return __getattr__
