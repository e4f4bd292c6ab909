"""`radixcheck reports` hands its arguments to the ledger's own parser, whatever they start with."""

from __future__ import annotations

import pytest

from radixcheck.cli import parse_args


def test_reports_takes_options_first() -> None:
    """`radixcheck reports --out DIR` (the CLI's own docstring) was refused: argparse's REMAINDER
    drops a first argument that starts with '-'. Found by running the docs' commands."""
    assert parse_args(["reports", "--out", "my-reports", "--no-live"]).args == ["--out", "my-reports", "--no-live"]


def test_audit_still_refuses_an_unknown_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["audit", "m:f", "--no-such-option"])
    assert exc.value.code == 2 and "--no-such-option" in capsys.readouterr().err


def test_the_shrink_seconds_help_gives_each_machines_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Index trial: the help said "default 15", and an index audit's card said "shrink budget 5 s"."""
    from radixcheck.properties.findings.verdict import shrink_seconds
    from radixcheck.properties.index.machine import KvIndexMachine
    from radixcheck.properties.tenant_tree.machine import TenantTreeMachine

    with pytest.raises(SystemExit):
        parse_args(["audit", "--help"])
    said = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps at hyphens
    assert f"default {shrink_seconds(None):g}; {shrink_seconds(KvIndexMachine):g} for a KV-event index" in said, said
    assert shrink_seconds(TenantTreeMachine) == shrink_seconds(KvIndexMachine)
