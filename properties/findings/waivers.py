"""Known findings: a waiver file, read like array-api-tests' xfails file.

One waiver a line::

    <target glob>  <test glob>  <finding>  # reason

- **target glob** matches the target's spec (``mymodule:make``) or its name in a several-target
  run (``newest``); ``*`` matches every target.
- **test glob** matches the test's id (``test_cache_state_machine[page_size=16]``) or its name
  without the parameters (``test_cache_state_machine``); ``*`` matches every test. Brackets in an
  id are matched literally when the glob is the whole id.
- **finding**, the rest of the line up to ``#``: an oracle's name (``4 LRU order``, as the audit
  prints it), or an exception's class name (``LRUOrderViolation``, ``RuntimeError``; any class it
  derives from counts), a glob either way (``4 *``).
- **as <policy>**, optional, after an order finding (``4 eviction order as lru``): the signature of
  one known order bug, named by the order the cache does follow. The waiver then waives an order
  finding only where the cache's choice is the one that policy (one of SGLang's eight names,
  :data:`~radixcheck.properties.cache.policies.NAMED`, with their default parameters) would have
  made, judged on the same leaves and statistics; any other order finding in the same test is
  still a finding. An LFU that never counts a hit evicts as ``lru``: waived so, a second order bug
  in the same cache (a split that refreshes the suffix) is still caught. A finding's message or
  its minimal program cannot tell two order bugs apart (measured: both shapes vary from run to
  run and overlap between causes), the choice can, when the known bug is a named order followed
  throughout. Statistics are the model's, counted as the declared policy counts them (hits on
  match or not). A known bug no named policy describes (SGLang's #3, a split that refreshes the
  suffix; its #9, a split that stamps the parent's creation afresh) is named by ``known:``.
- **known: <deviation>**, optional, after ``4 eviction order``, ``4 LRU order`` or ``4h host eviction order`` (``4 eviction
  order  known: suffix-refreshed-on-mid-edge-use``): one known order bug named by its behaviour, a deviation of
  the order model (:data:`radixcheck.properties.cache.deviations.KNOWN`, or a ``module:function``
  of the user's returning a :class:`~radixcheck.oracles.deviation.Deviation`). The machine keeps
  the statistics that bug makes beside the contract's, and an eviction right by either is
  accepted; one right only by the deviation's is the finding this line waives (reported once a
  run, as ``known_deviation``). Any other order finding in the same test is still a finding.
  On a tier target it reaches the device tier's order oracle (4t) the same way, and, after
  ``4h host eviction order``, the host tier's (4h): a host eviction right only by the deviation's
  statistics is waived (:mod:`radixcheck.oracles.tier_model`, "Known deviations").
- **said: <text>**, optional, last on the line (``10 tenant isolation  said: evict_prefix freed``): the
  finding's shape, for an oracle that can fail in several ways: the line waives only findings whose
  message (its first line, as the audit prints it) contains ``<text>``, where ``*`` stands for any
  run of characters (the token lists and numbers of one run) and ``\\#`` for a ``#`` of the message (a bare ``#``
  starts the reason; on a ``said:`` line one next to a word is refused: it could be the message's). Two tenant leaks, one known and one
  not, are two lines of the audit's, and a line naming the known one's operation waives it alone
  (:mod:`radixcheck.properties.findings.said`). Not after an order oracle, whose messages cannot tell two
  bugs apart (``as`` and ``known:`` can), and not with ``as`` or ``known:``. A line without it waives
  every finding of its oracle, as before; when it waived findings of more than one shape the audit
  says so beside them (:func:`radixcheck.audit.waived_of`): name each by ``said:`` if they are two bugs.
- **reason**, after ``#``: required; it is printed beside every finding it waives.

A line is checked when the file is read (:class:`WaiverError` names the line): the test glob
(its part before any ``[``) must match the name of a conformance test radixcheck ships, and a
finding that looks like an oracle's name (it has a space, starts with a digit, or has a character
no class name has) must be one, or a glob matching one. A bare identifier (or a glob of
identifier characters) is taken as an exception class name, the cache's own included, so a typo
there is caught only at the end of the run: a waiver that waived nothing is reported then
(:func:`unmatched`).

Blank lines and lines that start with ``#`` are comments. A waived finding is reported as
waived, and inside a state machine the search goes on past it to the next bug in the same test
(:func:`radixcheck.properties.findings.verdict.run_machine`). Waive an oracle that judges a choice (LRU
order, eviction amount) to look past it; after a waived prefix-set or slot finding the model no
longer describes the cache, and what follows is likely its echo.

A waived finding ends the step it was raised in (the rest of that rule is not run). For the
production-scale machine, whose first step builds the whole world, a finding waived there leaves
a smaller world for the steps that follow: the finding records which stories were not built
(``cut_short``), and the audit says so beside it. The tier production world (no machine: one
deterministic build a write policy) keeps the deviations a ``known:`` line names as every machine
does, each in its own incrementally kept order (:class:`~radixcheck.oracles.tier_model.TierModel`),
so there too a ``known:`` line waives only an order finding that deviation explains
(:meth:`WaiverLog.at_scale`). A tier order finding carries its pick's choice as the cache machine's
does (:class:`~radixcheck.oracles.tier_model.TierModel`), so an ``as`` line is judged the same way in
the tier machine and the tier production world; a finding with no choice to judge is matched there by
its finding alone, and the waived finding says so (``not_rejudged``). The next write policy's world is
still built.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from difflib import get_close_matches
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from radixcheck.oracles.deviation import Deviation
from radixcheck.oracles.violations import EvictionOrderViolation, HostEvictionOrderViolation, LRUOrderViolation
from radixcheck.properties.cache.deviations import KNOWN, DeviationError, resolve
from radixcheck.properties.cache.policies import NAMED
from radixcheck.properties.findings.failures import ORDER_ORACLES, WORLD_CUT_SHORT, leaves, message_of, oracle_of, signature_of
from radixcheck.properties.findings.names import conformance_test_names, oracle_names
from radixcheck.properties.findings.said import SAID, said_in

# The oracles that judge a choice (which leaf went first): one bug shows in many messages there (failures.signature_of),
# so their waived findings are one entry a line, never one a shape.
CHOICE_ORACLES = (*ORDER_ORACLES, "11 tenant-tree eviction")

# said beside an 'as' waiver's finding that the tier production world matched by its oracle alone (WaiverLog.at_scale)
NOT_REJUDGED = ("matched by its oracle in the tier production world, its 'as' not re-judged there "
                "(the order finding carried no choice to judge)")


class WaiverError(ValueError):
    """A waiver file that cannot be read: the message names the file and line."""


@dataclass(frozen=True)
class Waiver:
    target: str
    test: str
    finding: str
    reason: str
    where: str  # file:line, printed with the finding it waives
    follows: str | None = None  # "as <policy>": only order findings whose choice that policy would have made
    known: str | None = None  # "known: <deviation>": only order findings that deviation explains
    deviation: Callable[[], Deviation] | None = field(default=None, compare=False, repr=False)  # its factory
    said: str | None = None  # "said: <text>": only findings whose message contains it (findings.said)

    def __post_init__(self) -> None:
        if self.known is not None and self.deviation is None:
            object.__setattr__(self, "deviation", resolve(self.known))

    def applies_to(self, target_names: tuple[str, ...], test_id: str) -> bool:
        test_name = test_id.partition("[")[0]
        return (any(_glob(name, self.target) for name in target_names)
                and (self.test == test_id or _glob(test_id, self.test) or _glob(test_name, self.test)))

    def waives(self, exc: BaseException, rejudge: bool = True) -> bool:
        """``rejudge=False``: an ``as`` line matches a finding that carries no choice by the finding alone
        (oracle or class; the tier production world: :meth:`WaiverLog.at_scale`); one with a choice, and a
        ``known:`` line, are always judged."""
        names = [oracle_of(exc)] + [cls.__name__ for cls in type(exc).__mro__]
        if not any(_glob(name, self.finding) for name in names):
            return False
        if self.said is not None and not said_in(self.said, message_of(exc)):
            return False
        if self.known is not None:  # set by the cache machine on an order finding a waived deviation explains
            return self.known in getattr(exc, "explained_by", ())
        if self.follows is None:
            return True
        choice = getattr(exc, "choice", None)  # set by the cache and tier models on an order finding (oracles.policy.Choice)
        if choice is None:
            return not rejudge
        return choice.made_by(NAMED[self.follows]().key)

    def __str__(self) -> str:  # the rule as written (quotes aside), for a warning about it
        follows = f" as {self.follows}" if self.follows else ""
        known = f"  known: {self.known}" if self.known else ""
        said = f"  {SAID} {self.said.replace('#', ESCAPED_HASH)}" if self.said is not None else ""
        return f"{self.target}  {self.test}  {self.finding}{follows}{known}{said}  # {self.reason}"


def _glob(name: str, pattern: str) -> bool:
    return name == pattern or fnmatchcase(name, pattern)


def parse_waivers(text: str, source: str = "<waivers>") -> list[Waiver]:
    waivers = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}:{number}"
        ends = _REASON.search(line)  # the first '#' not written as an escape (a message's own '#', in 'said:' words)
        rule, hash_, reason = (line[:ends.start()], "#", line[ends.end():]) if ends else (line, "", "")
        rule, said = _said_of(rule)  # before shlex: a message's quotes are its own
        if said is not None and ends and not (line[ends.start() - 1].isspace() and line[ends.end():][:1] in ("", " ", "\t")):
            raise WaiverError(f"{where}: a '#' next to a word ends the '{SAID}' words here (the reason starts at it): write "
                              f"a message's '#' as '\\#', and the reason's '#' between spaces: {line!r}")
        try:
            fields = shlex.split(rule)
        except ValueError as exc:
            raise WaiverError(f"{where}: {exc}") from exc
        if len(fields) < 3:
            raise WaiverError(f"{where}: expected '<target glob> <test glob> <oracle or exception>  # reason', got {line!r}")
        if not hash_ or not reason.strip():
            raise WaiverError(f"{where}: a waiver needs a reason after '#': {line!r}")
        known_at = next((i for i, f in enumerate(fields) if i >= 3 and f.startswith("known:")), None)
        known = None
        if known_at is not None:  # "<finding>  known: <deviation>": one known order bug by its behaviour
            known = " ".join([fields[known_at].removeprefix("known:")] + fields[known_at + 1:]).strip()
            fields = fields[:known_at]
        test, finding, follows = fields[1], " ".join(fields[2:]), None
        if "as" in fields[3:]:  # "<finding> as <policy>": the signature of one known order bug
            at = len(fields) - 1 - fields[::-1].index("as")
            finding, follows = " ".join(fields[2:at]), " ".join(fields[at + 1:])
        problem = (_test_problem(test, finding) or _finding_problem(finding) or _follows_problem(finding, follows)
                   or _known_problem(finding, follows, known) or _said_problem(finding, follows, known, said))
        if problem:
            raise WaiverError(f"{where}: {problem}: {line!r}")
        waivers.append(Waiver(fields[0], test, finding, reason.strip(), where, follows, known, said=said))
    return waivers


# Where a line's reason starts: its first '#' that is not written '\#' (a '#' of a message, in 'said:' words).
_REASON = re.compile(r"(?<!\\)#")
ESCAPED_HASH = "\\#"  # a message's '#' as 'said:' words write it


def _said_of(rule: str) -> tuple[str, str | None]:
    """``rule`` without its ``said: <text>`` clause, and the text (``None``: no clause): the text as
    written, one pair of quotes around all of it taken off, each ``\\#`` a ``#`` of the message."""
    found = re.search(rf"(?:^|\s){re.escape(SAID)}", rule)
    if found is None:
        return rule, None
    text = rule[found.end():].strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return rule[:found.start()], text.replace(ESCAPED_HASH, "#")


def _said_problem(finding: str, follows: str | None, known: str | None, said: str | None) -> str | None:
    """Why ``<finding>  said: <said>`` cannot name one finding by its shape, or ``None``."""
    if said is None:
        return None
    if not said.strip("* "):
        return f"'{SAID}' needs the words of the finding's message it names (from the audit's card), got {said!r}"
    if follows is not None or known is not None:
        return f"a line names one known order bug by 'as' or 'known:', or one finding by '{SAID}': not both"
    orders = (*ORDER_ORACLES, EvictionOrderViolation.__name__, LRUOrderViolation.__name__, HostEvictionOrderViolation.__name__)
    if finding in orders:
        return (f"'{SAID}' cannot name an order bug ({finding!r}): its messages do not tell two order bugs apart; name it "
                "by 'as <policy>' or 'known: <deviation>'")
    return None


def _known_problem(finding: str, follows: str | None, known: str | None) -> str | None:
    """Why ``<finding>  known: <known>`` cannot name a known order bug, or ``None`` (it resolves the name)."""
    if known is None:
        return None
    if not known or " " in known:
        return f"'known:' needs one deviation name ({', '.join(KNOWN)}, or module:function), got {known!r}"
    orders = [(cls.oracle, cls.__name__) for cls in (EvictionOrderViolation, LRUOrderViolation, HostEvictionOrderViolation)]
    if sum(_glob(oracle, finding) or _glob(name, finding) for oracle, name in orders) != 1:
        return (f"'known: {known}' names a deviation of the eviction order: it applies to {orders[0][0]!r}, {orders[1][0]!r} "
                f"or (a tier target's host tier) {orders[2][0]!r} alone, not {finding!r}")
    if follows is not None:
        return "a line names one known order bug: 'as <policy>' or 'known: <deviation>', not both"
    try:
        resolve(known)
    except DeviationError as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def _follows_problem(finding: str, follows: str | None) -> str | None:
    """Why ``<finding> as <follows>`` cannot name a known order bug, or ``None``."""
    if follows is None:
        return None
    if not follows:
        return f"'as' needs a policy name ({', '.join(NAMED)})"
    if follows not in NAMED:
        return f"unknown policy {follows!r} after 'as'" + _suggestion(follows, NAMED, "SGLang's: " + ", ".join(NAMED))
    order = EvictionOrderViolation.oracle
    if not (_glob(order, finding) or _glob(EvictionOrderViolation.__name__, finding)) or _glob("4 LRU order", finding):
        return f"'as {follows}' names the order a cache's evictions follow: it applies to {order!r} alone, not {finding!r}"
    return None


def _test_problem(test: str, finding: str) -> str | None:
    """Why ``test`` can match no conformance test, or ``None``. Only the name is checked: the
    parameters after ``[`` depend on the target (a wrong one shows as an unmatched waiver)."""
    names = conformance_test_names()
    if any(_glob(name, test) or _glob(name, test.partition("[")[0]) for name in names):
        return None
    problem = f"test glob {test!r} matches no conformance test"
    shifted = f"{test} {finding}"  # "<target> 4 eviction amount": the test column left out
    if _oracle_match(shifted) or (test[:1].isdigit() and get_close_matches(shifted, oracle_names(), n=1, cutoff=0.8)):
        return f"{problem}; is the test column missing? {shifted!r} reads as an oracle name"
    return problem + _suggestion(test.partition("[")[0], names, "the tests: " + ", ".join(names))


def _finding_problem(finding: str) -> str | None:
    """Why ``finding`` names neither an oracle nor an exception class, or ``None``."""
    if _oracle_match(finding) or _CLASS_GLOB.fullmatch(re.sub(r"\[[^\]]*\]", "x", finding)):
        return None
    if _CLASS_GLOB.fullmatch(finding.rpartition(".")[2]):  # mymodule.MyError: the class is matched by its name alone
        return f"finding {finding!r}: name the exception by its class name alone ({finding.rpartition('.')[2]!r})"
    return f"unknown oracle {finding!r}" + _suggestion(finding, oracle_names(), "the oracles: " + ", ".join(map(repr, oracle_names())))


# An exception class name, or a glob of one ("*Error"): identifier characters, not starting with a digit.
_CLASS_GLOB = re.compile(r"[A-Za-z_*?][A-Za-z0-9_*?]*")


def _oracle_match(finding: str) -> bool:
    """``finding`` is an oracle name (a crash's with its class in it) or a glob matching one."""
    return any(_glob(finding, name) or _glob(name, finding) for name in oracle_names())


def _suggestion(word: str, known: Iterable[str], otherwise: str) -> str:
    close = get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" ({otherwise})"


def read_waivers(path: str | Path) -> list[Waiver]:
    """The waivers in ``path``; :class:`WaiverError` names the file (and line) if it cannot be used."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WaiverError(f"waiver file {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from exc
    return parse_waivers(text, str(path))


@dataclass
class WaiverLog:
    """The waivers that apply to one test of one target, and what they waived: a predicate for
    :func:`~radixcheck.properties.findings.verdict.run_machine` (``waived(exc) -> bool``) that records
    each finding it waives."""

    applicable: list[Waiver]
    found: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def for_test(cls, waivers: list[Waiver], target_names: tuple[str, ...], test_id: str) -> WaiverLog:
        return cls([w for w in waivers if w.applies_to(target_names, test_id)])

    def __bool__(self) -> bool:  # no waiver applies: nothing to look past, the machine runs as it is
        return bool(self.applicable)

    def deviations(self) -> list[Callable[[], Deviation]]:
        """The factories of the known deviations these waivers name (``known:``), once each."""
        return list({w.known: w.deviation for w in self.applicable if w.deviation is not None}.values())

    def waiver_for(self, exc: BaseException, rejudge: bool = True) -> Waiver | None:
        """The waiver of ``exc``; a group is waived only if every exception in it is."""
        found = [next((w for w in self.applicable if w.waives(e, rejudge)), None) for e in leaves(exc)]
        return found[0] if found and all(found) else None

    def at_scale(self, exc: BaseException, step: str = "") -> bool:
        """Waive (and record) a failure of the tier production world. A ``known:`` line is re-judged
        there as in every machine: that world keeps the deviations (:meth:`deviations`) beside the
        tier model, each in its own incrementally kept order, so an order finding is waived only if
        the named deviation explains it (the same known cause); another order bug under the same
        oracle still fails. An ``as`` line judges the finding's choice (the tier model sets it); a
        finding without one it matches by the finding alone, and the record says it was not
        re-judged. A finding of another oracle still fails."""
        return self(exc, step, rejudge=False)

    def __call__(self, exc: BaseException, step: str = "", rejudge: bool = True) -> bool:
        waiver = self.waiver_for(exc, rejudge)
        if waiver is None:
            return False
        # a waived finding that ended a production world: the verdict does not cover what it left out
        cut_short = next((n.removeprefix("radixcheck: ") for n in getattr(exc, "__notes__", []) if n.startswith(WORLD_CUT_SHORT)), None)
        for e in leaves(exc):
            # one entry per shape: two leaks one line waived are two entries, so the card shows both (audit.waived_of)
            oracle = oracle_of(e)
            key = (oracle, type(e).__name__, waiver.where, "" if oracle in CHOICE_ORACLES else signature_of(oracle, message_of(e)))
            entry = self.found.setdefault(key, {"oracle": key[0], "type": key[1], "message": message_of(e), "step": step,
                                                "waiver": f"{waiver.where}: {waiver.reason}", "times_met": 0,
                                                "shape": key[3], "named_by_shape": waiver.said is not None})
            entry["times_met"] += 1
            if waiver.known is not None:
                entry["known_deviation"] = waiver.known
            if not rejudge and waiver.follows and getattr(e, "choice", None) is None:
                entry["not_rejudged"] = NOT_REJUDGED
            if cut_short and cut_short not in entry.get("cut_short", ""):  # each world it ended (a tier target's: one a policy)
                unbuilt = cut_short.removeprefix(WORLD_CUT_SHORT.removeprefix("radixcheck: "))
                entry["cut_short"] = f"{entry['cut_short']}; {unbuilt}" if entry.get("cut_short") else cut_short
        return True

    def findings(self) -> list[dict[str, Any]]:
        return list(self.found.values())

    def met(self) -> list[str]:
        """The waivers (by ``file:line``) that waived a finding here."""
        return sorted({where for _, _, where, _ in self.found})


def unmatched(waivers: Iterable[Waiver], met: Iterable[str]) -> list[Waiver]:
    """The waivers that waived nothing in a run, given those that did (by ``file:line``): each a
    likely typo (a class name, the parameters of a test id) or a finding since fixed."""
    met = set(met)
    return [w for w in waivers if w.where not in met]


def unmatched_warning(waiver: Waiver) -> str:
    return f"waiver {waiver.where} matched no finding: {waiver}"
