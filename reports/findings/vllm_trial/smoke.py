"""By-hand calls, as the tutorial's step 3, with a window and a tenant."""
from vllm_like import make

from radixcheck import Request
from radixcheck.properties.cache.contract import SecondPoolAllocator, SlotAllocator

kv, win = SlotAllocator(pool_size=64), SecondPoolAllocator(pool_size=64)
c = make(kv, 1, second_allocator=win)
s = kv.alloc(6)
w = win.alloc(6)
assert c.insert([1, 2, 3, 4, 5, 6], s, window=w) == 0
v, h, wv = c.match_prefix([1, 2, 3, 4, 5, 9])
assert list(v) == list(s[:5]), v
assert len(c.match_prefix([1, 2, 3], namespace="t")[0]) == 0      # another tenant sees nothing
c.inc_lock_ref(h)
assert c.protected_size() == 5
assert c.evict(6) == 1
c.dec_lock_ref(h)
r = Request([1, 2, 3, 4, 7, 8])
c.match_req(r)
c.lock_req(r)
assert r.protected == 4, r
r.compute(kv.alloc(2), window=win.alloc(2))
c.cache_unfinished_req(r)
assert r.protected == 6
c.cache_finished_req(r, True)
print("ok", c.total_size(), c.evictable_size())
