"""The suite proves it can fail: every deliberately broken cache must be caught, by the oracle
its bug class predicts; and it does not cry wolf: every correct variant must pass."""

from __future__ import annotations

import pytest
from hypothesis import settings

from radixcheck import profiles
from radixcheck.oracles.violations import LRUOrderViolation
from radixcheck.properties.cache.contract import DEFAULT_CAPABILITIES, Capabilities
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import (
    CORRECT_VARIANTS,
    MUTANTS,
    POLICY_VARIANTS,
    BigramReference,
    BigramWindowCache,
    SplitRefreshesSuffix,
    StateRadixCache,
    StateRequestsCache,
    WindowRadixCache,
    WindowRequestsCache,
    machine_for_mutant,
)
from radixcheck.properties.findings.failures import oracle_of
from radixcheck.properties.findings.repro import repro_for, run_repro
from radixcheck.properties.findings.verdict import SHRINK_ENV, run_machine
from radixcheck.properties.target import TIMEOUT_ENV
from radixcheck.reference import RadixCache

COMPOSED_REFERENCES = (WindowRequestsCache, StateRequestsCache, BigramWindowCache)  # a composed mutant's fixed cache


def find_only() -> settings:
    """The gate's search without shrinking (the `mutation` profile): every mutant must die within
    the gate's own budget, and the meta-test only needs to know that it died, and why."""
    return profiles.SETTINGS["mutation"]


VARIANT_EXAMPLES = 8  # the gate shows each variant passes a short stream; the evidence is BUG_CATALOGUE.md's false-alarm
# table (50 full-size random streams per variant, in the ordinary machine and in the production world). At 15 the
# twenty variants cost the gate ~9 s of CPU (Zen 5)


POLICY_EXAMPLES = 4  # the reference under each named policy: a glance in the gate (eight of them at 15 examples cost
# ~30 s of CPU on a loaded Zen 5); the evidence is the false-alarm table, 50 streams per policy and machine


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("variant", POLICY_VARIANTS, ids=lambda v: v.__name__)
def test_policy_variant_passes(variant) -> None:
    """The reference evicting by each named policy passes its own order oracle (no false alarm)."""
    search = settings(find_only(), max_examples=POLICY_EXAMPLES)
    run_machine(machine_for(variant, variant.capabilities, variant.page_size_for_test, f"variant_{variant.__name__}"), search)


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("variant", [v for v in CORRECT_VARIANTS if v not in POLICY_VARIANTS], ids=lambda v: v.__name__)
def test_correct_variant_passes(variant) -> None:
    """A cache that trusts its callers, or has no reset, is right: the suite must not fail it.
    The trusting one asserts its own tree before each eviction, so any unpaired or stale call
    the suite sent would show; the no-reset one raises if it is ever sent reset()."""
    search = settings(find_only(), max_examples=VARIANT_EXAMPLES)
    run_machine(machine_for(variant, variant.capabilities, variant.page_size_for_test, f"variant_{variant.__name__}"), search)


REPRO_REPLAYS = 8  # the gate's reduction budget per mutant, in replays (not seconds: the verdict must not depend on the
# machine's speed); an audit's is 5 s. Eight bring every catalogued scale mutant's file to 72-81 lines, 3-5 KB (the writer
# before renamed tokens and ranges of slots: recursive-tree-walk 284 lines / 26 KB, evict-capped-batch 318 / 54 KB).
PASTEABLE_LINES, PASTEABLE_BYTES = 120, 16 * 1024  # a scale finding's file, pasted into an upstream issue


@pytest.mark.sampled  # a catalogue that grows with each contract (conftest.FAST_SAMPLE)
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.bug_class)
def test_mutant_is_caught(mutant) -> None:
    """Caught, for the right reason; and its standalone repro file (issue 20 item 1) exits 1 on the
    mutant, printing the finding, and 0 on the reference (a fixed cache), run as a file runs."""
    with pytest.raises(Exception) as caught:
        run_machine(machine_for_mutant(mutant), find_only(), transcript=True)
    assert isinstance(caught.value, mutant.caught_by), (
        f"{mutant.__name__} was caught, but by {type(caught.value).__name__}, not {mutant.caught_by}: {str(caught.value)[:1500]}"
    )
    spec = f"radixcheck.properties.cache.mutants:{mutant.__name__}"
    repro = repro_for(caught.value, spec, seconds=float("inf"), replays=REPRO_REPLAYS)
    assert repro.text is not None, repro.why_not
    assert repro.exit_code == 1 and "BUG (radixcheck" in repro.output, repro.output[-2000:]
    assert "hypothesis" not in repro.text.lower() and "cache_machine" not in repro.text
    if getattr(mutant, "scale", False):  # a production world sends ~10^4 calls: the file keeps what matters, in loops
        lines, size = len(repro.text.splitlines()), len(repro.text.encode())
        assert lines <= PASTEABLE_LINES and size <= PASTEABLE_BYTES, f"{lines} lines, {size} bytes:\n{repro.text[-3000:]}"
    policy_reference = next((v.__name__ for v in [*POLICY_VARIANTS, BigramReference, *COMPOSED_REFERENCES, WindowRadixCache,
                                                                StateRadixCache]
                             if issubclass(mutant, v)), None)  # the same policy (or key mode, or second pool), correct
    fixed = repro.text.replace(f"from radixcheck.properties.cache.mutants import {mutant.__name__} as make",
                               f"from radixcheck.properties.cache.mutants import {policy_reference} as make" if policy_reference
                               else "from radixcheck.reference import RadixCache as make")
    assert fixed != repro.text
    code, printed = run_repro(fixed)
    assert code == 0 and "no bug" in printed, printed[-2000:]


def test_every_mutant_breaks_a_listed_obligation() -> None:
    """The catalogue's obligation table names every catalogued mutant, and only those."""
    from radixcheck.reports.catalogue import OBLIGATIONS

    listed = {m for *_, mutants in OBLIGATIONS for m in mutants if not m.startswith("(")}
    assert listed == {m.__name__ for m in MUTANTS}


class HangsOnEvict(RadixCache):
    """A cache whose evict never returns."""

    def evict(self, num_tokens: int) -> int:
        while True:  # computes for ever (the limit counts CPU time; a blocked call meets the wall-clock backstop)
            pass


def test_a_hang_is_reported_unshrunk(monkeypatch) -> None:
    """A hanging call is cut off by the per-operation limit and reported at once: not shrunk
    (each replay would cost the limit again), and later calls into the hung code are refused."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    with pytest.raises(Exception) as caught:
        run_machine(machine_for(HangsOnEvict, DEFAULT_CAPABILITIES, 1, "meta_hangs"), profiles.SETTINGS["ci"])
    assert oracle_of(caught.value).startswith("hang"), caught.value
    assert any("not shrunk" in note for note in caught.value.__notes__)


def test_a_machine_with_no_shrink_budget_reports_its_first_failure(monkeypatch) -> None:
    """The production-scale machine's default budget is 0 s (each shrink attempt rebuilds a world of
    10^4 calls): its first failure is the verdict, said unshrunk; a budget set by the user wins."""
    from radixcheck.properties.cache.scale_machine import ProductionScaleMachine
    from radixcheck.properties.findings.verdict import shrink_seconds

    monkeypatch.delenv(SHRINK_ENV, raising=False)
    assert shrink_seconds(ProductionScaleMachine) == 0
    machine = machine_for(SplitRefreshesSuffix, DEFAULT_CAPABILITIES, 1, "meta_no_shrink")
    machine.default_shrink_seconds = 0.0  # the small machine, for speed: what is tested is the budget
    with pytest.raises(LRUOrderViolation) as caught:
        run_machine(machine, profiles.SETTINGS["ci"])
    assert any(note.startswith("radixcheck: not shrunk (a shrink budget of 0 s") for note in caught.value.__notes__)
    monkeypatch.setenv(SHRINK_ENV, "15")
    assert shrink_seconds(ProductionScaleMachine) == 15


def test_a_failing_program_shows_every_call_it_sent(monkeypatch) -> None:
    """Issue 20's 'every call shown': each step's calls are comment lines above it, with their
    arguments and answers, and a recency message names the call that last used a page."""
    monkeypatch.setenv(SHRINK_ENV, "0.5")
    with pytest.raises(LRUOrderViolation) as caught:
        run_machine(machine_for_mutant(SplitRefreshesSuffix), profiles.SETTINGS["audit"])
    program = "\n".join(caught.value.__notes__)
    calls = [line for line in program.splitlines() if line.startswith("#   call ")]
    assert calls and all(" -> " in line for line in calls), program
    assert any(": evict(" in line for line in calls) and any(": insert(" in line for line in calls), program
    assert "last used by call " in str(caught.value) and "t=" not in str(caught.value), str(caught.value)


class FixedPoolReference(RadixCache):
    """A correct cache over a fixed pool of 512 pages (as vLLM's block pool): asked to hold more,
    it fails (vLLM would evict lazily, behind the suite's back)."""

    POOL_PAGES = 512
    capabilities = Capabilities(max_cached_pages=POOL_PAGES)

    def insert(self, tokens, values) -> int:  # noqa: ANN001 - the contract's types
        prefix_len = super().insert(tokens, values)
        assert self.total_size() <= self.POOL_PAGES * self.page_size, "pool overflow: the caller did not free memory first"
        return prefix_len


def test_a_declared_pool_is_never_overflowed() -> None:
    """max_cached_pages: the suite evicts before an insert could overflow the pool, so a correct
    cache with a small fixed pool passes; undeclared, the same cache overflows (so the capability
    is what keeps it from a false alarm)."""
    search = settings(find_only(), max_examples=VARIANT_EXAMPLES)
    run_machine(machine_for(FixedPoolReference, FixedPoolReference.capabilities, 1, "variant_FixedPoolReference"), search)
    with pytest.raises(AssertionError, match="pool overflow"):  # the whole search (a derandomized stream moves with the
        # modules imported: Hypothesis draws constants from them), stopping at the overflow
        run_machine(machine_for(FixedPoolReference, Capabilities(), 1, "variant_FixedPoolReference_undeclared"), find_only())
