"""Whether a step's cost grows with the cache, measured in the production world as it is built.

The per-operation limit (``radixcheck.properties.target``) stops one call that runs for seconds. A
cache whose every match or insert scans the tree (a recency list searched on every touch) never
meets it: each call costs milliseconds, and the production world (~3*10^4 calls, a history whose
matches touch thousands of pages) just runs for half an hour. Yet it is the production problem the
world is there to find, and its growth shows within the first second: the crowd story grows the
tree 100-fold, four times over, and the traffic story 50-fold.

:class:`StepCostWatch` is told the CPU time of every ``match_prefix`` and ``insert`` the world sends
(:func:`~radixcheck.properties.target.metering`: the call alone, not the oracles), with the cached
tokens before it (the model's count), and times a fixed probe (:func:`probe`) right after it. Calls are
compared only with calls of the same kind and the same size (tokens sent, within a quarter octave), so a
longer request is never mistaken for a larger tree. Every :data:`CHECK_EVERY` calls of one kind and size
(an eighth of them, once there are more) it sorts them by tree size and compares the tenth with the
smallest trees with the tenth with the largest (at least :data:`MIN_CALLS` each): the large trees' median
cost over the small ones', divided by the same ratio of the probes beside them, :data:`GROWTH` or more over
trees :data:`SPAN` times larger, is a :class:`~radixcheck.oracles.violations.StepCostViolation` with the
figures; when all the small-tree calls came before the large-tree ones, at two successive checks of that
kind and size.

Why it holds on a loaded, shared machine: it compares the CPU time of like calls within one run, never
a duration with a constant, and reads each in probes. The CPU time of the calling thread does not count
the time it waits for a core, nor an engine's background threads; what load adds to it (a hyperthread
shared, preemptions and the caches refilled after them) it adds to the probe timed beside the call, so a
load that rises while the tree grows (the traffic's large trees are its latest calls) cancels in the
ratio of ratios. Each call is read in its own probe, then the groups' medians are taken: load comes and
goes within a group too (vLLM's adapter at page 16 once read 2.13 in microseconds, its large trees'
group a mix of calls under load and calls without, and 1.17 in probes). Before the probe, that adapter
read 1.27 to 2.51 in five worlds at loads of 10 to 17, once 3.28; in probes it reads 1.06 to 1.22 in ten
worlds at loads of 10 to 31 (reports/step_cost_margin.py measures the margin; the others' margins are in
docs/reference/production-scale.md). What load adds to the calling thread and not to the probe (a library's
worker threads the caller spins for) is not undone: SGLang's Rust HiCache core read 2.66 once (5.24
unprobed). The probe's data is small (a core's own cache holds it), yet a call that sweeps that cache
leaves the probe after it dearer: HostLookupWalksTree's walk of 25,000 nodes made it ~2.5x dearer, so that
growth read 9x in probes (22x in microseconds). That understates a growth whose calls sweep memory; it
never invents one. Medians of 30+ calls each ignore a call that met a page fault; the garbage collector is off inside a metered call (a
collection there is the whole heap's work, set off by whoever allocated last).

Over a span of 8 an O(log n) step grows at most 1.75x (log2 n from 4 to 7, with no fixed cost at all;
the smallest trees' group is ~70 tokens or more in every world, where it is 1.5x), an O(n) one up to 8x.
With load no longer in the reading, :data:`GROWTH` is 2.5: a scan per call that is small next to the
call's fixed cost (the trial's TouchWalksQueue at page 4, a copy of its queue on every touch) reads 2.7
to 2.9 in the crowd, and was missed at 3. In the crowd, small and large trees alternate every few
hundred calls, so the groups were measured side by side and one check stands. In the traffic the tree
grows as the calls come and the large trees' group is the latest calls: a burst the probe did not share
(it is 3 us beside a call of 100) would read as growth, so there a second check, an eighth of the calls
later, must read it too. Sizes and evictions are not watched: the world reads sizes only at its checks
(the reference recounts them, by design), and an eviction's work is its amount (``radixcheck bench``
measures both); nor are the request methods (their first argument is a request, not its tokens) and the
lock calls. A wire target computes in its own process, whose CPU time is not seen here: only this side's
cost is judged.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from radixcheck.oracles.violations import Check, StepCostViolation

WATCHED = ("match_prefix", "insert")  # the calls every request makes
SPAN = 8  # the large trees' median size over the small trees' at least this
GROWTH = 2.5  # the large trees' median cost over the small trees', in probes, that is a finding
MIN_CALLS = 32  # calls in each group, at least
GROUP_SHARE = 0.1  # each group is this share of the calls of its kind and size (at least MIN_CALLS)
CHECK_EVERY = 128  # calls of one kind and size between two comparisons, at least (an eighth of its calls, at most)
SHAPES_PER_OCTAVE = 4  # calls are of the same size when their tokens are within a quarter octave


_PROBE_TABLE = {i * 7919 % 65521: i for i in range(512)}  # a fixed dict, small enough to stay in a core's own cache
_PROBE_KEYS = [i * 7919 % 65521 for i in range(0, 500, 5)]  # 100 lookups spread over it


def probe() -> float:
    """The CPU time of a fixed piece of work (100 dict lookups: ~3 us): what load does to it (a hyperthread
    shared, preemptions charged to the thread), it does to a call measured beside it, and a call's cost is
    judged in probes. Its data stays in the core's own cache, so a large tree the call walked does not make
    it dearer (that would cancel the very growth judged). It allocates nothing a collection would count."""
    table, total = _PROBE_TABLE, 0
    started = time.thread_time()
    for key in _PROBE_KEYS:
        total += table[key]
    return time.thread_time() - started


class StepCostWatch:
    """Told each watched call's CPU time (:meth:`observe`, via ``metering``); :meth:`check` raises a
    :class:`StepCostViolation` once one kind of call costs :data:`GROWTH` times more in large trees.
    ``probe``: the fixed work timed beside each call (tests pass a made-up one)."""

    def __init__(self, tree_tokens: Callable[[], int], probe: Callable[[], float] = probe) -> None:
        self.tree_tokens = tree_tokens  # the cached tokens now (the model's count: O(1))
        self.probe = probe
        self.calls: dict[tuple[str, int], list[Call]] = {}  # (call, size class) -> [(tree, seconds, probe's seconds)]
        self.tokens: dict[tuple[str, int], tuple[int, int]] = {}  # (call, size class) -> the fewest and most tokens sent
        self.next_check: dict[tuple[str, int], int] = {}  # (call, size class) -> its calls at its next comparison
        self.due: set[tuple[str, int]] = set()
        self.flagged: dict[tuple[str, int], int] = {}  # (call, size class) -> its calls at the comparison that last read GROWTH
        self.highest: dict[tuple[str, int], Growth] = {}  # (call, size class) -> its judged comparison of highest ratio (the margin)

    def observe(self, what: str, args: tuple[Any, ...], seconds: float) -> None:
        if what not in WATCHED or not args:
            return
        tokens = len(args[0])
        if tokens == 0:
            return
        key = (what, round(math.log2(tokens) * SHAPES_PER_OCTAVE))
        calls = self.calls.setdefault(key, [])
        fewest, most = self.tokens.get(key, (tokens, tokens))
        self.tokens[key] = (min(fewest, tokens), max(most, tokens))
        calls.append((self.tree_tokens(), seconds, self.probe()))  # the probe right after the call: the same load
        if len(calls) >= self.next_check.get(key, CHECK_EVERY):
            self.next_check[key] = len(calls) + spacing(len(calls))
            self.due.add(key)

    def check(self, final: bool = False) -> None:
        """Compare the kinds of call that have had :data:`CHECK_EVERY` more calls (``final``: every kind).
        A comparison that reads :data:`GROWTH` is a verdict when its two groups were measured side by side
        (a small-tree call came after a large-tree one: the crowd's alternation). When every small-tree
        call came first (the tree grew as the calls came: the traffic), the large trees' group is the
        latest calls, and a burst of load on them reads as growth: it takes a second comparison that reads
        it, after as many more calls as the checks are spaced by, which judges other calls."""
        keys, self.due = (list(self.calls) if final else sorted(self.due)), set()
        for key in keys:
            calls = self.calls[key]
            growth = compare(calls)
            if growth is not None and growth.span >= SPAN and (key not in self.highest or growth.ratio > self.highest[key].ratio):
                self.highest[key] = growth
            if growth is None or not growth.flagged:
                self.flagged.pop(key, None)
                continue
            first = self.flagged.setdefault(key, len(calls))
            if growth.side_by_side or len(calls) >= first + spacing(first):
                again = "" if growth.side_by_side else (f" It read {GROWTH:g}x or more at two checks, {len(calls) - first} "
                                                        "calls apart (its small trees were all measured before its large ones).")
                raise StepCostViolation(growth.sentence(key[0], self.tokens[key], calls) + again,
                                        Check("cost grows less than GROWTH times", "measured CPU time per call"))


def spacing(calls: int) -> int:
    """The calls of one kind and size between two of its comparisons: an eighth of them, at least CHECK_EVERY
    (each comparison sorts them all)."""
    return max(CHECK_EVERY, calls // 8)


Call = tuple[int, float, float]  # one watched call: the cached tokens before it, its CPU time, the probe's beside it


class Growth:
    """The two groups of one kind and size of call: their trees', costs' and probes' medians."""

    def __init__(self, small: list[Call], large: list[Call], side_by_side: bool = True) -> None:
        self.calls = len(small)
        self.side_by_side = side_by_side  # some small-tree call came after a large-tree call (the crowd's alternation)
        self.small_tree = statistics.median(t for t, _, _ in small)
        self.large_tree = statistics.median(t for t, _, _ in large)
        self.small_cost = statistics.median(s for _, s, _ in small)
        self.large_cost = statistics.median(s for _, s, _ in large)
        self.small_probe = statistics.median(p for _, _, p in small)
        self.large_probe = statistics.median(p for _, _, p in large)
        # each call in probes, then the median: load changes within a group too (vLLM's large trees' group
        # read 2.1x in microseconds and 1.1x in probes: its calls under load and its calls without, mixed)
        self.small_in_probes = statistics.median(s / max(p, 1e-9) for _, s, p in small)
        self.large_in_probes = statistics.median(s / max(p, 1e-9) for _, s, p in large)

    @property
    def span(self) -> float:
        return self.large_tree / max(self.small_tree, 1)

    @property
    def load(self) -> float:
        """How much dearer the same fixed work was beside the large trees' calls (the load's change between the groups)."""
        return self.large_probe / max(self.small_probe, 1e-9)

    @property
    def ratio(self) -> float:
        """The large trees' cost over the small trees', each call's cost in probes: a ratio of ratios, that load cancels."""
        return self.large_in_probes / max(self.small_in_probes, 1e-9)

    @property
    def flagged(self) -> bool:
        return self.span >= SPAN and self.ratio >= GROWTH

    def sentence(self, what: str, tokens: tuple[int, int], calls: list[Call]) -> str:
        sent = f"{tokens[0]}" if tokens[0] == tokens[1] else f"{tokens[0]}-{tokens[1]}"
        return (f"{what} of {sent} tokens costs {self.ratio:.1f}x more CPU time in a cache of {self.large_tree:,.0f} tokens than "
                f"in one of {self.small_tree:,.0f} (median of {self.calls} calls each, each call in the time of a fixed probe "
                f"beside it: {self.large_cost * 1e6:,.0f} us against {self.small_cost * 1e6:,.0f} us, the probe {self.load:.2f}x "
                f"dearer in the large): the cost of a step grows with the cache, as a scan of it on every call does. "
                f"By cache size: {curve(calls)}. radixcheck bench measures it per operation.")


def compare(calls: list[Call]) -> Growth | None:
    """The tenth of ``calls`` (in the order they came) in the smallest trees against the tenth in the
    largest, or None while too few."""
    size = max(MIN_CALLS, int(len(calls) * GROUP_SHARE))
    if len(calls) < 2 * size:
        return None
    ordered = sorted(range(len(calls)), key=lambda i: calls[i][0])  # the calls' numbers, by tree
    small, large = ordered[:size], ordered[-size:]
    return Growth([calls[i] for i in small], [calls[i] for i in large], side_by_side=max(small) > min(large))


def curve(calls: list[Call]) -> str:
    """The median cost per power-of-two cache size (those with 8 calls or more), for the message."""
    by_size: dict[int, list[float]] = {}
    for tree, seconds, _ in calls:
        by_size.setdefault(1 << max(tree, 1).bit_length() - 1, []).append(seconds)
    return ", ".join(f"{size:,}: {statistics.median(costs) * 1e6:,.0f} us" for size, costs in sorted(by_size.items())
                     if len(costs) >= 8)
