"""Oracles 4t and 4h, the amount — ``evict(n)`` and ``evict_host(n)`` on a tier free what was asked, no less and no more.

The plain machine's amount rule (:mod:`radixcheck.oracles.amount`) on each tier, counting as the
tier contract says:

* ``evict(n)`` *counts* the device tokens it frees during the call and, under ``write_back``, the
  tokens of each device leaf whose write-back it starts, with the pages above it the same write
  takes off the device (a node of several pages; its slots are freed at the write's completion,
  by nobody's count; a page whose write-back the call counted and then freed is counted once).
  ``evict_host(n)`` counts the host tokens it frees.
* At least ``n``, unless no candidate is left when the call returns: no unlocked device leaf
  without a transfer on it or below it (oracle 4t's candidates), no unlocked host-only leaf
  (oracle 4h's).
* No more than it needed: the call takes leaf after leaf, so once its count reaches ``n`` it
  stops. Each ``free()`` call and each write-back start is one step; a step taken when the steps
  before it had already counted ``n`` was not needed (a ``<=`` for a ``<``, a cap that ignores
  ``n``). Pages one step takes together (a node of several pages, a leaf and its parent freed in
  one call) are one step, so the page, or the node, that reached ``n`` may go past it.

Naive and incremental: a step costs what it frees, and the end of the call asks the model's
leaf orders for their first candidate (what oracles 4t and 4h already keep), never the tree.
A finding is kept during the call and raised once it returns (as the order oracles do).
"""

from __future__ import annotations

from typing import Any

from radixcheck.oracles.tier_order import left_behind
from radixcheck.oracles.violations import EvictionAmountViolation, HostEvictionAmountViolation


class TierAmount:
    """The steps of one ``evict`` (``tier="device"``) or ``evict_host`` (``tier="host"``) call."""

    def __init__(self, tier: str, num_tokens: int) -> None:
        self.tier, self.num_tokens = tier, num_tokens
        self.counted = 0  # tokens the steps so far count
        self.steps = 0
        self.started = 0  # of them, tokens whose write-back started (device, write_back)
        self.written: set[int] = set()  # serials of the pages whose write-back a step counted
        self.kept_going: str | None = None  # the first step taken after the count reached n

    @property
    def call(self) -> str:
        return f"{'evict' if self.tier == 'device' else 'evict_host'}({self.num_tokens})"

    def step(self, tokens: int, what: str) -> None:
        """One ``free()`` call, or one write-back start, that counts ``tokens`` (``what`` says which)."""
        if tokens <= 0:
            return
        if self.kept_going is None and self.counted >= self.num_tokens:
            self.kept_going = (f"{self.call} kept going: its first {self.steps} steps had counted {self.counted} "
                               f"tokens, then it {what} ({tokens} tokens more)")
        self.counted += tokens
        self.steps += 1

    def write_back(self, pages: list[Any], page_size: int) -> None:
        """A write-back start of the device leaves ``pages`` (counted once, here)."""
        fresh = [pg for pg in pages if pg.serial not in self.written]
        self.written.update(pg.serial for pg in fresh)
        self.started += len(fresh) * page_size
        self.step(len(fresh) * page_size, f"started the write-back of {fresh[0] if fresh else ''}")

    def check(self, left: Any | None) -> None:
        """At the call's end: ``left`` is a candidate it left (None: none is left)."""
        violation = EvictionAmountViolation if self.tier == "device" else HostEvictionAmountViolation
        if self.kept_going is not None:
            raise violation(f"{self.kept_going}: once {self.num_tokens} were counted it must stop")
        if self.counted < self.num_tokens and left is not None:
            how = f"freed {self.counted - self.started} tokens"
            if self.started:
                how += f" and started the write-back of {self.started}"
            leaf = "unlocked device leaf" if self.tier == "device" else "unlocked host-only leaf"
            raise violation(f"{self.call} {how}, fewer than {self.num_tokens}, and stopped while the {leaf} {left} stayed"
                            f"{left_behind(left)}")
