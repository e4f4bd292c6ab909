"""mini-sglang (20fcd7f, the newest commit; the fix, mini-sglang#142, is an open pull request):
``CacheManager.cache_req(req, finished=False)`` frees the request's pages that another request
cached first, but leaves the request's page table pointing at them: its next decode step reads
KV pages that are back on the free list (and handed to the next request).

    export RADIXCHECK_MINISGLANG_SRC=~/src/mini-sglang    # your clone of github.com/sgl-project/mini-sglang
    .audit-venv/bin/python reports/repro/mini_sglang_unfinished_keeps_freed_pages.py    # 20fcd7f: exits 1

Exits 1 while the bug is present (prints what happened), 0 once it is fixed (the row is remapped
onto the tree's pages before the duplicates are freed, as #142 does), 2 without the checkout.
Runs ``python/minisgl/scheduler/cache.py`` and ``kvcache/radix_cache.py`` of the checkout as they
are (the working tree), unchanged, with radixcheck's stand-ins for the rest of ``minisgl``
(``properties/adapters/_minisgl_stubs.py``, ``mini_sglang.load_cache_manager``). Found by
``radixcheck audit radixcheck.properties.adapters.mini_sglang:newest_requests`` (the lifecycle
machine's ``racing_prefill``).
"""

import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # a clone run without installing radixcheck

import torch  # noqa: E402

from radixcheck.properties.adapters.checkout import CheckoutMissing  # noqa: E402

try:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        from radixcheck.properties.adapters import mini_sglang

        manager_module = mini_sglang.load_cache_manager()
        print(mini_sglang.load(None)[1].describe())
except CheckoutMissing as exc:
    print(f"not run: {exc}", file=sys.stderr)
    sys.exit(2)
from radixcheck.properties.adapters._minisgl_stubs import global_ctx  # noqa: E402

page_table = torch.zeros((2, 16), dtype=torch.int32)
with global_ctx(page_size=1):
    manager = manager_module.CacheManager(num_pages=64, page_size=1, page_table=page_table, type="radix")

prompt = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
requests = []
for row in (0, 1):  # two requests on one prompt, admitted before either published (both matched nothing)
    handle = manager.prefix_cache.match_prefix(prompt).cuda_handle
    manager.lock(handle)
    page_table[row, :4] = manager._allocate(4)  # each prefills the prompt into pages of its own
    requests.append(SimpleNamespace(input_ids=prompt, cached_len=4, table_idx=row, cache_handle=handle))

for req in requests:  # each chunk is published as the scheduler does after a prefill step
    manager.cache_req(req, finished=False)

second = page_table[1, :4]
cached = requests[1].cache_handle.get_matched_indices()
freed_but_read = [int(p) for p in second if bool((manager.free_slots == p).any())]
print(f"tree's pages for the prompt: {cached.tolist()}; the second request's row: {second.tolist()}")
if freed_but_read:
    print(f"BUG: cache_req(finished=False) freed pages {freed_but_read} (the second request's duplicates) while its "
          f"page table still points at them; its next decode step reads freed KV")
    sys.exit(1)
print("fixed: the second request's row points at the tree's pages")
sys.exit(0)
