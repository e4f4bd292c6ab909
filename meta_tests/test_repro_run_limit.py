"""A repro file that radixcheck confirms is limited by its own CPU time, not by the wall clock: on a
loaded machine a valid file that waits for the CPU is still confirmed (session 60: M1's file was
judged too slow under a load of ~25), and one that computes forever is still stopped."""

import pytest

from radixcheck.properties.findings.standalone import run_file

pytestmark = pytest.mark.deep  # each starts an interpreter

# Waits 1.5 s of wall clock using almost no CPU: what a file does that gets a tenth of a core.
WAITS = "import sys, time\ntime.sleep(1.5)\nprint('done')\nsys.exit(1)\n"
SPINS = "while True:\n    pass\n"


def test_a_file_that_waits_longer_than_its_cpu_limit_is_still_run_to_its_end() -> None:
    # main's limit was the wall clock: after 0.5 s it said (None, "did not finish within 0.5 s")
    code, printed = run_file(WAITS, 0.5)
    assert (code, printed.strip()) == (1, "done")


def test_a_file_that_computes_past_its_cpu_limit_is_stopped_and_said_so() -> None:
    code, printed = run_file(SPINS, 1.0, wall_seconds=60.0)
    assert code is None and "did not finish within 1 s of CPU time" in printed


def test_the_wall_clock_still_guards_a_file_that_blocks() -> None:
    code, printed = run_file(WAITS, 5.0, wall_seconds=0.5)
    assert code is None and "did not finish within 0.5 s of wall clock" in printed
