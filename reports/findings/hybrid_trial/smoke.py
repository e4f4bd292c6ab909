"""A first check by hand, from the docs' two stories: a state through host, and an abort during a load."""

from hybridcache import make

from radixcheck.properties.tiers.lifecycle import LifecycleTierWorld
from radixcheck.properties.tiers.world import TierWorld

for policy in ("write_through", "write_back"):
    w = TierWorld(make, page_size=1, write_policy=policy)
    w.serve([1, 2])
    w.finish()
    w.evict(100)
    w.complete_all()
    w.serve([1, 2])
    w.finish()
    w = LifecycleTierWorld(make, page_size=1, write_policy=policy)
    w.serve([1, 2])
    w.finish()
    w.complete_all()
    w.evict(100)
    w.admit([1, 2])
    w.end(0, "abort")
    w.complete_all()
    w.serve([3])
    w.finish()
    w.complete_all()
    w.evict(100)
print("ok")
