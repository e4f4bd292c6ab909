"""The state machine's eviction-policy scenarios (contract: "Eviction policies").

Used with :class:`~radixcheck.properties.cache.machine.RadixCacheMachine` for a target that
declares a :class:`~radixcheck.properties.cache.policies.Policy` (:func:`~radixcheck.properties.cache.machine.machine_for`
adds it); every rule of the plain machine still runs, and every ``evict`` is judged by the policy's
key. These add the short stories that set one statistic against another, so that a cache that
counts one of them wrong evicts the wrong leaf in one step rather than after a lucky sequence:
hits against recency, creation against recency, a split of a frequently hit leaf, a request's
priority against recency, and a conversation trimmed from its tail (TLRU's history).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from radixcheck.properties.cache.machine import RadixCacheMachine, Span, _can_quarantine, _small_world

PRIORITIES = st.integers(0, 3)


def _takes_priority(self: RadixCacheMachine) -> bool:
    return self.policy is not None and self.policy.takes_priority


class PolicyMachine(RadixCacheMachine):
    """The plain machine plus the policy scenarios (for a target with a declared Policy)."""

    @precondition(_takes_priority)
    @rule(priority=PRIORITIES)
    def next_requests_priority(self, priority: int) -> None:
        """The requests that follow carry ``priority`` (to both ``match_prefix`` and ``insert``)."""
        self.request_priority = priority

    @precondition(_small_world)
    @rule(how=st.sampled_from(("insert", "match")), times=st.integers(1, 3))
    def frequency_against_recency(self, how: str, times: int) -> None:
        """The least recently used leaf is hit ``times`` times (re-inserted, or matched), then every
        other leaf is used once by a match, and memory pressure evicts one page: a frequency policy
        keeps the frequent leaf although it is the oldest; a cache that did not count those hits
        (or counts its segment's threshold one off) evicts it."""
        leaves = self._unlocked_leaves()
        frequent = leaves[0]
        for _ in range(times + 1 if how == "match" else times):
            if how == "insert":
                self._insert_request(frequent.prefix)
            else:
                self._match(frequent.prefix)
        for leaf in leaves[1:]:
            if leaf.state == "cached":
                self._match(leaf.prefix)
        self._evict(self.page_size)

    @precondition(_small_world)
    @rule(how=st.sampled_from(("insert", "match")))
    def use_the_coldest(self, how: str) -> None:
        """The leaf the policy would evict next is used (matched or re-inserted), then one page is
        evicted: a recency policy now takes another, a creation-order policy still takes it."""
        self._unlocked_leaves()
        coldest = self.model.coldest_unlocked_leaf(set())
        if how == "insert":
            self._insert_request(coldest.prefix)
        else:
            self._match(coldest.prefix)
        self._evict(self.page_size)

    @precondition(lambda self: _small_world(self) and _can_quarantine(self))
    @rule(times=st.integers(1, 3))
    def split_a_frequent_leaf(self, times: int) -> None:
        """A leaf of two pages or more is re-inserted ``times`` times, then a match stops one page
        short of its end (the cache splits it: the new parent inherits the hit count), its last
        page is quarantined, and one page is evicted: the parent, now a leaf, is as frequent as
        the leaf was, so a frequency policy keeps it."""
        deep = [e for e in self._unlocked_leaves() if e.depth >= 2]
        if deep:
            leaf = deep[0]
            for _ in range(times):
                self._insert_request(leaf.prefix)
            self._match(leaf.prefix[: -self.page_size])
            self._quarantine(leaf.prefix)
            for other in self.model.unlocked_leaf_list():
                if other is not leaf.parent:
                    self._match(other.prefix)
            self._evict(self.page_size)

    @precondition(lambda self: _small_world(self) and _takes_priority(self))
    @rule(seed=st.integers(0, 15))
    def low_priority_newcomer(self, seed: int) -> None:
        """Every unlocked leaf is re-inserted by a request of priority 1, then a new request of
        priority 0 caches a prompt of its own, and one page is evicted: the newcomer's leaf goes
        first under a priority policy, though it is the most recent."""
        leaves = self._unlocked_leaves()
        self.request_priority = 1
        for leaf in leaves:
            self._insert_request(leaf.prefix)
        self.request_priority = 0
        self._insert_request((len(leaves) % 4,) + Span(2, 0, seed).tokens(self.block))
        self._evict(self.page_size)

    @precondition(_small_world)
    @rule(seed=st.integers(0, 15), pages=st.integers(1, 3))
    def trim_a_conversation(self, seed: int, pages: int) -> None:
        """A conversation grows turn by turn (each turn one insert: one node each), then memory
        pressure evicts ``pages`` pages at a time, three times: TLRU trims the turns its budget
        does not need and stops, since the history it reached does not shrink as its tail goes."""
        turns = Span(4, 0, seed).tokens(self.block)
        for end in (2, 3, 4):
            self._insert_request(turns[: end * self.block])
        for _ in range(3):
            self._evict(pages * self.page_size)
