"""One check several meta-tests share: ``radixcheck audit`` on a mutant (in a subprocess, as a user
runs it) writes a repro file that exits 1 on the bug, and 0 once the factory is swapped for its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def assert_audit_repro_round_trip(tmp_path: Path, spec: str, fix: str, oracle: str, *, timeout: int = 600) -> str:
    """``spec`` and ``fix`` are ``module:Class``; ``oracle`` is the finding's oracle as the audit and
    the repro print it (e.g. ``"14 transfers in flight"``). Returns the repro file's text."""
    cmd = [sys.executable, "-m", "radixcheck", "audit", spec, "--page-sizes", "1", "-n", "0", "--repro", str(tmp_path)]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert oracle in result.stdout
    (repro,) = tmp_path.glob("repro-*.py")
    text = repro.read_text()
    ran = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1 and f"BUG (radixcheck oracle {oracle}" in ran.stdout, ran.stdout + ran.stderr
    (bug_module, bug_class), (fix_module, fix_class) = spec.split(":"), fix.split(":")
    bug_import = f"from {bug_module} import {bug_class} as make"
    assert bug_import in text, text[:2000]
    fixed = tmp_path / "fixed.py"
    fixed.write_text(text.replace(bug_import, f"from {fix_module} import {fix_class} as make"), encoding="utf-8")
    ran = subprocess.run([sys.executable, str(fixed)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "no bug" in ran.stdout, ran.stdout + ran.stderr
    return text
