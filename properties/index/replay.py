"""An index finding's program replayed past its failures: what else one finding's program shows.

The index machine keeps every call it sends (``KvIndexMachine.sent_calls``); a finding's program is
the events, worker removals, queries and dumps its repro file makes (the reduced one,
:func:`~radixcheck.properties.index.repro.shortest_program`), ending with the call its check is
about. The audit's root cause (:mod:`radixcheck.properties.findings.root_cause`) sends that program
to a fresh index through a fresh machine, **going on past each failure**, each call judged as the
machine judges it (a legal event must be taken, a malformed one refused with nothing changed, a
redelivery change nothing, a query agree with the model), with every check after it: sizes and
memory (the machine's invariants), then every known sequence queried and the dump checked (reads only).

Then the same program three more times, each on another fresh index, with **hashes' top bit
flipped** (:func:`mirrored`, :data:`FLIPS`): every hash, then the block hashes alone, then the tokens
hashes alone. The contract's hashes are opaque ints across ``[0, 2**64)``: flipping one bit of every
hash of a kind maps a legal stream to a legal stream (the same blocks under the same parents), so a
correct index answers it the same way. A bug that depends on a hash's width does not: an index
that keeps hashes as signed 63-bit keys (index trial, B6) dumped a wrong tokens hash in one program
(its block had a tokens hash at or above ``2**63``) and a block no rank holds in another (a block
hash there): two findings, neither program showing the other's until each is flipped.
Each kind alone as well: a single block whose block and tokens hashes both had the top bit read as
"not held" only, flipped whole as nothing; its tokens hash kept, as "a wrong tokens hash". A bug that
does not depend on hash values shows the same things flipped as not, so two such bugs stay two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from radixcheck.properties.findings.root_cause import Signature, each_step, shown_past_failures
from radixcheck.properties.index.contract import HASH_LIMIT, BlockRemoved, BlockStored, StoredBlock
from radixcheck.properties.index.machine import AGAIN, SCRATCH, STAYS_REFUSED, IndexCall, KvIndexMachine
from radixcheck.properties.index.repro import IndexProgram
from radixcheck.properties.target import new_run

TOP = 1 << 63  # the bit every hash has flipped in the mirrored replay
PROBED_EVERY_CALL = 64  # programs up to this many calls are probed after every call; longer ones before their last call and after it


def flip(h: Any) -> Any:
    """``h`` with its top bit flipped, if it is a hash (an int in range); a malformed one as sent."""
    return h ^ TOP if isinstance(h, int) and not isinstance(h, bool) and 0 <= h < HASH_LIMIT else h


Flips = tuple[bool, bool]
"""Which hashes a replay flips: the block hashes (parents included), the tokens hashes."""
FLIPS: tuple[Flips, ...] = ((False, False), (True, True), (True, False), (False, True))
"""The replays of one program, in order: as run, every hash flipped, then each kind alone. Each is a
bijection on its kind of hash, so a legal stream stays legal; together they give each block every
combination of top bits (a single block whose block hash had it read "not held" only, one whose
tokens hash had it "a wrong tokens hash" only)."""


def mirrored(event: Any, flips: Flips = (True, True)) -> Any:
    """``event`` with its block hashes (parents included) and/or tokens hashes :func:`flip`-ped, as
    ``flips`` says (a malformed field that is not a hash stays as sent)."""
    block, tokens = (flip if f else (lambda h: h) for f in flips)
    if isinstance(event, BlockStored):
        blocks = event.blocks
        if isinstance(blocks, tuple):
            blocks = tuple(StoredBlock(block(b.block_hash), tokens(b.tokens_hash)) if isinstance(b, StoredBlock) else b for b in blocks)
        return BlockStored(block(event.parent_hash), blocks)
    if isinstance(event, BlockRemoved) and isinstance(event.block_hashes, tuple):
        return BlockRemoved(tuple(block(h) for h in event.block_hashes))
    return event


def _mirrored_call(call: IndexCall, flips: Flips) -> IndexCall:
    if call.name == "apply_event":
        worker, rank, event = call.args
        args: tuple[Any, ...] = (worker, rank, mirrored(event, flips))
    elif call.name == "find_matches" and flips[1]:
        args = ([flip(h) for h in call.args[0]],)
    else:
        args = call.args
    return IndexCall(call.name, args, call.shown, call.text, may_refuse=call.may_refuse, kind=call.kind)


def replayed_calls(found: IndexProgram) -> list[IndexCall]:
    """The calls of ``found`` a replay sends: its program's events, removals, queries and dumps, then
    the call its check is about (a check's own question, unshown, is asked by every check after each call)."""
    return [c for c in [*found.program, found.last] if c.name in ("apply_event", "remove_worker") or c.shown]


def shown_by_index(machine: KvIndexMachine, found: IndexProgram,
                   waived: Callable[[BaseException], bool] | None = None) -> list[Signature]:
    """Every signature ``found``'s program (``machine``'s finding) shows on fresh indexes of its
    target, replayed past each failure and probed, then replayed again with every hash flipped
    (module docstring); in the order first met (a finding ``waived`` accepts is not counted)."""
    calls = replayed_calls(found)

    def run(seen: Callable[[BaseException], bool]) -> None:
        for flips in FLIPS:
            if not _replay(machine, [_mirrored_call(c, flips) for c in calls], seen, flips):
                return

    return shown_past_failures(run, waived)


class _TokensFlipped:
    """What a machine replaying a program with its tokens hashes flipped adds: its own queries flipped too."""

    def _query_hashes(self: Any, chain: Any) -> list[int]:
        return [flip(h) for h in super()._query_hashes(chain)]  # type: ignore[misc]


def _fresh(machine: KvIndexMachine, flips: Flips) -> KvIndexMachine:
    """A fresh machine (a fresh index) of ``machine``'s class, knowing its sequences and ranks."""
    cls = type(machine)
    fresh = (type(cls.__name__, (_TokensFlipped, cls), {}) if flips[1] else cls)()
    fresh.chain_of_hash = {flip(h) if flips[0] else h: chain for h, chain in machine.chain_of_hash.items()}
    fresh.known, fresh.ranks = list(machine.known), list(machine.ranks)
    return fresh


def _replay(machine: KvIndexMachine, calls: list[IndexCall], seen: Callable[[BaseException], bool], flips: Flips) -> bool:
    """``calls`` (their hashes flipped as ``flips`` says) sent to a fresh machine, each judged as the
    machine judges it, failures to ``seen``; False once ``seen`` says stop (a hang, or a target that answers nothing)."""
    new_run()  # what a target keeps for a run ends with the last one, at a point the program fixes
    m = _fresh(machine, flips)
    caps = m.capabilities
    refused: list[str] = []  # the last malformed store's text, as the stays-refused check's message says it

    def sent(call: IndexCall) -> Callable[[], object]:
        if call.name == "remove_worker":
            return lambda: (m._call(call.text, "remove_worker", *call.args), m.model.remove_worker(call.args[0]))
        if call.name == "find_matches":
            shown = call.text.removeprefix("find_matches(").removesuffix(")")
            if call.kind == STAYS_REFUSED:
                return lambda: m._check_refused_stays_out(SCRATCH, call.args[0], shown, refused[-1] if refused else "")
            return lambda: m._check_query_hashes(list(call.args[0]), shown)
        if call.name == "dump":
            return every_dump_violation
        if call.name != "apply_event":
            return lambda: m._ask(call.name, *call.args)
        worker, rank, event = call.args
        if call.kind == AGAIN:
            return lambda: m._send_again((worker, rank), event)
        if call.may_refuse:
            return lambda: refused.append(m._send_malformed(call.kind or "malformed", (worker, rank), event))
        return lambda: m._send((worker, rank), event)

    def every_dump_violation() -> None:  # each wrong block a failure of its own, as the replay goes past each
        wrong = list(m.dump_violations())
        for each in wrong[:-1]:
            seen(each)
        if wrong:
            raise wrong[-1]

    invariants = [m.sizes_agree if caps.reports_sizes else None, m._check_memory]
    probes = [*(lambda chain=chain: m._check_query(chain) for chain in m.known), every_dump_violation if caps.offers_dump else None]
    try:
        for n, call in enumerate(calls):
            probed = len(calls) <= PROBED_EVERY_CALL or n >= len(calls) - 2  # the state its last call met, and after it
            if not each_step([sent(call), *invariants, *(probes if probed else ())], seen):
                return False
        return True
    finally:
        m.teardown()
