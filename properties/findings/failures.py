"""What a failure of the conformance tests means, read from the exception itself: the oracle
(by the exception's type, one class per oracle) and the program Hypothesis printed.

An ``ExceptionGroup`` (Hypothesis's report of several distinct failures in one test) is read
exception by exception: each keeps its type, message, oracle and program."""

from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path
from typing import Any

from radixcheck.oracles.tier_windows import TWIN_WINDOW
from radixcheck.oracles.violations import ContractViolation
from radixcheck.properties.target import caused_by_hang

SHRINK_CUT_SHORT = "radixcheck: the shrink stopped at its budget"
"""The note on a failure whose shrink ran out of time (a loaded machine, a slow target): the card says so. It
is about the shrink and the program it left (still failing, perhaps not minimal), never about a repro file: printed
as "shrinking stopped at its budget: this program may be longer" beside a 5-call repro, it read as about the file."""

# The machines' @invariant methods (the cache machine's, then the index machine's): not steps of the program.
INVARIANT_STEPS = ("state.sizes_add_up()", "state.slots_conserved()", "state.sizes_agree()", "state.memory_bounded()",
                   "state.router_view()")


# The names oracle_of gives a failure no oracle class judged (a waiver may name them too).
WORLD_CUT_SHORT = "radixcheck: the production world stopped here; not built: "
"""The note a failure inside the production-scale machine's world carries when stories were left
(``radixcheck.properties.cache.scale_machine``): a waived finding there ends the world, so the
audit says what it left out (``radixcheck.properties.findings.waivers``)."""
HANG = "hang (per-operation time limit)"
HUNG_CALL = re.compile(r"did not answer (\w+) within|(\w+) did not return within")
"""The call a hang's message names, whichever clock stopped it: a wire server computing on a loaded
machine meets either the wire client's limit (its CPU time) or the suite's wall-clock backstop
first (a trial's evict that spins forever was two findings, one per clock)."""
ASSERTION = "assertion"
CRASH = "crash ({} raised during a legal call)"  # formatted with the exception's class name
CRASH_SAID = "crash ({}: {})"
"""A crash whose exception says what happened (``what_happened``: a wire server that stopped or broke
the protocol, which may meet a call with bad input as well as a legal one), with its class name."""


def oracle_of(exc: BaseException) -> str:
    """The oracle that judged ``exc``; a hang or an exception of the cache's own is named as such."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(oracle_of(e) for e in leaves(exc)))
    if isinstance(exc, ContractViolation):
        return exc.oracle
    if caused_by_hang(exc):
        return HANG
    if isinstance(exc, AssertionError):
        return ASSERTION
    if happened := getattr(type(exc), "what_happened", None):
        return CRASH_SAID.format(type(exc).__name__, happened)
    return CRASH.format(type(exc).__name__)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``: itself, or every exception of a (nested) group."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def program_of(exc: BaseException) -> str:
    """The failing program from Hypothesis's notes, without the invariant checks between steps, nor
    the time its shrink took (a seeded run's program is the same program however loaded the machine)."""
    lines = "\n".join(getattr(exc, "__notes__", [])).splitlines()
    return "\n".join(ln for ln in lines if ln.strip() and ln.strip() not in INVARIANT_STEPS
                     and not ln.startswith(("You can reproduce this test case", "radixcheck: shrunk for ",
                                            SHRINK_CUT_SHORT)))


def shrink_cut_short(exc: BaseException) -> str:
    """The note saying the failure's shrink ran out of time (without "radixcheck: "), or ""."""
    return next((n.removeprefix("radixcheck: ") for n in getattr(exc, "__notes__", [])
                 if n.startswith(SHRINK_CUT_SHORT)), "")


def message_of(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def raised_at(exc: BaseException) -> str:
    """Where a crash was raised (its innermost frame), e.g. ``mycache.py:42 in evict``; "" for an
    oracle's verdict, whose place is radixcheck's own."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if isinstance(exc, ContractViolation) or not frames:
        return ""
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}"


def exceptions_of(exc: BaseException) -> list[dict[str, str]]:
    """Each exception inside ``exc`` with its type, message, oracle, program and (a crash) where it was raised."""
    return [{"type": type(e).__name__, "message": message_of(e), "oracle": oracle_of(e), "program": program_of(e),
             "raised_at": raised_at(e), "shrink": shrink_cut_short(e)} for e in leaves(exc)]


def describe_failure(exc: BaseException) -> dict[str, Any]:
    inner = exceptions_of(exc)
    if len(inner) == 1:
        reason, program = inner[0]["message"], inner[0]["program"]
    else:  # a group: every inner exception's type and message, and each one's program
        reason = f"{len(inner)} distinct failures: " + "; ".join(f"{e['type']}: {e['message']}" for e in inner)
        program = "\n\n".join(f"# failure {i} of {len(inner)}: {e['type']}: {e['message']}\n{e['program'] or '(no program)'}"
                              for i, e in enumerate(inner, 1))
    return {
        "violation": type(exc).__name__,
        "oracle": oracle_of(exc),
        "reason": reason,
        "program": program,
        "exceptions": inner,
    }


NAMESPACE_SAID = re.compile(r"\bnamespace[ =](?=['\"(\[\d-]|None\b|True\b|False\b|[A-Za-z_]\w*\()")
"""Where a message names a namespace: ``under namespace ('X', None)``, ``namespace='a'``."""


def _without_namespaces(message: str) -> str:
    """``message`` with the value after each :data:`NAMESPACE_SAID` (a namespace's repr: a quoted
    string, a number, ``None``, a tuple of them, nested) said as ``…``: the namespaces a test draws
    differ from run to run, the finding does not."""
    out, at = [], 0
    for found in NAMESPACE_SAID.finditer(message):
        if found.start() < at:
            continue
        end, depth, quote = found.end(), 0, ""
        while end < len(message):
            c = message[end]
            if quote:
                quote = "" if c == quote and message[end - 1] != "\\" else quote
            elif c in "'\"":
                quote = c
            elif c in "([{<":  # <…>: an object's repr
                depth += 1
            elif c in ")]}>":  # at depth 0: what closes the record that names it, e.g. request<…, namespace=('X', None)>
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (c.isspace() or c in ",:;"):
                break
            end += 1
        out += [message[at : found.end()], "…"]
        at = end
    return "".join(out) + message[at:]


def shape_of(message: str) -> str:
    """A failure's message with the specifics left out (token lists, numbers, namespaces): the first
    differing call and what was wrong with it, the same at every page size and in every test."""
    shape = re.sub(r" under namespace …", "", _without_namespaces(message))  # a tenant's page, or the default one's
    # a tenant tree's threaded round that fails on one thread too: the machine's check, marked (ONE_THREAD_NOTE)
    shape = re.sub(r" \[stress_with_threads round \d+, seed \d+, on one thread[^\]]*\]", "", shape)
    shape = re.sub(r", namespace=…", "", shape)  # a tenant's request (Request([0], namespace=('X', None), ...)), or the default one's
    # a window's history (oracle 20w, TierWindows.history): how it went live is not the finding
    shape = re.sub(r"since operation (\d+): [^;]*;", r"since operation \1: …;", shape)
    # a page a load-back brought from host: whether it lay within the window at the path's end (restored) or further
    # back (restored or not) is where the program's path ended, not the cache's bug (a trial's B1: two findings)
    shape = re.sub(r"\((?:restored from its host copy|loaded back) by (the load-back of operation \d+), (?:within the last "
                   r"\d+ tokens|further back than the window at the path's end[^)]*)\)", r"(loaded back by \1)", shape)
    shape = re.sub(r"\s*\(\d+ tokens\)", "", shape)
    # the likely cause an order or amount finding adds (a lock left behind: tier_order.left_behind) is a hint, not
    # the finding: which call released the lock, during which transfer, varies from test to test (one bug, one shape)
    shape = re.sub(r"\. Likely cause, a lock left behind: .*$", "", shape)
    # a list of pages (an isolation message names each page it counted): one shape however many
    shape = re.sub(r"\b\d+ pages?: (Page\([^()]*\))(?:(?:, | and )(?:…|Page\([^()]*\)))*", r"N pages: \1", shape)
    # a wire server's broken reply: what broke, not which op met it nor the reply's own text (the envelope is one
    # code path in a server: a refusal's reply without its id was 6 findings, one per op and message it met)
    shape = re.sub(r"(?:the reply to|its reply to) \w+(?: \(id \d+\))?", "a reply", shape)
    shape = re.sub(r": b(['\"]).*\1$", "", shape)
    shape = re.sub(r"\brequest<", "handle<", shape)  # a running request's record (the lifecycle's) holds its match's handle
    shape = re.sub(r"=[^\s,()\[\]]+", "=…", shape)  # a value named in the message: page_size=1.5, t=48
    shape = re.sub(r"\(-?\d+(?:,(?: -?\d+)?)+\)", "[]", shape)  # a tuple of tokens, as a node's key prints
    while (inner := re.sub(r"\[[^\[\]]*\]", "\0", shape)) != shape:  # token lists, innermost first
        shape = inner
    shape = re.sub("\0(, \0)+", "\0", shape)  # however many of them
    return re.sub(r"-?\b\d+\b", "N", shape.replace("\0", "[…]"))


TENANT_TREE_ORACLES = ("11 tenant-tree model", "11 tenant-tree eviction", "12 tenant-tree memory")
TEXT_KEY = re.compile(r"'[abé]*'")  # a text key the tenant-tree machine drew (its alphabet, TEXT_ALPHABET)
TENANT = re.compile(r"'?\b(?:r\d|replica-\d)\b'?")  # a tenant it named (TENANT_NAMES), quoted or not


INDEX_ORACLES = ("7 index model", "8 index memory")
INDEX_RANK = re.compile(r"(rank \[…\]: [^;()]*[^;()\s])(?:; rank \[…\]: [^;()]*[^;()\s])+")  # one rank's "index N, events N", and more


def index_shape(shape: str) -> str:
    """An index message's shape (:func:`shape_of`) with each rank's numbers said once and a query's
    chain of token-block ids as one: the machine draws which ranks and which query meet a bug, the
    bug does not choose them (a sizes() bug read "rank (1, 1) …; rank (1, 2) …; rank (1, 3) …" in
    the state machine and "rank (1, 0) …; rank (1, 1) …" in the churn test: two findings, index trial B5)."""
    return re.sub(r"\bN(?:\.N)+\b", "N", INDEX_RANK.sub(r"\1", shape))


def tenant_tree_shape(shape: str) -> str:
    """A tenant-tree message's shape (:func:`shape_of`) with its text keys and tenants left out, and
    each tenant's count said once, as token lists are: the machine draws them, a bug does not choose
    them (one eviction bug read "evict('r3', 1) changed other tenants: r2 5 -> 2" in the machine and
    "evict('r1', 1) changed other tenants: r0 114 -> 113" in a threaded round)."""
    shape = TENANT.sub("…", TEXT_KEY.sub("'…'", shape))
    return re.sub(r"… N( -> N)?(?:, … N(?: -> N)?)+", r"… N\1", shape)


ORDER_ORACLES = ("4 LRU order", "4 eviction order", "4h host eviction order")
"""The oracles that judge a choice (which leaf went first): one root cause shows there in many shapes."""


def signature_of(oracle: str, message: str) -> str:
    """What groups failures into one finding with ``oracle``: the shape of the message
    (:func:`shape_of`), except for an order oracle, whose findings on one target are one finding.
    An order message describes the two leaves it compares (how each was last used, whether it is
    the end of a split node, which of them went and which survived), and one bug meets many such
    pairs: an LFU counter not bumped on re-insert failed 4 tests with 4 shapes, and an SLRU threshold
    off by one 3 with 3. Looked past (waived) for 60 examples at page sizes 1 and 4, an LFU not
    bumped on re-insert showed 24 shapes and one whose split loses the count 11, 10 of them shared:
    no message tells two order bugs apart. A waiver's ``as <policy>`` can
    (:mod:`radixcheck.properties.findings.waivers`). A tenant tree's message is read without its
    keys and tenants (:func:`tenant_tree_shape`); a window leak between tenants by its
    :data:`~radixcheck.oracles.tier_windows.TWIN_WINDOW` alone."""
    if oracle in ORDER_ORACLES:
        return ""
    if oracle == HANG and (hung := HUNG_CALL.search(message)):
        return f"{hung.group(1) or hung.group(2)} did not return"
    if oracle == "10 tenant isolation" and TWIN_WINDOW in message:  # one window leak, whichever read met it
        return TWIN_WINDOW
    if oracle in INDEX_ORACLES:
        return index_shape(shape_of(message))
    return tenant_tree_shape(shape_of(message)) if oracle in TENANT_TREE_ORACLES else shape_of(message)


EXPLANATION = "Explanation:"  # the first of Hypothesis's notes of its explain phase; each line it names is a note of its own
EXPLAINED_LINE = re.compile(r"^ {8}(?P<path>.+):(?P<line>\d+)$")


def own_files() -> tuple[Path, ...]:
    """Where radixcheck's own code lives: the folders of its subpackages (``radixcheck.properties``
    is the folder ``properties/`` of a checkout, a ``site-packages`` folder of a wheel)."""
    top = [module for name, module in list(sys.modules.items()) if name == "radixcheck" or name.count(".") == 1
           and name.startswith("radixcheck.")]
    return tuple({Path(f).resolve().parent for f in (getattr(m, "__file__", None) for m in top) if f})


def explaining_the_cache(exc: BaseException) -> None:
    """Keep only the lines of Hypothesis's "Explanation" (lines always and only run by failing
    cases) that are not radixcheck's own, in every exception inside ``exc``: the cache's code, or
    the user's. When it named only radixcheck's (its wire client's error path, a check that
    raised), it is replaced by one note saying so: the cache's own lines were either never run
    in this process (a wire server is another process, which Hypothesis cannot trace) or not
    told apart from the passing cases."""
    roots = own_files()
    for e in leaves(exc):
        notes = getattr(e, "__notes__", None)
        if not notes or EXPLANATION not in notes:
            continue
        start = notes.index(EXPLANATION)
        end = start + 2
        while end < len(notes) and (EXPLAINED_LINE.match(notes[end]) or notes[end].strip().startswith("(and ")):
            end += 1
        named = [n for n in notes[start + 2:end] if EXPLAINED_LINE.match(n)]
        theirs = [n for n in named if not any(Path(EXPLAINED_LINE.match(n)["path"]).resolve().is_relative_to(r) for r in roots)]
        if len(theirs) == len(named):
            continue
        kept = notes[start:start + 2] + theirs if theirs else [
            f"radixcheck: Hypothesis's explanation named only radixcheck's own code ({len(named)} line(s)), none of the "
            "cache's: left out (a cache served over the wire runs in another process, which Hypothesis cannot trace)"]
        e.__notes__[start:end] = kept
