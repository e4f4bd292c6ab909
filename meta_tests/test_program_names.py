"""A failing program's ``state = <class>()`` line names radixcheck's machine class, which is named
after the target (``mycache_adapter.make_write_through_p1``) and so reads like a factory of the
user's module (composed_trial.md, friction 5): the line before it says what it is and points at
the repro file."""

from __future__ import annotations

import pytest

from radixcheck import profiles
from radixcheck.properties.findings.failures import program_of
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import HostLookupIgnoresNamespace


def test_the_machine_a_failing_program_builds_is_said_to_be_radixchecks() -> None:
    name = "mycache_adapter.make_write_through_p1"  # as the audit names a user's tier machine
    machine = tier_machine_for(HostLookupIgnoresNamespace, 1, "write_through", name=name)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the mutant's finding, whichever oracle
        run_machine(machine, profiles.SETTINGS["mutation"])
    lines = program_of(caught.value).splitlines()
    built = lines.index(f"state = {name}()")
    said = lines[built - 1]
    assert said.startswith("#") and name in said and "not a name in your code" in said and "repro file" in said


def test_a_programs_text_leaves_out_how_long_its_shrink_took() -> None:
    """The same seed's program is the same text on a quiet machine and a loaded one (CI's deep tier
    once saw "shrunk for 0.1 s" against "0.0 s" in two runs of one seed)."""
    exc = ValueError("x")
    exc.add_note("state = Machine()\nstate.evict(1)")
    exc.add_note("radixcheck: shrunk for 0.1 s (budget 15 s, RADIXCHECK_SHRINK_SECONDS)")
    assert program_of(exc) == "state = Machine()\nstate.evict(1)"


def test_a_shrink_cut_short_by_its_budget_is_said_beside_the_program(monkeypatch) -> None:
    """Index trial: at load 11 the 5 s budget left 24 no-op dump() steps in a finding's program, and
    neither the card nor the console said the program was not shrunk to the end."""
    from radixcheck.audit import AuditResult, Verdict, report_card
    from radixcheck.oracles.violations import IndexViolation
    from radixcheck.properties.findings.failures import exceptions_of
    from radixcheck.properties.index.mutants import SizeCountsNewBlocksOnly, machine_for_index_mutant

    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0.001")
    with pytest.raises(IndexViolation) as caught:
        run_machine(machine_for_index_mutant(SizeCountsNewBlocksOnly, name="cut_short"), profiles.SETTINGS["audit"])
    said = exceptions_of(caught.value)[0]["shrink"]
    assert said.startswith("the shrink stopped at its budget (0.001 s of CPU)") and "--shrink-seconds" in said, said
    assert "the failing program shown still fails as shown, but may be longer than it needs" in said, said
    assert "shrink stopped" not in program_of(caught.value)  # the program's text stays the same on any machine
    failed = Verdict("test_index_state_machine", "failed", 1.0, "7 index model", str(caught.value), program_of(caught.value),
                     exceptions_of(caught.value))
    card = report_card(AuditResult("m:make", "IndexCapabilities()", [], "ci", [failed]))
    assert f"Note: {said[0].upper()}{said[1:]}." in card, card
    assert "The repro file is not that program" not in card  # no file: nothing to say of one
    failed.repro = {"path": "/r/repro-7-index-model.py", "oracle": "7 index model", "message": str(caught.value), "calls": 5}
    card = report_card(AuditResult("m:make", "IndexCapabilities()", [], "ci", [failed]))
    assert "Repro: `/r/repro-7-index-model.py`" in card, card
    assert ("The repro file is not that program: it was reduced further on its own, exits 1 on this finding as radixcheck "
            "ran it, and its header says whether its own reduction finished.") in card, card
