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
