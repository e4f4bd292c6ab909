"""The throughput replay of reports/COST.md: it sends what a scheduler sends and counts it."""

from __future__ import annotations

import gc

from radixcheck.properties.target import Target, load_target
from radixcheck.reference import RadixCache
from radixcheck.reports.throughput import cached_tokens, instances_for, replay, requests_at_scale
from radixcheck.reports.workloads import VOCAB, few_shot


def test_copies_are_disjoint_and_keep_the_shape() -> None:
    w = few_shot()
    stream = requests_at_scale(w, 3)
    assert len(stream) == 3 * len(w.requests)
    firsts = {tuple(r[:4]) for r in stream}
    assert len(firsts) == 3  # one shared preamble per copy, no id shared across copies
    assert stream[len(w.requests)][0] == w.requests[0][0] + VOCAB
    assert cached_tokens(w) == 256 + 16 * 16  # the preamble once, each question once
    assert instances_for(w, capacity=5120, fill=3) == 30


def test_a_full_pool_makes_requests_evict_and_every_call_is_counted() -> None:
    target = load_target("radixcheck.reference:RadixCache")
    w = few_shot()
    r = replay(target, 1, w, instances=4, capacity=1200, max_seconds=30)
    assert not r.stopped and r.requests == 4 * len(w.requests)
    assert r.evict_calls > 0  # 4 preambles of 256 do not fit in 1,200 slots
    assert r.calls == 4 * r.requests + r.evict_calls
    assert 0.5 < r.hit_rate < 1 and r.calls_per_second > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0  # the replay's collector settings undone


class BreaksOnTenthInsert(RadixCache):
    inserts = 0

    def insert(self, tokens, values):
        self.inserts += 1
        if self.inserts == 10:
            raise RuntimeError("broken on purpose")
        return super().insert(tokens, values)


def test_a_failing_cache_stops_the_replay_with_its_error() -> None:
    target = Target("tests:BreaksOnTenthInsert", BreaksOnTenthInsert, RadixCache.capabilities)
    r = replay(target, 1, few_shot(), instances=4, capacity=1200, max_seconds=30)
    assert r.requests == 9 and r.stopped == "request 10: RuntimeError: broken on purpose"


def test_the_replay_is_bounded_by_cpu_time_with_a_wall_backstop() -> None:
    target = load_target("radixcheck.reference:RadixCache")
    total = 4 * len(few_shot().requests)
    by_cpu = replay(target, 1, few_shot(), instances=4, capacity=1200, max_seconds=0.001, wall_seconds=30)
    by_wall = replay(target, 1, few_shot(), instances=4, capacity=1200, max_seconds=30, wall_seconds=1e-6)
    assert by_cpu.requests < total and by_cpu.stopped == f"stopped after {by_cpu.requests} of {total} requests (0.001 s CPU)"
    assert by_wall.requests < total and by_wall.stopped == f"stopped after {by_wall.requests} of {total} requests (1e-06 s wall)"
