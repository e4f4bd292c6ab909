"""End to end: an engine's own KV events, fed to a router's index, must describe the engine's cache.

:class:`RouterFollowsEngineMachine` is the cache machine
(:class:`~radixcheck.properties.cache.machine.RadixCacheMachine`, every rule and oracle) driving a
real engine that publishes KV events (vLLM's ``KVCacheManager``: its ``BlockStored`` /
``BlockRemoved`` / ``AllBlocksCleared``), plus one rule vLLM's scheduler takes on its own: a
repeated block-aligned prompt, whose last block vLLM recomputes and caches as a second copy
(``repeat_aligned_prompt``). After every step the events the engine published go, as its
publisher sends them (deduplicated first, as Dynamo's ``EventDedupFilter`` does, where the pair
says so), to the router index under test and to the index model (oracle 7). Then, for every
sequence the machine knows, three answers must agree:

* the **engine's** own match (the prefix it would reuse; vLLM's lookup changes nothing),
* the **events'**: the model's overlap, what a router that mirrors the events exactly answers,
* the **router's**: the index's ``find_matches`` for the request's tokens hashes.

Engine and events disagree: the engine's events do not describe its cache, a finding in the
engine's events (``EngineEventsViolation``, oracle 9). Events and router disagree: the index does
not follow its events, a finding in the index (``IndexViolation``, oracle 7). The engine is worker
1, rank 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import currently_in_test_context, note
from hypothesis.stateful import invariant, precondition, rule

from radixcheck.oracles.kv_index import IndexModel
from radixcheck.oracles.violations import (
    ContractViolation,
    EngineEventsViolation,
    IndexViolation,
    TenantIsolationViolation,
    shown,
)
from radixcheck.properties.cache.machine import CUTS, UNSAID, RadixCacheMachine
from radixcheck.properties.cache.tenants import TenantMachine
from radixcheck.properties.index.contract import AllBlocksCleared, BlockRemoved, BlockStored, KvEvent
from radixcheck.properties.index.router_contract import RouterCapabilities, RouterPair
from radixcheck.properties.target import OperationTimeout, guarded

WORKER = (1, 0)


class DedupFilter:
    """What Dynamo's worker-side ``EventDedupFilter`` does to a rank's stream (ai-dynamo/dynamo#8012,
    described there): stores pass and count each block hash; a remove passes only for hashes whose
    count returns to 0; a clear resets. (Our own few lines, written from that description.)"""

    def __init__(self) -> None:
        self.stores: Counter[int] = Counter()

    def __call__(self, event: KvEvent) -> KvEvent | None:
        if isinstance(event, BlockStored):
            self.stores.update(b.block_hash for b in event.blocks)
            return event
        if isinstance(event, BlockRemoved):
            gone = []
            for h in event.block_hashes:
                self.stores[h] -= 1
                if self.stores[h] <= 0:
                    del self.stores[h]
                    gone.append(h)
            return BlockRemoved(tuple(gone)) if gone else None
        self.stores.clear()
        return event


def _can_repeat(self: RouterFollowsEngineMachine) -> bool:
    return callable(getattr(self.cache, "serve_aligned", None))


class RouterFollowsEngineMachine(RadixCacheMachine):
    """Override ``pair`` and ``router_capabilities`` (see :func:`router_machine_for`)."""

    pair: RouterPair
    router_capabilities: RouterCapabilities
    repro_replays_calls = False  # its repro file reruns radixcheck's test (no plain-call writer)

    def __init__(self) -> None:
        super().__init__()
        self.cache.tap_events = True
        self.index = guarded("index factory", type(self).pair.index)
        self.events_model = IndexModel(counts_copies=self.router_capabilities.index.counts_copies)
        self.dedup = DedupFilter() if self.router_capabilities.deduplicated else None
        self.events_sent = 0

    @precondition(_can_repeat)
    @rule(base=RadixCacheMachine.sequences, cut=CUTS)
    def repeat_aligned_prompt(self, base: tuple[int, ...], cut: Any) -> None:
        """A cached prompt arrives again, block-aligned: vLLM's scheduler caps the hit one token short,
        recomputes the last block and caches it again, a second copy under the same hash. Nothing
        changes in what the cache matches (the contract's model is untouched)."""
        keep = cut.tokens(self.block) // self.page_size * self.page_size
        tokens = base[:keep]
        if not tokens or len(self.model.longest_cached(tokens)) * self.page_size != len(tokens):
            return
        guarded("serve_aligned", self.cache.serve_aligned, list(tokens))
        note(f"#   serve_aligned({shown(tokens)}): a second copy of its last block")

    def _feed_router(self) -> None:
        for event in type(self).pair.events(self.cache.take_published(), self.page_size):
            sent = self.dedup(event) if self.dedup else event
            if sent is None:
                continue
            self.events_sent += 1
            if currently_in_test_context():
                note(f"#   published {self.events_sent}: {sent}")
            try:
                guarded("apply_event", self.index.apply_event, WORKER[0], WORKER[1], sent)
            except (OperationTimeout, ContractViolation):
                raise
            except Exception as exc:  # noqa: BLE001 - the index refused an event the engine published
                self._model_takes(sent)
                raise IndexViolation(f"the router refused event {self.events_sent} the engine published, {sent}: "
                                     f"{type(exc).__name__}: {exc}") from exc
            self._model_takes(sent)

    def _model_takes(self, event: KvEvent) -> None:
        """The model takes the event (it raises EngineEventsViolation for one that names a block the
        engine's events do not hold: a finding in the engine's events)."""
        model = self.events_model
        if isinstance(event, BlockStored):
            model.store(WORKER, event.parent_hash, [(b.block_hash, b.tokens_hash) for b in event.blocks])
        elif isinstance(event, BlockRemoved):
            model.remove(WORKER, event.block_hashes)
        elif isinstance(event, AllBlocksCleared):
            model.clear(WORKER)

    @invariant()
    def router_view(self) -> None:
        self.router_follows_engine()

    def _engine_hit(self, tokens: list[int], namespace: Any = UNSAID) -> int:
        """Tokens the engine itself would reuse under ``namespace``: ``cached_prefix_length`` where the
        engine offers it (a match that counts as a use would disturb the cache machine's recency), else
        its match (vLLM's lookup changes nothing)."""
        keywords = {} if namespace is UNSAID else {"namespace": namespace}
        peek = getattr(self.cache, "cached_prefix_length", None)
        if callable(peek):
            return int(guarded("cached_prefix_length", peek, tokens, **keywords))
        return len(guarded("match_prefix", self.cache.match_prefix, tokens, **keywords)[0])

    def _hashes(self, tokens: list[int], namespace: Any) -> list[int]:
        """The tokens hashes a router computes for a request (with its namespace, for an engine with namespaces)."""
        if not self.capabilities.namespaces:
            return type(self).pair.tokens_hashes(tokens, self.page_size)
        return type(self).pair.tokens_hashes(tokens, self.page_size, None if namespace is UNSAID else namespace)

    def router_follows_engine(self) -> None:
        """Engine, events and router agree on every known sequence, each under its own namespace (see
        the module docstring)."""
        self._feed_router()
        probes = [(UNSAID, tokens) for tokens in self.known] + list(self.known_elsewhere)
        for namespace, tokens in probes:
            aligned = list(tokens[: len(tokens) // self.page_size * self.page_size])
            if not aligned:
                continue
            engine = self._engine_hit(aligned, namespace) // self.page_size
            hashes = self._hashes(aligned, namespace)
            events = self.events_model.overlaps(hashes).get(WORKER, 0)
            router = guarded("find_matches", self.index.find_matches, hashes).get(WORKER, 0)
            if self.capabilities.namespaces and max(events, router) > engine:
                self._check_isolation(aligned, namespace, engine, events, router, probes)
            if events != engine:
                raise EngineEventsViolation(
                    f"for {shown(aligned)}, the engine matches {engine} block(s) but its events say it holds {events} "
                    f"(a router mirroring them exactly would route as if it held {events}): the engine's events are wrong")
            if router != events:
                raise IndexViolation(f"for {shown(aligned)}, the router's index matches {router} block(s) where the engine's "
                                     f"events (and the engine) say {events}: the index does not follow its events")

    def _check_isolation(self, tokens: list[int], namespace: Any, engine: int, events: int, router: int,
                         probes: list[tuple[Any, tuple[int, ...]]]) -> None:
        """The router (or the events it reads) counts more of ``tokens`` under ``namespace`` than the
        engine holds there: if another namespace holds that much of them, the router's answer for
        this tenant counts that tenant's blocks (oracle 10, on the router's view)."""
        said = max(events, router)
        for other in dict.fromkeys(n for n, _ in probes):
            if other == namespace or (other is UNSAID and namespace is None) or (namespace is UNSAID and other is None):
                continue
            held = self._engine_hit(tokens, other) // self.page_size
            if held >= said:
                where = "the engine's events (and so any router mirroring them)" if events > engine else "the router's index"
                shown_ns = None if namespace is UNSAID else namespace
                raise TenantIsolationViolation(
                    f"for {shown(tokens)} under namespace {shown_ns!r}, {where} count(s) {said} block(s) where the engine "
                    f"holds {engine} under it: they are the blocks namespace {None if other is UNSAID else other!r} holds "
                    f"({held}); a request of one tenant is routed by another's KV")


class TenantRouterMachine(RouterFollowsEngineMachine, TenantMachine):
    """The end-to-end machine with the tenants' rules, for an engine with namespaces: every request
    under its namespace, and the router asked for each namespace's requests with that namespace."""


def router_machine_for(pair_factory: Callable[[], RouterPair], capabilities: RouterCapabilities, page_size: int,
                       name: str) -> type[RouterFollowsEngineMachine]:
    """A machine class for one pair at one page size (its name keys Hypothesis's database)."""
    pair = pair_factory()
    cls_name = f"{name}_router_page{page_size}".replace(".", "_").replace(":", "_").replace("-", "_")
    base = TenantRouterMachine if capabilities.engine.namespaces else RouterFollowsEngineMachine
    return type(cls_name, (base,), {
        "factory": staticmethod(pair.engine),
        "capabilities": capabilities.engine,
        "page_size": page_size,
        "pair": pair,
        "router_capabilities": capabilities,
    })
