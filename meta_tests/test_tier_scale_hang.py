"""``python -m radixcheck.reports.tier_scale``: a call that overruns the per-operation limit is a
finding in one paragraph (the seed, the call, the limit, the command that replays it) and exit 1,
not a raw traceback, as the trial of a composed tier cache met it."""

from __future__ import annotations

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
    assert main(["--target", spec, "--policy", "write_through", "--requests", "60", "--seed", "3"]) == 1
    out, err = capsys.readouterr()
    finding = [line for line in out.splitlines() if "HANG" in line]
    assert len(finding) == 1 and "Traceback" not in out + err
    for phrase in ("write_through seed 3", "evict_host did not return within 0.2 s of CPU time", "serving request",
                   f"tier_scale --target {spec} --policy write_through --seed 3 --requests 60"):
        assert phrase in finding[0]


def test_the_reference_at_a_small_scale_has_no_finding(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--policy", "write_through", "--requests", "60", "--seed", "3"]) == 0
    assert "HANG" not in capsys.readouterr().out
