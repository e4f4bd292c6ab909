"""radixcheck tier adapters for SGLang's HiCache (sglang 0.5.23, CPU).

What ``--enable-hierarchical-cache`` builds in 0.5.23
------------------------------------------------------
``hiradix_cache.py`` (``HiRadixCache``) is gone. ``mem_cache/registry.py``
(``create_unified_radix_cache``) builds a ``UnifiedRadixCache`` and, when the flag is set, calls
``cache.init_hicache(server_args, params)``: ``attach_hybrid_pool_to_unified_cache`` builds the
host pool (``HostPoolGroup`` over an ``MHATokenToKVPoolHost``) and a ``HybridCacheController``
whose ``L2TransferEngine`` moves KV on device streams. So the HiRadixCache of 0.5.23 *is*
``UnifiedRadixCache`` + ``init_hicache``; the factories here build exactly that, with the FULL
component (plain attention models), over either tree core.

The factories (``factory(allocator, host_pool, controller, page_size, write_policy)``)
-------------------------------------------------------------------------------------
``hicache_python``, ``hicache_rust``
    ``UnifiedRadixCache`` (Python or Rust tree core) + ``init_hicache`` with
    ``hicache_write_policy`` = the suite's ``write_policy``: ``write_through``,
    ``write_through_selective`` (SGLang backs a node up on its second hit:
    ``write_through_threshold = 2``) and ``write_back``. Page sizes 1, 2 and 4.
``hicache_*_<policy>_salted[_tree]``, ``hicache_*_lru_extra_key``
    Tenants through SGLang's ``Req`` under a named eviction policy; ``_tree`` adds running requests
    the suite plays with the tier calls (``lifecycle="tree"``).
``hicache_{python,rust}_requests``, ``hicache_{python,rust}_fifo_salted_requests``
    Running requests through SGLang's own request methods, run as its scheduler runs them
    (``lifecycle="requests"``: ``sglang_hicache_requests``).

How SGLang is run on CPU (stand-ins and targeted patches; nothing of SGLang's is copied)
----------------------------------------------------------------------------------------
* The adapters' usual ``triton``/``torchvision`` stand-ins (``_sglang_stubs``).
* ``pool_host.base.available_host_memory_bytes`` -> SGLang's 10 GiB reserve + 1 GiB: SGLang
  refuses a host pool unless that much RAM is free beyond it, and the suite's host buffers are a
  few KB (a verdict must not depend on the auditor's free memory).
* ``pool_host.common._cuda_host_register`` -> no-op: on CPU the host buffer is not pinned
  (``torch.cuda.cudart()`` is absent from CPU torch). ``hicache_io_backend="direct"`` with
  ``hicache_mem_layout="layer_first"`` (the default ``page_first`` is refused for ``direct``).
* **The transfer engine is the suite's.** The cache's ``L2TransferEngine`` instance gets
  ``submit_device_to_host`` / ``submit_host_to_device`` that copy nothing: they return a
  ``TransferCompletion`` whose ``finish_event.query()`` is true once the suite delivered every
  suite transfer the submission covers, and whose ``synchronize()`` (SGLang blocking on the copy,
  as ``writing_check(write_back=True)`` does) delivers them now, as a DMA engine finishing would.
  The suite's controller copies the KV at the delivery (its ``device_kv``/``host_kv``); SGLang's
  own CPU buffers are never read.
* **Host slots are the suite's.** The host pool's ``alloc``/``free``/``available_size`` are
  forwarded to the suite: an allocation made inside ``HybridCacheController.write`` (whose
  device indices the adapter notes as it passes, calling the original) is the suite
  controller's ``write(device_slots)``, so the suite counts each host slot, plans failed
  allocations, and checks the backup chain. A device allocation made inside
  ``HybridCacheController.load`` is the suite controller's ``load(host_slots)``. Every other
  device allocation and free goes to the suite's device pool (``ForwardingAllocator``).
* SGLang checks the host pool's room before a backup (``_execute_kv_backup``: too little, even
  after ``evict_host``, and it gives up without asking for slots). The adapter reports that to the
  suite as the failed allocation it is (``controller.refused``, which the suite accepts only when
  the host pool is indeed too full), wrapping the instance's ``_execute_kv_backup`` to see it.
* The scheduler's polling is called as the scheduler calls it: after every insert,
  ``flush_pending_backups()`` (the merged D2H submission ``process_batch_result`` makes); after
  ``load_back``, ``ready_to_load_host_cache()`` (``start_loading``); after every completion the
  suite delivers, ``check_hicache_events()`` (the per-step poll: ``writing_check`` and
  ``loading_check``).
* **Completions in order, per kind.** SGLang's copies of one kind run on one device stream, which
  finishes them in the order they started, and SGLang consumes the acks in that order
  (``_count_ready_acks`` stops at the first not ready). A completion the suite delivers while an
  earlier transfer of the same kind is pending finishes that one first (logged, as when SGLang
  blocks on a copy). Without it the suite counted a page as written while SGLang, waiting for the
  earlier ack, still held it as in flight (not an eviction candidate): oracle 4t then named an
  order SGLang's stream can never produce.
* ``load_back_threshold`` is 1 (SGLang: 10 tokens; a shorter host hit is recomputed). The
  suite's worlds are 40 device slots; at 10 almost no load would ever run. A skipped load is
  legal under the contract (the match's host part stays on host), so this only makes the
  load path reachable.
* ``insert`` sends ``prev_prefix_len=len(key)`` (the caller keeps and frees its duplicates, as in
  ``sglang_radix``) and ``track_adopted_ranges=True``: SGLang's ``prefix_len`` counts host-only
  nodes the insert restored from the caller's slots (``_unevict_node_on_insert``); the contract's
  counts pages already on device, so the adapter returns the start of the adopted run.
* ``host_size()``: tokens of the tree's nodes whose host copy completed (their host slots are
  held by no pending suite transfer). SGLang commits ``host_value`` when a write *starts*. The
  Rust core has no node walk: there it is the host slots SGLang holds less those of pending
  writes, so on the Rust core ``host_size`` adds nothing to the host slot conservation check.
* Declared ``write_back_order="leaf_first"``: under write-back SGLang writes the evicted leaf
  alone (``_build_backup_kv_action(node, write_back=True)`` chains no ancestors); its parent
  stays on device and is written back when it is evicted in turn, or, when that write-back
  fails, dropped with its host-only subtree (``_drop_subtree_no_host``). By design, not a gap.
* No ``evict_prefix`` in SGLang: ``supports_quarantine=False``.
* Page sizes 1, 2, 4: SGLang's host pool would hand out page-aligned runs of host ids; the
  suite's are arbitrary (as its device slot ids are). Nothing in SGLang's tree or controller
  reads them as runs once the copies are the suite's (no run at these sizes met a problem).
"""

from __future__ import annotations

import itertools
import logging
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import sglang_radix as _sr
from radixcheck.properties.adapters import sglang_tenants as _st
from radixcheck.properties.adapters.tenant_fields import request_fields
from radixcheck.properties.cache import policies
from radixcheck.properties.cache.policies import Policy
from radixcheck.properties.tiers.contract import TierCapabilities, TierMatch, Transfer

PIP_REQUIREMENTS: list[str] = []
"""No packages beyond the audit environment's."""

POLICIES = ("write_through", "write_through_selective", "write_back")

_hx: Any = None


def _load() -> Any:
    """sglang_radix's namespace plus what the host tier needs; patches ``_cuda_host_register``."""
    global _hx
    if _hx is not None:
        return _hx
    import types

    sg = _sr._load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sglang.srt.mem_cache.pool_host.base as pool_host_base
        import sglang.srt.mem_cache.pool_host.common as pool_host_common
        from sglang.srt.mem_cache.l2_transfer import TransferCompletion
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
        from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
    pool_host_common._cuda_host_register = lambda *args, **kwargs: None  # no cudaHostRegister on CPU
    # SGLang refuses a host pool unless the machine has its 10 GiB reserve free beyond it: the
    # suite's host buffers are a few KB, so that guard made the verdict depend on the auditor's RAM
    # (it refused every factory on a 24 GB machine with 16 GB free). The budget is the reserve + 1 GiB.
    pool_host_base.available_host_memory_bytes = lambda **_: pool_host_base.HICACHE_HOST_MEMORY_RESERVE_BYTES + (1 << 30)
    logging.getLogger("sglang").setLevel(logging.ERROR)
    apply_fixes(os.environ.get(FIX_ENV, ""))
    _hx = types.SimpleNamespace(sg=sg, TransferCompletion=TransferCompletion, MHATokenToKVPool=MHATokenToKVPool,
                                ServerArgs=ServerArgs, publish=set_global_server_args_for_scheduler)
    return _hx


FIX_ENV = "RADIXCHECK_SGLANG_FIX"
"""Comma-separated fixes of :data:`FIXES` to apply to SGLang's Python tree core for this process
(``RADIXCHECK_SGLANG_FIX=3,N3``): how a verdict is shown to be the finding's and nothing else's."""

FIXES = {
    "3": "sglang_findings.md #3: a split leaves the last use of both halves as it was (match and insert)",
    "N3": "findings/sglang_trees.md N3: under write_back an insert still counts its nodes' hits, a new leaf's too",
    "M1": "findings/sglang_trees.md M1: a write-through ack backs up the state a node gained while its KV write was in flight",
}
"""The fixes ``apply_fixes`` knows, each a few lines of our own around one SGLang method (the
Python tree core ``UnifiedTreeCore``; the Rust core is compiled, so it is never patched)."""

_applied: set[str] = set()


def apply_fixes(names: str | Sequence[str]) -> list[str]:
    """Patch SGLang's Python tree core (``UnifiedTreeCore``) with the named :data:`FIXES`, for this
    process. Returns the fixes applied now (each is applied once); an unknown name is refused."""
    wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    unknown = [n for n in wanted if n not in FIXES]
    if unknown:
        raise ValueError(f"{FIX_ENV}: unknown fix {unknown} (known: {sorted(FIXES)})")
    from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore

    done = []
    for name in wanted:
        if name in _applied:
            continue
        if name == "3":
            _fix_split_refresh(UnifiedTreeCore)
        elif name == "N3":
            _fix_write_back_hits(UnifiedTreeCore)
        else:
            _fix_state_backup_after_ack()
        _applied.add(name)
        done.append(name)
    return done


def _fix_split_refresh(core: Any) -> None:
    """#3: ``_split_node`` stamps the suffix (``child.last_access_time = now``), and the insert walk
    touches the node before splitting it. The new upper half is stamped too (a new node's
    ``last_access_time`` is its creation), which shows when the split lies past the match's answer
    (a dead SWA window ends it; findings/sglang_trees.md). Fixed: both halves keep the last use the
    node had (a use of either is stamped by the match or insert as before), and an insert that diverges
    inside a node gives its unused suffix back the stamp from before the walk step (a node the insert
    covers whole, which SWA may split too, keeps its fresh stamp)."""
    split, walk = core._split_node, core._insert_walk_step

    def split_node(self: Any, key: Any, child: Any, split_len: int) -> Any:
        before = child.last_access_time
        result = split(self, key, child, split_len)
        child.last_access_time = result[0].last_access_time = before
        return result

    def insert_walk_step(self: Any, state: Any) -> None:
        key = state.key
        node = state.node.children.get(key.child_key(self.page_size) if len(key) else None)
        # Only a split where the insert diverges inside `node` leaves it an unused suffix. SWA splits a
        # node the insert covers whole too (`SWAComponent._clip_to_window` at the request's window start,
        # from `recover_after_unevict` or the overlap step): that node was used and keeps the fresh stamp.
        diverges = node is not None and node.key.match(key, page_size=self.page_size) < len(node.key)
        before = (node.parent, node.last_access_time) if diverges else None
        walk(self, state)
        if before is not None and node.parent is not before[0]:  # split: `node` is the unused suffix now
            node.last_access_time = before[1]

    core._split_node, core._insert_walk_step = split_node, insert_walk_step


def _fix_write_back_hits(core: Any) -> None:
    """N3: ``_inc_hit_count_and_check`` returns under write_back before ``hit_count += 1``, and
    ``_should_backup_after_insert`` returns under write_back before calling it for a new leaf. Fixed:
    the hit is counted in both places, and (as before) no write-through backup is asked for."""
    check, after_insert = core._inc_hit_count_and_check, core._should_backup_after_insert

    def inc_hit_count_and_check(self: Any, node: Any) -> bool:
        if self.is_write_back and not node.evicted:
            node.hit_count += 1
            return False
        return check(self, node)

    def should_backup_after_insert(self: Any, state: Any) -> bool:
        if self.is_write_back and state.is_new_leaf:
            if state.total_prefix_length + len(state.target_node.key) > state.params.inserted_len:
                self._inc_hit_count_and_check(state.target_node)  # counts the new leaf's hit, asks no backup
            return False
        return after_insert(self, state)

    core._inc_hit_count_and_check = inc_hit_count_and_check
    core._should_backup_after_insert = should_backup_after_insert


def _fix_state_backup_after_ack() -> None:
    """M1: an insert that gives a node its Mamba state while the node's KV write-through is in flight
    asks no backup of the state (``_should_backup_after_insert`` wants ``write_through_pending_id is
    None``), and nothing asks later. Fixed: when the write's ack is consumed
    (``_finish_write_through_ack``), a published node still missing a component's host copy gets its
    incremental backup (``build_backup_kv_action`` on a backed-up node moves no KV). Python core only."""
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    finish = UnifiedRadixCache._finish_write_through_ack

    def finish_write_through_ack(self: Any, ack_id: int) -> None:
        pending = self.ongoing_write_through.get(ack_id)
        finish(self, ack_id)
        core = self.tree_core
        if pending is None or not hasattr(core, "_node_arena"):  # the Python core (the Rust one is compiled)
            return
        for node_id in pending[2]:  # publish_node_ids
            node = core._node_arena.get(node_id)
            if (node is not None and not node.evicted and node.backuped and node.write_through_pending_id is None
                    and core._needs_incremental_component_backup(node)):
                self._apply_cache_actions([core.build_backup_kv_action(node_id)])
                self.flush_pending_backups()

    UnifiedRadixCache._finish_write_through_ack = finish_write_through_ack


class _SuiteEvent:
    """A ``finish_event``: done when the suite delivered every transfer it stands for."""

    def __init__(self, adapter: SGLangHiCache, transfers: list[Transfer]) -> None:
        self.adapter, self.transfers = adapter, transfers

    def query(self) -> bool:
        return all(t.number in self.adapter.delivered for t in self.transfers)

    def synchronize(self) -> None:
        self.adapter._deliver_now(self.transfers)

    def wait(self, stream: Any = None) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def elapsed_time(self, other: Any) -> float:
        return 0.0


class SGLangHiCache:
    """``UnifiedRadixCache`` + ``init_hicache`` (FULL), its transfers and host slots the suite's."""

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 backend: str = "python", eviction_policy: str = "lru", salt_field: str | None = None) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive int, got {page_size!r}")
        if write_policy not in POLICIES:
            raise ValueError(f"write_policy must be one of {POLICIES}, got {write_policy!r}")
        if eviction_policy not in EVICTION_POLICIES:
            raise ValueError(f"eviction_policy must be one of {EVICTION_POLICIES}, got {eviction_policy!r}")
        if salt_field not in (None, "cache_salt", "extra_key"):
            raise ValueError(f"salt_field must be None, 'cache_salt' or 'extra_key', got {salt_field!r}")
        self.eviction_policy, self.salt_field = eviction_policy, salt_field
        self._namespace: Any = None  # the namespace of the call running now (salt_field set)
        self._extra_key: Any = None  # SGLang's extra_key of the last key built
        hx = _load()
        sg = hx.sg
        self.sg, self.hx = sg, hx
        self.page_size, self.write_policy = page_size, write_policy
        self.allocator, self.host_pool, self.controller = allocator, host_pool, controller
        self.delivered: set[int] = set()
        self._write_device: Any = None  # device indices of the HybridCacheController.write in progress
        self._load_host: Any = None  # host indices of the HybridCacheController.load in progress
        self._by_host: dict[int, Transfer] = {}  # host slot -> its pending suite write
        self._by_device: dict[int, Transfer] = {}  # device slot -> its pending suite load
        self._receipts: dict[Any, list[Any]] = {}

        args = hx.ServerArgs(model_path="dummy", enable_hierarchical_cache=True, hicache_io_backend="direct",
                             hicache_mem_layout=self.mem_layout, hicache_write_policy=write_policy, device="cpu",
                             page_size=page_size, hicache_size=0,
                             hicache_ratio=max(2.0, host_pool.pool_size / allocator.pool_size))  # its buffers hold the ids
        self._prepare_args(args)
        hx.publish(args)
        kv = self._device_kv_pool()
        adapter = self

        class _Allocator(sg.ForwardingAllocator):
            def alloc(self, need_size: int):
                if adapter._load_host is not None:  # inside HybridCacheController.load: the suite's load
                    return adapter._suite_load(need_size)
                return super().alloc(need_size)

        self.kv_allocator = _Allocator(allocator, page_size)
        self.kv_allocator._kvcache = kv
        params = sg.CacheInitParams(disable=False, req_to_token_pool=self._req_to_token_pool(),
                                    token_to_kv_pool_allocator=self._tree_allocator(kv), page_size=page_size,
                                    eviction_policy=eviction_policy,
                                    tree_components=(sg.ComponentType.FULL, *(getattr(sg.ComponentType, c) for c in self.components)),
                                    tree_core_backend=backend, **self._params_extra())
        self.cache = sg.UnifiedRadixCache(params)
        core = type(self.cache.tree_core).__name__
        want = {"python": "UnifiedTreeCore", "rust": "RustUnifiedTreeCore"}[backend]
        if core != want:
            raise RuntimeError(f"asked for the {backend} tree core, SGLang built {core}")
        self.backend = backend
        self.cache.init_hicache(args, params)
        self.cache.load_back_threshold = 1
        self._take_over(self.cache.cache_controller)

    # ---- what a hybrid tree (sglang_hicache_hybrid) overrides -----------------------------------

    components: tuple[str, ...] = ()
    """Tree components beside FULL (``ComponentType`` names)."""

    mem_layout = "layer_first"
    """``hicache_mem_layout`` (``direct`` refuses the default ``page_first``)."""

    def _prepare_args(self, args: Any) -> None:
        """Set what the tree needs on the server args before they are published."""

    def _device_kv_pool(self) -> Any:
        """The device KV pool ``init_hicache`` picks its strategy by (FULL: an ``MHATokenToKVPool``)."""
        return self.hx.MHATokenToKVPool(size=self.allocator.pool_size, page_size=self.page_size,
                                        dtype=self.sg.torch.float16, head_num=1, head_dim=1, layer_num=1, device="cpu",
                                        enable_memory_saver=False, enable_alt_stream=False)

    def _req_to_token_pool(self) -> Any:
        return None

    def _tree_allocator(self, kv: Any) -> Any:
        """The allocator the tree is given (FULL: the forwarding one, ``self.kv_allocator``)."""
        return self.kv_allocator

    def _params_extra(self) -> dict[str, Any]:
        return {}

    def _insert_extra(self, length: int) -> dict[str, Any]:
        """Extra ``InsertParams`` fields for an insert of ``length`` tokens (a hybrid tree's second value)."""
        return {}

    def _inserted(self, result: Any, tokens: Sequence[int], values: np.ndarray) -> None:
        """Called after each insert (and its backups' submission) with SGLang's ``InsertResult``."""

    # ---- the seams ---------------------------------------------------------------------------

    def _take_over(self, cc: Any) -> None:
        adapter, torch = self, self.sg.torch
        engine = cc.l2_transfer_engine
        host = cc.mem_pool_host.anchor_entry.host_pool
        self._full_host_pool = host
        original_write, original_load = cc.write, cc.load

        def write(device_indices, *args, **kwargs):
            adapter._write_device = device_indices
            try:
                return original_write(device_indices, *args, **kwargs)
            finally:
                adapter._write_device = None

        def load(host_indices, *args, **kwargs):
            adapter._load_host = host_indices
            try:
                return original_load(host_indices, *args, **kwargs)
            finally:
                adapter._load_host = None

        def host_alloc(need_size: int, **kwargs):
            if adapter._write_device is None:
                raise AssertionError("SGLang allocated host slots outside HybridCacheController.write")
            device = _sr._np(adapter._write_device)
            if need_size == 0 and len(device) == 0:  # a hybrid tree backing up a node's other component alone
                return torch.empty(0, dtype=torch.int64)
            if len(device) != need_size:
                raise AssertionError(f"host alloc of {need_size} for a write of {len(device)} device slots")
            transfer = adapter.controller.write(device)
            if transfer is None:
                return None
            for slot in transfer.host_slots:
                adapter._by_host[int(slot)] = transfer
            return torch.from_numpy(transfer.host_slots.copy())

        def host_free(indices) -> int:
            ids = _sr._np(indices)
            if len(ids):
                adapter.host_pool.free(ids)
            return len(ids)

        def submit(transfers, *args, **kwargs):
            return adapter._completion(transfers, kwargs.get("on_layer_done"), kwargs.get("transfer_layer_id_max", 0))

        original_backup = self.cache._execute_kv_backup

        def execute_kv_backup(node_id, device_value, *args, **kwargs):
            before = len(adapter.controller.log)  # a controller call (write, even a failed one) logs a line
            result = original_backup(node_id, device_value, *args, **kwargs)
            if result is None and len(adapter.controller.log) == before:
                adapter.controller.refused(_sr._np(device_value))  # SGLang's own room check said no
            return result

        self.cache._execute_kv_backup = execute_kv_backup
        cc.write, cc.load = write, load
        host.alloc, host.free = host_alloc, host_free
        host.available_size = lambda: adapter.host_pool.available()
        engine.submit_device_to_host = submit
        engine.submit_host_to_device = submit

    def _suite_load(self, need_size: int):
        host = _sr._np(self._load_host)
        if len(host) != need_size:
            raise AssertionError(f"device alloc of {need_size} for a load of {len(host)} host slots")
        transfer = self.controller.load(host)
        if transfer is None:
            return None
        for slot in transfer.device_slots:
            self._by_device[int(slot)] = transfer
        return self.sg.torch.from_numpy(transfer.device_slots.copy())

    def _completion(self, transfers: list[Any], on_layer_done: Any, layers: int) -> Any:
        """A TransferCompletion standing for the suite transfers whose slots this submission moves."""
        covered: dict[int, Transfer] = {}
        for l2 in transfers:
            if l2.host_pool is not self._full_host_pool:
                continue  # another component's pool (none in a FULL tree): not the suite's slots
            for slot in _sr._np(l2.host_indices):
                t = self._by_host.get(int(slot))
                if t is not None:
                    covered[t.number] = t
            for slot in _sr._np(l2.device_indices):
                t = self._by_device.get(int(slot))
                if t is not None:
                    covered[t.number] = t
        if on_layer_done is not None:  # the layer counter's events: the forward's wait is the suite's `finish`
            for layer in range(layers):
                on_layer_done(layer)
        event = _SuiteEvent(self, list(covered.values()))
        return self.hx.TransferCompletion(event, event, False)

    def _deliver_now(self, transfers: list[Transfer], why: str = "SGLang waited for") -> None:
        """SGLang blocks on a copy (or its stream finishes an earlier one): the suite's DMA finishes it now."""
        for transfer in transfers:
            if transfer.number in self.delivered or transfer not in self.controller.pending:
                continue
            self.controller.pending.remove(transfer)
            self.controller.log.append(f"#   {why} {transfer.kind} #{transfer.number}: completed now")
            self.controller.copy(transfer)
            self._mark(transfer)

    def _mark(self, transfer: Transfer) -> None:
        self.delivered.add(transfer.number)
        table = self._by_host if transfer.kind == "write" else self._by_device
        slots = transfer.host_slots if transfer.kind == "write" else transfer.device_slots
        for slot in slots:
            if table.get(int(slot)) is transfer:
                del table[int(slot)]

    # ---- the contract ------------------------------------------------------------------------

    def _key(self, tokens: Sequence[int]):
        token_ids = _sr._token_array(tokens)
        if self.salt_field is None:
            return self.sg.RadixKey(token_ids)
        # As the scheduler keys a request: SGLang's own Req (lora_id appended to extra_key) and
        # _req_radix_key (sglang_tenants' mapping of the namespace onto the request's fields).
        req = _request(token_ids, self._namespace, self.salt_field)
        key = _st._load().req_radix_key(self.cache, req, token_ids)
        self._extra_key = key.extra_key
        return key

    def _in(self, namespace: Any, call: Any) -> Any:
        """``call`` under ``namespace`` (a namespaced factory; refused before anything changes when
        no request can carry it)."""
        if self.salt_field is None:
            if namespace is not None:
                raise ValueError(f"namespace={namespace!r} for a factory without namespaces (it is never sent one)")
            return call()
        request_fields(namespace)
        self._namespace = namespace
        try:
            return call()
        finally:
            self._namespace = None

    def _handle(self, node: Any) -> Any:
        roots = (self.cache.root_node_handle(), self.cache.root_node_handle(self._extra_key))
        return _sr.ROOT if node in roots else node

    def _node(self, handle: Any) -> Any:
        return self.cache.root_node_handle() if handle is _sr.ROOT else handle

    def match_prefix(self, tokens: Sequence[int], namespace: Any = None, priority: int = 0) -> TierMatch:
        """``priority`` is the request's; SGLang's match reads none (``MatchPrefixParams`` has no field)."""
        return self._in(namespace, lambda: self._match_prefix(tokens))

    def _match_prefix(self, tokens: Sequence[int]) -> TierMatch:
        result = self.cache.match_prefix(self.sg.MatchPrefixParams(key=self._key(tokens)))
        values = _sr._np(self.cache.path_device_indices(result.last_device_node))
        host_length = int(result.host_hit_length)
        device_handle = self._handle(result.last_device_node)
        host_handle = self._handle(result.last_host_node) if host_length else device_handle
        return TierMatch(values, device_handle, host_length, host_handle)

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, Any]:
        node = self._node(host_handle)
        self.cache.load_back(node, mem_quota=None)
        self.cache.ready_to_load_host_cache()
        last = self._device_ancestor(node)
        return _sr._np(self.cache.path_device_indices(last)), self._handle(last)

    def _device_ancestor(self, node_id: Any) -> Any:
        """The deepest node on root..node_id whose FULL KV is on device (loaded, or loading)."""
        last = self.cache.root_node_handle()
        for info in self.cache.tree_core.collect_path_info([node_id])[0]:
            if info.full_value_len is None:
                break
            last = info.node_id
        return last

    def insert(self, tokens: Sequence[int], values: Any, namespace: Any = None, priority: int = 0) -> int:
        """``priority`` goes to ``InsertParams.priority`` (the priority policy's key), as the scheduler sends a request's."""
        return self._in(namespace, lambda: self._insert(tokens, values, priority))

    def _insert(self, tokens: Sequence[int], values: Any, priority: int) -> int:
        key = self._key(tokens)
        arr = np.asarray(values)
        if arr.ndim != 1 or len(arr) != len(key):
            raise ValueError(f"values has {len(arr)} slots for {len(key)} tokens")
        value = self.sg.torch.from_numpy(arr.astype(np.int64, copy=True))
        result = self.cache.insert(self.sg.InsertParams(key=key, value=value, prev_prefix_len=len(key),
                                                        track_adopted_ranges=True, priority=int(priority),
                                                        **self._insert_extra(len(key))))
        self.cache.flush_pending_backups()
        self._inserted(result, tokens, arr)
        return self._on_device_before(int(result.prefix_len), (result.adopted_ranges or {}).get(self.sg.ComponentType.FULL))

    @staticmethod
    def _on_device_before(prefix_len: int, adopted: list[tuple[int, int]] | None) -> int:
        """The contract's ``prefix_len`` (tokens on device before the insert). SGLang's counts the
        host-only nodes the insert restored from the caller's slots too; ``adopted_ranges`` says
        which of the caller's slots the tree took (restored nodes and the new tail). On a
        prefix-closed device path that is one run, starting where the device part ended."""
        if not adopted:
            return prefix_len
        start = adopted[0][0]
        if len(adopted) != 1 or start > prefix_len:
            raise AssertionError(f"insert adopted caller slots at {adopted} with prefix_len {prefix_len}: not one run "
                                 "after the device part (the device path would have a gap)")
        return start

    def inc_lock_ref(self, handle: Any) -> None:
        if handle is _sr.ROOT:
            return
        receipt = self.cache.inc_lock_ref(handle).to_dec_params()
        self._receipts.setdefault(handle, []).append(receipt)

    def dec_lock_ref(self, handle: Any) -> None:
        if handle is _sr.ROOT:
            return
        stack = self._receipts.get(handle)
        receipt = stack[-1] if stack else self.sg.DecLockRefParams(node_id=handle)
        self.cache.dec_lock_ref(handle, receipt)
        if stack:
            stack.pop()

    def evict(self, num_tokens: int) -> int:
        result = self.cache.evict(self.sg.EvictParams(num_tokens=int(num_tokens)))
        return int(result.num_tokens_evicted)

    def evict_host(self, num_tokens: int) -> int:
        return int(self.cache.evict_host(int(num_tokens)))

    def evict_prefix(self, tokens: Sequence[int], namespace: Any = None) -> int:
        raise NotImplementedError("SGLang's HiCache has no evict_prefix (quarantine)")

    def transfer_done(self, transfer: Transfer) -> None:
        """A completion. SGLang's copies of one kind run on one stream (``write_stream``,
        ``load_stream``), which finishes them in the order they were started, and SGLang acts on
        their acks in that order (``_count_ready_acks`` stops at the first not ready). So a
        completion the suite delivers before an earlier transfer of the same kind finishes that
        one first (``_deliver_now``, as a stream would), and SGLang acts on both now."""
        earlier = [t for t in self.controller.pending if t.kind == transfer.kind and t.number < transfer.number]
        self._deliver_now(earlier, f"its stream finished #{transfer.number} after")
        self._mark(transfer)
        self.cache.check_hicache_events()

    def device_size(self) -> int:
        return int(self.cache.total_size()[0])

    def host_size(self) -> int:
        if self.backend == "rust":  # no node walk in the Rust core: the host slots SGLang holds, less pending writes
            return len(self.host_pool.in_use) - len(self._by_host)
        held = 0
        for host in self._host_values():
            held += sum(1 for s in host if int(s) not in self._by_host)
        return held

    def _host_values(self) -> list[np.ndarray]:
        full = self.sg.ComponentType.FULL
        out, stack = [], list(self.cache.tree_core.root_node.children.values())
        while stack:
            node = stack.pop()
            host = node.component_data[full].host_value
            if host is not None and len(host):
                out.append(_sr._np(host))
            stack.extend(node.children.values())
        return out

    def __repr__(self) -> str:
        where = f", {self.eviction_policy}" + (f", namespaces in {self.salt_field}" if self.salt_field else "")
        return f"SGLangHiCache({self.backend}, {self.write_policy}{where})"


def _request(token_ids: Any, namespace: Any, salt_field: str) -> Any:
    """SGLang's ``Req`` for a request under ``namespace`` (``sglang_tenants``' mapping: LoRA id, salt)."""
    rq = _st._load()
    fields = request_fields(namespace)
    if fields.mm_hashes:
        raise ValueError(f"namespace {namespace!r}: SGLang keys multimodal items by their pad tokens (never sent)")
    return rq.Req(f"radixcheck-hicache-{next(_REQUEST_IDS)}", "", token_ids, rq.SamplingParams(), lora_id=fields.lora,
                  **{salt_field: fields.salt})


_REQUEST_IDS = itertools.count()

EVICTION_POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority", "slru")
"""SGLang's ``--radix-eviction-policy`` names the tier contract can judge (tlru reads node boundaries,
which the tier model does not keep: refused by ``TierCapabilities``)."""

UNSENT_NAMESPACES = ("empty", "multimodal", "decimal", "float", "bool")
"""As ``sglang_tenants``: what SGLang's request fields cannot carry (its module docstring says why)."""


def declared_policy(policy: str) -> Policy | None:
    """The tier contract's declaration of SGLang policy ``policy``: None (least recently used first,
    oracle 4t's default) for lru, else the named Policy with SGLang's meaning."""
    return None if policy == "lru" else policies.NAMED[policy]()


def _factory(name: str, backend: str, write_policies: tuple[str, ...], eviction_policy: str = "lru",
             salt_field: str | None = None, lifecycle: str = "off"):
    def factory(allocator: Any, host_pool: Any, controller: Any, page_size: int = 1,
                write_policy: str = "write_through") -> SGLangHiCache:
        cls = SGLangHiCache
        if lifecycle == "requests":  # SGLang's own request methods (sglang_hicache_requests)
            from radixcheck.properties.adapters.sglang_hicache_requests import SGLangHiCacheRequests as cls
        return cls(allocator, host_pool, controller, page_size, write_policy, backend=backend,
                   eviction_policy=eviction_policy, salt_field=salt_field)

    factory.__name__ = factory.__qualname__ = name
    namespaced = salt_field is not None
    factory.tier_capabilities = TierCapabilities(  # type: ignore[attr-defined]
        write_policies=write_policies, page_sizes=(1, 2, 4), supports_quarantine=False, write_back_order="leaf_first",
        namespaces=namespaced, unsent_namespaces=UNSENT_NAMESPACES if namespaced else (),
        eviction_policy=declared_policy(eviction_policy), lifecycle=lifecycle)
    where = f", namespaces in Req.{salt_field} + lora_id" if namespaced else ""
    where += f", running requests (lifecycle={lifecycle!r})" if lifecycle != "off" else ""
    factory.__doc__ = (f"radixcheck tier target {name}: UnifiedRadixCache ({backend} core, eviction_policy="
                       f"{eviction_policy!r}{where}) + init_hicache")
    return factory


FACTORIES: dict[str, Any] = {}
for _b in ("python", "rust"):
    FACTORIES[f"hicache_{_b}"] = _factory(f"hicache_{_b}", _b, POLICIES)
for _b in ("python", "rust"):
    for _p in EVICTION_POLICIES:
        FACTORIES[f"hicache_{_b}_{_p}_salted"] = _factory(f"hicache_{_b}_{_p}_salted", _b, POLICIES, _p, "cache_salt")
    FACTORIES[f"hicache_{_b}_lru_extra_key"] = _factory(f"hicache_{_b}_lru_extra_key", _b, POLICIES, "lru", "extra_key")
    # Every part at once, as SGLang serves: tenants, a policy, the host tier and running requests whose chunks
    # are published, retracted and aborted while transfers are in flight. FIFO and FILO meet no known order
    # finding; under the others #3 shows first (reports/waivers/sglang_hicache.txt waives it by `known:`).
    for _p in EVICTION_POLICIES:
        FACTORIES[f"hicache_{_b}_{_p}_salted_tree"] = _factory(f"hicache_{_b}_{_p}_salted_tree", _b, POLICIES, _p,
                                                              "cache_salt", "tree")
    # The same, with SGLang's own request methods run as its scheduler runs them (match_kv_cache,
    # init_load_back under PrefillAdder's pins, checkpoint_kv_cache, release_kv_cache):
    # sglang_hicache_requests. Plain (LRU, one namespace) and every part at once under FIFO.
    FACTORIES[f"hicache_{_b}_requests"] = _factory(f"hicache_{_b}_requests", _b, POLICIES, lifecycle="requests")
    FACTORIES[f"hicache_{_b}_fifo_salted_requests"] = _factory(f"hicache_{_b}_fifo_salted_requests", _b, POLICIES,
                                                              "fifo", "cache_salt", "requests")
del _b, _p
hicache_python = FACTORIES["hicache_python"]
hicache_rust = FACTORIES["hicache_rust"]

__getattr__ = factory_lookup(__name__, FACTORIES)  # `module:<factory>` names a factory (PEP 562)

__all__ = ["EVICTION_POLICIES", "FACTORIES", "SGLangHiCache", "UNSENT_NAMESPACES", "declared_policy", *FACTORIES]
