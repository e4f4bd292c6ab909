"""The production world is flushed at its end (``ProductionScaleMachine.teardown``): a reset that
recurses down its deep history is caught there, and a correct cache, or one that offers no reset,
passes. A wire trial's server died resetting a tree 1,000 nodes deep, and no test had reset one
(reports/findings/wire_trial.md)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from radixcheck import profiles
from radixcheck.properties.cache.flush import FLUSH
from radixcheck.properties.cache.scale_machine import scale_machine_for
from radixcheck.properties.findings.reduce import reduce, reduce_seconds
from radixcheck.properties.findings.repro import _Writer, repro_for
from radixcheck.properties.findings.verdict import run_machine
from radixcheck.reference import RadixCache


class ResetsRecursively(RadixCache):
    """The reference, whose reset first walks the tree recursively (one frame per level), as a
    server that frees its nodes depth first: a path deeper than the recursion limit raises."""

    def reset(self) -> None:
        for root in self.roots.values():
            self._walk(root)
        super().reset()

    def _walk(self, node) -> None:  # noqa: ANN001 - the reference's node
        for child in node.children.values():
            self._walk(child)


class TrustingReference(RadixCache):
    """The reference, declared as trusting its callers (no lock checks): it gets only legal calls."""

    capabilities = dataclasses.replace(RadixCache.capabilities, checks_locks=False)


def _world(factory, name: str, **declared) -> type:  # noqa: ANN001, ANN003 - a factory and Capabilities fields
    capabilities = dataclasses.replace(factory.capabilities, **declared)
    return scale_machine_for(factory, capabilities, 1, name)


@pytest.mark.deep  # a production world
def test_a_reset_that_recurses_down_the_deep_history_fails_at_the_flush(monkeypatch) -> None:
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    """Raised in its reset: at the flush, or at a ``reset`` step if one is drawn first in another stream."""
    with pytest.raises(RecursionError) as caught:
        run_machine(_world(ResetsRecursively, "meta_flush_recursive"), profiles.SETTINGS["mutation"])
    assert any(frame.name == "_walk" for frame in traceback.extract_tb(caught.value.__traceback__))
    notes = "\n".join(caught.value.__notes__)
    assert FLUSH in notes or "state.reset" in notes, notes[-2000:]


@pytest.mark.deep  # production worlds
@pytest.mark.parametrize(("factory", "declared"), [(RadixCache, {}), (TrustingReference, {}),
                                                   (ResetsRecursively, {"supports_reset": False})],
                         ids=["reference", "trusts-callers", "no-reset-declared"])
def test_a_correct_cache_or_one_without_reset_passes_the_flush(monkeypatch, factory, declared) -> None:  # noqa: ANN001
    """A cache that declares no reset is never sent one, so the recursive one passes undeclared."""
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    run_machine(_world(factory, f"meta_flush_{factory.__name__}", **declared), profiles.SETTINGS["mutation"])


@pytest.mark.deep  # a production world, and its reduction
def test_a_reset_that_dies_under_the_deep_history_reduces_to_the_history_in_few_replays(monkeypatch) -> None:
    """Its repro was the whole world, reduced until the budget ran out (a wire server's: 7,231 calls,
    288 lines, 2 replays in 60 s; in process, 1,061 calls after 93 replays, the chain left out act by
    act). The failing step with the history alone, then the chain bisected, finishes in 50 replays:
    no note says it stopped, and the file is the history's one loop and the reset."""
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    with pytest.raises(RecursionError) as caught:
        run_machine(_world(ResetsRecursively, "meta_flush_reduced"), profiles.SETTINGS["mutation"], transcript=True)
    reduced = reduce(caught.value.radixcheck_machine, caught.value, seconds=float("inf"), replays=50)
    assert reduced is not None and not reduced.notes, (reduced and reduced.notes, reduced and reduced.replays)
    failing = reduced.replay.acts[-1]
    kept = {a.story for a in reduced.replay.acts if a.step_number != failing.step_number}
    assert len(kept) == 1 and "deep" in str(kept), kept  # the history's story, nothing else before the reset
    text = _Writer(reduced, "meta_tests.test_world_flush:ResetsRecursively", "").script()
    assert text.count("\n") <= 120 and text.count("for i in range(") == 1, text
    # the history's prompt is cut to what its chain matches of it, plus the page its deepest match splits off
    # (halving it stopped at 1,500 tokens for a chain ~1,050 deep)
    prompt = next(a.args[0] for a in reduced.replay.acts if a.name == "_insert_request")
    deepest = max(len(a.args[0]) for a in reduced.replay.acts if a.name == "_match_along")
    assert len(prompt) == deepest + 1, (len(prompt), deepest)


TRIAL_SERVER = Path(__file__).resolve().parents[1] / "reports" / "findings" / "wire_trial" / "router_server.py"
HISTORY = re.compile(r"insert\(list\(range\(0, (\d+)\)\).*\n    for i in range\((\d+)\):\n"
                     r"        cache\.match_prefix\(np\.array\(list\(range\(0, (\d+) - i\)\)\)\)")


@pytest.mark.deep  # a production world over the wire, and its reduction
def test_over_the_wire_the_deep_reset_reduces_within_its_budget_to_the_chain_it_needs(monkeypatch, tmp_path: Path) -> None:
    """The wire trial's server that dies resetting a tree 1,000 nodes deep: each replay of the history sends
    ~10^6 tokens as JSON. The reduction ends by itself, in fewer replays than a bound and within the CPU
    budget it has by default (60 s, the server's CPU counted), and its file is the history's prompt cut to
    the chain's deepest match (plus a page), the chain (one loop), its next turn and the reset: exit 1 on the
    server, 0 on the server without the bug. (Before: the prompt was halved to 1,500 tokens for a chain 993
    deep; the header gave wall seconds, ~4 times the CPU at a load of 10.)"""
    monkeypatch.setenv("RADIXCHECK_SHRINK_SECONDS", "0")
    buggy = f"{sys.executable} {TRIAL_SERVER} --bug dies-on-deep-reset"
    monkeypatch.setenv("RADIXCHECK_WIRE_CMD", buggy)
    from radixcheck.properties.adapters.wire import WireServerDied, server

    try:
        with pytest.raises(WireServerDied) as caught:
            run_machine(_world(server, "meta_flush_wire"), profiles.SETTINGS["mutation"], transcript=True)
        budget = reduce_seconds(type(caught.value.radixcheck_machine))
        repro = repro_for(caught.value, "radixcheck.properties.adapters.wire:server", seconds=float("inf"), replays=45)
    finally:
        server.close()
    assert repro.text is not None and repro.exit_code == 1, (repro.why_not, repro.notes)
    text = repro.text
    said = re.search(r"Reduced from \d+ acts to \d+ \((\d+) replays, ([\d.]+) s of CPU\)\.", text)
    assert said is not None and not repro.notes, (text[:1500], repro.notes)  # no note: it was not stopped
    assert float(said[2]) < budget, said[0]  # within the default budget (CPU seconds: this process and the server)
    history = HISTORY.search(text)
    assert history is not None, text
    prompt, loop, deepest = (int(n) for n in history.groups())
    assert prompt == deepest + 1 and loop > 900, history[0]  # the prompt cut to the chain: no tokens it does not need
    assert text.count("\n") <= 110 and text.count("for i in range(") == 1, text
    path = tmp_path / "wire_repro.py"
    path.write_text(text)
    environment = {**os.environ, "RADIXCHECK_WIRE_CMD": buggy}
    bug = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600)
    assert bug.returncode == 1, bug.stdout[-2000:] + bug.stderr[-2000:]
    environment["RADIXCHECK_WIRE_CMD"] = f"{sys.executable} {TRIAL_SERVER}"
    fixed = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600)
    assert fixed.returncode == 0 and "no bug" in fixed.stdout, fixed.stdout[-2000:] + fixed.stderr[-2000:]
