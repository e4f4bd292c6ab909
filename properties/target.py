"""Choosing the cache under test, and calling it as the untrusted code it is.

The target is named ``package.module:attribute`` (see ``radixcheck.properties.cache.contract``): a
radix cache's factory, a KV-event index's (``radixcheck.properties.index.contract``) or a router's
tenant prefix tree's (``radixcheck.properties.tenant_tree.contract``), told apart by the type of its
``capabilities`` (or, for a factory that declares none, by ``index=True``: a tenant tree must declare).
:func:`load_target` imports it (the working directory is importable, as with ``python -m``) and
:func:`check_target` checks it once, up front, so a factory that raises or a cache without the
contract's methods is one clear error rather than a failure in every test. Every call into it
goes through :func:`guarded`, which enforces a per-operation time limit so one hanging target
cannot hang the gate: the call is interrupted (a signal, main thread) and reported as a failure
with the operation sequence that led to it. The limit counts the CPU time the call spends, so a
loaded machine does not turn a slow correct call into a hang; a generous wall-clock backstop
catches a call that blocks without computing.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from radixcheck.properties.budget_clock import BudgetWatch, WallWatch
from radixcheck.properties.cache.contract import (
    DEFAULT_CAPABILITIES,
    MAX_PAGE_SIZE_TESTED,
    Capabilities,
    SlidingWindow,
    SlotAllocator,
    required_methods,
)
from radixcheck.properties.index.contract import DEFAULT_INDEX_CAPABILITIES, IndexCapabilities, required_index_methods
from radixcheck.properties.index.router_contract import RouterCapabilities, RouterPair
from radixcheck.properties.tenant_tree.contract import TenantTreeCapabilities, required_tenant_tree_methods
from radixcheck.properties.tiers.contract import TIER_REQUEST_METHODS, TierCapabilities

DEFAULT_TARGET = "radixcheck.reference:RadixCache"
TARGET_ENV = "RADIXCHECK_TARGET"
TIMEOUT_ENV = "RADIXCHECK_OP_TIMEOUT"
DEFAULT_OP_TIMEOUT = 5.0  # seconds of CPU time; generous for any tree of the sizes the suite builds
WALL_TIMEOUT_ENV = "RADIXCHECK_OP_WALL_TIMEOUT"
WALL_BACKSTOP_FACTOR, WALL_BACKSTOP_MIN = 12.0, 60.0  # the wall-clock backstop's default: op_wall_timeout()
LOAD_TIMEOUT = 120.0  # seconds for the factory calls that check a target once, before any test

T = TypeVar("T")


class OperationTimeout(Exception):
    """A call into the target took longer than the per-operation limit."""


class TransportError(Exception):
    """The call got no answer from the cache: a wire server broke the protocol or is not running.
    Never a refusal: a check that expects one (bad input, a forbidden lock) lets it through, so the
    finding is the transport's fault itself, not an echo of it on the next call. It may meet a call
    with bad input as well as a legal one: its finding says what happened (``what_happened``), not
    that the call was legal."""

    what_happened = "the call got no answer"


class TargetCrash(Exception):
    """The target said it failed (a wire server's error 13): its state is unknown. Never a refusal
    either: a crash where bad input or a forbidden lock is due is the finding, not the refusal asked for."""

    what_happened = "the target said it crashed"


NOT_A_REFUSAL = (OperationTimeout, TransportError, TargetCrash)
"""What a check that expects a refusal lets through: a hang, no answer, a crash."""


def caused_by_hang(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or during, is an :class:`OperationTimeout`."""
    while exc is not None:
        if isinstance(exc, OperationTimeout):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


NO_ANSWER = "radixcheck_no_answer"  # set on a check's failure that found the target answering nothing (no_longer_answers)

E = TypeVar("E", bound=BaseException)


def no_longer_answers(exc: E) -> E:
    """``exc``, a check's failure, marked as finding that the target answers no call any more (every
    call raises, as an index that panicked on a malformed event): a replay past failures ends there
    (:func:`ends_a_replay`)."""
    setattr(exc, NO_ANSWER, True)
    return exc


def ends_a_replay(exc: BaseException | None) -> bool:
    """Whether a replay that goes on past failures (the root cause's) ends at ``exc``, or at an
    exception it was raised from or during: a call hung (each later one could cost the time limit
    again), got no answer (:class:`TransportError`), or left the target answering nothing
    (:func:`no_longer_answers`). Past those, every call shows only that again, or hangs on the
    state the failure left: an index whose self-parent panic left a cycle looped in ``dump()``
    for a whole per-operation limit, and its program showed that hang besides its own finding."""
    while exc is not None:
        if isinstance(exc, (OperationTimeout, TransportError)) or getattr(exc, NO_ANSWER, False):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class BudgetSpent(BaseException):
    """The time allowed for shrinking a failure ran out. A ``BaseException``, so Hypothesis does
    not mistake it for a failure of the cache: it ends the shrink, keeping the best program."""


class TargetError(ValueError):
    """The target cannot be tested at all: bad name, import error, factory or capabilities wrong."""


@dataclass(frozen=True)
class Target:
    spec: str
    factory: Callable[..., Any]
    capabilities: Capabilities | IndexCapabilities | RouterCapabilities | TenantTreeCapabilities | TierCapabilities
    capabilities_declared: bool = True  # False: the factory has no `capabilities`, the defaults apply
    declared_page_sizes: tuple[int, ...] | None = None  # set when a run tests fewer than declared (capabilities holds the run's)
    page_sizes_from: str = ""  # the option that chose the run's page sizes, e.g. "--radix-page-sizes"
    seed: int | None = None  # --radix-seed: the run's own derandomized stream (None: the default one)

    @property
    def name(self) -> str:
        """The name its machines are built under: it keys Hypothesis's derandomized stream, so a seed
        gives another stream (as the kill rates name each stream) and the same seed the same one."""
        base = self.spec.replace(":", ".")
        return base if self.seed is None else f"{base}_seed{self.seed}"

    @property
    def kind(self) -> str:
        """"index" for a KV-event index (IndexCapabilities), "router" for an engine and index pair
        (RouterCapabilities), "tenant_tree" for a router's tenant prefix tree (TenantTreeCapabilities),
        "tier" for a cache with a host tier (its factory's ``tier_capabilities``, a TierCapabilities),
        else "cache"."""
        if isinstance(self.capabilities, IndexCapabilities):
            return "index"
        if isinstance(self.capabilities, TenantTreeCapabilities):
            return "tenant_tree"
        if isinstance(self.capabilities, TierCapabilities):
            return "tier"
        return "router" if isinstance(self.capabilities, RouterCapabilities) else "cache"

    def page_sizes_shown(self) -> str:
        """The declared page sizes and those this run tests, e.g. ``declared (4, 16), run (4,)
        (--radix-page-sizes)``: a run of fewer than declared must not read as the declaration."""
        caps = self.capabilities.engine if self.kind == "router" else self.capabilities
        if self.kind == "index":
            return "none (a KV-event index)"
        if self.kind == "tenant_tree":
            return "none (a tenant prefix tree)"
        declared = caps.page_sizes if self.declared_page_sizes is None else self.declared_page_sizes
        chosen = f" ({self.page_sizes_from})" if self.declared_page_sizes is not None and self.page_sizes_from else ""
        return f"declared {tuple(declared)}, run {caps.page_sizes_tested()}{chosen}"

    def declared_capabilities(self) -> Any:
        """The capabilities as the factory declares them (``capabilities`` holds the run's page sizes)."""
        if self.declared_page_sizes is None:
            return self.capabilities
        if self.kind == "router":
            engine = dataclasses.replace(self.capabilities.engine, page_sizes=self.declared_page_sizes)
            return dataclasses.replace(self.capabilities, engine=engine)
        return dataclasses.replace(self.capabilities, page_sizes=self.declared_page_sizes)

    def defaults_warning(self) -> str | None:
        """What a user must see when the factory declares nothing: the defaults it is held to."""
        if self.capabilities_declared:
            return None
        if self.kind == "index":
            return (f"{self.spec} has no `capabilities`, so the index defaults apply: {self.capabilities}; declare what "
                    f"it offers with `{self.spec.partition(':')[2]}.capabilities = radixcheck.IndexCapabilities(...)`")
        return (f"{self.spec} has no `capabilities`, so the defaults apply: {self.capabilities} (every property, "
                f"page sizes {list(self.capabilities.page_sizes)}); declare what it offers with "
                f"`{self.spec.partition(':')[2]}.capabilities = radixcheck.Capabilities(...)`")


def load_target(spec: str, index: bool = False) -> Target:
    """Import ``package.module:attribute`` and check it; raise :class:`TargetError` naming what is
    wrong. ``index``: a factory without ``capabilities`` is a KV-event index (else a cache)."""
    if not isinstance(spec, str) or not spec.strip():
        raise TargetError("the target is empty: name a cache factory as 'package.module:factory'")
    module_name, sep, attr = spec.strip().partition(":")
    if not sep or not module_name or not attr:
        raise TargetError(f"target {spec!r} must look like 'package.module:factory'")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # a user's adapter beside them imports, as with `python -m`
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - an import error, or an error in the module's own code
        raise TargetError(f"target {spec!r}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from exc
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise TargetError(f"target {spec!r}: module {module_name!r} has no attribute {attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise TargetError(f"target {spec!r}: {attr!r} is not callable")
    declared = _declared(spec, factory, "capabilities")
    tier = _declared(spec, factory, "tier_capabilities")
    if tier is not None and tier is not _ABSENT and declared is _ABSENT:
        if not isinstance(tier, TierCapabilities):
            raise TargetError(f"target {spec!r}: 'tier_capabilities' must be a radixcheck TierCapabilities "
                              f"(radixcheck.properties.tiers.contract), got {tier!r}")
        return Target(spec.strip(), factory, tier)
    caps = declared if declared is not _ABSENT else DEFAULT_INDEX_CAPABILITIES if index else DEFAULT_CAPABILITIES
    if not isinstance(caps, (Capabilities, IndexCapabilities, RouterCapabilities, TenantTreeCapabilities)):
        raise TargetError(f"target {spec!r}: 'capabilities' must be a radixcheck.Capabilities (a cache), "
                          f"radixcheck.IndexCapabilities (a KV-event index), a RouterCapabilities (a pair) or a "
                          f"radixcheck.TenantTreeCapabilities (a router's tenant prefix tree), got {caps!r}")
    return Target(spec.strip(), factory, caps, capabilities_declared=declared is not _ABSENT)


_ABSENT = object()


def _declared(spec: str, factory: Any, name: str) -> Any:
    """``factory.<name>``, read once (``_ABSENT`` if it has none). Reading it may run code (a wire server's
    capabilities start the server): what that raises makes the target unusable, said in one line."""
    try:
        return getattr(factory, name, _ABSENT)
    except Exception as exc:  # noqa: BLE001 - whatever the attribute raises, the target is unusable
        raise TargetError(f"target {spec!r}: reading its {name} failed: {type(exc).__name__}: {exc}") from None


def declared_page_sizes(spec: str) -> tuple[int, ...] | None:
    """The page sizes the factory ``spec`` declares, for a repro file (whose machine holds only the
    run's); ``None`` for an index, or a target that cannot be loaded."""
    try:
        caps = load_target(spec).capabilities
    except TargetError:
        return None
    caps = caps.engine if isinstance(caps, RouterCapabilities) else caps
    return tuple(caps.page_sizes) if isinstance(caps, Capabilities) else None


def check_target(target: Target) -> None:
    """Build one cache at each declared page size (or one index) and check it has the methods the
    suite will call (those its capabilities do not exclude). Raises :class:`TargetError` on the
    first problem."""
    if target.kind == "index":
        _check_index(target)
        return
    if target.kind == "router":
        _check_router(target)
        return
    if target.kind == "tenant_tree":
        _check_tenant_tree(target)
        return
    if target.kind == "tier":
        _check_tier(target)
        return
    if not target.capabilities.page_sizes_tested():
        raise TargetError(f"target {target.spec!r} declares page sizes {list(target.capabilities.page_sizes)}, none of "
                          f"them <= {MAX_PAGE_SIZE_TESTED}, the largest the suite runs")
    for page_size in target.capabilities.page_sizes_tested():
        try:
            # The first build may import an engine (torch, vLLM: 5-30 s, longer on a loaded machine): allowed
            # LOAD_TIMEOUT once, here; every later call, factory included, has the per-operation limit.
            with _alarm(max(op_timeout(), LOAD_TIMEOUT), f"factory(allocator, page_size={page_size}) while loading the target"):
                second = {"second_allocator": SlotAllocator(64)} if target.capabilities.second_pool is not None else {}
                cache = target.factory(SlotAllocator(64), page_size, **second)
        except Exception as exc:  # noqa: BLE001 - whatever the factory raises, the target is unusable
            raise TargetError(f"target {target.spec!r}: factory(allocator, page_size={page_size}) raised "
                              f"{type(exc).__name__}: {exc}") from exc
        missing = [m for m in required_methods(target.capabilities) if not callable(getattr(cache, m, None))]
        if missing:
            optional = {"evict_prefix": "supports_quarantine=False", "reset": "supports_reset=False"}
            hint = [f"{optional[m]} if it does not offer {m}" for m in missing if m in optional]
            raise TargetError(f"target {target.spec!r}: the cache it builds ({type(cache).__name__}) lacks "
                              f"{', '.join(missing)} (see radixcheck.properties.cache.contract"
                              + (f"; declare {'; '.join(hint)}, in its Capabilities)" if hint else ")"))
        if getattr(cache, "page_size", None) != page_size:
            raise TargetError(f"target {target.spec!r}: factory(page_size={page_size}) built a cache whose "
                              f"page_size is {getattr(cache, 'page_size', None)!r}")


def _check_router(target: Target) -> None:
    """A pair: its factory returns a RouterPair; its engine is a cache at each page size (that also
    publishes its events) and its index an index."""
    try:
        with _alarm(max(op_timeout(), LOAD_TIMEOUT), "factory() while loading the target"):
            pair = target.factory()
    except Exception as exc:  # noqa: BLE001
        raise TargetError(f"target {target.spec!r}: factory() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(pair, RouterPair):
        raise TargetError(f"target {target.spec!r}: a router pair's factory must return a RouterPair, got {type(pair).__name__}")
    caps = target.capabilities
    check_target(Target(f"{target.spec} (engine)", pair.engine, caps.engine))
    check_target(Target(f"{target.spec} (index)", pair.index, caps.index))
    with _alarm(max(op_timeout(), LOAD_TIMEOUT), "the engine's factory while loading the target"):
        engine = pair.engine(SlotAllocator(64), caps.engine.page_sizes_tested()[0])
    if not callable(getattr(engine, "take_published", None)) or not hasattr(engine, "tap_events"):
        raise TargetError(f"target {target.spec!r}: its engine ({type(engine).__name__}) does not publish its events "
                          "(take_published() and tap_events, see radixcheck.properties.index.router_contract)")


def _built(target: Target) -> Any:
    """What ``target.factory()`` (no arguments: an index or a tenant tree) builds, within the load limit."""
    try:
        with _alarm(max(op_timeout(), LOAD_TIMEOUT), "factory() while loading the target"):
            return target.factory()
    except Exception as exc:  # noqa: BLE001 - whatever the factory raises, the target is unusable
        raise TargetError(f"target {target.spec!r}: factory() raised {type(exc).__name__}: {exc}") from exc


def _check_tier(target: Target) -> None:
    """A tiered cache: built once per page size (its first write policy) in a tier world, with the
    tier contract's methods (``evict_prefix`` only if it declares ``supports_quarantine``, ``reset`` only
    with ``supports_reset``)."""
    from radixcheck.properties.tiers.world import TierWorld

    caps = target.capabilities
    needed = ["match_prefix", "load_back", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "evict_host",
              "evict_prefix", "transfer_done", "device_size", "host_size"]
    needed = [m for m in needed if caps.supports_quarantine or m != "evict_prefix"] + ["reset"] * caps.supports_reset
    if caps.second_pool is not None:  # a state pool's report, or a window's (the tier contract)
        needed.append("windows" if isinstance(caps.second_pool, SlidingWindow) else "states")
    if caps.lifecycle == "requests":  # its own request methods (the tier contract's "The request lifecycle on the tiers")
        needed += list(TIER_REQUEST_METHODS)
    for page_size in caps.page_sizes_tested():
        try:
            with _alarm(max(op_timeout(), LOAD_TIMEOUT), f"factory(..., page_size={page_size}) while loading the target"):
                cache = TierWorld(target.factory, page_size, caps.write_policies[0]).cache
        except Exception as exc:  # noqa: BLE001 - whatever the factory raises, the target is unusable
            raise TargetError(f"target {target.spec!r}: factory(allocator, host_pool, controller, page_size={page_size}, "
                              f"write_policy={caps.write_policies[0]!r}) raised {type(exc).__name__}: {exc}") from exc
        missing = [m for m in needed if not callable(getattr(cache, m, None))]
        if missing:
            raise TargetError(f"target {target.spec!r}: the tiered cache it builds ({type(cache).__name__}) lacks "
                              f"{', '.join(missing)} (see radixcheck.properties.tiers.contract)")
        if getattr(cache, "page_size", None) != page_size:
            raise TargetError(f"target {target.spec!r}: factory(page_size={page_size}) built a cache whose "
                              f"page_size is {getattr(cache, 'page_size', None)!r}")


def _check_index(target: Target) -> None:
    index = _built(target)
    missing = [m for m in required_index_methods(target.capabilities) if not callable(getattr(index, m, None))]
    if missing:
        optional = {"sizes": "reports_sizes=False", "dump": "offers_dump=False", "resident": "reports_resident=False"}
        hint = [optional[m] for m in missing if m in optional]
        raise TargetError(f"target {target.spec!r}: the index it builds ({type(index).__name__}) lacks {', '.join(missing)} "
                          "(see radixcheck.properties.index.contract"
                          + (f"; if it does not offer them, declare {', '.join(hint)} in its IndexCapabilities)" if hint else ")"))


def _check_tenant_tree(target: Target) -> None:
    tree = _built(target)
    missing = [m for m in required_tenant_tree_methods(target.capabilities) if not callable(getattr(tree, m, None))]
    if missing:
        optional = {"remove_tenants": "supports_removal=False", "evict": "supports_eviction=False", "sizes": "reports_sizes=False",
                    "node_count": "reports_nodes=False"}
        hint = [optional[m] for m in missing if m in optional]
        raise TargetError(f"target {target.spec!r}: the tree it builds ({type(tree).__name__}) lacks {', '.join(missing)} "
                          "(see radixcheck.properties.tenant_tree.contract"
                          + (f"; if it does not offer them, declare {', '.join(hint)} in its TenantTreeCapabilities)" if hint else ")"))


def op_timeout() -> float:
    """The per-operation limit in seconds of CPU time (``RADIXCHECK_OP_TIMEOUT``, default 5)."""
    return float(os.environ.get(TIMEOUT_ENV, DEFAULT_OP_TIMEOUT))


SHRINK_LIMIT_FRACTION = 0.1  # a shrink candidate's calls get a tenth of the per-operation limit (shrinking_limits)
_shrinking = False


@contextmanager
def shrinking_limits():
    """Within this block (Hypothesis shrinking a failure that is not a hang: a hang is never shrunk),
    each guarded call gets :data:`SHRINK_LIMIT_FRACTION` of the per-operation limit, a call that
    overruns it is not remembered as hung, and the step it ran in rejects the candidate
    (:func:`rejects_a_candidate`). A program the shrinker tries may reach a hang the failure did not
    (an evict after the panic): it cost the whole limit, 5 s, and the shrinker, which takes any smaller
    failure, slipped to the hang and reported it instead of the failure found. Rejecting only loses a
    candidate, so a correct call slower than the shrink's limit costs the shrink, never the verdict."""
    global _shrinking
    previous, _shrinking = _shrinking, True
    try:
        yield
    finally:
        _shrinking = previous


def rejects_a_candidate(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a step of a shrink candidate, makes Hypothesis drop that candidate
    (``hypothesis.reject()``) instead of taking it as a failure: a hang met while shrinking."""
    return _shrinking and caused_by_hang(exc)


def call_limit() -> float:
    """A guarded call's CPU limit: the per-operation limit, or its shrink share (:func:`shrinking_limits`);
    what a wire client judges its server's CPU time by too."""
    return op_timeout() * SHRINK_LIMIT_FRACTION if _shrinking else op_timeout()


def call_wall_limit() -> float:
    """A guarded call's wall-clock backstop (:func:`op_wall_timeout`, or its shrink share)."""
    return _wall_limit(call_limit())


def op_wall_timeout() -> float:
    """The wall-clock backstop in seconds (``RADIXCHECK_OP_WALL_TIMEOUT``): a call that blocks
    without computing (a lock, a sleep, a socket) is cut off here. By default generous, 12 times
    the CPU limit and at least 60 s, so a correct call on a machine loaded many times over its
    cores (it waits for a CPU most of the time) is not mistaken for a hang."""
    wall = os.environ.get(WALL_TIMEOUT_ENV)
    return float(wall) if wall else max(WALL_BACKSTOP_MIN, WALL_BACKSTOP_FACTOR * op_timeout())


# The limit is judged by the CPU time the call spends (time.process_time: this process's user and
# system time), so a loaded machine, which only stretches a call's wall clock, does not make a
# correct call a hang; the wall clock is the backstop for a call that blocks. One wall-clock timer
# (ITIMER_REAL) ticks through the call and each tick compares both clocks with their limits. A CPU
# timer (ITIMER_PROF) would be simpler, but while one is armed Linux reads the process's CPU clock
# only at scheduler ticks (~4 ms steps here), which blinds the cost benchmark that times each call.
# The ticking is also what makes the limit sturdy: an OperationTimeout raised inside a gc callback
# or a __del__, or cleared by a C extension, is swallowed there, and the next tick raises it again.
# Not while it is still on its way out, though: the except and finally clauses it runs through are
# cleanup (the wire adapter killing and reaping a blocked server), and a tick that raised in them cut
# that short (a loaded machine left the server running: s59). They get the call's limits once more.
MAX_TICK = 0.25  # seconds between looks at the clocks once the CPU limit's time has passed


def _tick(cpu_limit: float) -> float:
    return max(0.01, min(MAX_TICK, cpu_limit / 4))


class _Call:
    """The running guarded call: its name, its CPU limit, its clocks at its start, and (while it waits
    for another process to compute: :func:`computed_elsewhere`) who computes and their CPU time."""

    __slots__ = ("what", "cpu_limit", "cpu_start", "wall_start", "elsewhere", "stopped", "stopped_at", "runnable_look")

    def __init__(self, what: str, cpu_limit: float) -> None:
        self.what, self.cpu_limit = what, cpu_limit
        self.cpu_start, self.wall_start = time.process_time(), time.monotonic()
        # who computes elsewhere, their CPU time and their run-queue wait (s; None: unreadable)
        self.elsewhere: tuple[str, Callable[[], float | None], Callable[[], float | None] | None] | None = None
        self.stopped: str | None = None  # the limit's message, once raised: a later tick raises it again, unchanged
        self.stopped_at = (0.0, 0.0)  # the clocks (CPU, wall) when it was first raised: its cleanup's limits count from there
        self.runnable_look: tuple[float, float, float] | None = None  # past the backstop: (run-queue wait, CPU, wall) at the last look


@contextmanager
def computed_elsewhere(who: str, cpu_spent: Callable[[], float | None],
                       waited: Callable[[], float | None] | None = None):
    """A block of a guarded call in which another process computes the answer (a wire server):
    if the wall-clock backstop stops the call there, its message gives that process's CPU time
    (``cpu_spent()``, seconds; ``None`` if it cannot be read), not this one's, which only waited.
    ``waited()``: that process's run-queue wait (s), so a process starved of CPU on a loaded machine
    is judged as a starved call here is (:func:`_waits_for_a_cpu`), not as one that blocks."""
    call = _current_call
    if call is None:
        yield
        return
    outer, call.elsewhere = call.elsewhere, (who, cpu_spent, waited)
    try:
        yield
    finally:
        call.elsewhere = outer


def _backstop_computed(call: _Call, cpu: float) -> str:
    """What the backstop's message says was computed: by the process that was computing the answer."""
    if call.elsewhere is None:
        return f"it computed for only {cpu:.1f} s"
    who, cpu_spent = call.elsewhere[:2]
    try:
        spent = cpu_spent()
    except Exception:  # noqa: BLE001 - a message: never a second failure inside the signal handler
        spent = None
    if spent is None:
        return (f"{who}'s CPU time cannot be read here, so only the wall clock was judged; radixcheck's own process, "
                f"which waited for its answer, computed for {cpu:.1f} s")
    return f"{who} computed for only {spent:.1f} s of its CPU time on it"


_current_call: _Call | None = None  # the running guarded call, for the timer's checks and message
_handler_installed = False


def _wall_limit(cpu_limit: float) -> float:
    """A guarded call's wall-clock backstop: the operations' (:func:`op_wall_timeout`), scaled to
    the call's own CPU limit, so a target's load (``LOAD_TIMEOUT`` of CPU: importing an engine)
    keeps the operations' ratio of wall clock to CPU time; a fixed 120 s failed it on a machine
    loaded ~8 times over its cores (the matrix's HiCache rows, session 56)."""
    op = op_timeout()
    scale = cpu_limit / op if op > 0 else 1.0
    return max(cpu_limit, op_wall_timeout() * (scale if _shrinking else max(1.0, scale)))


def _unwinding(call: _Call) -> bool:
    """Whether the call's OperationTimeout is still on its way out: an except or finally clause runs with it
    (or with an exception raised inside such a clause), within the call's limits counted again from its raise."""
    exc, hops = sys.exc_info()[1], 0
    while exc is not None and not (isinstance(exc, OperationTimeout) and exc.args == (call.stopped,)):
        exc, hops = exc.__context__, hops + 1
        if hops > 64:  # a chain made by hand may loop
            return False
    if exc is None:
        return False
    cpu, wall = call.stopped_at
    return time.process_time() - cpu < call.cpu_limit and time.monotonic() - wall < _wall_limit(call.cpu_limit)


STARVED_CAP = 10  # in backstops: a call still waiting for a CPU then is stopped all the same
SCHEDSTAT = "/proc/thread-self/schedstat"  # Linux: CPU time, run-queue wait (ns), time slices


def _run_queue_wait() -> float | None:
    """Seconds this thread has spent runnable but waiting for a CPU (``None`` where unreadable)."""
    try:
        with open(SCHEDSTAT) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _waits_for_a_cpu(call: _Call, now: tuple[float, float], capped: bool) -> bool:
    """Past the wall-clock backstop: whether the call, over the ticks since the last look, spent
    most of its wall time computing or waiting for a CPU (a machine loaded many times over its
    cores: NU trial, an O(n) evict at 2.2 s of CPU in 60 s of wall clock was called a call that
    blocks) rather than blocked (a lock, a sleep, a socket). The first look opens the window (one
    tick more); unreadable, or past ``STARVED_CAP`` backstops, it is the backstop as before."""
    waited = None if capped else _run_queue_wait()
    if waited is None:
        return False
    cpu = now[0]
    if call.elsewhere is not None:  # another process computes the answer: its time counts too (the two take turns)
        _, their_cpu, their_wait = call.elsewhere
        try:
            theirs = (their_cpu(), their_wait() if their_wait is not None else None)
        except Exception:  # noqa: BLE001 - inside the signal handler: unreadable is the backstop as before
            return False
        if theirs[0] is None or theirs[1] is None:
            return False
        waited, cpu = waited + theirs[1], cpu + theirs[0]
    last, call.runnable_look = call.runnable_look, (waited, cpu, now[1])
    if last is None:
        return True
    busy = (waited - last[0]) + (cpu - last[1])
    return busy >= 0.5 * (now[1] - last[2])


def _on_limit(signum: int, frame: Any) -> None:
    call = _current_call
    if call is None or (frame is not None and frame.f_code in _BOOKKEEPING):
        return  # no call runs, or the timer is being armed or disarmed: not the target's time
    if call.stopped is not None:  # raised already: again if it was swallowed, not while its cleanup runs
        if _unwinding(call):
            return
        raise OperationTimeout(call.stopped)
    now = time.process_time(), time.monotonic()
    cpu, wall = now[0] - call.cpu_start, now[1] - call.wall_start
    wall_limit = _wall_limit(call.cpu_limit)  # read here, not per call: a call's start is kept cheap
    if cpu >= call.cpu_limit:
        stopped = (f"{call.what} did not return within {call.cpu_limit:g} s of CPU time (it computed for {cpu:.1f} s, "
                   f"{wall:.1f} s of wall-clock time; set {TIMEOUT_ENV} to change the limit)")
    elif wall >= wall_limit:
        if _waits_for_a_cpu(call, now, wall >= STARVED_CAP * wall_limit):
            return  # runnable all along, on a loaded machine: not a call that blocks
        stopped = (f"{call.what} did not return within {wall_limit:g} s of wall-clock time, the backstop for a call that "
                   f"blocks ({_backstop_computed(call, cpu)}; set {WALL_TIMEOUT_ENV} to change it)")
    else:
        return
    call.stopped_at, call.stopped = now, stopped  # its clocks first: a tick that sees it stopped judges the cleanup by them
    raise OperationTimeout(stopped)


def _unraisable(previous: Callable[[Any], Any]) -> Callable[[Any], None]:
    """A ``sys.unraisablehook`` that drops the limit's own interrupt where Python swallowed it (a gc callback,
    a ``__del__``: the next tick raises it again, so printing "Exception ignored in ..." on a user's stderr tells
    nothing) and hands everything else to ``previous``."""
    def hook(unraisable: Any) -> None:
        stopped = _current_call.stopped if _current_call is not None else None
        if isinstance(unraisable.exc_value, OperationTimeout) and stopped is not None and unraisable.exc_value.args == (stopped,):
            return
        previous(unraisable)
    return hook


@contextmanager
def alarm_handler():
    """Install the time limit's SIGALRM handler once for a block of many guarded calls (a state
    machine run), and put the previous one back after; installing it per call costs ~30 us. The
    block's ``sys.unraisablehook`` drops the limit's interrupts that Python swallowed (:func:`_unraisable`)."""
    global _handler_installed
    if threading.current_thread() is not threading.main_thread() or _handler_installed:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_limit)
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    _handler_installed = True
    try:
        yield
    finally:
        _handler_installed = False
        signal.signal(signal.SIGALRM, previous)
        sys.unraisablehook = previous_hook


def _set_timer(first: float, tick: float) -> float:
    """Arm the timer (or, with zero, stop it): it fires after ``first`` s, then every ``tick`` s. What it had left."""
    left, _ = signal.setitimer(signal.ITIMER_REAL, first, tick if first else 0)
    return left


class _Alarm:
    """The timer of one guarded call. A class, not a generator, so that the code that arms and
    disarms it is known (_BOOKKEEPING): a tick there raises nothing."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds, self.what = seconds, what
        self.armed = False
        self.handlers: Any = None
        self.outer: _Call | None = None

    def __enter__(self) -> None:
        global _current_call
        if threading.current_thread() is not threading.main_thread() or self.seconds <= 0:
            return  # signals only reach the main thread; elsewhere run unguarded
        if not _handler_installed:
            self.handlers = alarm_handler()
            self.handlers.__enter__()
        self.outer = _current_call  # a guarded call made inside another (an adapter's own helper)
        _current_call = _Call(self.what, self.seconds)
        _set_timer(self.seconds, _tick(self.seconds))  # CPU time never runs ahead of one thread's wall clock
        self.armed = True

    def __exit__(self, *exc: object) -> None:
        global _current_call
        if self.armed:
            _current_call = self.outer
            if self.outer is None:
                _set_timer(0, 0)
            else:  # the outer call's clocks kept running (the inner call is part of it): let the ticks judge it again
                tick = _tick(self.outer.cpu_limit)
                _set_timer(tick, tick)
        if self.handlers is not None:
            self.handlers.__exit__(None, None, None)


_BOOKKEEPING = {_Alarm.__enter__.__code__, _Alarm.__exit__.__code__, _set_timer.__code__}  # where _on_limit never raises


def _alarm(seconds: float, what: str) -> _Alarm:
    return _Alarm(seconds, what)


@contextmanager
def outside_the_limit():
    """A block inside a guarded call that the call's per-operation limit does not count: a wire
    server restarted by the factory, whose ``init`` has a limit of its own (WIRE.md). A slow
    restart on a loaded machine is then never a hang of ``factory``. The call's clocks are paused
    for the block: neither its CPU time nor its wall-clock time counts."""
    call = _current_call
    if threading.current_thread() is not threading.main_thread() or call is None:
        yield  # no timer runs here (signals only reach the main thread)
        return
    left = _set_timer(0, 0)
    cpu, wall = time.process_time(), time.monotonic()
    try:
        yield
    finally:
        call.cpu_start += time.process_time() - cpu
        call.wall_start += time.monotonic() - wall
        if left > 0:
            _set_timer(left, _tick(call.cpu_limit))


_budget: BudgetWatch | None = None  # the time_budget block's clocks: past it, calls raise BudgetSpent


@contextmanager
def time_budget(seconds: float, wall_clock: bool = False):
    """Within this block, a call into the target once ``seconds`` of CPU time are spent raises
    :class:`BudgetSpent` (:mod:`radixcheck.properties.budget_clock`: this process's CPU and a wire
    server's), or once its wall-clock backstop passes (a target that sleeps or blocks). With
    ``wall_clock``, ``seconds`` are of wall-clock time. A budget of 0 or less is spent at once."""
    global _budget
    previous, _budget = _budget, (WallWatch if wall_clock else BudgetWatch)(seconds)
    try:
        yield _budget  # its clocks: what the block spent, read after it
    finally:
        _budget = previous


def check_budget(what: str) -> None:
    """Raise :class:`BudgetSpent` if the :func:`time_budget` block this runs in has run out of time: the
    stop check of code that makes no :func:`guarded` call itself (a state machine's step: a tier
    world calls its cache directly)."""
    if _budget is not None and _budget.spent():
        raise BudgetSpent(what)


_meter: Callable[[str, tuple[Any, ...], float], None] | None = None  # metering(): told each call's CPU time
_metered: tuple[str, ...] = ()  # the calls it is told of


@contextmanager
def metering(observe: Callable[[str, tuple[Any, ...], float], None], calls: tuple[str, ...]):
    """Within this block, each :func:`guarded` call named in ``calls`` that returns tells ``observe(what, args,
    seconds)`` the CPU time its thread spent (the production world's step-cost watch, ``radixcheck.properties.cache.step_cost``).
    ``observe`` only records: a verdict raised from it would read as the call's own exception."""
    global _meter, _metered
    previous, (_meter, _metered) = (_meter, _metered), (observe, calls)
    try:
        yield
    finally:
        _meter, _metered = previous


_hung: dict[Any, tuple[str, int | None]] = {}  # the code that hung (a cache class and method, or a function) -> how, and at which call
_calls: dict[Any, int] = {}  # the calls of each code since the example began (new_example)
_positions = False  # whether new_example() marked where the example began: a hang is then known by its position
_run: int | None = None  # the run of a program begun last (new_run), None once a test or search starts (forget_hangs)
_runs_begun = 0


def forget_hangs() -> None:
    """A new test (or state-machine run) starts: a method that hung in an earlier one is called
    again (one slow call on a loaded machine must not fail every later test of the same class)."""
    global _positions, _run
    _hung.clear()
    _calls.clear()
    _positions = False
    _run = None


def new_example() -> None:
    """An example (one run of a state machine's program) begins: calls are counted from here, so a
    replay of the program that hung stops at the very call that hung (:func:`guarded`)."""
    global _positions
    _calls.clear()
    _positions = True
    new_run()


def new_run() -> None:
    """A run of one program begins: an example, or radixcheck's replay of one (a reduction's, a
    root cause's). What a target keeps for a run (a wire server's caches) ends when the next run
    begins, at a point the stream fixes, not when the garbage collector happens to free it."""
    global _run, _runs_begun
    _runs_begun += 1
    _run = _runs_begun


def current_run() -> int | None:
    """Which run is going on (a number that changes with each :func:`new_run`), or None outside one."""
    return _run


def _code_of(fn: Callable[..., Any]) -> Any:
    """Which code ``fn`` runs: (class, method name) for a bound method, else the function itself."""
    return (type(fn.__self__), fn.__name__) if hasattr(fn, "__self__") else fn


def _metered_call(what: str, fn: Callable[..., T], args: tuple[Any, ...], keywords: dict[str, Any]) -> tuple[T, float]:
    """``fn``'s result and the CPU time its thread spent, under the per-operation limit, with the
    collector off: a collection the call's allocations set off walks the whole heap, not the call's cost.

    The collector is switched back on after the call's timer is off: once a call has hung, every
    tick raises its interrupt again until the call is left, and one that landed before
    ``gc.enable()`` (the restore used to run inside the timer) left the collector off for the rest
    of the process. Not part of _BOOKKEEPING: a tick landing here as a C call returns past the limit
    must still raise."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _alarm(call_limit(), what):
            started = time.thread_time()  # this thread's: an engine's background threads are not the call's cost
            result = fn(*args, **keywords)
            return result, time.thread_time() - started
    finally:
        if collecting:
            gc.enable()


def guarded(what: str, fn: Callable[..., T], *args: Any, **keywords: Any) -> T:
    """Call ``fn(*args, **keywords)`` (the keyword: ``namespace=``) under the per-operation time limit (and the shrink budget, if any).

    Once a call of a target's method has hung, a replay of the same program (Hypothesis replays a
    failing example once more to report it) fails at once at that same call, the n-th of that
    method since the example began, with the same error: every replay of a hang would otherwise
    cost the whole limit. The calls before it run as before (an earlier ``evict`` that returned is
    not the one that hung). Outside a state machine (no :func:`new_example`), every later call of
    the method fails at once."""
    check_budget(what)
    owner = _code_of(fn)
    _calls[owner] = at = _calls.get(owner, 0) + 1
    if owner in _hung:
        how, where = _hung[owner]
        if where is None:
            raise OperationTimeout(f"{what} not called: it already hung ({how})")
        if where == at:
            raise OperationTimeout(how)  # the call that hung, replayed: not called again
    try:
        if _meter is None or what not in _metered:
            with _alarm(call_limit(), what):
                return fn(*args, **keywords)
        result, seconds = _metered_call(what, fn, args, keywords)
        _meter(what, args, seconds)
        return result
    except OperationTimeout as exc:
        if not _shrinking:  # a shrink's shorter limit judges no call hung for the replay
            _hung.setdefault(owner, (str(exc), at if _positions else None))
        raise


class GuardedCache:
    """A cache whose every method call goes through :func:`guarded` (for tests that drive a
    target outside the state machine, such as the serving protocol)."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache
        self.page_size = cache.page_size

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._cache, name)
        return lambda *args: guarded(name, method, *args)
