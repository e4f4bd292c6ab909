"""Every command refuses bad arguments at parse time: exit 2, one line on stderr naming the
argument, and nothing written (a run that would replace a committed report with a weaker one is
a bad argument too, unless ``--force`` or ``--out DIR``).

All cases run in one subprocess (each command's ``__main__`` through :mod:`runpy`, as ``python
-m`` runs it), so the table costs one interpreter start-up; one case also runs as a real ``python -m``
command. A command that regressed into doing work would be stopped by the time limit.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PREFILL = str(ROOT / "reports" / "PREFILL-smollm2.md")

# (what to run: a module for `python -m`, or a file; its arguments; what the one line must name)
CASES: list[tuple[str, list[str], str]] = [
    ("radixcheck", ["audit", "x:y", "-n", "banana"], "-n"),
    ("radixcheck", ["audit", "x:y", "--op-timeout", "-1"], "--op-timeout"),
    ("radixcheck", ["audit", "x:y", "--shrink-seconds", "0"], "--shrink-seconds"),
    ("radixcheck", ["audit", "x:y", "--page-sizes", "0,16"], "--page-sizes"),
    ("radixcheck", ["audit", "x:y", "--profile", "nope"], "--profile"),
    ("radixcheck", ["audit", "x:y", "--repro", str(ROOT / "pyproject.toml")], "--repro"),  # a file, not a directory
    ("radixcheck", ["audit", "x:y", "--repro", str(ROOT / "pyproject.toml" / "sub")], "--repro"),  # under a file
    ("radixcheck", ["audit", "x:y", "--repro", ""], "--repro"),
    ("radixcheck", ["nosuch"], "command"),
    ("radixcheck", ["reports", "--seed", "-5"], "--seed"),
    ("radixcheck.reports", ["--seed", "-5"], "--seed"),
    ("radixcheck.reports", ["--reps", "-1"], "--reps"),
    ("radixcheck.reports", ["--threads", "0"], "--threads"),
    ("radixcheck.reports", ["--scale", "0"], "--scale"),
    ("radixcheck.reports", ["--quick"], "--quick"),  # fewer repetitions than the committed LIVE-synthetic.md
    ("radixcheck.reports", ["--last-only"], "--last-only"),
    ("radixcheck.reports.catalogue", ["--streams", "0"], "--streams"),  # no kill rates: would replace the 200-stream catalogue
    ("radixcheck.reports.catalogue", ["--streams", "-1"], "--streams"),
    ("radixcheck.reports.catalogue", ["--jobs", "0"], "--jobs"),
    ("radixcheck.reports.kill_rates", ["--streams", "-2"], "--streams"),
    ("radixcheck.reports.kill_rates", ["--false-alarms", "-1"], "--false-alarms"),
    ("radixcheck.reports.catalogue", ["NoSuchMutant"], "MUTANT"),
    ("radixcheck.reports.catalogue", ["--variant-streams", "-1"], "--variant-streams"),
    ("radixcheck.reports.catalogue", ["--variant", "NoSuchCache"], "--variant"),
    ("radixcheck.reports.catalogue", ["--variant", "RadixCache", "--variant-streams", "0"], "--variant"),
    ("radixcheck.reports.tier_catalogue", ["--only", "NoSuchMutant"], "--only"),
    ("radixcheck.reports.tenant_tree_catalogue", ["--only", "NoSuchMutant"], "--only"),
    ("radixcheck.reports.index_catalogue", ["--only", "NoSuchMutant"], "--only"),
    # --only keeps the other rows from a saved catalogue: none in an empty --out
    ("radixcheck.reports.tenant_tree_catalogue", ["--only", "TenantTree", "--out", "/nonexistent-radixcheck"], "--only"),
    ("radixcheck.reports.index_catalogue", ["--only", "KvIndex", "--out", "/nonexistent-radixcheck"], "--only"),
    # a row re-run over fewer streams than the committed catalogue's is a weaker report too
    ("radixcheck.reports.tenant_tree_catalogue", ["--only", "SplitRacesWithoutLock", "--streams", "3"], "--streams"),
    ("radixcheck.reports.index_catalogue", ["--only", "LeaksRemovedNodes", "--streams", "3"], "--streams"),
    ("radixcheck.reports.machine_speed", ["--tokens", "0"], "--tokens"),
    ("radixcheck.reports.machine_speed", ["--steps", "x"], "--steps"),
    ("radixcheck.reports.kill_rates", ["--jobs", "0"], "--jobs"),
    ("radixcheck.reports.kill_rates", ["NoSuchMutant"], "mutants"),
    ("radixcheck.reports.index_catalogue", ["--streams", "-1"], "--streams"),
    ("radixcheck.reports.index_catalogue", ["--jobs", "0"], "--jobs"),
    ("radixcheck.reports.tenant_tree_catalogue", ["--streams", "0"], "--streams"),
    ("radixcheck.reports.tenant_tree_catalogue", ["--variant-streams", "-1"], "--variant-streams"),
    ("radixcheck", ["audit", "radixcheck.reference.tenant_tree:TenantTree", "--page-sizes", "1"], "tenant prefix tree"),
    ("radixcheck", ["audit", "radixcheck.reference.kv_index:KvIndex", "--page-sizes", "1"], "KV-event index"),
    ("radixcheck.reports.matrix", ["-n", "x"], "-n"),
    ("radixcheck.reports.matrix", ["--profile", "nope"], "--profile"),
    ("radixcheck.reports.matrix", ["--only", "nope"], "--only"),
    ("radixcheck.reports.matrix", ["--target", "NoSuchMutant", "--out", "/nonexistent-radixcheck"], "--target"),
    ("radixcheck.reports.matrix", ["--target", "reference", "--only", "kit", "--out", "/nonexistent-radixcheck"], "--target"),
    ("radixcheck.reports.matrix", ["--profile", "mutation"], "--profile"),  # another profile than the committed MATRIX.md
    ("radixcheck.reports.matrix", ["--report-only", "--out", "/nonexistent-radixcheck"], "--report-only"),
    ("radixcheck.reports.audit_env", ["--bogus"], "--bogus"),
    ("radixcheck.reports.profile_live", ["--threads", "0"], "--threads"),
    ("radixcheck.reports.profile_live", ["--reps", "1"], "--reps"),  # fewer than the committed PROFILE-smollm2.md
    (str(ROOT / "reports" / "sglang_smoke.py"), ["no_such_factory"], "factory"),
    ("radixcheck.model.bench", ["--tokens", "0"], "--tokens"),
    ("radixcheck.model.bench", ["--tokens", "64", "-3"], "--tokens"),
    ("radixcheck.model.bench", ["--threads", "-1"], "--threads"),
    ("radixcheck.model.bench", ["--repeats", "0"], "--repeats"),
    ("radixcheck.model.bench", ["--llama-python", "/nonexistent"], "--llama-python"),
    ("radixcheck.model.bench", ["--llama-python", sys.executable], "--llama-python"),  # a Python without llama_cpp
    ("radixcheck.model.bench", ["--kernel", "fast"], "--kernel"),
    ("radixcheck.model.bench", ["--md", PREFILL], "--llama-python"),  # would drop the llama.cpp column
    ("radixcheck.model.fidelity", ["--llama-python", "/nonexistent"], "--llama-python"),
    ("radixcheck.model.fidelity", ["--md", PREFILL], "--llama-python"),  # would drop the llama.cpp row
    ("radixcheck.model.fidelity", ["--text", ""], "--text"),
    ("radixcheck.model.kernel_check", ["--sets", "a b"], "--sets"),
    ("radixcheck.model.smollm2", ["--bogus"], "--bogus"),
    ("radixcheck.model.llamacpp_env", ["--jobs", "0"], "--jobs"),
    ("radixcheck.model.llamacpp_env", ["--version", "latest"], "--version"),
    ("radixcheck.model.llamacpp", ["worker", "x.gguf", "--threads", "0"], "--threads"),
    ("radixcheck.reference.bench", ["--requests", "0"], "--requests"),
    ("radixcheck.reference.bench", ["--seed", "-1"], "--seed"),
]

DRIVER = r"""
import contextlib, io, json, runpy, sys
results = []
for target, argv in json.loads(sys.argv[1]):
    err, out = io.StringIO(), io.StringIO()
    sys.argv = [target, *argv]
    for name in (target, target + ".__main__"):  # imported by an earlier case: `python -m` would find them fresh
        sys.modules.pop(name, None)
    code = "returned"
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            if target.endswith(".py"):
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            code = stop.code
        except BaseException as exc:
            code = f"raised {type(exc).__name__}: {exc}"
    results.append({"code": code, "stderr": err.getvalue(), "stdout": out.getvalue()})
print(json.dumps(results))
"""


def _committed_files() -> dict[str, str]:
    """A digest of every report and fixture a command could overwrite."""
    paths = [p for base in ("reports", "model/fixtures") for p in (ROOT / base).rglob("*") if p.is_file()]
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if "__pycache__" not in p.parts}


pytestmark = [pytest.mark.xdist_group("entry_points"),  # one worker runs the commands once (the module fixture), not each worker
              pytest.mark.deep]  # the deep tier (docs/reference/test-tiers.md): every command runs in a subprocess


@pytest.fixture(scope="module")
def outcomes() -> dict[int, dict]:
    before = _committed_files()
    ran = subprocess.run([sys.executable, "-c", DRIVER, json.dumps([(t, a) for t, a, _ in CASES])], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert _committed_files() == before, "a command with bad arguments changed a committed file"
    return dict(enumerate(json.loads(ran.stdout.strip().splitlines()[-1])))


@pytest.mark.parametrize(("index", "argument"), [(i, c[2]) for i, c in enumerate(CASES)],
                         ids=[f"{Path(t).stem if t.endswith('.py') else t} {' '.join(a)}" for t, a, _ in CASES])
def test_bad_arguments_are_one_line_and_exit_2(outcomes, index: int, argument: str) -> None:
    got = outcomes[index]
    lines = got["stderr"].strip().splitlines()
    assert got["code"] == 2, f"exit {got['code']!r}, stderr {got['stderr'][-500:]!r}"
    assert len(lines) == 1, f"stderr is {len(lines)} lines: {got['stderr'][-800:]!r}"
    assert argument in lines[0] and "error" in lines[0], lines[0]
    assert not got["stdout"], got["stdout"]


def test_as_a_real_command() -> None:
    """The case that once cost 20 minutes of work, through ``python -m`` as a user types it."""
    before = _committed_files()
    ran = subprocess.run([sys.executable, "-m", "radixcheck.reports.catalogue", "--streams", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert (ran.returncode, len(ran.stderr.strip().splitlines()), ran.stdout) == (2, 1, ""), ran.stderr
    assert "--streams" in ran.stderr
    assert _committed_files() == before
