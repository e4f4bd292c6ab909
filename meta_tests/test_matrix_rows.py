"""The matrix attributes every verdict to its target, and never lets an empty row (or run) replace one."""

import json

import pytest

from radixcheck.audit import Verdict
from radixcheck.reports import matrix


def test_a_single_target_run_keeps_its_verdicts() -> None:
    # With one target the plugin leaves the target's name out of the test ids.
    verdicts = [Verdict("test_cache_state_machine[page_size=2]", "failed", 1.5, "sizes", "off by one"),
                Verdict("test_bad_page_size_is_refused[0]", "skipped", 0.0),
                Verdict("test_cache_aware_order_is_dfs_preorder", "passed", 0.0)]
    [row] = matrix.rows_of({"vllm.vllm_prefix": "x:y"}, verdicts)
    assert row["tests"] == {"test_cache_state_machine[page_size=2]": {"outcome": "failed", "oracle": "sizes", "reason": "off by one"},
                            "test_bad_page_size_is_refused[0]": {"outcome": "skipped"}}
    assert row["seconds"] == 1.5


def test_a_single_tenant_tree_run_keeps_its_verdicts() -> None:
    """A tenant tree's tests take no page size: with one target their ids have no parameter at all,
    and they are still the target's (a one-target re-run kept the old verdicts)."""
    verdicts = [Verdict("test_tenant_tree_state_machine", "failed", 2.0, "11 tenant-tree eviction", "evicted"),
                Verdict("test_cache_aware_order_is_dfs_preorder", "passed", 0.0)]
    [row] = matrix.rows_of({"tenant_tree.split-races-without-lock": "x:y"}, verdicts)
    assert row["tests"] == {"test_tenant_tree_state_machine": {"outcome": "failed", "oracle": "11 tenant-tree eviction",
                                                               "reason": "evicted"}}


def test_several_targets_are_told_apart_by_the_longest_name() -> None:
    verdicts = [Verdict("test_cache_state_machine[mini.newest_strict-page_size=1]", "passed", 1.0),
                Verdict("test_cache_state_machine[mini.newest-page_size=1]", "failed", 2.0)]
    rows = {r["name"]: r for r in matrix.rows_of({"mini.newest": "a:b", "mini.newest_strict": "a:c"}, verdicts)}
    assert rows["mini.newest_strict"]["tests"] == {"test_cache_state_machine[page_size=1]": {"outcome": "passed"}}
    assert rows["mini.newest"]["tests"] == {"test_cache_state_machine[page_size=1]": {"outcome": "failed"}}


def test_a_row_without_verdicts_never_replaces_one_with_verdicts() -> None:
    earlier = {"name": "vllm.vllm_prefix", "spec": "x:y", "seconds": 9.0, "tests": {"test_x": {"outcome": "passed"}}}
    empty = {"name": "vllm.vllm_prefix", "spec": "x:y", "seconds": 0.0, "tests": {}}
    rows, kept = matrix.merge_rows([earlier], [empty], partial=True)
    assert rows == [earlier] and kept == ["vllm.vllm_prefix"]


def test_a_row_run_by_name_replaces_only_its_own_row() -> None:
    """``--target NAME``: the row of that name is replaced in place, a new one follows its group's last
    row, and every other row (of its group too) is kept."""
    saved = [{"name": n, "tests": {"t": {"outcome": "passed"}}} for n in ("reference", "TrustingReference", "sglang.radix_lru")]
    again = {"name": "TrustingReference", "tests": {"t": {"outcome": "failed"}}}
    new = {"name": "TrustingTenants", "tests": {"t": {"outcome": "passed"}}}
    rows, kept = matrix.merge_rows(saved, [again, new], partial="rows")
    assert [r["name"] for r in rows] == ["reference", "TrustingReference", "TrustingTenants", "sglang.radix_lru"] and not kept
    assert rows[1] is again and rows[0] is saved[0] and rows[3] is saved[2]


BROKEN_SUITES = {  # a suite in place of the conformance tests: files, and the cause the run must name
    "conftest": ({"conftest.py": "import sybil_not_installed\n"}, "ImportError while loading conftest"),
    "collection": ({"test_broken.py": "import sybil_not_installed\n"}, "collection error in"),
    "nothing": ({"test_empty.py": "X = 1\n"}, "NO_TESTS_COLLECTED"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_SUITES))
def test_a_run_that_judged_nothing_leaves_the_saved_matrix_as_it_was(case, tmp_path, monkeypatch, capsys) -> None:
    """A run whose pytest did not load its conftest (a venv without ``sybil``), failed collection, or
    collected nothing exits 1 naming pytest's cause, and writes neither matrix.json nor MATRIX.md."""
    files, cause = BROKEN_SUITES[case]
    package = tmp_path / f"broken_{case}_suite"  # a package: its modules' names clash with no loaded conftest
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(text)
    monkeypatch.chdir(tmp_path)  # no pytest ini above it: the suite's own conftest is the session's
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(matrix, "CONFORMANCE", package.name)
    out = tmp_path / "out"
    (out / "artifacts").mkdir(parents=True)
    saved = {"meta": {"command": "an earlier run", "wall_seconds": 99.0},
             "rows": [{"name": "reference", "spec": "x:y", "seconds": 9.0, "tests": {"test_x": {"outcome": "passed"}}}]}
    (out / "artifacts" / "matrix.json").write_text(json.dumps(saved))
    (out / "MATRIX.md").write_text("the earlier report\n")
    assert matrix.main(["--target", "reference", "-n", "0", "--out", str(out)]) == 1
    said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[matrix]")]
    assert len(said) == 1 and "not recorded" in said[0] and cause in said[0], said
    assert case == "nothing" or "sybil_not_installed" in said[0]
    assert json.loads((out / "artifacts" / "matrix.json").read_text()) == saved
    assert (out / "MATRIX.md").read_text() == "the earlier report\n"


def test_a_run_in_which_no_row_could_run_keeps_the_saved_record_of_runs(tmp_path, monkeypatch) -> None:
    """``--only tokenspeed`` without its checkout ran nothing, yet recorded a 0-target re-run that
    superseded the earlier run of those rows (their provenance dropped): now the saved run stays."""
    monkeypatch.delenv("RADIXCHECK_TOKENSPEED_SRC", raising=False)
    out = tmp_path / "out"
    (out / "artifacts").mkdir(parents=True)
    saved = {"meta": {"generated_by": "Generated by radixcheck 0.2.0.", "command": "an earlier run", "xdist": [],
                      "profile": "audit", "wall_seconds": 99.0, "machine": "2 cores", "environment": {},
                      "reruns": [{"command": "the run of tokenspeed", "engines": ["tokenspeed"]}]},
             "rows": [{"name": "tokenspeed.lru", "spec": "x:y", "seconds": 9.0, "tests": {"test_x": {"outcome": "passed"}}}]}
    (out / "artifacts" / "matrix.json").write_text(json.dumps(saved))
    monkeypatch.setattr(matrix, "render", lambda rows, meta: "the report\n")  # the record is what is judged here
    assert matrix.main(["--only", "tokenspeed", "-n", "0", "--out", str(out)]) == 0
    after = json.loads((out / "artifacts" / "matrix.json").read_text())
    assert after["meta"] == saved["meta"]
    assert next(r for r in after["rows"] if r["name"] == "tokenspeed.lru")["tests"] == saved["rows"][0]["tests"]


def test_a_run_records_its_settings_and_which_files_were_uncommitted(tmp_path, monkeypatch) -> None:
    """A run's line says which ``RADIXCHECK_*`` settings it ran under (a raised op timeout changes what a
    slow engine's row can finish) and what its ``-dirty`` stood for: here a findings page, no code."""
    from radixcheck import provenance

    monkeypatch.setenv("RADIXCHECK_OP_WALL_TIMEOUT", "600")
    monkeypatch.setenv("RADIXCHECK_LIGHTLLM_SRC", "/home/someone/lightllm")  # a user's path stays out of the JSON
    monkeypatch.setattr(provenance, "uncommitted", lambda: ["reports/findings/sglang_trees.md"], raising=False)
    row = {"name": "reference", "spec": "x:y", "seconds": 1.0, "tests": {"test_x": {"outcome": "passed"}}}
    monkeypatch.setattr(matrix, "run_matrix", lambda targets, profile, xdist: ([dict(row)], 1.0))
    out = tmp_path / "out"
    (out / "artifacts").mkdir(parents=True)
    saved = {"meta": {"generated_by": "Generated by radixcheck 0.2.0.", "command": "an earlier run", "xdist": [],
                      "profile": "audit", "wall_seconds": 99.0, "machine": "2 cores", "environment": {}},
             "rows": [row]}
    (out / "artifacts" / "matrix.json").write_text(json.dumps(saved))
    assert matrix.main(["--target", "reference", "-n", "0", "--out", str(out)]) == 0
    rerun = json.loads((out / "artifacts" / "matrix.json").read_text())["meta"]["reruns"][-1]
    assert rerun["settings"]["RADIXCHECK_OP_WALL_TIMEOUT"] == "600"
    assert rerun["settings"]["RADIXCHECK_LIGHTLLM_SRC"] == "(a local path)"
    assert "/home/someone" not in (out / "artifacts" / "matrix.json").read_text()
    assert rerun["uncommitted"] == ["reports/findings/sglang_trees.md"]
    line = next(ln for ln in (out / "MATRIX.md").read_text().splitlines() if ln.startswith("- Rows `reference`"))
    assert "`RADIXCHECK_OP_WALL_TIMEOUT=600`" in line
    assert line.endswith("; uncommitted: documentation only (`reports/findings/sglang_trees.md`).")
    earlier = next(ln for ln in (out / "MATRIX.md").read_text().splitlines() if ln.startswith("- The whole matrix"))
    assert "setting" not in earlier and "uncommitted" not in earlier  # recorded neither: says nothing


def test_uncommitted_code_is_named_apart_from_documentation() -> None:
    from radixcheck.provenance import describe_run_record

    said = describe_run_record({"settings": {}, "uncommitted": ["docs/a.md", "reports/matrix.py"]})
    assert said == "No `RADIXCHECK_*` setting; uncommitted code: `reports/matrix.py` (and 1 documentation file)."
    assert describe_run_record({"settings": {}, "uncommitted": []}) == "No `RADIXCHECK_*` setting; nothing uncommitted."
    assert describe_run_record({}) == ""
