"""Build the isolated environment in which radixcheck audits the engines' radix caches.

    python reports/audit_env.py            # build .audit-venv/ (no-op if already complete)
    python reports/audit_env.py --force    # delete and rebuild it
    python reports/audit_env.py --check    # only say whether it is complete

``RADIXCHECK_AUDIT_VENV=/some/dir`` builds elsewhere (e.g. to time a fresh build); the
matrix (``python -m radixcheck.reports.matrix``) runs in ``.audit-venv/``.

mini-sglang and LightLLM are not installed: they are not on the package registry (LightLLM's one
release there is far behind the audited commit), so the adapters import them from the user's own
checkouts, named by ``RADIXCHECK_MINISGLANG_SRC`` and ``RADIXCHECK_LIGHTLLM_SRC``
(``properties/adapters/checkout.py``). This script takes the same settings: it says which commit
each one names (or what to clone, when one is missing; that only leaves the engine's matrix rows
"not run") and records them in the stamp's ``checkouts`` entry on every run.

One environment holds every engine, so that the matrix is one pytest-xdist run (every worker
must be able to collect every target). Each engine is one step, timed and sized on its own (the
stamp's ``engines`` entry): SGLang (below), then each adapter's own ``PIP_REQUIREMENTS_NO_DEPS``
and ``PIP_REQUIREMENTS`` (vLLM's CPU wheel, ``--no-deps`` plus nine small imports; mini-sglang's and
LightLLM's cache modules, read from the user's checkouts, need only torch and sortedcontainers;
LightLLM's registry release 0.0.1 is installed ``--no-deps`` beside them; Dynamo's KV router index,
``ai-dynamo-runtime==1.6.1``, with its two dependencies, pydantic and uvloop, already there).

The environment lives in ``.audit-venv/`` at the repository root (git-ignored). It holds the
CPU wheel of torch, ``sglang`` installed with ``--no-deps`` (its full dependency set pulls CUDA
kernels, triton and a GPU toolchain), the ordinary packages that importing
``sglang.srt.mem_cache.radix_cache`` / ``unified_radix_cache`` needs, and the suite's own
test dependencies (pytest, hypothesis, numpy). ``triton`` and ``torchvision`` are *not*
installed: the adapters in ``properties/adapters/`` register small stand-in modules for them
before the first sglang import (see ``properties/adapters/_sglang_stubs.py``).

None of this is a dependency of the main gate: the main environment never imports torch or
sglang, and the adapter modules import them only inside their factories.

The script prints how long each step took and how big the environment is, and records both in
``.audit-venv/radixcheck-audit.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

from radixcheck.argtypes import ArgumentParser

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("RADIXCHECK_AUDIT_VENV", ROOT / ".audit-venv"))  # override: measurements
STAMP = VENV / "radixcheck-audit.json"

TORCH = "torch==2.13.0"  # the CPU wheel on this machine's disk; any other version downloads GBs
SGLANG = "sglang==0.5.23"

# What `import sglang.srt.mem_cache.radix_cache` (and unified_radix_cache) needs at import time,
# found by importing until it stopped failing. Left unpinned except where a pin was needed.
IMPORT_DEPS = [
    "numpy",
    "orjson",
    "psutil",
    "pybase64",
    "requests",
    "packaging",
    "pillow",
    "starlette",
    "msgspec",
    "pydantic",
    "pyzmq",
    "tqdm",
    "IPython",
    "aiohttp",
    "transformers",
    "apache-tvm-ffi",
    "dill",
    "sentencepiece",
    "compressed-tensors",
    "gguf",
    "openai",  # UnifiedRadixCache
    "partial_json_parser",  # UnifiedRadixCache
]

# The suite itself, so `.audit-venv/bin/python -m pytest properties` runs: the project's own
# dependencies and its `real` and `dev` extras, read from pyproject.toml at build time.
SUITE_EXTRAS = ("real", "dev")


def suite_deps() -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(project.get("dependencies", []))
    for extra in SUITE_EXTRAS:
        deps += project.get("optional-dependencies", {}).get(extra, [])
    return [d for d in deps if not d.startswith("radixcheck")]


def python_in_venv() -> Path:
    return VENV / "bin" / "python"


def run(cmd: list[str], what: str, timings: dict[str, float]) -> None:
    print(f"[audit-env] {what}: {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    timings[what] = round(time.monotonic() - t0, 1)
    print(f"[audit-env] {what}: {timings[what]} s", flush=True)


def du_bytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                try:
                    total += os.path.getsize(p)
                except OSError:
                    pass
    return total


# Engines after SGLang: the adapter module whose PIP_REQUIREMENTS are installed, in this order.
ENGINE_ADAPTERS = {
    "vllm": "radixcheck.properties.adapters.vllm_prefix",
    "mini_sglang": "radixcheck.properties.adapters.mini_sglang",
    "lightllm": "radixcheck.properties.adapters.lightllm_radix",
    "dynamo": "radixcheck.properties.adapters.dynamo_index",  # ai-dynamo-runtime 1.6.1: 75 MB wheel, 217 MB unpacked
}


def engine_requirements(module: str) -> tuple[list[str], list[str]]:
    """An adapter's pip requirements: ``(PIP_REQUIREMENTS_NO_DEPS, PIP_REQUIREMENTS)``, the first
    installed ``--no-deps`` (an engine whose full dependency set would pull CUDA kernels or
    another torch). Importing an adapter module here never imports its engine (none is installed)."""
    import importlib

    adapter = importlib.import_module(module)
    return list(getattr(adapter, "PIP_REQUIREMENTS_NO_DEPS", [])), list(getattr(adapter, "PIP_REQUIREMENTS", []))


# Engines read from the user's checkout (or a registry release beside it): adapter module, and
# the factories whose code comes from different places.
CHECKOUT_ENGINES = {
    "mini_sglang": ("radixcheck.properties.adapters.mini_sglang", ("newest", "pre_fix_52")),
    "lightllm": ("radixcheck.properties.adapters.lightllm_radix", ("radix_cache", "release_0_0_1")),
}


def checkouts() -> dict[str, dict]:
    """Each checkout engine's setting and, per factory, the code it reads (or what is missing)."""
    import importlib

    from radixcheck.properties.adapters.checkout import EngineUnavailable

    found: dict[str, dict] = {}
    for key, (module, factories) in CHECKOUT_ENGINES.items():
        adapter = importlib.import_module(module)
        setting = adapter.REPO.setting
        entry: dict = {"setting": setting, "path": os.environ.get(setting, ""), "sources": {}}
        for name in factories:
            try:
                entry["sources"][name] = adapter.source_of(name).describe()
            except EngineUnavailable as exc:
                entry["sources"][name] = f"missing: {exc.problem}"
                print(f"[audit-env] {key}.{name}: its matrix rows will be 'not run'. {exc}", flush=True)
            else:
                print(f"[audit-env] {key}.{name}: {entry['sources'][name]}", flush=True)
        found[key] = entry
    return found


def record_checkouts() -> None:
    """Write the checkouts into the stamp of a built environment."""
    if STAMP.exists():
        info = json.loads(STAMP.read_text())
        info["checkouts"] = checkouts()
        STAMP.write_text(json.dumps(info, indent=1))


def record_engine(engines: dict[str, dict], key: str, seconds: float, size_before: int) -> int:
    """Note what one engine's step took and added; return the environment's size now."""
    size = du_bytes(VENV)
    added = size - size_before
    engines[key] = {"seconds": round(seconds, 1), "size_bytes": added, "size_human": f"{added / 2**20:.0f} MiB"}
    print(f"[audit-env] {key}: {engines[key]['seconds']} s, +{engines[key]['size_human']}", flush=True)
    return size


def packages_of(freeze: str) -> list[str]:
    """``pip freeze``'s output, one requirement a line: its comments left out (an editable install
    without a remote is preceded by one), an editable install kept whole (``-e /path``)."""
    return [line.strip() for line in freeze.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def check() -> bool:
    """The environment was built to the end and sglang's radix caches import in it."""
    return STAMP.exists() and imports_ok()


def imports_ok() -> bool:
    if not python_in_venv().exists():
        return False
    probe = (
        "from radixcheck.properties.adapters import _sglang_stubs; _sglang_stubs.install();"
        "import sglang.srt.mem_cache.radix_cache, torch; print(torch.__version__);"
        "import vllm.v1.core.kv_cache_manager, sortedcontainers, lightllm.server.router.dynamic_prompt.radix_cache;"
        "from dynamo._core import RadixTree"
    )
    r = subprocess.run([str(python_in_venv()), "-c", probe], capture_output=True, text=True)
    return r.returncode == 0


def build(force: bool) -> None:
    if force and VENV.exists():
        shutil.rmtree(VENV)
    if not force and check():
        print(f"[audit-env] {VENV} is complete; nothing to do (use --force to rebuild)")
        record_checkouts()
        print(STAMP.read_text())
        return
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    if not python_in_venv().exists():
        print(f"[audit-env] creating venv {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    pip = [str(python_in_venv()), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    engines: dict[str, dict] = {}
    run(pip + [TORCH], "torch", timings)
    run(pip + suite_deps() + [TORCH], "suite deps", timings)
    size = du_bytes(VENV)
    run(pip + ["--no-deps", SGLANG], "sglang --no-deps", timings)
    # torch is already satisfied at 2.13.0; pin it so no dependency upgrades it.
    run(pip + IMPORT_DEPS + [TORCH], "sglang import deps", timings)
    size = record_engine(engines, "sglang", timings["sglang --no-deps"] + timings["sglang import deps"], size)
    for key, module in ENGINE_ADAPTERS.items():
        no_deps, deps = engine_requirements(module)
        took = 0.0
        if no_deps:
            run(pip + ["--no-deps", *no_deps], f"{key} --no-deps", timings)
            took += timings[f"{key} --no-deps"]
        if deps:  # torch pinned on the same line, so that nothing upgrades it
            run(pip + deps + [TORCH], f"{key} deps", timings)
            took += timings[f"{key} deps"]
        size = record_engine(engines, key, took, size)
    run(pip + ["--no-deps", "-e", str(ROOT)], "radixcheck itself (editable, no deps)", timings)
    ok = imports_ok()
    total = round(time.monotonic() - t0, 1)
    size = du_bytes(VENV)
    frozen = packages_of(subprocess.run(
        [str(python_in_venv()), "-m", "pip", "freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
    ).stdout)
    info = {
        "ok": ok,
        "seconds_total": total,
        "seconds_by_step": timings,
        "engines": engines,
        "size_bytes": size,
        "size_human": f"{size / 2**30:.2f} GiB",
        "python": sys.version.split()[0],
        "packages": frozen,
        "checkouts": checkouts(),
    }
    STAMP.write_text(json.dumps(info, indent=1))
    print(f"[audit-env] done in {total} s; {VENV} is {info['size_human']}; import check: {ok}")
    if not ok:
        sys.exit("[audit-env] the environment was built but sglang's radix cache does not import")


def main(argv: list[str] | None = None) -> None:
    ap = ArgumentParser(prog="python -m radixcheck.reports.audit_env", description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="delete and rebuild the environment")
    ap.add_argument("--check", action="store_true", help="only report whether it is complete")
    args = ap.parse_args(argv)
    if args.check:
        ok = check()
        print(f"[audit-env] {VENV}: {'complete' if ok else 'missing or incomplete'}")
        sys.exit(0 if ok else 1)
    build(args.force)


if __name__ == "__main__":
    main()
