"""The bug catalogue, Wycheproof style: every obligation of the contract, the rule that exercises
it, the oracle that judges it and the mutant that breaks it; then each mutant's kill rate over
many streams, the oracle that caught it and its shrunk program.

    python -m radixcheck.reports.catalogue                 # BUG_CATALOGUE.md, artifacts/catalogue.json
    python -m radixcheck.reports.catalogue --streams 200   # kill rates over 200 streams per mutant (default)

*Kill rate*: the gate's budget (the `mutation` profile: ci's 100 x 50 search, no shrinking) run
once per stream, each stream derandomized under its own name (``radixcheck.reports.kill_rates``).
*Time to kill* and the *oracle* come from stream 0; the *minimal program* from a bounded shrink
(``radixcheck.properties.findings.verdict``). Times are noisy (a shared machine); verdicts are not.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck import profiles
from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int, refuse_weaker
from radixcheck.oracles import violations as v
from radixcheck.properties.cache.mutants import MUTANTS, machine_for_mutant
from radixcheck.properties.findings.failures import describe_failure
from radixcheck.properties.findings.verdict import run_machine, shrink_setting_problem
from radixcheck.provenance import describe_run, run_stamp
from radixcheck.reports import default_out
from radixcheck.reports.kill_rates import false_alarms, measure, variant_names
from radixcheck.reports.report_rows import ExpectedRows

# (obligation, rule or scenario of the state machine that exercises it, the oracle's exception, mutants that break it)
OBLIGATIONS: list[tuple[str, str, type[BaseException], list[str]]] = [
    ("match: the longest cached prefix, page-aligned, through every split", "match, serve, check_every_match",
     v.PrefixSetViolation, ["SplitOffByOne", "UnalignedPages"]),
    ("match: the slot ids first inserted there", "check_every_match, serve", v.PrefixSetViolation,
     ["SplitKeepsStaleValues", "InsertKeepsUnalignedTail"]),
    ("match: ids across the int32 range stay distinct", "neighbour_id", v.PrefixSetViolation,
     ["TokensNarrowedTo16Bits", "TokensThroughFloat32"]),
    ("match: a long edge is compared in full", "long_prompt", v.PrefixSetViolation, ["ComparesBoundedWindow"]),
    ("insert: prefix_len counts whole cached pages", "insert, serve", v.PrefixSetViolation, ["InsertReturnsTokenPrefix"]),
    ("insert: only whole pages are cached; the caller keeps the tail", "insert, serve", v.SlotViolation,
     ["InsertKeepsUnalignedTail"]),
    ("recency: a match is a use", "queued_admission, hit_short_of_lru_leaf", v.LRUOrderViolation, ["MatchDoesNotRefresh"]),
    ("recency: an insert is a use", "reinsert_lru_leaf, insert_then_evict", v.LRUOrderViolation, ["InsertDoesNotRefresh"]),
    ("recency: a mid-edge hit refreshes only what matched", "hit_short_of_lru_leaf", v.LRUOrderViolation,
     ["SplitRefreshesSuffix"]),
    ("recency: an insert ending mid-edge refreshes only what it covered", "reinsert_short_of_lru_leaf", v.LRUOrderViolation,
     ["InsertShortStampsEdge"]),
    ("recency: a lock is not a use", "queued_admission", v.LRUOrderViolation, ["LockRefreshes"]),
    ("lock: covers every node from the root to the handle", "admit, serve, lock_then_unlock", v.RefcountViolation,
     ["LockSkipsAncestors", "LockSkipsSelf"]),
    ("lock: survives a split of a locked edge", "admit then insert/match", v.RefcountViolation, ["SplitLockNotInherited"]),
    ("lock: covers exactly what matched (the edge is split)", "admit", v.RefcountViolation, ["NoSplitOnMatch"]),
    ("unlock: an unmatched one is refused, atomically (checks_locks)", "lock_then_unlock, unlock_any", v.RefcountViolation,
     ["UnmatchedUnlockAccepted"]),
    ("handles: a stale one is refused (checks_locks)", "lock, unlock after evict/reset", v.RefcountViolation,
     ["StaleHandleAccepted", "ResetKeepsHandlesLive"]),
    ("handles: a quarantined one cannot be locked (checks_locks)", "lock_after_quarantine", v.RefcountViolation,
     ["LockOfQuarantinedAccepted"]),
    ("handles: another cache's is refused (checks_locks)", "foreign_handle", v.RefcountViolation, ["ForeignHandleAccepted"]),
    ("evict: never a locked node", "evict, queued_admission", v.RefcountViolation, ["EvictsLockedLeaf"]),
    ("evict: least recently used leaf first (LRU targets)", "evict, hit_short_of_lru_leaf", v.LRUOrderViolation,
     ["MostRecentFirst"]),
    ("evict under a declared Policy: LFU counts a hit for each match that covers a node (hits_on_match=True)",
     "frequency_against_recency", v.EvictionOrderViolation, ["LfuNotBumpedOnMatch"]),
    ("evict under a declared Policy: LFU counts a hit for each insert that re-covers a node", "frequency_against_recency",
     v.EvictionOrderViolation, ["LfuNotBumpedOnReinsert"]),
    ("evict under a declared Policy: a split gives the new parent the child's hit count", "split_a_frequent_leaf",
     v.EvictionOrderViolation, ["LfuSplitLosesCount"]),
    ("evict under a declared Policy: FIFO orders by creation, MRU by most recent use", "use_the_coldest, evict",
     v.EvictionOrderViolation, ["FifoByLastAccess", "MruEvictsLeastRecent"]),
    ("evict under a declared Policy: SLRU protects a node at exactly `threshold` hits", "frequency_against_recency",
     v.EvictionOrderViolation, ["SlruThresholdOffByOne"]),
    ("evict under a declared Policy: the lowest request priority goes first", "low_priority_newcomer",
     v.EvictionOrderViolation, ["PriorityIgnored"]),
    ("evict under a declared Policy: TLRU's history does not shrink as the tail goes", "trim_a_conversation",
     v.EvictionOrderViolation, ["TlruHistoryFromResident"]),
    ("evict: frees num_tokens unless nothing evictable is left", "evict", v.EvictionAmountViolation, ["EvictStopsShort"]),
    ("evict: stops once num_tokens are freed, under any policy (evict(0) frees nothing)", "evict, insert_then_evict",
     v.EvictionAmountViolation, ["EvictOvershoots", "EvictOneTooMany"]),
    ("evict: one call frees hundreds of leaves when asked (no fixed batch)", "production_world (memory pressure)",
     v.EvictionAmountViolation, ["EvictCapsLeaves"]),
    ("lock: counts past 255 and past 1,023 concurrent requests on one prompt", "production_world (a crowd)",
     v.RefcountViolation, ["LockCountWraps8Bit", "LockCountWraps10Bit"]),
    ("any call: works on paths thousands of nodes deep (no recursion)", "production_world (a long history)",
     RecursionError, ["CollectsNodesRecursively"]),
    ("insert: the cache copies the values it keeps (the caller reuses its buffer)", "every insert (buffers overwritten after)",
     v.PrefixSetViolation, ["KeepsCallersValues"]),
    ("match: the caller owns the array it returns (it may write into it)", "every match (results overwritten after)",
     v.PrefixSetViolation, ["MatchReturnsItsStorage"]),
    ("slots: any slot ids, recycled and out of order (a churned pool)", "every insert (churned_slot_pool)",
     v.PrefixSetViolation, ["AssumesContiguousSlots"]),
    ("evict_prefix: returns 0, not None, when nothing is cached there", "quarantine_near_miss, quarantine",
     v.ReturnValueViolation, ["QuarantineMissReturnsNone"]),
    ("evict: returns the tokens it freed", "evict", v.ReturnValueViolation, ["EvictMiscounts"]),
    ("sizes: protected = tokens under a lock; evictable + protected = total", "invariant sizes_add_up", v.RefcountViolation,
     ["ProtectedCountsNodes"]),
    ("sizes: quarantined-but-locked tokens count in none", "invariant sizes_add_up, quarantine_locked", v.RefcountViolation,
     ["TotalCountsDetached"]),
    ("quarantine: siblings of the branch are untouched", "quarantine_one_sibling, quarantine_near_miss", v.NeverSawViolation,
     ["QuarantineTakesSiblings"]),
    ("quarantine: the branch is unreachable at once", "quarantine", v.NeverSawViolation, ["QuarantineLeavesBranchLinked"]),
    ("quarantine: returns the tokens unlinked, locked ones included", "quarantine_locked, quarantine_running",
     v.NeverSawViolation, ["QuarantineCountsOnlyFreed"]),
    ("quarantine: a locked node is freed at its last unlock, not before", "quarantine_locked, quarantine_running",
     v.SlotViolation, ["QuarantineFreesLocked"]),
    ("reset: frees every slot, quarantined ones included", "reset_while_quarantined", v.SlotViolation, ["ResetLeaksDetached"]),
    ("reset: every handle goes stale", "reset_while_quarantined, unlock", v.RefcountViolation, ["ResetKeepsHandlesLive"]),
    ("slots: each freed exactly once, none leaked", "invariant slots_conserved", v.SlotViolation, ["SplitKeepsStaleValues"]),
    ("bad input: refused with an exception (types, dimensions, None)", "bad_input", v.BadInputViolation, ["AcceptsFloatTokens"]),
    ("bad input: refused before anything changes", "bad_input", v.BadInputViolation, ["BadInputHalfApplied"]),
    ("namespaces: a match under N returns only what was inserted under N, whatever N's parts (namespaces=True)",
     "tenants_share_prompt, tenant_probes", v.TenantIsolationViolation,
     ["NamespacePartsUntagged", "NamespaceConcatenated", "NamespaceHash16", "NamespaceIgnoredOnMatch"]),
    ("namespaces: values only their type tells apart (5 and \"5\", None and \"None\") are two namespaces (namespaces=True)",
     "tenants_share_prompt, tenant_probes (generated pairs)", v.TenantIsolationViolation, ["NamespaceKeyedByStr"]),
    ("namespaces: values Python calls equal (1, 1.0 and True) are one namespace (namespaces=True)",
     "tenants_share_prompt, tenant_probes (generated pairs)", v.PrefixSetViolation, ["NamespaceSplitsEqualValues"]),
    ("namespaces: an insert under N caches under N, and counts only N's prefix (namespaces=True)",
     "tenants_share_prompt, tenant_probes, tenant_quarantine", v.TenantIsolationViolation, ["NamespaceIgnoredOnInsert"]),
    ("namespaces: evict_prefix under N changes no other namespace (namespaces=True)", "tenant_quarantine",
     v.TenantIsolationViolation, ["QuarantineCrossesNamespaces"]),
    ("namespaces: a lock under N protects N's path, not M's (namespaces=True)", "tenant_admit, invariant sizes_add_up",
     v.RefcountViolation, ["LockResolvedInDefaultNamespace"]),
    ("namespaces: an unhashable namespace is refused, changing nothing (namespaces=True)", "unhashable_namespace",
     v.BadInputViolation, ["(meta_tests/test_namespaces.py: the reference and the variants refuse it, state unchanged)"]),
    ("lifecycle: a publish moves the request's protected length to its whole pages, so its end frees only its own "
     "(lifecycle='requests')", "racing_prefill, chunked_request", v.SlotViolation, ["RetractFreesPublished"]),
    ("lifecycle: an end without the insert (retract, abort, skipped insert) frees every slot behind the cached prefix, "
     "and only those", "chunked_request, racing_prefill, end_request", v.SlotViolation,
     ["SkipInsertLeaks", "SkipInsertForgetsPrefix"]),
    ("lifecycle: after a publish the request reads the tree's slots, never a duplicate it freed", "racing_prefill",
     v.SlotViolation, ["PublishKeepsDuplicateRow"]),
    ("lifecycle: a publish moves the request's one lock to the new node, even when nothing was new", "publish_twice, racing_prefill",
     v.RefcountViolation, ["RepublishLocksTwice"]),
    ("lifecycle under a priority Policy: a request's publish and finish cache its pages at its priority "
     "(lifecycle='requests')", "next_requests_priority, request_arrives, publish_chunk, end_request, evict",
     v.EvictionOrderViolation, ["RequestInsertDropsPriority"]),
    ("lifecycle: an admission that fails after its match leaves no lock", "chunked_request, admission_fails",
     v.RefcountViolation, ["FailedAdmissionKeepsLock"]),
    ("second pool: a node's window slots are freed with its KV or alone by evict_window, each once, never a slot it no "
     "longer owns (second_pool=SlidingWindow)", "window_then_evict, slid_request, invariant second_pool_conserved",
     v.SecondSlotViolation, ["WindowStaleMapping"]),
    ("second pool: a match returns live window values only, never one the cache freed (cached as live)",
     "tombstone_then_match, evict_window, check_every_match", v.SecondValueViolation, ["WindowFreedKeptLive"]),
    ("second pool: a tombstone hides nothing: a match goes on past it once W live tokens follow", "tombstone_then_match, "
     "slid_request", v.TombstoneViolation, ["TombstoneHidesBranch"]),
    ("second pool: an unlock releases only its own window pins; a pinned value is never freed", "overlapping_locks",
     v.PinViolation, ["UnlockReleasesAncestorPins"]),
    ("second pool: a KV eviction never takes a page whose window or state a lock pins", "queued_admission, admit, evict",
     v.PinViolation, ["LeafHeldOnlyByItsWindow", "LeafHeldOnlyByItsState"]),
    ("second pool: pins count past 255 concurrent requests on one prompt (a window or a state)",
     "production_world (a crowd, then window pressure)", v.PinViolation, ["WindowPinCountWraps8Bit", "StatePinCountWraps8Bit"]),
    ("second pool: a match is the longest cached prefix whose last min(W, L) tokens are live (a window), or that ends at a "
     "live state (a state pool)", "every match", v.WindowMatchViolation,
     ["(meta_tests/test_hybrid.py: a cache that ignores the window, one that ignores the states)"]),
    ("second pool: evict_window frees what it is asked while an unpinned live value is left", "evict_window",
     v.EvictionAmountViolation, ["(meta_tests/test_hybrid.py: a window eviction that stops short)"]),
    ("lifecycle: the suite's own engine steps (lifecycle='tree') free what an engine frees; a correct tree passes",
     "every lifecycle rule", v.SlotViolation, ["(meta_tests/test_lifecycle.py: the reference and a trusting variant in both modes)"]),
    ("keys (key_mode='bigram'): n raw tokens cache (n - 1) // page_size * page_size bigrams, never the page floor of n",
     "insert, match (raw tokens: BIGRAM_START + keys)", v.PrefixSetViolation, ["BigramAlignsRawTokens"]),
    ("composed (a second pool with lifecycle='requests'): after cache_unfinished_req the request no longer names the window "
     "slots the tree took, and an end frees only what it still holds", "publish_chunk, end_request, finish_after_decode",
     v.SecondSlotViolation, ["RequestKeepsTakenWindow"]),
    ("composed (a state pool with lifecycle='requests'): a finish frees its final state only if the insert did not take it",
     "finish_after_decode, end_request", v.SecondSlotViolation, ["FinishFreesTakenState"]),
    ("composed (key_mode='bigram' with a second pool): key i keeps raw token i's window slot; the window and the pages are "
     "counted in keys", "insert, match (raw tokens: BIGRAM_START + keys, one window slot per raw token)",
     v.SecondValueViolation, ["BigramWindowAlignsRawTokens"]),
    ("DFS order meets the bound of Theorem 3.1 (oracle 6)", "conformance/test_scheduling.py", v.DFSBoundViolation,
     ["(meta_tests/test_dfs_meta.py: non-DFS orders, SplitOffByOne)"]),
    ("every call returns within the per-operation limit", "every rule (guarded)", v.ContractViolation,
     ["(meta_tests/test_target_loading.py: a hanging call is cut off)"]),
]


REGENERATE = "python -m radixcheck.reports.catalogue"


def report_rows() -> list[ExpectedRows]:
    """The rows BUG_CATALOGUE.md must have: one per catalogued mutant and per correct cache."""
    return [ExpectedRows("mutant", tuple(m.__name__ for m in MUTANTS), "Mutants"),
            ExpectedRows("correct cache", tuple(variant_names()), "Correct caches: no false alarms")]


def _first_kill(name: str) -> dict[str, Any]:
    return first_kill(machine_for_mutant(next(m for m in MUTANTS if m.__name__ == name)))


def first_kill(machine: Any) -> dict[str, Any]:
    """Stream 0 of a mutant's machine (the derandomized `mutation` run, the one the meta-test sees)
    and a bounded shrink (the cache catalogue's and the index catalogue's)."""
    start = time.perf_counter()
    try:
        run_machine(machine, profiles.SETTINGS["mutation"])
        return {"caught": False, "seconds_to_kill": round(time.perf_counter() - start, 2)}
    except Exception:  # noqa: BLE001 - a kill; its oracle comes from the shrunk failure below
        seconds = round(time.perf_counter() - start, 2)
    try:
        run_machine(machine, profiles.SETTINGS["audit"])
    except Exception as shrunk:  # noqa: BLE001
        described = describe_failure(shrunk)
        described.pop("exceptions")  # one machine failure: its type, message and program are already there
        return {"caught": True, "seconds_to_kill": seconds, **described}
    return {"caught": True, "seconds_to_kill": seconds, "oracle": "(did not fail again when shrunk)"}


def _say(line: str) -> None:
    """A progress line on stderr (the report itself is written only at the end: a long run is not silent)."""
    print(f"catalogue: {line}", file=sys.stderr, flush=True)


def build(streams: int, jobs: int, only: list[str] | None = None) -> list[dict[str, Any]]:
    names = [m.__name__ for m in MUTANTS if not only or m.__name__ in only]
    start = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        first = dict(zip(names, pool.map(_first_kill, names), strict=True))
    _say(f"stream 0 and its shrink of {len(names)} mutant(s): {time.perf_counter() - start:.0f} s"
         + (f"; now {streams} streams each" if streams else ""))
    rates = {}
    for rate in measure(names, streams, jobs, progress=lambda name, done: _say(f"{name}: {done}/{streams} streams")) if streams else ():
        rates[rate.mutant] = rate
        _say(f"{rate.mutant}: {rate.kills}/{rate.streams} killed for the right reason ({rate.seconds:.0f} s)")
    rows = []
    for mutant in [m for m in MUTANTS if m.__name__ in names]:
        rate = rates.get(mutant.__name__)
        rows.append({
            "bug_class": mutant.bug_class,
            "sources": list(mutant.sources),
            "mutant": f"radixcheck.properties.cache.mutants:{mutant.__name__}",
            "what": " ".join((mutant.__doc__ or "").split()),
            "kills": rate.kills if rate else None,
            "wrong_reason": rate.wrong_reason if rate else None,
            "streams": streams,
            **first[mutant.__name__],
        })
    return rows


def _rate(row: dict[str, Any]) -> str:
    return "" if row["kills"] is None else f"{row['kills']}/{row['streams']} ({100 * row['kills'] / row['streams']:.1f} %)"


def obligations_table() -> str:
    return tabulate([[o, f"`{r}`", getattr(c, "oracle", f"crash ({c.__name__})"), ", ".join(f"`{m}`" for m in ms)]
                     for o, r, c, ms in OBLIGATIONS],
                    headers=["obligation", "exercised by", "oracle", "mutant(s) that break it"], tablefmt="github")


def variants_table(variants: list[dict[str, Any]]) -> str:
    return tabulate([[f"`{v['variant']}`", v["machine"], f"{v['failed']}/{v['streams']}", v["first_failure"]] for v in variants],
                    headers=["correct cache", "machine", "streams failed", "first failure"], tablefmt="github")


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value == value else "(not kept)"  # NaN: a row saved before times were kept


def _times(killed: list[float], rows: int) -> str:
    if not killed:
        return "time to kill not kept"
    timed = f" ({len(killed)} of {rows} timed)" if len(killed) < rows else ""
    p90 = statistics.quantiles(killed, n=10, method="inclusive")[-1] if len(killed) > 1 else killed[0]
    return f"median time to kill {statistics.median(killed):.2f} s, 90th percentile {p90:.2f} s, max {max(killed):.2f} s{timed}"


def render(rows: list[dict[str, Any]], variants: list[dict[str, Any]] | None = None, run: dict[str, Any] | None = None) -> str:
    """The catalogue; ``run`` is :func:`~radixcheck.provenance.run_stamp` taken before the run (now, if none)."""
    killed = [r["seconds_to_kill"] for r in rows if r["caught"] and r["seconds_to_kill"] == r["seconds_to_kill"]]  # not NaN: kept rows
    measured = [r for r in rows if r["kills"] is not None]
    lowest = min(measured, key=lambda r: r["kills"] / r["streams"]) if measured else None
    table = tabulate(
        [[r["bug_class"], "<br>".join(r["sources"]), f"`{r['mutant'].split(':')[1]}`", r.get("oracle", ""),
          "yes" if r["caught"] else "**NO**", _seconds(r["seconds_to_kill"]), _rate(r)] for r in rows],
        headers=["bug class", "source", "mutant", "caught by oracle", "caught (stream 0)", "time to kill (s)", "kill rate"],
        tablefmt="github",
    )
    parts = [
        "# Bug catalogue",
        "",
        describe_run(run or run_stamp())
        + " Regenerate with `python -m radixcheck.reports.catalogue` (about 30 min on 2 cores at 200 streams). "
        "Each row is a class of bug seen in real radix caches, reproduced as a one-idea mutant of the reference "
        "(`properties/cache/mutants.py`) and run through the conformance state machine at the gate's budget "
        "(100 examples x 50 steps, no shrinking). The *kill rate* counts the streams, each derandomized under its "
        "own name and so reproducible, in which the mutant was caught by one of the oracles its bug class predicts: "
        "it says how little a catch depends on one lucky stream. *Time to kill* is stream 0's wall time to the first "
        "failure, a noisy figure on a shared 2-core machine.",
        "",
        f"**{sum(r['caught'] for r in rows)} of {len(rows)} caught in stream 0; {_times(killed, len(rows))}"
        + (f"; lowest kill rate {_rate(lowest)} ({lowest['bug_class']})" if lowest else "") + ".**",
        "",
        "## Obligations",
        "",
        "Every obligation of the contract (`properties/cache/contract.py`), the rule or scenario that exercises it within "
        "a few steps, the oracle that judges it, and the catalogued mutant that breaks it.",
        "",
        obligations_table(),
        "",
        "## Mutants",
        "",
        table,
        "",
        "## Correct caches: no false alarms",
        "",
        "The reference and every correct variant (`CORRECT_VARIANTS`: one that trusts its callers, one without reset, "
        "one that locks only through a fresh match, one with a FIFO policy), on the ordinary machine and on the "
        "production-scale one, each stream derandomized under its own name; every stream must pass.",
        "",
        variants_table(variants) if variants else "(not measured in this run: --variant-streams 0)",
        "",
        "## Minimal reproductions",
        "",
    ]
    for r in rows:
        parts += [f"### {r['bug_class']} — `{r['mutant']}`", "", r["what"], "", f"Reason: {r.get('reason', '')}", "",
                  "```python", r.get("program") or "(not caught)", "```", ""]
    return "\n".join(parts)


def merged(rows: list[dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """The saved catalogue's rows with ``rows`` in place of theirs (or added), in MUTANTS' order."""
    try:
        saved = json.loads((out / "artifacts" / "catalogue.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = []
    by_name = {r["mutant"]: r for r in saved} | {r["mutant"]: r for r in rows}
    order = [f"radixcheck.properties.cache.mutants:{m.__name__}" for m in MUTANTS]
    return [{"seconds_to_kill": float("nan"), **by_name[name]} for name in order if name in by_name]


def saved_variants(out: Path) -> list[dict[str, Any]]:
    try:
        return json.loads((out / "artifacts" / "false_alarms.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def merged_variants(rows: list[dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """The saved false-alarm rows with ``rows`` in place of theirs (or added), in the variants' order."""
    by_key = {(r["variant"], r["machine"]): r for r in saved_variants(out)} | {(r["variant"], r["machine"]): r for r in rows}
    order = {name: i for i, name in enumerate(variant_names())}
    return sorted((r for r in by_key.values() if r["variant"] in order), key=lambda r: order[r["variant"]])


def saved_streams(out: Path) -> int:
    """The streams behind the kill rates of the catalogue saved in ``out`` (0 if none)."""
    try:
        rows = json.loads((out / "artifacts" / "catalogue.json").read_text(encoding="utf-8"))
        return max((r["streams"] for r in rows if r.get("kills") is not None), default=0)
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.catalogue", description=__doc__.splitlines()[0])
    parser.add_argument("mutants", nargs="*", metavar="MUTANT",
                        help="only these mutants: their rows replace the saved ones, the others and the false-alarm rows "
                             "are kept (add --variant NAME to re-run those too)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: reports/ in a checkout, ./radixcheck-reports when installed)")
    parser.add_argument("--streams", type=non_negative_int, default=200, help="streams per mutant for the kill rate (0: skip)")
    parser.add_argument("--variant-streams", type=non_negative_int, default=50,
                        help="streams per correct variant and machine for the false-alarm table (default 50; 0: skip)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="only this correct cache's false-alarm rows (repeatable); the others are kept")
    parser.add_argument("--jobs", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument("--force", action="store_true", help="replace the saved catalogue even with fewer streams")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.mutants) - {m.__name__ for m in MUTANTS})
    if unknown:
        parser.error(f"argument MUTANT: unknown mutant(s) {', '.join(unknown)}")
    unknown = sorted(set(args.variant) - set(variant_names()))
    if unknown:
        parser.error(f"--variant {unknown[0]}: no such correct cache (one of {', '.join(variant_names())})")
    if args.variant and not args.variant_streams:
        parser.error("--variant needs --variant-streams above 0")
    if problem := shrink_setting_problem():  # else every stream would fail on it and count as a kill
        parser.error(problem)
    out = args.out or default_out()
    if args.out is None and args.streams < saved_streams(out):  # --out DIR chooses the place: nothing there is protected
        refuse_weaker(parser, out / "BUG_CATALOGUE.md",
                      [f"--streams {args.streams}: " + (f"kill rates over {args.streams} streams" if args.streams else "no kill rates")
                       + f" where it has them over {saved_streams(out)}"], args.force)
    stamp = run_stamp()  # before the run: its code and settings
    # Measure first, then read the saved rows to merge into: two runs of different rows may overlap.
    fresh_rows = build(args.streams, args.jobs, args.mutants or None) if args.mutants or not args.variant else []
    if args.variant:
        fresh_variants = false_alarms(args.variant_streams, args.jobs, only=args.variant)
    elif args.mutants:  # named mutants re-run their rows only: every false-alarm row (hours of streams) is kept
        fresh_variants = []
    else:
        fresh_variants = false_alarms(args.variant_streams, args.jobs) if args.variant_streams else []
    # named rows replace theirs; every other saved row is kept
    rows = merged(fresh_rows, out) if args.mutants or args.variant else fresh_rows
    variants = merged_variants(fresh_variants, out) if args.variant else fresh_variants or saved_variants(out)
    (out / "artifacts").mkdir(parents=True, exist_ok=True)
    (out / "BUG_CATALOGUE.md").write_text(render(rows, variants, stamp) + "\n", encoding="utf-8")
    # each row with its time to kill, so that a run of a few mutants keeps the others' times
    (out / "artifacts" / "catalogue.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    (out / "artifacts" / "false_alarms.json").write_text(
        json.dumps([{k: val for k, val in r.items() if k != "seconds"} for r in variants], indent=2) + "\n", encoding="utf-8")
    print(render(rows, variants, stamp).split("## Minimal")[0])


if __name__ == "__main__":
    main()
