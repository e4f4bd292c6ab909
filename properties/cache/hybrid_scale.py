"""The production-scale world for a cache with a second pool (a sliding window or a state pool).

:class:`~radixcheck.properties.cache.scale_machine.ProductionScaleMachine`'s stories, told through
the hybrid machine (:mod:`radixcheck.properties.cache.hybrid`): every insert carries its window
slots (``-1`` where the request's window slid) or its state, every match is judged by the
second-pool model as well as the prefix set (:mod:`radixcheck.oracles.second_pool`, whose steps
cost what they touch), and the second pool is put under pressure too:

1. **A crowd** (1,025+ locks on one prompt): at each checkpoint (1,024, 512, 256 still running) window
   pressure first frees every second-pool value no lock pins, then memory pressure evicts
   everything evictable. The prompt's window (or state) is pinned by every running request: a pin
   counter of 8 or 10 bits reads 0 there and the value is freed under them (oracle 22).
2. **A long history** 3,000+ nodes deep (a sliding window only, at the smallest page size): each
   match of a prefix ends inside the one long edge and splits it; its answer is judged against the
   model's window, read from the end (a live window costs ``W`` reads). A state pool resumes only
   where a request ended, so a prefix match of one long request matches nothing and splits
   nothing: the story is not told there (``deep_history = False``).
3. **Traffic** (11,000+ requests): half the new requests ran past their window (cached with
   ``-1`` before their last window; a state pool: no state); a third are a further turn of an
   earlier conversation, served as an engine serves it: matched (judged), locked, extended with
   the tree's window values, inserted, unlocked.
4. **Window pressure** on the oldest values (half as many as the next story's eviction takes),
   so that some of the leaves it evicts are tombstoned and some live.
5. **Memory pressure**: the one eviction of 500+ leaves, each freeing exactly its live window
   slots (3s; a stale KV-to-window mapping frees a slot handed out again).
6. **Window pressure** again: one second-pool eviction of half the live values, then every
   system prompt and recent conversation is matched (a tombstone hides nothing beyond it: 21).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from radixcheck.oracles.prefix_set import Entry
from radixcheck.oracles.violations import Check, WindowMatchViolation, shown
from radixcheck.properties.cache.contract import BIGRAM_START, StatePool
from radixcheck.properties.cache.hybrid import StateMachine, WindowMachine
from radixcheck.properties.cache.machine import UNSAID, _as_slot_array, _scribble
from radixcheck.properties.cache.scale_machine import MASS_EVICTION_LEAVES, MAX_LEAF_TOKENS, ProductionScaleMachine
from radixcheck.properties.findings.transcript import act

SLID_SHARE = 1 / 2  # of the traffic's new requests, those whose window slid (or that bring no state)


class _HybridScale(ProductionScaleMachine):
    """The stories with a second pool; mixed before a hybrid machine (see :func:`hybrid_scale_base`)."""

    windows: Any  # the hybrid machine's model of the second pool

    def _stories(self, crowd: int, requests: int, system_prompts: int, history_turns: int,
                 stream: random.Random) -> list[tuple[str, Callable[[], list[tuple[int, ...]]]]]:
        stories = super()._stories(crowd, requests, system_prompts, history_turns, stream)
        stories.insert(-1, (f"window pressure: one {self.EVICT_SECOND} of the oldest values, half what the memory pressure takes",
                            self._oldest_windows))
        stories.append((f"window pressure: one {self.EVICT_SECOND} of half the live values, then the prompts matched",
                        self._window_pressure))
        return stories

    def _under_pressure(self) -> None:
        """Window pressure (every unpinned second-pool value), then memory pressure."""
        self._evict_window(self.windows.held() + 1)
        super()._under_pressure()

    def _traffic(self, requests: int, system_prompts: int, stream: random.Random) -> list[tuple[int, ...]]:
        prompts = [self._words(stream, 4) for _ in range(system_prompts)]
        templates = [self._pages(stream, 2) for _ in range(4)]
        recent: list[tuple[int, ...]] = []
        for i in range(requests):
            if recent and stream.random() < 1 / 3:  # the next turn of a recent conversation, served on its match
                earlier = recent[stream.randrange(len(recent))]
                tokens = earlier + self._pages(stream, stream.randint(4, 8))
                record = self._match(earlier)
                self._lock(record)
                self._serve_insert(tokens, record)
                self._release(record)
            else:
                tokens = prompts[i % system_prompts] + stream.choice(templates) + self._pages(stream, stream.randint(8, 16))
                self._insert_request(tokens, UNSAID, stream.random() < SLID_SHARE)
            recent = (recent + [tokens])[-64:]
        self._probes = prompts + recent
        return prompts + recent[-4:]

    def _oldest_windows(self) -> list[tuple[int, ...]]:
        """The oldest leaves lose their window: the mass eviction then frees some leaves tombstoned
        (a stale KV-to-window mapping frees a slot handed out again) and some live (3s)."""
        self._evict_window(self._half_the_mass_eviction())
        return []

    def _half_the_mass_eviction(self) -> int:
        """Half the window slots of the leaves the mass eviction takes (at most)."""
        return MASS_EVICTION_LEAVES * self._pages_of(MAX_LEAF_TOKENS) * self.page_size // 2

    def _window_pressure(self) -> list[tuple[int, ...]]:
        self._evict_window(max(1, self.windows.held() // 2))
        for tokens in getattr(self, "_probes", []):
            self._match(tokens)
        return []


class WindowScaleMachine(_HybridScale, WindowMachine):
    """The production world with a sliding window (override ``factory``, ``capabilities``, ``page_size``)."""

    @act
    def _match_along(self, tokens: np.ndarray, path: list[Entry] | None = None, expected: np.ndarray | None = None) -> None:
        """A match of a prefix of the long history (cached whole, windows live): judged against the
        model along ``path`` (``expected``: its KV slots) without walking the model a page at a time."""
        if path is None:
            found = self._path_along(tokens)
            if found is None:  # no longer cached whole (acts were left out): an ordinary match
                self._match(tuple(tokens.tolist()))
                return
            path, expected = found
        assert expected is not None and path[-1].state == "cached", "the history was cached whole and nothing evicted it since"
        sent = np.concatenate([[BIGRAM_START], tokens]).astype(np.int64) if self._bigram else tokens.copy()  # keys as raw tokens
        answer = self._call("match_prefix", sent)
        if not isinstance(answer, tuple) or len(answer) != 3:
            raise WindowMatchViolation(f"match_prefix({shown(tokens.tolist())}) returned {type(answer).__name__}, not "
                                       "(values, handle, window)", Check("len(result) == 3", "type(result)"))
        got, got_window = _as_slot_array(answer[0], "match_prefix"), _as_slot_array(answer[2], "match_prefix's window")
        length = self.windows.resumable(expected)
        want = expected[:length]
        want_window = np.asarray(self.windows.windows(want.tolist()), dtype=np.int64)
        if not (np.array_equal(got, want) and np.array_equal(got_window, want_window)):  # the ordinary judge names what is wrong
            self._judge_match(tuple(tokens.tolist()), got.tolist(), got_window.tolist(), expected.tolist(), want.tolist(),
                              want_window.tolist())
            raise WindowMatchViolation(f"match_prefix({shown(tokens.tolist())}) answered other than the model",
                                       Check("(values, window) == (expected, expected_window)", "(values, window)"))
        if self.options.reuses_buffers:
            _scribble(got)
            _scribble(got_window)
        self.model.touch(path[: length // self.page_size])
        self.clock_calls[self.model.clock] = f"call {self.calls_sent}: match_prefix({shown(tokens.tolist())})"


class StateScaleMachine(_HybridScale, StateMachine):
    """The production world with a state pool (no deep history: see the module docstring)."""

    deep_history = False

    def _half_the_mass_eviction(self) -> int:
        """Half the states of the leaves the mass eviction takes (one per request end, at most)."""
        return MASS_EVICTION_LEAVES // 2


def hybrid_scale_base(pool: Any) -> type[ProductionScaleMachine]:
    """The scale machine for a target that declares ``second_pool=pool``."""
    return StateScaleMachine if isinstance(pool, StatePool) else WindowScaleMachine
