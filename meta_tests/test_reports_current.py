"""A committed report is current: it has a row for every mutant, correct variant, engine factory
and workload its generator now covers. No machine runs here: the markdown is parsed and compared
with the generators' own lists (``report_rows()``), so this is fast and fails with the rows to add
and the command that regenerates the report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from radixcheck.reports import catalogue, index_catalogue, ledger, matrix, tenant_tree_catalogue, tier_catalogue
from radixcheck.reports.report_rows import ExpectedRows, missing_rows

REPORTS = Path(catalogue.__file__).resolve().parent

# report file -> (its generator's rows, the command that regenerates it)
GENERATORS: dict[str, tuple[Callable[[], list[ExpectedRows]], str]] = {
    "BUG_CATALOGUE.md": (catalogue.report_rows, catalogue.REGENERATE),
    "INDEX_CATALOGUE.md": (index_catalogue.report_rows, index_catalogue.REGENERATE),
    "TENANT_TREE_CATALOGUE.md": (tenant_tree_catalogue.report_rows, tenant_tree_catalogue.REGENERATE),
    "MATRIX.md": (matrix.report_rows, matrix.REGENERATE),
    "LEDGER.md": (ledger.report_rows, ledger.REGENERATE),
    "TIER_CATALOGUE.md": (tier_catalogue.report_rows, tier_catalogue.REGENERATE),
}


def stale_rows(text: str, expected: list[ExpectedRows]) -> list[str]:
    """One line per kind of row the report lacks, naming the rows."""
    lines = []
    for rows in expected:
        missing = missing_rows(text, rows)
        if missing:
            where = f" under '## {rows.section}'" if rows.section else ""
            lines.append(f"no row in column '{rows.column}'{where} for {len(missing)}: {', '.join(missing)}")
    return lines


@pytest.mark.parametrize("report", sorted(GENERATORS))
def test_the_committed_report_has_a_row_for_everything_its_generator_covers(report: str) -> None:
    rows, regenerate = GENERATORS[report]
    stale = stale_rows((REPORTS / report).read_text(encoding="utf-8"), rows())
    assert not stale, f"reports/{report} is stale; regenerate it with `{regenerate}`:\n" + "\n".join(stale)


# ---- the check itself can fail -------------------------------------------------------------

REPORT = """# A catalogue

## Mutants

| bug class | mutant | kill rate |
|---|---|---|
| evicts-locked-leaf | `EvictsLockedLeaf` | 200/200 |
| lock-skips-self | `LockSkipsSelf` | 200/200 |

## Correct caches: no false alarms

| correct cache | machine |
|---|---|
| `RadixCache` | ordinary |
"""
EXPECTED = [ExpectedRows("mutant", ("EvictsLockedLeaf", "LockSkipsSelf"), "Mutants"),
            ExpectedRows("correct cache", ("RadixCache",), "Correct caches: no false alarms")]


def test_a_complete_report_passes() -> None:
    assert stale_rows(REPORT, EXPECTED) == []


def test_a_removed_row_is_named() -> None:
    text = REPORT.replace("| lock-skips-self | `LockSkipsSelf` | 200/200 |\n", "")
    assert stale_rows(text, EXPECTED) == ["no row in column 'mutant' under '## Mutants' for 1: LockSkipsSelf"]


def test_a_mutant_the_report_predates_is_named() -> None:
    newer = [ExpectedRows("mutant", ("EvictsLockedLeaf", "LockSkipsSelf", "EvictCapsLeaves"), "Mutants"), EXPECTED[1]]
    assert stale_rows(REPORT, newer) == ["no row in column 'mutant' under '## Mutants' for 1: EvictCapsLeaves"]


def test_a_missing_table_names_every_row() -> None:
    text = REPORT.split("## Correct caches")[0]
    assert stale_rows(text, EXPECTED) == ["no row in column 'correct cache' under '## Correct caches: no false alarms' for 1: RadixCache"]


def test_a_name_elsewhere_in_the_report_does_not_count() -> None:
    # the obligations table names mutants too; only the Mutants section's rows count
    text = REPORT.replace("| lock-skips-self | `LockSkipsSelf` | 200/200 |\n", "") + (
        "\n## Obligations\n\n| obligation | mutant |\n|---|---|\n| lock: covers the handle | `LockSkipsSelf` |\n")
    assert stale_rows(text, EXPECTED) == ["no row in column 'mutant' under '## Mutants' for 1: LockSkipsSelf"]


def test_every_generator_names_rows_to_check() -> None:
    for report, (rows, _) in GENERATORS.items():
        assert all(r.names for r in rows()), f"{report}: a generator with nothing to check cannot fail"
