"""Stand-ins for ``triton`` and ``torchvision``, so SGLang's radix caches import on a CPU box.

SGLang imports ``triton`` (a ~1 GB GPU-only wheel) and, through some model-config modules,
``torchvision`` (whose PyPI build does not match the CPU torch wheel) at module level, although
nothing on the radix-cache code path ever *runs* them. :func:`install` puts a meta-path finder
in front of the import system that answers ``import triton``, ``import triton.language as tl``,
``from torchvision.transforms import X`` and the like with permissive placeholder modules.

Every attribute of a placeholder module is a :class:`_Placeholder`: usable as a decorator
(``@triton.jit``, ``@triton.autotune(...)`` return the function unchanged), as a base class, in
annotations and constant expressions. Calling one for real (launching a kernel) raises
:class:`StubbedOut`, so a code path that truly needs triton fails loudly instead of silently.

This module does not import torch or sglang; it only touches ``sys.meta_path``.
Call :func:`install` before the first ``import sglang``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = ("triton", "torchvision")
_VERSIONS = {"triton": "3.5.0", "torchvision": "0.28.0"}


class StubbedOut(RuntimeError):
    """A radixcheck stand-in for a GPU-only package was actually used."""


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make_placeholder(f"{cls.__qualname__}.{name}")

    def __getitem__(cls, item):  # kernel[grid], tl.tensor[...] in annotations
        return cls

    def __call__(cls, *args, **kwargs):
        # @stub            -> decorator applied to a function/class: hand it back unchanged
        # @stub(...)       -> decorator factory: return a decorator that does the same
        if len(args) == 1 and not kwargs and (callable(args[0]) or isinstance(args[0], type)):
            return args[0]
        if not args:
            return cls
        if all(not callable(a) for a in args):
            # triton.cdiv(a, b), tl.constexpr(3), triton.Config({...}) at import time
            return cls
        raise StubbedOut(f"{cls.__qualname__} is a radixcheck stand-in; it cannot run")

    def __repr__(cls) -> str:
        return f"<radixcheck stand-in {cls.__qualname__}>"

    # arithmetic / comparisons at import time (e.g. version checks on constants)
    def __bool__(cls) -> bool:
        return False


def _make_placeholder(qualname: str) -> type:
    return _PlaceholderMeta(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname})


class _StubModule(types.ModuleType):
    __radixcheck_stub__ = True

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        # A submodule (triton.language) if one is imported that way; else a placeholder.
        full = f"{self.__name__}.{name}"
        if full in sys.modules:
            return sys.modules[full]
        value = _make_placeholder(full)
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []  # a package, so `import triton.language.core` works
        top = spec.name.split(".")[0]
        mod.__version__ = _VERSIONS.get(top, "0.0.0")
        return mod

    def exec_module(self, module) -> None:
        pass


class _StubFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        return None


_FINDER = _StubFinder()


def install() -> None:
    """Register the stand-ins (idempotent). Must run before the first ``import sglang``."""
    for name in STUBBED:
        real = sys.modules.get(name)
        if real is not None and not getattr(real, "__radixcheck_stub__", False):
            raise RuntimeError(f"the real {name} is already imported; stand-ins would clash")
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def installed() -> bool:
    return _FINDER in sys.meta_path
