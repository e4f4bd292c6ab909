"""The tier bug catalogue: every obligation of the tier contract, the rule of the tier machine that
exercises it, the oracle that judges it and the mutant that breaks it; each tier mutant's kill
rate over many streams and its smallest interleaving as a repro file; and the false-alarm streams
of the reference tiered cache in every write policy and page size.

    python -m radixcheck.reports.tier_catalogue                  # TIER_CATALOGUE.md, artifacts/tier_catalogue.json
    python -m radixcheck.reports.tier_catalogue --streams 200 --variant-streams 50
    python -m radixcheck.reports.tier_catalogue --only MruFirstTier --only TieredLfu   # re-run these rows only

Kill rates as in ``radixcheck.reports.kill_rates``: the gate's budget (the `mutation` profile, 100
examples x 50 steps, no shrinking) once per stream, each stream derandomized under its own name;
a mutant with two write policies runs both in a stream, and is caught if either run catches it.
The repro file comes from a bounded shrink under the `audit` profile.

Cost of a correct cache's row: 4 worlds x ``--variant-streams`` runs of the tier machine, each about
5 s of CPU (measured in session 60 on `TieredRadixCache`: ~45 % Hypothesis's generation, the rest the
world, the cache and its oracles, no hot spot; its mid-world ``reset`` rule costs nothing measurable,
4.8 s a stream declared, 5.3 s with ``supports_reset=False``), so ~17 CPU-minutes at 50 streams: an
hour or more of wall time on a loaded shared machine. Profile with a CPU timer: under load a wall-clock
profile charges the waits to ``time.process_time`` (each call is a preemption point), not to the work.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck import profiles
from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int, refuse_weaker
from radixcheck.oracles import violations as v
from radixcheck.properties.findings.verdict import run_machine, shrink_setting_problem
from radixcheck.properties.tiers.machine import tier_machine_for
from radixcheck.properties.tiers.mutants import CORRECT_TIER_VARIANTS, TIER_MUTANTS, machines_for_mutant
from radixcheck.properties.tiers.repro import tier_repro
from radixcheck.provenance import describe_run, run_stamp
from radixcheck.reports import default_out
from radixcheck.reports.report_rows import ExpectedRows
from radixcheck.reports.rerun import SavedCatalogue, add_only, check_only, runs_section, runs_sentence

# (obligation, rule or scenario of the tier machine that exercises it, the oracle's exception, mutants that break it)
TIER_OBLIGATIONS: list[tuple[str, str, type[BaseException], list[str]]] = [
    ("a failed backup never counts as backed up", "backup_fails, fail_next, serve", v.FailedBackupViolation,
     ["EvictsToHostAfterFailedBackup"]),
    ("backups go top-down: no page on host below one that is not (the backup chain)", "backup_fails, evict, serve",
     v.BackupChainViolation, ["WriteBackSkipsAncestors", "BackupChainGap"]),
    ("a host slot is never freed while a write to it is pending or a load reads it, even by an eviction load-back "
     "re-enters", "reload_under_pressure, complete", v.TransferInFlightViolation, ["NestedHostEvictionFreesLoading"]),
    ("host eviction never orphans a reachable subtree", "to_host, evict_host", v.HostOrphanViolation,
     ["HostEvictionOrphansSubtree"]),
    ("write-through persists every page it caches before it can leave the device", "serve, evict", v.PersistViolation,
     ["PartialPersist"]),
    ("a match or load-back never counts host pages past the first host gap", "to_host, serve (load)", v.HostGapViolation,
     ["LoadBackPastHostGap"]),
    ("evict-equals-never-saw on both tiers", "quarantine", v.NeverSawViolation, ["QuarantineKeepsHostCopies"]),
    ("every page on device, host or both; where both, the host copy is the same KV", "complete, finish",
     v.TierResidencyViolation, ["WritesPageReversed"]),
    ("device and host slot conservation, separately", "invariant conserved", v.HostSlotViolation, []),
    ("device eviction takes the least recently used unlocked device leaf first (freed, or written back under write-back)",
     "evict, serve, match", v.LRUOrderViolation, ["MruFirstTier"]),
    ("host eviction takes host-only leaves in the device tier's order: least recently used first, or the declared "
     "Policy's key (a page keeps its statistics on host)", "evict_host, to_host, match", v.HostEvictionOrderViolation,
     ["MruHostFirst", "LfuHostByRecency"]),
    ("device eviction frees (or, under write-back, starts writing back) num_tokens unless no candidate is left, and "
     "takes no leaf once that count reached num_tokens", "evict, serve", v.EvictionAmountViolation,
     ["TierEvictOvershoots", "TierEvictStopsShort"]),
    ("host eviction frees num_tokens host tokens unless no host-only leaf is left, and frees none once it reached them",
     "evict_host, to_host", v.HostEvictionAmountViolation, ["TierEvictHostOvershoots", "TierEvictHostStopsShort"]),
    ("namespaces=True: a match under N counts, and a load-back under N reads, only N's pages on both tiers (composed)",
     "tenants_through_host, tenant_serve, tenant_quarantine", v.TenantIsolationViolation, ["HostLookupIgnoresNamespace"]),
    ("eviction_policy=Policy: device eviction by the policy's key; a page keeps its hits through a load-back, and an "
     "insert that revives it from host raises its priority (composed)",
     "frequent_through_host, priority_through_host, next_priority, evict", v.EvictionOrderViolation,
     ["LoadBackForgetsHits", "RevivedPageKeepsOldPriority"]),
    ("lifecycle='tree': a retract or an abort while a load-back is in flight frees no page another request holds (composed)",
     "abort_during_load, admit_request, end_request", v.RefcountViolation, ["AbortCancelsLoad"]),
    ("lifecycle='tree': a retract or an abort leaves no lock behind: a page nobody holds is a candidate for eviction "
     "(composed)", "abort_during_load, evict", v.LRUOrderViolation, ["AbortKeepsLoadLock"]),
    ("lifecycle='tree' under write_back: a write-back that lands under a request admitted meanwhile leaves its pages "
     "on device (composed)", "publish_during_backup (early)", v.RefcountViolation, ["WriteBackIgnoresLock"]),
    ("lifecycle='tree': a retract or an abort after a publish frees no host slot its chunk's pending backup writes "
     "(composed)", "publish_during_backup, publish_chunk, end_request", v.TransferInFlightViolation,
     ["RetractFreesWritingHost"]),
    ("namespaces=True + write_back: a write-back's completion lands on the node it wrote, not on another tenant's "
     "copy of the same tokens (composed)", "tenant_quarantine, tenants_through_host, complete",
     v.TransferInFlightViolation, ["WriteBackAckWrongTenant"]),
    ("lifecycle='requests': a retract or an abort (cache_finished_req without the insert) frees only the request's own "
     "slots, never the pages its load-back still fills", "abort_during_load, admit_request, end_request",
     v.TransferInFlightViolation, ["AbortFreesLoadingPages"]),
    ("lifecycle='requests': a retract or an abort after a load-back releases the request's lock (the load's completion "
     "does not)", "abort_during_load, evict", v.LRUOrderViolation, ["AbortKeepsItsLock"]),
    ("lifecycle='requests' under write_through: cache_unfinished_req moves the request's lock to the published pages "
     "even while their backups are in flight", "evict_under_a_publish, publish_chunk", v.RefcountViolation,
     ["PublishSkipsRelockWhileBacking"]),
    ("lifecycle='requests': after cache_unfinished_req the request reads the tree's slots, never a duplicate it freed",
     "racing_publish, publish_chunk", v.SlotViolation, ["PublishReadsFreedDuplicates"]),
    ("lifecycle='tree': a chunk published while its backups (or its prefix's write-back) are pending; running "
     "requests' own slots counted by conservation", "publish_during_backup, publish_chunk, compute_chunk",
     v.SlotViolation, []),
    ("second_pool=StatePool(): a page's host copy carries its state and a load-back returns it, the values inserted for "
     "those tokens (not its parent's, never none); host eviction frees no other page's state (composed)",
     "states_through_host, serve, finish", v.SecondValueViolation,
     ["LoadBackRestoresParentState", "WriteBackDropsState", "HostEvictionFreesDeviceState"]),
    ("second_pool=SlidingWindow(window=W): a page's host copy carries its live window values, and a load-back restores "
     "them on the pages of the last W tokens of the path it loads (those on device too); further back it may restore "
     "only each token's own host value, or leave it tombstoned (composed)",
     "windows_through_host, serve, finish", v.TierWindowViolation,
     ["LoadBackRestoresBeyondWindowFromWrongPage", "LoadBackRestoresNoWindow", "WriteBackDropsWindow", "LoadBackSkipsDeviceWindow"]),
    ("second_pool=SlidingWindow(window=W): a match is resumable on each tier: its device part ends where the last W "
     "tokens have their window live on device, its host part where they have it live on device or in a host copy "
     "(composed)", "windows_through_host, serve, match", v.WindowMatchViolation, ["HostMatchIgnoresWindow"]),
    ("second_pool=SlidingWindow(window=W): a load-back whose load failed and moved nothing returns the device path only "
     "up to where its last W tokens have their window live on device, not a path whose window is dead at its end "
     "(composed)", "failed_load_at_a_dead_window, fail_next, serve", v.TombstoneViolation, ["FailedLoadResumesAtDeadWindow"]),
]

REGENERATE = "python -m radixcheck.reports.tier_catalogue"
VARIANT_WORLDS = [(policy, page) for policy in ("write_through", "write_back") for page in (1, 2)]


def report_rows() -> list[ExpectedRows]:
    """The rows TIER_CATALOGUE.md must have: one per tier mutant and per correct tiered cache."""
    return [ExpectedRows("mutant", tuple(m.__name__ for m in TIER_MUTANTS), "Mutants"),
            ExpectedRows("correct cache", tuple(CORRECT_TIER_VARIANTS), "Correct tiered caches: no false alarms")]


def _oracles(caught_by: type | tuple[type, ...]) -> str:
    """The oracle (or oracles, any of which is the right reason) a mutant's bug class predicts."""
    return " or ".join(c.oracle for c in (caught_by if isinstance(caught_by, tuple) else (caught_by,)))


def _mutant(name: str) -> type:
    return next(m for m in TIER_MUTANTS if m.__name__ == name)


def _stream(job: tuple[str, int]) -> tuple[bool, bool]:
    """(caught, caught by the right oracle) for stream ``k`` of mutant ``name``."""
    name, k = job
    mutant = _mutant(name)
    for machine in machines_for_mutant(mutant, f"stream{k}_{name}"):
        try:
            run_machine(machine, profiles.SETTINGS["mutation"])
        except Exception as exc:  # noqa: BLE001 - a kill is any failure; the type says whether it is the right one
            return True, isinstance(exc, mutant.caught_by)
    return False, False


def _first_kill(name: str) -> dict[str, Any]:
    mutant = _mutant(name)
    start = time.perf_counter()
    for machine in machines_for_mutant(mutant):
        try:
            run_machine(machine, profiles.SETTINGS["audit"])
        except Exception as exc:  # noqa: BLE001
            seconds = time.perf_counter() - start
            repro = tier_repro(exc.radixcheck_machine.world, exc, f"{mutant.__module__}:{name}")
            return {"caught": True, "seconds": round(seconds, 2), "oracle": getattr(exc, "oracle", type(exc).__name__),
                    "reason": " ".join(str(exc).split())[:300], "program": repro.text, "repro_exit": repro.exit_code,
                    "operations": repro.calls}
    return {"caught": False, "seconds": round(time.perf_counter() - start, 2)}


def _variant_stream(job: tuple[str, str, int, int]) -> str | None:
    name, policy, page, k = job
    machine = tier_machine_for(CORRECT_TIER_VARIANTS[name], page, policy, f"stream{k}_{name}_{policy}_p{page}")
    try:
        run_machine(machine, profiles.SETTINGS["mutation"])
    except Exception as exc:  # noqa: BLE001 - any failure of a correct cache is a false alarm
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return None


def build(streams: int, variant_streams: int, jobs: int,
          only: list[str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every mutant's and correct cache's rows (``only``: just those named)."""
    names = [m.__name__ for m in TIER_MUTANTS if only is None or m.__name__ in only]
    with ProcessPoolExecutor(jobs) as pool:
        first = dict(zip(names, pool.map(_first_kill, names), strict=True))
        rows = []
        for name in names:
            results = list(pool.map(_stream, [(name, k) for k in range(streams)]))
            mutant = _mutant(name)
            rows.append({"mutant": name, "bug_class": mutant.bug_class, "sources": list(mutant.sources),
                         "policies": list(mutant.policies), "oracle_expected": _oracles(mutant.caught_by),
                         "what": " ".join((mutant.__doc__ or "").split()), "streams": streams,
                         "kills": sum(right for _, right in results) if streams else None,
                         "wrong_reason": sum(caught and not right for caught, right in results), **first[name]})
            print(f"{name}: {_rate(rows[-1])}, wrong reason {rows[-1]['wrong_reason']}", file=sys.stderr, flush=True)
        variants = []
        for name in [n for n in CORRECT_TIER_VARIANTS if only is None or n in only]:
            for policy, page in VARIANT_WORLDS:
                failures = [f for f in pool.map(_variant_stream, [(name, policy, page, k) for k in range(variant_streams)]) if f]
                variants.append({"variant": name, "world": f"{policy}, page size {page}", "streams": variant_streams,
                                 "failed": len(failures), "first_failure": failures[0] if failures else ""})
                print(f"{name} {policy} p{page}: {len(failures)}/{variant_streams} failed {failures[:1]}", file=sys.stderr,
                      flush=True)
    return rows, variants


def _rate(row: dict[str, Any]) -> str:
    return "" if row["kills"] is None else f"{row['kills']}/{row['streams']} ({100 * row['kills'] / row['streams']:.1f} %)"


def render(rows: list[dict[str, Any]], variants: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    obligations = tabulate([[o, f"`{r}`", c.oracle, ", ".join(f"`{m}`" for m in ms) or "(meta-tests only)"]
                            for o, r, c, ms in TIER_OBLIGATIONS],
                           headers=["obligation", "exercised by", "oracle", "mutant(s) that break it"], tablefmt="github")
    mutants = tabulate([[r["bug_class"], "<br>".join(r["sources"]) or "(radixcheck's own)", f"`{r['mutant']}`",
                         ", ".join(r["policies"]), r.get("oracle", "**not caught**"), f"{r['seconds']:.2f}", _rate(r),
                         r["wrong_reason"]] for r in rows],
                       headers=["bug class", "source", "mutant", "write policies", "caught by oracle (stream 0, shrunk)",
                                "time to kill and shrink (s)", "kill rate", "wrong reason"], tablefmt="github")
    false = tabulate([[f"`{x['variant']}`", x["world"], f"{x['failed']}/{x['streams']}", x["first_failure"]] for x in variants],
                     headers=["correct cache", "world", "streams failed", "first failure"], tablefmt="github")
    parts = ["# Tier bug catalogue", "",
             f"{describe_run(meta)} Command: `{meta['command']}`, in {meta['seconds']:.0f} s ({meta['machine']}). "
             f"{runs_sentence(meta.get('runs', []))}Each row is "
             "a class of bug SGLang's hierarchical cache (HiCache) met in 2026, reproduced as a one-idea mutant of the "
             "reference tiered cache (`reference/tiered_cache.py`, mutants in `properties/tiers/mutants.py`) and run through "
             "the tier machine (`properties/tiers/machine.py`: the suite completes, fails or holds back every transfer) at "
             "the gate's budget (100 examples x 50 steps, no shrinking). The kill rate counts the streams, each "
             "derandomized under its own name, in which the mutant was caught by the oracle its bug class predicts.", "",
             "## Obligations", "", obligations, "", "## Mutants", "", mutants, "",
             "## Correct tiered caches: no false alarms", "",
             "The reference tiered cache (with namespaces and `lifecycle=\"tree\"`: the composed reference), "
             "`TrustingTenantTiers` (namespaces, and it trusts its callers: no handle checked, its own trees asserted before "
             "every eviction), `TieredLfu` and `TieredPriority` (namespaces and a declared Policy on the device tier), "
             "`LoadLockedTiers` (namespaces and the request lifecycle, a load-back protected by a load lock as SGLang's "
             "`HiRadixCache` does), `TrustingLifecycleTiers` (the lifecycle, trusting its callers), `TieredStateCache` "
             "(namespaces, the lifecycle and a state pool whose values follow their pages through the host tier: "
             "`reference/tiered_state_cache.py`), `TrustingStateTiers` (the same, trusting its callers), `TieredWindowCache` "
             "(namespaces, the lifecycle and a sliding window whose values follow their pages through the host tier, restored "
             "only at the end of a loaded path: `reference/tiered_window_cache.py`), `TrustingWindowTiers` (the same, "
             "trusting its callers) and `RestoresWholeHostSegment` (the same, restoring every loaded page's own host values, "
             "beyond the window too, as SGLang's whole-segment load-back does), `ReleasesHostDuplicates` (the same as "
             "`TieredWindowCache`, freeing under write-back the host copies of pages on device and keeping their window "
             "host copies, as SGLang's `_release_full_host_duplicate` does), `RequestTiers` (namespaces and "
             "`lifecycle=\"requests\"`: the reference's own request methods, `reference/tier_requests.py`), "
             "`TrustingRequestTiers` (the same, trusting its callers), `LoadLockedRequestTiers` (the same, its load-back "
             "protected by `LoadLockedTiers`' load lock until it lands), `RequestStateTiers` and `RequestWindowTiers` "
             "(namespaces, `lifecycle=\"requests\"` and a state pool or a sliding window: the request methods' inserts "
             "carry the request's state or window values) and `TrustingRequestStateTiers` and `TrustingRequestWindowTiers` "
             "(the same, trusting their callers), in each write policy "
             "and page size, each stream derandomized under its own name; every stream must pass.", "",
             false or "(not measured)", "",
             "## Minimal reproductions", "",
             "Each is the repro file of stream 0's shrunk failure (`radixcheck.properties.tiers.repro`): the operations in "
             "order, every completion the suite delivered as `w.complete(n)` where it happened, the controller's calls as "
             "comments. Each exits 1 on its mutant.", ""]
    for r in rows:
        parts += [f"### {r['bug_class']} — `{r['mutant']}`", "", r["what"], "", f"Reason: {r.get('reason', '')}", "",
                  f"Repro: {r.get('operations', 0)} operations, exit code {r.get('repro_exit')}.", "",
                  "```python", (r.get("program") or "(not caught)").rstrip(), "```", ""]
    parts += runs_section(meta.get("runs", []))
    return "\n".join(parts)


CATALOGUE = SavedCatalogue(
    REGENERATE, "TIER_CATALOGUE.md", "tier_catalogue.json",
    [m.__name__ for m in TIER_MUTANTS], lambda r: r["mutant"],
    [(n, f"{policy}, page size {page}") for n in CORRECT_TIER_VARIANTS for policy, page in VARIANT_WORLDS],
    lambda x: (x["variant"], x["world"]),
    "time to kill and shrink (s)", "seconds", render)


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.tier_catalogue", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: reports/ in a checkout)")
    parser.add_argument("--streams", type=non_negative_int, default=200, help="streams per mutant for the kill rate (0: skip)")
    parser.add_argument("--variant-streams", type=non_negative_int, default=50,
                        help="streams per correct cache, write policy and page size")
    parser.add_argument("--jobs", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument("--force", action="store_true", help="replace the saved catalogue even with fewer streams")
    add_only(parser, "mutant or correct cache")
    args = parser.parse_args(argv)
    if problem := shrink_setting_problem():  # else every stream would fail on it and count as a kill
        parser.error(problem)
    out = args.out or default_out()
    check_only(parser, args.only, [m.__name__ for m in TIER_MUTANTS] + list(CORRECT_TIER_VARIANTS),
               "tier mutant or correct cache", CATALOGUE.artifact_path(out))
    if args.out is None and args.streams < CATALOGUE.saved_streams(out):
        refuse_weaker(parser, out / "TIER_CATALOGUE.md",
                      [f"--streams {args.streams} where it has kill rates over {CATALOGUE.saved_streams(out)}"], args.force)
    started, stamp = time.perf_counter(), run_stamp()  # before the run: its code and settings
    rows, variants = build(args.streams, args.variant_streams, args.jobs, args.only or None)
    CATALOGUE.save(out, args, started, rows, variants, stamp)


if __name__ == "__main__":
    main()
