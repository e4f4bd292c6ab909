"""The matrix attributes every verdict to its target, and never lets an empty row replace one."""

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
