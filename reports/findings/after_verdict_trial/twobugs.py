"""Two planted bugs at once, for the waiver step (flags from hicache.py)."""
from hicache import make_cache
from mycache_adapter import make as _make

# isolation (10) + order (4): a tenant reads the default tenant's host copies; a published chunk at priority 0
iso_order = make_cache("priority", frozenset({"host_falls_back_default_ns", "publish_drops_priority"}))
iso_order.tier_capabilities = _make.tier_capabilities
# refcount (2) + order (4)
ref_order = make_cache("priority", frozenset({"writeback_ignores_lock", "publish_drops_priority"}))
ref_order.tier_capabilities = _make.tier_capabilities
# two tenant leaks (10 + 10): a host store keyed by tokens; a quarantine that purges every tenant's host twins
iso_iso = make_cache("priority", frozenset({"host_falls_back_default_ns", "quarantine_purges_host_twins"}))
iso_iso.tier_capabilities = _make.tier_capabilities
