"""The live arm's bound (model/live_bound.py): the cost model's fit and the ratio it implies."""

from __future__ import annotations

import pytest

from radixcheck.model import live_bound

HL = 9 * 30  # SmolLM2: 9 query heads, 30 layers


def test_fit_recovers_the_cost_it_was_given() -> None:
    cost = live_bound.Cost(2.4e-3, 2.23e-3, 10.5e-9)
    shapes = [(16, 0), (16, 256), (24, 128), (32, 64), (272, 0), (152, 0)]
    times = {(t, c): cost.a + cost.m * t + cost.p * live_bound.pairs(t, c, HL) for t, c in shapes}
    got = live_bound.fit(times, HL)
    assert got.a == pytest.approx(cost.a, rel=1e-6) and got.m == pytest.approx(cost.m, rel=1e-6)
    assert got.p == pytest.approx(cost.p, rel=1e-6)


def test_the_ratio_is_one_without_a_and_p_and_below_one_with_attention() -> None:
    """Free requests and attention: live ÷ token is exactly the token speedup's; with attention a suffix's
    tokens see more keys than the average prompt token, so the ratio falls below 1 (few-shot's shape)."""
    few_shot = [(272, 0)] + [(272, 256)] * 15
    assert live_bound.ratio(few_shot, live_bound.Cost(0.0, 2.2e-3, 0.0), HL) == pytest.approx(1.0, rel=1e-12)
    with_attention = live_bound.ratio(few_shot, live_bound.Cost(0.0, 2.234e-3, 10.45e-9), HL)
    assert 0.93 < with_attention < 0.95  # the fourteenth round's 0.939
    per_token = [sum(live_bound.pairs(n - c, c, 1) for n, c in few_shot) / sum(n - c for n, c in few_shot),
                 sum(live_bound.pairs(n, 0, 1) for n, _ in few_shot) / sum(n for n, _ in few_shot)]
    assert per_token == pytest.approx([196.5, 136.5], abs=0.05)


def test_p_for_reaches_the_target_and_says_zero_when_nothing_can() -> None:
    few_shot = [(272, 0)] + [(272, 256)] * 15
    cost = live_bound.Cost(0.0, 2.234e-3, 10.45e-9)
    p = live_bound.p_for(few_shot, cost, 0.97, HL)
    assert 0 < p < cost.p
    assert live_bound.ratio(few_shot, live_bound.Cost(0.0, cost.m, p), HL) == pytest.approx(0.97, abs=1e-9)
    assert live_bound.p_for(few_shot, live_bound.Cost(0.5, cost.m, cost.p), 0.97, HL) == 0.0  # a alone sinks it


@pytest.mark.parametrize("call", [lambda: live_bound.fit({(1, 0): 1.0, (2, 0): 2.0}, HL),
                                  lambda: live_bound.ratio([(16, 16)], live_bound.Cost(0, 1, 0), HL)])
def test_bad_input_is_refused_with_a_clear_message(call) -> None:
    with pytest.raises(ValueError, match="fit needs at least 3 shapes|no computed tokens"):
        call()
