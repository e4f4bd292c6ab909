"""The wire audit meta-tests' two steps: serve a cache through the Python wire server (the next factory
call starts it), and run a repro file against servers as a user would, with ``RADIXCHECK_WIRE_CMD``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from radixcheck.properties.adapters import wire
from radixcheck.properties.adapters.wire import CMD_ENV, reference_command

SPEC = "radixcheck.properties.adapters.wire:server"


def serving(monkeypatch: pytest.MonkeyPatch, cache: str, declared: dict | None = None) -> str:
    """Serve ``cache`` (a spec), declaring ``declared`` over its own capabilities; the server's command."""
    extra = ["--capabilities", f"'{json.dumps(declared)}'"] if declared else []
    command = " ".join([*reference_command(), "--cache", cache, *extra])
    monkeypatch.setenv(CMD_ENV, command)
    wire.server.close()  # the next factory call starts this command's server
    return command


def repro_exit_codes(text: str, tmp_path: Path, *commands: str) -> list[int]:
    """The exit codes of the repro file ``text`` run against each server command in turn."""
    path = tmp_path / "repro.py"
    path.write_text(text, encoding="utf-8")
    return [subprocess.run([sys.executable, str(path)], env={**os.environ, CMD_ENV: command}, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300).returncode for command in commands]
