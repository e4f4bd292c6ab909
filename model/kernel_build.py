"""Build the exact model's C kernels (``model/kernels/*.c``) into a shared library, once per machine.

The C files ship inside the package (package data) and are read with ``importlib.resources``, so
an editable install and a wheel build them alike. The library goes to
``$RADIXCHECK_CACHE/kernels`` (default ``~/.cache/radixcheck/kernels``) under a key that hashes
the files' contents, the compiler (its path and ``--version``), the compiler flags, the CPU's
flags and the platform: change any of them and a new library is built (about a second).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

# IEEE arithmetic exactly as written: no -ffast-math, no contraction of a*b+c into an FMA (rms_norm
# must round like NumPy; the kernels' own FMAs are explicit and exact)
COMMON_FLAGS = ("-O2", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared")
ISA_FLAGS = ("-march=native",)


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


def cache_root() -> Path:
    return Path(os.environ.get("RADIXCHECK_CACHE") or Path.home() / ".cache" / "radixcheck") / "kernels"


def build_key(cc: str, flags: tuple[str, ...]) -> str:
    parts = [f"{n}\0{t}" for n, t in sources().items()]
    parts += [cc, _compiler_version(cc), " ".join(flags), " ".join(sorted(cpu_flags())), sys.platform, platform.machine()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def build(cc: str, flags: tuple[str, ...], so: Path) -> None:
    """Compile every ``.c`` file into ``so`` (atomically: parallel test workers may build at once)."""
    so.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=so.parent) as tmp:
        for name, text in sources().items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        out = Path(tmp) / so.name
        c_files = [str(Path(tmp) / n) for n in sources() if n.endswith(".c")]
        subprocess.run([cc, *flags, "-I", tmp, "-o", str(out), *c_files, "-lm"], check=True, capture_output=True, text=True)
        os.replace(out, so)


def library_path() -> Path | None:
    """The compiled library (built now if it is not in the cache), or ``None`` without a compiler.
    Raises ``OSError`` or ``subprocess.CalledProcessError`` if the build fails."""
    cc = compiler()
    if cc is None:
        return None
    flags = (*COMMON_FLAGS, *ISA_FLAGS)
    so = cache_root() / f"q8kernel-{build_key(cc, flags)}.so"
    if not so.is_file():
        build(cc, flags, so)
    return so
