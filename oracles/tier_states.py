"""Oracle 20 on the tiers — a state pool's values through a host tier (the tier contract's
"A second pool on the tiers").

Naive on purpose: the suite makes each state value from the prefix it ends (the KV the suite
wrote for that prefix's last token, under its namespace), so a page's value is known without
asking the cache, and differs from its parent's and from another tenant's. The oracle records,
per cached page of the tier model, the value the suite inserted at that page's end; a page the
model drops and caches again is a new page, with no state. When a request's forward reads its
prefix (its loads completed), the values ``states(handle)`` reports must equal those recorded,
page by page.

A cache that declares ``state_load_back="target"`` (the tier contract's "A load-back that restores
only its target's state") restores on a load-back the state of the path's last page only: the
oracle then keeps the device pages whose state is on host only (*parked*), and a match's device
part ends at the deepest page not parked (:meth:`TierStates.match_ends`, which the tier model asks
as it asks a window's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from radixcheck.oracles.violations import SecondValueViolation, shown

NONE = -1
STATE_MODULUS = 1_000_000_007  # keeps the values short enough to read in a message


def state_value(kv_of_last_token: int) -> int:
    """The state value the suite inserts after a prefix whose last token's KV is ``kv_of_last_token``."""
    return int(kv_of_last_token) % STATE_MODULUS


class TierStates:
    """The state value the suite inserted at each cached page's end (pages of a
    :class:`~radixcheck.oracles.tier_model.TierModel`, by identity)."""

    def __init__(self, page_size: int = 1, target_only: bool = False) -> None:
        self.inserted: dict[Any, int] = {}  # a tier model's Page -> the state value inserted at its end
        self.owner: dict[int, Any] = {}  # a state value -> the page it was inserted at (to name a misplaced one)
        self.page_size = page_size
        self.target_only = target_only  # state_load_back="target": a load-back restores its last page's state only
        self.parked: set[Any] = set()  # pages a load-back put on device with their state left on host

    def on_insert(self, last_page: Any, value: int) -> None:
        """An insert that ends at ``last_page`` (page-aligned, non-empty) carried state ``value``."""
        if last_page not in self.inserted:
            self.inserted[last_page] = value
            self.owner[value] = last_page

    def on_load_back(self, loaded: Sequence[Any], target: Any) -> None:
        """A load-back moved the KV of ``loaded`` to device and ended at ``target`` (None: it stopped
        short of the path it was asked for, so no state came back)."""
        if not self.target_only:
            return
        self.parked.update(loaded)
        self.parked.discard(target)

    def on_cover(self, pages: Sequence[Any]) -> None:
        """An insert covered ``pages``: its caller brings the state after each, on device."""
        self.parked.difference_update(pages)

    def match_ends(self, path: Sequence[Any], device: int, reach: int, answer: Any = None) -> tuple[int, int]:
        """Where a match of ``path`` ends, given the full KV's ends (``device`` tokens on device, ``reach``
        with the host part): the device part at the deepest device page whose state is on device (a
        parked page's is on host), the host part unchanged (a parked page's host copy has its state).
        ``answer`` (the cache's two ends) settles nothing here: the rule has no maybes."""
        end = device // self.page_size
        while end and path[end - 1] in self.parked:
            end -= 1
        return end * self.page_size, reach

    def check(self, what: str, tokens: Sequence[int], pages: Sequence[Any], reported: Any) -> None:
        """``reported`` (the cache's ``states(handle)``) for the path ``pages`` of ``tokens``."""
        try:
            got = [int(v) for v in reported]
        except (TypeError, ValueError) as exc:
            raise SecondValueViolation(f"states() of {what} returned {reported!r}, not a sequence of ints") from exc
        want = [self.inserted.get(page, NONE) for page in pages]
        if got == want:
            return
        if len(got) != len(want):
            raise SecondValueViolation(f"states() of {what} returned {len(got)} values for a path of {len(want)} pages "
                                       f"({shown(tokens)})")
        i = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
        page = pages[i]
        parent = self.inserted.get(page.parent, NONE) if page.parent is not None else NONE
        whose = " (its parent's)" if got[i] == parent != NONE else ""
        owner = self.owner.get(got[i])
        if not whose and owner is not None and owner is not page:  # another tenant's, or an earlier page's
            tenant = "another tenant's" if owner.namespace != page.namespace else "another page's"
            whose = f" ({tenant}: the state inserted at {owner})"
        had = f"the state {want[i]} inserted there" if want[i] != NONE else "none (no insert ended there)"
        raise SecondValueViolation(f"states() of {what}: {page} reports state {got[i]}{whose}, but it has {had}")
