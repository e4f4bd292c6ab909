"""MkDocs hooks: the pages the repository already holds, shown as they are, so the site cannot drift.

* Each ``reports/findings/*.md``, ``reports/MATRIX.md`` and the other generated reports become a page
  at the same path (``reports/findings/vllm.md``), read at build time, so their links to each other
  work unchanged; a link to a file that is not a page (a repro script, a module) is written as its
  repository path in code. The findings pages are added to the navigation in file order, so a new
  engine's page appears without an edit here.
  Their images (``reports/plots/``) come along, and a bracketed phrase that is no link (a failure's
  ``[stress_with_threads round 0, seed 0]``) is escaped, so it reads as written.
* ``<!-- radixcheck-help: audit -->`` in a page becomes that command's ``--help``, from the real
  argument parser (``radixcheck.cli``), so the CLI reference is the parser's own words.
* ``<!-- radixcheck-oracles -->`` becomes the table of every oracle, from its exception class
  (``radixcheck.oracles.violations``): its name as a finding prints it, and the class's docstring.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ("reports/MATRIX.md", "reports/sglang_findings.md", "reports/BUG_CATALOGUE.md", "reports/INDEX_CATALOGUE.md",
           "reports/TENANT_TREE_CATALOGUE.md", "reports/TIER_CATALOGUE.md", "reports/WIRE_MUTANTS.md", "reports/WIRE_COST.md",
           "reports/COST.md", "reports/LEDGER.md", "reports/FUZZING.md", "reports/MUTATION.md", "reports/INDEX_MEMORY.md")
BARE_BRACKETS = re.compile(r"(?<![\\!\]])\[([^\]\n]*)\](?![(\[:])")
FENCE_OR_CODE = re.compile(r"(^\s*```.*?^\s*```[^\n]*$|`[^`\n]*`)", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")
HELP = re.compile(r"<!-- radixcheck-help: ?([a-z ]*) -->")
ORACLES = "<!-- radixcheck-oracles -->"


def included() -> list[str]:
    """The repository's markdown files shown as pages, by their paths in the repository."""
    return [*REPORTS, *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "reports" / "findings").glob("*.md"))]


def on_config(config: Any) -> Any:
    findings = [{Path(path).stem: path} for path in included() if path.startswith("reports/findings/")]
    for section in config["nav"]:
        if isinstance(section, dict) and "Findings" in section:
            section["Findings"] = [*section["Findings"], *findings]
    return config


def on_files(files: Files, config: Any) -> Files:
    images = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "reports" / "plots").glob("*.png"))
    for path in [*included(), *images]:
        files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files


def _escape_bare_brackets(markdown: str) -> str:
    """``[words]`` that is no link, outside code, as text (else it reads as a cross-reference)."""
    parts = FENCE_OR_CODE.split(markdown)
    return "".join(part if i % 2 else BARE_BRACKETS.sub(r"\\[\1\\]", part) for i, part in enumerate(parts))


def _plain_link(match: re.Match[str], page_path: str, pages: set[str]) -> str:
    """A relative link to a file that is not a page of the site, as the repository path it names."""
    text, target = match.group(1), match.group(2)
    if re.match(r"[a-z]+:", target) or target.startswith(("#", "/")):
        return match.group(0)
    path = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), target.partition("#")[0]))
    if path in pages:
        return match.group(0)
    if text.strip("`") in (path, target, posixpath.basename(path)):
        return f"`{path}`"
    return f"{text} (`{path}`)"


def _help(command: str) -> str:
    from radixcheck.cli import _parser

    parser = _parser()
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: a fixed width, whatever builds the site
    try:
        text = parser.format_help()
    finally:
        os.environ.pop("COLUMNS") if columns is None else os.environ.__setitem__("COLUMNS", columns)
    return "```text\n" + text.rstrip() + "\n```"


def _oracles() -> str:
    """Every oracle's exception class: the name its findings print, and what it judges (its docstring)."""
    from radixcheck.oracles import violations

    classes = [c for c in vars(violations).values()
               if isinstance(c, type) and issubclass(c, violations.ContractViolation) and c is not violations.ContractViolation]
    rows = ["| oracle (as a finding names it) | exception | what it judges |", "|---|---|---|"]
    for cls in classes:
        doc = " ".join((cls.__doc__ or "").split()).replace("|", "\\|")
        doc = re.sub(r":class:`~?([\w.]+)`", lambda m: f"`{m.group(1).rpartition('.')[2]}`", doc).replace("``", "`")
        rows.append(f"| {cls.oracle} | `{cls.__name__}` | {doc or '(see the table above)'} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    markdown = HELP.sub(lambda m: _help(m.group(1)), markdown)
    if ORACLES in markdown:
        markdown = markdown.replace(ORACLES, _oracles())
    if page.file.src_uri in included():
        pages = {f.src_uri for f in files.documentation_pages()}
        markdown = _escape_bare_brackets(LINK.sub(lambda m: _plain_link(m, page.file.src_uri, pages), markdown))
    return markdown
