"""The report card's "Layers driven together" section: which declared layers the run's machines met in one step.

"Not exercised, by capability" lists what a target does not offer; a layer pair it offers and the
machines never met in one step (the tier lifecycle's running requests, never under a tenant's
namespace: reports/findings/layers_trial.md) is a gap no verdict shows. Each conformance test
carries its tally (:mod:`radixcheck.properties.layer_tally`) on its report; this sums them per
contract (the test, at every page size) and in all, and says plainly every declared layer and pair
that no step drove.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any, Protocol

from tabulate import tabulate

from radixcheck.properties.layer_tally import layers_of, pair_name

__all__ = ["LayersDriven", "layers_driven", "layers_section", "gaps_line"]


class _Tallied(Protocol):  # a Verdict: its test id, and its tally
    test: str
    layers: dict[str, int]


def _contract(test: str) -> str:
    """A test id without its parameters: ``test_tier_state_machine[page_size=2]`` -> ``test_tier_state_machine``."""
    return test.partition("[")[0]


ALL_AT_ONCE = "every declared layer at once"


class LayersDriven:
    """The run's tallies summed, for the declared layers: steps per layer, per pair (and, with three or
    more, with every one at once), by contract and in all."""

    def __init__(self, declared: Sequence[str], verdicts: Iterable[_Tallied]) -> None:
        self.declared = list(declared)
        self.pairs = [pair_name(a, b) for a, b in combinations(self.declared, 2)]
        rows = {layer: frozenset({layer}) for layer in self.declared}
        rows |= {pair_name(a, b): frozenset({a, b}) for a, b in combinations(self.declared, 2)}
        if len(self.declared) > 2:
            rows[ALL_AT_ONCE] = frozenset(self.declared)
        self.rows = list(rows)
        self.by_contract: dict[str, Counter[str]] = {}
        self.sets: Counter[str] = Counter()  # steps per exact set of layers touched (the tallies as carried)
        for verdict in verdicts:
            if verdict.layers:
                self.sets.update(verdict.layers)
                counts = self.by_contract.setdefault(_contract(verdict.test), Counter())
                for name, steps in verdict.layers.items():  # a step counts under every row its layers cover
                    touched = layers_of(name)
                    counts.update({row: steps for row, needs in rows.items() if needs <= touched})
        self.total: Counter[str] = sum(self.by_contract.values(), Counter())

    @property
    def never_driven(self) -> list[str]:
        """Declared layers no step touched."""
        return [layer for layer in self.declared if not self.total[layer]]

    @property
    def never_together(self) -> list[str]:
        """Declared pairs no step touched both of."""
        return [pair for pair in self.pairs if not self.total[pair]]

    @property
    def never_all_at_once(self) -> bool:
        """Three or more layers declared, and no step touched them all."""
        return ALL_AT_ONCE in self.rows and not self.total[ALL_AT_ONCE]

    def as_json(self) -> dict[str, Any]:
        rows = self.rows
        return {"declared": self.declared, "steps": {row: self.total[row] for row in rows},
                "never_driven": self.never_driven, "never_driven_together": self.never_together,
                "never_all_at_once": self.never_all_at_once, "sets": dict(sorted(self.sets.items())),
                "by_contract": {name: {row: counts[row] for row in rows} for name, counts in sorted(self.by_contract.items())}}


def layers_driven(declared: Sequence[str], verdicts: Iterable[_Tallied]) -> LayersDriven:
    return LayersDriven(declared, verdicts)


def gaps_line(driven: LayersDriven) -> str:
    """What was declared and never driven, in one sentence ("" if nothing was left)."""
    said = []
    if driven.never_driven:
        said.append("declared, never driven: " + ", ".join(driven.never_driven))
    if driven.never_together:
        said.append("declared, never driven together: " + "; ".join(driven.never_together))
    if driven.never_all_at_once:
        said.append(f"never all {len(driven.declared)} declared layers in one step")
    sentence = "; ".join(said)
    return f"{sentence[0].upper()}{sentence[1:]}." if said else ""


def layers_section(driven: LayersDriven, failed: bool = False) -> list[str]:
    """The card's lines (none for a target that declares no layer)."""
    if not driven.declared:
        return []
    contracts = sorted(driven.by_contract)
    shown = contracts if len(contracts) > 1 else []
    rows = [[row, driven.total[row], *(driven.by_contract[c][row] for c in shown)] for row in driven.rows]
    lines = ["Layers driven together (state-machine steps that touched each declared layer, and both layers of each pair, "
             "in one step; the tier production world is no state machine and is not counted):", "",
             tabulate(rows, headers=["layers", "steps", *(f"`{c}`" for c in shown)], tablefmt="github"), ""]
    gaps = gaps_line(driven)
    if gaps:
        lines.append(f"**{gaps}**" + (" A failing test stops its machine at its first failure: a pair may be met once "
                                       "it is fixed." if failed else ""))
    elif len(driven.declared) == 1:
        lines.append("One layer declared: no pair to drive together.")
    else:
        lines.append("Every declared pair was driven together in at least one step.")
    return [*lines, ""]
