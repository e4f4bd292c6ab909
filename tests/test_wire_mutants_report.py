"""The wire mutant report serves each catalogued mutant with its own declaration (reports/wire_mutants.py).

A request mutant's bug is in its own request methods: served with the server's default ("tree") it
would be driven through its tree calls and never show it. So the command the report builds declares
the mutant's lifecycle, and its policy in the wire's form, from the mutant's declaration (as
``machine_for_mutant`` takes them in process); a mutant with a second pool, which the wire carries
only on a host tier, is reported as not carried and never served. No server is started here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES
from radixcheck.properties.cache.mutants import LIFECYCLE_MUTANTS, MUTANTS
from radixcheck.reference import RadixCache
from radixcheck.reference.wire_server import policy_on_wire
from radixcheck.reports import wire_mutants


class _Served(Exception):
    """Raised by the stand-in for wire_factory: carries the command the report would start."""


def _command(mutant: type[RadixCache], monkeypatch: pytest.MonkeyPatch) -> list[str] | None:
    """The server command the report builds for one mutant (None: it served none)."""

    def capture(command: list[str], *args: Any, **kwargs: Any) -> Any:
        raise _Served(command)

    monkeypatch.setattr(wire_mutants, "wire_factory", capture)
    try:
        wire_mutants.run_one(mutant)
    except _Served as served:
        return served.args[0]
    return None


def _declared(mutant: type[RadixCache]) -> Any:
    return mutant.capabilities if mutant.capabilities is not RadixCache.capabilities else DEFAULT_CAPABILITIES


def test_every_mutant_is_served_with_its_own_lifecycle_and_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    requests = 0
    for mutant in MUTANTS:
        declared = _declared(mutant)
        command = _command(mutant, monkeypatch)
        if declared.second_pool is not None:
            assert command is None, f"{mutant.__name__}: a second pool travels only on a host tier, yet a server was started"
            continue
        assert command is not None, f"{mutant.__name__}: no server command built"
        caps = json.loads(command[command.index("--capabilities") + 1])
        assert caps["lifecycle"] == declared.lifecycle, mutant.__name__
        assert caps["eviction_policy"] == policy_on_wire(declared.eviction_policy), mutant.__name__
        requests += declared.lifecycle == "requests"
    assert requests >= len(LIFECYCLE_MUTANTS)  # every request mutant of the catalogue is served running requests


def test_a_second_pool_mutant_is_reported_as_not_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    mutant = next(m for m in MUTANTS if _declared(m).second_pool is not None)
    assert _command(mutant, monkeypatch) is None
    assert wire_mutants.run_one(mutant)[0] == wire_mutants.NOT_CARRIED
