"""A waiver that names one finding by its shape (``said: <words of its message>``), and one written
the old way (the oracle alone), which still waives every finding of its oracle but says so when
those were of more than one shape (after_verdict_trial.md friction 4: one ``10 tenant isolation``
line waived two different leaks, and the unknown one hid behind the known one)."""

from __future__ import annotations

import pytest

from radixcheck.audit import Verdict, waived_of
from radixcheck.oracles.violations import TenantIsolationViolation
from radixcheck.properties.findings.said import said_in
from radixcheck.properties.findings.waivers import WaiverError, WaiverLog, parse_waivers

# the trial's two leaks (twobugs:iso_iso), as the audit's card printed them
HOST_LOOKUP = ("match_prefix counted 2 tokens on host past the 1 its namespace ('X', None) holds "
               "(under namespace ('X', None))")
QUARANTINE = "evict_prefix([0, 1]) freed the host copy of page (host [3]), which is namespace ('Y', 1)'s"
OTHER_RUN = ("match_prefix counted 5 tokens on host past the 3 its namespace 'b' holds "  # the same leak, another run's draws
             "(under namespace 'b')")


def _log(line: str) -> WaiverLog:
    return WaiverLog.for_test(parse_waivers(line), ("twobugs:iso_iso",), "test_tier_state_machine[page_size=1]")


def test_a_line_with_said_waives_only_the_finding_whose_message_says_it() -> None:
    log = _log("twobugs:*  *  10 tenant isolation  said: match_prefix counted * on host  # my ticket 2")
    assert log(TenantIsolationViolation(HOST_LOOKUP)) and log(TenantIsolationViolation(OTHER_RUN))
    assert not log(TenantIsolationViolation(QUARANTINE))  # the unknown leak is a finding
    [waived] = log.findings()
    assert waived["named_by_shape"] and waived["times_met"] == 2


def test_a_line_written_the_old_way_still_waives_every_finding_of_its_oracle_and_the_card_says_so() -> None:
    log = _log("twobugs:*  *  10 tenant isolation  # my ticket 2")
    assert all(log(TenantIsolationViolation(message)) for message in (HOST_LOOKUP, QUARANTINE, OTHER_RUN))
    assert len(log.findings()) == 2  # one entry per shape: the second leak is on the card, not folded into the first
    merged = waived_of([Verdict("test_tier_state_machine[page_size=1]", "waived", 1.0, waived=log.findings())])
    assert len(merged) == 2 and all("different bugs, name each by 'said:" in w["shapes_waived"] for w in merged)
    one_shape = _log("twobugs:*  *  10 tenant isolation  # my ticket 2")
    one_shape(TenantIsolationViolation(HOST_LOOKUP)), one_shape(TenantIsolationViolation(OTHER_RUN))
    assert [w.get("shapes_waived") for w in waived_of([Verdict("t", "waived", 1.0, waived=one_shape.findings())])] == [None]


@pytest.mark.parametrize(("line", "phrase"), [
    ("*  *  4 eviction order  said: evicted  # x", "cannot name an order bug"),
    ("*  *  EvictionOrderViolation  said: evicted  # x", "cannot name an order bug"),
    ("*  *  4 eviction order as lru  said: evicted  # x", "not both"),
    ("*  *  10 tenant isolation  said: *  # x", "needs the words"),
    ("*  *  10 tenant isolation  said:  # x", "needs the words"),
])
def test_a_said_that_cannot_name_one_finding_is_refused_when_the_file_is_read(line: str, phrase: str) -> None:
    with pytest.raises(WaiverError, match=phrase) as refused:
        parse_waivers(line, "w.txt")
    assert str(refused.value).startswith("w.txt:1: ") and "\n" not in str(refused.value)


def test_said_is_the_message_as_printed_with_star_for_what_varies() -> None:
    assert said_in("freed the host copy of page (host [*]), which is", QUARANTINE)  # brackets and parentheses are themselves
    assert not said_in("freed the host copy of page (host [4])", QUARANTINE)
    assert said_in("namespace ('X', None) holds", HOST_LOOKUP) and not said_in("namespace ('Y'", HOST_LOOKUP)
    [waiver] = parse_waivers("*  *  *  said: \"it's\"  # quotes around the words are taken off, a message's own kept")
    assert waiver.said == "it's" and "said: it's" in str(waiver)


def test_a_messages_hash_is_written_escaped_in_said_and_the_reasons_hash_still_ends_the_words() -> None:
    """A ``#`` starts the reason, so a message's own (a tier transfer's ``write #2``) is written ``\\#``."""
    [waiver] = parse_waivers(r"*  *  RuntimeError  said: transfer \#2 of [*] failed  # upstream #7, known", "w.txt")
    assert (waiver.said, waiver.reason) == ("transfer #2 of [*] failed", "upstream #7, known")
    assert waiver.waives(RuntimeError("transfer #2 of [4, 5] failed: host pool full"))
    assert not waiver.waives(RuntimeError("transfer #3 of [4, 5] failed: host pool full"))
    assert r"said: transfer \#2 of [*] failed  # upstream #7" in str(waiver)  # the unmatched warning shows it as written
    [old_way] = parse_waivers("*  *  RuntimeError  #upstream #7", "w.txt")  # no said: no change
    assert old_way.reason == "upstream #7"


@pytest.mark.parametrize("line", [
    "*  *  RuntimeError  said: transfer #2 failed  # upstream",  # the message's '#2' would end the words at 'transfer'
    "*  *  RuntimeError  said: request#3 failed  # upstream",
    "*  *  RuntimeError  said: transfer failed  #upstream",
])
def test_a_hash_that_could_be_the_messages_is_refused_in_one_line(line: str) -> None:
    with pytest.raises(WaiverError, match=r"write a message's '#' as '\\#'") as refused:
        parse_waivers(line, "w.txt")
    assert str(refused.value).startswith("w.txt:1: ") and "\n" not in str(refused.value)
