"""radixcheck tier adapters for SGLang's HiCache over hybrid trees (sglang 0.5.23, CPU): FULL+MAMBA.

What ``--enable-hierarchical-cache`` builds for a hybrid Mamba model in 0.5.23
-------------------------------------------------------------------------------
``UnifiedRadixCache`` with components FULL and MAMBA, then ``init_hicache``:
``hybrid_pool_assembler._select_strategy`` picks ``_MambaStrategy`` (a ``HybridLinearKVPool``
device pool and the components {FULL, MAMBA}), whose ``build_hybrid_mamba_stack`` adds a
``MambaPoolHost`` (the Mamba states' host pool) beside the KV host pool, both under one
``HybridCacheController``. Older SGLang called this tree ``HiMambaRadixCache``.

The factories (``factory(allocator, host_pool, controller, page_size, write_policy)``)
-------------------------------------------------------------------------------------
``hicache_mamba_{python,rust}``
    That tree over either core, with ``hicache_write_policy`` = the suite's ``write_policy``
    (``write_through``, ``write_through_selective``, ``write_back``). Page size 1 only:
    ``MambaComponent`` asserts ``page_size == 1`` unless the mamba extra buffer is on.

How it is run on CPU (on top of ``sglang_hicache``'s seams, which it inherits)
-------------------------------------------------------------------------------
* The device pool is SGLang's own ``HybridLinearKVPool`` (one full-attention layer of one head of
  width 1, over the CPU ``MambaPool`` of a real ``HybridReqToTokenPool``: a one-layer Mamba2 state
  of a few elements per slot, as ``sglang_trees``' Mamba adapter builds). With a stand-in device
  pool ``_select_strategy`` finds no strategy (the round before this one stopped there).
* ``hicache_mem_layout="page_first_direct"``: ``MambaPoolHost`` only supports ``page_first_direct``
  (``build_hybrid_mamba_stack`` says so; ``layer_first`` is refused by its constructor). The KV
  host pool takes the same layout with the ``direct`` io backend.
* ``hicache_mamba_*`` declare ``TierCapabilities(second_pool=StatePool())``: every insert carries
  the suite's ``state=`` value, and ``states(handle)`` reports SGLang's own Mamba state of each
  page, so oracle 20 judges the states through backup and load-back. Every cached request end
  carries a state in SGLang (``insert`` asserts a ``mamba_value``): each insert gets a slot of
  SGLang's device ``MambaPool`` from a private slot allocator (``mamba_allocator`` forwards to it:
  the tree's frees and its load-back allocations land there), and the adapter writes the suite's
  value into that slot's temporal state (two float32 elements, exact, and a "named" flag).
  ``states`` reads the value back from the node's device slot, or, when the node's state is on
  host only, from SGLang's ``MambaPoolHost`` buffer at the slot SGLang allocated in the node's
  write (noted as it passes: the Rust core has no node lookup). A node's state belongs to its last
  token; the other pages report -1.
* A load-back restores the Mamba state of its target node only (``MambaComponent.prepare_load_back``:
  "A match consumes only best_match_node's mamba state"), so ``hicache_mamba_*`` declare
  ``state_load_back="target"``: the other nodes it loads keep their state on host, and SGLang's
  device match ends before them (the tier contract's "A load-back that restores only its target's
  state").
* SGLang's match stops at the deepest node holding a state, and the tier contract's match answers
  every cached token, so the adapter also caches every shorter prefix of a request with a state of
  its own, written as *none* (read back as -1, as the suite expects where no insert ended). When a
  later insert ends where such a state is (``mamba_exist``: SGLang keeps its own), that state
  stands for the request's (the state after the same tokens) and takes its value.
* The Mamba states' copies: SGLang's ``direct`` copy kernels are ``sgl_kernel``'s (none on CPU),
  so each submitted transfer of the ``MambaPoolHost`` is copied by the adapter at submission,
  between SGLang's own device and host buffers at the indices SGLang chose (temporal and conv
  states, every layer). What moves and when stays SGLang's; the KV is the suite's (its host slots,
  its transfer engine, as in ``sglang_hicache``).
* ``hicache_swa_*`` declare the window (``TierCapabilities(second_pool=SlidingWindow(4))``, oracle
  20w and the resumable tier match): an insert's ``window=`` gives SWA peers (slots of SGLang's own
  SWA allocator) to the new tokens inside the request's window only, and says where it starts
  (``component_evicted_seqlens[SWA]``, SGLang's ``swa_evicted_seqlen``); the adapter notes the
  suite's window value per SWA slot and copies it at SGLang's indices on each SWA transfer it
  submits (as for the Mamba states); ``windows(handle)`` reads each node's SWA device slots.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from radixcheck.properties.adapters import factory_lookup
from radixcheck.properties.adapters import sglang_hicache as _hc
from radixcheck.properties.adapters import sglang_trees as _trees
from radixcheck.properties.cache.contract import SlidingWindow, SlotAllocator, StatePool
from radixcheck.properties.tiers.contract import TierCapabilities, TierMatch

PIP_REQUIREMENTS: list[str] = []
"""No packages beyond the audit environment's."""

_STATES = 1 << 12
"""The private state pool's least size. It is at least the device pool's too: every cached token
boundary is a request end with a state of its own (``_inserted``), so the tier production world's
~37,000 device slots need as many states (4,096 alone ran out there: a false crash)."""


class _Polling(_hc.SGLangHiCache):
    """What both hybrid trees add to ``sglang_hicache``'s seams: the scheduler's per-step poll."""

    def _poll(self) -> None:
        """The scheduler polls ``check_hicache_events`` every step. The FULL adapter polls after each
        completion the suite delivers; here SGLang also makes copies that move no KV slot (a node's
        Mamba state alone: a 0-slot KV write), whose completion the suite never delivers (it copies
        no suite slot), so the adapter polls after each call that can start one too. Without it
        such a write kept its node locked for good (never evicted)."""
        self._own_copies_first()
        self.cache.check_hicache_events()

    def _own_copies_first(self) -> None:
        """SGLang acts on its write acks in order (``UnifiedRadixCache.writing_check``:
        ``_count_ready_acks`` stops at the first not ready), as one stream finishes them. A copy
        that moves no suite slot (a node's Mamba state alone) is made by the adapter at its
        submission, so it is done; but queued behind a suite write still in flight, its ack waits
        for that write, and its node stays locked (an in-flight write) while the tier model, which
        sees only the suite's transfers, judges it unlocked: an ``evict`` then stopped short at it (a
        false "4 eviction amount"). Such a done copy is acted on now, ahead of the suite writes not
        yet done (as if on a stream of its own); the order of the suite's own acks is unchanged."""
        queue = self.cache.cache_controller.ack_write_queue
        waiting = next((i for i, ack in enumerate(queue) if not ack.finish_event.query()), None)
        if waiting is None:
            return
        own = [ack for ack in queue[waiting:] if isinstance(ack.finish_event, _hc._SuiteEvent)
               and not ack.finish_event.transfers]
        if own:
            queue[waiting:] = own + [ack for ack in queue[waiting:] if not any(ack is o for o in own)]

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, Any]:
        result = super().load_back(host_handle)
        self._poll()
        return result

    def evict(self, num_tokens: int) -> int:
        evicted = super().evict(num_tokens)
        self._poll()
        return evicted

    def _inserted(self, result: Any, tokens: Any, values: np.ndarray) -> None:
        self._poll()

    def transfer_done(self, transfer: Any) -> None:
        """The poll that consumes a write's ack can start a state-only copy (the ``M1`` fix backs up
        the state a node gained while its write was in flight), which locks the node until the next
        poll; poll again so that copy is done before the suite's next call, as after an insert."""
        super().transfer_done(transfer)
        self._poll()


MAMBA_CONVERSATION_TURNS = 300
"""The Mamba rows' production conversation (``TierCapabilities.conversation_turns``). ``_inserted``
re-inserts every shorter prefix of each request, so a conversation of ``T`` turns costs SGLang
``T**2 / 2`` inserts walking up to ``T`` nodes: ``T**3 / 6`` walk steps (measured: 0.4, 2.4, 17 s of
CPU at 50, 100, 200 turns; 1,200 would take more than an hour). The same tree core meets 1,200 turns
in the FULL rows (``sglang_hicache``)."""

_SCALE = 1 << 15
"""A state value is written as two float32 elements of the slot's temporal state (each exact)."""


class SGLangHiCacheMamba(_Polling):
    """``UnifiedRadixCache`` FULL+MAMBA + ``init_hicache`` (``_MambaStrategy``), the KV transfers and
    host slots the suite's; each request end's Mamba state a slot of SGLang's own ``MambaPool``
    (its slot ids from a private allocator) holding the suite's state value, which SGLang's own
    copies move to and from its ``MambaPoolHost`` (the tier contract's ``StatePool``, oracle 20)."""

    components = ("MAMBA",)
    mem_layout = "page_first_direct"

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 backend: str = "python") -> None:
        _trees._page_one(page_size, "HiCache over UnifiedRadixCache FULL+MAMBA")
        self.state_slots = SlotAllocator(max(_STATES, allocator.pool_size), seed=2, churned=False)
        self._state_value: int | None = None  # the suite's state= of the insert running now (its first slot only)
        super().__init__(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    # ---- the state values, in SGLang's own Mamba buffers ------------------------------------------

    def _write_state(self, slot: int, value: int | None) -> None:
        """Slot ``slot`` of the device ``MambaPool`` holds ``value`` (None: a state the suite never
        named, one the adapter cached for a shorter prefix: read back as -1)."""
        temporal = self.req_pool.mamba_pool.mamba_cache.temporal  # (layers, slots, heads, dim, state), float32
        hi, lo, named = (0, 0, 0.0) if value is None else (int(value) // _SCALE, int(value) % _SCALE, 1.0)
        temporal[0, slot, 0, 0, 0], temporal[0, slot, 0, 0, 1], temporal[0, slot, 0, 1, 0] = float(hi), float(lo), named

    @staticmethod
    def _read(state: Any) -> int:
        """The value a slot's temporal state (``[heads, dim, state]`` of one layer) holds, -1 for none."""
        if float(state[0, 1, 0]) != 1.0:
            return -1
        return int(float(state[0, 0, 0])) * _SCALE + int(float(state[0, 0, 1]))

    def _node_state(self, node_id: Any) -> int:
        """The state value of SGLang node ``node_id``'s Mamba state: its device slot's, or, when it is on host
        only, its host slot's (SGLang's ``MambaPoolHost`` buffer, as its own copy left it)."""
        mamba = self.sg.ComponentType.MAMBA
        core = self.cache.tree_core
        device = core.get_component_device_value(node_id, mamba)
        if device is not None and len(device):
            return self._read(self.req_pool.mamba_pool.mamba_cache.temporal[0, int(device[0])])
        if core.component_has_host_value_only(node_id, mamba):
            host = self._state_host.get(node_id)
            if host is None:
                raise AssertionError(f"node {node_id}'s Mamba state is on host, in a slot no write of it allocated")
            return self._read(self._mamba_host_pool.temporal_buffer[host, 0, 0])  # page_first_direct: (slot, layer, 1, ...)
        return -1

    def states(self, handle: Any) -> list[int]:
        """One value per page (token) of root..handle: a node's state belongs to its last token."""
        if handle is _hc._sr.ROOT:
            return []
        out: list[int] = []
        for info in self.cache.tree_core.collect_path_info([self._node(handle)])[0]:
            out += [-1] * (info.path_end - info.path_start - 1) + [self._node_state(info.node_id)]
        return out

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0, state: int | None = None) -> int:
        self._state_value = state
        try:
            return super().insert(tokens, values, namespace, priority)
        finally:
            self._state_value = None

    def _take_over(self, cc: Any) -> None:
        """The FULL seams, and the Mamba states' copies: SGLang's ``direct`` copy kernels are
        ``sgl_kernel``'s (none on CPU), so the adapter's engine copies each submitted transfer of the
        ``MambaPoolHost`` at once, between SGLang's own buffers at the indices SGLang gave (the
        temporal and conv states of every layer); SGLang still decides what moves and when."""
        super()._take_over(cc)
        engine = cc.l2_transfer_engine
        full = self._full_host_pool
        self._mamba_host_pool = next(e.host_pool for e in cc.mem_pool_host.entries if e.host_pool is not full)
        to_host, to_device = engine.submit_device_to_host, engine.submit_host_to_device

        def submit_device_to_host(transfers, *args, **kwargs):
            for t in transfers:
                if t.host_pool is not full:
                    self._copy_states(t, to_host=True)
            return to_host(transfers, *args, **kwargs)

        def submit_host_to_device(transfers, *args, **kwargs):
            for t in transfers:
                if t.host_pool is not full:
                    self._copy_states(t, to_host=False)
            return to_device(transfers, *args, **kwargs)

        engine.submit_device_to_host, engine.submit_host_to_device = submit_device_to_host, submit_host_to_device

        # Which host slot holds a node's state: noted as SGLang allocates it inside the node's write
        # (the Rust core has no node lookup to read a node's host value: node_by_id is not ported).
        self._state_host: dict[Any, int] = {}  # SGLang node id -> its state's MambaPoolHost slot
        self._host_owner: dict[int, Any] = {}  # a MambaPoolHost slot -> the node whose write allocated it last
        self._writing_node: Any = None
        write, alloc = cc.write, self._mamba_host_pool.alloc

        def write_noting(device_indices, *args, **kwargs):
            self._writing_node = kwargs.get("node_id")
            try:
                return write(device_indices, *args, **kwargs)
            finally:
                self._writing_node = None

        def alloc_noting(need_size: int, *args, **kwargs):
            got = alloc(need_size, *args, **kwargs)
            if got is not None and len(got) and self._writing_node is not None:
                self._state_host[self._writing_node] = int(got[0])
                self._host_owner[int(got[0])] = self._writing_node
            return got

        cc.write, self._mamba_host_pool.alloc = write_noting, alloc_noting

    def _copy_states(self, transfer: Any, to_host: bool) -> None:
        """Copy the Mamba states of one transfer: device ``MambaPool`` ``[layer, slot, ...]`` and host
        ``MambaPoolHost`` (``page_first_direct``: ``[slot, layer, 1, ...]``)."""
        host_pool, cache = transfer.host_pool, self.req_pool.mamba_pool.mamba_cache
        host = transfer.host_indices.to(self.sg.torch.int64)
        device = transfer.device_indices.to(self.sg.torch.int64)
        pairs = [(host_pool.temporal_buffer, cache.temporal), *zip(host_pool.conv_buffer, cache.conv, strict=True)]
        for host_buffer, device_buffer in pairs:
            for layer in range(device_buffer.shape[0]):
                if to_host:
                    host_buffer[host, layer, 0] = device_buffer[layer, device]
                else:
                    device_buffer[layer, device] = host_buffer[host, layer, 0]

    def _prepare_args(self, args: Any) -> None:
        args._mamba_cache_chunk_size = 64  # MambaComponent reads it at construction (sglang_trees does the same)

    def _req_to_token_pool(self) -> Any:
        tx = _trees._load()
        shape = tx.Mamba2StateShape.create(tp_world_size=1, **_trees._MAMBA_SHAPE)
        self.req_pool = tx.HybridReqToTokenPool(
            size=1, mamba_size=self.state_slots.pool_size, mamba_spec_state_size=1, max_context_len=8, device="cpu",
            enable_memory_saver=False, cache_params=tx.Mamba2CacheParams(shape=shape, layers=[0]),
            mamba_layer_ids=[0], enable_mamba_extra_buffer=False)
        self.req_pool.mamba_allocator = _trees._ForwardingStates(self.state_slots)
        return self.req_pool

    def _device_kv_pool(self) -> Any:
        from sglang.srt.mem_cache.memory_pool import HybridLinearKVPool

        if not hasattr(self, "req_pool"):
            self._req_to_token_pool()
        return HybridLinearKVPool(size=self.allocator.pool_size, dtype=self.sg.torch.float16, page_size=self.page_size,
                                  head_num=1, head_dim=1, full_attention_layer_ids=[1], device="cpu",
                                  mamba_pool=self.req_pool.mamba_pool)

    def _insert_extra(self, length: int) -> dict[str, Any]:
        self._state = self.state_slots.alloc(1)
        value, self._state_value = self._state_value, None  # the request end's own state; a shorter prefix's has none
        self._named = value
        self._write_state(int(self._state[0]), value)
        return {"mamba_value": self.sg.torch.from_numpy(np.asarray(self._state, dtype=np.int64))}

    def _inserted(self, result: Any, tokens: Any, values: np.ndarray) -> None:
        """Free the request's state when the tree kept its own (``mamba_exist``: the scheduler frees
        it then), then cache every shorter prefix of the request with a state of its own: SGLang's
        match stops at the deepest node holding a state, and the plain tier contract's match
        answers every cached token, so each token boundary is made a request end (as a chunked
        prefill checkpoints its state at every chunk, with chunks of one token)."""
        if result.mamba_exist:
            self.state_slots.free(self._state)
            self._name_existing(result.last_device_node, len(tokens))
        self._name_host_copy(result.last_device_node, len(tokens))
        if result.last_device_node is None or len(tokens) < 2:
            return
        path = self.cache.path_device_indices(result.last_device_node)
        on_host = self._host_only_states(result.last_device_node)
        for end in range(len(tokens) - 1, 0, -1):
            key = self._key(list(tokens)[:end])
            self._state_value = on_host.get(end)  # None: no state there, the prefix's state is unnamed
            again = self.cache.insert(self.sg.InsertParams(key=key, value=path[:end].clone(), prev_prefix_len=end,
                                                           **self._insert_extra(end)))
            self.cache.flush_pending_backups()
            if again.mamba_exist:
                self.state_slots.free(self._state)
        self._poll()

    def _host_only_states(self, node: Any) -> dict[int, int]:
        """The values of the states on root..``node`` that SGLang holds on host only, by the prefix length
        they end. The adapter's insert of such a prefix gives that node a fresh device state, which SGLang
        attaches (its device copy is gone); that state is the state after the same tokens, so it carries
        the host copy's value. Written as *none* it read back -1 where the suite had named a state: a
        false oracle-20 finding (``reports/repro/sglang_hicache_mamba_state_reads_none.py``)."""
        core, mamba = self.cache.tree_core, self.sg.ComponentType.MAMBA
        held = {info.path_end: self._node_state(info.node_id) for info in core.collect_path_info([node])[0]
                if core.component_has_host_value_only(info.node_id, mamba)}
        return {end: value for end, value in held.items() if value != -1}

    def _name_existing(self, node: Any, length: int) -> None:
        """The tree kept its own state where the request ends (``mamba_exist``). If that is a state the
        adapter cached for a shorter prefix (none named), it stands for this very state (the state
        after the same tokens), so it now holds the request's value. A state the suite named is left
        as it is (the contract: the same value)."""
        if self._named is None or node is None:
            return
        info = self.cache.tree_core.collect_path_info([node])[0]
        device = self.cache.tree_core.get_component_device_value(node, self.sg.ComponentType.MAMBA)
        if info and info[-1].path_end == length and device is not None and len(device) and self._node_state(node) == -1:
            self._write_state(int(device[0]), self._named)

    def _name_host_copy(self, node: Any, length: int) -> None:
        """The insert named the state where the request ends; if that node's host copy holds a state the
        adapter cached for a shorter prefix (none named), it is the state after the same tokens (SGLang
        keeps it: the node is backed up already), so it now holds the request's value too. Left unnamed, it
        read back -1 once the node went to host only, where the suite had named a state: a false oracle-20
        finding (session 62's ``FIX=M1`` audit: serve ``[0]*6``, evict, re-insert ``[0]*4``, evict)."""
        if self._named is None or node is None:
            return
        slot = self._state_host.get(node)
        info = self.cache.tree_core.collect_path_info([node])[0]
        if slot is None or self._host_owner.get(slot) != node or not info or info[-1].path_end != length:
            return
        host = self._mamba_host_pool.temporal_buffer[slot, 0, 0]  # page_first_direct: (slot, layer, 1, ...)
        if self._read(host) == -1:
            hi, lo = int(self._named) // _SCALE, int(self._named) % _SCALE
            host[0, 0, 0], host[0, 0, 1], host[0, 1, 0] = float(hi), float(lo), 1.0

    def __repr__(self) -> str:
        return f"SGLangHiCacheMamba({self.backend}, {self.write_policy})"


_WINDOW_SLOTS = 1 << 14
"""The private window pool's size (SGLang's own SWA allocator side; never judged)."""


class SGLangHiCacheSWA(_Polling):
    """``UnifiedRadixCache`` FULL+SWA + ``init_hicache`` (``_SwaStrategy``) over SGLang's own
    ``SWAKVPool`` and ``SWATokenToKVPoolAllocator``, whose FULL side forwards to the suite (the
    KV transfers and host slots the suite's, as in ``sglang_hicache``) and whose SWA side is
    SGLang's own allocator. The window is declared (``second_pool=SlidingWindow(SLIDING_WINDOW)``,
    oracle 20w and the resumable tier match): an insert's ``window=`` says which new tokens keep
    their SWA KV (a ``-1`` is a token the request freed: ``swa_evicted_seqlen``), and each SWA slot
    SGLang holds, on device or host, carries the suite's window value of its token."""

    components = ("SWA",)

    def __init__(self, allocator: Any, host_pool: Any, controller: Any, page_size: int, write_policy: str,
                 backend: str = "python") -> None:
        _trees._page_one(page_size, "HiCache over UnifiedRadixCache FULL+SWA")
        self._device_window: dict[int, int] = {}  # SGLang's SWA device slot -> the window value it holds
        self._host_window: dict[int, int] = {}  # SGLang's SWA host slot -> the window value its copy holds
        self._evicted_seqlen = 0  # the insert running now: its swa_evicted_seqlen
        super().__init__(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    def _device_kv_pool(self) -> Any:
        from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

        return SWAKVPool(size=self.allocator.pool_size, size_swa=_WINDOW_SLOTS, page_size=self.page_size,
                         dtype=self.sg.torch.float16, head_num=1, head_dim=1, swa_attention_layer_ids=[0],
                         full_attention_layer_ids=[1], device="cpu", enable_memory_saver=False)

    def _tree_allocator(self, kv: Any) -> Any:
        from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator

        swa = SWATokenToKVPoolAllocator(self.allocator.pool_size, _WINDOW_SLOTS, self.page_size, self.sg.torch.int64,
                                        "cpu", kv, False)
        swa.full_attn_allocator = self.kv_allocator  # FULL slots: the suite's (and a load's, the suite controller's)
        self.swa = swa
        return swa

    def _params_extra(self) -> dict[str, Any]:
        return {"sliding_window_size": _trees.SLIDING_WINDOW}

    def _insert_extra(self, length: int) -> dict[str, Any]:
        return {"component_evicted_seqlens": {self.sg.ComponentType.SWA: self._evicted_seqlen}}

    def insert(self, tokens: Any, values: Any, namespace: Any = None, priority: int = 0, window: Any = None) -> int:
        if window is None:
            raise TypeError("this factory declares a sliding window: every insert carries window=")
        self._window = [int(v) for v in np.asarray(window).reshape(-1)]
        try:
            return super().insert(tokens, values, namespace, priority)
        finally:
            self._window = []

    def _insert(self, tokens: Any, values: Any, priority: int) -> int:
        """Give the new tokens inside the request's window an SWA peer each, holding its window value
        (as the server's allocator pairs a FULL slot with one when it hands it out; the request has
        freed the peers of the tokens that slid out), and say where its window starts."""
        key = self._key(tokens)
        arr = np.asarray(values)
        self._evicted_seqlen = 0
        if arr.ndim == 1 and len(arr) == len(key) == len(self._window):
            cached = int(self.cache.tree_core.match_full_device_prefix(key)[0])  # read-only: no split, no recency
            new = self._window[cached:]
            dead = max((i + 1 for i, v in enumerate(new) if v < 0), default=0)  # the -1s come first (sent_window)
            self._evicted_seqlen = cached + dead if dead else 0
            if len(new) > dead:
                torch = self.sg.torch
                peers = self.swa.swa_attn_allocator.alloc(len(new) - dead)
                self.swa.set_full_to_swa_mapping(torch.from_numpy(arr[cached + dead :].astype(np.int64)), peers)
                for peer, value in zip(_hc._sr._np(peers), new[dead:], strict=True):
                    self._device_window[int(peer)] = value
        return super()._insert(tokens, values, priority)

    def _match_prefix(self, tokens: Sequence[int]) -> TierMatch:
        """The host part runs to SGLang's ``best_match_node``, the load-back target. SGLang's
        ``host_hit_length`` (``FullComponent.finalize_match_result_in_tree_core``) counts only the
        nodes there with a FULL host copy, so a node whose FULL KV is on device without one (its
        write failed, say) behind a host-only window is left out; its load-back still returns it
        (``init_load_back``: ``collect_full_device_indices(best_match_node, ...)``), and the
        scheduler takes that longer prefix ("A load can expose resident FULL behind host-only aux
        state", ``PrefillAdder.add_one_req``). The contract counts every token of the host part."""
        found = super()._match_prefix(tokens)
        if found.host_handle is found.device_handle:
            return found
        path = self.cache.tree_core.collect_path_info([self._node(found.host_handle)])[0]
        return dataclasses.replace(found, host_length=path[-1].path_end - len(found.device_values))

    def _device_ancestor(self, node_id: Any) -> Any:
        """The deepest node on root..node_id whose FULL KV is on device and whose window is too: a
        request resumes there. SGLang's device match stops where ``SWAComponent.create_match_validator``
        (``match_device_only``) says so, and ``UnifiedRadixCache.init_load_back`` keeps that node
        (``req.last_node``) when the load fails. The FULL-only path would hand the request tokens
        whose window nothing restored (a failed load moves no SWA either)."""
        last = self.cache.root_node_handle()
        live = float("inf")  # tokens since the last SWA tombstone, as the validator counts them
        for info in self.cache.tree_core.collect_path_info([node_id])[0]:
            if info.full_value_len is None:
                break
            if self.cache.tree_core.get_component_device_value(info.node_id, self.sg.ComponentType.SWA) is None:
                live = 0
                continue
            live += info.path_end - info.path_start
            if live >= _trees.SLIDING_WINDOW:
                last = info.node_id
        return last

    def windows(self, handle: Any) -> list[int]:
        """One value per token of root..handle: the window value its SWA device slot holds, -1 where
        SGLang holds none (a tombstone)."""
        if handle is _hc._sr.ROOT:
            return []
        out: list[int] = []
        for info in self.cache.tree_core.collect_path_info([self._node(handle)])[0]:
            swa = self.cache.tree_core.get_component_device_value(info.node_id, self.sg.ComponentType.SWA)
            span = info.path_end - info.path_start
            out += [-1] * span if swa is None else [self._device_window.get(int(k), -1) for k in _hc._sr._np(swa)]
        return out

    def _take_over(self, cc: Any) -> None:
        """The FULL seams, and the SWA copies: SGLang's copy kernels are ``sgl_kernel``'s (none on
        CPU), so each submitted transfer of the SWA host pool is copied by the adapter at once, at
        the indices SGLang gave (the window values those slots hold); SGLang decides what moves."""
        super()._take_over(cc)
        engine, full = cc.l2_transfer_engine, self._full_host_pool
        to_host, to_device = engine.submit_device_to_host, engine.submit_host_to_device

        def pairs(t: Any) -> Any:
            return zip(_hc._sr._np(t.device_indices), _hc._sr._np(t.host_indices), strict=True)

        def submit_device_to_host(transfers, *args, **kwargs):
            for t in transfers:
                if t.host_pool is not full:
                    for d, h in pairs(t):
                        self._host_window[int(h)] = self._device_window.get(int(d), -1)
            return to_host(transfers, *args, **kwargs)

        def submit_host_to_device(transfers, *args, **kwargs):
            for t in transfers:
                if t.host_pool is not full:
                    for d, h in pairs(t):
                        self._device_window[int(d)] = self._host_window.get(int(h), -1)
            return to_device(transfers, *args, **kwargs)

        engine.submit_device_to_host, engine.submit_host_to_device = submit_device_to_host, submit_host_to_device

    def __repr__(self) -> str:
        return f"SGLangHiCacheSWA({self.backend}, {self.write_policy})"


def _factory(name: str, backend: str, cls: type = SGLangHiCacheMamba):
    def factory(allocator: Any, host_pool: Any, controller: Any, page_size: int = 1,
                write_policy: str = "write_through") -> Any:
        return cls(allocator, host_pool, controller, page_size, write_policy, backend=backend)

    factory.__name__ = factory.__qualname__ = name
    factory.tier_capabilities = TierCapabilities(  # type: ignore[attr-defined]
        write_policies=_hc.POLICIES, page_sizes=(1,), supports_quarantine=False, write_back_order="leaf_first",
        second_pool=StatePool() if cls is SGLangHiCacheMamba else SlidingWindow(_trees.SLIDING_WINDOW),  # judged (20, 20w)
        state_load_back="target" if cls is SGLangHiCacheMamba else "path",  # MambaComponent.prepare_load_back
        conversation_turns=MAMBA_CONVERSATION_TURNS if cls is SGLangHiCacheMamba else None)  # _inserted: turns**3 steps
    tree = "FULL+MAMBA" if cls is SGLangHiCacheMamba else "FULL+SWA"
    factory.__doc__ = f"radixcheck tier target {name}: UnifiedRadixCache {tree} ({backend} core) + init_hicache"
    return factory


FACTORIES: dict[str, Any] = {f"hicache_mamba_{b}": _factory(f"hicache_mamba_{b}", b) for b in ("python", "rust")}
FACTORIES.update({f"hicache_swa_{b}": _factory(f"hicache_swa_{b}", b, SGLangHiCacheSWA) for b in ("python", "rust")})

__getattr__ = factory_lookup(__name__, FACTORIES)

__all__ = ["FACTORIES", "SGLangHiCacheMamba", "SGLangHiCacheSWA", *FACTORIES]
