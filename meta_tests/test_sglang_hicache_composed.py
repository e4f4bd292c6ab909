"""SGLang HiCache composed (issue 39 item 4), on the real engine: ``deep``, and skipped without SGLang
(the audit environment, ``python -m radixcheck.reports.audit_env``).

* Finding N3: under write_back a prompt hit three times through the host tier is evicted before a
  newer prompt hit once (LFU and SLRU, both cores); under write_through it is kept; with the
  adapter's ``N3`` fix (Python core) it is kept under write_back too.
* The adapter finishes a stream's earlier transfer of the same kind before a later one.
* A namespace of a kind SGLang's request fields cannot carry is refused before SGLang is called.
* Finding N1 through the host tier: a salt in ``extra_key`` and a LoRA of the same name are one
  namespace (oracle 10); with the salt in ``cache_salt`` they are two.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from radixcheck.oracles.violations import EvictionOrderViolation, TenantIsolationViolation
from radixcheck.properties.adapters import sglang_hicache
from radixcheck.properties.tiers.world import TierWorld

pytestmark = [pytest.mark.deep, pytest.mark.skipif(importlib.util.find_spec("sglang") is None,
                                                   reason="needs SGLang (python -m radixcheck.reports.audit_env)")]


def _hit_through_host(name: str, write_policy: str) -> TierWorld:
    """[1, 2] cached and re-inserted twice from host (3 hits), then [3, 4] once: ``evict(2)`` follows."""
    world = TierWorld(sglang_hicache.FACTORIES[name], 1, write_policy)
    world.serve([1, 2])
    world.finish()
    for _ in range(2):
        world.evict(100)
        world.complete_all()
        world.serve([1, 2], load=False)
        world.finish()
    world.serve([3, 4])
    world.finish()
    world.complete_all()
    return world


@pytest.mark.parametrize("name", ["hicache_python_lfu_salted", "hicache_rust_lfu_salted", "hicache_python_slru_salted",
                                  "hicache_rust_slru_salted"])
def test_n3_write_back_counts_no_hits(name: str) -> None:
    _hit_through_host(name, "write_through").evict(2)  # the frequent prompt stays
    with pytest.raises(EvictionOrderViolation, match=r"freed Page\(\[1\].*3 hits.*stayed: under"):
        _hit_through_host(name, "write_back").evict(2)


@pytest.fixture
def n3_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's N3 fix for this test only (the patched method restored afterwards)."""
    sglang_hicache._load()
    from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore

    for method in ("_inc_hit_count_and_check", "_should_backup_after_insert"):
        monkeypatch.setattr(UnifiedTreeCore, method, getattr(UnifiedTreeCore, method))
    monkeypatch.setattr(sglang_hicache, "_applied", set())
    assert sglang_hicache.apply_fixes("N3") == ["N3"]


@pytest.mark.parametrize("name", ["hicache_python_lfu_salted", "hicache_python_slru_salted"])
def test_n3_fixed_keeps_the_frequent_prompt(name: str, n3_fixed: None) -> None:
    world = _hit_through_host(name, "write_back")
    world.evict(2)
    world.complete_all()
    world.check()


def test_an_unknown_fix_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fix"):
        sglang_hicache.apply_fixes("N9")


def test_a_later_completion_finishes_the_earlier_one_of_its_stream() -> None:
    world = TierWorld(sglang_hicache.hicache_python_lru_salted, 1, "write_through")
    for tokens in ([1, 2], [3, 4]):
        world.serve(tokens)
        world.finish()
    writes = world.pending()
    assert len(writes) == 2
    world.complete(writes[1])
    assert world.pending() == []
    assert any(f"its stream finished #{writes[1]} after write #{writes[0]}" in line for line in world.log)
    world.check()


@pytest.mark.parametrize("namespace", ["", 2.5, True, ("lora-7", None, (5,))], ids=["empty", "float", "bool", "multimodal"])
def test_an_unsent_kind_is_refused_before_sglang_is_called(namespace: Any) -> None:
    world = TierWorld(sglang_hicache.hicache_python_lru_salted, 1, "write_through")
    with pytest.raises(ValueError, match="declares unsent"):
        world.serve([1, 2], namespace=namespace)
    assert world.cache.device_size() == 0 and world.log == []


def _lora_then_salt(name: str) -> None:
    world = TierWorld(sglang_hicache.FACTORIES[name], 1, "write_through")
    world.serve([1, 2], namespace=("X", None))  # LoRA X
    world.finish()
    world.complete_all()
    world.evict(100)  # to host only
    world.serve([1, 2], namespace=(None, "X"))  # a base request salted X
    world.finish()


def test_n1_through_the_host_tier() -> None:
    with pytest.raises(TenantIsolationViolation, match="under namespace \\(None, 'X'\\)"):
        _lora_then_salt("hicache_python_lru_extra_key")
    _lora_then_salt("hicache_python_lru_salted")
