"""Delta debugging (``leave_out_runs``, every contract's reduction) leaves out items that only go
together: a tier request's ``w.serve`` and its ``w.finish(-1)``. Halving from an odd size skipped
runs of 2 (7, 3, 1), and windows of 3 cut pairs apart, so a tier flush finding stopped at 6 such
pairs (13 of 121 operations); with runs of 2 tried from every place it reaches the one pair the
finding needs."""

from __future__ import annotations

import pytest

from radixcheck.properties.findings.reduce import leave_out_runs


def _well_formed(items: list[str]) -> bool:
    """Each serve is followed by a finish, and each finish follows a serve (``w.finish(-1)``: any one)."""
    open_ = False
    for item in items:
        if item.startswith("serve"):
            if open_:
                return False
            open_ = True
        elif item.startswith("finish"):
            if not open_:
                return False
            open_ = False
    return not open_


@pytest.mark.parametrize("pairs", [6, 7, 13, 60])
@pytest.mark.parametrize("lead", [0, 1])
def test_pairs_that_only_go_together_are_left_out_together(pairs: int, lead: int) -> None:
    """The finding needs pair 2 and the last item; a lone item first (``lead``) shifts every pair."""
    program = ["complete"] * lead + [f"{kind} {k}" for k in range(pairs) for kind in ("serve", "finish")] + ["reset"]
    replays = 0

    def fails(candidate: list[str]) -> list[str] | None:
        nonlocal replays
        replays += 1
        return candidate if _well_formed(candidate) and {"serve 2", "reset"} <= set(candidate) else None

    best = leave_out_runs(program, lambda items: items, fails, lambda: True)
    assert len(best) == 3 and best[0] == "serve 2" and best[1].startswith("finish") and best[2] == "reset", best
    assert replays <= 4 * len(program)  # about as many replays as halving took, and a few per item
