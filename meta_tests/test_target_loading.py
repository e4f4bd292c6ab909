"""Target selection fails loudly and clearly, never by silently testing something else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from radixcheck.properties.contract import Capabilities
from radixcheck.properties.target import OperationTimeout, TargetError, guarded, load_target
from radixcheck.pytest_plugin import report_header

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("spec", "phrase"),
    [
        ("radixcheck.reference", "must look like"),
        ("", "empty"),
        ("   ", "empty"),
        ("no_such_module_xyz:factory", "cannot import"),
        ("radixcheck.reference:NoSuchFactory", "no attribute"),
        ("radixcheck.reference.radix_cache:_EMPTY", "not callable"),
    ],
)
def test_bad_target_spec_is_a_clear_error(spec: str, phrase: str) -> None:
    with pytest.raises(TargetError, match=phrase):
        load_target(spec)


def test_default_target_is_the_reference() -> None:
    target = load_target("radixcheck.reference:RadixCache")
    assert isinstance(target.capabilities, Capabilities)


def test_a_hanging_operation_is_cut_off(monkeypatch) -> None:
    import time

    monkeypatch.setenv("RADIXCHECK_OP_TIMEOUT", "0.2")
    start = time.monotonic()
    with pytest.raises(OperationTimeout, match="did not return within"):
        guarded("evict", time.sleep, 30)
    assert time.monotonic() - start < 5


def test_the_header_names_the_target() -> None:
    header = "\n".join(report_header(load_target("radixcheck.properties.mutants:EvictsLockedLeaf"), "ci"))
    assert "radixcheck target: radixcheck.properties.mutants:EvictsLockedLeaf" in header
    assert "capabilities" in header and "time limit" in header


def test_a_typo_in_the_target_stops_the_run() -> None:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-n", "0", "--radix-target", "radixcheck.reference:RadixCach",
           "properties/conformance/test_construction.py"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "has no attribute 'RadixCach'" in result.stderr + result.stdout
