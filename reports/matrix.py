"""The conformance matrix, in the spirit of JSONTestSuite: implementations × properties × page sizes.

    .audit-venv/bin/python -m radixcheck.reports.matrix          # every engine + the kit, one run, -n 2
    .audit-venv/bin/python -m radixcheck.reports.matrix --only vllm --only lightllm
    .audit-venv/bin/python -m radixcheck.reports.matrix --tx 4*ssh=gpu1//python=/srv/rc/.audit-venv/bin/python//chdir=/srv/rc
    python -m radixcheck.reports.matrix --kit-only               # reference, correct variants, mutants (main venv)
    python -m radixcheck.reports.matrix --target LfuNotBumpedOnMatch   # only these rows (a new mutant, say)
    python -m radixcheck.reports.matrix --report-only            # re-render from artifacts/matrix.json

The whole matrix is **one pytest run**: every target is passed to the plugin (``--radix-target
name=spec``, repeated), which parametrizes each conformance test by target and page size, and
pytest-xdist spreads those items over the workers (``-n``, or any ``--tx`` specs: local processes,
or remote interpreters that have this checkout and the engines' environment at the same path).
No scheduler of ours. The engines need their isolated environment (``python -m
radixcheck.reports.audit_env`` builds ``.audit-venv/``); in an environment without them their rows
are one error each ("cannot import"), not a crash. mini-sglang and LightLLM come from the user's
checkouts (``RADIXCHECK_MINISGLANG_SRC``, ``RADIXCHECK_LIGHTLLM_SRC``: see
``properties/adapters/checkout.py``); without one, the run prints what to clone and that engine's
rows are "not run: needs a checkout", and nothing else changes. Each engine row records the
commit it ran.

A run writes its rows over the same rows of ``artifacts/matrix.json``: with ``--only`` the other
rows are kept as they were (with ``--target NAME`` every row but the named ones), and a row this
run could not run (no checkout) never replaces verdicts already there, so no run leaves a weaker
report than the one it found. A run whose pytest judged nothing (its conftest did not load, a
collection error, nothing collected) is not recorded at all: it exits 1 with pytest's cause on one
line; a run in which no named row could run (no checkout) adds its "not run" rows where there were
no verdicts, and no run of its own to the record.

Known findings are waived, not declared away: every ``reports/waivers/*.txt`` (the ``radixcheck audit
--waive`` format, target globs naming the matrix's targets, e.g. ``mini_sglang.*``) is passed to the
run, so a waived finding shows as ``waived`` (linked to its finding) and the state machine goes on
past it to the next bug in the same test.

Writes ``reports/MATRIX.md`` and ``reports/artifacts/matrix.json`` (every verdict with its oracle,
reason and shrunk program, by exception type). Hypothesis profile ``audit`` (``ci``'s derandomized
search, stopping at the first bug per test, each shrunk for at most ``RADIXCHECK_SHRINK_SECONDS``).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from radixcheck.argtypes import ArgumentParser, refuse_weaker, workers
from radixcheck.audit import CONFORMANCE, SESSION_ARGS, _Collector, cut_short, not_rejudged
from radixcheck.profiles import PROFILES
from radixcheck.properties.cache.mutants import CORRECT_VARIANTS, MUTANTS
from radixcheck.properties.findings.names import conformance_tests
from radixcheck.properties.index.mutants import CORRECT_INDEX_VARIANTS, INDEX_MUTANTS
from radixcheck.properties.tenant_tree.mutants import CORRECT_TENANT_TREE_VARIANTS, TENANT_TREE_MUTANTS, THREAD_MUTANTS
from radixcheck.provenance import describe_run_record, generated_by, run_record
from radixcheck.reports import default_out
from radixcheck.reports.report_rows import ExpectedRows

ROOT = Path(__file__).resolve().parent.parent
AUDIT_ENV_STAMP = ROOT / ".audit-venv" / "radixcheck-audit.json"
WAIVERS_DIR = Path(__file__).resolve().parent / "waivers"


def waiver_files() -> list[Path]:
    """The known findings every matrix run waives (one file per engine)."""
    return sorted(WAIVERS_DIR.glob("*.txt"))


@dataclass(frozen=True)
class Engine:
    """One engine's rows: its adapter module (a ``FACTORIES`` dict), findings and design notes."""

    key: str
    title: str
    module: str
    findings_doc: str
    design: list[str] = field(default_factory=list)
    finding_of: Callable[[str, str, dict], str] = lambda name, test, record: ""
    """The finding a failure or waived finding reproduces, from its row, test id and record (the verdict's
    ``oracle``, ``reason``, ``program``; a waived one's ``message``, ``step``, ``waiver``)."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Factories the matrix does not run (a substring of their name -> why), shown in the report."""
    checkout_setting: str = ""
    """The setting naming the user's checkout, for an engine not on the package registry."""


def reason_of(record: dict) -> str:
    """A recorded failure's reason (a waived finding's is its ``message``)."""
    return record.get("reason") or record.get("message", "")


def _phrases(table: list[tuple[str, str]]) -> Callable[[str, str, dict], str]:
    """A finder that names the finding whose phrase occurs in the failure's test id or reason."""
    return lambda name, test, record: next((f for phrase, f in table if phrase in reason_of(record) or phrase in test), "")


# The finding in reports/sglang_findings.md that an SGLang failure reproduces, by its oracle's wording.
SGLANG_FINDING = [
    ("_tlru_history_len", "#2 tlru AttributeError"),
    ("(older) survived", "#3 mid-edge hit refreshes the unused suffix"),
    ("(used earlier) survived", "#3 mid-edge hit refreshes the unused suffix"),
    ("kept going", "#3 mid-edge hit refreshes the unused suffix"),
    ("mutex poisoned", "#5 Rust core poisoned by an unmatched unlock"),
    ("raised but changed the cache", "#7 refused unlock is not atomic"),
    ("accepted it instead of raising", "#1 unmatched unlock accepted (lock_ref -1)"),
    ("stale", "#4 stale handle across reset"),
    ("maximum recursion depth", "#8 all_values_flatten recurses (a deep tree)"),
    (") survived", "#3 mid-edge hit refreshes the unused suffix"),  # the LRU oracle's wording since issue 19
]


def sglang_finding(name: str, test_id: str, record: dict) -> str:
    reason = reason_of(record)
    if "handle_from_another_cache" in test_id or "handle from another cache" in reason:  # the test, or the machine's rule
        return "#6 Rust node ids name nodes of other caches" if "rust" in name else "#4 foreign handle corrupts sizes"
    if name.startswith("sglang.radix_f") and ("under fifo" in reason or "under filo" in reason or "out of fifo" in reason
                                               or "out of filo" in reason):  # FIFO/FILO order reads creation times only
        return "#9 a split stamps the new parent's creation_time afresh (findings/sglang_trees.md)"
    return _phrases(SGLANG_FINDING)(name, test_id, record)


# The HiCache rows' findings, by the id a waiver line or the finder names (findings/sglang_trees.md, sglang_findings.md).
HICACHE_FINDINGS = {
    "#3": "#3 mid-edge hit refreshes the unused suffix",
    "N1": "N1 LoRA id appended to extra_key (findings/sglang_trees.md)",
    "N3": "N3 no hit counted under write_back: lfu/slru evict by recency (findings/sglang_trees.md)",
}
# N3's reach: the policies whose key reads SGLang's hit_count (LFUStrategy, SLRUStrategy), under the write policy
# that never counts one. Any other order failure of a HiCache row is #3's (the one order bug otherwise known).
HIT_COUNTING_POLICIES = ("lfu", "slru")
WRITE_POLICIES = ("write_through_selective", "write_through", "write_back")  # longest first: a name is a prefix of another


def judged_policy(reason: str) -> str:
    """The eviction policy an order oracle judged by, as its reason words it ("under lfu it goes first",
    "the host tier evicts by slru's key first"); "" for the LRU oracle's wording or any other oracle."""
    found = re.search(r"under (\w+)\S* it goes first|evicts by (\w+)'s key first", reason)
    return (found.group(1) or found.group(2)) if found else ""


def write_policy(record: dict) -> str:
    """The HiCache write policy a recorded failure happened under: its program's last line ("write policy
    write_back, page size 2"), the production world it stopped in, or a waived finding's step; "" if not recorded."""
    text = f"{record.get('program', '')}\n{record.get('step', '')}"
    found = re.search(r"write policy (write_\w+)|tier production world \((write_\w+),|the (write_\w+) production world", text)
    named = next((g for g in found.groups() if g), "") if found else ""
    return named if named in WRITE_POLICIES else ""


def cited_finding(waived: dict) -> str:
    """The finding id (#3, N1, M1) the waiver line a waived finding met cites in its reason."""
    reason = waived.get("waiver", "").rpartition("/")[2].partition(":")[2].partition(":")[2]
    found = re.search(r"#\d+|\b[NM]\d+\b", reason)
    return found.group(0) if found else ""


def hicache_finding(name: str, test_id: str, record: dict) -> str:
    """A HiCache row's finding from what the failure recorded: a waived one is the finding its waiver line
    cites; an order failure is N3 when it was judged under a hit-counting policy in a write_back world or
    machine, #3 otherwise; oracle 10's is N1."""
    if record.get("waiver"):
        cited = cited_finding(record)
        return HICACHE_FINDINGS.get(cited, cited)
    reason = reason_of(record)
    if "counted" in reason or "which holds Page(" in reason:  # oracle 10, a count or a device slot
        return HICACHE_FINDINGS["N1"]
    if ") stayed:" in reason:
        n3 = judged_policy(reason) in HIT_COUNTING_POLICIES and write_policy(record) == "write_back"
        return HICACHE_FINDINGS["N3" if n3 else "#3"]
    return ""


ENGINES = [
    Engine(
        "sglang", "SGLang 0.5.23: RadixCache and UnifiedRadixCache", "radixcheck.properties.adapters.sglang_radix",
        "sglang_findings.md",
        [
            "No SGLang cache has `evict_prefix` (policy eviction of a named prefix): every factory declares "
            "`supports_quarantine=False`, so the quarantine rules and oracle 5 do not run on them.",
            "SGLang trusts its scheduler to pair every `inc_lock_ref` with one `dec_lock_ref` and never to reuse a "
            "node across caches or resets. `radix_*` declare `checks_locks=False`: the unmatched-unlock, stale-handle "
            "and foreign-handle checks are skipped (a `pass` there means *not checked*). `radix_lru_strict` is the same "
            "cache declaring `checks_locks=True`, to show what those checks find (findings 1 and 4: silent corruption, "
            "not an error). UnifiedRadixCache refuses unmatched unlocks itself, so `unified_*` declare "
            "`checks_locks=True` (`*_lru_lenient`: False).",
            "Every policy's order is judged (oracle 4): `lru` by the LRU oracle, the others by the eviction-order "
            "oracle under the named `Policy` of SGLang's meaning (tlru with threshold 8 and next-prompt estimate 2 "
            "tokens, `eviction_policy_config`); `priority=` goes to `InsertParams.priority`. "
            "`findings/sglang_trees.md` (\"Eviction policies\") classifies each row's failure.",
        ],
        sglang_finding,
    ),
    Engine(
        "sglang_trees", "SGLang 0.5.23: the other trees (PureSWA, Unified FULL+SWA and FULL+MAMBA with their second pool, LoRA namespaces)",
        "radixcheck.properties.adapters.sglang_trees", "findings/sglang_trees.md",
        [
            "As the trees above: no `evict_prefix`; `*_strict`/unified factories check locks, the others trust callers.",
            "PureSWA and Unified FULL+SWA run at page size 1 only (the server pairs PureSWA with an allocator that "
            "asserts it; paged SWA frees assume aligned runs of slot ids); FULL+MAMBA too (`MambaComponent` asserts it "
            "without the mamba extra buffer). PureSWA has one pool (its SWA slots are its only KV): the plain contract.",
            "`*_window` rows: Unified FULL+SWA with the suite's window pool (`second_pool=SlidingWindow(window=4, "
            "pins_whole_nodes=True)`: an SWA lock pins whole nodes up to the window, so `evict_window` stopping while "
            "values the contract leaves unpinned are left is not judged; `lifecycle=\"tree\"`: the hybrid lifecycle), judged "
            "by the hybrid oracles (3s, 20-23): SGLang's own SWA allocator and FULL-to-SWA mapping, both sides forwarded to "
            "the suite's pools; inserts carry the window (`-1` = freed: SGLang's `swa_evicted_seqlen`), `evict_window` is "
            "`EvictParams(swa_num_tokens=n)`. `unified_swa_*_lru` (no `_window`): the same tree with the window hidden "
            "(a private window pool, never slid): the plain contract at production scale.",
            "`unified_mamba_*` rows: Unified FULL+MAMBA with the suite's state pool (`second_pool=StatePool("
            "stateless_inserts=False)`: SGLang caches KV only with the state after it, so no insert is sent without one): a real "
            "`HybridReqToTokenPool` whose `mamba_allocator` is the suite's pool; inserts carry the request's final state, "
            "a match ends at a saved state, `evict_states` is `EvictParams(mamba_num=n)`.",
            "Hybrid rows look past SGLang's #3 (`reports/waivers/sglang_hybrid.txt`) so the machine reaches the second-pool "
            "oracles. The DFS scheduling tests drive one pool: a `*_window`/`mamba` row skips them; the production-scale "
            "test gives it the hybrid world (`properties/cache/hybrid_scale.py`: window or state pressure, slid windows, "
            "served turns; a Mamba row tells no deep history). The strict Rust hybrid rows stop at #5/#6 "
            "(an unmatched or foreign unlock poisons the core) before the hybrid rules, as `unified_rust_lru` does; their "
            "`_lenient` twins are the judged rows.",
            "HiCache over these hybrid trees (`init_hicache` needs their real SWA/Mamba device pools; HiCache over FULL "
            "is audited: the `sglang_hicache` rows), LMCache, FlexKV, the NPU C128 and the MLX components do not "
            "construct on CPU: `findings/sglang_trees.md` gives each call and error.",
        ],
        sglang_finding,
        {"swa_python_lru_lenient": "the same tree as `unified_swa_python_lru` declaring `checks_locks=False`.",
         "swa_rust_lru_lenient": "the same tree as `unified_swa_rust_lru` declaring `checks_locks=False`.",
         "swa_python_lru_window_lenient": "the same tree as `unified_swa_python_lru_window` declaring `checks_locks=False`.",
         "mamba_python_lru_lenient": "the same tree as `unified_mamba_python_lru` declaring `checks_locks=False`."},
    ),
    Engine(
        "vllm", "vLLM 0.34.0 (PyPI, --no-deps, CPU torch): v1 KV cache manager and block pool (prefix caching)",
        "radixcheck.properties.adapters.vllm_prefix", "findings/vllm.md",
        [
            "Block-granular, page size = block size; matching by chained block hashes. The adapter drives the "
            "scheduler's calls: match = `get_computed_blocks`; insert = a request allocated and freed; lock = a request "
            "admitted (`allocate_slots` on its lookup) and unlock = `free(request)`; `evict(n)` = new blocks taken from "
            "the pool as a new request would, until `BlockRemoved` events report enough evicted.",
            "Eviction is lazy, from a free queue ordered by when the last request holding a block finished (tail block "
            "first); a lookup alone refreshes nothing: `eviction_policy=\"lru-by-release\"` (the LRU-order oracle does "
            "not apply; amount and lock safety still do).",
            "A lock is a request admitted straight after its lookup (`locks_only_after_match=True`); freeing a request "
            "twice or one holding nothing is a silent no-op (`checks_locks=False`).",
            "No removal by prefix (`evict_blocks` takes block ids, a hook for failed KV transfers): "
            "`supports_quarantine=False`; `reset_prefix_cache()` refuses while any request holds a block: "
            "`supports_reset=False`; tokens are checked by the input processor, not the cache: `validates_input=False`.",
        ],
        _phrases([("BlockRemoved", "#1 BlockRemoved published while a duplicate block stays cached")]),
        {"vllm_prefix_lru": "the same cache declaring the contract's LRU, which fails the LRU oracle by the design "
                            "above (a 3-step program in `findings/vllm.md`); not a finding."},
    ),
    Engine(
        "mini_sglang", "mini-sglang: the checkout (validated at 20fcd7f) and the parent of the #52 fix (f074873)",
        "radixcheck.properties.adapters.mini_sglang", "findings/mini_sglang.md",
        [
            "No `evict_prefix` (`supports_quarantine=False`) and no usable `reset` (it raises NotImplementedError: "
            "`supports_reset=False`).",
            "The scheduler pairs every lock with one unlock (`checks_locks=False`); its `assert ref_count >= 0` fires only "
            "after the decrement. `newest_strict` declares `checks_locks=True` to show what that hides (findings 3, 4).",
            "The cache takes the tensors the engine builds and checks nothing (`validates_input=False`).",
            "f074873 has no paging (page size 1 only). `evict` returns slot ids instead of freeing them: the adapter hands "
            "them to the suite's allocator.",
            "`newest_requests` (`lifecycle=\"requests\"`): the checkout's `CacheManager` (`scheduler/cache.py`, unchanged) "
            "publishes each chunk with its own `cache_req(req, finished=False)` and ends with `cache_req(req, finished=True)`; "
            "mini-sglang has no retract or skipped insert, and its abort caches what was computed, so an end without the "
            "insert is the adapter's (frees the request's own pages, unlocks). #142's fix is an open pull request, in no "
            "commit of the mirror: only the commit before it (20fcd7f) runs.",
            "Finding 2 (a split keeps the stale timestamp, shared by both commits) is waived "
            "(`reports/waivers/mini_sglang.txt`), not declared away: its cells read `waived`, and the state machine goes on "
            "past it to the lock properties, where f074873 fails for #52. (This replaced the `*_no_lru_oracle` "
            "diagnostics, which declared the policy `lru-split-stale`.)",
        ],
        _phrases([("removed locked", "#1 lock skips the handle's own node (mini-sglang#52)"),
                  ("cached tokens are under a lock", "#1 lock skips the handle's own node (mini-sglang#52)"),
                  ("LRU", "#2 a split keeps the stale timestamp"), ("kept going", "#2 a split keeps the stale timestamp"),
                  ("survived", "#2 a split keeps the stale timestamp"),
                  ("another cache", "#4 foreign handle accepted"), ("foreign", "#4 foreign handle accepted"),
                  ("assert", "#3 unmatched unlock leaves ref_count -1"),
                  # the engine's bare `assert ref_count >= 0` (its message is pytest's only where pytest rewrote the file)
                  ("AssertionError", "#3 unmatched unlock leaves ref_count -1"),
                  ("Cannot evict enough", "#3 unmatched unlock leaves ref_count -1 (then evict asserts)"),
                  ("accepted it instead of raising", "#3 unmatched unlock leaves ref_count -1"),
                  ("were freed and it still reads them", "#5 cache_req(finished=False) leaves the row on freed duplicate "
                                                         "pages (mini-sglang#142, open)"),
                  ("the request's row reads", "#5 cache_req(finished=False) leaves the row on freed duplicate pages "
                                              "(mini-sglang#142, open)")]),
        checkout_setting="RADIXCHECK_MINISGLANG_SRC",
    ),
    Engine(
        "lightllm", "LightLLM (checkout, validated at fc72ffa): dynamic_prompt/radix_cache.py",
        "radixcheck.properties.adapters.lightllm_radix",
        "findings/lightllm.md",
        [
            "Locks only by matching (`match_prefix(key, update_refs=True)`): `locks_only_after_match=True`, so a handle is "
            "locked only straight after the match that returned it, and a foreign or stale handle is only ever unlocked.",
            "Token-granular (page size 1 only); no `evict_prefix`; `clear_tree_nodes` is test-only and frees nothing "
            "(`supports_reset=False`).",
            "`dec_node_ref_counter` checks nothing (`checks_locks=False`); `radix_cache_strict` declares True to show the "
            "consequences (findings 2, 3). Callers are trusted with arguments (`validates_input=False`).",
        ],
        _phrases([("maximum recursion depth", "#6 recursion on paths ~1,000 nodes deep"),
                  ("LRU", "#1 an insert ending mid-edge refreshes the whole edge"),
                  ("kept going", "#1 an insert ending mid-edge refreshes the whole edge"),
                  ("survived", "#1 an insert ending mid-edge refreshes the whole edge"),
                  ("another cache", "#3 a foreign node's release is accepted"),
                  ("foreign", "#3 a foreign node's release is accepted"),
                  ("accepted it instead of raising", "#2 an unmatched release drives ref_counter to -1")]),
        {"release_0_0_1": "LightLLM 0.0.1, the package registry's release, audited by hand (`findings/lightllm.md` #5: "
                          "every conformance test fails on one bug, fixed upstream since). Its cache preallocates 48 bytes "
                          "of POSIX shared memory per pool slot, 805 MB for the suite's 2^24-slot pool, so each state-machine "
                          "example builds it for seconds and two workers on a loaded 2-core machine exceed the 5 s limit."},
        checkout_setting="RADIXCHECK_LIGHTLLM_SRC",
    ),
]

ENGINES += [
    Engine(
        "dynamo", "Dynamo 1.6.1 (ai-dynamo-runtime, PyPI): the KV router's RadixTree (a KV-event index)",
        "radixcheck.properties.adapters.dynamo_index", "findings/dynamo.md",
        [
            "A KV-event index, audited through the index contract (`properties/index/contract.py`): several workers' "
            "vLLM-like engines (2-4 workers x 1-4 dp ranks) publish BlockStored/BlockRemoved/AllBlocksCleared; every "
            "`find_matches` must equal what the events say each (worker, dp_rank) holds.",
            "Deduplicated stream (`counts_copies=False`): Dynamo removes vLLM's duplicate copies on the worker side "
            "(`EventDedupFilter`, ai-dynamo/dynamo#8012), so the suite sends what that filter delivers.",
            "No per-rank sizes and no memory count in the Python binding (`reports_sizes=False`, `reports_resident=False`): "
            "memory is measured as process RSS under churn (`reports/INDEX_MEMORY.md`), emptiness through "
            "`dump_tree_as_events()`.",
            "`dynamo_radix_tree` accepts any removal order (an engine may evict a block whose children stay cached); "
            "`dynamo_radix_tree_leaves_first` declares the order vLLM's LRU and SGLang's leaf eviction deliver.",
            "Finding 1 (a malformed chain naming a block twice is accepted) is waived (`reports/waivers/dynamo.txt`), so "
            "the state machine goes on past it.",
        ],
        _phrases([("names a block twice", "#1 a chain naming a block twice is accepted"),
                  ("repeated_block", "#1 a chain naming a block twice is accepted"),
                  ("Failed to find block", "#2 blocks under a removed parent are dropped"),
                  ("Failed to find parent block", "#2 blocks under a removed parent are dropped"),
                  ("disagrees with what the events say", "#2 blocks under a removed parent are dropped"),
                  ("dump() leaves out", "#2 blocks under a removed parent are dropped")]),
    ),
    Engine(
        "router_e2e", "End to end: vLLM 0.34.0's own KV events into a router index (Dynamo 1.6.1, the reference)",
        "radixcheck.properties.adapters.router_pairs", "findings/dynamo.md",
        [
            "The cache machine drives vLLM's KV cache manager (page size 4); after every step its published events go to "
            "the index and to the index model, and for every known prompt engine, events and router must agree "
            "(`properties/index/router_e2e.py`). Engine vs events: a finding in the engine's events; events vs router: in the index.",
            "`repeat_aligned_prompt`: a cached block-aligned prompt served again, as vLLM's scheduler does, recomputes its "
            "last block into a second copy under the same hash.",
            "`*_raw_*` pairs forward vLLM's raw stream; the others deduplicate it first, as Dynamo's publisher does.",
        ],
        _phrases([("more removes than the stores", "vLLM #1: BlockRemoved per physical copy (vllm.md), in the engine's events"),
                  ("the engine's events are wrong", "vLLM #1: BlockRemoved per physical copy (vllm.md), in the engine's events")]),
    ),
]

ENGINES += [
    Engine(
        "lmdeploy", "lmdeploy 0.18.0 (PyPI, own venv): the PyTorch engine's paging/block_trie/ BlockTrie",
        "radixcheck.properties.adapters.lmdeploy_trie", "findings/lmdeploy.md",
        [
            "lmdeploy's own `BlockTrie`, `DefaultBlockManager`/`LogicalAllocator` and `SchedulerSequence`, driven as its "
            "scheduler drives them (tentative `match`, `allocate`, the request's end); the text path, one root per adapter "
            "name (namespaces), no SSM checkpoints. Its venv is its own (lmdeploy pins torch<=2.12.1; the trie runs on the "
            "audit's torch 2.13.0 CPU wheel), see `findings/lmdeploy.md`.",
            "A lookup is a request for `tokens[:L] + [0]` (lmdeploy reuses a block only if it ends before the last token); "
            "locks are admitted requests (`locks_only_after_match=True`, `checks_locks=False`); no quarantine, no reset.",
            "`newest` declares `lru-match-or-release` (a request's end touches its blocks); `newest_lru` declares `lru`.",
        ],
        _phrases([("LRU", "#1 access times kept in whole seconds"), ("survived", "#1 access times kept in whole seconds"),
                  ("Inconsistent data generation", "#1 access times kept in whole seconds (ties make replays differ)")]),
    ),
    Engine(
        "tokenspeed", "TokenSpeed (checkout, 418ec9d from its history): runtime/cache/prefix_cache.py PrefixCache",
        "radixcheck.properties.adapters.tokenspeed_prefix", "findings/tokenspeed.md",
        [
            "`PrefixCache` at 418ec9d, the last commit with the file (upstream removed it in f3e4d1e, #864), from the user's "
            "clone's history (`RADIXCHECK_TOKENSPEED_SRC`). The tree works in pages; the adapter maps page ids to the "
            "suite's slots and counts sizes in tokens. Insert is `cache_finished_req`'s insert-then-match.",
            "One factory per policy it offers: `lru` (LRU oracle), `lfu`, `fifo`, `mru`, `filo` (the named `Policy` of "
            "SGLang's meaning: their order judged), `priority` by name (its insert takes no priority). `with_events` turns "
            "on its KV events.",
            "No quarantine; `dec_lock_ref` checks nothing (`checks_locks=False`); input trusted (`validates_input=False`).",
        ],
        _phrases([("lora_id", "#1 KV events on: every new node raises TypeError (BlockStored has no lora_id)"),
                  ("under lfu", "#3 lfu never counts a hit (evicts as lru)"),
                  ("out of lfu order", "#3 lfu never counts a hit (evicts as lru)"),
                  ("under fifo", "#4 a split makes the older part of an edge the youngest node"),
                  ("out of fifo order", "#4 a split makes the older part of an edge the youngest node"),
                  ("maximum recursion depth", "#2 recursive total_size/match/insert on deep paths")]),
        checkout_setting="RADIXCHECK_TOKENSPEED_SRC",
    ),
    Engine(
        "ray_serve", "Ray Serve LLM 2.60.0 (ray[serve], PyPI): the prefix-aware router's PrefixTree (a tenant prefix tree)",
        "radixcheck.properties.adapters.ray_prefix_tree", "findings/ray_serve.md",
        [
            "A router's multi-tenant prefix tree, audited through the tenant-tree contract (`properties/tenant_tree/contract.py`): "
            "replicas join, receive routed prompts, are trimmed by LRU and leave; every match, eviction, size and node count "
            "is judged against the per-tenant prefix model (oracle 11, memory 12).",
            "Character-level keys, thread-safe (one RLock): the threaded stress test runs. A match does not refresh recency.",
            "`evict_tenant_by_lru` removes every node of the oldest timestamp together (documented): the contract lets an "
            "eviction finish the group of prefixes last used at the time it reached the amount in.",
            "`prefix_tree_eviction_thread` runs Ray's background eviction thread (every 1 ms) at a threshold no tenant reaches: "
            "it takes the lock concurrently with every call but never evicts (what it would evict is not predictable).",
            "Runs in an environment of its own: `ray[serve]==2.60.0` (not in `.audit-venv/`).",
        ],
    ),
    Engine(
        "production_stack", "vLLM production stack (your checkout): the router's HashTrie (a tenant prefix tree)",
        "radixcheck.properties.adapters.production_stack", "findings/production_stack.md",
        [
            "`src/vllm_router/prefix/hashtrie.py`, imported unchanged from `RADIXCHECK_PRODUCTION_STACK_SRC` (not on the "
            "package registry as Python); `vllm_router.log` is stood in for during the import (it needs starlette; the trie "
            "only logs). Needs `xxhash`.",
            "A chunk-hash trie of endpoints: declared lossy (`match_granularity=chunk_size`), no eviction, removal, sizes or "
            "node count (never sent); coroutines, run on one event loop (`thread_safe=False`).",
            "`hashtrie_chunk4` cuts prompts into 4-character chunks; `hashtrie_default` uses the router's 128.",
        ],
        _phrases([("longer than the query", "#1 a final partial chunk counts as a whole chunk: a match longer than the request")]),
        checkout_setting="RADIXCHECK_PRODUCTION_STACK_SRC",
    ),
    Engine(
        "sglang_hicache", "SGLang 0.5.23: HiCache (UnifiedRadixCache + init_hicache, --enable-hierarchical-cache), a tier target",
        "radixcheck.properties.adapters.sglang_hicache", "findings/sglang_trees.md",
        [
            "Audited through the tier contract (`properties/tiers/contract.py`): the tier machine's scheduler delivers every "
            "device->host write and host->device load when Hypothesis says, fails host and device allocations, re-enters "
            "eviction from load-back; oracles 13-19 and per-tier slot conservation judge each step, KV contents included.",
            "SGLang runs on CPU with the suite's transfer engine (its `L2TransferEngine.submit_*` replaced; nothing copied) and "
            "the suite's host slots (its host pool's alloc/free forwarded): `hicache_io_backend=direct`, `layer_first`.",
            "Each row runs `write_through`, `write_through_selective` and `write_back` at page sizes 1, 2 and 4. Declared: no "
            "`evict_prefix` (`supports_quarantine=False`); `write_back_order=leaf_first` (SGLang writes the evicted leaf "
            "alone, by design: oracle 18 waived under write-back only). SGLang's 10-token load-back threshold is set to 1.",
            "Composed rows (issue 39): `hicache_*_<policy>_salted` (namespaces through SGLang's `Req`, salt in `cache_salt`; "
            "each named policy judged by oracle 4t) and `hicache_*_lru_extra_key` (salt in `extra_key`: finding N1). "
            "`unsent_namespaces` as `sglang_tenants`. #3 is waived by its behaviour (`known: "
            "suffix-refreshed-on-mid-edge-use` on oracle 4t, `reports/waivers/sglang_hicache.txt`): an eviction right only "
            "by #3's stamps is waived once a run, any other order finding shows, such as N3 (no hits counted under "
            "write_back; `findings/sglang_trees.md`, \"HiCache composed\"). `hicache_*_<policy>_salted_tree` add running "
            "requests (`lifecycle=\"tree\"`): every part at once, under each named policy. `hicache_*_requests` and "
            "`hicache_*_fifo_salted_requests` (`lifecycle=\"requests\"`) run SGLang's own request methods as its scheduler "
            "runs them (`match_kv_cache`, `init_load_back` under `PrefillAdder.add_one_req`'s pins, `checkpoint_kv_cache`, "
            "`release_kv_cache`: `properties/adapters/sglang_hicache_requests.py`).",
        ],
        hicache_finding,
    ),
    Engine(
        "sglang_hicache_hybrid", "SGLang 0.5.23: HiCache over the hybrid trees (UnifiedRadixCache FULL+MAMBA / FULL+SWA + "
        "init_hicache), tier targets",
        "radixcheck.properties.adapters.sglang_hicache_hybrid", "findings/sglang_trees.md",
        [
            "`init_hicache` builds on CPU over SGLang's own hybrid device pools: `HybridLinearKVPool` (FULL+MAMBA, "
            "`_MambaStrategy`, `hicache_mem_layout=page_first_direct`: `MambaPoolHost` takes no other) and `SWAKVPool` with "
            "`SWATokenToKVPoolAllocator` (FULL+SWA, `_SwaStrategy`). The KV transfers and host slots are the suite's, as in "
            "the `sglang_hicache` rows. `hicache_mamba_*` declare the tier state pool (`second_pool=StatePool()`, oracle 20): "
            "the suite's state value lives in SGLang's own `MambaPool` slot, SGLang's `MambaPoolHost` takes it on backup (the "
            "adapter copies at SGLang's indices: its direct kernels are CUDA-only) and `states(handle)` reads it back; the SWA "
            "peers are a private pool the suite does not judge.",
            "`hicache_mamba_*` also cache every prefix of a request with a state of its own, written as none (SGLang's match "
            "stops at the deepest node with a state); `hicache_swa_*` declare the window (`second_pool=SlidingWindow(4)`, "
            "oracle 20w and the resumable tier match: `window=` gives SWA peers to the new in-window tokens only, the adapter "
            "copies the window values at SGLang's indices on its SWA transfers). Page size 1 (`MambaComponent`, SWA frees "
            "by page).",
            "Finding #3 is looked past by its behaviour (`known:`, `reports/waivers/sglang_hybrid.txt`), as in the "
            "`sglang_hicache` rows. The Mamba rows stop at finding M1 (oracle 13: a state attached while its node's KV write "
            "is in flight is never backed up; with `RADIXCHECK_SGLANG_FIX=M1`, which patches the Python core, the Python row "
            "moves on to another oracle-13 failure). Their earlier `4 eviction amount` was the adapter's: a state-only copy "
            "SGLang made (for the adapter's own prefix state) waited, in SGLang's in-order ack queue, behind a suite write "
            "still in flight, its node locked where the tier model saw no transfer; the adapter now acts on such a done "
            "copy first (findings/sglang_trees.md). The SWA rows follow SGLang's window through the tiers: a load-back "
            "restores whole host segments (each token's own value), a host copy may gain its window later (SGLang's "
            "incremental SWA backup), a failed load resumes where the window is live on device, and the match's host part "
            "runs to SGLang's `best_match_node` (its `host_hit_length` leaves out a device-only node behind a host-only "
            "window, which its load-back returns: findings/sglang_trees.md, \"The SWA window under HiCache\").",
        ],
        _phrases([("tokens on host, but", "M1 state attached during an in-flight write never backed up (findings/sglang_trees.md)"),
                  ("the device tier evicts least recently used first", "#3 mid-edge hit refreshes the unused suffix "
                   "(RADIXCHECK_SGLANG_FIX=3 passes this program; findings/sglang_trees.md)")]),
    ),
    Engine(
        "sglang_tenants", "SGLang 0.5.23: namespaces (LoRA id, extra_key, cache_salt), keyed through its own Req",
        "radixcheck.properties.adapters.sglang_tenants", "findings/sglang_trees.md",
        [
            "The suite's namespace becomes a request's LoRA adapter and salt (`properties/adapters/tenant_fields.py`), "
            "SGLang's own `Req` is built with them and its key by the scheduler's `_req_radix_key`: `Req` appends the "
            "`lora_id` to the `extra_key`, `RadixKey` keeps `cache_salt` apart. `*_salted` put the salt in `cache_salt`, "
            "`*_extra_key` in `extra_key` (both are SGLang's per-request isolation fields).",
            "`unsent_namespaces=(\"empty\", \"multimodal\", \"decimal\", \"float\", \"bool\")`: SGLang reads an empty "
            "`extra_key`/`cache_salt` as none, and keys an image by the pad tokens it writes into the token ids, not by a "
            "namespace part; its fields are strings (an int travels in decimal, a float or bool not at all).",
            "As the trees above: no `evict_prefix`; `radix_*` trust their callers with locks, `unified_python_*` check them, "
            "`unified_rust_*` are declared lenient (the Rust core's findings #5 and #6 would stop the machine first). "
            "Known finding #3 (LRU order) is waived (`reports/waivers/sglang_tenants.txt`) so the machine reaches "
            "tenant isolation; its cells read `waived`/`pass (waived)`.",
        ],
        _phrases([("cached under namespace", "LoRA id appended to extra_key (sglang#24638), findings/sglang_trees.md")]),
    ),
    Engine(
        "sglang_lifecycle", "SGLang 0.5.23: the request lifecycle (its own Req and scheduler steps) and EAGLE bigram keys",
        "radixcheck.properties.adapters.sglang_lifecycle", "findings/sglang_trees.md",
        [
            "`requests_*` (`lifecycle=\"requests\"`): the suite's `Request` runs as a real SGLang `Req` with a row in a CPU "
            "`ReqToTokenPool`, through the scheduler's own `match_kv_cache`, `tree.lock`, `checkpoint_kv_cache` (each chunk; "
            "formerly `cache_unfinished_req`) and `release_kv_cache(checkpoint=...)` (finish, retract, abort, skipped insert): "
            "every slot a step frees is checked against what an engine must free (sglang #38319's class among them).",
            "`tree_*` (`lifecycle=\"tree\"`): the same trees, and Unified FULL+SWA and PureSWA (page size 1), driven through "
            "the request steps with their tree calls, the suite playing the scheduler.",
            "`requests_*_priority`: the `requests_*` trees under `--radix-eviction-policy priority`, so a running request's "
            "priority is driven (`Request.priority` becomes the `Req`'s `priority`, which SGLang's `checkpoint` passes to its "
            "inserts). Declared `policies.priority(prompt_bonus=1)`: once a request cached tokens past its prompt, SGLang "
            "inserts the prompt's pages again at `req.priority + 1` (\"so eviction can drop the output KV without the "
            "prompt\", both trees), by design. #3 is waived under this policy as in `sglang_radix:radix_priority`.",
            "`eagle_*` (`key_mode=\"bigram\"`): RadixCache and Unified FULL built with `is_eagle=True`; the suite sends raw "
            "tokens whose bigrams are its keys, so page alignment is judged in bigrams (sglang #24371, #28692).",
            "As the trees above: no `evict_prefix`; Unified Python checks locks, RadixCache and the Rust core are declared "
            "lenient (findings #1, #5, #6 are the plain rows'). Finding #3 (LRU order) is waived "
            "(`reports/waivers/sglang_lifecycle.txt`) so the machine reaches the lifecycle steps.",
            "`tree_unified_swa_*`: the production-scale world runs within the per-operation limit (the SWA adapter's "
            "dense ids: `findings/sglang_trees.md`) and passes past #3, as the plain `sglang_trees.unified_swa_*` rows. "
            "Its earlier slot-conservation failure (\"8 slots leaked\" after ~13,000 calls, both cores: the first 8 of 29) "
            "was radixcheck's, not SGLang's: these rows still declared `max_cached_pages` (a leftover of the SWA adapter's "
            "former fixed pool), so the suite evicted before inserts during the traffic, and the machine allocated an "
            "insert's slots before that eviction; when the eviction met #3 (waived), the step ended with those 29 slots "
            "held by nobody. Both fixed: the machines make room before they allocate (meta-test in "
            "`meta_tests/test_waivers.py`), and these rows declare no fixed pool, so their world is whole (#3 met only "
            "at its 500-leaf eviction).",
        ],
        sglang_finding,
        {"mamba": "Unified FULL+MAMBA: a match ends only at a saved recurrent state, and a request owns a mamba slot from "
                  "admission on: the second pool of issue 32 part 3, not in the contract yet."},
    ),
    Engine(
        "vllm_tenants", "vLLM 0.34.0 (PyPI, --no-deps, CPU torch): prefix caching with lora_request, cache_salt and multimodal items",
        "radixcheck.properties.adapters.vllm_tenants", "findings/vllm.md",
        [
            "`vllm_prefix` (above) with a namespace per request in vLLM's own `Request` fields: the suite's namespace becomes "
            "a `LoRARequest`, a `cache_salt` and image items (`MultiModalFeatureSpec` at the prompt's start) "
            "(`properties/adapters/tenant_fields.py`), and vLLM's block hasher folds them into the block hashes.",
            "`unsent_namespaces=(\"empty\", \"decimal\", \"float\", \"bool\")`: vLLM's API refuses an empty `cache_salt`, "
            "and its fields are strings (an int travels in decimal, a float or bool not at all). Every capability of `vllm_prefix` "
            "holds here too (release-ordered eviction, no `evict_prefix`, no reset, locks straight after a lookup).",
        ],
    ),
]

NOT_RUN = "not run: needs a checkout"
INDEX_KIT = "index_kit"  # the --only choice of the index kit's rows (named index.<...>)
TENANT_TREE_KIT = "tenant_tree_kit"  # the --only choice of the tenant-tree kit's rows (named tenant_tree.<...>)


def kit_targets() -> dict[str, str]:
    """The reference, the correct variants (must pass) and every catalogue mutant (must fail)."""
    targets = {"reference": "radixcheck.reference:RadixCache"}
    targets |= {v.__name__: f"radixcheck.properties.cache.mutants:{v.__name__}" for v in CORRECT_VARIANTS}
    targets |= {m.bug_class: f"radixcheck.properties.cache.mutants:{m.__name__}" for m in MUTANTS}
    return targets


def index_kit_targets() -> dict[str, str]:
    """The reference index, its correct variants (must pass) and every index mutant (must fail)."""
    targets = {"index.reference": "radixcheck.reference.kv_index:KvIndex"}
    targets |= {f"index.{v.__name__}": f"radixcheck.properties.index.mutants:{v.__name__}" for v in CORRECT_INDEX_VARIANTS}
    targets |= {f"index.{m.bug_class}": f"radixcheck.properties.index.mutants:{m.__name__}" for m in INDEX_MUTANTS}
    return targets


def tenant_tree_kit_targets() -> dict[str, str]:
    """The reference tenant tree, its correct variants (must pass) and every tenant-tree mutant (must fail)."""
    module = "radixcheck.properties.tenant_tree.mutants"
    targets = {"tenant_tree.reference": "radixcheck.reference.tenant_tree:TenantTree"}
    targets |= {f"tenant_tree.{v.__name__}": f"{module}:{v.__name__}" for v in CORRECT_TENANT_TREE_VARIANTS}
    targets |= {f"tenant_tree.{m.bug_class}": f"{module}:{m.__name__}" for m in [*TENANT_TREE_MUTANTS, *THREAD_MUTANTS]}
    return targets


def engine_targets(engine: Engine) -> dict[str, str]:
    """``<engine>.<factory> -> spec`` for every factory the engine's adapter lists."""
    os.environ.setdefault("RADIXCHECK_SGLANG_LAZY", "1")  # listing factories must not import the engine
    factories = importlib.import_module(engine.module).FACTORIES
    return {f"{engine.key}.{name}": f"{engine.module}:{name}" for name in factories
            if not any(part in name for part in engine.left_out)}


REGENERATE = ("python -m radixcheck.reports.matrix --only kit --only index_kit --only tenant_tree_kit (the kits' rows; an "
              "engine's: .audit-venv/bin/python -m radixcheck.reports.matrix --only ENGINE)")


def report_rows() -> list[ExpectedRows]:
    """The rows MATRIX.md's summary must have: the kit, the index kit and every engine factory it
    runs (listed from the adapters' ``FACTORIES``, without importing an engine)."""
    names = [*kit_targets(), *index_kit_targets(), *tenant_tree_kit_targets(),
             *(name for engine in ENGINES for name in engine_targets(engine))]
    return [ExpectedRows("implementation", tuple(names), "Summary")]


def engine_sources(engine: Engine, targets: dict[str, str]) -> tuple[dict[str, str], dict[str, Exception]]:
    """For an engine whose adapter says where its code comes from (``source_of``): target -> that
    description, and target -> the ``EngineUnavailable`` of each target whose code is not here
    (a checkout not named, a registry release not installed; its message says what to do)."""
    adapter = importlib.import_module(engine.module)
    if not hasattr(adapter, "source_of"):
        return {}, {}
    from radixcheck.properties.adapters.checkout import EngineUnavailable

    found: dict[str, str] = {}
    missing: dict[str, Exception] = {}
    for name in targets:
        try:
            found[name] = adapter.source_of(name.split(".", 1)[1]).describe()
        except EngineUnavailable as exc:
            missing[name] = exc
    return found, missing


def not_run_row(name: str, spec: str, exc: Exception) -> dict:
    """A row for a target whose engine code is not here: "not run: needs a checkout" (or "not installed")."""
    from radixcheck.properties.adapters.checkout import CheckoutMissing

    label = NOT_RUN if isinstance(exc, CheckoutMissing) else "not run: not installed"
    return {"name": name, "spec": spec, "seconds": 0.0, "tests": {}, "not_run": label, "why": exc.problem}


def merge_rows(previous: list[dict], rows: list[dict], partial: bool | str) -> tuple[list[dict], list[str]]:
    """This run's rows over ``previous`` (the artifact found): a not-run row never replaces a row
    that has verdicts, and a partial run (``--only``, or ``partial="rows"`` for ``--target``) keeps
    every row it did not run. Returns the
    rows and the names whose earlier verdicts were kept instead of this run's "not run"."""
    old = {r["name"]: r for r in previous}
    # a row this run could not run, or ran without a single verdict, never replaces verdicts
    kept = [r["name"] for r in rows if (r.get("not_run") or not r["tests"]) and old.get(r["name"], {}).get("tests")]
    mine = [old[r["name"]] if r["name"] in kept else r for r in rows]
    if not partial:
        return mine, kept
    if partial == "rows":  # --target: each named row in its saved place, a new one after its group's last row
        new = {r["name"]: r for r in mine}
        merged = [new.pop(r["name"], r) for r in previous]
        for r in new.values():
            last = max((i for i, o in enumerate(merged) if _group(o["name"]) == _group(r["name"])), default=len(merged) - 1)
            merged.insert(last + 1, r)
        return merged, kept
    groups = {_group(r["name"]) for r in rows}
    merged: list[dict] = []
    for r in previous:  # the artifact's order; this run's rows take the place of their groups' rows
        if _group(r["name"]) not in groups:
            merged.append(r)
        elif mine:
            merged, mine = merged + mine, []
    return merged + mine, kept


def _group(name: str) -> str:
    """The ``--only`` choice a row belongs to: its engine's key, or ``kit``."""
    engine = engine_of(name)
    if engine:
        return engine.key
    return INDEX_KIT if name.startswith("index.") else TENANT_TREE_KIT if name.startswith("tenant_tree.") else "kit"


def engine_of(name: str) -> Engine | None:
    return next((e for e in ENGINES if name.startswith(e.key + ".")), None)


class RunNotRecorded(Exception):
    """A run whose pytest judged nothing (its conftest did not load, collection failed, nothing was
    collected): recording it would replace the saved matrix with a weaker one."""


class _ConftestWatch:
    """A pytest plugin object: keeps why the session's conftest did not load (pytest only prints it)."""

    def __init__(self) -> None:
        self.failure = ""

    @pytest.hookimpl(wrapper=True)
    def pytest_load_initial_conftests(self) -> Generator[None, None, None]:
        try:
            return (yield)
        except Exception as exc:  # pytest's ConftestImportFailure: .path and .cause
            cause = getattr(exc, "cause", exc)
            self.failure = f"ImportError while loading conftest '{getattr(exc, 'path', '?')}': {type(cause).__name__}: {cause}"
            raise


def not_recorded_cause(code: int, conftest_failure: str, verdicts: list) -> str:
    """Why a run must not be recorded ("" when it may be): pytest's own words for it, on one line."""
    collection = [v for v in verdicts if v.oracle == "collection error"]
    if conftest_failure:
        return conftest_failure
    if collection:
        last = next((ln for ln in reversed(collection[0].reason.splitlines()) if ln.strip()), "")
        return f"collection error in {collection[0].test}: {last.strip().removeprefix('E').strip()}"
    if code in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR,
                pytest.ExitCode.INTERRUPTED) or not verdicts:
        name = code.name if isinstance(code, pytest.ExitCode) else str(code)
        return f"pytest exited {name} with {len(verdicts)} verdicts (its output above says why)"
    return ""


def run_matrix(targets: dict[str, str], profile: str, xdist: list[str]) -> tuple[list[dict], float]:
    """One pytest run over every target; returns one row per target and the wall time. Raises
    :class:`RunNotRecorded` when the run judged nothing (see :func:`not_recorded_cause`)."""
    started = time.monotonic()
    collector, conftest = _Collector(started, one_target=False), _ConftestWatch()
    args = ["--pyargs", CONFORMANCE, f"--hypothesis-profile={profile}", *SESSION_ARGS, *xdist]
    for path in waiver_files():
        args += ["--radix-waive", str(path)]
    for name, spec in targets.items():
        args += ["--radix-target", f"{name}={spec}"]
    code = pytest.main(args, plugins=[collector, conftest])
    wall = round(time.monotonic() - started, 1)
    cause = not_recorded_cause(code, conftest.failure, collector.verdicts)
    if cause:
        raise RunNotRecorded(cause)
    return rows_of(targets, collector.verdicts), wall


def rows_of(targets: dict[str, str], verdicts: list) -> list[dict]:
    """One row per target from the run's verdicts, each attributed by the target name in its id."""
    rows = {name: {"name": name, "spec": spec, "seconds": 0.0, "tests": {}} for name, spec in targets.items()}
    by_length = sorted(targets, key=len, reverse=True)  # names may contain '-': match the longest first
    only = by_length[0] if len(targets) == 1 else None  # one target: the plugin leaves its name out of the ids
    takes_target = {test for _, test, takes in conformance_tests() if takes}  # a tenant tree's or an index's have no parameter
    for v in verdicts:
        test, _, param = v.test.partition("[")
        if only is not None:
            name, rest = (only, param.rstrip("]")) if param or test in takes_target else (None, "")
        else:
            name = next((n for n in by_length if param.startswith(n + "-") or param == n + "]"), None)
            rest = param[len(name) + 1:].rstrip("]") if name else ""
        if name is None:  # a conformance test that takes no target (the scheduler's own order)
            continue
        column = f"{test}[{rest}]" if rest else test
        rows[name]["tests"][column] = {k: getattr(v, k) for k in ("outcome", "oracle", "reason", "program", "waived") if getattr(v, k)}
        rows[name]["seconds"] = round(rows[name]["seconds"] + v.seconds, 1)
    return list(rows.values())


CELL = {"passed": "pass", "failed": "**FAIL**", "skipped": "skip", "waived": "waived"}
PROFILE_NOTE = {
    "audit": "`ci`'s derandomized search, stopping at the first bug per test, shrunk within a bounded time",
    "mutation": "`ci`'s derandomized search, stopping at the first bug per test, unshrunk",
}


def _short(test_id: str) -> str:
    return (test_id.replace("test_cache_state_machine", "machine").replace("test_", "").replace("page_size=", "p")
            .replace("handle_from_another_cache_is_refused", "foreign_handle").replace("bad_page_size_is_refused", "bad_page"))


def _column_order(test_id: str) -> tuple:
    """Tests by name, then page sizes numerically (p1, p4, p16), then other parameters."""
    test, _, param = test_id.partition("[")
    size = param.rstrip("]").removeprefix("page_size=")
    return (test, 0, int(size), "") if size.isdigit() and param.startswith("page_size=") else (test, 1, 0, param)


def _table(rows: list[dict], columns: list[str]) -> list[str]:
    head = "| implementation | " + " | ".join(f"`{_short(t)}`" for t in columns) + " |"
    lines = [head, "|---|" + "---|" * len(columns)]
    for r in rows:
        if r.get("not_run"):
            lines.append(f"| `{r['name']}` | {r['not_run']} |" + " |" * max(len(columns) - 1, 0))
            continue
        cells = [_cell(r["tests"].get(t, {})) for t in columns]
        lines.append(f"| `{r['name']}` | " + " | ".join(cells) + " |")
    return lines


def _cell(verdict: dict) -> str:
    """A test's cell; a pass that met waived findings on the way says so."""
    cell = CELL.get(verdict.get("outcome", ""), "—")
    return f"{cell} (waived)" if verdict.get("outcome") == "passed" and verdict.get("waived") else cell


def _counts(row: dict) -> dict[str, int]:
    return {k: sum(d["outcome"] == k for d in row["tests"].values()) for k in CELL}


def _failures(rows: list[dict], finding_of: Callable[[str, str, dict], str] | None) -> list[str]:
    out: list[str] = []
    for r in rows:
        bad = {t: d for t, d in r["tests"].items() if d["outcome"] == "failed"}
        waived = [(t, w) for t, d in sorted(r["tests"].items()) for w in d.get("waived", [])]
        if not bad and not waived:
            continue
        out += [f"#### `{r['name']}` (`{r['spec']}`)", ""]
        for t, d in sorted(bad.items()):
            finding = finding_of(r["name"], t, d) if finding_of else ""
            out += [f"- `{t}` — oracle *{d.get('oracle', 'other')}*{f' — **finding {finding}**' if finding else ''}: "
                    f"{d.get('reason', '')}"]
            if d.get("program"):
                out += ["", "  ```python", *("  " + ln for ln in d["program"].splitlines()), "  ```", ""]
        for t, w in waived:
            finding = finding_of(r["name"], t, w) if finding_of else ""
            out += [f"- `{t}` — waived: oracle *{w['oracle']}*{f' — **finding {finding}**' if finding else ''}: "
                    f"{w['message']} ({waiver_cited(w)}){cut_short(w)}{not_rejudged(w)}"]
        out.append("")
    return out


def waiver_cited(waived: dict) -> str:
    """The waiver line a waived finding met, by its content (file, finding, ``known:``, reason), not
    by its line number: a line number moves when the file gains a line, and the rows run earlier
    would then cite another line."""
    file, _, rest = waived["waiver"].rpartition("/")[2].partition(":")
    reason = rest.partition(":")[2].strip()  # "<line>: <reason>", or "<line>" alone (rows rebuilt from a log)
    known = f"  known: {waived['known_deviation']}" if waived.get("known_deviation") else ""
    return f"{file}, the `{waived['oracle']}{known}` line" + (f": {reason}" if reason else "")


def _env_line(engine: Engine) -> str:
    """The environment an engine's rows run in, as of now (kept in the artifact's meta)."""
    if not AUDIT_ENV_STAMP.exists():
        try:
            from importlib.metadata import version

            torch = f", torch {version('torch')}"
        except ImportError:
            torch = ""
        return (f"Environment: Python {sys.version.split()[0]}{torch}, not built by `python -m "
                "radixcheck.reports.audit_env` (no `.audit-venv/` stamp).")
    info = json.loads(AUDIT_ENV_STAMP.read_text())
    step = info.get("engines", {}).get(engine.key)
    if not step:
        return f"Environment: `.audit-venv/` ({info.get('size_human', '?')} in all)."
    return (f"Environment: `.audit-venv/`, built by `python -m radixcheck.reports.audit_env`; this engine's step took "
            f"{step['seconds']} s and added {step['size_human']} (whole environment {info.get('size_human', '?')}, "
            f"{info.get('seconds_total', '?')} s).")


def _source_lines(engine: Engine, rows: list[dict]) -> list[str]:
    """Where an engine read from the user's checkout came from, per factory (or why it did not run)."""
    if not engine.checkout_setting:
        return []
    lines = [f"Engine code: the user's own checkout, `{engine.checkout_setting}` "
             "(`properties/adapters/checkout.py`); per factory:", ""]
    for r in rows:
        where = f"{r['not_run']} ({r.get('why', '')})" if r.get("not_run") else r.get("source", "source not recorded")
        lines.append(f"- `{r['name']}`: {where}")
    return [*lines, ""]


# Property families: the summary grid's columns, each a set of conformance tests (by name, parameters aside).
FAMILIES: list[tuple[str, tuple[str, ...]]] = [
    ("state machine", ("test_cache_state_machine",)),
    ("production scale", ("test_cache_at_production_scale", "test_tier_at_production_scale")),
    ("construction", ("test_bad_page_size_is_refused", "test_handle_from_another_cache_is_refused", "test_reset_empties_the_cache")),
    ("scheduling (DFS)", ("test_dfs_order_meets_the_bound", "test_no_order_beats_dfs", "test_bound_holds_under_any_budget")),
    ("host tier", ("test_tier_state_machine",)),
    ("KV-event index", ("test_index_state_machine", "test_index_under_churn")),
    ("router end to end", ("test_router_follows_engine",)),
    ("tenant tree", ("test_tenant_tree_state_machine", "test_tenant_tree_under_threads")),
]
OTHER_FAMILY = "other"


def family_of(test_id: str) -> str:
    """The property family of a matrix column (``test_cache_state_machine[page_size=4]``: "state machine")."""
    test = test_id.partition("[")[0]
    return next((name for name, tests in FAMILIES if test in tests), OTHER_FAMILY)


def _family_cell(outcomes: list[str]) -> str:
    """A grid cell over some verdicts: the worst outcome first (FAIL, waived, pass, skip), with its share."""
    if not outcomes:
        return "—"
    n = len(outcomes)
    for outcome, word in (("failed", "**FAIL**"), ("waived", "waived")):
        if outcome in outcomes:
            return f"{word} {outcomes.count(outcome)}/{n}"
    if "passed" in outcomes:
        return "pass"
    return "skip"


def _anchor(key: str) -> str:
    """An explicit anchor (the same on GitHub and in the docs site, whatever the heading's wording)."""
    return f'<a id="{key}"></a>'


def _groups(rows: list[dict], mutant_names: set[str]) -> list[tuple[str, str, str, list[dict]]]:
    """(label, anchor, findings link, rows) of the summary grid: each kit split into its correct
    implementations and its mutants (every one of which must fail), then each engine."""
    out: list[tuple[str, str, str, list[dict]]] = []
    for prefix, kit, anchor, catalogue in (("", "kit", "kit", "BUG_CATALOGUE.md"), ("index.", "index kit", INDEX_KIT, "INDEX_CATALOGUE.md"),
                                           ("tenant_tree.", "tenant-tree kit", TENANT_TREE_KIT, "TENANT_TREE_CATALOGUE.md")):
        mine = [r for r in rows if engine_of(r["name"]) is None and (r["name"].startswith(prefix) if prefix
                                                                      else not r["name"].startswith(("index.", "tenant_tree.")))]
        correct = [r for r in mine if r["name"] not in mutant_names]
        mutants = [r for r in mine if r["name"] in mutant_names]
        if correct:
            out.append((f"{kit}: reference and correct variants ({len(correct)})", anchor, catalogue, correct))
        if mutants:
            out.append((f"{kit}: mutants ({len(mutants)}, each must FAIL)", anchor, catalogue, mutants))
    for engine in ENGINES:
        mine = [r for r in rows if engine_of(r["name"]) is engine]
        if mine:
            out.append((f"{engine.title.partition(':')[0]}: {engine.key} ({len(mine)})", engine.key, engine.findings_doc, mine))
    return out


def summary_grid(rows: list[dict], mutant_names: set[str]) -> list[str]:
    """Engine (or kit) x property family: the worst verdict of each, with links to the details."""
    families = [name for name, _ in FAMILIES if any(family_of(t) == name for r in rows for t in r["tests"])]
    if any(family_of(t) == OTHER_FAMILY for r in rows for t in r["tests"]):
        families.append(OTHER_FAMILY)
    lines = ["| rows | " + " | ".join(families) + " | findings |", "|---|" + "---|" * (len(families) + 1)]
    for label, anchor, findings, mine in _groups(rows, mutant_names):
        cells = []
        for family in families:
            outcomes = [d["outcome"] for r in mine for t, d in r["tests"].items() if family_of(t) == family]
            cells.append(_family_cell(outcomes))
        not_run = sum(1 for r in mine if r.get("not_run"))
        label += f", {not_run} not run" if not_run else ""
        lines.append(f"| [{label}](#{anchor}) | " + " | ".join(cells) + f" | [{findings.rpartition('/')[2]}]({findings}) |")
    return lines


def implementation_grid(rows: list[dict]) -> list[str]:
    """Every implementation x property family (the worst verdict in each)."""
    families = [name for name, _ in FAMILIES if any(family_of(t) == name for r in rows for t in r["tests"])]
    if any(family_of(t) == OTHER_FAMILY for r in rows for t in r["tests"]):
        families.append(OTHER_FAMILY)
    lines = ["| implementation | " + " | ".join(families) + " |", "|---|" + "---|" * len(families)]
    for r in rows:
        if r.get("not_run"):
            lines.append(f"| `{r['name']}` | {r['not_run']} |" + " |" * max(len(families) - 1, 0))
            continue
        cells = [_family_cell([d["outcome"] for t, d in r["tests"].items() if family_of(t) == f]) for f in families]
        lines.append(f"| `{r['name']}` | " + " | ".join(cells) + " |")
    return lines


def _provenance(meta: dict) -> str:
    """Which radixcheck made the verdicts (each run's own line, when it recorded one) and which rendered them."""
    runs = [meta, *meta.get("reruns", [])]
    recorded = [r["generated_by"] for r in runs if "generated_by" in r]
    unrecorded = len(runs) - len(recorded)
    newest = f" The newest run: {recorded[-1].removeprefix('Generated by ')}" if recorded else ""
    older = f" ({unrecorded} of them by an older radixcheck, which recorded no version)" if unrecorded else ""
    return (f"Rendered by radixcheck {_rendered_by()} from `reports/artifacts/matrix.json` (`python -m "
            f"radixcheck.reports.matrix --report-only`). Its verdicts come from {len(runs)} runs{older}, listed under "
            f"[Runs](#runs).{newest}")


def _rendered_by() -> str:
    return generated_by().removeprefix("Generated by radixcheck ").rstrip(".")


def render(rows: list[dict], meta: dict) -> str:
    kit = [r for r in rows if engine_of(r["name"]) is None and not r["name"].startswith(("index.", "tenant_tree."))]
    index_kit = [r for r in rows if engine_of(r["name"]) is None and r["name"].startswith("index.")]
    tree_kit = [r for r in rows if engine_of(r["name"]) is None and r["name"].startswith("tenant_tree.")]
    mutant_names = ({m.bug_class for m in MUTANTS} | {f"index.{m.bug_class}" for m in INDEX_MUTANTS}
                    | {f"tenant_tree.{m.bug_class}" for m in [*TENANT_TREE_MUTANTS, *THREAD_MUTANTS]})
    mutants = [r for r in kit + index_kit + tree_kit if r["name"] in mutant_names]
    correct = [r for r in kit if r["name"] not in mutant_names]
    out = [
        "# Conformance matrix",
        "",
        _provenance(meta),
        "",
        "## At a glance",
        "",
        "Each cell is the worst verdict of that family over the rows' tests and page sizes, with its share "
        "(`**FAIL** 3/12`: 3 of 12 verdicts failed); `skip` = declared not offered, never sent; `—` = no such test "
        "for these rows. A mutant row must FAIL. The first column links to the details, the last to the findings.",
        "",
        *summary_grid(rows, mutant_names),
        "",
        "## How it was run",
        "",
        f"{meta.get('generated_by', 'Generated by an older radixcheck (no version recorded).')} "
        f"Command: `{meta['command']}`: **one pytest run** over {len(rows)} targets "
        f"({sum(len(r['tests']) for r in rows)} items), spread by pytest-xdist over `{' '.join(meta['xdist']) or '-n 0'}`, "
        f"in {meta['wall_seconds']:.0f} s wall on this machine ({meta['machine']}). Hypothesis profile `{meta['profile']}` "
        f"({PROFILE_NOTE.get(meta['profile'], 'see README')}). "
        "`skip` = the implementation declares it does not offer what the property needs (its `capabilities`: "
        "never sent, so never failed); `—` = not run for it (a page size it does not declare); `waived` = failed only "
        "with a known finding (`reports/waivers/`), `pass (waived)` = passed, looking past one.",
        "",
        "## Summary",
        "",
        "| implementation | passed | failed | skipped | waived | s (sum of items) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = _counts(r)
        if r.get("not_run"):
            out.append(f"| `{r['name']}` | {r['not_run']} | | | | |")
            continue
        out.append(f"| `{r['name']}` | {c['passed']} | {c['failed'] or ''} | {c['skipped'] or ''} | {c['waived'] or ''} | "
                   f"{r['seconds']} |")
    out += ["", "## By implementation and property family", "", *implementation_grid(rows)]
    if correct:
        every_mutant_fails = all(_counts(r)["failed"] for r in mutants)
        clean = ", ".join(f"`{r['name']}`" for r in correct if not _counts(r)["failed"]) or "none"
        out += ["", _anchor("kit"), "", "## The kit: reference, correct variants, mutants", "",
                f"Correct implementations passing everything they run: {clean}; "
                f"every mutant fails at least one property: {'yes' if every_mutant_fails else '**NO**'} "
                "(each mutant's shrunk program and kill rate over 200 streams: `BUG_CATALOGUE.md`).", ""]
        columns = sorted({t for r in kit for t in r["tests"]}, key=_column_order)
        disputed = [t for t in columns if len({r["tests"].get(t, {}).get("outcome") for r in kit}) > 1]
        out += ["Only the properties on which they differ:", "", *_table(kit, disputed), ""]
    if index_kit:
        index_mutants = [r for r in index_kit if r["name"] in mutant_names]
        clean = ", ".join(f"`{r['name']}`" for r in index_kit if r not in index_mutants and not _counts(r)["failed"]) or "none"
        out += ["", _anchor(INDEX_KIT), "", "## The index kit: reference index, correct variants, mutants", "",
                f"Correct indexes passing everything they run: {clean}; every index mutant fails at least one property: "
                f"{'yes' if all(_counts(r)['failed'] for r in index_mutants) else '**NO**'} (kill rates over 200 streams: "
                "`INDEX_CATALOGUE.md`).", "",
                *_table(index_kit, sorted({t for r in index_kit for t in r["tests"]}, key=_column_order)), ""]
    if tree_kit:
        tree_mutants = [r for r in tree_kit if r["name"] in mutant_names]
        clean = ", ".join(f"`{r['name']}`" for r in tree_kit if r not in tree_mutants and not _counts(r)["failed"]) or "none"
        out += ["", _anchor(TENANT_TREE_KIT), "", "## The tenant-tree kit: reference tenant tree, correct variants, mutants", "",
                f"Correct tenant trees passing everything they run: {clean}; every tenant-tree mutant fails at least one property: "
                f"{'yes' if all(_counts(r)['failed'] for r in tree_mutants) else '**NO**'} (kill rates over 200 streams: "
                "`TENANT_TREE_CATALOGUE.md`).", "",
                *_table(tree_kit, sorted({t for r in tree_kit for t in r["tests"]}, key=_column_order)), ""]
    for engine in ENGINES:
        mine = [r for r in rows if engine_of(r["name"]) is engine]
        if not mine:
            continue
        columns = sorted({t for r in mine for t in r["tests"]}, key=_column_order)
        out += [_anchor(engine.key), "", f"## {engine.title}", "",
                f"Adapter: `{engine.module}`. Findings, each with a standalone repro and an "
                f"upstream-ready report: [`{engine.findings_doc}`]({engine.findings_doc}). "
                f"{meta.get('environment', {}).get(engine.key) or _env_line(engine)}", "",
                *_source_lines(engine, mine),
                "### Differences by design (declared as capabilities: skipped, never failed)", "",
                *(f"- {line}" for line in engine.design),
                *(f"- Not in the matrix: factories named `*{part}*`: {why}" for part, why in engine.left_out.items()),
                "", "### Verdicts", "", *_table(mine, columns), ""]
        failures = _failures(mine, engine.finding_of)
        if failures:
            out += ["### Failures and waived findings, each linked to its finding", "", *failures]
    out += ["## Kit failures (mutants: every one expected)", "", *_failures(mutants, None)] if mutants else []
    out += [_anchor("runs"), "", "## Runs", "", f"- The whole matrix: `{meta['command']}` ({meta['wall_seconds']:.0f} s wall, "
            f"{meta['machine']}). {meta.get('generated_by', 'No version recorded.')}{_record(meta)}"]
    for rerun in meta.get("reruns", []):
        which = rerun.get("rows") or rerun["engines"]  # --target names rows; --only, groups
        targets = f"{rerun['targets']} target{'s' if rerun['targets'] != 1 else ''}"
        out += [f"- Rows {'' if 'rows' in rerun else 'of '}{', '.join(f'`{k}`' for k in which)} re-run by `{rerun['command']}` "
                f"({targets}, {rerun['wall_seconds']:.0f} s wall, {rerun['machine']}). "
                + rerun.get("generated_by", "No version recorded.") + _record(rerun)]
    return "\n".join(out) + "\n"


def _record(run: dict) -> str:
    """A run's settings and uncommitted files, after its generated_by line (nothing for a run that recorded neither)."""
    said = describe_run_record(run)
    return f" {said}" if said else ""


def weaker_than_saved(saved_json: Path, profile: str) -> list[str]:
    """How a run under ``profile`` would be weaker than the matrix saved at ``saved_json``. (Fewer
    targets are not: a run merges its rows into the saved ones, and a row not run keeps its verdict.)"""
    try:
        saved = json.loads(saved_json.read_text())
    except (OSError, ValueError):
        return []
    if saved.get("meta", {}).get("profile") not in (None, profile):
        return [f"--profile {profile} where it was made with {saved['meta']['profile']}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m radixcheck.reports.matrix", description=__doc__.splitlines()[0])
    parser.add_argument("-n", dest="workers", default="2", type=workers, help="pytest-xdist local workers (default 2; 0: in process)")
    parser.add_argument("--tx", action="append", default=[], help="pytest-xdist execution specs (replace -n), repeatable")
    parser.add_argument("--profile", default="audit", choices=PROFILES, help="Hypothesis profile (default audit; mutation: no shrinking)")
    parser.add_argument("--only", action="append", choices=[e.key for e in ENGINES] + ["kit", INDEX_KIT, TENANT_TREE_KIT],
                        help="rows to run, repeatable")
    parser.add_argument("--kit-only", action="store_true", help="only the reference, correct variants and mutants")
    parser.add_argument("--target", action="append", default=[], metavar="NAME",
                        help="only this row (a name in MATRIX.md's summary, e.g. a new mutant's), repeatable; the others are kept")
    parser.add_argument("--report-only", action="store_true", help="re-render MATRIX.md from artifacts/matrix.json")
    parser.add_argument("--out", type=Path, default=None, help="directory for MATRIX.md and artifacts/ (default: reports/)")
    parser.add_argument("--force", action="store_true", help="replace the saved matrix even when made with another profile")
    args = parser.parse_args(argv)
    out_dir = args.out or default_out()
    out_json, out_md = out_dir / "artifacts" / "matrix.json", out_dir / "MATRIX.md"
    made_by, record = generated_by(), run_record()  # before the run: its settings, not the ones listing sets below
    if args.report_only:
        if not out_json.is_file():
            parser.error(f"--report-only: {out_json} does not exist")
        saved = json.loads(out_json.read_text())
        out_md.write_text(render(saved["rows"], saved["meta"]))
        print(f"[matrix] wrote {out_md}")
        return 0
    if args.out is None:  # --out DIR chooses the place: nothing there is protected
        refuse_weaker(parser, out_md, weaker_than_saved(out_json, args.profile), args.force)
    if args.target and (args.only or args.kit_only):
        parser.error("--target names rows itself: drop --only/--kit-only")
    only = ({"kit", INDEX_KIT, TENANT_TREE_KIT} if args.kit_only
            else set(args.only or ["kit", INDEX_KIT, TENANT_TREE_KIT, *(e.key for e in ENGINES)]))
    if args.target:
        only = {_group(name) for name in args.target}
    targets = kit_targets() if "kit" in only else {}
    targets |= index_kit_targets() if INDEX_KIT in only else {}
    targets |= tenant_tree_kit_targets() if TENANT_TREE_KIT in only else {}
    sources: dict[str, str] = {}
    skipped: dict[str, tuple[str, Exception]] = {}  # target -> (spec, why its code is not here)
    for engine in ENGINES:
        if engine.key in only:
            mine = engine_targets(engine)
            found, missing = engine_sources(engine, mine)
            for message in dict.fromkeys(str(exc) for exc in missing.values()):  # each message once
                names = ", ".join(n for n, exc in missing.items() if str(exc) == message)
                print(f"[matrix] not run: {names}. {message}", flush=True)
            for name, spec in mine.items():
                if args.target and name not in args.target:
                    continue
                if name in missing:
                    skipped[name] = (spec, missing[name])
                    continue
                if name in found:
                    print(f"[matrix] {name}: {found[name]}", flush=True)
                targets[name] = spec
            sources |= found
    if args.target:
        unknown = [name for name in args.target if name not in targets and name not in skipped]
        if unknown:
            parser.error(f"--target {unknown[0]}: no such row (rows are named as in MATRIX.md's summary)")
        targets = {name: spec for name, spec in targets.items() if name in args.target}
        skipped = {name: why for name, why in skipped.items() if name in args.target}
    xdist = [f"--tx={spec}" for spec in args.tx] + (["--dist", "load"] if args.tx else [])
    if not args.tx and args.workers not in ("0", "1"):
        xdist = ["-n", args.workers, "--dist", "load"]
    print(f"[matrix] {len(targets)} targets, one pytest run ({' '.join(xdist) or 'in process'})", flush=True)
    try:
        rows, wall = run_matrix(targets, args.profile, xdist) if targets else ([], 0.0)
    except RunNotRecorded as exc:  # never a weaker report over the saved one
        print(f"[matrix] not recorded ({out_json.name} and {out_md.name} unchanged): {exc}", file=sys.stderr, flush=True)
        return 1
    for row in rows:
        if row["name"] in sources:
            row["source"] = sources[row["name"]]
    rows += [not_run_row(name, spec, exc) for name, (spec, exc) in skipped.items()]
    argv_shown = " ".join(argv if argv is not None else sys.argv[1:])
    meta = {"generated_by": made_by, **record,
            "command": f"python -m radixcheck.reports.matrix {argv_shown}".strip(), "xdist": xdist, "profile": args.profile,
            "wall_seconds": wall, "machine": f"{os.cpu_count()} cores",
            "environment": {e.key: _env_line(e) for e in ENGINES if e.key in only}}
    partial = "rows" if args.target else args.kit_only or bool(args.only)
    previous = json.loads(out_json.read_text()) if out_json.exists() else {"meta": meta, "rows": []}
    why_empty = {r["name"]: r.get("not_run") or "no verdict" for r in rows}  # a row run without verdicts needs no checkout
    rows, kept = merge_rows(previous["rows"], rows, partial)
    for name in kept:
        print(f"[matrix] {name}: kept the verdicts already in {out_json.name} ({why_empty[name]} in this run)", flush=True)
    if not targets and previous["rows"]:  # nothing ran: the saved run stays the record of every row it holds
        meta = previous["meta"]
        print(f"[matrix] no row could run here: {out_json.name} keeps its runs' record", flush=True)
    elif partial and previous["rows"]:
        environment = previous["meta"].get("environment", {}) | meta.pop("environment")
        rerun = {**meta, "targets": len(targets), "engines": sorted(only)}  # with its own generated_by
        if args.target:  # a few rows supersede no earlier run
            rerun["rows"] = sorted(targets)
        earlier = [r for r in previous["meta"].get("reruns", [])
                   if args.target or "rows" in r or not set(r["engines"]) <= only]  # superseded
        meta = previous["meta"] | {"reruns": [*earlier, rerun], "environment": environment}
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    out_md.write_text(render(rows, meta))
    print(f"[matrix] {wall:.0f} s; wrote {out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
