"""Re-run the model's bit-identity properties under other OpenBLAS kernel sets (run by hand).

    python -m radixcheck.model.kernel_check              # kernel sets: as-is, default detection, Haswell, Zen
    python -m radixcheck.model.kernel_check --real       # also digest the real SmolLM2's logits (if on disk)
    python -m radixcheck.model.kernel_check --sets Haswell SkylakeX

Tests and CI never set or unset ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE``; this script is the
one place that does, each time only in the environment of one child process. For every kernel
set it

1. runs the model's property tests (``tests/test_model_{reuse,kv_ops,radix,kv_memo,q8kernel}.py`` and
   ``meta_tests/test_model_meta.py``, Hypothesis profile ``ci``) in a subprocess, and
2. computes a SHA-256 digest of a fixed prompt's logits for the exact model and for the
   plain-float-BLAS variant, under 1 and 2 threads (``Model.threads`` and ``Model.blas_threads``).

It passes when every run passes and the exact digests are identical across all kernel sets and
thread counts (the float digests are shown for contrast: they usually differ).
``--sets`` names: ``as-is`` (the inherited environment), ``default`` (both variables unset: the
CPU's own kernel set), or any ``OPENBLAS_CORETYPE`` value.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
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


def digest(real: bool) -> None:
    """Child process: print the BLAS kernel set in use and digests of fixed logits."""
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    from radixcheck.model import KVPool, load_default

    models = {"exact": load_default(), "float": load_default(arithmetic="float")}
    if real:
        from radixcheck.model import smollm2

        if smollm2.available():
            models["smollm2"] = smollm2.load_smollm2(download=False)
    out: dict[str, object] = {"arch": [i.get("architecture") for i in threadpool_info()]}
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
    print(json.dumps(out))


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
    ap.add_argument("--digest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.digest:
        digest(args.real)
        return 0

    ok = True
    digests: dict[str, dict] = {}
    for ks in args.sets:
        env = env_for(ks)
        shown = {v: env.get(v, "<unset>") for v in VARS}
        cmd = [sys.executable, "-m", "radixcheck.model.kernel_check", "--digest"] + (["--real"] if args.real else [])
        res = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        if res.returncode:
            print(f"[{ks}] digest FAILED:\n{res.stderr}")
            ok = False
            continue
        d = json.loads(res.stdout.strip().splitlines()[-1])
        digests[ks] = d
        print(f"[{ks}] {shown} -> OpenBLAS kernels {d['arch']}")
        if not args.no_tests:
            env["HYPOTHESIS_PROFILE"] = "ci"
            t = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TEST_FILES],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            last = (t.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"[{ks}] property tests: {'PASS' if t.returncode == 0 else 'FAIL'} ({last})")
            if t.returncode:
                print(t.stdout[-4000:])
                ok = False

    keys = sorted({k for d in digests.values() for k in d if k != "arch"})
    print("\ndigest".ljust(34) + "".join(ks.ljust(20) for ks in digests))
    for k in keys:
        print(k.ljust(33) + "".join(str(d.get(k)).ljust(20) for d in digests.values()))
    for model in ("exact", "smollm2"):
        full = {d[k] for d in digests.values() for k in d if k.startswith(model + "/") and k.endswith("/full")}
        reused = all(d[k] for d in digests.values() for k in d if k.startswith(model + "/") and k.endswith("equals_full"))
        if full:
            same = len(full) == 1
            print(f"{model}: identical across kernel sets and thread counts: {same}; reuse == full everywhere: {reused}")
            ok &= same and reused
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
