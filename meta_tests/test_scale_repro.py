"""Scale findings reduced to a page (issue 40, item 4): a production-scale finding's repro file is at
most 120 lines and 16 KB and exits 1, and a finding that already has a small file in the --repro
directory points to it instead of writing a second copy. Each test runs the conformance suite in a
subprocess (a pytest-xdist worker, as the audit does): the ``deep`` tier."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from radixcheck.properties.findings.standalone import PASTEABLE_BYTES, PASTEABLE_LINES

RECURSIVE_LEAVES = '''
import heapq

from radixcheck.reference import RadixCache
from radixcheck.reference.validation import as_count


class CollectsLeavesRecursively(RadixCache):
    """A correct cache whose eviction collects its leaves by recursion, one frame per level of the
    tree: only the production world's eviction, under its 3,000-node history, goes too deep."""

    def evict(self, num_tokens):
        wanted = as_count(num_tokens, "num_tokens", minimum=0)
        heap = [(self._eviction_key(n), n) for n in self._leaves(self.root) if self._evictable_leaf(n)]
        heapq.heapify(heap)
        evicted = leaves = 0
        while self._wants_more(evicted, wanted, leaves) and heap:
            _, leaf = heapq.heappop(heap)
            self._unlink(leaf)
            self._free(leaf)
            evicted, leaves = evicted + len(leaf.key), leaves + 1
            if self._evictable_leaf(leaf.parent):
                heapq.heappush(heap, (self._eviction_key(leaf.parent), leaf.parent))
        return evicted

    def _leaves(self, node):
        if not node.children:
            return [node]
        return [leaf for child in node.children.values() for leaf in self._leaves(child)]


def make(allocator, page_size):
    return CollectsLeavesRecursively(allocator, page_size)
'''


def _pasteable(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= PASTEABLE_LINES and len(text.encode()) <= PASTEABLE_BYTES, (text.count("\n"), len(text.encode()))


@pytest.mark.deep  # the production world, reduced for up to a minute, in a subprocess
def test_a_recursive_leaf_collection_met_only_at_scale_is_a_page_that_exits_1(tmp_path: Path) -> None:
    """It was a 56,396-line file: every request of the world unrolled. Now the world is
    delta-debugged (stories, then runs of acts) and repeated shapes are loops; the file is run
    alone (its replay had more frames below it than the file: a chain deep enough for one was not
    for the other, and the file exited 0)."""
    (tmp_path / "recleaf.py").write_text(textwrap.dedent(RECURSIVE_LEAVES))
    run = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "radixcheck.properties.conformance", "-p", "no:cacheprovider",
                          "-o", "addopts=", "-q", "-n", "1", "-k", "test_cache_at_production_scale", "--radix-target", "recleaf:make",
                          "--radix-page-sizes", "1", "--radix-repro", "repros"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 1 and "RecursionError" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    [path] = (tmp_path / "repros").glob("repro-*.py")
    _pasteable(path)
    alone = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert alone.returncode == 1 and "BUG (radixcheck: crash (RecursionError" in alone.stdout, alone.stdout[-2000:] + alone.stderr[-2000:]


@pytest.mark.deep  # an audit in a subprocess
def test_an_lfu_counter_not_bumped_on_reinsert_is_one_finding_with_one_small_file(tmp_path: Path) -> None:
    """Its order finding failed the state machine and the production world: one finding, and every
    failing test points to the one small file (the production world's was 58,171 lines, a
    second copy of a cause that had a 67-line file)."""
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-m", "radixcheck", "audit", "meta_tests.user_lfu_recency:make_unbumped", "--repro",
                          str(tmp_path / "repros"), "--json", str(tmp_path / "audit.json"), "-n", "2"], cwd=root,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    result = json.loads((tmp_path / "audit.json").read_text())
    [finding] = result["findings"]
    assert finding["repro"].endswith(".py"), finding["repro"]
    _pasteable(Path(finding["repro"]))
    repros = [v["repro"] for v in result["verdicts"] if v["outcome"] == "failed" and v["repro"]]
    assert all(r.get("path") == finding["repro"] or r.get("why_not", "").startswith(("written already", "written from"))
               for r in repros), repros
    assert len(list((tmp_path / "repros").glob("*.py"))) == len({r.get("name") for r in repros if r.get("path")}), repros
