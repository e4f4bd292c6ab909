"""radixcheck factories for hicache.HiCache: the correct cache, under priority and under LRU."""
from hicache import make_cache

from radixcheck import TierCapabilities
from radixcheck.properties.cache import policies

ALL_LAYERS = dict(page_sizes=(1, 2), namespaces=True, lifecycle="requests",
                  write_policies=("write_through", "write_back"))

make = make_cache("priority")
make.tier_capabilities = TierCapabilities(eviction_policy=policies.priority(), **ALL_LAYERS)

make_lru = make_cache("lru")
make_lru.tier_capabilities = TierCapabilities(**ALL_LAYERS)
