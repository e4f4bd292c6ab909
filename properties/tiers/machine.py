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

**Layers.** A target that declares namespaces (``TierCapabilities(namespaces=True)``) gets the
tenant rules too (:class:`TierTenantRules`): requests under the namespaces the plain cache
machine's tenants use (:mod:`radixcheck.properties.cache.tenants`: pairs a naive key confuses),
sent through the same namespace layer (:mod:`radixcheck.properties.cache.layers`), with a story
that takes one tenant's prompt through the host tier and serves it to the other. A namespace of a
kind the target declares in ``unsent_namespaces`` is never sent: the draw stays the same and the
next namespace (or pair) the target takes is sent instead (``tenants.sendable``), so streams stay
comparable across targets. A target that
declares a Policy (``TierCapabilities(eviction_policy=...)``) gets the policy rules
(:class:`TierPolicyRules`): request priorities, sent through the priority layer, a story
that takes a frequently hit prompt through the host tier and back before an eviction, and (a
policy that takes priorities) one that recomputes a low-priority host-only prompt at a higher
priority before an eviction beside a leaf of a priority between the two. A target
that declares the request lifecycle (``TierCapabilities(lifecycle="tree")``) gets running
requests (:class:`~radixcheck.properties.tiers.lifecycle.TierLifecycleRules`, on a
:class:`~radixcheck.properties.tiers.lifecycle.LifecycleTierWorld`): chunks published while
backups are pending, retracts and aborts while a load-back is in flight; with
``lifecycle="requests"`` the same rules on a
:class:`~radixcheck.properties.tiers.requests.RequestsTierWorld`, whose steps are the cache's own
request methods. A target that declares
a state pool (``TierCapabilities(second_pool=StatePool())``) gets the state rules
(:class:`TierStateRules`): every insert carries ``state=``, every forward judges ``states(handle)``
(oracle 20), and a story takes a prompt with a state at its end and at its extension's end
through the host tier, loads the prompt back, and evicts the extension from host. A target that
declares a sliding window (``TierCapabilities(second_pool=SlidingWindow(window=W))``) gets the
window rules (:class:`TierWindowRules`): every insert carries ``window=``, every forward judges
``windows(handle)`` (oracle 20w), and a story takes a prompt and an extension at least ``W``
tokens longer through the host tier and loads the extension back (the prompt's window must stay
behind) and then the prompt alone; another evicts such an extension's pages until the device path
ends at a dead window and mostly fails the load-back that follows.

**Flush.** A target that declares ``supports_reset`` is flushed mid-world now and then (``reset``,
at most once every ``RESET_EVERY`` operations), as its caller flushes it: the requests still running
are drained first (the held ones finish; the lifecycle's finish or abort, drawn), then the cache is
reset with nothing running, and the traffic goes on: what a flush leaves behind shows in the requests
after it. Undeclared, it is never sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from radixcheck.properties.cache.contract import SlidingWindow, StatePool
from radixcheck.properties.cache.layers import UNSAID
from radixcheck.properties.cache.tenants import NAMESPACES, PAIRS, generated_pairs, kinds_of, pair_kinds, sendable
from radixcheck.properties.tiers.lifecycle import TierLifecycleRules
from radixcheck.properties.tiers.requests import TierRequestRules, world_class_for
from radixcheck.properties.tiers.world import TierWorld

ALPHABET = st.integers(0, 2)


def _running(self: TierMachine) -> bool:
    return bool(self.world.running)


def _quarantines(self: TierMachine) -> bool:
    """The target offers ``evict_prefix`` (``TierCapabilities.supports_quarantine``)."""
    caps = getattr(type(self).factory, "tier_capabilities", None)
    return caps is None or caps.supports_quarantine


def _unsent(self: TierMachine) -> tuple[str, ...]:
    """The namespace kinds the target declares it cannot carry (``TierCapabilities.unsent_namespaces``)."""
    caps = getattr(type(self).factory, "tier_capabilities", None)
    return caps.unsent_namespaces if caps is not None else ()


def _pending(self: TierMachine) -> bool:
    return bool(self.world.controller.pending)


RESET_EVERY = 60  # operations of traffic between two resets of a small world (and before the first)
# Measured (session 60, ci profile, page size 2, write-through, seeds 0..1, the 10 declaring correct variants, no false
# alarm): with the running requests drained first it fires in 33 % of the examples (26-42 % by variant), 49 % of those that
# reach 60 operations; when a running request blocked it, 23 % (35 %). The rest is Hypothesis's swarm testing: each
# example disables a random share of the rules (half on average), this one among them.
DRAINS = ("finish", "abort")  # how a lifecycle request still running ends before a flush


def _may_reset(self: TierMachine) -> bool:
    """A mid-world flush is due: the target offers ``reset`` (``TierCapabilities.supports_reset``) and
    the world has served ``RESET_EVERY`` operations since its start or its last reset (rare: most of a
    world is traffic, and a flush empties the tree the other rules build on). A running request does
    not hold it back: the rule drains it first, as the flush's caller does (``TierMachine.reset``)."""
    caps = getattr(type(self).factory, "tier_capabilities", None)
    return caps is not None and caps.supports_reset and self.world.operations - self.reset_at >= RESET_EVERY


class TierMachine(RuleBasedStateMachine):
    factory: Callable[..., Any]
    page_size = 1
    write_policy = "write_through"
    world_class: type[TierWorld] = TierWorld  # LifecycleTierWorld for lifecycle="tree"
    known_deviations: tuple[Callable[[], Any], ...] = ()  # set by a waiver's ``known:`` (findings.verdict.waiving)

    sequences = Bundle("sequences")

    def __init__(self) -> None:
        super().__init__()
        self.world = type(self).world_class(type(self).factory, self.page_size, self.write_policy)
        self.world.model.deviations = [make() for make in self.known_deviations]  # waived known order bugs (oracle 4t)
        self.reset_at = 0  # the world's operations at its last reset (``reset``)

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

    @precondition(_may_reset)
    @rule(drain=st.sampled_from(DRAINS))
    def reset(self, drain: str) -> None:
        """The whole cache flushed mid-world, as an engine flushes it (a weight update, a benchmark's
        next run); the traffic that follows meets what the flush left (a stale index of the host copies).
        The cache itself is never reset under a running request: its caller drains them first.
        SGLang's ``Scheduler.flush_cache`` resets only when fully idle (else it refuses, and the
        caller retries once the running requests have finished); a weight update first aborts every
        request (``abort_all_requests``) or waits for them under its writer lock; vLLM's
        ``reset_prefix_cache(reset_running_requests=True)`` preempts them. So the held requests
        finish (their only ending), the lifecycle's running requests finish or abort (``drain``),
        the transfers in flight land (:meth:`TierWorld.reset`), then ``reset``. Never sent to a
        target that does not offer it."""
        world = self.world
        while world.running:
            world.finish()
        lives = getattr(world, "lives", [])
        if lives and drain == "abort":
            world.abort_all()  # as a quarantine does (LifecycleTierWorld.abort_all)
        while lives:
            world.end(len(lives) - 1, "finish")
        world.reset()
        self.reset_at = self.world.operations

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


class TierTenantRules(TierMachine):
    """The tier machine plus tenants, for a target that declares namespaces: each rule sends
    ``namespace=`` through the world (the namespace layer), and the tier model judges tenant
    isolation on both tiers (oracle 10) as well as every tier oracle."""

    @rule(target=TierMachine.sequences, base=TierMachine.sequences, cut=st.integers(0, 8), tail=st.lists(ALPHABET, max_size=8),
          namespace=st.sampled_from(NAMESPACES), load=st.booleans(), hold=st.booleans())
    def tenant_serve(self, base: tuple[int, ...], cut: int, tail: list[int], namespace: Any, load: bool,
                     hold: bool) -> tuple[int, ...]:
        """A request under ``namespace`` (the plain ``serve`` is the default namespace's; a kind the
        target declares in ``unsent_namespaces`` is replaced by the next namespace it takes)."""
        namespace = sendable(NAMESPACES, namespace, _unsent(self), kinds_of)
        tokens = self._query(base, cut, tail)
        self.world.serve(tokens, load=load, namespace=namespace)
        if not hold:
            self.world.finish()
        return tokens

    @precondition(lambda self: not _running(self))
    @rule(base=TierMachine.sequences, pair=st.sampled_from(PAIRS), swap=st.booleans(), tail=st.lists(ALPHABET, max_size=4))
    def tenants_through_host(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, tail: list[int]) -> None:
        """One tenant's prompt goes to host only; the other tenant of a pair a naive key confuses
        asks for it (plus a tail), loading back what the cache offers; then the first tenant and the
        default namespace ask too. Each may be served only its own namespace's pages."""
        self._through_host(base, sendable(PAIRS, pair, _unsent(self), pair_kinds), swap, tail)

    @precondition(lambda self: not _running(self))
    @rule(base=TierMachine.sequences, data=st.data(), swap=st.booleans(), tail=st.lists(ALPHABET, max_size=4))
    def generated_tenants_through_host(self, base: tuple[int, ...], data: st.DataObject, swap: bool, tail: list[int]) -> None:
        """:meth:`tenants_through_host` on a generated pair (``tenants.generated_pairs``, as the plain
        machine's ``generated_tenants_share_prompt``): two namespaces only the type tells apart
        (``5`` / ``"5"``, ``None`` / ``"None"``), which must not share, or two the contract calls one
        (``1`` / ``1.0``), which must. A tier cache that keys its trees by ``str(namespace)`` passed
        the fixed list's pairs (NU trial, hicache_like_trial.md)."""
        self._through_host(base, data.draw(generated_pairs(_unsent(self)), label="pair"), swap, tail)

    def _through_host(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, tail: list[int]) -> None:
        first, second = (pair[1], pair[0]) if swap else pair
        world = self.world  # (an empty base is a request with nothing to cache: harmless)
        world.serve(base, namespace=first)
        world.finish()
        self._to_host(base)
        for namespace, tokens in ((second, base + tuple(tail) * self.page_size), (first, base), (UNSAID, base)):
            world.serve(tokens, namespace=namespace)
            world.finish()

    @precondition(lambda self: not _running(self) and _quarantines(self))
    @rule(base=TierMachine.sequences, pair=st.sampled_from(PAIRS), swap=st.booleans(), cut=st.integers(1, 8),
          to_host=st.booleans())
    def tenant_quarantine(self, base: tuple[int, ...], pair: tuple[Any, Any], swap: bool, cut: int, to_host: bool) -> None:
        """Both tenants of a pair cache one prompt (on host only, if ``to_host``); one tenant's branch is
        quarantined: the other's must stay on both tiers."""
        if not base:  # a served query may be empty: there is nothing to quarantine
            return
        pair = sendable(PAIRS, pair, _unsent(self), pair_kinds)
        doomed, other = (pair[1], pair[0]) if swap else pair
        for namespace in (other, doomed):
            self.world.serve(base, namespace=namespace)
            self.world.finish()
        if to_host:
            self._to_host(base)
        self.world.quarantine(base[: cut * self.page_size] or base[:1], namespace=doomed)
        self.world.match(base, namespace=other)


def _takes_priority(self: TierMachine) -> bool:
    policy = self.world.model.policy
    return policy is not None and policy.takes_priority


class TierPolicyRules(TierMachine):
    """The tier machine plus the policy rules, for a target that declares a Policy: every ``evict``
    is judged by the policy's key over what the model counts of each page, on both tiers."""

    @precondition(_takes_priority)
    @rule(priority=st.integers(0, 3))
    def next_priority(self, priority: int) -> None:
        """The requests that follow carry ``priority`` (``match_prefix`` and ``insert``)."""
        self.world.next_priority(priority)

    @precondition(lambda self: not _running(self))
    @rule(frequent=TierMachine.sequences, other=TierMachine.sequences, times=st.integers(1, 3))
    def frequent_through_host(self, frequent: tuple[int, ...], other: tuple[int, ...], times: int) -> None:
        """One prompt is cached by ``times`` more requests than another (each with its own tail page
        after it: an insert covering the prompt is a hit), both go to host, both are loaded back
        (the frequent one first: it is now the older), and one page is evicted: a frequency policy
        keeps the frequent prompt, if the load-back kept its hits."""
        world = self.world
        for tokens in [frequent + (4 + i,) * self.page_size for i in range(times + 1)] + [other]:
            world.serve(tokens)
            world.finish()
        self._to_host(frequent + other)
        for tokens in (frequent, other):
            world.serve(tokens)
            world.finish()
        world.complete_all()
        world.evict(self.page_size)


    @precondition(lambda self: not _running(self) and _takes_priority(self))
    @rule(prompt=TierMachine.sequences, tail=st.lists(ALPHABET, min_size=1, max_size=3), low=st.integers(0, 1))
    def priority_through_host(self, prompt: tuple[int, ...], tail: list[int], low: int) -> None:
        """A prompt cached at priority ``low`` goes to host only (the host emptied first: under
        priority its low pages would be the first a full host drops); a request of priority
        ``low + 2`` recomputes it (``load=False``: the insert revives its host-only pages with new
        device slots, and raises their priority); a fresh prompt (a prefix no other request has)
        is cached at ``low + 1``, and one page is evicted: the fresh leaf goes first, if the revival
        raised the priority. Random rules rarely line these up (``RevivedPageKeepsOldPriority``, a
        new user's planted bug, was caught by one audit stream of two)."""
        if not prompt:  # a served query may be empty: nothing to revive
            return
        world, p = self.world, self.page_size
        self._to_host(prompt)
        world.evict_host(10**6)
        world.next_priority(low)
        world.serve(prompt)
        world.finish()
        self._to_host(prompt)
        world.next_priority(low + 2)
        world.serve(prompt, load=False)
        world.finish()
        world.next_priority(low + 1)
        world.serve((3,) * p + tuple(tail) * p)
        world.finish()
        world.complete_all()
        world.evict(p)


class TierStateRules(TierMachine):
    """The tier machine plus the state pool's story, for a target that declares one: the world
    sends ``state=`` on every insert and judges ``states(handle)`` at every forward (oracle 20)."""

    @precondition(lambda self: not _running(self))
    @rule(base=TierMachine.sequences, tail=st.lists(ALPHABET, min_size=1, max_size=4), load=st.booleans())
    def states_through_host(self, base: tuple[int, ...], tail: list[int], load: bool) -> None:
        """A prompt and its extension (a page-aligned end each: a state at both) go to host only;
        the prompt is served again (loaded back, if ``load``: its pages' states must come back
        with them, its own, not its parent's); the extension, host only, is evicted from host;
        the prompt is served once more: its states must survive the host eviction below it."""
        world, longer = self.world, base + tuple(tail) * self.page_size
        for tokens in (base, longer):
            world.serve(tokens)
            world.finish()
        self._to_host(longer)
        world.serve(base, load=load)
        world.finish()
        world.complete_all()
        world.evict_host(10**6)
        world.serve(base)
        world.finish()


class TierWindowRules(TierMachine):
    """The tier machine plus the sliding window's story, for a target that declares one: the world
    sends ``window=`` on every insert and judges ``windows(handle)`` at every forward (oracle 20w)."""

    @precondition(lambda self: not _running(self))
    @rule(base=TierMachine.sequences, tail=st.lists(ALPHABET, min_size=1, max_size=3), load=st.booleans())
    def windows_through_host(self, base: tuple[int, ...], tail: list[int], load: bool) -> None:
        """A prompt and its extension, at least a window longer (each inserted with its own window
        live at its end), go to host only; the extension is loaded back (only its end's window may
        come back, not the prompt's); its tail goes to host and the prompt plus one page of it is
        served (the load-back's window reaches back into the prompt, on device with its window
        tombstoned: revived from host); after a trip to host again, the prompt alone (if ``load``;
        its own window comes back now)."""
        world = self.world
        window = world.windows.window if world.windows is not None else 1
        extension = tuple(tail) * self.page_size
        extension *= -(-window // len(extension))  # at least a window of tokens
        longer = base + extension
        for tokens in (base, longer):
            world.serve(tokens)
            world.finish()
        self._to_host(longer)
        world.serve(longer)
        world.finish()
        world.complete_all()
        world.evict(len(extension))  # the extension's pages, least recently used leaves first
        world.complete_all()
        world.serve(base + extension[: self.page_size])
        world.finish()
        self._to_host(longer)
        world.serve(base, load=load)
        world.finish()

    @precondition(lambda self: not _running(self))
    @rule(base=TierMachine.sequences, tail=st.lists(ALPHABET, min_size=1, max_size=3), data=st.data())
    def failed_load_at_a_dead_window(self, base: tuple[int, ...], tail: list[int], data: st.DataObject) -> None:
        """A prompt with an extension at least a window long is cached, and leaves are evicted one
        page at a time (written back first, under write-back) until the model knows its device path
        ends where the window slid out, with host-only pages after it; it is served again, and then
        the load-back mostly fails (weighted by a draw): a load that moved nothing must resume short
        of that device path, at its live window (oracle 21). Random rules rarely line a failed load
        up with a dead device end (``FailedLoadResumesAtDeadWindow`` was missed in 71 of 200 streams)."""
        world = self.world
        window = world.windows.window if world.windows is not None else 1
        extension = tuple(tail) * self.page_size
        extension *= -(-window // len(extension))
        longer = base + extension
        world.serve(longer)
        world.finish()
        world.complete_all()
        for _ in range(len(extension) // self.page_size + 2):  # the oldest leaves go first: a few pages may be others'
            if _dead_device_end(world, longer):
                break
            world.evict(self.page_size)
            world.complete_all()
        if _dead_device_end(world, longer) and data.draw(st.sampled_from([True, True, True, False]), label="fail the load"):
            world.fail_next([True] * 4)  # the whole load, then each page's (and any write-back its nested eviction starts)
        world.serve(longer)
        world.finish()


    @precondition(lambda self: not _running(self) and self.write_policy == "write_back")
    @rule(base=TierMachine.sequences, tail=st.lists(ALPHABET, min_size=1, max_size=3))
    def duplicate_through_a_full_host(self, base: tuple[int, ...], tail: list[int]) -> None:
        """A prompt goes to host only and is cached again with an extension at least a window long,
        recomputed (its pages on device again, with its end's window tombstoned there and live in its
        host copy: host duplicates); an older fresh prompt is written back into a full host (a
        write-back may first free the duplicates' KV host copies and keep their window host copies,
        as SGLang does); then the prompt alone is served: its load-back revives the window at its
        end from the host copy, or a kept one, with the token's own values. Random rules rarely
        line these up (``KeepsStaleWindowOfReleasedDuplicate`` was missed in 8 of 20 streams)."""
        if not base:  # a served query may be empty: nothing to duplicate
            return
        world, p = self.world, self.page_size
        window = world.windows.window if world.windows is not None else 1
        extension = tuple(tail) * p
        extension *= -(-window // len(extension))
        world.serve(base)
        world.finish()
        self._to_host(base)
        over = -(-len(base) // p) * p  # as many tokens more than the host holds as the duplicates have
        fresh = (3,) * (world.host.available() // p * p + over)  # a prefix no other request has
        world.serve(fresh)
        world.finish()
        world.serve(base + extension, load=False)  # recomputed: the duplicates' windows as this request sends them
        world.finish()
        world.evict(p)  # the oldest leaf, the fresh prompt's: its write-back (top-down, the whole prompt) fills the host
        world.complete_all()
        world.serve(base)
        world.finish()


def _dead_device_end(world: TierWorld, tokens: tuple[int, ...]) -> bool:
    """The model knows a load-back of ``tokens`` would load host-only pages after a device path
    whose window is dead at its end (its last ``W`` tokens not all live on device): where a failed
    load must resume short of the device path (the pages of one request's path: no scan)."""
    if world.windows is None:
        return False
    device, _, path = world.model.expected_match(tokens)
    resumes, reach = world.model.expected_match(tokens, windowed=True)[:2]
    path = [pg for pg in path if not pg.gone]
    return len(resumes) + reach > len(device) and world.windows.match_ends(path, len(device), len(device))[0] < len(device)


def tier_machine_for(factory: Callable[..., Any], page_size: int = 1, write_policy: str = "write_through",
                     name: str | None = None) -> type[TierMachine]:
    """A tier machine class for ``factory`` at one page size and write policy, with a layer of rules
    for each part its ``tier_capabilities`` declares besides the tier (namespaces, a Policy, a state
    pool, the request lifecycle: :mod:`radixcheck.properties.tiers.lifecycle`)."""
    caps = getattr(factory, "tier_capabilities", None)
    bases: list[type[TierMachine]] = []
    if caps is not None and caps.namespaces:
        bases.append(TierTenantRules)
    if caps is not None and caps.policy is not None:
        bases.append(TierPolicyRules)
    if caps is not None and isinstance(caps.second_pool, StatePool):
        bases.append(TierStateRules)
    if caps is not None and isinstance(caps.second_pool, SlidingWindow):
        bases.append(TierWindowRules)
    attributes: dict[str, Any] = {"factory": staticmethod(factory), "page_size": page_size, "write_policy": write_policy}
    if caps is not None and caps.lifecycle in ("tree", "requests"):  # "requests": the same rules and one story more
        rules = TierLifecycleRules if caps.lifecycle == "tree" else TierRequestRules
        bases = [rules, *bases] if bases else [rules, TierMachine]  # type: ignore[list-item]
        attributes["world_class"] = world_class_for(caps)
    return type(name or f"TierMachine_{write_policy}_p{page_size}", tuple(bases) or (TierMachine,), attributes)
