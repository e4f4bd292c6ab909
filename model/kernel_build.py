"""Build the exact model's C kernels (``model/kernels/*.c``), one shared library per instruction-set path.

The C files ship inside the package (package data) and are read with ``importlib.resources``, so
an editable install and a wheel build them alike. Each *path* compiles the same files with other
instruction-set flags; the code picks its AVX-512, AVX2 or portable forms from the compiler's
macros (``kernels.h``), and every form computes the same integers and the same IEEE operations,
so every path gives the bits of the NumPy path:

``avx512``   AVX-512F/BW/VL/DQ + VNNI (``vpdpwssd``): the CPU needs all of them
``avx2``     AVX2 + FMA
``portable`` plain C (any CPU)

A library goes to ``$RADIXCHECK_CACHE/kernels`` (default ``~/.cache/radixcheck/kernels``) under a
key that hashes the files' contents, the compiler (its path and ``--version``), the compiler flags,
the CPU's flags and the platform: change any of them and a new library is built (about a second).
Right after a build the caller's self-test runs once (``q8kernel`` passes
``model.kernel_selftest``) and its verdict is kept beside the library (``*.selftest.json``), so a
path that failed is known to have failed in every later process too; a verdict is kept with the
self-test's version, and a changed self-test runs again (on the library already built).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

# IEEE arithmetic exactly as written: no -ffast-math, no contraction of a*b+c into an FMA (rms_norm
# must round like NumPy; the kernels' own FMAs are explicit and exact). -O3's vectoriser keeps every
# element's operations and never reorders a floating-point sum without -ffast-math. The warnings
# are kept beside the library (``compiler_warnings``); the tests require there are none.
COMMON_FLAGS = ("-O3", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared", "-Wall", "-Wextra")
X86 = ("x86_64", "amd64", "i386", "i686", "x86")


@dataclass(frozen=True)
class KernelPath:
    """One way to compile the kernels: its compiler flags and the CPU flags it needs (x86 only if any)."""

    name: str
    isa_flags: tuple[str, ...]
    cpu_needs: tuple[str, ...]

    @property
    def flags(self) -> tuple[str, ...]:
        return (*COMMON_FLAGS, *self.isa_flags)


PATHS = (  # best first: ``auto`` takes the first one that the CPU runs and that passes its self-test
    KernelPath(
        "avx512",
        ("-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512vnni"),
        ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"),
    ),
    KernelPath("avx2", ("-mavx2", "-mfma"), ("avx2", "fma")),
    KernelPath("portable", (), ()),
)
BY_NAME = {p.name: p for p in PATHS}


@cache
def sources() -> dict[str, str]:
    """The kernel files (``model/kernels/*.c`` and ``*.h``), name -> text, in name order."""
    root = resources.files("radixcheck.model") / "kernels"
    files = sorted((f for f in root.iterdir() if f.name.endswith((".c", ".h"))), key=lambda f: f.name)
    return {f.name: f.read_text(encoding="utf-8") for f in files}


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


@cache
def _compiler_version(cc: str) -> str:
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in f if ":" in line)}
        name, family, model = fields.get("model name", ""), fields.get("cpu family", ""), fields.get("model", "")
        if name:
            return f"{name} (family {family}, model {model})" if family else name
    except OSError:
        pass
    return platform.processor() or platform.machine()


def missing_flags(path: KernelPath) -> list[str]:
    """The CPU flags ``path`` needs that this CPU does not report (all of them off x86)."""
    if not path.cpu_needs:
        return []
    if platform.machine().lower() not in X86:
        return list(path.cpu_needs)
    have = cpu_flags()
    return [f for f in path.cpu_needs if f not in have]


def cache_root() -> Path:
    return Path(os.environ.get("RADIXCHECK_CACHE") or Path.home() / ".cache" / "radixcheck") / "kernels"


def build_key(cc: str, flags: tuple[str, ...]) -> str:
    parts = [f"{n}\0{t}" for n, t in sources().items()]
    parts += [cc, _compiler_version(cc), " ".join(flags), " ".join(sorted(cpu_flags())), sys.platform, platform.machine()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def library_file(path: KernelPath, cc: str) -> Path:
    return cache_root() / f"q8kernel-{path.name}-{build_key(cc, path.flags)}.so"


def compile_library(cc: str, flags: tuple[str, ...], so: Path) -> str:
    """Compile the ``.c`` files into ``so`` (atomically: parallel test workers may build at once).

    They are compiled as one unit (a generated file that includes each of them, as SQLite's
    amalgamation does): ``immintrin.h`` is parsed once instead of once per file, a third of the
    build's CPU time. Each file still compiles on its own (``kernels.h`` declares what they share;
    the tests compile each one alone). Returns what the compiler printed (its warnings)."""
    so.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=so.parent) as tmp:
        for name, text in sources().items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        unit = Path(tmp) / "all_kernels.c"
        unit.write_text("".join(f'#include "{n}"\n' for n in sources() if n.endswith(".c")))
        out = Path(tmp) / so.name
        res = subprocess.run([cc, *flags, "-I", tmp, "-o", str(out), str(unit), "-lm"], check=True, capture_output=True, text=True)
        os.replace(out, so)
    return res.stderr.replace(tmp + os.sep, "")


@contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """One process at a time builds and self-tests a library (the others wait, then reuse it)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the atomic rename still keeps every library whole
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure(path: KernelPath, cc: str, selftest: Callable[[Path], str | None], selftest_id: str = "") -> tuple[Path, str | None]:
    """``path``'s library, built if it is not in the cache, and its self-test verdict: ``None`` if
    it passed, else what failed. ``selftest(so)`` runs right after the build, and again whenever the
    kept verdict is not that of ``selftest_id`` (the self-test's version): a library that passed
    an earlier, weaker self-test is not trusted by a stronger one until it passes that too.
    Raises ``OSError`` or ``subprocess.CalledProcessError`` if the build fails."""
    so = library_file(path, cc)
    verdict = so.with_suffix(".selftest.json")
    with _locked(so.with_suffix(".lock")):
        kept = json.loads(verdict.read_text()) if verdict.is_file() else None
        if not so.is_file():
            kept = {"compiler_warnings": compile_library(cc, path.flags, so)}
        if kept is None or "passed" not in kept or kept.get("selftest_id", "") != selftest_id:
            failure = selftest(so)
            tmp = verdict.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"passed": failure is None, "detail": failure or "", "selftest_id": selftest_id,
                                       "compiler_warnings": (kept or {}).get("compiler_warnings", "")}) + "\n")
            os.replace(tmp, verdict)
    saved = json.loads(verdict.read_text())
    return so, None if saved["passed"] else saved["detail"] or "failed"


def compiler_warnings(path: KernelPath, cc: str) -> str | None:
    """What the compiler printed when it built ``path``'s library (``None`` if it is not built)."""
    verdict = library_file(path, cc).with_suffix(".selftest.json")
    return json.loads(verdict.read_text()).get("compiler_warnings", "") if verdict.is_file() else None
