"""radixcheck adapter for mycache.TwoTierCache: all parts declared at once."""
import mycache

from radixcheck import TierCapabilities
from radixcheck.properties.cache.policies import Policy

POLICY = Policy(key=mycache.policy_key, name="priority-lfu-lru", takes_priority=True)
CAPS = TierCapabilities(page_sizes=(1, 2), namespaces=True, eviction_policy=POLICY, lifecycle="tree",
                        write_policies=("write_through", "write_back"))


def _factory(*bugs):
    def make(allocator, host_pool, controller, page_size, write_policy):
        return mycache.TwoTierCache(allocator, host_pool, controller, page_size, write_policy, frozenset(bugs))
    make.tier_capabilities = CAPS
    return make


make = _factory()

# planted bugs, one idea each, each meant to need two declared parts to show
load_foreign_ns = _factory("load_foreign_ns")              # namespaces x host: a load-back reads another tenant's host copy
load_resets_hits = _factory("load_resets_hits")            # policy x host: a load-back resets the hit count the policy keys on
host_ignores_priority = _factory("host_ignores_priority")  # policy x host: host eviction orders by (hits, last_use), no priority
pending_by_tokens = _factory("pending_by_tokens")          # namespaces x host: a write's completion applied to another tenant's twin
abort_keeps_load_lock = _factory("abort_keeps_load_lock")  # lifecycle x host: an abort before its load landed leaves a lock
unlock_frees_pending_backup = _factory("unlock_frees_pending_backup")  # lifecycle x host: an unlock frees a backup in flight

# controls: the same bug with one part not declared (so never driven), to see whether it needs both
NO_LIFECYCLE = TierCapabilities(page_sizes=(1, 2), namespaces=True, eviction_policy=POLICY, lifecycle="off")


def _control(bug, caps):
    make = _factory(bug)
    make.tier_capabilities = caps
    return make


ctl_abort_keeps_load_lock = _control("abort_keeps_load_lock", NO_LIFECYCLE)
ctl_unlock_frees_pending_backup = _control("unlock_frees_pending_backup", NO_LIFECYCLE)
