"""``python -m radixcheck.reports.tier_scale``: a call that overruns the per-operation limit is a
finding in one paragraph (the seed, the call, the limit, the command that replays it) and exit 1,
not a raw traceback, as the trial of a composed tier cache met it."""

from __future__ import annotations

import dataclasses

import pytest

from radixcheck.properties.target import TIMEOUT_ENV
from radixcheck.reference.tiered_cache import TieredRadixCache
from radixcheck.reports.tier_scale import main


class SpinsInHostEviction(TieredRadixCache):
    """The reference, but ``evict_host`` never returns (it computes, so the CPU limit meets it)."""

    def evict_host(self, num_tokens: int) -> int:
        while True:
            pass


def test_a_hang_at_scale_is_one_paragraph_and_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    spec = f"{__name__}:SpinsInHostEviction"
    assert main(["--target", spec, "--policy", "write_through", "--requests", "60", "--seed", "3", "--no-stories"]) == 1
    out, err = capsys.readouterr()
    finding = [line for line in out.splitlines() if "HANG" in line]
    assert len(finding) == 1 and "Traceback" not in out + err
    for phrase in ("write_through seed 3", "evict_host did not return within 0.2 s of CPU time", "serving request",
                   f"tier_scale --target {spec} --policy write_through --seed 3 --requests 60", "--no-stories"):
        assert phrase in finding[0]
    assert finding[0].count("limit") == 1, finding[0]  # the limit is said once, by the timeout's own message


def test_the_reference_at_a_small_scale_has_no_finding(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--policy", "write_through", "--requests", "60", "--seed", "3", "--no-stories"]) == 0
    assert "HANG" not in capsys.readouterr().out


class SpinsInItsFactory(TieredRadixCache):
    """The reference, but building it never returns: the hang is at the world's build, before any request."""

    def __init__(self, *args: object) -> None:
        while True:
            pass


def test_a_factory_that_hangs_is_one_paragraph_too(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "0.2")
    assert main(["--target", f"{__name__}:SpinsInItsFactory", "--policy", "write_back", "--requests", "5", "--no-stories"]) == 1
    out, err = capsys.readouterr()
    finding = [line for line in out.splitlines() if "HANG" in line]
    assert len(finding) == 1 and "Traceback" not in out + err
    assert "building the cache" in finding[0] and "factory did not return within 0.2 s" in finding[0]


class WritesBackOnly(TieredRadixCache):
    tier_capabilities = dataclasses.replace(TieredRadixCache.tier_capabilities, write_policies=("write_back",))


def test_it_runs_the_policies_the_target_declares(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--target", f"{__name__}:WritesBackOnly", "--requests", "20", "--no-stories"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "policy=" in line]
    assert [row.split("policy=")[1].split()[0] for row in rows] == ["write_back"]


@pytest.mark.parametrize("argv, says", [
    (["--target", "no_such_module_here:make"], "--target 'no_such_module_here:make': not a tier factory"),
    (["--target", f"{__name__}:NoSuchFactory"], "not a tier factory"),
    (["--target", f"{__name__}:WritesBackOnly", "--policy", "write_through"], "declares write policies write_back only"),
])
def test_a_bad_target_or_policy_exits_2_in_one_line(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and says in err and len(err.splitlines()) == 1


def test_a_run_that_moves_nothing_between_the_tiers_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--policy", "write_through", "--requests", "3", "--no-stories"]) == 0
    assert "loaded nothing back from host" in capsys.readouterr().out
    assert main(["--policy", "write_through", "--requests", "30", "--device-slots", "64", "--host-slots", "128", "--no-stories"]) == 0
    assert "loaded nothing back" not in capsys.readouterr().out


def test_a_run_past_its_budget_stops_with_a_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    """A cache whose calls each stay under the limit but whose traffic crawls (the trial's
    EvictScansLeaves ran 10 min 52 s with no verdict) is cut by --budget: what ran is judged, the rest said."""
    assert main(["--policy", "write_through", "--requests", "1000000", "--budget", "1", "--seeds", "2", "--no-stories"]) == 0
    out = capsys.readouterr().out
    assert "seed 0: CUT SHORT: --budget spent: served" in out and "the rest was not judged" in out
    assert "seed 1: not run (--budget 1 s spent)" in out


def test_a_run_shorter_than_check_every_still_reports_its_peaks(capsys: pytest.CaptureFixture[str]) -> None:
    """The hybrid trial's ``--requests 30`` printed ``peak_device_tokens=0`` after 2,267 transfers:
    the peaks were sampled only at each ``--check-every``-th request."""
    assert main(["--policy", "write_through", "--requests", "30", "--device-slots", "64", "--host-slots", "128",
                 "--check-every", "100", "--no-stories"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "policy=" in line)
    fields = dict(field.split("=", 1) for field in row.split())
    assert int(fields["transfers"]) > 0 and int(fields["peak_device_tokens"]) > 0 and int(fields["peak_host_tokens"]) > 0, row
