"""Does every catalogued bug survive the trip over the wire? Each mutant of the catalogue, served by
``python -m radixcheck.reference.wire_server --cache ...:MUTANT``, is run through the wire adapter
with the gate's search (the ``mutation`` profile, the mutant's own capabilities and page size, one
stream), and the oracle that stopped it is compared with the one it must be caught by.

``python -m radixcheck.reports.wire_mutants [--out reports/WIRE_MUTANTS.md] [NAME ...]``

A mutant that passes over the wire is expected only where the wire itself removes the bug: the
protocol copies every array both ways, so aliasing the caller's buffers cannot happen there, and
equal namespaces travel as one value, so a server cannot split them. The
server declares each mutant's own capabilities as the wire carries them (WIRE.md): a request mutant
its ``lifecycle="requests"`` (so it is sent its own request methods), a ``Policy`` by its wire form.
A mutant with a second pool is listed and not run: without a host tier no op carries a second pool.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from radixcheck import profiles
from radixcheck.properties.adapters.wire import reference_command, wire_factory
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import MUTANTS
from radixcheck.properties.cache.scale_machine import scale_machine_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache
from radixcheck.reference.wire_server import policy_on_wire
from radixcheck.reports.machine import cpu_line

BY_DESIGN = {"KeepsCallersValues", "MatchReturnsItsStorage", "NamespaceSplitsEqualValues"}
"""Bugs the wire cannot carry: buffer aliasing (every array is copied into JSON and back), and a split
of equal namespaces (``1``, ``1.0`` and ``True`` travel as the one value ``1``: WIRE.md, "Namespaces")."""


NOT_CARRIED = "not carried (second pool)"
"""The verdict of a mutant with a second pool: the wire carries one only on a host tier (WIRE.md)."""


def wire_capabilities(mutant: type[RadixCache]) -> dict[str, Any] | None:
    """The mutant's own capabilities as its server declares them (its ``--capabilities``), or None
    when the wire cannot carry them (a second pool without a host tier). Taken from the mutant's
    declaration, as ``machine_for_mutant`` takes them in process: its lifecycle as declared (a
    request mutant runs its own request methods, where the server alone would declare "tree"), its
    policy in the wire's form."""
    capabilities = mutant.capabilities if mutant.capabilities is not RadixCache.capabilities else DEFAULT_CAPABILITIES
    if capabilities.second_pool is not None:
        return None
    fields = {**capabilities.__dict__, "eviction_policy": policy_on_wire(capabilities.eviction_policy)}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}


def server_command(mutant: type[RadixCache]) -> list[str]:
    """The command that serves one mutant over the wire (wire_capabilities must not be None)."""
    caps = wire_capabilities(mutant)
    if caps is None:
        raise ValueError(f"{mutant.__name__} declares a second pool, which the wire carries only on a host tier")
    return [*reference_command(), "--cache", f"radixcheck.properties.cache.mutants:{mutant.__name__}",
            "--capabilities", json.dumps(caps)]


def run_one(mutant: type[RadixCache]) -> tuple[str, str, float]:
    """(verdict, what stopped it, seconds)."""
    if wire_capabilities(mutant) is None:
        return NOT_CARRIED, "-", 0.0
    factory = wire_factory(server_command(mutant))
    make = scale_machine_for if getattr(mutant, "scale", False) else machine_for
    machine = make(factory, factory.capabilities, getattr(mutant, "page_size_for_test", 1), f"wire_{mutant.__name__}")
    started = time.monotonic()
    try:
        run_machine(machine, profiles.SETTINGS["mutation"])
    except Exception as exc:  # noqa: BLE001 - the finding
        right = isinstance(exc, mutant.caught_by)
        return ("caught" if right else "caught, other reason"), type(exc).__name__, time.monotonic() - started
    finally:
        factory.close()
    return ("passes (by design)" if mutant.__name__ in BY_DESIGN else "MISSED"), "-", time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutant class names (default: every catalogued mutant)")
    parser.add_argument("--out", default=None)
    options = parser.parse_args(argv)
    known = {m.__name__: m for m in MUTANTS}
    unknown = [n for n in options.names if n not in known]
    if unknown:
        parser.error(f"not catalogued mutants: {', '.join(unknown)}")
    chosen = [known[n] for n in options.names] or list(MUTANTS)
    rows, counts = [], {}
    for mutant in chosen:
        verdict, by, seconds = run_one(mutant)
        counts[verdict] = counts.get(verdict, 0) + 1
        caught_by = mutant.caught_by if isinstance(mutant.caught_by, tuple) else (mutant.caught_by,)
        expected = ", ".join(c.__name__ for c in caught_by)
        rows.append(f"| `{mutant.__name__}` | {mutant.bug_class} | {verdict} | {by} | {expected} | {seconds:.1f} |")
        print(rows[-1], flush=True)
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    text = "\n".join([
        "# Catalogued mutants over the wire", "",
        f"Generated by `python -m radixcheck.reports.wire_mutants`. CPU: {cpu_line()}. Each mutant is served by "
        "`python -m radixcheck.reference.wire_server --cache radixcheck.properties.cache.mutants:NAME` with its own "
        "capabilities as the wire carries them (a request mutant's `lifecycle: \"requests\"`, so it is sent its own "
        "request methods; a policy in its wire form), and run through `radixcheck.properties.adapters.wire` with the "
        "gate's search (the `mutation` profile, one derandomized stream; the catalogue's 200-stream kill rates are for "
        "the in-process mutants). A mutant with a second pool is not run: the wire carries one only on a host tier.", "",
        f"{len(chosen)} mutants: {summary}.", "",
        "| mutant | bug class | over the wire | stopped by | must be caught by | seconds |", "|---|---|---|---|---|---:|",
        *rows, "",
    ])
    if options.out:
        with open(options.out, "w") as f:
            f.write(text)
    return 0 if "MISSED" not in counts else 1


if __name__ == "__main__":
    sys.exit(main())
