"""Oracles 3s and 20-23 — a sliding-window second pool (the contract's "A second pool").

The model keeps, per cached token, its window value: a window slot while it is live, nothing
once tombstoned. A token is named by its KV slot id (unique while it is cached), so the model
needs nothing of the tree but the KV slots the prefix-set model (oracle 1) already gives it:

* ``of_kv`` maps a cached token's KV slot to its live window slot, ``kv_of`` the other way;
* ``pins`` counts the locks that pin each token's window value;
* ``unpinned`` counts the live window values no lock pins (what a window eviction may take).

Every method costs what it reads or changes. What is judged:

* 3s conservation: the window slots in use are exactly the live ones the cache holds plus those
  callers hold; every free is of a slot the cache held live, once (:func:`check_second_frees`);
* 20 a window value a match returns is the one inserted there and still live;
* 21 and 23 a match's length (:meth:`WindowModel.resumable`): the longest page-aligned ``L`` whose
  last ``min(W, L)`` tokens are live; shorter because of a tombstone before that is oracle 21;
* 22 a value a lock pins is never freed, nor its page evicted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from itertools import repeat

from radixcheck.oracles.violations import Check, PinViolation, SecondSlotViolation

NONE = -1


class WindowModel:
    """The window values of the cached tokens, named by their KV slots."""

    noun = "window slot"  # what a freed value is called in a violation

    def __init__(self, window: int, page_size: int) -> None:
        self.window = window
        self.page_size = page_size
        self.of_kv: dict[int, int] = {}
        self.kv_of: dict[int, int] = {}
        self.pins: Counter[int] = Counter()
        self.unpinned = 0

    def live(self, kv: int) -> bool:
        return kv in self.of_kv

    def windows(self, kv_slots: Iterable[int]) -> list[int]:
        """The window value of each token (``-1`` where it has none)."""
        return list(map(self.of_kv.get, kv_slots, repeat(NONE)))  # a 3,000-token match is judged 3,000 times

    def resumable(self, kv_slots: Sequence[int]) -> int:
        """The longest page-aligned ``L <= len(kv_slots)`` whose last ``min(W, L)`` tokens are live.

        Read from the end: try the longest ``L``; if a token ``i`` in its last window is dead, no
        ``L`` above ``i`` can do (each has ``i`` in its window), so try the page boundary at or
        below ``i``. Each token is read at most once, and a live end costs ``W`` reads (a path
        3,000 pages deep is matched in the time of its window, not its length)."""
        end = len(kv_slots) // self.page_size * self.page_size
        while end > 0:
            dead = next((i for i in range(end - 1, max(0, end - self.window) - 1, -1) if kv_slots[i] not in self.of_kv), None)
            if dead is None:
                return end
            end = dead // self.page_size * self.page_size
        return 0

    def span(self, kv_slots: Sequence[int]) -> list[int]:
        """The KV slots of the pages that hold the last ``min(W, L)`` tokens (what a lock pins)."""
        length = len(kv_slots)
        start = (length - min(self.window, length)) // self.page_size * self.page_size
        return list(kv_slots[start:])

    def cache(self, kv_slots: Iterable[int], window_slots: Iterable[int]) -> None:
        """Newly cached tokens and their window values (``-1``: none)."""
        for kv, slot in zip(kv_slots, window_slots, strict=True):
            if slot != NONE:
                self.of_kv[kv], self.kv_of[slot] = slot, kv
                self.unpinned += self.pins[kv] == 0

    def pin(self, kv_slots: Iterable[int]) -> None:
        for kv in kv_slots:
            self.unpinned -= self.pins[kv] == 0 and kv in self.of_kv
            self.pins[kv] += 1

    def unpin(self, kv_slots: Iterable[int]) -> None:
        for kv in kv_slots:
            self.pins[kv] -= 1
            self.unpinned += self.pins[kv] == 0 and kv in self.of_kv
            if not self.pins[kv]:
                del self.pins[kv]

    def _drop(self, kv: int) -> int:
        slot = self.of_kv.pop(kv)
        del self.kv_of[slot]
        self.unpinned -= self.pins[kv] == 0
        return slot

    def drop_with_kv(self, kv_slots: Iterable[int]) -> set[int]:
        """Tokens whose KV was freed: their live window slots must be freed with it."""
        return {self._drop(kv) for kv in kv_slots if kv in self.of_kv}

    def tombstone(self, window_slots: Iterable[int], what: str) -> None:
        """``what`` freed these window slots while their KV stays cached: each must be a live value
        of the cache that no lock pins."""
        for slot in window_slots:
            kv = self.kv_of.get(slot)
            if kv is None:
                raise SecondSlotViolation(f"{what} freed {self.noun} {slot}, which the cache did not hold live",
                                          Check("slot not in second_freed", "sorted(second_freed)", {"slot": slot}))
            if self.pins[kv]:
                raise PinViolation(f"{what} freed {self.noun} {slot} (of the token in KV slot {kv}) while {self.pins[kv]} "
                                   f"lock(s) pin it", Check("slot not in second_freed", "sorted(second_freed)", {"slot": slot}))
            self._drop(kv)

    def pinned_in(self, kv_slots: Iterable[int]) -> list[int]:
        return [kv for kv in kv_slots if self.pins[kv]]

    def reset(self) -> set[int]:
        freed = set(self.kv_of)
        self.of_kv.clear()
        self.kv_of.clear()
        self.pins.clear()
        self.unpinned = 0
        return freed

    def held(self) -> int:
        return len(self.kv_of)


class StateModel(WindowModel):
    """A state pool (a Mamba checkpoint per cached request end): the state after a prefix is
    filed under the KV slot of the prefix's last token. A match ends at the deepest live state of
    the cached path; a lock pins the state it ends at."""

    noun = "state"

    def __init__(self, page_size: int) -> None:
        super().__init__(1, page_size)

    def resumable(self, kv_slots: Sequence[int]) -> int:
        """The longest prefix of ``kv_slots`` that ends at a live state (0: none)."""
        return next((i for i in range(len(kv_slots), 0, -1) if kv_slots[i - 1] in self.of_kv), 0)

    def span(self, kv_slots: Sequence[int]) -> list[int]:
        return list(kv_slots[-1:])


def check_second_frees(freed_now: list[int], expected: set[int], what: str) -> None:
    """A call freed exactly ``expected`` of the second pool, each once."""
    check = Check("sorted(second_freed) == expected", "sorted(second_freed)", {"expected": sorted(expected)})
    if len(freed_now) != len(set(freed_now)):
        raise SecondSlotViolation(f"{what} freed a second-pool slot twice: {freed_now[:16]}", check)
    if set(freed_now) != expected:
        extra, kept = sorted(set(freed_now) - expected), sorted(expected - set(freed_now))
        raise SecondSlotViolation(f"{what} should free second-pool slots {sorted(expected)[:8]} but freed {sorted(freed_now)[:8]}"
                                  + (f" (not to be freed: {extra[:8]})" if extra else "") + (f" (kept: {kept[:8]})" if kept else ""),
                                  check)


def check_second_count(in_use: Collection[int], held: int, callers: Collection[int], violations: list[str]) -> None:
    """Between steps: the second pool's slots in use are those the cache holds live plus the callers'."""
    if violations:
        raise SecondSlotViolation(f"the second pool's allocator refused a free: {violations[0]}",
                                  Check("not second_allocator.violations", "second_allocator.violations[:1]"))
    if len(in_use) != held + len(callers):
        raise SecondSlotViolation(f"{len(in_use)} second-pool slots in use; the cache holds {held} live and callers {len(callers)}",
                                  Check("len(second_allocator.in_use) == expected", "len(second_allocator.in_use)",
                                        {"expected": held + len(callers)}))
