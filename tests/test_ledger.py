"""The ledger (reports/): the seed's numbers, byte-stable committed tables, scale invariance.

These tests exercise the reference cache through the benchmark; they do not take a target.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

from radixcheck.reports import ledger as L
from radixcheck.reports.declare_one import declare_one
from radixcheck.reports.hit_rates import cached_per_request, hit_rate
from radixcheck.reports.scheduling import LEDGER_FACTOR, bounded, online_lpm, prefix_dependencies
from radixcheck.reports.workloads import Segments, paper_workloads, seed_workloads

REPORTS = Path(L.__file__).resolve().parent

# The seed's ledger (RADIXATTENTION-RESULTS), as printed.
SEED_HIT = {
    "few-shot": ("88.2 %", "8.50×"),
    "multi-turn chat": ("79.5 %", "4.89×"),
    "tree-of-thought": ("77.2 %", "4.40×"),
    "agents": ("86.7 %", "7.50×"),
}
SEED_DECLARE = {
    "few-shot": ("88.2 %", "1.00×"),
    "multi-turn chat": ("31.8 %", "2.50×"),
    "tree-of-thought": ("55.0 %", "1.40×"),
    "agents": ("58.4 %", "1.48×"),
}


pytestmark = pytest.mark.xdist_group("ledger")  # one worker builds the ledger once


@pytest.fixture(scope="session")  # session: built once per worker, however xdist interleaves modules
def ledger() -> L.Ledger:
    return L.build(1, 0)


def test_seed_hit_rates_and_token_speedups(ledger: L.Ledger) -> None:
    got = {row[0]: (row[6], row[7]) for row in L.hit_rate_rows(ledger)}
    assert {k: got[k] for k in SEED_HIT} == SEED_HIT


def test_seed_scheduling_table(ledger: L.Ledger) -> None:
    rows = {row[0]: row for row in L.scheduling_rows(ledger)}
    assert rows["agents"][1:6] == [408, "62.1 %", "72 %", "86.7 %", "100 %"]
    for name in ("few-shot", "multi-turn chat", "tree-of-thought"):
        assert rows[name][-1].startswith("no"), f"{name} should be order-insensitive"
        assert rows[name][2] == rows[name][4] and rows[name][3] == rows[name][5] == "100 %"


def test_seed_declare_one_table(ledger: L.Ledger) -> None:
    got = {row[0]: (row[3], row[6]) for row in L.declare_rows(ledger)}
    assert {k: got[k] for k in SEED_DECLARE} == SEED_DECLARE


def test_committed_token_tables_equal_a_fresh_regeneration(ledger: L.Ledger) -> None:
    committed = (REPORTS / "LEDGER.md").read_text(encoding="utf-8")
    assert committed == L.markdown(ledger).rstrip("\n") + "\n", "reports/LEDGER.md is stale: run `python -m radixcheck.reports --no-live`"
    data = json.loads((REPORTS / "artifacts" / "ledger.json").read_text(encoding="utf-8"))
    assert data == json.loads(json.dumps(L.to_json(ledger))), "reports/artifacts/ledger.json is stale"


def _fractions(scale: int, seed: int = 0) -> list[tuple[str, Fraction, Fraction, dict[str, Fraction]]]:
    out = []
    for w in seed_workloads(scale, seed) + paper_workloads(scale, seed):
        h = hit_rate(w)
        d = declare_one(w, h)
        b = bounded(w, h, LEDGER_FACTOR)
        out.append(
            (
                w.name,
                Fraction(h.cached_tokens, h.prompt_tokens),
                Fraction(d.reused_tokens, d.prompt_tokens),
                {p: Fraction(c, b.prompt_tokens) for p, c in b.cached.items()},
            )
        )
    return out


@pytest.mark.deep  # builds the ledger at two scales
def test_hit_rates_are_invariant_under_scale() -> None:
    assert _fractions(2) == _fractions(1)


def test_hit_rates_do_not_depend_on_the_token_seed() -> None:
    for a, b in zip(seed_workloads(1, 0), seed_workloads(1, 7), strict=True):
        assert a.requests != b.requests
        assert sum(cached_per_request(a.requests)) == sum(cached_per_request(b.requests))


def test_segments_never_share_a_first_token() -> None:
    seg = Segments(3, vocab=50)
    firsts = [seg(4)[0] for _ in range(50)]
    assert sorted(firsts) == list(range(50))
    with pytest.raises(ValueError):
        seg(4)


def test_online_lpm_with_a_queue_of_one_is_fcfs() -> None:
    for w in seed_workloads():
        budget = w.max_len + w.max_len // 2
        cached, order = online_lpm(w.requests, budget, 1)
        assert order == list(range(len(w.requests)))
        assert cached == sum(cached_per_request(w.requests, budget))


def test_online_lpm_never_serves_a_turn_before_its_prefix() -> None:
    w = seed_workloads()[3]  # agents: turn t+1 extends turn t
    deps = prefix_dependencies(w.requests)
    _, order = online_lpm(w.requests, w.max_len, 16)
    position = {r: k for k, r in enumerate(order)}
    assert all(position[d] < position[i] for i in range(len(order)) for d in deps[i])


# ---- the live arm ----------------------------------------------------------------------------


def test_live_arm_is_bit_identical_and_computes_what_the_ledger_counts(ledger: L.Ledger) -> None:
    from radixcheck.model import load_default
    from radixcheck.reports.live import run_workload

    w = seed_workloads()[1]  # multi-turn chat: the smallest (1408 prompt tokens)
    res = run_workload(load_default(), w, reps=1)
    assert res.bit_identical, res.mismatches
    assert res.logits_compared == res.computed_tokens
    assert res.computed_tokens == next(h.computed_tokens for h in ledger.hit_rates if h.workload == w.name)


def test_live_arm_refuses_a_speedup_without_bit_identity() -> None:
    from radixcheck.reports.live import LiveResult, NotBitIdentical, table_rows

    r = LiveResult("x", 2, 20, 10, [1.0], [0.5], mismatches=["request 1: max|Δ| 1e-7"], logits_compared=10)
    with pytest.raises(NotBitIdentical):
        _ = r.live_speedup
    assert table_rows([r])[0][7] == "REFUSED"


@pytest.mark.parametrize("name", ["LIVE-synthetic.md"])
def test_timing_tables_are_labelled_noisy_and_carry_the_machine(name: str) -> None:
    text = (REPORTS / name).read_text(encoding="utf-8")
    assert "NOISY" in text and "cores" in text and "NumPy" in text and "load average" in text


def test_live_arm_reports_each_repetitions_ratio() -> None:
    """The table shows every repetition's live ÷ token next to the best-of figure (the run's spread)."""
    from radixcheck.reports.live import HEADERS, LiveResult, table_rows

    r = LiveResult("x", 2, 20, 10, [4.0, 3.0], [2.0, 1.0], logits_compared=10)  # token speedup 2
    row = dict(zip(HEADERS, table_rows([r])[0], strict=True))
    assert row["live ÷ token"] == "1.50"  # best of each arm: 3.0 / 1.0 / 2
    assert row["live ÷ token per repetition"] == "1.00 / 1.50"


def test_live_arm_reports_the_ratio_by_cpu_time_beside_the_wall_clocks() -> None:
    """A shared box stretches one arm's wall clock while this process waits; its CPU time is the second reading."""
    from radixcheck.reports.live import HEADERS, LiveResult, table_rows, to_json

    r = LiveResult("x", 2, 20, 10, [4.0, 3.0], [2.0, 1.0], logits_compared=10, baseline_cpu_s=[3.0, 2.8], radix_cpu_s=[1.6, 1.4])
    row = dict(zip(HEADERS, table_rows([r])[0], strict=True))
    assert row["live ÷ token (CPU time)"] == "1.00"  # 2.8 / 1.4 / 2
    assert to_json([r], {}, {})["workloads"][0]["live_over_token_cpu"] == 1.0
    older = LiveResult("x", 2, 20, 10, [4.0], [2.0], logits_compared=10)  # a result saved before CPU times
    assert dict(zip(HEADERS, table_rows([older])[0], strict=True))["live ÷ token (CPU time)"] == "—"
