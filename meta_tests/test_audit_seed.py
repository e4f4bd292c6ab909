"""``radixcheck audit --seed N`` (``--radix-seed``): a run of its own derandomized stream, keyed by
the machines' names as the catalogues key each stream (``Target.name``), with no saved failures to
start from. Two seeds are two independent runs; the same seed replays the same run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from radixcheck import profiles
from radixcheck.cli import main
from radixcheck.properties.findings import verdict
from radixcheck.properties.target import load_target


class Draws(RuleBasedStateMachine):
    drawn: list[int] = []

    @rule(n=st.integers(0, 10**6))
    def draw(self, n: int) -> None:
        type(self).drawn.append(n)


def _stream(name: str) -> list[int]:
    """What a machine built under ``name`` draws in the seeded search (derandomized, no database)."""
    profiles.select("ci", seeded=True)
    try:
        search = settings(profiles.current(), max_examples=5, stateful_step_count=5)
    finally:
        profiles.select(None)
    assert search.derandomize and search.database is None
    machine = type(name, (Draws,), {"drawn": []})
    verdict.run_machine(machine, search)
    return machine.drawn


def test_a_seed_names_its_own_stream_and_replays_it() -> None:
    target = load_target("radixcheck.reference:RadixCache")
    seeded = {seed: dataclasses.replace(target, seed=seed) for seed in (1, 2)}
    assert target.name == "radixcheck.reference.RadixCache"  # no seed: the stream every earlier run ran
    assert seeded[1].name != seeded[2].name != target.name
    one, again, two = _stream(seeded[1].name), _stream(seeded[1].name), _stream(seeded[2].name)
    assert one and one == again
    assert one != two


def test_dev_under_a_seed_keeps_no_saved_failures() -> None:
    profiles.select("dev", seeded=True)
    try:
        assert profiles.current().database is None and profiles.current().derandomize
    finally:
        profiles.select(None)
    assert profiles.SETTINGS["dev"].database is not None  # what a seed leaves out


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_a_bad_seed_is_exit_2_in_one_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["audit", "radixcheck.reference:RadixCache", "--seed", value])
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert "--seed" in err and err.count("\n") == 1 and out == ""


@pytest.mark.deep  # three audits of a mutant
def test_the_same_seed_gives_the_same_verdict_and_another_seed_another_run(tmp_path: Path) -> None:
    def audit(seed: int, run: str) -> dict:
        out = tmp_path / f"{run}.json"
        code = main(["audit", "radixcheck.properties.cache.mutants:EvictsLockedLeaf", "--page-sizes", "1", "-n", "0",
                     "--profile", "mutation", "--seed", str(seed), "--json", str(out)])  # no shrinking: the stream's own failure
        assert code == 1
        return json.loads(out.read_text())

    before = profiles.current()
    first, again, other = audit(7, "first"), audit(7, "again"), audit(8, "other")
    assert profiles.current() == before  # an in-process audit leaves no profile or seed to later tests
    assert first["seed"] == 7

    def programs(result: dict) -> list[tuple[str, str]]:
        return [(f["oracle"], f["program"]) for f in result["findings"]]

    assert programs(first) == programs(again)
    assert programs(first) != programs(other)
