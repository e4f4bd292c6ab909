"""A stream's operations depend on its seed only, not on the streams or modules a process ran before
it (radixcheck.properties.findings.draws): the catalogues' kill rates and false-alarm counts, and any
seed quoted in a report, replay alone as they ran in a worker. Before the pin, stream 30 of
LoadLockedTiers (write-back, page size 1) failed with tier_catalogue loaded and passed without it."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from radixcheck import profiles
from radixcheck.properties.findings import draws, verdict
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import CORRECT_TIER_VARIANTS

SEARCH = settings(profiles.SETTINGS["mutation"], max_examples=20, stateful_step_count=10)


class WideDraws(RuleBasedStateMachine):
    """Draws of the widths a tenant rule makes (any integer, float or string): the draws a loaded
    module's literals can reach (Hypothesis takes none of size under 100)."""

    drawn: list[Any] = []

    @rule(n=st.integers(), x=st.floats(allow_nan=False), s=st.text(max_size=4))
    def draw(self, n: int, x: float, s: str) -> None:
        type(self).drawn.append((n, x, s))


def _draws(seed: str) -> list[Any]:
    """What a run of ``WideDraws`` under ``seed`` (its name: derandomized, as a catalogue stream) drew."""
    machine = type(seed, (WideDraws,), {"drawn": []})
    verdict.run_machine(machine, SEARCH)
    return machine.drawn


def _steps(k: int) -> str:
    """A digest of every step (rule and arguments) stream ``k`` of LoadLockedTiers (write-back, page
    size 1) draws at the catalogue's budget, and its verdict. It declares namespaces: its tenant rules
    draw wide integers, which a loaded module's literals reach."""
    digest = hashlib.sha256()

    def record(function: Callable[..., Any], has_targets: bool) -> Callable[..., Any]:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            digest.update(repr((function.__name__, args, sorted(kwargs.items()))).encode())
            return function(self, *args, **kwargs)
        step.__name__ = function.__name__
        return step

    name = f"stream{k}_LoadLockedTiers_write_back_p1"  # the catalogue's name: the seed
    machine = verdict._wrapping_steps(tier_machine_for(CORRECT_TIER_VARIANTS["LoadLockedTiers"], 1, "write_back", name), record)
    try:
        verdict.run_machine(machine, profiles.SETTINGS["mutation"])
        outcome = "passed"
    except Exception as exc:  # noqa: BLE001 - the verdict is part of what must replay
        outcome = type(exc).__name__
    return f"{digest.hexdigest()} {outcome}"


@contextlib.contextmanager
def _module_with_new_literals(where: Path) -> Iterator[None]:
    """Load, as a later stream's lazy import would, a local module whose source has literals no
    other module has; put Hypothesis's pool of local constants back afterwards, so that the tests
    this worker runs next draw as they would have."""
    from hypothesis.internal.conjecture import providers
    saved = copy.deepcopy(providers._local_constants)
    source = where / "freshly_loaded.py"
    source.write_text("LITERALS = (918273645, -7364501, 2**40 + 17, 3.25e7, 'zq-namespace-lit', b'\\x07q')\n",
                      encoding="utf-8")
    spec = importlib.util.spec_from_file_location("radixcheck_freshly_loaded", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        yield
    finally:
        del sys.modules[spec.name]
        providers._local_constants = saved
        providers.CONSTANTS_CACHE.cache.clear()


def test_hypothesis_has_the_pool_the_pin_empties() -> None:
    assert draws.pinnable(), "Hypothesis moved its local constants: radixcheck.properties.findings.draws needs updating"


def test_a_run_draws_the_same_after_a_module_with_new_literals_is_loaded(tmp_path: Path) -> None:
    alone = _draws("stream3_WideDraws")
    _draws("stream4_WideDraws")  # another stream first, as in a catalogue's worker
    with _module_with_new_literals(tmp_path):  # and a module it loaded
        assert _draws("stream3_WideDraws") == alone


def test_without_the_pin_a_newly_loaded_module_changes_the_draws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above can fail: without the pin, the same run draws other values once a module with
    new literals is loaded (what made a catalogue stream's verdict depend on its worker)."""
    monkeypatch.setattr(verdict, "seed_only_draws", contextlib.nullcontext)
    before = _draws("stream3_WideDraws")
    with _module_with_new_literals(tmp_path):
        assert _draws("stream3_WideDraws") != before


@pytest.mark.deep
def test_a_tier_stream_alone_replays_as_after_other_streams_in_a_catalogue_worker() -> None:
    """Stream 30 of LoadLockedTiers alone, in a fresh process, against the same stream after streams
    28 and 29 in this one, with the tier catalogue loaded as in its workers (the case that failed in
    a worker and passed alone): the same steps, the same verdict."""
    alone = subprocess.run([sys.executable, "-c", f"from {__name__} import _steps; print(_steps(30))"],
                           capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1]).stdout.split()[-2:]
    importlib.import_module("radixcheck.reports.tier_catalogue")
    _steps(28), _steps(29)
    assert _steps(30).split() == alone
