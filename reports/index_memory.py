"""Memory of a KV-event index under a long store/remove churn, measured as process RSS.

An index whose removed nodes are never freed keeps answering right and dumps nothing, but its
router's memory grows with every distinct prompt it has ever seen (ai-dynamo/dynamo#11678, #10774,
#14878: ~1 GB/h). The contract's ``resident()`` catches that in process, where offered; Dynamo's
binding offers no such count, so this measures RSS. Each (index, workload) runs in a fresh
subprocess: it holds a small live set while ``prompts`` distinct prompts are stored and removed
(tail block first, one ``BlockRemoved`` per block, as vLLM's block pool publishes them),
sampling RSS (``/proc/self/statm``) as it goes, and at the
end checks that the dump is empty. The growth is the RSS added between 20 % of the run and its end,
per 10^5 prompts (a plateau reads ~0; an allocator keeps some slack, so the reference index is
measured beside it in the same run, and so is the ``LeaksRemovedNodes`` mutant, which must grow).

    .audit-venv/bin/python -m radixcheck.reports.index_memory              # INDEX_MEMORY.md + artifacts/index_memory.json
    .audit-venv/bin/python -m radixcheck.reports.index_memory --prompts 20000 --out /tmp/mem

Workloads: ``shared_head`` (distinct 4-block prompts under one system-prompt block, which stays
cached), ``nothing_shared`` (every prompt's first block new), ``split_points`` (a 64-block base stays
cached on one rank; each prompt diverges from it at a random block on another rank: distinct split
points, the trigger of #10774's split-but-never-merge growth).
"""

from __future__ import annotations

import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

from radixcheck.argtypes import ArgumentParser, positive_int
from radixcheck.provenance import describe_run, run_stamp
from radixcheck.reports import default_out
from radixcheck.reports.machine import cpu_line

INDEXES = {
    "dynamo_radix_tree": "radixcheck.properties.adapters.dynamo_index:dynamo_radix_tree",
    "reference": "radixcheck.reference.kv_index:KvIndex",
    "leaks_removed_nodes": "radixcheck.properties.index.mutants:LeaksRemovedNodes",  # the measurement can fail: it must grow
}
WORKLOADS = ("shared_head", "nothing_shared", "split_points")
SAMPLES = 20


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_one(spec: str, workload: str, prompts: int, seed: int = 0) -> dict[str, Any]:
    """One churn in this process (called in a fresh subprocess by :func:`measure`)."""
    from radixcheck.properties.index.contract import BlockRemoved, BlockStored, StoredBlock
    from radixcheck.properties.index.engines import chain_hash, tokens_hash
    from radixcheck.properties.target import load_target

    index = load_target(spec).factory()
    stream = random.Random(seed)
    a, b = (1, 0), (2, 0)

    def store(rank: tuple[int, int], parent: int | None, tokens: list[int]) -> list[int]:
        hashes, blocks, p = [], [], parent
        for t in tokens:
            h = chain_hash(p, tokens_hash(t))
            blocks.append(StoredBlock(h, tokens_hash(t)))
            hashes.append(h)
            p = h
        index.apply_event(rank[0], rank[1], BlockStored(parent, tuple(blocks)))
        return hashes

    base: list[int] = []
    if workload == "shared_head":
        base = store(a, None, [7])
    elif workload == "split_points":
        base = store(a, None, [7 + i for i in range(64)])
        store(b, None, [7 + i for i in range(64)])
    samples, started = [], time.perf_counter()
    every = max(1, prompts // SAMPLES)
    for n in range(prompts):
        fresh = [10**6 + stream.randrange(10**12) for _ in range(4)]
        if workload == "shared_head":
            new = store(a, base[0], fresh)
        elif workload == "nothing_shared":
            new = store(a, None, fresh)
        else:
            k = stream.randrange(1, 64)
            new = store(b, base[k - 1], fresh)
        rank = b if workload == "split_points" else a
        if n == 0:  # the churn really stores: the prompt matches on its rank before it is removed
            query = [tokens_hash(t) for t in ([7] if workload == "shared_head" else [7 + i for i in range(k)]
                                             if workload == "split_points" else []) + fresh]
            assert index.find_matches(query).get(rank) == len(query), (workload, index.find_matches(query))
        for h in reversed(new):  # one event per evicted block, tail first, as vLLM's block pool publishes them
            index.apply_event(rank[0], rank[1], BlockRemoved((h,)))
        if n % every == every - 1:
            samples.append((n + 1, rss_bytes()))
    seconds = time.perf_counter() - started
    for rank in [a, b] if workload == "split_points" else [a] if base else []:  # the live set goes too
        index.apply_event(rank[0], rank[1], BlockRemoved(tuple(reversed(base))))
    dumped = len(index.dump()) if hasattr(index, "dump") else None
    return {"samples": samples, "seconds": round(seconds, 1), "dump_after": dumped, "rss_end": rss_bytes()}


def growth_per_1e5(samples: list[tuple[int, int]]) -> float:
    """RSS added from 20 % of the run to its end, per 10^5 prompts (bytes)."""
    start = samples[max(0, len(samples) // 5 - 1)]
    end = samples[-1]
    return (end[1] - start[1]) / max(1, end[0] - start[0]) * 1e5


def measure(prompts: int, indexes: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for workload in WORKLOADS:
        for name, spec in indexes.items():
            code = (f"import json; from radixcheck.reports.index_memory import run_one; "
                    f"print(json.dumps(run_one({spec!r}, {workload!r}, {prompts})))")
            ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ | {"RUST_LOG": "error"})
            if ran.returncode:
                rows.append({"index": name, "workload": workload, "error": ran.stderr.strip().splitlines()[-1:]})
                print(f"[index-memory] {name} {workload}: {rows[-1]['error']}", flush=True)
                continue
            out = json.loads(ran.stdout.strip().splitlines()[-1])
            row = {"index": name, "workload": workload, "prompts": prompts, **out,
                   "growth_per_1e5_prompts": growth_per_1e5(out["samples"])}
            rows.append(row)
            print(f"[index-memory] {name:18s} {workload:15s} {prompts} prompts in {out['seconds']} s: RSS "
                  f"{out['samples'][0][1] / 2**20:.1f} -> {out['samples'][-1][1] / 2**20:.1f} MiB, "
                  f"growth {row['growth_per_1e5_prompts'] / 2**20:+.2f} MiB per 10^5 prompts, dump after: {out['dump_after']}",
                  flush=True)
    return rows


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    table = [[f"`{r['index']}`", r["workload"], r.get("prompts", ""),
              f"{r['samples'][0][1] / 2**20:.1f}" if "samples" in r else "", f"{r['samples'][-1][1] / 2**20:.1f}" if "samples" in r else "",
              f"{r['growth_per_1e5_prompts'] / 2**20:+.2f}" if "samples" in r else r.get("error", ""),
              r.get("dump_after", ""), r.get("seconds", "")] for r in rows]
    return "\n".join([
        "# KV-event index memory under churn (process RSS)", "",
        f"{describe_run(meta)} "
        f"Command: `{meta['command']}`, on {meta['machine']}; Python {meta['python']}. Each row is a fresh process: a small "
        "live set stays held while that many distinct prompts (4 blocks each) are stored and removed, leaves first. "
        "*Growth* is the RSS added from 20 % of the run to its end, per 10^5 prompts (a plateau reads about 0). "
        "*Dump after*: entries `dump()` lists once every block is removed (must be 0). The reference index runs beside "
        "Dynamo's in the same run, as the allocator's baseline.", "",
        tabulate(table, headers=["index", "workload", "prompts", "RSS at first sample (MiB)", "RSS at end (MiB)",
                                 "growth (MiB per 10^5 prompts)", "dump after", "seconds"], tablefmt="github"),
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m radixcheck.reports.index_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=positive_int, default=200_000, help="prompts per churn (default 200,000)")
    parser.add_argument("--out", type=Path, default=None, help="directory for INDEX_MEMORY.md and artifacts/ (default reports/)")
    args = parser.parse_args(argv)
    out = args.out or default_out()
    load, stamp = os.getloadavg(), run_stamp()  # before the run: its code and settings
    rows = measure(args.prompts, INDEXES)
    meta = {**stamp,
            "command": f"python -m radixcheck.reports.index_memory --prompts {args.prompts}", "python": platform.python_version(),
            "machine": f"{cpu_line()}, {os.cpu_count()} cores, load average "
                       f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"}
    (out / "artifacts").mkdir(parents=True, exist_ok=True)
    (out / "INDEX_MEMORY.md").write_text(render(rows, meta), encoding="utf-8")
    (out / "artifacts" / "index_memory.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"[index-memory] wrote {out / 'INDEX_MEMORY.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
