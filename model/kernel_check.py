"""Re-run the model's bit-identity properties under other OpenBLAS kernel sets, on every compiled
kernel path (run by hand).

    python -m radixcheck.model.kernel_check              # kernel sets: as-is, default detection, Haswell, Zen
    python -m radixcheck.model.kernel_check --real       # also the real SmolLM2's logits (if on disk)
    python -m radixcheck.model.kernel_check --sets Haswell SkylakeX
    python -m radixcheck.model.kernel_check --sets as-is --no-tests   # the kernel paths only

Tests and CI never set or unset ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE``; this script is the
one place that does, each time only in the environment of one child process. It

1. prints every compiled kernel path (``model.q8kernel``: ``avx512``, ``avx2``, ``portable``) with
   its self-test verdict, the CPU's name and flags: a path this CPU cannot run is reported as
   "not tested", never as passed, and one that failed its self-test as FAILED (with the first
   difference);
2. for every kernel set, runs the model's property tests (``tests/test_model_{reuse,kv_ops,radix,
   kv_memo,q8kernel}.py`` and ``meta_tests/test_model_meta.py``, Hypothesis profile ``ci``) in a
   subprocess — they compare every usable path with the NumPy path themselves;
3. computes a fixed prompt's logits for the exact model and for the plain-float-BLAS variant,
   under 1 and 2 threads (``Model.threads`` and ``Model.blas_threads``): on the NumPy path under
   every kernel set (BLAS is all it depends on), and on every usable compiled path
   (``RADIXCHECK_Q8_KERNEL=<path>``, under the first kernel set: the compiled paths call no BLAS).

It passes when every path this CPU runs passed its self-test, every test run passes, and the exact
logits are equal (``np.array_equal``) across all kernel sets, paths and thread counts, reuse equal
to a full prefill everywhere (SHA-256 digests are printed; the float variant's are shown for
contrast: they usually differ). ``--sets`` names: ``as-is`` (the inherited environment),
``default`` (both variables unset: the CPU's own kernel set), or any ``OPENBLAS_CORETYPE`` value.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from radixcheck.argtypes import ArgumentParser

ROOT = Path(__file__).resolve().parent.parent
TEST_FILES = [
    "tests/test_model_reuse.py",
    "tests/test_model_kv_ops.py",
    "tests/test_model_radix.py",
    "tests/test_model_kv_memo.py",
    "tests/test_model_q8kernel.py",
    "meta_tests/test_model_meta.py",
]
VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def env_for(kernel_set: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if kernel_set == "as-is":
        return env
    for v in VARS:
        env.pop(v, None)
    if kernel_set != "default":
        env["OPENBLAS_CORETYPE"] = kernel_set
    return env


def digest(real: bool, save: Path) -> None:
    """Child process: print the BLAS kernel set and kernel path in use and digests of fixed logits;
    save the exact logits to ``save`` (``.npz``) for the parent's ``np.array_equal``."""
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    from radixcheck.model import KVPool, load_default

    models = {"exact": load_default(), "float": load_default(arithmetic="float")}
    if real:
        from radixcheck.model import smollm2

        if smollm2.available():
            models["smollm2"] = smollm2.load_smollm2(download=False)
    out: dict[str, object] = {"arch": [i.get("architecture") for i in threadpool_info()], "path": models["exact"].ops.kernel}
    logits = {}
    for name, m in models.items():
        toks = np.random.default_rng(11).integers(0, m.config.vocab_size, 37)
        for threads in (1, 2):
            # the model owns its threads: 1 or 2 of its own, each with as many BLAS threads
            m.threads = m.blas_threads = threads
            with threadpool_limits(limits=threads):
                full = m.prefill(KVPool(m.config, 40), toks, np.arange(37))
                pool = KVPool(m.config, 40)
                parts = [m.prefill(pool, toks[:s], np.arange(s), p) for p, s in ((0, 5), (5, 6), (6, 30))]
                parts.append(m.prefill(pool, toks, np.arange(37), 30))
                reused = np.concatenate(parts)
            out[f"{name}/{threads}t/full"] = hashlib.sha256(full.tobytes()).hexdigest()[:16]
            out[f"{name}/{threads}t/reused_equals_full"] = bool(np.array_equal(full, reused))
            if name != "float":
                logits[f"{name}/{threads}t"] = full
    np.savez(save, **logits)
    print(json.dumps(out))


def path_report() -> tuple[bool, list[str]]:
    """Print every compiled path's status; ``(all that the CPU runs passed, the usable paths)``."""
    from radixcheck.model import kernel_build, q8kernel

    print(f"CPU: {kernel_build.cpu_name()}")
    flags = sorted(f for f in kernel_build.cpu_flags() if f.startswith(("avx", "fma", "sse4", "f16c")))
    print(f"CPU SIMD flags: {' '.join(flags) or '(none reported)'}")
    ok = True
    for path in q8kernel.PATHS:
        st = q8kernel.status(path)
        label = {"passed": "self-test passed", "failed": "self-test FAILED", "not tested": "not tested",
                 "not built": "NOT BUILT"}[st.state]
        print(f"[{path}] {label}" + (f": {st.detail}" if st.detail else ""))
        ok &= st.state in ("passed", "not tested")
    return ok, q8kernel.available()


def kernel_set(text: str) -> str:
    """``as-is``, ``default`` or an OpenBLAS core type name (letters and digits, e.g. Haswell, SkylakeX, Zen)."""
    if not text.isalnum() and text != "as-is":
        raise argparse.ArgumentTypeError(f"must be as-is, default or an OPENBLAS_CORETYPE name, not {text!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="python -m radixcheck.model.kernel_check", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", type=kernel_set, default=["as-is", "default", "Haswell", "Zen"],
                    help="kernel sets: as-is, default, or an OPENBLAS_CORETYPE name (default: as-is default Haswell Zen)")
    ap.add_argument("--real", action="store_true", help="include the real SmolLM2 in the digests")
    ap.add_argument("--no-tests", action="store_true", help="digests only")
    ap.add_argument("--digest", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.digest:
        digest(args.real, args.digest)
        return 0

    import numpy as np

    from radixcheck.model import q8kernel

    ok, paths = path_report()
    runs = [(ks, "numpy") for ks in args.sets] + [(args.sets[0], p) for p in paths]
    digests: dict[str, dict] = {}
    logits: dict[str, dict[str, np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (ks, path) in enumerate(runs):
            env = env_for(ks)
            env[q8kernel.ENV] = path
            shown = {v: env.get(v, "<unset>") for v in VARS}
            save = Path(tmp) / f"{i}.npz"
            cmd = [sys.executable, "-m", "radixcheck.model.kernel_check", "--digest", str(save)] + (["--real"] if args.real else [])
            res = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
            name = f"{ks}/{path}"
            if res.returncode:
                print(f"[{name}] digest FAILED:\n{res.stderr}")
                ok = False
                continue
            d = json.loads(res.stdout.strip().splitlines()[-1])
            digests[name] = d
            with np.load(save) as z:
                logits[name] = {k: z[k] for k in z.files}
            print(f"[{name}] {shown} -> OpenBLAS kernels {d['arch']}, Q8_0 kernel path {d['path']}")
            if d["path"] != path:
                print(f"[{name}] asked for path {path}, ran {d['path']}: FAIL")
                ok = False
            if not args.no_tests and path == "numpy":
                env.pop(q8kernel.ENV)  # the tests compare every usable path with NumPy themselves
                env["HYPOTHESIS_PROFILE"] = "ci"
                t = subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *TEST_FILES],
                    env=env,
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                last = (t.stdout.strip().splitlines() or ["(no output)"])[-1]
                print(f"[{ks}] property tests: {'PASS' if t.returncode == 0 else 'FAIL'} ({last})")
                for line in t.stdout.splitlines():
                    if "SKIPPED" in line and "test_kernel_path_passes_its_self_test" in line:
                        print(f"[{ks}]   {line.strip()}")
                if t.returncode:
                    print(t.stdout[-4000:])
                    ok = False

    keys = sorted({k for d in digests.values() for k in d if k not in ("arch", "path")})
    print("\ndigest".ljust(34) + "".join(n.ljust(20) for n in digests))
    for k in keys:
        print(k.ljust(33) + "".join(str(d.get(k)).ljust(20) for d in digests.values()))
    for model in ("exact", "smollm2"):
        arrays = [(f"{run} {k}", a) for run, ls in logits.items() for k, a in ls.items() if k.startswith(model + "/")]
        reused = all(d[k] for d in digests.values() for k in d if k.startswith(model + "/") and k.endswith("equals_full"))
        if arrays:
            same = all(np.array_equal(arrays[0][1], a) for _, a in arrays[1:])
            print(f"{model}: logits equal (np.array_equal) across {len(logits)} runs (kernel sets x paths) and 1/2 threads: {same}; "
                  f"reuse == full everywhere: {reused}")
            ok &= same and reused
    untested = [p for p in q8kernel.PATHS if q8kernel.status(p).state == "not tested"]
    print("compared:", ", ".join(["numpy", *paths]) + (f"; not tested on this CPU: {', '.join(untested)}" if untested else ""))
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
