"""Meta-tests of ``radixcheck bench`` on a KV-event index and a tenant tree (``radixcheck.bench_router``).

As the cache bench's flag tests do (``meta_tests/test_bench.py``), the flag tests measure cost in
executed Python lines (:class:`LineClock`), not CPU time: deterministic, so a loaded machine cannot
flake them, and small worlds suffice because a scan shows in the count at any size. The CPU-time
figures are in ``docs/how-to/bench.md`` and ``reports/findings/router_trial.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from radixcheck.bench import BenchPlan, bench
from radixcheck.cli import main
from radixcheck.properties.index.mutants import CORRECT_INDEX_VARIANTS
from radixcheck.properties.target import load_target
from radixcheck.properties.tenant_tree.contract import TenantTreeCapabilities
from radixcheck.properties.tenant_tree.mutants import CORRECT_TENANT_TREE_VARIANTS
from radixcheck.reference.tenant_tree import TenantTree

from .test_bench import LineClock

PLAN = BenchPlan(wide_leaves=(16, 64, 256), repeats=1)  # three sizes: the fewest a flag needs

INDEX = "radixcheck.reference.kv_index:KvIndex"
SLOW_INDEX = "radixcheck.properties.index.slow_variants:LookupScansEveryBlock"
SLOW_LEAVER_INDEX = "radixcheck.properties.index.slow_variants:LeaverScansEveryBlock"
LEAVES_FIRST = "radixcheck.properties.index.mutants:LeavesFirstKvIndex"  # correct, and its order check scans (below)
CORRECT_INDEXES = [f"radixcheck.properties.index.mutants:{v.__name__}" for v in CORRECT_INDEX_VARIANTS
                   if v.__name__ != "LeavesFirstKvIndex"]  # the trusting one first
TREE = "radixcheck.reference.tenant_tree:TenantTree"
SLOW_TREE = "radixcheck.properties.tenant_tree.slow_variants:EvictScansTenantNodes"
SLOW_LEAVER_TREE = "radixcheck.properties.tenant_tree.slow_variants:LeaverScansEveryNode"
CORRECT_TREES = [f"radixcheck.properties.tenant_tree.mutants:{v.__name__}" for v in CORRECT_TENANT_TREE_VARIANTS]


def _measure(specs: list[str]) -> dict:
    try:
        results = bench([(load_target(spec), 1) for spec in specs], PLAN, clock=LineClock())
    finally:
        sys.settrace(None)
    return {r.spec: r for r in results}


@pytest.fixture(scope="module")
def indexes():
    return _measure([INDEX, SLOW_INDEX, SLOW_LEAVER_INDEX, LEAVES_FIRST, *CORRECT_INDEXES])


@pytest.fixture(scope="module")
def trees():
    return _measure([TREE, SLOW_TREE, SLOW_LEAVER_TREE, *CORRECT_TREES])


@pytest.mark.deep  # a benchmark of six indexes (one measurement, shared)
@pytest.mark.xdist_group("bench_index")
@pytest.mark.parametrize("spec", [INDEX, *CORRECT_INDEXES])
def test_reference_and_correct_indexes_are_never_flagged(indexes, spec) -> None:
    for name, op in indexes[spec].ops.items():
        assert op.points and not op.flagged, (name, op.exponent, op.medians())


@pytest.mark.deep
@pytest.mark.xdist_group("bench_index")
def test_an_index_whose_lookup_scans_is_flagged_on_find_matches_only(indexes) -> None:
    ops = indexes[SLOW_INDEX].ops
    assert ops["find_matches"].flagged, ops["find_matches"].medians()
    assert not ops["apply_stored"].flagged and not ops["apply_removed"].flagged
    assert not ops["remove_worker"].flagged and not ops["apply_cleared"].flagged


@pytest.mark.deep
@pytest.mark.xdist_group("bench_index")
def test_a_removal_that_scans_every_block_is_flagged_on_apply_removed(indexes) -> None:
    """The leaves-first variant asserts its declared order by scanning every known block on each
    removal: correct, and O(blocks) per removed block, which is what the bench is for."""
    ops = indexes[LEAVES_FIRST].ops
    assert ops["apply_removed"].flagged, ops["apply_removed"].medians()
    assert not ops["apply_stored"].flagged and not ops["find_matches"].flagged


@pytest.mark.deep  # a benchmark of seven trees
@pytest.mark.xdist_group("bench_tree")
@pytest.mark.parametrize("spec", [TREE, *CORRECT_TREES])
def test_reference_and_correct_trees_are_never_flagged(trees, spec) -> None:
    result = trees[spec]
    for name, op in result.ops.items():
        if op.stopped.startswith("not offered"):  # a tree without eviction or removal: never sent
            flag = {"evict": "supports_eviction", "remove_tenants": "supports_removal"}[name]
            assert not getattr(load_target(spec).capabilities, flag)
            continue
        assert op.points and not op.flagged, (name, op.exponent, op.medians())


@pytest.mark.deep
@pytest.mark.xdist_group("bench_tree")
def test_a_tree_whose_eviction_scans_is_flagged_on_evict_only(trees) -> None:
    ops = trees[SLOW_TREE].ops
    assert ops["evict"].flagged, ops["evict"].medians()
    assert not ops["insert"].flagged and not ops["match"].flagged


@pytest.mark.deep
@pytest.mark.xdist_group("bench_index")
def test_an_index_whose_leaving_worker_scans_is_flagged_on_leaving_only(indexes) -> None:
    ops = indexes[SLOW_LEAVER_INDEX].ops
    assert ops["remove_worker"].flagged and ops["apply_cleared"].flagged, (ops["remove_worker"].medians(),
                                                                           ops["apply_cleared"].medians())
    assert not any(ops[n].flagged for n in ("apply_stored", "apply_removed", "find_matches"))


@pytest.mark.deep
@pytest.mark.xdist_group("bench_tree")
def test_a_tree_whose_leaving_tenant_scans_is_flagged_on_remove_tenants_only(trees) -> None:
    ops = trees[SLOW_LEAVER_TREE].ops
    assert ops["remove_tenants"].flagged, ops["remove_tenants"].medians()
    assert not any(ops[n].flagged for n in ("insert", "match", "evict"))


# ---- fast: what is sent, and the command -------------------------------------------------------


class EvictionNotOffered(TenantTree):
    """Declares no eviction, and raises if one is sent anyway."""

    capabilities = TenantTreeCapabilities(supports_eviction=False)

    def evict(self, tenant: str, amount: int) -> int:
        raise AssertionError("evict sent to a tree that declares supports_eviction=False")


def test_an_eviction_the_tree_does_not_offer_is_never_sent() -> None:
    (result,) = bench([(load_target(f"{__name__}:EvictionNotOffered"), 1)], BenchPlan(wide_leaves=(4, 8), repeats=1))
    assert result.ops["evict"].verdict.startswith("not offered") and not result.failed()
    assert result.ops["insert"].points and result.ops["match"].points


@pytest.mark.parametrize("spec, ops", [(INDEX, {"apply_stored", "apply_removed", "find_matches", "remove_worker", "apply_cleared"}),
                                       (TREE, {"insert", "match", "evict", "remove_tenants"})])
def test_bench_command_measures_an_index_and_a_tree(spec, ops, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cost.json"
    code = main(["bench", spec, "--sizes", "4,8", "--repeats", "1", "--json", str(out), "--report", str(tmp_path / "cost.md")])
    assert code == 0
    doc = json.loads(out.read_text())
    assert set(doc["ops"]) == ops and all(doc["ops"][n]["points"] for n in ops)
    assert doc["size_unit"] in ("held blocks", "held elements") and doc["reference"] is None  # the reference itself
    assert "page_size" not in doc and doc["plan"]["prompts"] == [4, 8] and "deep_levels" not in doc["plan"]  # a router's has none
    assert "router's world" in capsys.readouterr().out and "router's world" in (tmp_path / "cost.md").read_text()


class InsertRaises(TenantTree):
    """Raises on its fifth insert: the world is never built."""

    def insert(self, key: object, tenant: str, now: float) -> None:
        self.inserts = getattr(self, "inserts", 0) + 1
        if self.inserts == 5:
            raise RuntimeError("broken insert")
        super().insert(key, tenant, now)


def test_a_world_that_cannot_be_built_is_said_as_a_routers_world() -> None:
    """The cache bench's words were "building the world tree" for a router's world."""
    said: list[str] = []
    (result,) = bench([(load_target(f"{__name__}:InsertRaises"), 1)], BenchPlan(wide_leaves=(4, 8), repeats=1), progress=said.append)
    assert all(op.stopped.startswith("building the router's world: ") for op in result.ops.values()), result.ops
    assert said and not any("world tree" in line for line in said) and "the router's world of 4 prompts" in said[0], said


@pytest.mark.parametrize("argv", [
    ["bench", INDEX, "--page-size", "4"],
    ["bench", TREE, "--deep-levels", "4,8"],
    ["bench", "radixcheck.properties.index.publishing_reference:reference_pair"],  # a router pair: refused
])
def test_what_a_router_structure_has_not_exits_2_with_one_line(argv, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("radixcheck bench: error:"), err
