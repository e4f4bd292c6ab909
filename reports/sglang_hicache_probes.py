"""Two checks of SGLang 0.5.23's HiCache that the tier machine cannot make by itself (issue 31):

* **#39444** (write-through does not fully persist first-seen prefixes): the scheduler inserts a
  chunked prefill chunk by chunk (``checkpoint_into_tree``: ``InsertParams.inserted_len`` = what
  the request already inserted), which the tier contract's one insert per request does not send.
  The probe inserts a 12-token prompt in three chunks through the adapter's SGLang cache, delivers
  every write and counts what reached the host tier.
* **#33713** (Mamba nodes pruned instead of downgraded on device eviction): needs HiCache over a
  FULL+MAMBA tree; the probe builds one (``sglang_hicache_hybrid``) and says what host pools it has.

    .audit-venv/bin/python -m radixcheck.reports.sglang_hicache_probes
    .audit-venv/bin/python -m radixcheck.reports.sglang_hicache_probes --streams 20   # and the tier machine's streams

Prints one line per check; exits 0 when each check says what ``findings/sglang_trees.md`` says.
``--streams N`` also runs N derandomized streams of the tier machine per factory and write policy
(the tier catalogue's false-alarm budget: the ``mutation`` profile, one run per stream, each
under its own name), two at a time, and prints the failures per factory and policy.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor


def chunked_write_through(backend: str) -> tuple[int, int]:
    """(tokens on host after every write completed, tokens inserted) for a prompt inserted in chunks."""
    from radixcheck.properties.adapters import sglang_hicache
    from radixcheck.properties.tiers.world import TierWorld

    world = TierWorld(sglang_hicache.FACTORIES[f"hicache_{backend}"], 1, "write_through", device_slots=64, host_slots=64)
    adapter, sg = world.cache, world.cache.sg
    tokens = list(range(1, 13))
    slots = world.device.alloc(len(tokens))
    for slot, kv in zip(slots, world.model.content_of(tokens), strict=True):
        world.controller.device_kv[int(slot)] = kv
    inserted = 0
    for end in (4, 8, 12):  # three chunks, as checkpoint_into_tree inserts a chunked prefill
        world.model.on_insert(tokens[:end], [int(s) for s in slots[:end]])
        adapter.cache.insert(sg.InsertParams(key=adapter._key(tokens[:end]), value=sg.torch.from_numpy(slots[:end].copy()),
                                             prev_prefix_len=end, inserted_len=inserted))
        adapter.cache.flush_pending_backups()
        world.model.settle()
        inserted = end
    world.complete_all()
    world.check()
    return adapter.host_size(), len(tokens)


def mamba_hicache() -> str:
    """HiCache over a FULL+MAMBA tree on CPU (``sglang_hicache_hybrid``: SGLang's own
    ``HybridLinearKVPool``, ``page_first_direct``): what ``init_hicache`` built, or where it stopped."""
    from radixcheck.properties.adapters import sglang_hicache_hybrid
    from radixcheck.properties.tiers.world import TierWorld

    try:
        world = TierWorld(sglang_hicache_hybrid.hicache_mamba_python, 1, "write_through")
    except Exception as exc:  # noqa: BLE001 - the point is where it stops
        return f"{type(exc).__name__}: {exc}"
    pools = [type(entry.host_pool).__name__ for entry in world.cache.cache.cache_controller.mem_pool_host.entries]
    return f"constructed ({' + '.join(pools)})"


def stream(job: tuple[str, str, int]) -> str | None:
    """Stream ``k`` of the tier machine on factory ``name`` under ``policy``: its failure, or None."""
    from radixcheck import profiles
    from radixcheck.properties.adapters import sglang_hicache
    from radixcheck.properties.findings.verdict import run_machine
    from radixcheck.properties.tiers.machine import tier_machine_for

    name, policy, k = job
    try:
        run_machine(tier_machine_for(sglang_hicache.FACTORIES[name], 1, policy, f"stream{k}_{name}_{policy}"),
                    profiles.SETTINGS["mutation"])
    except Exception as exc:  # noqa: BLE001 - any failure is reported
        return f"stream{k}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return None


def streams(count: int) -> bool:
    from radixcheck.properties.adapters import sglang_hicache

    start, ok = time.perf_counter(), True
    jobs = [(name, policy, k) for name in sglang_hicache.FACTORIES for policy in sglang_hicache.POLICIES for k in range(count)]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(stream, jobs))
    for name in sglang_hicache.FACTORIES:
        for policy in sglang_hicache.POLICIES:
            failed = [r for (n, p, _), r in zip(jobs, results, strict=True) if n == name and p == policy and r]
            print(f"streams {name} {policy}: {len(failed)}/{count} failed{': ' + failed[0] if failed else ''}")
            ok &= not failed
    print(f"streams: {time.perf_counter() - start:.0f} s wall")
    return ok


def main(argv: list[str] | None = None) -> int:
    from radixcheck.argtypes import ArgumentParser, non_negative_int

    parser = ArgumentParser(prog="python -m radixcheck.reports.sglang_hicache_probes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=non_negative_int, default=0, help="tier machine streams per factory and policy")
    args = parser.parse_args(argv)
    ok = True
    for backend in ("python", "rust"):
        on_host, inserted = chunked_write_through(backend)
        print(f"#39444 ({backend} core): a prompt inserted in 3 chunks under write_through: {on_host}/{inserted} tokens "
              "on host once the writes completed")
        ok &= on_host == inserted
    stop = mamba_hicache()
    print(f"#33713: HiCache over FULL+MAMBA on CPU: {stop}")
    ok &= stop.startswith("constructed")
    if args.streams:
        ok &= streams(args.streams)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
