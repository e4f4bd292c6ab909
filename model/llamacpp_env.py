"""Build the llama.cpp comparison environment: one venv with llama-cpp-python, nothing else.

    python -m radixcheck.model.llamacpp_env            # -> ~/.cache/radixcheck/llama-venv (~10 min: builds llama.cpp)
    python -m radixcheck.model.llamacpp_env --check    # is it there and does the worker start?
    python -m radixcheck.model.llamacpp_env --avx2     # -> ~/.cache/radixcheck/llama-venv-avx2: AVX2 only, no AVX-512
    python -m radixcheck.model.llamacpp_env --no-amx   # -> ~/.cache/radixcheck/llama-venv-noamx: the CPU's SIMD, no AMX
    python -m radixcheck.model.bench --llama-python "$(python -m radixcheck.model.llamacpp_env --print-python)" --threads 1

Why a separate venv: llama-cpp-python compiles llama.cpp from source (a C++ compiler and CMake
are needed; pip brings its own CMake if the system has none) and is never a dependency of the
project. The venv is a plain one (no ``--system-site-packages``): llama-cpp-python's own
requirements include NumPy, and the timing worker (``model/llamacpp.py``) is run as a *file*, not
as ``-m radixcheck.model.llamacpp``, so it needs neither radixcheck nor ml_dtypes there (the
earlier recipe failed on a fresh machine exactly because importing the package pulled them in).

``--no-amx`` is for a CPU with AMX (Intel Sapphire Rapids and later): the CPU's own build compiles
llama.cpp's AMX matrix product, which crashed (SIGSEGV in ``ggml_backend_amx_mul_mat``) on the first
prefill in a 2-core VM of such a CPU; the exact model's kernels use no AMX either, so the build with
the CPU's AVX-512 forms and without AMX is also the like-for-like comparison there.

Location: ``$RADIXCHECK_CACHE/llama-venv`` (default ``~/.cache/radixcheck/llama-venv``), or
``--venv``. Re-running is a no-op when the pinned version is already installed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import venv
from pathlib import Path

from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.model import kernel_build

VERSION = "0.3.36"  # the version the fixture and the benchmark figures were measured with


# llama.cpp's CMake options for an AVX2-only build (to compare with the exact model's ``avx2`` kernel
# path on a CPU that also has AVX-512): no -march=native, AVX2/FMA/F16C on, every AVX-512 form off;
# no multimodal library (mtmd: a quarter of the build, never loaded by the bench).
AVX2_CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
                   " -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
                   " -DGGML_AVX_VNNI=OFF -DLLAVA_BUILD=OFF")


# The CPU's own SIMD forms as llama.cpp's CMake options, for a build without -march=native (which
# would compile the AMX product on a CPU that has it): /proc/cpuinfo flag -> option.
SIMD_OPTIONS = (("avx", "GGML_AVX"), ("avx2", "GGML_AVX2"), ("fma", "GGML_FMA"), ("f16c", "GGML_F16C"),
                ("avx512f", "GGML_AVX512"), ("avx512vbmi", "GGML_AVX512_VBMI"), ("avx512_vnni", "GGML_AVX512_VNNI"),
                ("avx512_bf16", "GGML_AVX512_BF16"), ("avx_vnni", "GGML_AVX_VNNI"))


def no_amx_cmake_args(flags: frozenset[str]) -> str:
    """llama.cpp's CMake options for the CPU's own SIMD (``flags``: /proc/cpuinfo's) without AMX."""
    simd = " ".join(f"-D{option}={'ON' if flag in flags else 'OFF'}" for flag, option in SIMD_OPTIONS)
    return f"-DGGML_NATIVE=OFF {simd} -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"


def default_venv(avx2: bool = False, no_amx: bool = False) -> Path:
    base = Path(os.environ.get("RADIXCHECK_CACHE") or Path.home() / ".cache" / "radixcheck")
    return base / ("llama-venv-avx2" if avx2 else "llama-venv-noamx" if no_amx else "llama-venv")


def python_of(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def installed_version(py: Path) -> str | None:
    if not py.is_file():
        return None
    r = subprocess.run([str(py), "-c", "import llama_cpp; print(llama_cpp.__version__)"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def check(py: Path) -> bool:
    """Start the timing worker on the real model's GGUF (if it is on disk) and time one 8-token prefill."""
    from radixcheck.model import smollm2

    ver = installed_version(py)
    print(f"{py}: llama_cpp {ver or 'NOT importable'}")
    if ver is None:
        return False
    if not smollm2.available():
        print("SmolLM2 GGUF not on disk (python -m radixcheck.model.smollm2): worker not started")
        return True
    from radixcheck.model.bench import LlamaWorker

    try:
        w = LlamaWorker(str(py), smollm2.q8_path(), threads=1)
        wall, _ = w.prefill_seconds(8)
        w.close()
    except RuntimeError as exc:
        amx = "; on a CPU with AMX, build without it: --no-amx" if "amx_int8" in kernel_build.cpu_flags() else ""
        print(f"worker FAILED: {exc}{amx}")
        return False
    print(f"worker OK: 8-token prefill {wall * 1000:.1f} ms")
    return True


def build(env: Path, version: str, jobs: int | None, avx2: bool = False, no_amx: bool = False) -> Path:
    py = python_of(env)
    if installed_version(py) == version:
        print(f"llama-cpp-python {version} already in {env}")
        return py
    t0 = time.perf_counter()
    if not py.is_file():
        venv.EnvBuilder(with_pip=True, clear=False).create(env)
    pip = [str(py), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True)
    e = dict(os.environ)
    # build with all the CPU's own instructions (llama.cpp's default) or AVX2 only, in parallel
    e.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(jobs or os.cpu_count() or 1))
    if avx2:
        e["CMAKE_ARGS"] = (e.get("CMAKE_ARGS", "") + " " + AVX2_CMAKE_ARGS).strip()
    elif no_amx:
        e["CMAKE_ARGS"] = (e.get("CMAKE_ARGS", "") + " " + no_amx_cmake_args(kernel_build.cpu_flags())).strip()
    subprocess.run([*pip, "install", "--no-cache-dir", f"llama-cpp-python=={version}"], check=True, env=e)
    got = installed_version(py)
    if got != version:
        raise SystemExit(f"llama-cpp-python did not install ({got!r})")
    size = sum(f.stat().st_size for f in env.rglob("*") if f.is_file()) / 2**20
    print(f"built {env} in {time.perf_counter() - t0:.0f} s, {size:.0f} MB")
    return py


def version_number(text: str) -> str:
    """A release number such as 0.3.16 (it is pinned with ``==``)."""
    if not re.fullmatch(r"\d+(\.\d+)*", text):
        raise argparse.ArgumentTypeError(f"must be a release number such as {VERSION}, not {text!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m radixcheck.model.llamacpp_env", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", type=Path, default=None, help="where to build (default: $RADIXCHECK_CACHE/llama-venv)")
    ap.add_argument("--version", default=VERSION, type=version_number, help=f"llama-cpp-python version (default {VERSION})")
    ap.add_argument("--jobs", type=positive_int, default=None, help="parallel compile jobs (default: all cores)")
    ap.add_argument("--avx2", action="store_true",
                    help="build llama.cpp with AVX2 and without AVX-512 (default venv: $RADIXCHECK_CACHE/llama-venv-avx2)")
    ap.add_argument("--no-amx", action="store_true",
                    help="build llama.cpp with the CPU's SIMD but without AMX (default venv: $RADIXCHECK_CACHE/llama-venv-noamx)")
    ap.add_argument("--check", action="store_true", help="only check an existing environment")
    ap.add_argument("--print-python", action="store_true", help="print the venv's python path and exit")
    args = ap.parse_args(argv)
    if args.avx2 and args.no_amx:
        ap.error("--avx2 and --no-amx: choose one (an AVX2 build has no AMX)")
    env = (args.venv or default_venv(args.avx2, args.no_amx)).expanduser()
    if args.print_python:
        print(python_of(env))
        return 0
    if args.check:
        return 0 if check(python_of(env)) else 1
    py = build(env, args.version, args.jobs, args.avx2, args.no_amx)
    return 0 if check(py) else 1


if __name__ == "__main__":
    sys.exit(main())
