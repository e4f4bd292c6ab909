"""Run ``radixcheck audit`` on one target in its own process (any interpreter, say an engine's
isolated environment) and read back its JSON: the matrix and the engine audits use this, so
every verdict and oracle comes from the audit itself, by exception type."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path


def audit_json(python: str, spec: str, profile: str, cwd: Path | None = None) -> dict:
    """{"seconds", "exit", "tests": {test: {outcome, oracle, reason, program}}, "stderr_tail"} for ``spec``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "audit.json"
        cmd = [python, "-m", "radixcheck", "audit", spec, "--profile", profile, "--json", str(out), "-n", "0"]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=cwd, env=dict(os.environ, RUST_BACKTRACE="0"), capture_output=True, text=True)
        seconds = round(time.monotonic() - start, 1)
        if not out.exists():
            return {"seconds": seconds, "exit": proc.returncode, "tests": {}, "stderr_tail": (proc.stderr or proc.stdout)[-2000:]}
        result = json.loads(out.read_text())
    tests = {v["test"]: {k: v[k] for k in ("outcome", "oracle", "reason", "program") if v.get(k)} for v in result["verdicts"]}
    return {"seconds": seconds, "exit": proc.returncode, "tests": tests, "stderr_tail": ""}
