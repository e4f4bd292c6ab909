"""The bounded production-scale stories of a tier world: a wide tree and a long conversation.

A tier cache's small worlds (the tier machine) hold tens of pages; bugs that live only at
production scale pass them: an eviction that scans every node per leaf it frees (O(n) a leaf), a
lock walk that recurses up the path (a Python RecursionError past ~1000 pages deep). These two
stories build that world through the ordinary :class:`~radixcheck.properties.tiers.world.TierWorld`
(every call judged by the tier model's incremental hooks, every call under the per-operation limit,
``RADIXCHECK_OP_TIMEOUT``), with only what the target declares (its write policy, its second pool,
its lifecycle world):

1. **A wide tree.** :data:`WIDE_REQUESTS` requests on a few shared system prompts, each with its own
   question (served, finished, their backups completed), then memory pressure: one ``evict`` of
   everything on device, which must free at least :data:`MASS_EVICTION_LEAVES` leaves. While the
   tree grows, the CPU time of every ``match_prefix`` and ``insert`` is watched, as in the plain
   production world (:mod:`radixcheck.properties.cache.step_cost`): a cache whose lookup walks the
   tree (a host part searched for among every node) fails here with the figures, not after minutes.
2. **A long conversation.** One conversation of :data:`DEEP_TURNS` turns (fewer where the target
   declares ``TierCapabilities(conversation_turns=T)``: its inserts' own cost), each turn a page more:
   served whole (match and ``inc_lock_ref`` along the whole path), then finished (insert, then
   ``dec_lock_ref``), so its path is :data:`DEEP_TURNS` pages deep. Not watched: each turn sends
   the whole path, so calls of one size meet one size of tree (nothing to compare), and their work
   is the path's by design.

3. **The flush.** With ``supports_reset`` declared, the world ends as the plain production world
   does (:mod:`radixcheck.properties.cache.flush`): every transfer lands, then one ``reset``,
   checked on both tiers (:meth:`~radixcheck.properties.tiers.world.TierWorld.reset`: no slot left
   on device or host, both sizes 0). A reset that walks the 1,200-page path recursively, or keeps
   the host tier's pages, fails here.

The audit runs both (``radixcheck.properties.conformance.test_tier_machine``: the wide tree in each
declared write policy, the conversation in the first) and so does ``python -m
radixcheck.reports.tier_scale``, before its random traffic: one place, one world. A
failure carries a note naming the story, the tree's size and the limit.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from radixcheck.properties.cache.flush import FLUSH, flush_world
from radixcheck.properties.cache.step_cost import WATCHED, StepCostWatch
from radixcheck.properties.target import guarded, metering, op_timeout
from radixcheck.properties.tiers.requests import world_class_for
from radixcheck.properties.tiers.world import TierWorld

WIDE_REQUESTS = 1500  # ~1500 leaves: a scan per evicted leaf costs ~10^6 node visits, over the limit
MASS_EVICTION_LEAVES = 500  # the one eviction under memory pressure frees at least this many leaves
DEEP_TURNS = 1200  # pages deep: past Python's recursion limit (1000 frames) with room for the caller's stack
SYSTEM_PROMPTS = 4
VOCABULARY = 50_000


def world_for(factory: Callable[..., Any], page_size: int, policy: str, seed: int = 0,
              device_slots: int | None = None, host_slots: int | None = None) -> TierWorld:
    """A tier world big enough that neither story evicts before its memory pressure (unless asked
    for smaller pools), of the kind the target's lifecycle calls for (:func:`world_class_for`)."""
    device = device_slots or (WIDE_REQUESTS * 24 + DEEP_TURNS + 64) * page_size
    host = host_slots or 2 * device
    return world_class_for(getattr(factory, "tier_capabilities", None))(factory, page_size, policy, device_slots=device,
                                                                       host_slots=host, seed=seed)


def _settle(world: TierWorld, rng: random.Random) -> None:
    """The backups in flight complete, in random order (a real controller's do)."""
    pending = world.pending()
    rng.shuffle(pending)
    for number in pending:
        if any(t.number == number for t in world.controller.pending):
            world.complete(number)  # said: a repro file replays the world's log


def wide_tree(world: TierWorld, rng: random.Random, requests: int = WIDE_REQUESTS) -> int:
    """Story 1 (module docstring); returns the leaves the mass eviction had to free at least."""
    p = world.page_size
    prompts = [[rng.randrange(VOCABULARY) for _ in range(4 * p)] for _ in range(SYSTEM_PROMPTS)]
    # the tree's size as the suite's pools count it (O(1)): slots in use on device and on host
    watch = StepCostWatch(lambda: len(world.device.in_use) + len(world.host.in_use))
    with metering(watch.observe, WATCHED):
        for i in range(requests):
            question = [rng.randrange(VOCABULARY) for _ in range(rng.randint(8, 16) * p)]
            world.serve(prompts[i % SYSTEM_PROMPTS] + question, load=True)
            world.finish()
            if i % 64 == 63:
                _settle(world, rng)
            if watch.due:
                watch.check()
        watch.check(final=True)
    _settle(world, rng)
    world.check()
    on_device = int(world.cache.device_size())
    leaves = on_device // (16 * p)  # each question's leaf holds at most 16 pages
    if leaves < MASS_EVICTION_LEAVES:
        raise AssertionError(f"radixcheck: the wide tree holds {on_device} tokens on device, too few for an eviction "
                             f"of {MASS_EVICTION_LEAVES} leaves (is the world too small?)")
    world.evict(on_device)
    _settle(world, rng)
    world.check()
    return leaves


def long_conversation(world: TierWorld, rng: random.Random, turns: int = DEEP_TURNS) -> None:
    """Story 2 (module docstring): each turn is served on the whole history, then adds a page."""
    p = world.page_size
    history = [rng.randrange(VOCABULARY) for _ in range(p)]
    world.serve(history)
    world.finish()
    for turn in range(2, turns + 1):
        history = history + [rng.randrange(VOCABULARY) for _ in range(p)]
        try:
            world.serve(history)  # matches the path so far whole and locks it: inc_lock_ref at its deepest node
            world.finish()  # inserts the new page below it and unlocks: dec_lock_ref from there
        except Exception as exc:
            exc.add_note(f"radixcheck: at turn {turn} of the conversation: its cached path {turn - 1} pages deep")
            raise
        if len(world.pending()) > 256:
            _settle(world, rng)
    _settle(world, rng)
    world.check()


def conversation_turns(caps: Any) -> int:
    """The long conversation's turns for a target declaring ``caps`` (its ``TierCapabilities``, or
    None): :data:`DEEP_TURNS` unless it declares fewer (``conversation_turns``: its inserts' own cost)."""
    declared = getattr(caps, "conversation_turns", None)
    return DEEP_TURNS if declared is None else declared


def production_stories(world: TierWorld, rng: random.Random, requests: int = WIDE_REQUESTS,
                       turns: int | None = None, deep: bool = True, wide: bool = True, flush: bool = False) -> None:
    """Both stories, in order (``deep=False``: the wide tree only; the conversation costs turns**2 / 2
    pages sent, so a caller runs it once per target; ``wide=False``: the conversation alone, after a
    waived finding ended the wide tree), then with ``flush`` the world's end (story 3: the audit's
    test asks for it when the target declares ``supports_reset``); a failure says which story, in
    which call, how big the tree was and the limit, and carries the story's name as
    ``production_story`` (``"wide"``, ``"deep"``, ``"flush"``). ``turns``: the conversation's, by
    default the target's (:func:`conversation_turns`)."""
    turns = conversation_turns(world.caps) if turns is None else turns
    stories: list[tuple[str, str, Callable[[], Any]]] = [
        ("wide", f"a wide tree of {requests} requests on {SYSTEM_PROMPTS} system prompts, then one evict of everything on "
         f"device (at least {MASS_EVICTION_LEAVES} leaves)", lambda: wide_tree(world, rng, requests)),
        ("deep", f"a conversation of {turns} turns, its path {turns} pages deep", lambda: long_conversation(world, rng, turns)),
        ("flush", FLUSH, lambda: flush_world(lambda: _flush(world, rng))),
    ]
    chosen = {"wide": wide, "deep": deep, "flush": flush}  # a failure in a story raises: no flush after it
    for name, story, run in [s for s in stories if chosen[s[0]]]:
        try:
            run()
        except Exception as exc:
            exc.production_story = name  # type: ignore[attr-defined]  # the caller may build the other story alone
            exc.add_note(f"radixcheck: in the tier production world ({world.write_policy}, page size {world.page_size}), "
                         f"while: {story}; in the call {_call_of(exc)} (operation {world.operations}); the tree then held "
                         f"{_size(world)}; per-operation limit {op_timeout():g} s of CPU")
            raise


def _flush(world: TierWorld, rng: random.Random) -> None:
    """Story 3 (module docstring): the transfers still in flight land, then one checked reset."""
    _settle(world, rng)
    world.reset()


def _call_of(exc: BaseException) -> str:
    """The target's method the failure came from: the innermost ``guarded(what, ...)`` on its traceback."""
    tb, what = exc.__traceback__, "(none: it came from radixcheck's own checks)"
    while tb is not None:
        if tb.tb_frame.f_code is guarded.__code__:
            what = str(tb.tb_frame.f_locals.get("what", what))
        tb = tb.tb_next
    return what


def _size(world: TierWorld) -> str:
    """The tree's size as the cache says it (what a finding can name; guarded: the cache may be broken)."""
    try:
        return f"{int(world.cache.device_size())} tokens on device and {int(world.cache.host_size())} on host"
    except Exception:  # noqa: BLE001 - a broken size must not hide the finding
        return "(its size could not be read)"
