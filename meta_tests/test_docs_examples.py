"""The docs' examples are run (``tests/doc_examples.py``), and a broken one fails for its reason:
a Python block that raises, a waiver line the loader refuses, a command its parser refuses, a
module that does not exist. Also: the README stays a front page, and every page is collected."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from radixcheck.properties.findings.waivers import WaiverError
from tests.doc_examples import DOCS, ROOT

GOOD = '''# A page

```python
from radixcheck import Capabilities

caps = Capabilities(page_sizes=(1, 16))
```

```python
assert caps.page_sizes == (1, 16)   # a later block sees what an earlier one defined
```

```waivers
mycache_adapter:*  *  4 LRU order  # splits keep the old stamp
```

```bash
RADIXCHECK_OP_TIMEOUT=2 radixcheck audit mycache_adapter:make --page-sizes 1,16 \\
    --report audit.md   # a comment
python -m radixcheck.reports.matrix --report-only && radixcheck reports --out my-reports
```

```yaml
steps:
  - run: radixcheck audit mycache_adapter:make --json radixcheck.json
```

```text
not run: output
```
'''


def run_page(tmp_path: Path, text: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    for example in DOCS.parse(page).examples():
        example.evaluate()


def test_a_page_whose_examples_work_passes(tmp_path: Path) -> None:
    run_page(tmp_path, GOOD)


def test_a_python_block_that_raises_fails(tmp_path: Path) -> None:
    with pytest.raises(NameError, match="make"):
        run_page(tmp_path, GOOD.replace("caps = Capabilities(page_sizes=(1, 16))", "make.capabilities = Capabilities()"))


def test_a_declaration_the_contract_refuses_fails(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lifecycle"):
        run_page(tmp_path, GOOD.replace("Capabilities(page_sizes=(1, 16))", 'Capabilities(page_sizes=(1, 16), lifecycle="often")'))


def test_a_waiver_line_the_loader_refuses_fails(tmp_path: Path) -> None:
    with pytest.raises(WaiverError, match=r"page\.md:\d+.*did you mean '4 LRU order'"):
        run_page(tmp_path, GOOD.replace("4 LRU order  #", "4 LRU ordre  #"))


def test_a_waiver_without_its_reason_fails(tmp_path: Path) -> None:
    with pytest.raises(WaiverError, match="needs a reason"):
        run_page(tmp_path, GOOD.replace("  # splits keep the old stamp", ""))


@pytest.mark.parametrize(("broken", "reason"), [
    ("--page-sizes 1,16", "--page-sizes 0"),
    ("--report audit.md", "--reprot audit.md"),
    ("radixcheck audit mycache_adapter:make --page-sizes", "radixcheck audti mycache_adapter:make --page-sizes"),
    ("radixcheck reports --out my-reports", "radixcheck reports --outdir my-reports"),
])
def test_a_command_its_parser_refuses_fails(tmp_path: Path, broken: str, reason: str) -> None:
    with pytest.raises(AssertionError, match="refused by radixcheck's parser"):
        run_page(tmp_path, GOOD.replace(broken, reason))


def test_a_module_that_does_not_exist_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="no module radixcheck.reports.matrixx"):
        run_page(tmp_path, GOOD.replace("radixcheck.reports.matrix ", "radixcheck.reports.matrixx "))


def test_a_ci_step_is_parsed_too(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="--jsn"):
        run_page(tmp_path, GOOD.replace("--json radixcheck.json", "--jsn radixcheck.json"))


def test_every_page_and_the_readme_are_collected_by_the_tests() -> None:
    testpaths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"]
    assert "docs" in testpaths and "README.md" in testpaths
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 20 and all(DOCS.should_parse(page) for page in pages)


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 130, "the README is a front page read in two minutes: details go in the manual (docs/)"
    dated = re.findall(r"[^\n]*\bload(?: average)? \d[^\n]*", text)
    assert not dated, f"measurements (with their CPU and load) go in the manual (docs/reference/test-tiers.md), not the README: {dated[:2]}"
    missing = [t for t in re.findall(r"\]\(([^)#\s]+)", text) if not re.match(r"[a-z]+:", t) and not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


@pytest.mark.deep  # starts a pytest process
def test_an_unrelated_projects_markdown_is_not_collected(tmp_path: Path) -> None:
    """The collector is this checkout's (its root conftest.py, never shipped): with radixcheck
    installed, a user's README with a failing Python block is not run by their pytest."""
    (tmp_path / "README.md").write_text("# Mine\n\n```python\nraise SystemExit('ran the README')\n```\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("```python\nassert False, 'ran a docs page'\n```\n")
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    assert True\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


def test_the_wire_reference_names_every_capability_op_and_error_code() -> None:
    """A server author writes from WIRE.md alone: every field its ``init`` may declare (a host tier's
    too), every op the suite sends (a running request's, and every field of the request it carries), every
    call a tier server may make of the suite and every error code the client reads are on the page (the code is the truth)."""
    from dataclasses import fields

    from radixcheck.properties.adapters import wire
    from radixcheck.properties.adapters.wire_tier import CALLS
    from radixcheck.properties.cache.contract import Capabilities
    from radixcheck.properties.tiers.contract import TierCapabilities
    from radixcheck.reference.wire_server import (
        CACHE_OPS,
        REQUEST_FIELDS,
        REQUEST_OPS,
        SECOND_POOL_FIELDS,
        SECOND_POOL_OPS,
        TIER_OPS,
        TIER_REQUEST_FIELDS,
    )

    page = (ROOT / "properties" / "adapters" / "WIRE.md").read_text(encoding="utf-8")
    unnamed = [f.name for f in (*fields(Capabilities), *fields(TierCapabilities)) if f"`{f.name}`" not in page]
    unnamed += [op for op in ("init", "new", "drop", *CACHE_OPS, *TIER_OPS, *REQUEST_OPS, *SECOND_POOL_OPS, *CALLS)
                if f"`{op}`" not in page]
    unnamed += [f"field {f}" for f in (*REQUEST_FIELDS, *TIER_REQUEST_FIELDS, *SECOND_POOL_FIELDS) if f"`{f}`" not in page]
    unnamed += [str(code) for code in (wire.NOT_SUPPORTED, wire.MALFORMED_REQUEST, wire.CRASH, wire.REFUSED)
                if not re.search(rf"^\| {code} \|", page, re.MULTILINE)]
    assert not unnamed, f"properties/adapters/WIRE.md does not name: {unnamed}"


def test_the_wire_reference_says_null_and_an_absent_namespace_are_one() -> None:
    """The suite sends the default namespace both as an absent field and as ``null``; a server keying
    them apart fails oracle 13 (a new user's Node.js server did, session 62): the page must say so."""
    page = " ".join((ROOT / "properties" / "adapters" / "WIRE.md").read_text(encoding="utf-8").split())
    assert 'an absent `namespace` and `"namespace": null` are the one default namespace' in page


def test_the_layout_page_names_every_module_of_the_kit() -> None:
    """``docs/reference/layout.md`` is where a reader finds a module: every module of the shipped kit's
    folders is named there (radixcheck 0.2's aliases, "Moved to ...", are named by their import paths)."""
    page = (ROOT / "docs" / "reference" / "layout.md").read_text(encoding="utf-8")
    folders = ["radixcheck", "reference", "properties", *(f"properties/{d}" for d in
               ("cache", "index", "tiers", "tenant_tree", "findings", "conformance"))]
    # A module is named in its own folder's row: several folders hold a `replay.py` or a `machine.py`.
    rows = {line.split("`")[1].rstrip("/"): line for line in page.splitlines() if line.startswith("| `")}
    unnamed = [f"{folder}/{module.name}" for folder in folders for module in sorted((ROOT / folder).glob("*.py"))
               if module.name not in ("__init__.py", "__main__.py") and f"`{module.name}`" not in rows.get(folder, "")
               and not module.read_text(encoding="utf-8").lstrip('"').startswith("Moved to")]
    assert not unnamed, f"docs/reference/layout.md does not name (add each to its folder's row): {unnamed}"


def test_the_reports_page_names_every_runnable_module() -> None:
    """``docs/reference/reports.md`` lists every command of ``reports/`` and ``model/``: a module that runs as a
    program (``if __name__ == "__main__"``) is named there."""
    page = (ROOT / "docs" / "reference" / "reports.md").read_text(encoding="utf-8")
    unnamed = [f"{folder}/{module.name}" for folder in ("reports", "model") for module in sorted((ROOT / folder).glob("*.py"))
               if module.name != "__main__.py" and 'if __name__ == "__main__"' in module.read_text(encoding="utf-8")
               and not re.search(rf"(\.\.\. |\.|/){module.stem}\b", page)]
    assert not unnamed, f"docs/reference/reports.md does not name: {unnamed}"


def test_the_readme_links_into_every_page_of_the_manual() -> None:
    """The front page is the way in: each page under ``docs/`` is one link away from it."""
    links = set(re.findall(r"\]\((docs/[^)#\s]+)", (ROOT / "README.md").read_text(encoding="utf-8")))
    unlinked = [page.relative_to(ROOT).as_posix() for page in sorted((ROOT / "docs").rglob("*.md"))
                if page.relative_to(ROOT).as_posix() not in links and page.name != "index.md"]
    assert not unlinked, f"README.md does not link to: {unlinked}"


@pytest.mark.parametrize("module", ["radixcheck.properties.cache.contract", "radixcheck.properties.cache.policies",
                                    "radixcheck.properties.index.contract", "radixcheck.properties.index.router_contract",
                                    "radixcheck.properties.tenant_tree.contract", "radixcheck.properties.tiers.contract"])
def test_every_public_name_of_a_contract_has_a_docstring(module: str) -> None:
    """The reference pages are generated from the contracts (mkdocstrings), which leaves out a class or function
    without a docstring: the tier contract's ``TieredCacheLike`` and ``TierMatch`` were missing from the manual."""
    import importlib
    import inspect

    mod = importlib.import_module(module)
    bare = [name for name, obj in vars(mod).items()
            if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module
            and (not obj.__doc__ or obj.__doc__.startswith(f"{name}("))]  # a dataclass's own: its signature
    assert not bare, f"{module}: no docstring, so no entry in the reference: {bare}"
