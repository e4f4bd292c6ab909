"""The CI how-to says what a CI job needs of the audit: its exit codes, known findings through
``--waive``, and the repro files uploaded as an artifact (s60's note: it said none of them)."""

from __future__ import annotations

import re
from pathlib import Path

from radixcheck.audit import EXIT_CONFORMS, EXIT_NONCONFORMING, EXIT_USAGE

PAGE = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "ci.md"


def test_the_ci_page_gives_every_exit_code() -> None:
    text = PAGE.read_text()
    for code in (EXIT_CONFORMS, EXIT_NONCONFORMING, EXIT_USAGE):
        assert re.search(rf"^\| {code} \|", text, re.MULTILINE), f"exit {code} is not in the table"


def test_the_ci_workflow_waives_known_findings_and_uploads_the_repros() -> None:
    text = PAGE.read_text()
    workflow = text.split("```yaml", 1)[1].split("```", 1)[0]
    assert "--waive" in workflow and "--repro repros/" in workflow
    assert "upload-artifact" in workflow and "repros/" in workflow.split("upload-artifact", 1)[1]
