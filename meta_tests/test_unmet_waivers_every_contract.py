"""A waiver for a bug that is not there makes no false alarm, in every contract (s61's brief: "a waiver creates a
false alarm"). A correct target of each contract (plain cache, tier, index, tenant tree, wire) is audited with
waivers naming that contract's oracles in every form a line can take (an oracle, a class, ``said:``, ``as``,
``known:``): the audit conforms (exit 0), waives nothing, and says of each line, quietly (a warning on stderr and
in the JSON, not a failure), that it matched no finding. The ``known:`` lines are the ones that change how a run
judges (the machine keeps the deviation's statistics beside the contract's): a correct cache still passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KNOWN = "known: suffix-refreshed-on-mid-edge-use"
CONTRACTS = {
    "cache": ("radixcheck.reference:RadixCache", [
        f"*  test_cache_state_machine  4 LRU order  {KNOWN}  # SGLang #3",
        "*  test_cache_state_machine  2 refcount safety  said: raised RuntimeError  # a refused lock",
        "*  *  RuntimeError  # a crash"]),
    "tier": ("radixcheck.reference.tiered_cache:TieredRadixCache", [
        f"*  test_tier_state_machine  4 LRU order  {KNOWN}  # SGLang #3 on the device tier",
        f"*  test_tier_state_machine  4h host eviction order  {KNOWN}  # and on the host tier",
        "*  test_tier_state_machine  4h host eviction amount  # host eviction stops short"]),
    "tier with a policy": ("radixcheck.properties.tiers.mutants:TieredLfu", [
        "*  test_tier_state_machine  4 eviction order as lru  # an LFU that evicts as LRU"]),
    "index": ("radixcheck.reference.kv_index:KvIndex", [
        "*  test_index_state_machine  7 index model  said: raised RuntimeError  # a refused legal event",
        "*  *  8 index memory  # grows"]),
    "tenant tree": ("radixcheck.reference.tenant_tree:TenantTree", [
        "*  test_tenant_tree_state_machine  11 tenant-tree eviction  # a split loses other tenants' times",
        "*  test_tenant_tree_state_machine  11 tenant-tree model  said: which are not available  # names a tenant"]),
    "wire": ("radixcheck.properties.adapters.wire:reference", [
        f"*  test_cache_state_machine  4 LRU order  {KNOWN}  # SGLang #3, over the wire",
        "*  *  crash (*)  # a crash"]),
}

SCALED = ("cache", "tier", "tier with a policy", "wire")


@pytest.mark.deep  # an audit of a correct target per contract (10-60 s each)
@pytest.mark.parametrize("contract", list(CONTRACTS))
def test_a_waiver_for_a_bug_that_is_not_there_makes_no_false_alarm(contract: str, tmp_path: Path) -> None:
    spec, lines = CONTRACTS[contract]
    (tmp_path / "known.txt").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "RADIXCHECK_SHRINK_SECONDS": "0"}
    # An index or a tenant tree builds no production world; one page size is enough to show a waiver is inert.
    small = ["--no-production", "--page-sizes", "1"] if contract in SCALED else []
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", spec, "--waive", "known.txt", *small,
                          "--seed", "0", "-n", "0", "--json", "audit.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=1200, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    saved = json.loads((tmp_path / "audit.json").read_text())
    assert saved["conforms"] and not saved["findings"] and not saved["waived"], saved
    unmet = [f"waiver {tmp_path / 'known.txt'}:{n} matched no finding" for n in range(1, len(lines) + 1)]
    assert [w.split(": ", 1)[0] for w in saved["unmatched_waivers"]] == unmet, saved["unmatched_waivers"]
    assert all(f"radixcheck: warning: {w}" in run.stderr for w in saved["unmatched_waivers"]), run.stderr[-2000:]
