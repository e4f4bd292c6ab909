"""The tier machine: a Hypothesis state machine that serves requests through a tiered cache and
delivers the controller's completions in an order Hypothesis chooses.

**The scheduler.** Every transfer the cache starts stays pending until a rule completes it:
``complete`` picks any pending one (so writes and loads finish out of order, or not before the
next request arrives), ``complete_all`` drains them, ``finish`` completes a request's own loads
first (its forward waits for them) and ``fail_next`` makes the next allocations fail. Load-back
re-enters eviction when its allocation fails, as SGLang's does; under write-back that eviction
needs host room and re-enters host eviction. Shrinking gives the smallest interleaving, and
:mod:`radixcheck.properties.tiers.repro` writes it out as plain calls on a
:class:`~radixcheck.properties.tiers.world.TierWorld`.

**Scenarios.** Three short stories put a bug class's trigger in one step: ``backup_fails`` (a
request whose backups fail to allocate, then eviction and a second request), ``to_host`` (a
prompt evicted through to host only), and ``reload_under_pressure`` (a host-only prompt loaded
back while the device is full and the host has nothing else to evict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from radixcheck.properties.tiers.world import TierWorld

ALPHABET = st.integers(0, 2)


def _running(self: TierMachine) -> bool:
    return bool(self.world.running)


def _quarantines(self: TierMachine) -> bool:
    """The target offers ``evict_prefix`` (``TierCapabilities.supports_quarantine``)."""
    caps = getattr(type(self).factory, "tier_capabilities", None)
    return caps is None or caps.supports_quarantine


def _pending(self: TierMachine) -> bool:
    return bool(self.world.controller.pending)


class TierMachine(RuleBasedStateMachine):
    factory: Callable[..., Any]
    page_size = 1
    write_policy = "write_through"

    sequences = Bundle("sequences")

    def __init__(self) -> None:
        super().__init__()
        self.world = TierWorld(type(self).factory, self.page_size, self.write_policy)

    def _query(self, base: tuple[int, ...], cut: int, tail: list[int]) -> tuple[int, ...]:
        p = self.page_size
        return base[: cut * p] + tuple(tail)

    @initialize(target=sequences, first=st.lists(ALPHABET, min_size=2, max_size=8))
    def first_sequence(self, first: list[int]) -> tuple[int, ...]:
        return tuple(first) * self.page_size

    @rule(target=sequences, base=sequences, cut=st.integers(0, 8), tail=st.lists(ALPHABET, max_size=8),
          load=st.booleans(), hold=st.booleans())
    def serve(self, base: tuple[int, ...], cut: int, tail: list[int], load: bool, hold: bool) -> tuple[int, ...]:
        tokens = self._query(base, cut, tail)
        self.world.serve(tokens, load=load)
        if not hold:
            self.world.finish()
        return tokens

    @precondition(_running)
    @rule(pick=st.integers(0, 7))
    def finish(self, pick: int) -> None:
        self.world.finish(pick % len(self.world.running))

    @precondition(_pending)
    @rule(pick=st.integers(0, 7))
    def complete(self, pick: int) -> None:
        pending = self.world.pending()
        self.world.complete(pending[pick % len(pending)])

    @precondition(_pending)
    @rule()
    def complete_all(self) -> None:
        self.world.complete_all()

    @rule(plan=st.lists(st.booleans(), min_size=1, max_size=4))
    def fail_next(self, plan: list[bool]) -> None:
        self.world.fail_next(plan)

    @rule(amount=st.integers(1, 24))
    def evict(self, amount: int) -> None:
        self.world.evict(amount)

    @rule(amount=st.integers(1, 24))
    def evict_host(self, amount: int) -> None:
        self.world.evict_host(amount)

    @precondition(lambda self: not _running(self) and _quarantines(self))
    @rule(base=sequences, cut=st.integers(1, 8))
    def quarantine(self, base: tuple[int, ...], cut: int) -> None:
        if base:
            self.world.quarantine(base[: cut * self.page_size] or base[:1])

    # ---- scenarios ---------------------------------------------------------------------------

    def _to_host(self, tokens: tuple[int, ...]) -> None:
        """Evict until ``tokens``' pages are on host only (write-backs complete in between)."""
        for _ in range(len(tokens) // self.page_size + 2):
            self.world.evict(10**6)
            self.world.complete_all()

    @rule(target=sequences, base=sequences, cut=st.integers(0, 8), tail=st.lists(ALPHABET, min_size=1, max_size=8),
          plan=st.lists(st.booleans(), min_size=1, max_size=4))
    def backup_fails(self, base: tuple[int, ...], cut: int, tail: list[int], plan: list[bool]) -> tuple[int, ...]:
        tokens = self._query(base, cut, tail)
        self.world.fail_next(plan)
        self.world.serve(tokens)
        self.world.finish()
        self.world.fail_next(plan)
        self._to_host(tokens)
        self.world.serve(tokens)
        self.world.finish()
        return tokens

    @precondition(lambda self: not _running(self))
    @rule(base=sequences, plan=st.lists(st.booleans(), min_size=1, max_size=5))
    def to_host(self, base: tuple[int, ...], plan: list[bool]) -> None:
        self._to_host(base)
        self.world.fail_next(plan)
        self.world.serve(base)
        self.world.finish()

    @precondition(lambda self: not _running(self))
    @rule(base=sequences, filler=st.lists(ALPHABET, min_size=1, max_size=4))
    def reload_under_pressure(self, base: tuple[int, ...], filler: list[int]) -> None:
        world = self.world
        world.serve(base)
        world.finish()
        self._to_host(base)
        world.match(base)  # its pages become the newest on host
        world.evict_host(max(0, world.cache.host_size() - len(base)))
        fresh = (3,) * self.page_size + tuple(filler) * self.page_size  # a prefix no other request has
        world.serve(fresh)
        world.finish()
        world.fail_next([True, True])  # the load fails; the nested eviction's backup fails
        world.serve(base)
        world.finish()

    @invariant()
    def conserved(self) -> None:
        self.world.check()


def tier_machine_for(factory: Callable[..., Any], page_size: int = 1, write_policy: str = "write_through",
                     name: str | None = None) -> type[TierMachine]:
    """A tier machine class for ``factory`` at one page size and write policy."""
    return type(name or f"TierMachine_{write_policy}_p{page_size}", (TierMachine,),
                {"factory": staticmethod(factory), "page_size": page_size, "write_policy": write_policy})
