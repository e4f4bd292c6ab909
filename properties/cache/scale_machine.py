"""The conformance machine in a production-sized world.

A serving engine runs hundreds of requests at once on one system prompt, holds 10^5 cached
tokens in 10^4 nodes, grows chat and chunked-prefill histories thousands of nodes deep, and under
memory pressure frees hundreds of leaves in one eviction. Bugs that live only there (a lock
counter of 8 bits, a recursive walk, an eviction capped at a batch) pass every small world.
:class:`ProductionScaleMachine` builds that world in its first step, ``production_world``, then
runs the ordinary rules of :class:`~radixcheck.properties.cache.machine.RadixCacheMachine` in it.

``production_world`` is four stories, in this order, each a loop of ordinary contract calls
checked by the same oracles as every other call (a failure names the story it happened in):

1. **A crowd.** ``crowd`` (> 1024) requests are admitted on one prompt, each a match and a lock
   as an engine admits them; they finish one by one (insert, unlock). Whenever exactly 1024, 512
   or 256 still run, the sizes are checked and memory pressure evicts everything evictable: the
   prompt must survive (a counter of 8 or 10 bits reads 0 there).
2. **A long history.** A conversation of ``history_turns`` pages is cached whole, then matched
   from its end back to its start one page shorter each time: every match ends inside the one
   long edge and splits it, so the path becomes ``history_turns`` nodes deep (Python's recursion
   limit is 1000). Then it is matched whole and extended, and a request on it runs (holds its
   lock) until the world is built, so the path survives the memory pressure. It sends about
   turns^2 * page_size / 2 tokens, so it runs at the target's smallest page size only.
3. **Traffic.** ``requests`` (11,000+) requests on ``system_prompts`` shared prompts, each with its own
   question of 8-16 tokens (whole pages) after one of 4 templates, a third of them a further
   turn of an earlier conversation: >= 10^4 nodes and >= 10^5 tokens.
4. **Memory pressure.** One ``evict`` whose amount no 500 leaves can cover (each leaf holds at
   most :data:`MAX_LEAF_TOKENS` tokens, in whole pages), so it must evict at least 500.

When the example ends without a failure, the world is flushed (``teardown``: one ``reset``, checked
as the ``reset`` rule is), as an engine flushes its cache between benchmark runs (SGLang's
``Scheduler.flush_cache`` calls ``tree_cache.reset()``) and as a router drops a worker's tree: a
reset or teardown that recurses down the deep history dies there (a wire trial's server exited 134
on a tree 1,000 nodes deep, and no test had reset one). It costs one call; a target without
``supports_reset`` is not sent it.

Steps cost what they touch (the oracles are incremental: ``radixcheck.oracles.prefix_set``), so
a world this size is built in about a second on the reference. The world reads the three sizes at
its checks only (after each story, at the crowd's checkpoints, after each rule: 16-18 reads), not
after every request as a scheduler does: the reference recounts its sizes on each call (O(n), by
design), so reads per request would cost the reference's world (and every variant's) tens of
seconds, and an O(n) size call would still not fail there: ~10 ms a call at 10^5 tokens is far
under the per-call limit. An O(n) size call is found by ``radixcheck bench`` (its size calls). While the world is built, the
CPU time of every match and insert is watched (:mod:`radixcheck.properties.cache.step_cost`): a step
whose cost grows with the tree stops the world with a ``StepCostViolation`` and its figures, in its
first story, instead of letting it run for half an hour. The machine asks for its own settings
(:meth:`ProductionScaleMachine.settings_for`): few examples, each a whole production world.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, multiple

from radixcheck.oracles.prefix_set import Entry
from radixcheck.oracles.violations import Check, PrefixSetViolation, StepCostViolation, shown
from radixcheck.properties.cache.contract import BIGRAM_START
from radixcheck.properties.cache.flush import FLUSH, flush_due, flush_world
from radixcheck.properties.cache.machine import HandleRecord, RadixCacheMachine, _as_slot_array, _scribble
from radixcheck.properties.cache.step_cost import WATCHED, StepCostWatch
from radixcheck.properties.findings.failures import WORLD_CUT_SHORT
from radixcheck.properties.findings.transcript import act
from radixcheck.properties.target import metering

CROWD_CHECKPOINTS = (1024, 512, 256)  # requests still running when memory pressure hits: where narrow counters read 0
CROWD = (1025, 1100)  # requests admitted at once on one prompt (the least, the most): no machine locks a node more often
LOCK_COUNTER_BITS_CHECKED = max(CROWD_CHECKPOINTS).bit_length() - 1
"""A lock counter of at most this many bits wraps to 0 at a checkpoint (2**bits locks, then memory
pressure) in every run, and is caught; a wider one never wraps: every crowd passes the checkpoints
and stays below 2**(bits + 1) (meta_tests/test_findings.py checks both), and the ordinary machine
holds at most 3 locks at once."""
MASS_EVICTION_LEAVES = 500  # one eviction must need at least this many leaves
MAX_LEAF_TOKENS = 2 + 16  # a question's node holds at most its template (2 tokens) and its text (16), each in whole pages
VOCABULARY_SIZE = 151_936  # Qwen's: ids above 2**16 and 2**17 are ordinary
SCALE_EXAMPLES_PER = 100  # one production world (~10^4 calls) per this many examples of the profile: ci 1, thorough 6
SCALE_STEPS = 8  # ordinary rules run in each world after it is built


def runs_world_at(page_size: int, page_sizes: tuple[int, ...], search: settings) -> bool:
    """Whether the production-scale test builds a world at ``page_size``: at every page size the target
    runs, unless the profile buys less than one world (under :data:`SCALE_EXAMPLES_PER` examples, as
    radixcheck's own `gate`): then at the smallest only, the one with the deep history."""
    return search.max_examples >= SCALE_EXAMPLES_PER or page_size == min(page_sizes, default=page_size)


class ProductionScaleMachine(RadixCacheMachine):
    """Override ``factory``, ``capabilities`` and ``page_size`` (see :func:`scale_machine_for`)."""

    # Not shrunk by default: each attempt, and the replay after, rebuilds a world of ~10^4 calls
    # (about 2 s on a Zen 5), so 15 s bought a few attempts and cost 10-16 s per page size of an
    # audit (EvictOvershoots); the repro file's reducer shortens the world after, call by call.
    # RADIXCHECK_SHRINK_SECONDS still wins.
    default_shrink_seconds = 0.0
    # Its repro file's reduction (RADIXCHECK_REDUCE_SECONDS still wins): one replay of a world costs seconds, so 5 s left
    # a user's LFU finding unreduced, 56,415 lines; 60 s reduced it to 5 calls, 91 lines, in 25 s (45 replays; Zen 5,
    # 2 cores at a load of ~11). The reduction stops as soon as nothing more can be left out.
    default_reduce_seconds = 60.0

    @staticmethod
    def settings_for(search: settings) -> settings:
        """``search`` (the profile's) cut to few examples of few steps: each example is a whole
        production world (``radixcheck.properties.findings.verdict.run_machine`` asks for this)."""
        return settings(search, max_examples=max(1, search.max_examples // SCALE_EXAMPLES_PER), stateful_step_count=SCALE_STEPS)

    @initialize(
        target=RadixCacheMachine.sequences,
        crowd=st.integers(*CROWD),
        requests=st.integers(11_000, 11_100),  # >= 10^4 nodes at every page size
        system_prompts=st.integers(2, 8),
        history_turns=st.integers(3000, 3100),
        seed=st.integers(0, 2**16),
    )
    def production_world(self, crowd: int, requests: int, system_prompts: int, history_turns: int, seed: int):
        """Build the production world (see the module docstring); its sequences join the bundle."""
        stream = random.Random(seed)
        stories = self._stories(crowd, requests, system_prompts, history_turns, stream)
        made: list[tuple[int, ...]] = []
        self._running_history: HandleRecord | None = None
        self.step_costs = StepCostWatch(self.model.total)  # checked as calls come (_call) and after each story
        with metering(self.step_costs.observe, WATCHED):
            for i, (story, run) in enumerate(stories):
                try:
                    with self.quietly(story):
                        made += run()
                        self._judge_step_costs(final=True)
                    self.sizes_add_up()  # the invariants after each story, not only after the whole step
                    self.slots_conserved()
                except Exception as exc:  # a violation or a crash: either way, say which story it happened in
                    exc.add_note(f"radixcheck: in production_world, while: {story}")
                    if later := [name for name, _ in stories[i + 1 :]]:  # a waiver that looks past it leaves them unbuilt
                        exc.add_note(f"{WORLD_CUT_SHORT}{'; '.join(later)}")
                    raise
        self.step_costs = None
        if self._running_history is not None:  # the long conversation's request finishes last
            self._release(self._running_history)
        return multiple(*made)

    def teardown(self) -> None:
        """Flush the world the example built (:mod:`radixcheck.properties.cache.flush`), unless a
        failure is on its way out: Hypothesis calls this in a ``finally``, and a second failure would hide the first."""
        super().teardown()
        if not flush_due(self.capabilities.supports_reset) or not hasattr(self, "_running_history"):
            return  # a failure in flight, no reset offered, or no world built (it failed before)
        self.step, self.step_number = "teardown", self.step_number + 1  # its act is named like a step's
        try:
            flush_world(self._flush)
        finally:
            self.step = None

    def _flush(self) -> None:
        """The flush: one reset, checked as the ``reset`` rule's, then the invariants."""
        with self.quietly(FLUSH):
            self._reset()
        self.sizes_add_up()
        self.slots_conserved()

    deep_history = True  # the long history is one of the stories
    step_costs: StepCostWatch | None = None  # while the world is built: its calls' costs (radixcheck.properties.cache.step_cost)

    def _call(self, name: str, *args: Any, **keywords: Any) -> Any:
        """The machine's call; while the world is built, a step whose cost has grown with the cache
        fails here, after the call that completed the evidence (not inside it: the call returned). A replay
        of the same program fails at the same call with the same figures: timings differ from run to run,
        and a verdict that came and went would read as a flaky target."""
        result = super()._call(name, *args, **keywords)
        if self.step_costs is None:
            return result
        self._judge_step_costs(final=False)
        return result

    def _judge_step_costs(self, final: bool) -> None:
        found = getattr(type(self), "step_cost_found", None)
        if found is not None and found[0] == self.calls_sent:  # Hypothesis replays the failing program: the same verdict
            raise StepCostViolation(*found[1:])
        if self.step_costs is not None and (final or self.step_costs.due):
            try:
                self.step_costs.check(final)
            except StepCostViolation as exc:  # kept on the run's class (a new one per run), as a hang is kept by its call
                type(self).step_cost_found = (self.calls_sent, str(exc), exc.check)
                raise

    def _stories(self, crowd: int, requests: int, system_prompts: int, history_turns: int,
                 stream: random.Random) -> list[tuple[str, Callable[[], list[tuple[int, ...]]]]]:
        """The stories in order: (what it is, a call that runs it and returns its sequences)."""
        stories = [
            (f"{crowd} requests admitted on one prompt", lambda: self._crowd(crowd, stream)),
            (f"a history {history_turns} nodes deep", lambda: self._long_history(history_turns, stream)),
            (f"{requests} requests on {system_prompts} system prompts", lambda: self._traffic(requests, system_prompts, stream)),
            (f"memory pressure: one eviction of at least {MASS_EVICTION_LEAVES} leaves", lambda: self._mass_eviction()),
        ]
        if not self.deep_history or self.page_size != min(self.capabilities.page_sizes_tested(), default=self.page_size):
            del stories[1]  # a deep path costs turns**2 * page_size tokens sent: once per target, at its smallest page
        return stories

    # ---- the stories -----------------------------------------------------------------------------

    def _words(self, stream: random.Random, blocks: int) -> tuple[int, ...]:
        return tuple(stream.choices(range(VOCABULARY_SIZE), k=blocks * self.block))

    def _crowd(self, size: int, stream: random.Random) -> list[tuple[int, ...]]:
        prompt = self._words(stream, 4)
        self._insert_request(prompt)
        running = []
        for _ in range(size):  # admitted one by one, each through its own match
            question = prompt + self._words(stream, 1)
            record = self._match(question)
            self._lock(record)
            running.append((question, record))
        for finished, (question, record) in enumerate(running, start=1):
            self._finish(record, question)
            if size - finished in CROWD_CHECKPOINTS:
                self._under_pressure()
        return [prompt]

    def _finish(self, record: HandleRecord, question: tuple[int, ...]) -> None:
        """A crowd request is done: its sequence is cached, its lock on the prompt released."""
        self._insert_request(question)
        self._release(record)

    def _under_pressure(self) -> None:
        """Check the sizes, then evict everything evictable."""
        self.sizes_add_up()
        self._evict(self.model.total())
        self.sizes_add_up()

    def _pages(self, stream: random.Random, tokens: int) -> tuple[int, ...]:
        """Random ids for ``tokens`` tokens, rounded up to whole pages."""
        return tuple(stream.choices(range(VOCABULARY_SIZE), k=-(-tokens // self.page_size) * self.page_size))

    def _traffic(self, requests: int, system_prompts: int, stream: random.Random) -> list[tuple[int, ...]]:
        prompts = [self._words(stream, 4) for _ in range(system_prompts)]
        templates = [self._pages(stream, 2) for _ in range(4)]
        recent: list[tuple[int, ...]] = []
        for i in range(requests):
            if recent and stream.random() < 1 / 3:  # the next turn of a recent conversation
                tokens = recent[stream.randrange(len(recent))] + self._pages(stream, stream.randint(4, 8))
            else:
                tokens = prompts[i % system_prompts] + stream.choice(templates) + self._pages(stream, stream.randint(8, 16))
            self._insert_request(tokens)
            recent = (recent + [tokens])[-64:]
        return prompts + recent[-4:]

    def _mass_eviction(self) -> list[tuple[int, ...]]:
        self._evict(MASS_EVICTION_LEAVES * self._pages_of(MAX_LEAF_TOKENS) * self.page_size + 1)
        return []

    def _pages_of(self, tokens: int) -> int:
        return -(-tokens // self.page_size)

    def _long_history(self, turns: int, stream: random.Random) -> list[tuple[int, ...]]:
        p = self.page_size
        history = tuple(stream.choices(range(VOCABULARY_SIZE), k=turns * p))
        tokens = np.asarray(history, dtype=np.int64)
        self._insert_request(history)
        path = self.model.longest_cached(history)
        values = np.asarray(self.model.values_of(path), dtype=np.int64)
        for depth in range(turns - 1, 0, -1):  # each match ends one page higher inside the long edge: a split
            self._match_along(tokens[: depth * p], path[:depth], values[: depth * p])
        record = self._match(history)
        extended = history + self._words(stream, 1)
        self._insert_request(extended)
        self._lock(record)  # its request keeps running through the traffic and the memory pressure
        self._running_history = record
        return [history, extended]

    @act
    def _match_along(self, tokens: np.ndarray, path: list[Entry] | None = None, expected: np.ndarray | None = None) -> None:
        """A match of a prefix of a sequence cached whole: its answer must be exactly the slots
        inserted for that prefix (``expected``, along ``path``), as the prefix-set model says,
        without walking the model a page at a time. A replay (``radixcheck.properties.findings.reduce``)
        gives only the tokens: the path is found once and reused while it stays cached."""
        if path is None:
            found = self._path_along(tokens)
            if found is None:  # no longer cached whole (acts were left out): an ordinary match
                self._match(tuple(tokens.tolist()))
                return
            path, expected = found
        assert path[-1].state == "cached", "the history was cached whole and nothing evicted it since"
        sent = np.concatenate([[BIGRAM_START], tokens]).astype(np.int64) if self._bigram else tokens.copy()
        got, _ = self._call("match_prefix", sent)
        got = _as_slot_array(got, "match_prefix")
        if not np.array_equal(got, expected):
            raise PrefixSetViolation(
                f"match_prefix({shown(tokens.tolist())}) returned {len(got)} slots {shown(got.tolist())}, "
                f"but {shown(expected.tolist())} were inserted there",
                Check("values.tolist() == expected", "values.tolist()", {"expected": expected.tolist()}),
            )
        if self.options.reuses_buffers:
            _scribble(got)
        self.model.touch(path)
        self.clock_calls[self.model.clock] = f"call {self.calls_sent}: match_prefix({shown(tokens.tolist())})"

    def _path_along(self, tokens: np.ndarray) -> tuple[list[Entry], np.ndarray] | None:
        """The cached path and slots of ``tokens``, if all its pages are cached (from the last path
        found, when ``tokens`` is a prefix of it and its page there is still cached)."""
        depth = len(tokens) // self.page_size
        last = getattr(self, "_last_path", None)
        if last is None or len(last[1]) < depth or not np.array_equal(last[0][: len(tokens)], tokens) \
                or (depth and last[1][depth - 1].state != "cached"):
            path = self.model.longest_cached(tokens.tolist())
            last = self._last_path = (tokens.copy(), path, np.asarray(self.model.values_of(path), dtype=np.int64))
        tokens_seen, path, values = last
        if depth == 0 or len(path) < depth:
            return None
        return path[:depth], values[: depth * self.page_size]


def scale_machine_for(factory, capabilities, page_size: int, name: str) -> type[ProductionScaleMachine]:
    """A scale machine class for one target and page size (named for Hypothesis's database)."""
    cls_name = f"{name}_page{page_size}_at_scale".replace(".", "_").replace(":", "_")
    base: type[ProductionScaleMachine] = ProductionScaleMachine
    if capabilities.second_pool is not None:  # imported here: the hybrid world extends this module's machine
        from radixcheck.properties.cache.hybrid_scale import hybrid_scale_base

        base = hybrid_scale_base(capabilities.second_pool)
    return type(cls_name, (base,), {
        "factory": staticmethod(factory),
        "capabilities": capabilities,
        "page_size": page_size,
    })
