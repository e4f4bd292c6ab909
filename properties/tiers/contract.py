"""The tier contract: what radixcheck expects of a radix cache with a host tier (SGLang's HiCache).

An extension of :mod:`radixcheck.properties.cache.contract` that a cache declares with a
``tier_capabilities`` attribute on its factory (a :class:`TierCapabilities`). The vocabulary is
the base contract's (token sequences, pages, slot ids, handles); what is new:

* Two pools, both the suite's. The *device pool* is the base contract's
  :class:`~radixcheck.properties.cache.contract.SlotAllocator`; the *host pool* is a
  :class:`HostPool`. The suite counts every slot of each, refuses a double free, and refuses to
  free a slot a transfer still reads or writes.
* A *transfer controller* (the suite's; SGLang's ``HiCacheController``) that moves one page or a
  run of pages between the pools. ``controller.write(device_slots)`` allocates host slots and
  starts a copy device -> host; ``controller.load(host_slots)`` allocates device slots and starts
  a copy host -> device. Each returns a :class:`Transfer`, or ``None`` when the allocation failed
  (the pool is full, or the suite says so). A transfer is *pending* until the suite delivers its
  completion, ``cache.transfer_done(transfer)``, exactly once, in whatever order the suite
  chooses. The copy happens at the completion: until then the source slots must stay as they
  are (not freed) and the destination slots hold nothing yet. A cache that looks at the host
  pool's room itself (``host_pool.available()``) and gives a backup up without asking reports it
  with ``controller.refused(device_slots)``: a failed allocation, accepted only when the pool
  is indeed too full.

The factory is called as::

    factory(allocator, host_pool, controller, page_size, write_policy) -> TieredCacheLike

Obligations (what the tier machine's oracles check)
---------------------------------------------------
* Every page of a cached prefix is on device, on host, or both; on both, the host copy is the
  same KV. The pages on device are a prefix-closed set (a page is on device only if its parent
  is), so a match is a device part followed by a host part.
* Backups go top-down: a page is backed up (``controller.write``) only when its parent is on host
  or its write is pending (the *backup chain* has no gap), so the host tier alone can always be
  loaded back. (Under ``write_back`` a cache may declare ``write_back_order="leaf_first"``: it
  writes the evicted leaf alone, and a parent that then leaves the device without a host copy
  takes its host-only subtree along.)
* A page counts as on host only once its write completed; a failed allocation never counts.
* ``write_through``: every inserted page is backed up at once (top-down, as far as allocations
  succeed); a page leaves the device without a host copy only when a backup on its chain failed.
  ``write_back``: a page is backed up when it is evicted from the device.
* A host slot is never freed while a write to it is pending or a load reads it; a device slot is
  never freed while a write reads it or a load fills it.
* A page that leaves both tiers takes everything cached below it along (its subtree's slots are
  freed in the same call): neither device nor host eviction orphans a subtree.
* A match counts as host only the pages after the device part up to the first page that is not
  on host; a load-back loads them in order and stops at the first it cannot load.
* A page whose load-back is pending is on device: from the ``controller.load`` that allocated its
  device slots, it counts in a match's device part and in ``device_size()`` (and, its host copy
  kept, in ``host_size()``), though its KV arrives only at the completion (a request reads it
  after its loads completed). A cache that counts it on host, or nowhere, until the load lands
  fails residency (``TierResidencyViolation``) or the sizes (``SlotViolation``).
* Under ``write_back``, a device leaf whose write-back an ``evict`` started stays on device, and
  counts there, until the write completes: a match's device part covers it and a request may lock
  it meanwhile. At the completion it may leave the device (its device slots freed, its host copy
  kept) only if no request holds a lock on it then; a leaf a request locked meanwhile stays on
  both tiers, an ordinary backed-up device page that a later ``evict`` moves to host with no new
  write. Freeing it under the lock is oracle 2's ``RefcountViolation`` (the mutant
  ``WriteBackIgnoresLock``). One that got a page below it on device meanwhile (an insert extended
  it) stays too, as the device pages are prefix-closed (``TierResidencyViolation``).
* Device and host slots are conserved separately: each pool's slots in use are exactly what the
  pages and the pending transfers hold (plus, on device, what callers hold).
* ``evict_prefix(tokens)`` removes the branch from both tiers: afterwards no match, device or
  host, reaches past the cut, exactly as if the cache had never seen the prefix.
* Device eviction takes the least recently used unlocked device leaf first (oracle 4t): each
  page an ``evict`` call frees, or under ``write_back`` whose write-back it starts, is no more
  recently used than any candidate it leaves.
* Host eviction takes the host-only leaves in the device tier's order (oracle 4h): the declared
  Policy's key, least recently used first by default, over the same statistics (a page keeps its
  last use, hits, priority and creation time on host; a load-back moves it, it does not make it
  new). A *host-only leaf* is a page with a completed host copy, no device copy and no child on
  either tier; it is a candidate while no request holds a lock on it. Each host-only page an
  ``evict_host`` call frees must be no hotter than every candidate it leaves at that moment (a
  parent whose last child went is a candidate from then on); keys that tie may go in any order.
  Freeing the host copy of a page still on device is no pick (SGLang's write-back reclaims those
  duplicates first). Why this rule: SGLang 0.5.23's ``UnifiedRadixCache.evict_host``
  (``mem_cache/unified_radix_cache.py``) drives ``UnifiedTreeCore.drive_host_eviction``
  (``mem_cache/unified_cache/unified_tree_core.py``), whose ``FullComponent.drive_host_eviction``
  (``mem_cache/unified_cache/components/full.py``) heap-orders the evictable host leaves by the
  tree's ``eviction_strategy.get_priority``, the same strategy as device eviction, and pushes a
  parent once it becomes a host leaf. Only the ``evict_host`` calls the suite makes are judged, not
  a host eviction a backup or a load-back makes inside another call.
* Each eviction frees what it was asked, no less and no more (the amount, oracles 4t and 4h:
  ``4 eviction amount`` and ``4h host eviction amount``). ``evict(n)`` counts the device tokens it
  frees and, under ``write_back``, the tokens of each device leaf whose write-back it starts (see
  ``evict`` below); ``evict_host(n)`` counts the host tokens it frees. The count reaches ``n``
  unless no candidate is left when the call returns (an unlocked device leaf with no transfer on
  or below it; an unlocked host-only leaf), and the call takes no step (a ``free`` call, a
  write-back start) once the count reached ``n``: the page, or the pages one step takes together,
  that reached ``n`` may go past it. Why this rule: SGLang 0.5.23's device walk
  (``UnifiedRadixCache._evict_components``, ``mem_cache/unified_radix_cache.py``) asks its tree
  core for the next leaf while the tracker is below the request (``_evict_device_next_node``) and
  its host walk (``FullComponent.drive_host_eviction``,
  ``mem_cache/unified_cache/components/full.py``) pops host leaves ``while tracker[ct] <
  num_tokens and heap``: each stops at the node that reached the request and goes on while a
  leaf is left. As in SGLang, only the calls the suite makes are judged.
* With ``namespaces=True``: each namespace is a cache of its own on both tiers, sharing the two
  pools and one eviction order. A match under N counts only N's device and host pages, and a
  load-back under N reads only N's host copies (oracle 10).
* With ``lifecycle="tree"``: running requests hold slots of their own beside the cached ones
  (counted by device conservation), publish chunks whose earlier backups may be pending, and a
  retract or an abort unlocks without waiting for its load-back or its write-backs. What a
  request held locked, a load-back filling or a write reading stays as it is until the transfer
  completes, whoever unlocks first; an abort leaves no lock behind (a page nobody holds is a
  candidate for eviction, oracle 4t) and frees no page another request holds (oracle 2).
  With ``lifecycle="requests"`` the same, done by the cache's own request methods: see "The
  request lifecycle on the tiers" below.
* With ``second_pool=StatePool()`` (a Mamba-like state per node; SGLang's ``HiMambaRadixCache``
  backs it up to host): see "A second pool on the tiers" below (oracle 20).
* With ``second_pool=SlidingWindow(window=W)`` (SWA KV beside the full KV; SGLang's HiCache over
  its SWA tree): see "A sliding window on the tiers" below (oracle 20w).

The methods (``TieredCacheLike``; with a second pool, ``TieredStateCacheLike`` or ``TieredWindowCacheLike``)
------------------------------------------------------------------------------------------------------
``match_prefix(tokens) -> TierMatch``
    ``device_values`` (slot ids of the longest prefix on device), ``device_handle`` (its last
    node), ``host_length`` (tokens after it on host, whole pages) and ``host_handle`` (the last of
    those nodes; the device handle when ``host_length == 0``). Moves nothing between tiers.
``load_back(host_handle) -> (values, handle)``
    Loads the host part of the path root..host_handle onto the device and returns the slot ids of
    the path's device prefix afterwards and its last node (with a window declared, a load that
    failed and moved nothing returns the device prefix a request resumes from: see "A sliding
    window on the tiers"). Pages whose load is pending count: a
    caller reads them only after their load completed. It may evict (device, and host when a
    write-back needs room) to make room, even while it loads: that nested eviction must leave
    the pages it is loading alone.
``insert(tokens, values) -> prefix_len``
    As the base contract; ``prefix_len`` counts the pages already on device. A page on host only
    takes the caller's new device slots (it is on both tiers again).
``inc_lock_ref(handle)`` / ``dec_lock_ref(handle)``
    As the base contract (a lock protects the device pages of the path).
``evict(num_tokens) -> freed``
    Frees device pages, least recently used unlocked device leaf first (a use is a
    ``match_prefix`` or an ``insert`` that covers the page, host part included; a leaf with a
    transfer in flight on it or on a page below it is not a candidate): to host when backed up,
    written back first under ``write_back`` (its device slots are then freed at the write's
    completion), dropped otherwise. Returns the device tokens freed during the call.

    *Write-back starts count toward* ``num_tokens``, *not toward the return value.* The call
    takes leaves until the tokens it freed plus the tokens whose write-back it started reach
    ``num_tokens`` (or no candidate is left); it returns only the tokens freed during the call (a
    page whose write is still pending is freed, and counted by nobody, at its completion). Why
    this rule: SGLang 0.5.23's HiCache (``UnifiedRadixCache`` with ``init_hicache``;
    ``hiradix_cache.py`` is gone) evicts in ``_evict_components``
    (``mem_cache/unified_radix_cache.py``): a leaf without a host copy is written back
    (``_execute_and_commit_kv_backup(..., write_back=True)``), the call waits for the write
    (``writing_check(write_back=True)``) and demotes the leaf (``_demote``), freeing its device
    slots and counting them then, and the walk stops once the count reaches ``num_tokens``. So
    each write-back it starts frees its page within the call and counts once; the HiRadixCache
    before the unified tree counted a write-back at its start (``num_evicted +=
    write_backup(x, write_back=True)``) and waited after its loop, with the same result. Here
    the suite delivers completions when it chooses, so a write can still be pending when ``evict``
    returns: a started write-back counts toward ``num_tokens`` as the tokens it will free (a
    cache that waits, as SGLang's does, has freed them already). What the suite judges of it:
    the order of every page freed and every write-back started (oracle 4t), the amount (a
    write-back it started and then freed counts once; ``4 eviction amount``) and the return value.
``evict_host(num_tokens) -> freed``
    Frees host copies of pages on host only, leaves first, in the device tier's order (the
    declared Policy's key, least recently used first by default; oracle 4h), until the host tokens
    it freed reach ``num_tokens`` or no host-only leaf is left (``4h host eviction amount``).
    Returns the host tokens freed.
``evict_prefix(tokens) -> removed``
    Quarantine on both tiers (the suite sends it only when no request holds a lock). Returns the
    tokens of every cached page at or below the cut, each page counted once whichever tiers it is
    on: a page on host only is removed too (its host copy freed) and counted, and so is a page
    whose write or load is pending (its slots are freed at that transfer's completion, not before:
    oracle 14). A page that had already left both tiers (dropped after its backup failed) is not
    counted; a cache that still held it fails (``FailedBackupViolation``), and any other count is a
    ``ReturnValueViolation``.
``transfer_done(transfer)``
    A completion, delivered by the suite.
``reset()`` (only with ``supports_reset=True``)
    Flush the cache, as an engine flushes it between runs (SGLang's ``Scheduler.flush_cache``
    calls ``HiRadixCache.reset``, which clears the host pool too): every device and host slot a
    cached page holds is freed, and the cache is empty (both sizes 0) and usable. The suite sends
    it with no request running and no transfer in flight, at the end of the production world (as
    the plain production world's ``teardown``) and now and then in the small worlds, where traffic
    follows it (the tier machine's ``reset``); a slot left allocated on either tier is a leak
    (oracle 3 there), and what the flush left behind shows in the requests after it.
``device_size()``, ``host_size()``
    Tokens on device (a page whose load is pending included), and tokens on host (completed
    copies), of cached pages.

A second pool on the tiers
--------------------------
A target declares ``TierCapabilities(second_pool=StatePool())`` (the base contract's
:class:`~radixcheck.properties.cache.contract.StatePool`, as ``Capabilities.second_pool`` declares
it): one recurrent state per cached request end, kept beside the KV on whichever tier the page
is. On a tier the suite owns no state pool: a state is a *value* (an int the suite makes from the
prefix it ends, each namespace's its own), and what is judged is that the value survives the
moves. The factory is called as before; the calls change as follows (the Protocol
``TieredStateCacheLike`` has them, for a type checker):

``insert(tokens, values, state=s) -> prefix_len``
    ``s`` is the state after the last of ``tokens``. When ``tokens`` is non-empty and
    page-aligned, the page that ends at them keeps ``s`` as its state (if it has one, it is the
    same value). Otherwise the cache ignores it. Every insert carries ``state=``.
``states(handle) -> Sequence[int]``
    One entry per page of the path root..handle (a handle the suite holds locked, its loads
    completed): that page's state value, ``-1`` where none was inserted. It moves nothing.

The obligation (oracle 20 on the tiers, ``SecondValueViolation``): a page's state lives as long
as the page, on either tier. *The host copy of a page carries its state*: a write-back, or a
write-through backup, copies it with the KV (a state the page takes while its host copy exists
goes to host too), and *a load-back returns it*: once the load completed, ``states`` reports
exactly the values inserted for those tokens under that namespace, never another page's (its
parent's) nor another tenant's, and never ``-1`` for a page that had one. A page that leaves both
tiers takes its state along (a re-inserted page starts with none); host eviction of one page
touches no other page's state. The suite checks ``states`` of every request's handle when its
forward reads its prefix (after its loads completed). The state pool's own eviction
(``evict_states``) is not sent on a tier: a state here follows its page.

*A load-back that restores only its target's state* (``TierCapabilities(state_load_back="target")``):
a load-back brings to device the state of the page at the end of the path it loads (its target)
only; the other pages whose KV it loads keep their state on host (*parked*: KV on device, state on
host only), and so does every page of the path that was parked already. A request resumes only
from a state on device, so a match's device part ends at the deepest page of the device path whose
state is not parked (pages with no state inserted count as resumable: a cache that needs one keeps
its own there), and its host part runs from there to the end of the host pages as before: parked
pages included (their state is in their host copy), so a ``load_back`` of it restores the state at
its end. A parked page is resumable again once an insert covers it (the insert's caller brings the
state after each page it computed over) or a load-back ends at it; a page that leaves the device is
no longer parked (its state is where its host copy is). ``states`` still reports each page's value,
parked or not. A load that moved nothing may return the device pages up to where the request
resumes (its state load failed) or the whole device path (it restored the target's state). Why this
rule: SGLang 0.5.23's ``MambaComponent.prepare_load_back``
(``mem_cache/unified_cache/components/mamba.py``) allocates one state slot, for the load-back's
``best_match_node`` only ("A match consumes only best_match_node's mamba state"), and its match
validator accepts a node as the device match only where its Mamba state is on device. A cache that
restores the whole path's states declares ``"path"`` (the default); one that declares ``"target"``
and restores more, or less (not even the target's), fails the match (oracle 13).

A sliding window on the tiers
-----------------------------
A target declares ``TierCapabilities(second_pool=SlidingWindow(window=W))``: each cached token
may keep, beside its full KV, its sliding-window KV (SGLang's SWA pool), *live* or *tombstoned*
(none), as in the base contract's "A second pool". As for a state, the suite owns no window pool
on a tier: a token's window value is an int the suite makes from the token's KV (so it differs
from every other token's, and each namespace's), and what is judged is which tokens have it live
after the moves between the tiers. The calls change as follows (the Protocol
``TieredWindowCacheLike`` has ``insert(..., window=)`` and ``windows``, for a type checker):

``insert(tokens, values, window=w) -> prefix_len``
    ``w`` is an int64 array as long as ``tokens``: each token's window value, ``-1`` where it slid
    out of the inserting request's window (the suite sends live values for the last ``W`` tokens
    only: SGLang's ``swa_evicted_seqlen``). Every page the insert puts on device (a new page, or a
    page on host only that takes the caller's KV) takes the caller's ``w`` for its tokens; a page
    already on device keeps its own window values. Every insert carries ``window=``.
``windows(handle) -> Sequence[int]``
    One entry per token of the path root..handle (a handle the suite holds locked, its loads
    completed): that token's live window value on device, ``-1`` where it is tombstoned. It moves
    nothing.
``match_prefix(tokens) -> TierMatch``
    *Resumable*, on each tier (the base contract's window match, oracles 21 and 23): a request
    resumes only where the last ``min(W, L)`` tokens of its prefix have their window KV.

    - ``device_values`` end at the longest page-aligned ``L``, within the pages whose full KV is on
      device, whose last ``min(W, L)`` tokens have their window *live on device*. A token
      tombstoned on device limits the device part even where its host copy has the window.
    - The host part ends at the longest page-aligned ``L'``, within the pages whose full KV is on
      device or host, whose last ``min(W, L')`` tokens have their window live on device *or in
      their page's completed host copy*. Only a token tombstoned on both tiers (or whose page has
      no completed host copy) limits it.
    - ``host_length = L' - L`` and ``host_handle`` is the page at ``L'``: the host part may cross
      pages whose full KV is on device but whose window is tombstoned there. ``load_back`` of it
      loads the host-only pages and revives those windows from their host copies (the rule
      below), so the path root..``L'`` is then resumable on device.
    - A match uses (for eviction order) only the pages it answers, not the full-KV path beyond
      ``L'``. ``insert``'s ``prefix_len`` still counts every page whose full KV is on device (the
      caller frees its duplicates of the pages past its match), and those pages keep their own
      window values: an insert never revives a tombstone (``refills_tombstones`` is refused).

    Why this rule: SGLang 0.5.23's ``UnifiedTreeCore._match_prefix_helper``
    (``mem_cache/unified_cache/unified_tree_core.py``) walks the path with two sets of validators:
    the device ones give ``best_match_device_node`` (the device prefix) and the combined ones
    ``best_match_node`` (the load-back target). ``SWAComponent.create_match_validator``
    (``components/swa.py``) restarts its count of window tokens at a node whose SWA value is none
    (``match_device_only``: none on device; otherwise none on device and none on host) and
    accepts a node once the count since reaches ``sliding_window_size`` (a path with no
    tombstone is accepted throughout); ``FullComponent``'s validator accepts a node on device (or,
    combined, backed up). ``FullComponent.finalize_match_result_in_tree_core`` counts the host hit
    from ``best_match_node`` up to the device node, and ``SWAComponent.build_hicache_transfers``
    (``LOAD_BACK``) loads the host SWA of every node within one window of ``best_match_node`` whose
    SWA is not on device. SGLang judges whole nodes, the contract tokens; and SGLang's host hit
    counts the nodes with a full host copy only, where the contract counts every token of the host
    part (they differ only on a device page without a host copy inside the host part).

The obligation (oracle 20w, ``TierWindowViolation``):

* *A host copy carries the live window values of its page*: a write (back or through) copies
  each live window value of the page's tokens with their full KV, at its completion. *It may
  gain more later, each its own*: a token tombstoned in a completed host copy while its page
  holds it live on device may get that value in the host copy at any later time, with no
  transfer the suite sees (the cache chooses, and is then held to what it showed, as below).
  Why: SGLang 0.5.23 backs a node's SWA up alone into its existing host copy after a
  write-through insert onto it (``UnifiedTreeCore._should_backup_after_insert``, not a new leaf,
  ``node.backuped``, ``SWAComponent.needs_incremental_backup`` ->
  ``_collect_unbacked_swa_nodes_in_window``; ``UnifiedRadixCache._execute_kv_backup`` writes the
  SWA pool only).
* *A load-back restores window KV at the end of the path it loads*: after ``load_back(h)``
  returns the path root..handle of ``L`` tokens, a loaded page that holds one of the last
  ``min(W, L)`` tokens of that path (the pages a lock pins in the base contract) has its host
  copy's window values back on device. A page of those last ``min(W, L)`` tokens that was on
  device already takes its host copy's values where its own are tombstoned (SGLang loads the SWA
  of every node of the window whose SWA is not on device).
* *Further back it may restore, but only the host copy's own values*: on the pages of the path
  further back than those ``min(W, L)`` tokens (loaded, or on device already), each token whose
  device window is tombstoned comes back either tombstoned or with exactly the value its own
  page's completed host copy holds for it; the cache chooses, token by token, and is then held to
  what it showed (``windows`` reports it, a match resumes on it). Forbidden there, as everywhere:
  a live value where that host copy has none (a token tombstoned in it, or a page with no
  completed host copy: a value from nowhere), and any value other than the token's own (another
  token's, another page's, another tenant's). A token live on device keeps its value, and pages
  off the path are untouched.

  Why the relaxed rule: SGLang 0.5.23 restores whole nodes. ``SWAComponent.build_hicache_transfers``
  (``LOAD_BACK``, ``mem_cache/unified_cache/components/swa.py``) walks up from the load-back's
  ``best_match_node`` while fewer than ``sliding_window_size`` tokens are counted, and loads the
  whole ``host_value`` of each node on the way whose SWA is not on device; the first such node
  may reach far further back than the window. ``commit_hicache_transfer`` (``LOAD_BACK``) gives
  each node its own slice of the loaded SWA. The TODO in
  ``SWAComponent.finalize_match_result_in_tree_core`` says so ("load_back may currently restore a
  full host-tombstone segment whose length exceeds sliding_window_size"). The values are right;
  the cost is window memory no request resuming at the path's end reads, which the contract does
  not judge. A stricter cache (the reference, restoring only the window) conforms too.
* *A load-back that moved nothing resumes where the window is live*: when its load failed, it
  returns the device pages up to the longest page-aligned end whose last ``min(W, L)`` tokens
  are live on device (the device part of a match), which may be short of the full KV on device,
  and revives nothing. Why: SGLang 0.5.23's ``UnifiedRadixCache.init_load_back`` returns
  ``(0, req.last_node)`` when ``load_back`` fails: the request keeps its match's device node,
  whose window ``SWAComponent.create_match_validator(match_device_only=True)`` accepted.
* *A window host copy may outlive its page's KV host copy*: when the cache frees the KV host
  copy of a page whose device copy stays, that page's window host copy *may be kept*: from then
  on each value live in it may count or not, at each match anew (a match's host part may resume
  on it, or stop before it), and a load-back may revive from it as from a host copy (at the
  path's end, or further back under the relaxed rule); what it revives must be the token's own
  value, never another. A new write of the page's KV may leave it in place where the device has
  the window tombstoned (those values stay maybes, now in the new host copy). Why: under write-back, SGLang
  0.5.23 frees the full host copies of nodes whose KV is also on device when a backup needs host
  room (``UnifiedTreeCore.drive_host_eviction`` -> ``_reclaim_full_host_duplicates`` ->
  ``_release_full_host_duplicate``, ``mem_cache/unified_cache/unified_tree_core.py``: "Free only
  the Full host layer; aux host slices stay under their own pools' LRU"), and keeps the node's
  SWA host copy, which a later match rightly counts as resumable. The suite sees no free of a
  window host copy, so a kept one may go at any time: hence each match anew.
* A page that leaves the device takes its device window values along; a page that leaves both
  tiers is forgotten (cached again, it has only what its new insert gives it).

The suite checks ``windows`` of every request's handle when its forward reads its prefix (after
its loads completed). Why this rule: SGLang 0.5.23's ``SWAComponent``
(``mem_cache/unified_cache/components/swa.py``) backs up, with a written node, the SWA values of
the device-only nodes within one window of it (``build_hicache_transfers`` in the
``BACKUP_HOST`` phase, ``_collect_unbacked_swa_nodes_in_window``: where live window values are),
loads back only the host SWA values of the nodes within one window of the matched node
(``LOAD_BACK`` phase; ``commit_hicache_transfer`` sets them on device), and an insert that
un-evicts a host-only node rebuilds its SWA from the request's in-window slice
(``recover_after_unevict``). SGLang restores whole nodes (the relaxed rule above); the contract
judges pages.

Not judged on a tier: the window pool's own eviction (``evict_window`` is not sent: a window
value follows its page), its pins, and slot conservation of a window pool (a window value here
is a value, not a slot). ``SlidingWindow(refills_tombstones=True)``
or ``pins_whole_nodes=True`` is refused on a tier (not driven).

The request lifecycle on the tiers (``lifecycle="requests"``)
-------------------------------------------------------------
``lifecycle="tree"`` has the suite play the engine with the tier calls. ``"requests"`` has the
cache run its own request methods, as SGLang's HiCache does (in 0.5.23 ``UnifiedRadixCache`` +
``init_hicache``, driven by the scheduler's ``mem_cache/common.py``: ``match_kv_cache``,
``checkpoint_kv_cache``, ``release_kv_cache``; and the load-back it asks for after a match:
``UnifiedRadixCache.init_load_back``, from ``PrefillAdder.add_one_req``,
``managers/schedule_policy.py``, then ``ready_to_load_host_cache`` as the batch is built; the
adapter ``sglang_hicache:hicache_*_requests`` runs exactly these). The request is a
:class:`TierRequest`: the base contract's ``Request`` (``tokens``, ``namespace``, ``slots``,
``filled``, ``protected``, ``handle``; see its "The request lifecycle") plus its *host part*:
``host_length`` and ``host_handle`` (SGLang's ``req.host_hit_length`` and ``req.last_host_node``)
and ``priority``. The methods, each doing exactly what the ``"tree"`` steps do with the tier calls:

``match_req(req)``
    ``match_prefix(req.tokens)`` (under ``req.namespace``): ``req.slots`` the device part's slots,
    ``req.filled = req.protected = len(slots)``, ``req.handle`` its last node, and the host part:
    ``req.host_length`` and ``req.host_handle`` as ``TierMatch`` says. No lock; nothing moved.
``lock_req(req)``
    The admission: when ``req.host_length > 0``, load the host part back (``load_back(req.host_handle)``:
    the loads may stay in flight, the pages count as on device from then on), then lock the path's
    device prefix for the request. Afterwards ``req.slots[:req.filled]`` are that prefix's slots
    (loading pages included), ``req.filled = req.protected = len(...)``, ``req.handle`` its last
    node, locked; ``req.host_length = 0``. The suite sets ``req.host_length = 0`` before the call
    when it declines the load-back (SGLang's ``load_back_threshold``): then it only locks.
``cache_unfinished_req(req)``
    Publish ``req.tokens[:req.filled]`` (the request's row ``req.slots[:req.filled]``): insert it,
    free into the device pool the request's own copies of pages the tree already had
    (``slots[protected:prefix_len]``), match the page-aligned prefix again, lock its node, unlock
    ``req.handle``; then ``req.slots[:aligned]`` are the tree's slots, ``req.protected = aligned``
    and ``req.handle`` the new node. Backups of earlier chunks may still be in flight: the lock,
    not a pending write, is what keeps the request's pages on device.
``cache_finished_req(req, insert)``
    End the request: with ``insert`` (a finish; the suite calls it after the request's loads
    completed) insert as above and free the duplicates and the unaligned tail; without (a retract
    or an abort, possibly while its load-back is in flight or a backup of its pages pending) free
    every slot of its own (``slots[protected:filled]``), and no other. Then unlock ``req.handle``.
    Afterwards the request holds no lock. A page its load-back fills stays as it is until the load
    lands (oracle 14); what the cache locked for the load it releases, whoever ends first.

What judges them is what judges the ``"tree"`` steps: the match and the load-back against the
tier model (residency, oracle 10 under namespaces), the re-match of a publish (the request must
read the tree's slots, never a duplicate it freed), device and host conservation between steps
with the running requests' own slots counted (a duplicate kept is a leak; an own slot freed
while the request holds it shows too), oracle 14 for a slot a transfer uses, oracle 2 for a
page a request holds that leaves the device, and oracle 4t for a lock left behind. The device
pool accepts a free of a request's own slot only inside a request method of that request.

A second pool with the request methods (``lifecycle="requests"`` and a ``second_pool``)
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
On a tier a state or a window is a *value* (the suite owns no second pool there: "A second pool
on the tiers"), so the request holds values, not slots, and the cache frees none of them. The
suite sets them whenever the request's ``filled`` changes (at admission, after each chunk, after a
publish that stopped short), as the engine's forward computes them:

* ``req.state`` (``StatePool()``): the state after ``req.tokens[:req.filled]`` (``-1`` when
  nothing is filled). ``cache_unfinished_req`` and a finishing ``cache_finished_req`` insert
  ``req.tokens[:req.filled]`` with ``state=req.state``, so the page that ends at them keeps it when
  ``filled`` is page-aligned, and no page takes it otherwise (the state is of the whole filled
  prefix, not of its page-aligned part). A retract or an abort inserts nothing and gives the state
  to no page. Why: SGLang 0.5.23's ``UnifiedRadixCache.checkpoint_into_tree``
  (``mem_cache/unified_radix_cache.py``) builds the insert's ``InsertParams`` from every
  component's ``prepare_for_caching_req``; ``MambaComponent.prepare_for_caching_req``
  (``mem_cache/unified_cache/components/mamba.py``) gives it the request's own state
  (``req.kv.mamba_pool_idx``, a copy when the request goes on) and caps the cached length at the
  tokens that state follows.
* ``req.window`` (``SlidingWindow(window=W)``): one value per filled token, live for the last
  ``W`` of them and ``-1`` before (they slid out of the request's window: SGLang's
  ``swa_evicted_seqlen``). The inserts carry ``window=req.window[:req.filled]``; the pages an
  insert puts on device take them, a page already on device keeps its own (as for ``insert``).
  The publish's re-match is *resumable* (``match_prefix``'s device part on a window): when a
  window tombstoned on a page the tree already had stops it short of the inserted pages, the
  request resumes there as the ``"tree"`` publish does: ``req.slots[:m]`` the re-match's slots,
  ``req.filled = req.protected = m``, its own slots after the inserted pages freed (it recomputes
  them), ``req.handle`` the re-match's node. Why: SGLang 0.5.23's ``checkpoint_into_tree`` notes
  that "SWA matching can stop short of the inserted path" and takes
  ``SWAComponent.prepare_for_caching_req`` / ``free_out_of_window_slots``
  (``components/swa.py``) for the request's window; it then locks the insert's last node, where
  the contract has the request resume at its window (no window KV is read past a tombstone).

What judges them, beside the above: oracle 20 (``states(handle)`` at every forward) and 20w
(``windows(handle)``), and the publish's re-match as a match's device part (oracles 20w, 21, 23);
the load-back of ``lock_req`` as ``load_back``'s on a window (a failed load resumes at a live
window; the window at the loaded path's end comes back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from radixcheck.oracles.policy import LeafStats
from radixcheck.oracles.violations import HostSlotViolation
from radixcheck.properties.cache.contract import NAMESPACE_KINDS, Request, SlidingWindow, StatePool
from radixcheck.properties.cache.policies import Policy

WRITE_POLICIES = ("write_through", "write_back", "write_through_selective")
"""``write_through_selective`` (SGLang's ``--hicache-write-policy``): a page is backed up once it
was hit often enough (SGLang: its second hit), so an inserted page may leave the device without
a host copy; every other obligation is write-through's."""

TIER_LIFECYCLES = ("off", "tree", "requests")
"""The values of ``TierCapabilities.lifecycle`` (module docstring, "The request lifecycle on the tiers")."""
STATE_LOAD_BACKS = ("path", "target")
"""The values of ``TierCapabilities.state_load_back``: which pages a load-back gives their state on device."""


@dataclass(frozen=True)
class TierCapabilities:
    """What a tiered target offers.

    There is no ``checks_locks`` or ``validates_input`` here, and none is needed: the tier machine
    sends only what a correct engine sends (every unlock pairs with an earlier lock through the same
    handle, no stale, foreign or quarantined handle, well-formed tokens, values and namespaces), so
    a tier cache that trusts its callers, as SGLang's HiCache does, is judged as one. The base
    contract's refusals (an unmatched unlock, bad input) are not exercised on a tier."""

    write_policies: tuple[str, ...] = ("write_through", "write_back")
    """The write policies the factory accepts; the suite runs each."""
    page_sizes: tuple[int, ...] = (1, 2)
    supports_quarantine: bool = True
    """``evict_prefix``: when False the suite never sends it (no never-saw check on the tiers)."""
    supports_reset: bool = False
    """``reset()`` (the tier calls above): when True the production world ends with one flush,
    checked on both tiers, and the small worlds flush now and then with traffic after it. Off
    unless declared: a tier target offers one only if it says so."""
    write_back_order: str = "top_down"
    """Under ``write_back``: ``top_down`` (a page is written only once its parent is on host or
    being written: the backup chain, oracle 18) or ``leaf_first`` (the evicted leaf alone is
    written, its parent stays on device and is written when it is evicted in turn; SGLang's
    design). ``leaf_first`` waives oracle 18 under write-back only; a parent that then leaves the
    device without a host copy must take its host-only subtree along (oracles 16 and 17)."""
    namespaces: bool = False
    """Whether ``match_prefix``, ``insert`` and ``evict_prefix`` take ``namespace=`` (as the base
    contract's "Namespaces" says: any hashable, told apart by its equality). When True the tier
    machine serves tenants too, and tenant isolation (oracle 10) is judged on both tiers: a match
    under N counts only N's pages, a load-back under N reads only N's host copies. When False the
    keyword is never sent."""
    unsent_namespaces: tuple[str, ...] = ()
    """Namespace kinds the engine's requests cannot carry (the base contract's
    ``Capabilities.unsent_namespaces``: ``"empty"``, ``"multimodal"``, ``"decimal"``, ``"float"``,
    ``"bool"``): declared, never sent on either tier, and named on the report card. Needs
    ``namespaces=True``."""
    eviction_policy: Policy | None = None
    """The device tier's eviction order when it is not least recently used first: a
    :class:`~radixcheck.properties.cache.policies.Policy` (the base contract's, e.g. ``lfu()``,
    ``priority()``), judged on every ``evict`` and ``evict_host`` (oracles 4t and 4h) by its key over what the suite observes of each
    device leaf (a load-back moves a page, it does not make it new: it keeps its hits, its
    priority and its creation time). ``priority=`` is then sent to ``match_prefix`` and ``insert``
    if the policy takes one. A key that reads ``LeafStats.start`` or ``history`` (TLRU's node
    boundaries) is refused: the tier model does not keep them yet."""
    lifecycle: str = "off"
    """How the suite drives running requests through the tiers (the base contract's "The request
    lifecycle"): ``"off"`` (requests are served and finished whole) or ``"tree"`` (the suite plays
    the engine with the tier calls: a request is admitted (match, load-back, lock), computes its
    chunks into slots of its own, publishes each (insert, re-match, lock the new handle, unlock
    the old) while the backups of the earlier ones may still be in flight, and ends as a finish, a
    retract or an abort, the last two possibly while its load-back is in flight or a write-back
    is pending) or ``"requests"`` (the same steps run by the cache's own ``match_req``, ``lock_req``,
    ``cache_unfinished_req`` and ``cache_finished_req`` on a :class:`TierRequest`, whose host part
    the admission loads back, and with a second pool its state or window values: module docstring,
    "The request lifecycle on the tiers")."""
    second_pool: StatePool | SlidingWindow | None = None
    """A second pool beside the KV on both tiers (the base contract's ``Capabilities.second_pool``):
    ``StatePool()``, one state value per cached request end, which ``insert`` takes (``state=``)
    and ``states(handle)`` reports; a page's host copy carries its state and a load-back returns
    it (module docstring, "A second pool on the tiers"; oracle 20). ``SlidingWindow(window=W)``,
    a window value per token, which ``insert`` takes (``window=``) and ``windows(handle)``
    reports; a host copy carries its page's live values and a load-back restores them on the
    pages of the last ``W`` tokens of the path it loads (further back, only each token's own host
    value, or none), and a match is resumable on each tier
    ("A sliding window on the tiers"; oracles 20w, 21 and 23)."""
    state_load_back: str = "path"
    """With ``second_pool=StatePool()``: which states a load-back brings to device. ``"path"`` (a
    state follows its page: every page it loads has its state on device again) or ``"target"``
    (only the page at the end of the path it loads, SGLang's design: the other pages it loads keep
    their state on host, and a match's device part ends at the deepest page whose state is on
    device; "A second pool on the tiers", "A load-back that restores only its target's state")."""

    conversation_turns: int | None = None
    """The turns of the tier production world's long conversation (its path that many pages deep);
    None: the world's own (1,200, past Python's recursion limit). A target whose every insert does
    work in proportion to its path beyond the cache's own walk declares fewer: an adapter that
    caches each shorter prefix of a request with a state of its own (SGLang's Mamba HiCache, whose
    match ends only at a state) sends a conversation of ``T`` turns as ``T**2 / 2`` inserts walking
    up to ``T`` nodes each, ``T**3 / 6`` steps: 1,200 turns took more than an hour of CPU. Named on
    the report card as not exercised: a recursion past Python's limit is not met at that depth (a
    FULL-only row over the same tree core meets it)."""

    def page_sizes_tested(self) -> tuple[int, ...]:
        return tuple(self.page_sizes)

    @property
    def policy(self) -> Policy | None:
        """The declared Policy whose key orders device eviction (None: least recently used first)."""
        return self.eviction_policy

    def not_exercised(self) -> list[str]:
        gaps = [] if self.supports_quarantine else ["evict_prefix on both tiers (supports_quarantine=False)"]
        if not self.supports_reset:
            gaps.append("reset() of both tiers (supports_reset=False: never sent)")
        if self.write_back_order == "leaf_first" and "write_back" in self.write_policies:
            gaps.append("the backup chain under write_back (write_back_order='leaf_first')")
        for kind in self.unsent_namespaces:
            gaps.append(f"tenant isolation of {NAMESPACE_KINDS[kind]} (unsent_namespaces: never sent)")
        if isinstance(self.second_pool, StatePool):
            gaps.append("the state pool's own eviction on the tiers (evict_states is not sent: a state follows its page)")
        if isinstance(self.second_pool, SlidingWindow):
            gaps.append("the window pool's own eviction, pins and slot conservation on the tiers (evict_window is not sent: a "
                        "window value follows its page)")
        if self.conversation_turns is not None:
            gaps.append(f"the tier production world's conversation past {self.conversation_turns} pages deep "
                        f"(conversation_turns={self.conversation_turns}: a recursive walk of a path past Python's "
                        "1,000 frames is not met)")
        if self.lifecycle == "off":
            gaps.append("the request lifecycle on the tiers (lifecycle='off': chunked prefill, retract and abort while "
                        "transfers are in flight)")
        return gaps

    def tenant_isolation(self) -> str:
        """The report card's "Tenant isolation" line."""
        if not self.namespaces:
            return "not exercised: no namespaces declared (TierCapabilities(namespaces=False): the keyword is never sent)"
        unsent = self.unsent_namespaces
        said = "; not sent: " + ", ".join(NAMESPACE_KINDS[k] for k in unsent) if unsent else ""
        return ("checked (oracle 10) on both tiers: tenants under adversarial namespaces share prompts through device "
                f"and host; a match counts, and a load-back reads, only its own namespace's pages{said}")

    def __post_init__(self) -> None:
        unknown = [p for p in self.write_policies if p not in WRITE_POLICIES]
        if unknown or not self.write_policies:
            raise ValueError(f"TierCapabilities.write_policies must be a non-empty subset of {WRITE_POLICIES}, got "
                             f"{self.write_policies!r}")
        if self.write_back_order not in ("top_down", "leaf_first"):
            raise ValueError(f"TierCapabilities.write_back_order must be 'top_down' or 'leaf_first', got {self.write_back_order!r}")
        for flag in ("supports_quarantine", "namespaces"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"TierCapabilities.{flag} must be a bool, got {getattr(self, flag)!r}")
        unsent = self.unsent_namespaces
        if not isinstance(unsent, (tuple, list)) or any(kind not in NAMESPACE_KINDS for kind in unsent):
            raise ValueError(f"TierCapabilities.unsent_namespaces must be a tuple of {sorted(NAMESPACE_KINDS)}, got {unsent!r}")
        if unsent and not self.namespaces:
            raise ValueError("TierCapabilities.unsent_namespaces needs namespaces=True")
        object.__setattr__(self, "unsent_namespaces", tuple(unsent))
        if self.lifecycle not in TIER_LIFECYCLES:
            raise ValueError(f"TierCapabilities.lifecycle must be one of {', '.join(map(repr, TIER_LIFECYCLES))}, got "
                             f"{self.lifecycle!r}")
        if isinstance(self.second_pool, SlidingWindow) and (self.second_pool.refills_tombstones
                                                            or self.second_pool.pins_whole_nodes):
            raise ValueError(f"TierCapabilities.second_pool={self.second_pool!r} is not driven on a tier: refills_tombstones "
                             "and pins_whole_nodes have no tier model; declare SlidingWindow(window=W) alone")
        turns = self.conversation_turns
        if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 2):
            raise ValueError(f"TierCapabilities.conversation_turns must be None or an int >= 2, got {turns!r}")
        if self.state_load_back not in STATE_LOAD_BACKS:
            raise ValueError(f"TierCapabilities.state_load_back must be one of {', '.join(map(repr, STATE_LOAD_BACKS))}, got "
                             f"{self.state_load_back!r}")
        if self.state_load_back != "path" and not isinstance(self.second_pool, StatePool):
            raise ValueError(f"TierCapabilities.state_load_back={self.state_load_back!r} needs second_pool=StatePool()")
        if self.second_pool is not None and not isinstance(self.second_pool, (StatePool, SlidingWindow)):
            raise ValueError(f"TierCapabilities.second_pool must be None, a StatePool or a SlidingWindow, got "
                             f"{self.second_pool!r}")
        if self.eviction_policy is not None:
            if not isinstance(self.eviction_policy, Policy):
                raise ValueError(f"TierCapabilities.eviction_policy must be a radixcheck Policy or None, got "
                                 f"{self.eviction_policy!r}")
            if _reads_node_boundaries(self.eviction_policy):
                raise ValueError(f"TierCapabilities.eviction_policy={self.eviction_policy!r} reads LeafStats.start or "
                                 "history (node boundaries), which the tier model does not keep yet: not driven")
        if not self.page_sizes or any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in self.page_sizes):
            raise ValueError(f"TierCapabilities.page_sizes must be positive ints, got {self.page_sizes!r}")


def _reads_node_boundaries(policy: Policy) -> bool:
    """Whether ``policy``'s key changes with ``start`` or ``history`` alone (probed at a few points)."""
    for base in (LeafStats(5, 2, 1, 0, 8, 4, 8), LeafStats(40, 30, 3, 2, 64, 0, 96)):
        seen = {repr(policy.key(LeafStats(base.last_use, base.created, base.hits, base.priority, base.depth, start, history)))
                for start in (0, base.depth - 1, base.depth) for history in (base.depth, base.depth * 4, 10**6)}
        if len(seen) > 1:
            return True
    return False


@dataclass(frozen=True)
class TierMatch:
    """What a tiered cache's ``match_prefix`` returns (see the module docstring): the device part's slot ids and
    handle, then ``host_length`` tokens after it on host only, ending at ``host_handle``."""

    device_values: np.ndarray
    device_handle: Any
    host_length: int
    host_handle: Any


@dataclass(eq=False)
class Transfer:
    """One copy between the pools, pending until the suite delivers ``cache.transfer_done``."""

    kind: str  # "write" (device -> host) or "load" (host -> device)
    device_slots: np.ndarray
    host_slots: np.ndarray
    number: int  # the controller's count: 1 for its first transfer

    def __repr__(self) -> str:
        return f"Transfer({self.kind} #{self.number}, {len(self.device_slots)} slots)"


@runtime_checkable
class TieredCacheLike(Protocol):
    """The methods the suite calls on a cache with a host tier. See the module docstring for their meaning;
    annotate your cache with it, so a type checker holds it to them."""

    page_size: int

    def match_prefix(self, tokens: Sequence[int]) -> TierMatch: ...

    def load_back(self, host_handle: Any) -> tuple[np.ndarray, Any]: ...

    def insert(self, tokens: Sequence[int], values: np.ndarray) -> int: ...

    def inc_lock_ref(self, handle: Any) -> None: ...

    def dec_lock_ref(self, handle: Any) -> None: ...

    def evict(self, num_tokens: int) -> int: ...

    def evict_host(self, num_tokens: int) -> int: ...

    def evict_prefix(self, tokens: Sequence[int]) -> int: ...

    def transfer_done(self, transfer: Transfer) -> None: ...

    def device_size(self) -> int: ...

    def host_size(self) -> int: ...


@runtime_checkable
class TieredStateCacheLike(TieredCacheLike, Protocol):
    """A tiered cache that declares ``second_pool=StatePool()`` ("A second pool on the tiers"):
    every insert carries ``state=``, and ``states(handle)`` reports each page's state. Annotate
    your cache with it, so a type checker holds it to those two calls."""

    def insert(self, tokens: Sequence[int], values: np.ndarray, *, state: int | None = None) -> int: ...

    def states(self, handle: Any) -> Sequence[int]: ...


@runtime_checkable
class TieredWindowCacheLike(TieredCacheLike, Protocol):
    """A tiered cache that declares ``second_pool=SlidingWindow(window=W)`` ("A sliding window on
    the tiers"): every insert carries ``window=`` (one int per token, ``-1`` where it slid out),
    and ``windows(handle)`` reports each token's live window value on device. Annotate your cache
    with it, so a type checker holds it to those two calls."""

    def insert(self, tokens: Sequence[int], values: np.ndarray, *, window: np.ndarray | None = None) -> int: ...

    def windows(self, handle: Any) -> Sequence[int]: ...


class HostPool:
    """The suite's host KV pool: ``pool_size`` slots, handed out by the controller's writes and
    freed by the cache. Refuses (raises :class:`HostSlotViolation`, remembered in ``violations``)
    a double free or a free of a slot it never handed out. ``on_free`` (set by the suite) sees
    every accepted free first, and may refuse it too."""

    def __init__(self, pool_size: int) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be a positive int, got {pool_size!r}")
        self.pool_size = pool_size
        self.in_use: set[int] = set()
        self._free = list(range(pool_size - 1, -1, -1))
        self.violations: list[str] = []
        self.on_free: Any = None
        self.freed_log: list[int] = []

    def available(self) -> int:
        return self.pool_size - len(self.in_use)

    def alloc(self, n: int) -> np.ndarray | None:
        """``n`` host slot ids, or ``None`` when fewer are free."""
        if n > len(self._free):
            return None
        ids = [self._free.pop() for _ in range(n)]
        self.in_use.update(ids)
        return np.asarray(ids, dtype=np.int64)

    def free(self, ids: Any) -> None:
        ids_list = [int(i) for i in np.asarray(ids).reshape(-1)]
        bad = set(ids_list) - self.in_use
        if bad or len(set(ids_list)) != len(ids_list):
            self.violations.append(f"host free() of ids not in use (double free or never allocated): {sorted(bad)[:8]}")
            raise HostSlotViolation(self.violations[-1])
        if self.on_free is not None:
            self.on_free(ids_list)
        self.in_use.difference_update(ids_list)
        self._free.extend(reversed(ids_list))
        self.freed_log.extend(ids_list)


TIER_REQUEST_METHODS = ("match_req", "lock_req", "cache_unfinished_req", "cache_finished_req")


class TierRequest(Request):
    """A running request on a ``lifecycle="requests"`` tier cache (module docstring, "The request
    lifecycle on the tiers"): the base contract's :class:`Request` (its ``priority`` included) plus its
    host part, the pages after its device prefix on host only (``host_length`` tokens, ending at
    ``host_handle``), which ``lock_req`` loads back.
    With a second pool, ``state`` and ``window`` (the base ``Request``'s) hold *values* here, which
    the suite sets and the inserts carry (module docstring, "A second pool with the request methods")."""

    def __init__(self, tokens: Sequence[int], namespace: Any = None, priority: int = 0) -> None:
        super().__init__(tokens, namespace, priority)
        self.host_length = 0
        self.host_handle: Any = None

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, host_length={self.host_length})"


@runtime_checkable
class TieredRequestCacheLike(TieredCacheLike, Protocol):
    """A tiered cache that declares ``lifecycle="requests"``: its own request methods. Annotate your
    cache with it, so a type checker holds it to them."""

    def match_req(self, req: TierRequest) -> None: ...

    def lock_req(self, req: TierRequest) -> None: ...

    def cache_unfinished_req(self, req: TierRequest) -> None: ...

    def cache_finished_req(self, req: TierRequest, insert: bool = True) -> None: ...
