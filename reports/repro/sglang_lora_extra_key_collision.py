"""SGLang 0.5.23: a base-model request whose ``extra_key`` equals a LoRA adapter's ``lora_id`` is
served that adapter's KV from the radix cache (the class of sgl-project/sglang#24638, still there).

    .audit-venv/bin/python reports/repro/sglang_lora_extra_key_collision.py

``Req.__init__`` composes the radix namespace by concatenation, ``extra_key = (extra_key or "") +
lora_id``, so the pair (extra_key=None, lora_id=L) and the pair (extra_key=L, lora_id=None) both
become ``extra_key=L``; ``RadixKey`` keys the tree by that string (``cache_salt`` is kept apart, as
the pair sglang#30827 introduced, so salts do not collide). A ``--lora-paths`` adapter's id is
``LoRARef.deterministic_id(name, path) = uuid5(name + "\\0" + path).hex``: any client that knows the
adapter's name and path computes it. Both requests are built as the scheduler builds them (``Req``)
and keyed by the scheduler's own ``mem_cache.common._req_radix_key``. The fixes proposed upstream
(sglang#25214, sglang#25351: tagged namespace parts) are not in 0.5.23. Exits 1 while present.
"""

import sys
from array import array

import _sglang_cpu
import torch
from sglang.srt.lora.lora_registry import LoRARef
from sglang.srt.managers.schedule_batch import Req
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.common import _req_radix_key
from sglang.srt.mem_cache.radix_cache import RadixCache
from sglang.srt.sampling.sampling_params import SamplingParams

cache = RadixCache(CacheInitParams(disable=False, req_to_token_pool=None,
                                   token_to_kv_pool_allocator=_sglang_cpu.RecordingAllocator(), page_size=1))
prompt = array("q", [101, 102, 103, 104])
lora_id = LoRARef.deterministic_id("alpha", "/adapters/alpha")

lora_request = Req("lora", "", prompt, SamplingParams(), lora_id=lora_id)  # a request for adapter "alpha"
cache.insert(InsertParams(key=_req_radix_key(cache, lora_request, prompt), value=torch.tensor([40, 41, 42, 43])))

base_request = Req("base", "", prompt, SamplingParams(), extra_key=lora_id)  # the base model, a client-chosen extra_key
hit = cache.match_prefix(MatchPrefixParams(key=_req_radix_key(cache, base_request, prompt)))

print(f"LoRA request's extra_key: {lora_request.extra_key!r}; base request's: {base_request.extra_key!r}")
if hit.device_prefix_len:
    print(f"BUG: the base-model request matched {hit.device_prefix_len} tokens of adapter alpha's KV "
          f"(slots {cache.path_device_indices(hit.last_device_node).tolist()})")
    sys.exit(1)
print("no bug: the base-model request matched nothing of the adapter's KV")
