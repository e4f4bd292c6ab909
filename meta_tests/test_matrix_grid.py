"""MATRIX.md opens with a grid a reader takes in at a glance: engine (or kit) x property family,
the worst verdict of each, linked to its details; and it says which radixcheck rendered it."""

from __future__ import annotations

from radixcheck.reports import matrix

META = {"command": "x", "xdist": [], "profile": "audit", "wall_seconds": 1, "machine": "2 cores"}

def _grid_line(card: str, label: str) -> str:
    return next(line for line in card.splitlines() if line.startswith(f"| [{label}"))

def test_a_failing_engine_row_shows_its_worst_verdict_per_family() -> None:
    rows = [{"name": "vllm.vllm_prefix", "spec": "m:f", "seconds": 1.0, "tests": {
        "test_cache_state_machine[page_size=1]": {"outcome": "passed"},
        "test_cache_state_machine[page_size=4]": {"outcome": "failed", "oracle": "4 LRU order", "reason": "r"},
        "test_cache_at_production_scale[page_size=1]": {"outcome": "waived", "waived": []},
        "test_reset_empties_the_cache[page_size=1]": {"outcome": "skipped"},
        "test_no_order_beats_dfs[page_size=1]": {"outcome": "passed"}}}]
    card = matrix.render(rows, META)
    assert card.index("## At a glance") < card.index("## Summary")  # the grid first, details after
    header = next(line for line in card.splitlines() if line.startswith("| rows |"))
    assert header == "| rows | state machine | production scale | construction | scheduling (DFS) | findings |"
    assert _grid_line(card, "vLLM") == ("| [vLLM 0.34.0 (PyPI, --no-deps, CPU torch): vllm (1)](#vllm) "
                                        "| **FAIL** 1/2 | waived 1/1 | skip | pass | [vllm.md](findings/vllm.md) |")
    assert '<a id="vllm"></a>' in card  # the link's target, whatever the heading's wording

def test_a_correct_row_passes_and_mutants_are_kept_apart() -> None:
    rows = [{"name": "reference", "spec": "m:f", "seconds": 1.0, "tests": {"test_cache_state_machine[page_size=1]": {"outcome": "passed"}}},
            {"name": "evicts-locked-leaf", "spec": "m:g", "seconds": 1.0,
             "tests": {"test_cache_state_machine[page_size=1]": {"outcome": "failed", "reason": "r"}}}]
    card = matrix.render(rows, META)
    assert _grid_line(card, "kit: reference") == ("| [kit: reference and correct variants (1)](#kit) | pass "
                                                  "| [BUG_CATALOGUE.md](BUG_CATALOGUE.md) |")
    assert _grid_line(card, "kit: mutants").startswith("| [kit: mutants (1, each must FAIL)](#kit) | **FAIL** 1/1 |")

def test_the_rendering_radixcheck_is_recorded_even_when_the_runs_were_not() -> None:
    card = matrix.render([], META)
    assert card.splitlines()[2].startswith("Rendered by radixcheck ")
    assert "1 runs (1 of them by an older radixcheck, which recorded no version)" in card
