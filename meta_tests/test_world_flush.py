"""The production world is flushed at its end (``ProductionScaleMachine.teardown``): a reset that
recurses down its deep history is caught there, and a correct cache, or one that offers no reset,
passes. A wire trial's server died resetting a tree 1,000 nodes deep, and no test had reset one
(reports/findings/wire_trial.md)."""

from __future__ import annotations

import dataclasses
import traceback

import pytest

from radixcheck import profiles
from radixcheck.properties.cache.flush import FLUSH
from radixcheck.properties.cache.scale_machine import scale_machine_for
from radixcheck.properties.findings.reduce import reduce
from radixcheck.properties.findings.repro import _Writer
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
