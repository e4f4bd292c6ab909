"""How far TokenSpeed's C++ prefix cache can be driven from the package registry's bindings.

``pip install tokenspeed-scheduler==0.1.42`` (a C++ extension; no torch needed), then
``python -m radixcheck.reports.tokenspeed_scheduler_probe``.

The module exposes ``Scheduler``, ``SchedulerConfig``, ``CacheGroupConfig``, ``RequestSpec``,
``ExecutionEvent``/``ForwardEvent`` and ``KVEvent`` (``Cache`` is a submodule of L2/L3 storage
operations, not a cache object). The prefix cache lives inside ``Scheduler``: there is no
``match``/``insert``/``lock``/``evict`` call, and its pages come from the scheduler's own pool
(``num_device_pages``). What a caller can do is run requests through it
(``submit_requests``, ``next_execution_plan``, ``advance`` with ``ExtendResult``/``Finish``) and
read two things back: each forward op's ``extend_prefix_lens`` (the cache hit the scheduler
granted) and ``drain_kv_events()`` (``BlockStored``/``BlockRemoved`` with block hashes, parent hash
and token ids). This probe runs two requests sharing six tokens at page size 2 and prints both.

Where the cache contract stops: the suite cannot own the slot pool, send a lookup without
admitting a request, hold or release a lock apart from a request's life, or ask for an eviction;
so the C++ cache is not a cache target. Its KV events are an event source for the index contract
(as vLLM's are, end to end into Dynamo's index), and ``extend_prefix_lens`` is a hit length an
oracle could check against the prompts it finished.
"""

from __future__ import annotations

import sys
from typing import Any


def probe() -> list[str]:
    import tokenspeed_scheduler as ts

    cfg = ts.SchedulerConfig()
    cfg.prefix_granularity = 2
    cfg.num_device_pages = 64
    cfg.num_host_pages = 0
    cfg.num_snapshot_pages = 1  # the null page only: this scheduler never retracts
    cfg.max_scheduled_tokens = 256
    cfg.max_batch_size = 8
    cfg.disable_l2_cache = True
    cfg.enable_kv_cache_events = True
    cfg.cache_groups = [ts.CacheGroupConfig("full", 2, 64, ts.AttnKind.Full)]
    scheduler = ts.Scheduler(cfg)
    lines: list[str] = []

    def send(event: Any) -> None:
        batch = ts.ExecutionEvent()
        batch.add_event(event)
        scheduler.advance(batch)

    def run(request_id: str, tokens: list[int]) -> None:
        spec = ts.RequestSpec()
        spec.request_id, spec.tokens = request_id, tokens
        scheduler.submit_requests([spec])
        for op in scheduler.next_execution_plan().forward:
            lines.append(f"{request_id} {tokens}: extend_prefix_lens={list(op.extend_prefix_lens)} "
                         f"input_lengths={list(op.input_lengths)}")
        extend = ts.ForwardEvent.ExtendResult()
        extend.request_id, extend.tokens = request_id, [99]
        send(extend)
        finish = ts.ForwardEvent.Finish()
        finish.request_id = request_id
        send(finish)
        scheduler.next_execution_plan()
        for event in scheduler.drain_kv_events():
            lines.append(f"  {event.kind} hashes={list(event.block_hashes)} tokens={list(getattr(event, 'token_ids', []))}")

    run("r1", list(range(1, 9)))
    run("r2", [*range(1, 7), 50, 51])
    return lines


def main() -> int:
    try:
        lines = probe()
    except ImportError as exc:
        print(f"tokenspeed-scheduler is not installed: {exc} (pip install tokenspeed-scheduler==0.1.42)", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
