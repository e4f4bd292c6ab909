"""Kill rates: how often the gate's search catches each catalogued mutant, over many streams.

The derandomized ``ci`` run is one fixed stream of examples per test; a catch in it could be
luck. Here each mutant runs under the gate's budget (the `mutation` profile: ci's search without
shrinking) once per stream, each stream derandomized under its own name, so every figure is
reproducible: stream ``k`` of a mutant is always the same run.

    python -m radixcheck.reports.kill_rates --streams 200            # every mutant
    python -m radixcheck.reports.kill_rates --streams 50 EvictsLockedLeaf LockRefreshes
    python -m radixcheck.reports.kill_rates --streams 200 --index     # the KV-event index mutants

The index mutants (``radixcheck.properties.index.mutants``) run on the index machine the same
way; ``--false-alarms`` runs the reference index and its correct variants too (ordinary and churn
machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from radixcheck import profiles
from radixcheck.argtypes import ArgumentParser, non_negative_int, positive_int
from radixcheck.properties.cache.machine import machine_for
from radixcheck.properties.cache.mutants import CORRECT_VARIANTS, MUTANTS, machine_for_mutant
from radixcheck.properties.cache.scale_machine import scale_machine_for
from radixcheck.properties.findings.verdict import run_machine, shrink_setting_problem
from radixcheck.properties.index.mutants import CORRECT_INDEX_VARIANTS, INDEX_MUTANTS, machine_for_index_mutant
from radixcheck.reference import RadixCache
from radixcheck.reference.kv_index import KvIndex

PROGRESS_EVERY = 25  # streams between two progress reports of measure()


@dataclass(frozen=True)
class KillRate:
    mutant: str
    streams: int
    kills: int  # streams in which the mutant was caught by one of its own oracles
    wrong_reason: int  # streams in which it was caught, but by another oracle or a crash
    seconds: float  # wall time of all its streams

    @property
    def rate(self) -> float:
        return self.kills / self.streams if self.streams else float("nan")


def _one_stream(job: tuple[str, int]) -> tuple[bool, bool]:
    """(caught, caught by the right oracle) for stream ``k`` of mutant ``name``."""
    name, k = job
    mutant = next(m for m in [*MUTANTS, *INDEX_MUTANTS] if m.__name__ == name)
    make = machine_for_index_mutant if mutant in INDEX_MUTANTS else machine_for_mutant
    machine = make(mutant, f"stream{k}_{name}")
    try:
        run_machine(machine, profiles.SETTINGS["mutation"])
    except Exception as exc:  # noqa: BLE001 - a kill is any failure; the type says whether it is the right one
        return True, isinstance(exc, mutant.caught_by)
    return False, False


def _variant_stream(job: tuple[str, str, int]) -> str | None:
    """Stream ``k`` of correct variant ``name`` on machine ``kind`` ("ordinary" or "scale"): None
    if it passed, else the failure's type and first line (a false alarm)."""
    name, kind, k = job
    indexes = {v.__name__: v for v in [KvIndex, *CORRECT_INDEX_VARIANTS]}
    try:
        if name in indexes:
            machine = machine_for_index_mutant(indexes[name], f"stream{k}_{kind}_{name}", churn=kind == "churn")
        else:
            variant = RadixCache if name == "RadixCache" else next(v for v in CORRECT_VARIANTS if v.__name__ == name)
            make = scale_machine_for if kind == "scale" else machine_for
            machine = make(variant, variant.capabilities, getattr(variant, "page_size_for_test", 1), f"stream{k}_{kind}_{name}")
        run_machine(machine, profiles.SETTINGS["mutation"])
    except Exception as exc:  # noqa: BLE001 - any failure of a correct cache is a false alarm
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def false_alarms(streams: int, jobs: int = 2, index: bool = False, only: list[str] | None = None) -> list[dict[str, object]]:
    """Each correct variant and the reference, on both machines, over ``streams`` streams each:
    how many streams failed it (every one should pass). ``index``: the index reference and variants;
    ``only``: just these of them."""
    return list(_false_alarm_rows(streams, jobs, index, only))


def variant_names(index: bool = False) -> list[str]:
    """The reference and its correct variants (``index``: the index reference and its variants): the
    false-alarm table's rows."""
    return [v.__name__ for v in [KvIndex, *CORRECT_INDEX_VARIANTS]] if index else ["RadixCache", *(v.__name__ for v in CORRECT_VARIANTS)]


def _false_alarm_rows(streams: int, jobs: int, index: bool = False, only: list[str] | None = None) -> Iterator[dict[str, object]]:
    names = [n for n in variant_names(index) if only is None or n in only]
    with ProcessPoolExecutor(jobs) as pool:
        for name in names:  # a hybrid cache (a second pool) runs the hybrid production world as its scale machine
            kinds = ("ordinary", "churn") if index else ("ordinary", "scale")
            for kind in kinds:
                start = time.perf_counter()
                failures = [f for f in pool.map(_variant_stream, [(name, kind, k) for k in range(streams)]) if f]
                yield {"variant": name, "machine": kind, "streams": streams, "failed": len(failures),
                       "first_failure": failures[0] if failures else "", "seconds": round(time.perf_counter() - start, 1)}


def measure(names: list[str], streams: int, jobs: int = 2, progress: Callable[[str, int], None] | None = None) -> Iterator[KillRate]:
    """Each mutant's kill rate, as soon as its streams are done. ``progress(name, done)``, if given, is told
    every :data:`PROGRESS_EVERY` streams of a mutant (one mutant's 200 streams can take an hour on a loaded box)."""
    with ProcessPoolExecutor(jobs) as pool:
        for name in names:
            start = time.perf_counter()
            results = []
            for result in pool.map(_one_stream, [(name, k) for k in range(streams)]):
                results.append(result)
                if progress is not None and len(results) % PROGRESS_EVERY == 0 and len(results) < streams:
                    progress(name, len(results))
            yield KillRate(name, streams, sum(right for _, right in results),
                           sum(caught and not right for caught, right in results), time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(prog="python -m radixcheck.reports.kill_rates", description=__doc__.splitlines()[0])
    parser.add_argument("mutants", nargs="*", help="mutant class names (default: every catalogued mutant; --index: every index mutant)")
    parser.add_argument("--index", action="store_true", help="the KV-event index mutants (and, with --false-alarms, its variants)")
    parser.add_argument("--streams", type=positive_int, default=50, help="streams per mutant (default 50)")
    parser.add_argument("--jobs", type=positive_int, default=2, help="worker processes (default 2)")
    parser.add_argument("--false-alarms", type=non_negative_int, default=0, metavar="STREAMS",
                        help="then run the reference and every correct variant over STREAMS streams per machine")
    args = parser.parse_args(argv)
    if problem := shrink_setting_problem():  # else every stream would fail on it and count as a kill
        parser.error(problem)
    known = {m.__name__ for m in [*MUTANTS, *INDEX_MUTANTS]}
    unknown = sorted(set(args.mutants) - known)
    if unknown:
        parser.error(f"argument mutants: unknown {unknown}; known: {sorted(known)}")
    default = INDEX_MUTANTS if args.index else MUTANTS
    for r in measure(args.mutants or [m.__name__ for m in default], args.streams, args.jobs):
        line = f"{r.mutant:32s} {r.kills:4d}/{r.streams} ({100 * r.rate:5.1f} %)  wrong reason {r.wrong_reason}  {r.seconds:6.1f} s"
        print(line, flush=True)
    if args.false_alarms:
        for row in _false_alarm_rows(args.false_alarms, args.jobs, args.index):
            print(f"{row['variant']:24s} {row['machine']:9s} {row['failed']}/{row['streams']} streams failed  {row['first_failure']}"
                  f"  {row['seconds']:6.1f} s", flush=True)


if __name__ == "__main__":
    main()
