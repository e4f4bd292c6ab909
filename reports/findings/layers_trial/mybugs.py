"""The planted bugs: each one idea, named in hicache.py by its flag, behind a factory of its own."""
from hicache import make_cache
from mycache_adapter import make as _make

BUGS = ("host_lru_only", "load_resets_priority", "per_ns_clock", "host_falls_back_default_ns",
        "quarantine_purges_host_twins", "writeback_ignores_lock", "lock_match_handle", "reload_default_ns",
        "publish_drops_priority", "revive_keeps_old_priority")

for _bug in BUGS:
    _f = make_cache("priority", frozenset({_bug}))
    _f.tier_capabilities = _make.tier_capabilities
    globals()[_bug] = _f
