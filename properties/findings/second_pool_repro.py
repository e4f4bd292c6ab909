"""A repro file's second pool: the window slots or states of a hybrid finding (the contract's
"A second pool"), written beside the KV slots by :mod:`radixcheck.properties.findings.repro`.

The file owns a :class:`~radixcheck.properties.cache.contract.SecondPoolAllocator` named
``second_allocator`` (the name the hybrid oracles' checks use) and gives it to the factory as the
machine did (``second_allocator=``). Every value the caller brings is taken by id (``take``), as
its KV slots are, so nothing depends on the pool's order; every slot the caller frees of its own
is freed as the machine freed it (recorded as it ran: which ones follow from the model, e.g.
whether the prefix already had a live state, so the file does not work them out again).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixcheck.oracles.second_pool import NONE
from radixcheck.properties.cache.hybrid import StateMachine, WindowMachine
from radixcheck.properties.cache.machine import SentCall

POOL_NAME = "second_allocator"
KEYWORDS = ("window", "state")  # what an insert brings the second pool's values by


@dataclass(frozen=True)
class SecondPool:
    """What a repro file writes for one kind of second pool; ``keyword`` is the insert's keyword
    and the name the file gives a match's third answer."""

    keyword: str
    noun: str

    @staticmethod
    def of(machine: Any) -> SecondPool | None:
        """The second pool of a hybrid machine; ``None`` for one pool."""
        if not isinstance(machine, WindowMachine):
            return None
        return SecondPool("state", "states") if isinstance(machine, StateMachine) else SecondPool("window", "window slots")

    def setup(self, churned: bool, name: str = POOL_NAME) -> str:
        return f"{name} = SecondPoolAllocator(POOL, churned={churned})  # the second pool ({self.noun}), the caller's as its KV slots"

    def brought(self, value: Any, owned: int, ints: Callable[[list[int]], str], pool: str = POOL_NAME) -> str:
        """An insert's second-pool value as source: the first ``owned`` entries of a window are the
        tree's (written out), the rest the request's, taken fresh from ``pool`` (``-1``: slid out)."""
        if self.keyword == "state":
            return "-1" if int(value) == NONE else f"int({pool}.take([{int(value)}])[0])"
        window = np.asarray(value).tolist()
        pieces = [f"np.array({ints(window[:owned])})"] if owned else []
        start = owned
        while start < len(window):  # runs of slid-out tokens (-1) and of fresh slots
            slid = window[start] == NONE
            end = next((i for i in range(start, len(window)) if (window[i] == NONE) != slid), len(window))
            run = window[start:end]
            pieces.append(f"np.full({len(run)}, -1)" if slid else f"{pool}.take({ints(run)})")
            start = end
        if len(pieces) == 1:
            return pieces[0]
        return f"np.concatenate([{', '.join(pieces)}])" if pieces else "np.zeros(0, dtype=np.int64)"

    def caller_line(self, call: SentCall, ints: Callable[[list[int]], str]) -> str | None:
        """A caller's own act on the second pool (``None``: not one): a running request computing
        its window, or the caller freeing slots of its own."""
        if call.name == "compute_window":
            return f"{POOL_NAME}.take({ints(list(call.args[1]))})  # the request computes these tokens' window"
        if call.name in ("free_second", "free_window"):
            return f"{POOL_NAME}.free(np.array({ints(list(call.args[0]))}))  # the caller frees {self.noun} of its own"
        return None

    def note(self) -> str:
        """The header's words on the second pool (its own lines)."""
        return "\n" + "\n".join(textwrap.wrap(
            f"A second pool: radixcheck's SecondPoolAllocator holds the {self.noun}, the caller's as the KV slots are; each "
            f"insert takes the {self.noun} its request brought, and the caller frees those the cache did not keep, as it did "
            "in radixcheck's run.", 105))
