"""Oracle 10's insert check names the insert whose KV leaked (issue 40 item 7).

An insert returns a length, not slots: the check names every other namespace whose cached prefix
explains that length exactly, and only those. It used to name the first namespace with at least
that much cached: "found [0] cached under namespace None by call 1", when the repro still failed
with call 1 deleted (the leak was call 2's, under ``(None, 'X')``)."""

from __future__ import annotations

import pytest

from radixcheck.oracles.isolation import check_insert_isolated
from radixcheck.oracles.prefix_set import PrefixSetModel
from radixcheck.oracles.violations import TenantIsolationViolation


def _model(*inserts: tuple[tuple[int, ...], object]) -> PrefixSetModel:
    """Insert ``(tokens, namespace)`` in order, as calls 1, 2, ... (slots from 100 up)."""
    model = PrefixSetModel()
    for tokens, namespace in inserts:
        model.insert(tokens, [100 + model.clock * 10 + i for i in range(len(tokens))], namespace)
    return model


def _by_call(clock: int) -> str:
    return f"call {clock}"


def test_the_namespace_whose_prefix_explains_the_length_is_named() -> None:
    """Call 1 cached [0, 5] under None, call 2 [0] under (None, 'X'); an insert of [0, 5] under
    ('X', None) says 1 token was cached: only (None, 'X') had exactly that (None would have given 2)."""
    model = _model(((0, 5), None), ((0,), (None, "X")))
    with pytest.raises(TenantIsolationViolation) as caught:
        check_insert_isolated(model, ("X", None), (0, 5), 1, 0, _by_call)
    message = str(caught.value).splitlines()[0]
    assert message.endswith("it found [0] cached under namespace (None, 'X') by call 2"), message


def test_a_length_two_namespaces_explain_names_both() -> None:
    """Both had [0] cached: the length cannot tell them apart, so both are named, the latest first."""
    model = _model(((0,), None), ((0,), (None, "X")))
    with pytest.raises(TenantIsolationViolation, match=r"found \[0\] cached under namespace \(None, 'X'\) by call 2, "
                                                       r"or under namespace None by call 1$"):
        check_insert_isolated(model, ("X", None), (0,), 1, 0, _by_call)


def test_when_no_namespace_explains_the_length_every_one_that_covers_it_is_named() -> None:
    """None had 2 tokens of the query cached, (None, 'X') 3; the insert said 1: neither explains it
    exactly, so both are named (as before, when only the first was); one with less is never named."""
    model = _model(((0, 5), None), ((0, 5, 7), (None, "X")), ((9,), "Z"))
    with pytest.raises(TenantIsolationViolation, match=r"it found \[0, 5, 7\] cached under namespace \(None, 'X'\) by call 2, "
                                                       r"or under namespace None by call 1$"):
        check_insert_isolated(model, "Y", (0, 5, 7, 9), 1, 0, _by_call)
    check_insert_isolated(model, "Y", (0, 5, 7, 9), 4, 0, _by_call)  # nobody had 4: the prefix-set oracle's finding, not this one


def test_a_correct_insert_is_not_a_finding() -> None:
    model = _model(((0,), None))
    check_insert_isolated(model, "Y", (0,), 0, 0, _by_call)
