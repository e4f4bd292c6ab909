"""The tier catalogue's provenance: after ``--only`` re-runs, each row is credited to the newest run
that measured it, and a run no row comes from any more leaves the list (the header used to nest
every earlier run's sentence inside the next, 15 levels deep)."""

from radixcheck.reports.rerun import runs_after, runs_table


def _run(commit: str, *rows: str) -> dict:
    return {"commit": commit, "command": f"tier_catalogue --only {' --only '.join(rows)}", "seconds": 1.0,
            "machine": "test", "rows": list(rows)}


def test_a_rerun_takes_its_rows_from_the_earlier_runs_and_drops_an_emptied_run() -> None:
    earlier = [_run("b", "MruFirstTier"), _run("a", "MruFirstTier", "TieredLfu", "BackupChainGap")]
    runs = runs_after(_run("c", "TieredLfu", "MruFirstTier"), earlier)
    assert [(r["commit"], r["rows"]) for r in runs] == [("c", ["TieredLfu", "MruFirstTier"]), ("a", ["BackupChainGap"])]


def test_the_runs_table_names_every_row_once_and_says_when_a_time_was_not_recorded() -> None:
    runs = [_run("c", "TieredLfu"), {**_run("a", "BackupChainGap"), "seconds": None, "machine": ""}]
    table = runs_table(runs)
    assert table.count("`TieredLfu`") == 1 and table.count("`BackupChainGap`") == 1
    assert "(not recorded)" in table and "1 s (test)" in table
