"""A Hypothesis state machine that plays several workers' engines and checks a KV-event index.

It drives any index through the second contract (:mod:`radixcheck.properties.index.contract`):
2-4 workers, each with up to ``max_dp_ranks`` data-parallel ranks, each rank a vLLM-like block
cache (:mod:`radixcheck.properties.index.engines`) that serves requests, evicts under memory
pressure and is reset, publishing the events vLLM publishes, duplicate copies of a block hash
included (raw for an index that counts copies, deduplicated as Dynamo's publisher does for one
that does not). Each event goes to the index under test and to the index model
(:mod:`radixcheck.oracles.kv_index`, oracle 7), and queries compare the two:

* every ``find_matches`` answer, for each rank, equals the model's overlap (a block held again
  after its parent came back matches again, as it does in the engine);
* a legal event is never refused; a malformed one (``validates_events``) is refused or ignored,
  and the index is unchanged and still answers;
* ``sizes()`` and ``dump()``, where offered, agree with the model;
* memory (oracle 8): once nothing is held the index holds nothing (``resident() == 0``, an empty
  dump), and through churn it never keeps more than :data:`RESIDENT_PER_BLOCK` entries per held
  block (``resident``, where offered).

What a failure shows: each event the step sent is a comment line above the step
(``#   call 7: apply_event(worker 3, rank 1, BlockStored(parent=0.1, blocks=[0.1.2]))``): a block
is shown by its chain of token-block ids from the sequence's start, so a program reads without
the 64-bit hashes (the oracle's message gives those). Run it with
:func:`radixcheck.properties.findings.verdict.run_machine` (bounded shrinking) like the cache machine.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import currently_in_test_context, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from radixcheck.oracles.kv_index import IndexModel
from radixcheck.oracles.kv_index_recent import RecentStores
from radixcheck.oracles.violations import BadInputViolation, Check, ContractViolation, IndexMemoryViolation, IndexViolation
from radixcheck.properties.index.contract import (
    DEFAULT_INDEX_CAPABILITIES,
    RESIDENT_PER_BLOCK,
    RESIDENT_SLACK,
    BlockRemoved,
    BlockStored,
    IndexCapabilities,
    KvEvent,
    Rank,
    StoredBlock,
)
from radixcheck.properties.index.engines import Chain, EngineRank, Hashes, tokens_hash
from radixcheck.properties.target import OperationTimeout, guarded, no_longer_answers

AGAIN = "again"  # an IndexCall's kind: a redelivery (redeliver)
STAYS_REFUSED = "stays_refused"  # an IndexCall's kind: the query after a refused store's parent came (bad_events)
ALPHABET = 4  # token-block ids 0..3: requests share prefixes often
WORKER_IDS = (1, 7, 2**32 + 5, 2**63 + 11)  # ids past 32 and 63 bits, which a narrower type would confuse
MAX_PROBES = 24  # known sequences re-matched by check_every_known and the bad-event snapshot
CHURN_BASE = 1000  # token-block ids of churn requests start here: they share nothing with the rest
SCRATCH: Rank = (2**62 + 3, 0)  # the rank malformed events come from: whatever they do stays out of every other check
SCRATCH_CHAIN: Chain = (ALPHABET + 7, ALPHABET + 8)  # what it holds (legally stored), so a self-parent has a parent


def later_parent(n: int) -> Chain:
    """The scratch rank's ``n``-th parent-to-be: a chain it does not hold yet, stored right after a
    malformed store under it (ids below :data:`CHURN_BASE`, past every request's)."""
    return (*SCRATCH_CHAIN, CHURN_BASE // 2 + n)


def without_scratch(ranks: dict[Rank, int]) -> dict[Rank, int]:
    """Scores or sizes without the scratch rank's."""
    return {r: n for r, n in ranks.items() if r[0] != SCRATCH[0]}


def apply_to_model(model: IndexModel, rank: Rank, event: KvEvent) -> None:
    """A legal event, as the oracle takes it (it raises ``EngineEventsViolation`` if it is not legal)."""
    if isinstance(event, BlockStored):
        model.store(rank, event.parent_hash, [(b.block_hash, b.tokens_hash) for b in event.blocks])
    elif isinstance(event, BlockRemoved):
        model.remove(rank, event.block_hashes)
    else:
        model.clear(rank)


def resident_limit(held: int) -> int:
    """The most entries an index may keep while ``held`` (rank, block) pairs are held."""
    return 0 if held == 0 else RESIDENT_PER_BLOCK * held + RESIDENT_SLACK


@dataclass(frozen=True)
class Blocks:
    """``blocks`` token-block ids drawn from a stream seeded by ``seed`` (spans with the same seed
    share a prefix, like prompts on one system prompt). Printed instead of the ids."""

    blocks: int
    seed: int

    def ids(self) -> Chain:
        stream = random.Random(self.seed)
        return tuple(stream.randrange(ALPHABET) for _ in range(self.blocks))


FRESH = st.builds(Blocks, blocks=st.integers(1, 6), seed=st.integers(0, 15))
TAILS = st.builds(Blocks, blocks=st.integers(0, 3), seed=st.integers(0, 15))
CUTS = st.integers(0, 7)
PICKS = st.integers(0, 63)


def shown_chain(chain: Chain) -> str:
    return ".".join(map(str, chain)) if chain else "-"


class _Sent:
    """One call into the index, as a failing program shows it."""

    __slots__ = ("number", "text", "result")

    def __init__(self, number: int, text: str) -> None:
        self.number, self.text, self.result = number, text, ""

    def __repr__(self) -> str:
        return f"#   call {self.number}: {self.text}{self.result}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


@dataclass
class IndexCall:
    """One call into the index, as a repro file replays it: ``shown`` if the program sent it (an
    event, a router's query), else a check's question; ``text`` as the program printed it."""

    name: str
    args: tuple[Any, ...]
    shown: bool
    text: str = ""
    raised: BaseException | None = None
    may_refuse: bool = False  # a malformed or repeated event: refusing it (an exception) is right
    kind: str = ""  # a malformed event's kind (BAD_EVENTS), AGAIN for a redelivery, STAYS_REFUSED for its query
    finding: BaseException | None = None  # the finding the machine made of what it raised (a legal event refused), if another


class _Summary:
    def __init__(self, what: str, counts: Counter[str], last: list[_Sent]) -> None:
        self.what, self.counts, self.last = what, counts, last

    def __repr__(self) -> str:
        kinds = ", ".join(f"{n} {name}" for name, n in self.counts.most_common())
        return "\n".join([f"#   {self.what}: {kinds}; the last {len(self.last)}:"] + [repr(c) for c in self.last])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _unchanged(probes: list[Chain]) -> Check:
    """The check of an event that must change nothing: what the index answers (``answers``: the
    probes' matches, sizes and dump where offered) is the same after it as before."""
    return Check("after == before", "changes(before, after)", {"probes": [[tokens_hash(b) for b in q] for q in probes],
                                                               "probe_chains": [shown_chain(q) for q in probes]})


def _redeliverable(self: KvIndexMachine) -> bool:
    return self.capabilities.tolerates_redelivery and not self.capabilities.counts_copies


class KvIndexMachine(RuleBasedStateMachine):
    """Override ``factory`` and ``capabilities`` (see :func:`index_machine_for`)."""

    factory: Callable[[], Any]
    capabilities: IndexCapabilities = DEFAULT_INDEX_CAPABILITIES

    sequences = Bundle("sequences")

    # Shrinking (Hypothesis's) stalls on some index programs (RemoveLeavesPhantomEntry: the whole 15 s,
    # 7-26 s by seed, for a program of 6 steps either way); a repro file is reduced call by call after it.
    default_shrink_seconds = 5.0

    def __init__(self) -> None:
        super().__init__()
        self.index = guarded("factory", type(self).factory)
        self.model = IndexModel(counts_copies=self.capabilities.counts_copies)
        # an index that forgets on its own: which held blocks it must still know (None: it forgets nothing)
        self.recent = RecentStores(self.capabilities.keeps_recent_blocks) if self.capabilities.evicts_on_its_own else None
        self.hashes = Hashes()
        self.engines: dict[Rank, EngineRank] = {}
        self.ranks: list[Rank] = []
        self.known: list[Chain] = []
        self.calls_sent = 0
        self.chain_of_hash: dict[int, Chain] = {}
        self._quiet: deque[_Sent] | None = None
        self._quiet_counts: Counter[str] = Counter()
        self.peak_resident = 0
        self.bad_sent = 0  # malformed events sent: their made-up hashes never repeat
        # every call into the index, in order, when the run keeps a transcript (a repro file replays them)
        self.sent_calls: list[IndexCall] | None = [] if getattr(type(self), "records", False) else None

    # ---- engines and calls -----------------------------------------------------------------

    def _engine(self) -> EngineRank:
        caps = self.capabilities
        return EngineRank(self.hashes, raw=caps.counts_copies, leaves_first=not caps.accepts_any_removal_order)

    def _rank(self, pick: int) -> Rank:
        return self.ranks[pick % len(self.ranks)]

    def _shown_hash(self, h: int | None) -> str:
        return "None" if h is None else shown_chain(self.chain_of_hash[h]) if h in self.chain_of_hash else str(h)

    def _shown_event(self, event: Any) -> str:
        if isinstance(event, BlockStored) and isinstance(event.blocks, tuple) and all(isinstance(b, StoredBlock) for b in event.blocks):
            blocks = ", ".join(self._shown_hash(b.block_hash) if b.block_hash in self.chain_of_hash
                               else f"({b.block_hash!r}, {b.tokens_hash!r})" for b in event.blocks)
            return f"BlockStored(parent={self._shown_hash(event.parent_hash)}, blocks=[{blocks}])"
        if isinstance(event, BlockRemoved) and isinstance(event.block_hashes, tuple):
            return f"BlockRemoved([{', '.join(self._shown_hash(h) if isinstance(h, int) else repr(h) for h in event.block_hashes)}])"
        return repr(event)

    def _ask(self, name: str, *args: Any, shown: bool = False, text: str = "", may_refuse: bool = False, kind: str = "") -> Any:
        """One call into the index under the time limit, kept in the transcript when there is one
        (``shown``: a call of the program; else a check's question, which changes nothing)."""
        call = IndexCall(name, args, shown, text, may_refuse=may_refuse, kind=kind)
        if self.sent_calls is not None:
            self.sent_calls.append(call)
        if name == "find_matches" and self.recent is not None:  # a lookup may refresh what it finds (llm-d's Lookup)
            self.recent.used(self._pairs_named(args[0]))
        try:
            return guarded(name, getattr(self.index, name), *args)
        except BaseException as exc:
            call.raised = exc
            raise

    def _call(self, text: str, name: str, *args: Any, may_refuse: bool = False, kind: str = "") -> Any:
        """One call into the index under the time limit, shown under the step that sent it."""
        self.calls_sent += 1
        sent = _Sent(self.calls_sent, text)
        try:
            result = self._ask(name, *args, shown=True, text=text, may_refuse=may_refuse, kind=kind)
            sent.result = ("" if result is None or name == "apply_event" else f" -> {len(result)} entries" if name == "dump"
                           else f" -> {result!r}")
            return result
        except BaseException as exc:
            sent.result = f" -> raised {type(exc).__name__}"
            raise
        finally:
            self._show(sent, name)

    def _show(self, sent: _Sent, name: str) -> None:
        if self._quiet is not None:
            self._quiet.append(sent)
            self._quiet_counts[name] += 1
        elif currently_in_test_context():
            note(sent)

    @contextmanager
    def quietly(self, what: str, shown_last: int = 8):
        """Send many calls without showing each; one note then summarises them."""
        self._quiet, self._quiet_counts = deque(maxlen=shown_last), Counter()
        try:
            yield
        finally:
            if currently_in_test_context():
                note(_Summary(what, self._quiet_counts, list(self._quiet)))
            self._quiet = None

    def _send(self, rank: Rank, event: KvEvent | None) -> None:
        """A legal event: the index must take it; then the model takes it too."""
        if event is None:
            return
        text = f"apply_event(worker {rank[0]}, rank {rank[1]}, {self._shown_event(event)})"
        try:
            self._call(text, "apply_event", rank[0], rank[1], event)
        except (OperationTimeout, ContractViolation):
            raise
        except Exception as exc:  # noqa: BLE001 - the index refused a legal event
            why = self._why_legal(rank, event)
            self._apply_to_model(rank, event)  # the engine did it: the model follows the engine (a waiver looks past the refusal)
            finding = IndexViolation(f"{text} raised {type(exc).__name__}: {exc}; the event was legal ({why})")
            if self.sent_calls and self.sent_calls[-1].raised is exc:  # a repro file judges its waiver by this finding
                self.sent_calls[-1].finding = finding
            raise finding from exc
        self._apply_to_model(rank, event)

    def _why_legal(self, rank: Rank, event: KvEvent) -> str:
        forgot = "; an index that forgets on its own must take it even if it forgot " if self.capabilities.evicts_on_its_own else ""
        if isinstance(event, BlockRemoved):
            return f"rank {rank} holds every block it names, by its own events" + (forgot and forgot + "some of them")
        if isinstance(event, BlockStored):
            return (f"its parent is held by rank {rank}" + (forgot and forgot + "that parent") if event.parent_hash is not None
                    else "a sequence's first blocks")
        return "a rank may always clear"

    def _apply_to_model(self, rank: Rank, event: KvEvent) -> None:
        apply_to_model(self.model, rank, event)
        if self.recent is None:
            return
        if isinstance(event, BlockStored):
            self.recent.stored(rank, [self.model.chain_of[b.block_hash] for b in event.blocks])
        elif isinstance(event, BlockRemoved):
            for h in event.block_hashes:
                self.recent.removed(rank, self.model.chain_of[h])
        else:
            self.recent.cleared(rank)

    def _pairs_named(self, tokens_hashes: Any) -> list[tuple[Rank, int]]:
        """Every (rank, chain) a query names that a rank holds: what a lookup may refresh."""
        chains = self.model.query_chains(list(tokens_hashes)) if isinstance(tokens_hashes, list) else []
        return [(r, chain) for chain in chains for r in sorted(self.model.holders(chain))]

    def _kept_overlaps(self, query: Chain, want: dict[Rank, int]) -> dict[Rank, int]:
        """Each rank's run of leading query blocks held *and* kept (an index that forgets on its own
        must answer at least this)."""
        assert self.recent is not None
        chains = self.model.query_chains(self._query_hashes(query))
        kept = {}
        for r, n in want.items():
            run = 0
            while run < n and self.recent.kept(r, chains[run]):
                run += 1
            if run:
                kept[r] = run
        return kept

    def _remember(self, chain: Chain) -> None:
        for n in range(1, len(chain) + 1):
            self.chain_of_hash[self.hashes.of(chain[:n])] = chain[:n]
        if chain and chain not in self.known:
            self.known = (self.known + [chain])[-MAX_PROBES:]

    def _serve(self, rank: Rank, request: Chain, aligned: bool) -> None:
        self._remember(request)
        self._send(rank, self.engines[rank].serve(request, aligned))

    # ---- checks ----------------------------------------------------------------------------

    def _query_hashes(self, chain: Chain) -> list[int]:
        """A chain of token-block ids as the tokens hashes a router's query sends (a replay past
        failures sends them with other hashes: :mod:`radixcheck.properties.index.replay`)."""
        return [tokens_hash(b) for b in chain]

    def _scores(self, hashes: list[int], shown: str) -> dict[Rank, int]:
        raw = self._call(f"find_matches({shown})", "find_matches", hashes)
        if not isinstance(raw, dict):
            raise IndexViolation(f"find_matches returned {type(raw).__name__}, not a dict of (worker, rank) -> overlap",
                                 Check("isinstance(result, dict)", "result"))
        scores = {}
        for key, value in raw.items():
            if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, int) for k in key)) or not isinstance(value, int):
                raise IndexViolation(f"find_matches returned {key!r}: {value!r}, not (worker_id, dp_rank): overlap",
                                     Check("all(well_formed(key, value) for key, value in result.items())", "result"))
            if value:
                scores[key] = value
        return scores

    def _check_query(self, query: Chain) -> None:
        self._check_query_hashes(self._query_hashes(query), shown_chain(query), query)

    def _check_query_hashes(self, hashes: list[int], shown: str, query: Chain | None = None) -> None:
        """A router's query of ``hashes`` (``shown``: as its program says it; ``query``, its chain:
        needed by an index that forgets on its own) against the model's overlaps."""
        want = without_scratch(self.model.overlaps(hashes))
        # what it must keep, before this lookup refreshes anything (a lookup answers first, and forgets nothing)
        kept = self._kept_overlaps(query, want) if self.recent is not None and query is not None else {}
        got = without_scratch(self._scores(hashes, shown))
        if self.recent is not None and query is not None:
            self._check_bounded_query(query, got, want, kept)
        elif got != want:
            wrong = sorted(set(got) | set(want))
            lines = "; ".join(f"rank {r}: index {got.get(r, 0)}, events {want.get(r, 0)}" for r in wrong if got.get(r, 0) != want.get(r, 0))
            raise IndexViolation(f"find_matches({shown}) disagrees with what the events say each rank holds: {lines} "
                                 f"(block hashes of the query: {self.model.chain_hashes(hashes)})",
                                 Check("per_rank(result) == held", "per_rank(result)", {"held": want}))

    def _check_bounded_query(self, query: Chain, got: dict[Rank, int], want: dict[Rank, int], kept: dict[Rank, int]) -> None:
        """An index that forgets on its own: never more than the events, never less than what it keeps."""
        more = [r for r in sorted(got) if got[r] > want.get(r, 0)]
        if more:
            lines = "; ".join(f"rank {r}: index {got[r]}, events {want.get(r, 0)}" for r in more)
            raise IndexViolation(f"find_matches({shown_chain(query)}) answers more than the events say each rank holds "
                                 f"(an index that forgets may answer less, never more): {lines}",
                                 Check("at_most(per_rank(result), held)", "per_rank(result)", {"held": want}))
        less = [r for r in sorted(kept) if got.get(r, 0) < kept[r]]
        if less:
            keep = self.capabilities.keeps_recent_blocks
            lines = "; ".join(f"rank {r}: index {got.get(r, 0)}, kept {kept[r]}, events {want[r]}" for r in less)
            raise IndexViolation(f"find_matches({shown_chain(query)}) forgot blocks it promises to keep (stored, not "
                                 f"removed, with fewer than keeps_recent_blocks={keep} other blocks stored or looked up "
                                 f"since): {lines}", Check("at_least(per_rank(result), kept)", "per_rank(result)", {"kept": kept}))

    def _snapshot(self, probes: list[Chain]) -> tuple:
        """What the index answers (matches of ``probes``, sizes and dump where offered), asked
        without showing each call (a bad-event step would show hundreds)."""
        state: list[Any] = [tuple(sorted(self._ask("find_matches", self._query_hashes(q)).items())) for q in probes]
        if self.capabilities.reports_sizes:
            state.append(tuple(sorted(self._ask("sizes").items())))
        if self.capabilities.offers_dump:
            state.append(self._dumped(shown=False))
        return tuple(state)

    def _dumped(self, shown: bool = True) -> frozenset:
        return frozenset(self._dumped_in_order(shown))

    def _dumped_in_order(self, shown: bool = True) -> list[tuple[Rank, int | None, int, int]]:
        """The dump's blocks as ``(rank, parent, block_hash, tokens_hash)``, in the order its events list them."""
        dump = self._call("dump()", "dump") if shown else self._ask("dump")
        out = []
        try:
            for worker_id, dp_rank, event in dump:
                parent = event.parent_hash
                for block in event.blocks:
                    out.append(((worker_id, dp_rank), parent, block.block_hash, block.tokens_hash))
                    parent = block.block_hash
        except (TypeError, ValueError, AttributeError) as exc:
            raise IndexViolation(f"dump() returned {dump!r:.200}, not a list of (worker_id, dp_rank, BlockStored): {exc}") from exc
        return out

    def _check_dump_order(self, in_order: list[tuple[Rank, int | None, int, int]]) -> None:
        """Replayed in order, the dump must rebuild the index: a block whose parent the dump lists
        for the same rank comes after it (a child stored first is refused: an unheld parent)."""
        listed = {(rank, h) for rank, _, h, _ in in_order}
        seen: set[tuple[Rank, int]] = set()
        for rank, parent, h, _ in in_order:
            if parent is not None and (rank, parent) in listed and (rank, parent) not in seen:
                raise IndexViolation(f"dump() lists block {self._shown_hash(h)} of rank {rank} before its parent "
                                     f"{self._shown_hash(parent)}: replayed in order (a warm restart), its store is "
                                     f"refused, since the rank does not hold its parent yet",
                                     Check("out_of_order(result) is None", "out_of_order(result)"))
            seen.add((rank, h))

    # ---- rules -----------------------------------------------------------------------------

    @initialize(workers=st.integers(2, 4), ranks=st.lists(st.integers(1, 4), min_size=4, max_size=4))
    def start_workers(self, workers: int, ranks: list[int]) -> None:
        """2-4 workers, each with 1-4 data-parallel ranks (at most the index's ``max_dp_ranks``)."""
        self._start_workers(workers, ranks)

    def _start_workers(self, workers: int, ranks: list[int]) -> None:
        if self.ranks:  # a machine whose own first step started them
            return
        for worker_id, n in zip(WORKER_IDS[:workers], ranks, strict=False):
            for dp_rank in range(min(n, self.capabilities.max_dp_ranks)):
                self.ranks.append((worker_id, dp_rank))
                self.engines[(worker_id, dp_rank)] = self._engine()

    @rule(target=sequences, blocks=FRESH)
    def new_sequence(self, blocks: Blocks) -> Chain:
        return blocks.ids()

    @rule(target=sequences, rank=PICKS, base=sequences, cut=CUTS, tail=TAILS, aligned=st.booleans())
    def serve(self, rank: int, base: Chain, cut: int, tail: Blocks, aligned: bool) -> Chain:
        """A request on one rank: a known sequence cut, plus a new tail (``aligned``: a prompt of
        whole blocks, so a fully cached one recomputes its last block, as vLLM does)."""
        request = base[:cut] + tail.ids()
        if request:
            self._serve(self._rank(rank), request, aligned)
        return request

    @rule(base=sequences)
    def serve_everywhere(self, base: Chain) -> None:
        """The same prompt on every rank (a system prompt): every rank holds the same blocks."""
        for r in self.ranks:
            self._serve(r, base, aligned=False)

    @rule(rank=PICKS, count=st.integers(1, 6))
    def evict(self, rank: int, count: int) -> None:
        """Memory pressure on one rank: its oldest free blocks go."""
        r = self._rank(rank)
        self._send(r, self.engines[r].evict(count))

    @rule(rank=PICKS, base=sequences)
    def duplicate_then_evict_one(self, rank: int, base: Chain) -> None:
        """vLLM's duplicate copy, then one copy gone: a cached block-aligned prompt recomputes its
        last block into a second copy, and one copy is evicted while the other stays (raw stream: a
        remove the index must count against the copies; deduplicated: no remove at all). Left to
        ``serve`` and ``evict``, an index that reads the raw stream as a set passed 1 stream in 4
        (index trial, B2)."""
        r = self._rank(rank)
        engine = self.engines[r]
        self._serve(r, base, aligned=False)
        self._serve(r, base, aligned=True)
        if engine.copies[base] > 1:
            self._send(r, engine.evict_chain(base))
        self._check_query(base)

    @precondition(lambda self: self.capabilities.accepts_any_removal_order)
    @rule(rank=PICKS, pick=PICKS)
    def evict_parent(self, rank: int, pick: int) -> None:
        """One block whose children stay cached is evicted (an engine that evicts any free block):
        its cached children stay held, and match again once it is stored again."""
        r = self._rank(rank)
        engine = self.engines[r]
        parents = sorted(c for c in engine.children if engine.cached(c))
        if parents:
            self._send(r, engine.evict_chain(parents[pick % len(parents)]))

    @precondition(lambda self: self.capabilities.accepts_any_removal_order)
    @rule(rank=PICKS, pick=PICKS, everywhere=st.booleans())
    def evict_parent_then_child(self, rank: int, pick: int, everywhere: bool) -> None:
        """A parent goes (``everywhere``: from every rank that caches it, a prefix gone cold), then
        (in another event) one of the blocks under it: the second remove is of a block the rank
        still held, which an index that pruned it with its parent refuses (ai-dynamo/dynamo#10916),
        or cannot resolve when nothing holds the parent (#11785); then the parent comes back."""
        r = self._rank(rank)
        engine = self.engines[r]
        parents = sorted(c for c in engine.children if engine.cached(c))
        if not parents:
            return
        parent = parents[pick % len(parents)]
        children = sorted(c for c in engine.copies if len(c) == len(parent) + 1 and c[:-1] == parent)
        for other in [o for o in self.ranks if o != r] if everywhere else []:
            while self.engines[other].cached(parent):
                self._send(other, self.engines[other].evict_chain(parent))
        while engine.cached(parent):
            self._send(r, engine.evict_chain(parent))
        if children:
            self._send(r, engine.evict_chain(children[pick % len(children)]))
        self._serve(r, parent, aligned=False)

    @rule(rank=PICKS, base=sequences)
    def evict_and_restore(self, rank: int, base: Chain) -> None:
        """A prompt is cached on one rank and by every other rank, its tail block is evicted from
        the first (a partial remove), and the prompt is served there again (a restore)."""
        if not base:
            return
        r = self._rank(rank)
        for other in self.ranks:
            self._serve(other, base, aligned=False)
        engine = self.engines[r]
        if engine.leaves_first and engine.children[base]:
            return  # longer sequences are cached under it there: it is not a leaf
        while engine.cached(base):
            self._send(r, engine.evict_chain(base))
        self._serve(r, base, aligned=False)

    @rule(rank=PICKS)
    def clear(self, rank: int) -> None:
        """One rank resets its prefix cache (``AllBlocksCleared``); its worker's other ranks keep theirs."""
        r = self._rank(rank)
        self._send(r, self.engines[r].clear())

    @rule(worker=PICKS, comes_back=st.booleans())
    def remove_worker(self, worker: int, comes_back: bool) -> None:
        """A worker leaves (every rank); ``comes_back``: it restarts under the same id, empty."""
        worker_id = self._rank(worker)[0]
        self._call(f"remove_worker({worker_id})", "remove_worker", worker_id)
        self.model.remove_worker(worker_id)
        for r in self.ranks if self.recent is not None else ():
            if r[0] == worker_id:
                self.recent.cleared(r)
        gone = [r for r in self.ranks if r[0] == worker_id]
        for r in gone:
            self.engines[r] = self._engine()
        if not comes_back and len({r[0] for r in self.ranks}) > 1:
            self.ranks = [r for r in self.ranks if r[0] != worker_id]
            for r in gone:
                del self.engines[r]

    @precondition(_redeliverable)
    @rule(rank=PICKS)
    def redeliver(self, rank: int) -> None:
        """The transport delivers a rank's last event again (at least once): nothing changes. The
        index may refuse the second copy (an exception) or take it; it must end as if once."""
        r = self._rank(rank)
        event = self.engines[r].last_event
        if event is not None:
            self._send_again(r, event)

    def _send_again(self, r: Rank, event: KvEvent) -> None:
        """``event`` delivered a second time to rank ``r``: it must change nothing."""
        probes = self._probes(event)
        before = self._snapshot(probes)
        try:
            self._call(f"apply_event(worker {r[0]}, rank {r[1]}, {self._shown_event(event)}) again", "apply_event", r[0], r[1], event,
                       may_refuse=True, kind=AGAIN)
        except (OperationTimeout, ContractViolation):
            raise
        except Exception:  # noqa: BLE001 - refusing the repeat is allowed
            pass
        if self.recent is not None:  # a repeated store may bring back a block it forgot: more, but never more than held
            if isinstance(event, BlockStored):
                self.recent.used([(r, self.model.chain_of[b.block_hash]) for b in event.blocks])
            for probe in probes[:MAX_PROBES]:
                self._check_query(probe)
            return
        after = self._snapshot(probes)
        if after != before:
            raise IndexViolation(f"{self._shown_event(event)} delivered a second time changed the index "
                                 f"({self._difference(before, after, probes)})", _unchanged(probes))

    @rule(base=sequences, cut=CUTS, tail=TAILS)
    def query(self, base: Chain, cut: int, tail: Blocks) -> None:
        """A router's query: a known sequence cut, plus a new tail."""
        self._check_query(base[:cut] + tail.ids())

    @rule()
    def check_every_known(self) -> None:
        for chain in self.known:
            self._check_query(chain)

    @precondition(lambda self: self.capabilities.reports_sizes)
    @invariant()
    def sizes_agree(self) -> None:
        got = without_scratch({r: n for r, n in self._ask("sizes").items() if n})  # asked after every step: not shown
        want = without_scratch(self.model.sizes())
        if self.recent is not None:  # it may have forgotten some: never more than held
            more = [r for r in sorted(got) if got[r] > want.get(r, 0)]
            if more:
                raise IndexViolation("sizes() counts more blocks than the events say a rank holds: " + "; ".join(
                    f"rank {r}: index {got[r]}, events {want.get(r, 0)}" for r in more),
                    Check("at_most(per_rank(result), held)", "per_rank(result)", {"held": want}))
        elif got != want:
            lines = "; ".join(f"rank {r}: index {got.get(r, 0)}, events {want.get(r, 0)}"
                              for r in sorted(set(got) | set(want)) if got.get(r, 0) != want.get(r, 0))
            raise IndexViolation(f"sizes() disagrees with the blocks each rank holds by its events: {lines}",
                                 Check("per_rank(result) == held", "per_rank(result)", {"held": want}))

    @invariant()
    def memory_bounded(self) -> None:
        """Nothing held: nothing kept (resident 0, empty dump); else at most
        RESIDENT_PER_BLOCK entries per held block (plus a little), and never a negative count."""
        self._check_memory()

    def _check_memory(self) -> None:
        held = self.model.total_held
        seen_held = held - len(self.model.held.get(SCRATCH, ()))
        if self.capabilities.reports_resident:
            resident = self._ask("resident")
            self.peak_resident = max(self.peak_resident, resident)
            limit = resident_limit(held)
            if resident < 0:  # a count of entries: below 0 it would pass every bound and hide a leak
                raise IndexMemoryViolation(f"resident() is {resident}, a negative count of entries, while the ranks hold "
                                           f"{held} block(s) by their events", Check("result >= 0", "result"))
            if resident > limit:
                raise IndexMemoryViolation(f"resident() is {resident} while the ranks hold {held} block(s) by their events "
                                           f"(at most {limit}): the index keeps entries for blocks nobody holds",
                                           Check("result <= limit", "result", {"limit": limit}))
        if seen_held == 0 and self.capabilities.offers_dump:
            dumped = sorted((d for d in self._dumped(shown=False) if d[0][0] != SCRATCH[0]), key=lambda d: (d[0], d[2]))
            if dumped:
                raise IndexMemoryViolation(f"no rank holds anything, but dump() lists {len(dumped)} block(s), e.g. "
                                           f"{self._shown_hash(dumped[0][2])} of rank {dumped[0][0]}",
                                           Check("not listed(result)", "listed(result)"))

    def _must_list(self, rank: Rank, h: int) -> bool:
        """Whether a dump must list this held block: always, unless the index forgets on its own;
        then only if it must still know the block and every ancestor."""
        return self.recent is None or all(self.recent.kept(rank, chain) for chain in self.model.path(h))

    def _misplaced(self, h: int, parent: int | None, t: int) -> str:
        """What a dump got wrong about a block it lists: its parent, its tokens hash, or both (a
        message that named only the parent said "under parent None; it was stored under None" when
        the tokens hash was what differed)."""
        stored_parent, stored_tokens = self.model.parent_hash(h), self.model.tokens_hash(h)
        wrong = []
        if parent != stored_parent:
            wrong.append(f"under parent {self._shown_hash(parent)}; it was stored under {self._shown_hash(stored_parent)}")
        if t != stored_tokens:
            wrong.append(f"with tokens hash {t!r}; it was stored with {stored_tokens!r}")
        return f"dump() lists block {self._shown_hash(h)} " + ", and ".join(wrong)

    @precondition(lambda self: self.capabilities.offers_dump)
    @rule()
    def check_dump(self) -> None:
        """The dump lists every block each rank holds with all its ancestors, under its real
        parent, and nothing a rank does not hold (a router rebuilt from it routes the same)."""
        for wrong in self.dump_violations():
            raise wrong

    def dump_violations(self) -> Iterator[IndexViolation]:
        """What :meth:`check_dump` finds wrong with one dump, each block's in turn (the check
        raises the first; a replay past failures reads them all)."""
        in_order = [d for d in self._dumped_in_order() if d[0][0] != SCRATCH[0]]
        dumped = set(in_order)
        listed = {(rank, h) for rank, _, h, _ in dumped}
        for rank, parent, h, t in sorted(dumped, key=lambda d: (d[0], d[2])):
            if not self.model.holds(rank, h):
                yield IndexViolation(f"dump() lists block {self._shown_hash(h)} for rank {rank}, which does not hold it "
                                     f"by its events (removed, cleared, or never stored there)",
                                     Check("block not in listed(result)", "sorted(listed(result))", {"block": (rank, h)}))
            elif (parent, t) != (self.model.parent_hash(h), self.model.tokens_hash(h)):
                yield IndexViolation(self._misplaced(h, parent, t),
                                     Check("stored_under(result, block) == parent", "stored_under(result, block)",
                                           {"block": (rank, h), "parent": (self.model.parent_hash(h), self.model.tokens_hash(h))}))
        missing = sorted(r for r in self.model.reachable() - listed if r[0][0] != SCRATCH[0] and self._must_list(*r))
        if missing:
            rank, h = missing[0]
            why = "held, with every ancestor" if self.recent is None else (
                f"held and kept, with every ancestor: stored with fewer than keeps_recent_blocks="
                f"{self.capabilities.keeps_recent_blocks} other blocks stored or looked up since")
            yield IndexViolation(f"dump() leaves out block {self._shown_hash(h)} of rank {rank} ({why}), and {len(missing) - 1} more",
                                 Check("block in listed(result)", "sorted(listed(result))", {"block": (rank, h)}))
        try:
            self._check_dump_order(in_order)
        except IndexViolation as wrong:
            yield wrong

    # ---- bad events (validates_events) -------------------------------------------------------

    BAD_EVENTS = ("self_parent", "repeated_block", "unknown_parent", "remove_unheld", "remove_other_ranks",
                  "negative_hash", "huge_hash", "float_hash", "good_block_then_bad_hash",
                  "none_blocks")

    def _bad_event(self, kind: str, rank: Rank, pick: int) -> KvEvent:
        engine = self.engines[rank]
        held = sorted(engine.copies)
        some = held[pick % len(held)] if held else None
        self.bad_sent += 1
        fresh = 2**63 + 4 * self.bad_sent + pick % 4  # a block hash no sequence (and no earlier bad event) has
        t = tokens_hash(ALPHABET + pick % 3)  # tokens no request has
        if kind == "self_parent":  # parent == one of the event's blocks (dynamo#4394); a held parent when there is one
            parent = self.hashes.of(some) if some is not None else fresh
            return BlockStored(parent, (StoredBlock(parent, t),))
        if kind == "repeated_block":  # one block twice in a chain: a cycle
            return BlockStored(None, (StoredBlock(fresh, t), StoredBlock(fresh + 1, t), StoredBlock(fresh, t)))
        if kind == "unknown_parent":  # under a block the rank stores right after (bad_events): it must stay refused
            parent_chain = later_parent(self.bad_sent)
            self.chain_of_hash.setdefault(self.hashes.of(parent_chain), parent_chain)
            return BlockStored(self.hashes.of(parent_chain), (StoredBlock(fresh + 1, t),))
        if kind == "remove_unheld":
            return BlockRemoved((fresh,))
        if kind == "remove_other_ranks":  # a block another rank holds, this one not
            others = sorted(self.model.chain_of[h] for h in self.chain_of_hash if any(
                self.model.holds(o, h) for o in self.ranks if o != rank) and not self.model.holds(rank, h))
            h = self.model.hash_of[others[pick % len(others)]] if others else fresh
            return BlockRemoved((h,))
        if kind == "negative_hash":
            return BlockStored(None, (StoredBlock(-2, t),))
        if kind == "huge_hash":
            return BlockStored(None, (StoredBlock(2**64 + pick, t),))
        if kind == "float_hash":
            return BlockStored(None, (StoredBlock(float(fresh), t),))  # type: ignore[arg-type]
        if kind == "good_block_then_bad_hash":  # refused only at its second block: the first must not be stored
            return BlockStored(None, (StoredBlock(fresh, t), StoredBlock(-1, t)))
        return BlockStored(None, None)  # type: ignore[arg-type]

    def _probes(self, event: Any) -> list[Chain]:
        """Known sequences, and what an event would make matchable (its parent's chain plus it)."""
        probes = list(self.known)
        if isinstance(event, BlockStored) and isinstance(event.blocks, tuple):
            base = self.chain_of_hash.get(event.parent_hash, ()) if event.parent_hash is not None else ()
            extra = [ALPHABET + pick for pick in range(3)]
            probes += [base + (b,) * n for b in extra for n in (1, 2, 3)]
            probes.append(base)
        return [p for p in dict.fromkeys(probes) if p]

    def _difference(self, before: tuple, after: tuple, probes: list[Chain]) -> str:
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            if b != a:
                what = f"find_matches({shown_chain(probes[i])})" if i < len(probes) else ("sizes()" if i == len(probes)
                                                                                          and self.capabilities.reports_sizes else "dump()")
                return f"{what} was {dict(b) if i < len(probes) else len(b)}, now {dict(a) if i < len(probes) else len(a)}"
        return "?"

    @precondition(lambda self: self.capabilities.validates_events)
    @rule(kinds=st.lists(st.sampled_from(BAD_EVENTS), min_size=1, max_size=4, unique=True), pick=PICKS)
    def bad_events(self, kinds: list[str], pick: int) -> None:
        if self.capabilities.evicts_on_its_own:  # a parent it forgot looks the same as one never held: must be taken
            kinds = [k for k in kinds if k != "unknown_parent"] or ["remove_unheld"]
        """Malformed events are refused (or ignored), the index is unchanged and still answers.
        They come from a rank of their own (:data:`SCRATCH`), which first stores a chain legally,
        so that whatever an index does with them is compared here and nowhere else (a waived
        finding leaves the other checks meaningful)."""
        r = SCRATCH
        if r not in self.engines:
            self.engines[r] = self._engine()
        if not self.engines[r].cached(SCRATCH_CHAIN):
            self._serve(r, SCRATCH_CHAIN, aligned=False)
        for kind in kinds:
            event = self._bad_event(kind, r, pick)
            text = self._send_malformed(kind, r, event)
            if kind == "unknown_parent":
                self._check_stays_refused(r, event, text)

    def _send_malformed(self, kind: str, r: Rank, event: Any) -> str:
        """A malformed event of ``kind`` (:data:`BAD_EVENTS`) from rank ``r``: refused or ignored, the
        index unchanged and still answering. The call as its message says it."""
        probes = self._probes(event)
        before = self._snapshot(probes)
        text = f"apply_event(worker {r[0]}, rank {r[1]}, {self._shown_event(event)})"
        try:
            self._call(text, "apply_event", r[0], r[1], event, may_refuse=True, kind=kind)
        except OperationTimeout:
            raise
        except Exception:  # noqa: BLE001 - a refusal is right; what matters is that nothing changed
            pass
        try:
            after = self._snapshot(probes)
        except OperationTimeout:
            raise
        except Exception as exc:  # noqa: BLE001
            raise no_longer_answers(BadInputViolation(f"after the malformed event ({kind}) {text}, the index no longer answers: "
                                                      f"{type(exc).__name__}: {exc}", _unchanged(probes))) from exc
        if after != before:
            raise BadInputViolation(f"the malformed event ({kind}) {text} changed the index: "
                                    f"{self._difference(before, after, probes)}", _unchanged(probes))
        return text

    def _check_stays_refused(self, r: Rank, event: BlockStored, text: str) -> None:
        """The rank now stores the parent of the store it sent under an unheld parent: that store
        must stay refused, not be kept and applied once its parent arrives (an index that parks
        out-of-order stores passed every check while that parent never came)."""
        parent_chain = self.chain_of_hash[event.parent_hash]
        self._send(r, self.engines[r].serve(parent_chain, False))  # not remembered: known sequences stay the requests'
        self._check_refused_stays_out(r, self._query_hashes(parent_chain) + [event.blocks[0].tokens_hash],
                                      f"{shown_chain(parent_chain)}.+", text)

    def _check_refused_stays_out(self, r: Rank, query: list[int], shown: str, text: str) -> None:
        """The query of a refused store's parent chain and its block (``shown``): rank ``r``'s overlap
        must stop at the parent (``text``: the refused store, as its message says it)."""
        got = self._call(f"find_matches({shown})", "find_matches", query, kind=STAYS_REFUSED)
        want = self.model.overlaps(query).get(r, 0)
        if not isinstance(got, dict) or got.get(r, 0) != want:
            seen = got.get(r, 0) if isinstance(got, dict) else got
            raise BadInputViolation(f"the malformed event (unknown_parent) {text} was applied later: once rank {r} "
                                    f"stored its parent, find_matches gives it {seen}, its events {want}",
                                    Check("result.get(rank, 0) == overlap", "result.get(rank, 0)", {"rank": r, "overlap": want}))

    # ---- churn -------------------------------------------------------------------------------

    def _churn(self, rank: Rank, prompts: int, seed: int, blocks: int = 3) -> None:
        """``prompts`` requests of new content on one rank, each evicted right after (distinct
        prompts under a shared first block, as chat turns on one system prompt): what is held stays
        small, so what the index keeps must too."""
        stream = random.Random(seed)
        engine = self.engines[rank]
        head = CHURN_BASE + seed % 7
        for n in range(prompts):
            request = (head,) + tuple(CHURN_BASE + 10 + stream.randrange(10**6) for _ in range(blocks - 1))
            for m in range(1, len(request) + 1):
                self.chain_of_hash.setdefault(self.hashes.of(request[:m]), request[:m])
            self._send(rank, engine.serve(request, aligned=False))
            self._send(rank, engine.evict(len(request) - 1 if n % 2 else len(request)))
            if n % 50 == 49:
                self._check_memory()

    @rule(rank=PICKS, prompts=st.integers(5, 40), seed=st.integers(0, 2**16))
    def churn(self, rank: int, prompts: int, seed: int) -> None:
        with self.quietly(f"churn of {prompts} prompts"):
            self._churn(self._rank(rank), prompts, seed)


class IndexChurnMachine(KvIndexMachine):
    """The same rules after a long store/remove churn on every rank (a router's hours of traffic,
    compressed): memory must stay bounded throughout, and nothing may be left once it is over."""

    @staticmethod
    def settings_for(search: settings) -> settings:
        return settings(search, max_examples=max(1, search.max_examples // 50), stateful_step_count=10)

    @initialize(prompts=st.integers(1500, 1600), seed=st.integers(0, 2**16))
    def churn_world(self, prompts: int, seed: int) -> None:
        """``prompts`` requests on each of two ranks (distinct prompts, each evicted after it)."""
        self._start_workers(2, [2, 1, 1, 1])
        with self.quietly(f"churn_world: {prompts} prompts on each of ranks {self.ranks[:2]}"):
            for n, rank in enumerate(self.ranks[:2]):
                self._churn(rank, prompts, seed + n, blocks=4)
        self._check_memory()


def index_machine_for(factory: Callable[[], Any], capabilities: IndexCapabilities, name: str,
                      churn: bool = False) -> type[KvIndexMachine]:
    """A machine class for one index target (``churn``: the long-churn machine)."""
    base = IndexChurnMachine if churn else KvIndexMachine
    cls_name = f"{name}_{'churn' if churn else 'index'}".replace(".", "_").replace(":", "_").replace("-", "_")
    return type(cls_name, (base,), {"factory": staticmethod(factory), "capabilities": capabilities})
