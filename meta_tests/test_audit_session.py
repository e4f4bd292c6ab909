"""The audit's own pytest session costs as little as it can before the first verdict
(``radixcheck.audit.SESSION_ARGS``): every process of it, the controller and each xdist worker,
pays the session's start-up before a test runs."""

from __future__ import annotations

import pytest

from radixcheck.audit import CONFORMANCE, SESSION_ARGS, workers_for


class _Probe:
    """Records how the session was configured (a plugin object, as the audit's collector is)."""

    assertmode = ""

    def pytest_configure(self, config: pytest.Config) -> None:
        self.assertmode = config.getoption("assertmode")


def test_the_audit_session_does_not_rewrite_asserts() -> None:
    """pytest rewrites every module of a plugin's distribution (all of radixcheck's) in each process,
    ~0.9 s of CPU each where the rewritten modules cannot be cached (PYTHONDONTWRITEBYTECODE): the
    audit's session asks for plain asserts."""
    probe = _Probe()
    exit_code = pytest.main(["--pyargs", CONFORMANCE, "--radix-target", "radixcheck.properties.tiers.mutants:TieredLfu",
                             "--collect-only", *SESSION_ARGS], plugins=[probe])
    assert exit_code == pytest.ExitCode.OK
    assert probe.assertmode == "plain"


@pytest.mark.parametrize(("asked", "cores", "load", "runs"), [
    ("auto", 2, 7.9, "0"),  # a busy machine: workers only add their start-up and share a core
    ("auto", 2, 0.9, "0"),
    ("auto", 2, 0.3, "auto"),  # two idle cores: pytest-xdist's one worker per core
    ("auto", 8, 5.0, "auto"),
    ("2", 2, 7.9, "2"),  # a number is run as asked
    ("0", 8, 0.0, "0"),
])
def test_auto_starts_workers_only_with_idle_cores(asked: str, cores: int, load: float, runs: str) -> None:
    workers, why = workers_for(asked, cores=cores, load=load)
    assert workers == runs
    assert bool(why) == (asked == "auto" and runs == "0")  # the audit says why it stayed in process
