"""Engines that are not on the package registry, imported from the user's own git checkout.

radixcheck ships no engine's code. An engine on the package registry is installed from it (SGLang,
vLLM). One that is not (mini-sglang; LightLLM at the audited commit, far ahead of its only
release there) is imported from a checkout the user made, named by one setting per engine, all
of the same form ``RADIXCHECK_<ENGINE>_SRC=/path/to/checkout`` (:data:`MINI_SGLANG`,
:data:`LIGHTLLM`, :data:`PRODUCTION_STACK`). The same setting serves the adapters, the matrix, ``reports/audit_env.py`` and
the repros in ``reports/repro/``.

* :func:`working_tree` takes the checkout as it is. It reads its commit (``git rev-parse HEAD``)
  and whether the engine's files differ from it, and warns (:class:`UnvalidatedCommit`) when that
  commit is not one radixcheck was validated on.
* :func:`at_commit` takes one commit from the checkout's history (``git archive`` of the engine's
  folder into ``$RADIXCHECK_CACHE`` or ``~/.cache/radixcheck``, under ``engines/<name>/<commit>/``,
  once): how the matrix audits mini-sglang's commit before its #52 fix whatever is checked out.
* :func:`import_unchanged` imports one module file from there unchanged. Its package's own
  ``__init__.py`` (which would import the whole engine) is not run: the module is imported in a
  package made here whose path is the module's folder, so its relative imports find its
  siblings. What it must not import for real (CUDA kernels, shared memory) is put into
  ``sys.modules`` first, as stand-ins written for radixcheck (``_minisgl_stubs.py``,
  ``_lightllm_stubs.py``): for the one import (:func:`stand_ins_while_importing`, LightLLM's,
  whose registry release may be imported in the same process), or for the life of the process
  (:func:`install_stand_ins`, mini-sglang's, which it imports again at call time).

A missing or unusable setting raises :class:`CheckoutMissing`, whose message says what to clone,
from where, at which commit, and which setting to give.
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

CACHE_ENV = "RADIXCHECK_CACHE"  # the same cache directory as model/smollm2.py's


class EngineUnavailable(RuntimeError):
    """The engine's code is not on this machine: :class:`CheckoutMissing` or :class:`NotInstalled`."""


class NotInstalled(EngineUnavailable):
    """A registry release the adapter audits is not installed (the message says what to install)."""

    def __init__(self, message: str, problem: str = "") -> None:
        super().__init__(message)
        self.problem = problem or message


class CheckoutMissing(EngineUnavailable):
    """The engine's checkout is not set, not there, or lacks what the adapter needs."""

    def __init__(self, message: str, problem: str = "") -> None:
        super().__init__(message)
        self.problem = problem or message
        """What is wrong, in a few words (the message goes on to say what to do)."""


class UnvalidatedCommit(UserWarning):
    """The checkout is at a commit radixcheck's adapter was not validated on."""


@dataclass(frozen=True)
class EngineRepo:
    """An engine audited from the user's checkout: where to get it, and which commits were audited."""

    name: str
    setting: str
    url: str
    folder: str
    """The engine's folder inside the checkout that the adapter imports from (and archives)."""
    validated: dict[str, str]
    """Full commit -> what it is: the commits the adapter was validated on."""

    def missing(self, problem: str) -> CheckoutMissing:
        """The one message for every way the checkout can be missing: ``problem``, then what to do."""
        slug = self.url.rstrip("/").rsplit("/", 1)[-1]
        newest = next(iter(self.validated))
        audited = "; ".join(f"{c[:7]} ({what})" for c, what in self.validated.items())
        return CheckoutMissing(
            f"{problem}. radixcheck audits {self.name} from your own git checkout, not from the package registry. "
            f"Clone it and name it: git clone {self.url} ~/src/{slug} && git -C ~/src/{slug} checkout "
            f"{newest[:7]} && export {self.setting}=~/src/{slug} (audited commits: {audited}).",
            problem,
        )


@dataclass(frozen=True)
class Source:
    """Where an engine's files were imported from, and at which commit."""

    repo: EngineRepo
    root: Path
    """The directory that holds the engine's :attr:`EngineRepo.folder`."""
    commit: str | None
    """Full commit id, or None when the checkout is not a git repository."""
    modified: bool
    """The engine's folder differs from :attr:`commit` (uncommitted changes)."""
    origin: str
    """``"working tree"`` or ``"archived from the checkout's history"``."""

    @property
    def validated(self) -> bool:
        return self.commit in self.repo.validated and not self.modified

    @property
    def folder(self) -> Path:
        return self.root / self.repo.folder

    def describe(self) -> str:
        """One line for reports: the commit, how it was taken, whether it was validated."""
        commit = self.commit[:12] if self.commit else "unknown commit (not a git checkout)"
        changes = " with uncommitted changes" if self.modified else ""
        verdict = "validated" if self.validated else "NOT a commit radixcheck was validated on"
        return f"{self.repo.name} {commit}{changes} ({self.origin}; {verdict})"


MINI_SGLANG = EngineRepo(
    name="mini-sglang",
    setting="RADIXCHECK_MINISGLANG_SRC",
    url="https://github.com/sgl-project/mini-sglang",
    folder="python/minisgl/kvcache",
    validated={
        "20fcd7f3c6a1898a61139fae1c97cc7a40bd8d66": "newest audited, 2026-03-13",
        "f07487349b5a285dffd3cf66753247a0a9b262e0": "parent of the #52 fix, 2025-12-27",
    },
)

LIGHTLLM = EngineRepo(
    name="LightLLM",
    setting="RADIXCHECK_LIGHTLLM_SRC",
    url="https://github.com/ModelTC/lightllm",
    folder="lightllm/server/router/dynamic_prompt",
    validated={"fc72ffab9a3455cfb571f22d45ab777cc29de0de": "optimize radix cache (#968), 2025-07-11"},
)

TOKENSPEED = EngineRepo(
    name="TokenSpeed",
    setting="RADIXCHECK_TOKENSPEED_SRC",
    url="https://github.com/lightseekorg/tokenspeed",
    folder="python/tokenspeed/runtime",
    validated={"418ec9d26dc324cbdb14d44b34f5216d4dfb9b8e": "last commit with runtime/cache/prefix_cache.py (the parent of "
                                                           "f3e4d1e, #864 'Remove Radix cache path'), 2026-08-03"},
)


PRODUCTION_STACK = EngineRepo(
    name="vLLM production stack",
    setting="RADIXCHECK_PRODUCTION_STACK_SRC",
    url="https://github.com/vllm-project/production-stack",
    folder="src/vllm_router/prefix",
    validated={"a6c01db05f65f556235413ba8dbcfb0c01132fff": "main, 2026-08-05 (hashtrie.py unchanged since it was added)"},
)


def _git(checkout: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=not binary, check=False)


def checkout(repo: EngineRepo) -> Path:
    """The checkout named by ``repo.setting``; :class:`CheckoutMissing` if unset or unusable."""
    value = os.environ.get(repo.setting, "").strip()
    if not value:
        raise repo.missing(f"{repo.setting} is not set")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise repo.missing(f"{repo.setting}={value}: no such directory")
    if not (path / repo.folder).is_dir():
        raise repo.missing(f"{repo.setting}={value} is not a {repo.name} checkout: it has no {repo.folder}/")
    return path


def working_tree(repo: EngineRepo) -> Source:
    """The checkout as it is, with its commit; warns if that commit was not validated."""
    path = checkout(repo)
    head = _git(path, "rev-parse", "HEAD")
    commit = head.stdout.strip() if head.returncode == 0 else None
    status = _git(path, "status", "--porcelain", "--", repo.folder) if commit else None
    source = Source(repo, path, commit, bool(status and status.stdout.strip()), "working tree")
    if not source.validated:
        known = ", ".join(c[:7] for c in repo.validated)
        warnings.warn(UnvalidatedCommit(f"{repo.setting}: {source.describe()}; the adapter was validated on {known}, "
                                        "so a failure may be the adapter's, not the engine's"), stacklevel=2)
    return source


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "radixcheck")


def at_commit(repo: EngineRepo, commit: str) -> Source:
    """The engine's folder at ``commit`` of the checkout's history, archived into the cache (once)."""
    path = checkout(repo)
    resolved = _git(path, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if resolved.returncode != 0:
        raise repo.missing(f"{repo.setting}={path} has no commit {commit} in its history (a shallow clone? "
                           f"git -C {path} fetch --unshallow)")
    full = resolved.stdout.strip()
    target = cache_dir() / "engines" / repo.name / full
    if not (target / repo.folder).is_dir():
        archive = _git(path, "archive", "--format=tar", full, "--", repo.folder, binary=True)
        if archive.returncode != 0:
            raise repo.missing(f"git archive {full[:7]} -- {repo.folder} failed in {path}: "
                               f"{archive.stderr.decode(errors='replace').strip()}")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".partial-"))
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(staging, filter="data")
        try:
            staging.rename(target)  # atomic: a concurrent worker's copy of the same commit wins
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return Source(repo, target, full, False, "archived from the checkout's history")


@dataclass(frozen=True)
class Installed:
    """An engine release installed from the package registry (what ``pip`` users get)."""

    name: str
    distribution: str
    version: str

    def describe(self) -> str:
        return f"{self.name} {self.version} (package registry: pip install --no-deps {self.distribution}=={self.version})"


@contextmanager
def stand_ins_while_importing(modules: dict[str, ModuleType]) -> Iterator[None]:
    """Put stand-ins into ``sys.modules`` for one import only, then restore what was there.

    For an engine whose module imports them only at its top (LightLLM), so that a real release
    of the same package can be imported in the same process, before or after."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def install_stand_ins(modules: dict[str, ModuleType]) -> None:
    """Put radixcheck's stand-in modules into ``sys.modules`` under the engine's names.

    Refuses (:class:`ImportError`) to replace a module of that name that is not a stand-in: the
    real engine is already imported in this process, and swapping it would break its users."""
    for name, module in modules.items():
        present = sys.modules.get(name)
        if present is not None and present is not module and not getattr(present, "__radixcheck_stand_in__", False):
            raise ImportError(f"cannot put radixcheck's stand-in for {name!r} into sys.modules: "
                              f"the real {name!r} is already imported in this process ({present!r})")
        module.__radixcheck_stand_in__ = True  # type: ignore[attr-defined]
        sys.modules[name] = module


_packages: dict[Path, str] = {}


def import_unchanged(source: Source, module: str, siblings: dict[str, ModuleType] | None = None) -> ModuleType:
    """Import ``<source.folder>/<module>.py`` unchanged, once per folder and module name.

    It is imported as ``<package>.<module>``, where ``<package>`` is a package made here whose
    path is the folder, so ``from .base import ...`` imports the checkout's ``base.py``; the
    folder's ``__init__.py`` is not run. ``siblings`` are stand-ins for modules of that folder
    (``{"shared_arr": ...}`` for ``from .shared_arr import ...``), installed first."""
    folder = source.folder.resolve()
    if folder not in _packages:
        package_name = f"_radixcheck_engine_{len(_packages)}"
        package = ModuleType(package_name, f"{source.describe()}: {folder}")
        package.__path__ = [str(folder)]  # type: ignore[attr-defined]
        package.__radixcheck_source__ = source  # type: ignore[attr-defined]
        sys.modules[package_name] = package
        _packages[folder] = package_name
    package_name = _packages[folder]
    for name, stand_in in (siblings or {}).items():
        install_stand_ins({f"{package_name}.{name}": stand_in})
    full_name = f"{package_name}.{module}"
    if full_name in sys.modules:
        return sys.modules[full_name]
    path = folder / f"{module}.py"
    if not path.is_file():
        raise source.repo.missing(f"{source.describe()} has no {source.repo.folder}/{module}.py")
    spec = importlib.util.spec_from_file_location(full_name, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[full_name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[full_name]
        raise
    return loaded


__all__ = ["CACHE_ENV", "LIGHTLLM", "MINI_SGLANG", "PRODUCTION_STACK", "TOKENSPEED", "CheckoutMissing", "EngineRepo", "EngineUnavailable",
           "Installed",
           "NotInstalled", "Source", "UnvalidatedCommit", "at_commit", "cache_dir", "checkout", "import_unchanged",
           "install_stand_ins", "stand_ins_while_importing", "working_tree"]
