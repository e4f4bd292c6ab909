"""One index bug is one finding whichever ranks and query met it (index trial B5: two sizes() findings)."""

from radixcheck.properties.findings.failures import signature_of


def test_a_sizes_bug_met_on_other_ranks_is_one_signature() -> None:
    machine = ("sizes() disagrees with the blocks each rank holds by its events: rank (1, 1): index 0, events 1; "
               "rank (1, 2): index 0, events 1; rank (1, 3): index 0, events 1")
    churn = ("sizes() disagrees with the blocks each rank holds by its events: rank (1, 0): index 2, events 1; "
             "rank (1, 1): index 0, events 1")
    assert signature_of("7 index model", machine) == signature_of("7 index model", churn)


def test_a_query_bug_met_by_queries_of_other_lengths_is_one_signature() -> None:
    one = ("find_matches(0.1.2) disagrees with what the events say each rank holds: rank (7, 0): index 1, events 3 "
           "(block hashes of the query: [1, 2, 3])")
    other = ("find_matches(3) disagrees with what the events say each rank holds: rank (7, 0): index 0, events 1; "
             "rank (1, 0): index 0, events 1 (block hashes of the query: [5])")
    assert signature_of("7 index model", one) == signature_of("7 index model", other)
    assert "events N (block hashes" in signature_of("7 index model", other)


def test_different_index_checks_stay_different_findings() -> None:
    sizes = "sizes() disagrees with the blocks each rank holds by its events: rank (1, 0): index 2, events 1"
    query = ("find_matches(0.1) disagrees with what the events say each rank holds: rank (1, 0): index 2, events 1 "
             "(block hashes of the query: [1, 2])")
    dump = "dump() lists block 0.1 for rank (1, 0), which does not hold it by its events (removed, cleared, or never stored there)"
    assert len({signature_of("7 index model", m) for m in (sizes, query, dump)}) == 3
