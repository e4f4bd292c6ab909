"""SGLang 0.5.23 under ``--radix-eviction-policy priority``: a request that cached tokens past its
prompt keeps its prompt one priority above its output (by design, not a bug).

    .audit-venv/bin/python reports/repro/sglang_prompt_priority_split.py

``RadixCache.checkpoint`` (``_insert_cache(..., split_prompt=True)``) and
``UnifiedRadixCache.checkpoint_into_tree`` (FULL only) insert the request's tokens at
``req.priority``, then its page-aligned prompt again at ``req.priority + 1``: "Split the leaf at the
prompt boundary so eviction can drop the output KV without the prompt". So a request A (priority 0,
prompt 1 2 3 4, two decoded tokens) and a later request B (priority 0, no decode) leave A's prompt
at priority 1: after A's output goes, B goes before A's older prompt, where ``(priority, last use)``
over the request's own priority would take A's prompt first. Both requests run through the
scheduler's own steps (``match_kv_cache``, ``tree.lock``, ``release_kv_cache(checkpoint=True)``) on a
real ``Req`` with its row in a CPU ``ReqToTokenPool``. radixcheck declares it
(``policies.priority(prompt_bonus=1)`` on ``sglang_lifecycle:requests_*_priority``). Exits 0 while
SGLang behaves so on every tree, 1 otherwise.
"""

import sys
from array import array

import _sglang_cpu
import torch
from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
from sglang.srt.mem_cache import common
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
from sglang.srt.sampling.sampling_params import SamplingParams
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

set_global_server_args_for_scheduler(ServerArgs(model_path="dummy", page_size=1))


class Allocator(_sglang_cpu.RecordingAllocator):
    """``release_kv_cache`` frees a request's row in segments (``free_kv_row_segments``)."""

    def free_segments(self, segments):
        for idx, _start in segments:
            self.free(idx)


def build(kind, alloc, pool, policy):
    p = dict(disable=False, req_to_token_pool=pool, token_to_kv_pool_allocator=alloc, page_size=1, eviction_policy=policy)
    if kind == "RadixCache":
        return RadixCache(CacheInitParams(**p))
    return UnifiedRadixCache(CacheInitParams(**p, tree_components=(ComponentType.FULL,), tree_core_backend=kind.split(":")[1]))


def run(cache, pool, rid, prompt, decoded, slots):
    """One request through the scheduler's steps: admitted, its KV in ``slots``, finished and cached."""
    req = Req(rid, "", array("q", prompt), SamplingParams(max_new_tokens=16), priority=0)
    req.refresh_fill_ids()
    common.match_kv_cache(req, cache)
    req.kv.cache_protected_len = req.prefix_len
    req.lock = cache.lock(req.last_node)
    pool.alloc([req])
    req.output_ids.extend(array("q", decoded))
    req.refresh_fill_ids()
    n = len(prompt) + len(decoded)
    pool.write((req.kv.req_pool_idx, slice(0, n)), torch.tensor(slots, dtype=torch.int32))
    req.kv.kv_committed_len = req.kv.kv_allocated_len = req.extend_end = n
    req.finished_reason = FINISH_LENGTH(length=len(decoded))
    common.release_kv_cache(req, cache, checkpoint=True)


def cached(cache, *tokens):
    return cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens)))).device_prefix_len


bad = 0
# Under lru (the control) B, used last, outlives A's prompt: the priority, not recency, keeps the prompt.
for policy, want in (("priority", (4, 0)), ("lru", (0, 4))):
    for kind in ("RadixCache", "UnifiedRadixCache:python", "UnifiedRadixCache:rust"):
        alloc, pool = Allocator(), ReqToTokenPool(size=4, max_context_len=64, device="cpu", enable_memory_saver=False)
        cache = build(kind, alloc, pool, policy)
        run(cache, pool, "A", [1, 2, 3, 4], [5, 6], [11, 12, 13, 14, 15, 16])  # A: prompt 1 2 3 4, then 5 6 decoded
        run(cache, pool, "B", [7, 8, 9, 10], [], [21, 22, 23, 24])  # B: later, nothing decoded
        cache.evict(EvictParams(num_tokens=2))  # A's output (priority 0, oldest)
        cache.evict(EvictParams(num_tokens=4))  # then, under priority, B (0) before A's prompt (1)
        kept = (cached(cache, 1, 2, 3, 4), cached(cache, 7, 8, 9, 10))
        bad += kept != want
        print(f"{policy:8s} {kind:26s} freed {alloc.freed}; A's prompt cached {kept[0]} tokens, B {kept[1]}: "
              f"{'as described' if kept == want else 'NOT as described'}")
sys.exit(1 if bad else 0)
