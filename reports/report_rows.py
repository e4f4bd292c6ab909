"""Which rows a generated report must have: each generator names, from the code's own lists
(mutants, correct variants, engine factories, workloads), the rows its report holds, and
:func:`missing_rows` finds the ones a committed report lacks (``meta_tests/test_reports_current.py``).

A row is found by the cell of a named column in a markdown table, under a named ``##`` section
(None: any table), with its backticks stripped: the `mutant` column's `` `EvictsLockedLeaf` ``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ExpectedRows:
    column: str  # the header of the column that names the row
    names: tuple[str, ...]  # one row each, every table with that column in the section
    section: str | None = None  # the "## " heading the tables are under; None: anywhere


def _tables(text: str) -> Iterator[tuple[str | None, list[str], list[list[str]]]]:
    """(section, header cells, rows of cells) of every markdown table in ``text``."""
    section: str | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1].replace("|", "").strip()) <= set("-: ") \
                and lines[i + 1].startswith("|"):
            header = _cells(line)
            i += 2
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            yield section, header, rows
            continue
        i += 1


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def missing_rows(text: str, expected: ExpectedRows) -> list[str]:
    """The names of ``expected`` that some table with its column (in its section) has no row for;
    all of them if no such table exists."""
    tables = [(header, rows) for section, header, rows in _tables(text)
              if expected.column in header and (expected.section is None or section == expected.section)]
    if not tables:
        return list(expected.names)
    missing: dict[str, None] = {}
    for header, rows in tables:
        at = header.index(expected.column)
        present = {row[at].strip("`* ") for row in rows if len(row) > at}
        missing |= {name: None for name in expected.names if name not in present}
    return list(missing)
