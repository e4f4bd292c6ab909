"""The cache contract: what radixcheck expects of a radix-tree KV cache.

Read this module to write an adapter for your cache. It is modelled on SGLang's
``RadixCache`` so that SGLang, mini-sglang and most home-grown caches adapt in a few lines.

Vocabulary
----------
* A *token sequence* is a 1-D sequence of non-negative Python/NumPy integers (list, tuple or
  integer ndarray), ids anywhere in the int32 range (vocabularies of 128k-152k are normal, and
  the suite sends ids at and above 2**16, 2**17 and 2**24). It may be empty, and it may be
  thousands of tokens long. Floats, bools, ``None``, negative ids, nested sequences and arrays of
  other than one dimension are bad input.
* *Values* are KV slot ids: a 1-D ``np.int64`` array, one slot per token. The suite owns the slot
  pool (a :class:`SlotAllocator`); the cache stores slot ids and hands them back to the allocator
  when it evicts. Reuse shares slot ids; the cache never copies or invents them. Slots come from
  a pool that has been serving for hours: recycled, scattered and out of order, never assume
  ``values[i] == values[0] + i``.
* *Buffers are the caller's.* A caller reuses the token and value arrays it passes as soon as
  the call returns (an engine rewrites its request-to-token row), so a cache copies whatever it
  keeps. The array ``match_prefix`` returns is the caller's too: callers may write into it, so
  it must not be the cache's own storage (a read-only array, ``writeable=False``, is fine and is
  never written into). The suite overwrites every list and array it lent after each call, and
  every array a match returned once it has checked it.
* A *handle* (SGLang's ``TreeNode``) is an opaque object returned by ``match_prefix``. It denotes
  the matched prefix: locking it locks every node on the path root..handle.

The methods (``RadixCacheLike``)
-------------------------------
``match_prefix(tokens) -> (values, handle)``
    The slot ids of the longest cached prefix of ``tokens`` (length a multiple of ``page_size``)
    and a handle to the node that ends exactly there. If the query diverges in the middle of an
    edge the cache splits that edge, so that a lock on the handle covers exactly the matched
    prefix, no more. An empty match (an empty query, one shorter than a page, or one whose first
    page is not cached) returns an empty int64 array and the *root handle*.
    Counts as a use of every matched node (recency for LRU; see "Eviction policies" for hits).
``insert(tokens, values) -> prefix_len``
    Caches ``tokens`` (only the first ``len(tokens) // page_size * page_size`` of them when
    ``page_size > 1``) with ``values`` (same length as ``tokens``; any integer dtype, the suite
    sends ``np.int64``, and a cache may store them in a narrower type that holds every slot id of
    its pool). An insert that ends inside an edge uses only what it covered: an LRU cache splits the
    edge there (or otherwise keeps the uncovered remainder as old as it was), as a match does. ``prefix_len`` is how many
    leading tokens were already cached: for those the cache keeps its own values, and the caller
    still owns (and must free) ``values[:prefix_len]`` that it brought, as well as the unaligned
    tail. Counts as a use of every node on the inserted path. An empty insert (or one shorter
    than a page) caches nothing and returns 0.
``inc_lock_ref(handle)`` / ``dec_lock_ref(handle)``
    Add / remove one lock on every node of the path root..handle. A locked node is never evicted.
    Correct callers pair every unlock with an earlier lock through the same handle.
    ``dec_lock_ref`` raises (and changes nothing) if any counter on the path is already 0 (an
    unmatched unlock) or the handle is stale (its node was evicted, reset away, or belongs to
    another cache). An unlock through a handle that took no lock of its own while other requests
    hold the path is the cache's choice: one that counts locks per node may take it, one that
    counts them per handle may refuse it; the suite never sends it.
    ``inc_lock_ref`` on a stale or quarantined handle raises likewise.
    *The root handle* stands for the empty prefix: locking or unlocking it is a no-op that always
    succeeds (there is nothing to protect). It stays valid across ``reset()``. Another cache's
    root handle is a foreign handle like any other (the suite sends none: a root lock protects
    nothing, so refusing it proves nothing).
    **A lock is not a use**: only ``match_prefix`` and ``insert`` refresh recency.
    A cache that trusts its callers (``checks_locks=False``, as SGLang's does) is only ever sent
    what a correct engine sends: every unlock pairs with an earlier lock through the same handle,
    at most once, and no stale, foreign or quarantined handle is locked.
``evict(num_tokens) -> evicted``
    Evicts unlocked leaves in the order of the cache's policy (the reference: least recently used
    leaf first; a parent left childless becomes a leaf and is considered in turn) until at least
    ``num_tokens`` tokens have been freed or nothing is evictable. Returns the number of tokens
    evicted; their slot ids go back to the allocator. ``num_tokens`` must be >= 0.
``evict_prefix(tokens) -> removed``
    Policy eviction ("quarantine"). Afterwards no match returns a prefix that starts with
    ``tokens``, and the match of any query that does not start with ``tokens`` is unchanged.
    The cut falls at position ``(len(tokens) - 1) // page_size * page_size``: everything cached
    below it on the branch of ``tokens`` goes. The tokens after the cut may be fewer than a page:
    every cached page there that starts with them goes (at page size 2, ``evict_prefix([2])``
    removes ``[2, 0]`` and ``[2, 1]`` and all below them). Unlocked nodes are freed at once; locked ones are
    unlinked at once (no new request can match them) and freed when their last lock is released.
    Returns the number of tokens unlinked from the tree. ``tokens`` must be non-empty.
``total_size()``, ``evictable_size()``, ``protected_size()``
    Tokens in the tree; those on no locked path; those on a locked path. Unlinked (quarantined but
    still locked) nodes count in none of them. ``evictable + protected == total`` always.
``reset()``
    Empties the tree, frees every slot it holds (including quarantined ones still locked) and
    makes every handle stale. Slots that callers hold stay theirs. A cache without a usable
    reset declares ``supports_reset=False`` and is never sent one.
``page_size``
    Attribute, the page size the cache was built with.

Namespaces (tenant isolation)
-----------------------------
Production caches key their trees by more than token ids: SGLang's ``RadixKey(token_ids,
extra_key)`` (the LoRA id and the cache salt; each extra_key has its own root), vLLM's block
hashes (the LoRA name, ``cache_salt``, multimodal feature hashes). A cache that declares
``Capabilities(namespaces=True)`` takes a *namespace* per request, as the keyword argument
``namespace=`` of ``match_prefix``, ``insert`` and ``evict_prefix``:

* A namespace is any hashable Python value, compared by equality (``==`` and ``hash``), never by
  a rendering of it: a str, an int, ``None``, or a tuple of parts, e.g. ``(lora_id, cache_salt,
  (mm_hash, ...))``. ``("ab", "c")`` and ``("a", "bc")``, ``None`` and ``""`` and ``0``, ``5`` and
  ``5 + 2**16``, ``("X", None)`` and ``(None, "X")`` are all different namespaces (the suite sends
  each of these pairs), and so are values only their type tells apart: ``5`` and ``"5"``, ``None``
  and ``"None"``, ``(1, 2)`` and ``"(1, 2)"`` (the suite generates such pairs, alone and as parts
  of tuples). Values Python calls equal (``1``, ``1.0`` and ``True``; ``("lora", 7)`` and
  ``("lora", 7.0)``) are one namespace (the suite generates those too).
* A call without the keyword is in the default namespace, ``None``: ``match_prefix(tokens)`` and
  ``match_prefix(tokens, namespace=None)`` are the same call (the suite sends both).
* An unhashable namespace (a list, a dict) is bad input: refused with an exception that says so,
  changing nothing (when ``validates_input=True``).
* A namespace kind the engine's requests cannot carry is declared in ``unsent_namespaces`` and
  never sent: ``"empty"`` (the empty string, which vLLM refuses as a ``cache_salt`` and SGLang
  reads as no key), ``"multimodal"`` (feature hashes, which SGLang keys by the pad tokens it puts
  in the token ids, not by a namespace), ``"decimal"`` (an int beside its decimal string: an
  engine whose request fields are strings writes the int so), ``"float"`` and ``"bool"`` (a
  namespace, or a part of one, of that type).
* A target that does not declare namespaces is never sent the keyword, so its methods keep the
  signatures above. An adapter whose cache takes the namespace differently (SGLang's
  ``RadixKey(tokens, extra_key)``, vLLM's per-request ``lora_request``/``cache_salt``) maps the
  keyword onto it; that mapping is part of what the audit checks.

**The isolation obligation.** A match under namespace N returns only what was inserted under N:
its answer is the longest prefix of the query cached *under N*, with N's slot ids, exactly as if
the other namespaces did not exist. ``insert`` under N reports as ``prefix_len`` only what N had
cached. ``evict_prefix(tokens, namespace=N)`` quarantines N's branch only: no other namespace's
match changes. A handle returned by a match under N denotes N's path: locking it protects N's
nodes and no other namespace's. A cross-namespace match is a correctness bug (one adapter's KV
served under another adapter's weights) and a security bug (one tenant's prompt revealed to
another by the timing of its hit).

**What is left to the cache.** The namespaces share one slot pool and one set of sizes
(``total_size`` and the others count every namespace), and ``evict(n)`` evicts from the whole
cache: an engine evicts from one pool. For ``eviction_policy="lru"`` (or any declared
:class:`Policy`) the order is judged across namespaces: the coldest unlocked leaf of *any*
namespace goes first (one clock for every namespace). A cache whose eviction is per namespace (a
quota per tenant) declares another policy name, and keeps the amount and lock-safety checks. How the namespaces are stored (one
tree each, one tree with a root per namespace, the namespace folded into the first page's key)
is the cache's choice, as long as equality of namespaces is what separates them.

The request lifecycle
---------------------
An engine does not only insert finished requests. A running request is admitted (matched, then
locked), publishes each chunk of its prefill as it is computed (SGLang's ``cache_unfinished_req``,
now ``checkpoint``; mini-sglang's ``cache_req``), and then ends in exactly one of four ways:
*finish* (the final insert), *retract* (decode ran out of memory: back to the queue, its own
pages freed), *abort* (mid-prefill), or *finish with the insert skipped*
(``skip_radix_cache_insert``). An admission may also fail after its match (the batch is full):
then no lock is taken and nothing is inserted. A target declares which of two ways it is driven
through these steps (``Capabilities.lifecycle``):

* ``"tree"``: the suite plays the engine with the calls above, as SGLang's scheduler does:
  admission = ``match_prefix`` + ``inc_lock_ref``; a chunk = ``insert`` of every token computed so
  far (the request's own slots behind its cached prefix), the caller frees its duplicates
  (``values[protected:prefix_len]``), matches the inserted pages again, locks the new handle and
  unlocks the old one, and from then on reads the tree's slots for those pages; finish = the
  same insert, the caller frees its duplicates and the unaligned tail, then unlocks; retract,
  abort and a skipped insert = the caller frees every slot behind the cached prefix, then unlocks.
* ``"requests"``: the cache runs the steps itself, as an engine's cache does, on a
  :class:`Request` the suite owns and passes in (SGLang's ``Req``, reduced to what a cache reads):
  ``match_req(req)`` (match ``req.tokens``; set ``req.slots`` to the matched slots,
  ``req.filled = req.protected = len(slots)`` and ``req.handle``; no lock), ``lock_req(req)``
  (lock ``req.handle``: the admission succeeded), ``cache_unfinished_req(req)`` (publish
  ``req.tokens[:req.filled]``) and ``cache_finished_req(req, insert)`` (end the request, with or
  without the final insert). Between them the suite computes chunks with
  :meth:`Request.compute`. Each must free exactly what the ``"tree"`` steps above free, into
  the suite's allocator, and leave the request as they say: after ``cache_unfinished_req``,
  ``req.protected`` is the page-aligned ``req.filled``, ``req.slots[:req.protected]`` are the
  tree's slots for those tokens (never a duplicate it freed) and ``req.handle`` is locked by the
  request in place of the old one; after ``cache_finished_req`` the request holds no lock.

Slot conservation judges every step (a page both in the tree and freed, or held by nobody, is
caught at the step that did it), the prefix-set model judges every match and insert, and the sizes
judge the locks (a lock a failed admission forgot, or a re-published chunk that locked twice).
A request carries its namespace (``Request.namespace``: vLLM's ``cache_salt``, SGLang's ``extra_key``
on the request; ``None``, the default one). For a target that also declares ``namespaces=True`` the
suite draws one per request, a tenant's or the default, and a ``"requests"`` cache must match,
publish and cache under it: ``match_req`` is judged by oracle 10 as ``match_prefix`` is (none of the
slots it leaves in ``req.slots`` another namespace's), and every later step against that namespace's
prefixes; a ``"tree"`` lifecycle sends it as ``namespace=`` on its calls. A request carries its
priority too (``Request.priority``, SGLang's ``req.priority``), drawn only for a declared policy that
takes one (``takes_priority``; 0 otherwise): a ``"requests"`` cache must match, publish and cache with
it (``priority=`` on its own ``match_prefix`` and ``insert``), and the model gives the pages each
publish or finish covers that priority (the order oracle then judges evictions by it); a ``"tree"``
lifecycle sends it as ``priority=`` on the request's calls. The suite keeps at most
three requests in flight, and ends them (as aborts) before a ``reset`` or an ``evict_prefix``, as a server aborts what runs before it
flushes. ``"off"`` (the default) runs none of these steps.

Key modes (EAGLE bigram keys)
-----------------------------
``Capabilities.key_mode`` says what a cache keys its tree by. ``"tokens"`` (the default): one key
per token, as everything above says. ``"bigram"``: SGLang's ``is_eagle=True`` (EAGLE speculative
decoding keys token *i* by the pair ``(t[i], t[i+1])``): a sequence of ``n`` raw tokens is ``n - 1``
keys, and every length above is counted in keys, not raw tokens:

* ``insert(tokens, values)`` (``len(values) == len(tokens) == n``) caches the ``n - 1`` bigrams,
  page-aligned *in bigrams*: ``(n - 1) // page_size * page_size`` of them, with
  ``values[:that]``; ``prefix_len`` counts bigrams. The caller frees ``values[prefix_len:]``'s
  duplicates as above and the unaligned tail ``values[(n - 1) // page_size * page_size:]``, which
  always holds the last raw token's slot (no bigram starts there).
* ``match_prefix(tokens)`` returns the slots of the longest cached prefix of the query's bigrams,
  a multiple of ``page_size`` bigrams: ``n - 1`` at most. A query of ``page_size`` raw tokens has
  fewer than a page of bigrams and matches nothing (sglang #24371: a lookup that computed a page
  key from raw tokens read past the query), and ``page_size * k`` raw tokens cache ``k - 1``
  pages, not ``k`` (the page floor of ``n - 1``, never that of ``n``: sglang #40681).

The suite judges a bigram cache in key units: it generates sequences of keys ``u`` (as for any
cache) and sends the raw tokens ``(BIGRAM_START,) + u``, whose bigrams ``(start, u[0]), (u[0],
u[1]), ...`` are in one-to-one correspondence with ``u`` (two raw sequences share ``k`` bigrams
exactly when their ``u`` share ``k`` keys), with one more slot than keys (the last raw token's,
which the caller frees after the insert). Every oracle then applies unchanged. Not sent to a
bigram cache: the request lifecycle through the cache's own request methods (``"requests"``: the
suite's :class:`Request` holds one slot per key; declare ``"tree"``), and the tests that send raw
sequences of their own (the scheduling bound, the construction tests' foreign handle and reset).


A second pool (hybrid models)
-----------------------------
Hybrid models keep a second pool beside the KV slots: a sliding window's KV (SGLang's SWA pool,
``SWARadixCache`` / ``UnifiedRadixCache`` FULL+SWA) or a recurrent state (Mamba, SSM: one state per
cached request end). A cache declares it as ``Capabilities(second_pool=SlidingWindow(window=W))``
or ``Capabilities(second_pool=StatePool())``. The suite owns that pool as it owns the KV slots: a
second :class:`SlotAllocator` (its own ids, counted apart, double frees refused), given to the
factory as a keyword::

    factory(allocator, page_size, second_allocator=second) -> RadixCacheLike

(only when ``second_pool`` is declared; without it the factory is called as before). Every call
below keeps the plain contract for the KV slots (values, ``prefix_len``, sizes, locks, LRU order
of ``evict``); ``total_size()`` and the other sizes count KV tokens only. A value of the second pool
is *live* (its slot is the cache's, in use) or *none* (``-1``: never had one, or *tombstoned*: the
cache freed it and kept the KV). Locks on one pool never release the other's; a free of either pool
goes to that pool's allocator only.

**Sliding window** (``SlidingWindow(window=W)``): one window slot per token.

``insert(tokens, values, window=w) -> prefix_len``
    ``w`` is an int64 array as long as ``tokens``: each token's window slot, or ``-1`` where the
    request already freed it (it slid out of the request's window: SGLang's ``swa_evicted_seqlen``;
    the suite frees whole pages). The cache takes ``w[i]`` (if live) for every newly cached token
    ``i`` (``prefix_len <= i < aligned``), as it takes ``values[i]``. For the already cached prefix
    the cache keeps its own window values, live or tombstoned, and the caller keeps and frees its
    ``w[:prefix_len]``, as it frees its KV duplicates, and the unaligned tail's; except that a cache
    declaring ``SlidingWindow(window=W, refills_tombstones=True)`` takes ``w[i]`` where the cached
    token ``i < prefix_len`` has no live window value (tombstoned, or cached without one by a request
    whose window had slid) and ``w[i]`` is live, token by token; each value taken is then the
    cache's (pinned by the locks whose window covers it, freed with its KV or by ``evict_window``),
    and the caller frees the rest of ``w[:prefix_len]``. (SGLang's ``_recover_from_incoming``
    recovers any window-less node the insert's live window covers, but swaps in the caller's KV
    too, which this contract's caches do not.)
``match_prefix(tokens) -> (values, handle, window_values)``
    ``values`` is the longest cached prefix of ``tokens`` (page-aligned) *that a request can resume
    from*: the longest ``L`` whose last ``min(W, L)`` tokens all have live window values (``L = 0``
    always qualifies). When the window has slid (a tombstone lies on the path) a match may end
    beyond it once ``W`` live tokens follow it: **a tombstone never hides its descendants** from a
    match that does not need the window there (sglang #35515). ``window_values`` (int64, length
    ``L``) are the cache's window slots of those tokens, ``-1`` where tombstoned (only before the
    last ``W``). The handle ends exactly at ``L`` (split there if need be); recency is as for any match
    of ``tokens[:L]``.
``inc_lock_ref(handle)`` / ``dec_lock_ref(handle)``
    A lock pins the KV path root..handle and the window values of the pages that hold the last
    ``min(W, L)`` tokens of it (``L`` the handle's length); the unlock releases exactly those.
``evict(num_tokens)``
    As before (KV leaves); an evicted leaf's live window slots are freed with it.
``evict_window(num_tokens) -> freed``
    Frees (tombstones) live window values that no lock pins, in the cache's order, until at least
    ``num_tokens`` window slots were freed or none unpinned is left; their KV stays cached. A cache
    may instead evict a whole unlocked leaf (KV and window, as SGLang's SWA eviction does with a
    leaf). Returns the window slots freed. Which ones go first is the cache's choice (not judged).
``evict_prefix`` / ``reset``
    Free both pools' slots of what they remove.

**State pool** (``StatePool()``): one state slot per cached request end (a Mamba checkpoint).

``insert(tokens, values, state=s) -> prefix_len``
    ``s`` is the slot of the state after the last of ``tokens``. The cache takes it when
    ``tokens`` is non-empty and page-aligned and the prefix ``tokens`` has no live state yet;
    otherwise the caller frees it.
``match_prefix(tokens) -> (values, handle, state)``
    The longest cached prefix of ``tokens`` that ends at a live state, its slot ids, the handle
    ending there, and that state's slot (``-1`` for the empty match).
``inc_lock_ref`` / ``dec_lock_ref``
    Pin / release the KV path and the state at the handle.
``evict(num_tokens)``
    As before; an evicted leaf's state is freed with it.
``evict_states(num_states) -> freed``
    Frees (tombstones) unpinned states, their KV staying cached, until ``num_states`` are freed or
    none is left (a cache may evict a whole unlocked leaf instead). Returns the states freed.

With ``lifecycle="tree"`` and a sliding window, a request also holds its window values
(``Request.window``: the window slot per filled token, ``-1`` where freed) and each step frees them
as it frees its own KV: after a publish or a finish it frees its window duplicates where the tree
holds a live value (and reads the tree's), keeps its own where the tree's is tombstoned, and the
tree takes the rest; a retract, an abort or a skipped insert frees every window slot of its own;
after each chunk it frees its own window slots of the whole pages that slid out of its window, as
SGLang's scheduler does. A publish whose re-match would stop short of it (its last ``W`` tokens not
all live in the tree after the insert) is deferred: the engine keeps computing.

With ``lifecycle="requests"`` and a sliding window the cache's request methods do those steps, and
``Request.window`` holds the window slots the request holds *of its own* (``-1`` elsewhere: slid
out, or the tree's; the tree's are read through the handle): the suite puts each chunk's fresh
window slots there and sets ``-1`` where it freed a slid one. ``match_req`` leaves it ``-1``;
``cache_unfinished_req`` inserts with it (``window=``), sets ``-1`` where the tree took a slot, frees
its duplicates where the tree's value is live and sets ``-1`` there, and keeps its own where the
tree's is tombstoned; ``cache_finished_req`` frees every window slot the request still holds.

With a state pool (either lifecycle) a running request holds the state after its filled tokens
(``Request.state``, its own; ``-1``: none): each chunk computes a new one and the suite frees the
old. A publish or a finish whose filled tokens end on a page boundary brings it to the insert
(``state=``), which takes it where that prefix has no live state; the request then holds none
(``Request.state`` set to ``-1``), else it keeps it. A finish, a retract or an abort frees a state
the request still holds. A publish is deferred while no live state would end its pages. With bigram
keys a second pool is counted in keys: an insert brings one window slot per raw token, key ``i``
keeps raw token ``i``'s, and the last raw token's is the caller's to free, as its KV slot is.

Eviction policies
-----------------
``eviction_policy`` says how ``evict`` orders its victims. ``"lru"`` (the default) is judged by the
LRU oracle. A :class:`Policy` (``radixcheck.properties.cache.policies``: ``lru()``, ``lfu()``,
``fifo()``, ``mru()``, ``filo()``, ``priority()``, ``slru(threshold)``, ``tlru(threshold,
next_prompt_estimate)``, SGLang 0.5.23's eight with its meaning, or the user's own
``Policy(key=...)``) is judged by the eviction-order oracle: each ``free()`` of an ``evict`` frees
an unlocked leaf whose ``key(stats)`` is no larger than any unlocked leaf's still there (a parent
left childless and unlocked is a candidate at once; ties go in any order). The statistics
(:class:`LeafStats`), exactly:

* ``last_use``: the clock (one tick per ``match_prefix`` or ``insert``) of the last match or insert
  that covered the leaf; an insert or match ending inside an edge covers only up to where it ended.
* ``created``: the clock of the insert that first cached it. **A split gives the new parent the
  child's creation time and hit count** (SGLang's ``_split_node`` copies ``hit_count``; its unified
  tree copies ``creation_time`` too), and the covering call's time as its last use.
* ``hits``: **what counts as a hit**: every insert that covers the node, re-inserts of an already
  cached prefix included (SGLang's ``_insert_helper``; a new node starts at 1). A match that covers
  it counts too only when the policy says ``hits_on_match=True`` (SGLang's matches count none: its
  requests insert what they matched, and that insert is their hit).
* ``priority``: the highest ``priority=`` of the inserts that covered it (new nodes take the
  request's; a split copies it; 0 without one). Sent only to a policy with ``takes_priority=True``,
  to ``insert`` and to ``match_prefix`` (as SGLang's requests carry ``req.priority`` to both; a
  match does not change a node's priority). A call without it has priority 0 (the scheduling and
  construction tests send none).
* ``depth``, ``start``: tokens from the root to the leaf's end, and to the start of the cache node
  that ends there. A node ends where a match or an insert ended or the tree forked (SGLang's layout:
  it splits only there, and never merges); only ``tlru`` reads ``start``.
* ``history``: the deepest (tokens) the leaf's branch reached since it was cached, which does not
  shrink when the tail is evicted (TLRU's L, SGLang's ``_tlru_history_len``).

An engine that counts differently where the difference is by design says so in the policy it
declares (``hits_on_match``); one whose order is no key over these declares a name instead, and its
order is then not exercised.

Bad input
---------
A cache that declares ``validates_input=True`` (the default) must refuse malformed arguments
with an exception *and leave itself unchanged*: token sequences that are not 1-D sequences of
non-negative integers (floats, bools, strings, ``None``, nested lists, 0-d or 2-D arrays),
values of the wrong length or dimension, or not of an integer dtype (the suite sends float64
values; any integer dtype is right), ``None`` or negative or non-integer eviction
counts, an empty ``evict_prefix``, and, from the factory, a ``page_size`` that is not a positive
int. The suite checks "unchanged" by comparing the sizes and the slot pool before and after.
A cache that trusts its callers with arguments declares ``validates_input=False``.

Target selection
----------------
The suite builds caches with a *factory*, named as ``package.module:attribute`` by the pytest
option ``--radix-target`` or the environment variable ``RADIXCHECK_TARGET`` (the option wins).
The default is ``radixcheck.reference:RadixCache``. The factory is called as::

    factory(allocator: SlotAllocator, page_size: int) -> RadixCacheLike

and may carry a ``capabilities`` attribute (a :class:`Capabilities`) telling the suite which
properties apply; without one the suite assumes :data:`DEFAULT_CAPABILITIES`. A property that
needs something the target does not offer is skipped with that reason, never failed: the
state machine then never sends the calls in question (Hypothesis preconditions), and the run's
header and report say what was left out.

Adapting a match-and-lock API
-----------------------------
Some caches lock only while matching (LightLLM's ``match_prefix(key, update_refs=True)``). Give
the handle the matched tokens, implement ``inc_lock_ref(handle)`` by matching them again with
locking on, and declare ``locks_only_after_match=True``: the suite then locks a handle only
straight after the match that returned it, so the second match touches exactly the nodes the
first one just touched and the recency order is what the contract expects. ``dec_lock_ref``
maps to the cache's own release.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from radixcheck.oracles.violations import SecondSlotViolation, SlotViolation
from radixcheck.properties.cache.policies import LeafStats, Policy

__all__ = ["Capabilities", "DEFAULT_CAPABILITIES", "LeafStats", "Policy", "RadixCacheLike", "SecondPoolAllocator", "SlidingWindow",
           "SlotAllocator", "StatePool", "required_methods", "second_pool_keywords"]

NAMESPACE_KINDS = {"empty": "the empty-string namespace", "multimodal": "namespaces with multimodal feature hashes",
                   "decimal": "int namespaces beside their decimal strings (5 and \"5\")",
                   "float": "float namespaces (2.5, and 1.0 equal to 1)", "bool": "bool namespaces (True, equal to 1)"}
"""What ``Capabilities.unsent_namespaces`` may name, and how a report card says it."""

MAX_PAGE_SIZE_TESTED = 64
"""Declared page sizes above this are not run (the oracles' cost grows with the page)."""


@dataclass(frozen=True)
class SlidingWindow:
    """A sliding-window second pool (see "A second pool" above): ``window`` tokens of window KV
    a match must find live at its end; ``refills_tombstones``: an insert takes the caller's live
    window values where the cached ones have none (``RefillingWindow`` in
    ``radixcheck.properties.cache.hybrid_mutants`` is the correct cache that declares it);
    ``pins_whole_nodes``: a lock pins the window values of whole tree nodes, from the handle's up
    to the one that completes ``window`` tokens (SGLang's ``SWAComponent.acquire_component_lock``),
    a superset of the pages of the last ``window`` tokens, so ``evict_window`` may stop while
    values the contract leaves unpinned are left (that stop is not judged; freeing a value the
    contract pins still is)."""

    window: int
    refills_tombstones: bool = False
    pins_whole_nodes: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"SlidingWindow.window must be a positive int, got {self.window!r}")
        for flag in ("refills_tombstones", "pins_whole_nodes"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"SlidingWindow.{flag} must be a bool, got {getattr(self, flag)!r}")


@dataclass(frozen=True)
class StatePool:
    """A per-prefix state second pool (see "A second pool" above): one state slot per cached
    request end (a Mamba checkpoint). ``stateless_inserts=False``: the cache caches KV only with
    the state after it (SGLang's ``MambaComponent`` asserts a state on every insert; the scheduler
    always brings one), so the suite never inserts with ``state=-1``."""

    stateless_inserts: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.stateless_inserts, bool):
            raise TypeError(f"StatePool.stateless_inserts must be a bool, got {self.stateless_inserts!r}")


SECOND_POOL_METHODS = {SlidingWindow: ("evict_window",), StatePool: ("evict_states",)}


LIFECYCLES = ("off", "tree", "requests")
"""The values of ``Capabilities.lifecycle`` (see "The request lifecycle" above)."""
KEY_MODES = ("tokens", "bigram")
"""The values of ``Capabilities.key_mode`` (see "Key modes" above)."""
BIGRAM_START = 1
"""The raw token the suite puts before a bigram cache's keys (see "Key modes" above)."""


@dataclass(frozen=True)
class Capabilities:
    """What a target offers. The suite skips (with a reason) properties that need more, and never
    sends a call the target does not offer or leaves to its callers."""

    eviction_policy: str | Policy = "lru"
    """The eviction order: a :class:`Policy` (a key over :class:`LeafStats`, e.g. ``policies.lfu()``)
    is judged by the eviction-order oracle; the name ``"lru"`` by the LRU oracle; any other name is
    a policy the suite cannot judge (its order is not exercised; amount and lock safety still are).
    See "Eviction policies" above."""
    supports_quarantine: bool = True
    """Whether ``evict_prefix`` exists and follows the contract."""
    page_sizes: tuple[int, ...] = (1, 2, 4)
    """Page sizes the factory accepts; the suite runs each one up to 64."""
    checks_locks: bool = True
    """Whether an unmatched ``dec_lock_ref``, or a lock/unlock of a stale or foreign handle,
    raises. SGLang's does not (it trusts its callers); a target that says ``False`` is only sent
    paired unlocks and live handles, and the refusal properties are skipped, not failed."""
    supports_reset: bool = True
    """Whether ``reset()`` exists and follows the contract. ``False``: reset is never sent."""
    locks_only_after_match: bool = False
    """Whether the cache can lock only through a fresh match (see "Adapting a match-and-lock
    API" above). ``True``: a handle is locked only straight after the match that returned it."""
    validates_input: bool = True
    """Whether malformed arguments (see "Bad input" above) raise and change nothing. Engines'
    caches usually trust their callers here too; ``False``: bad input is never sent."""
    max_cached_pages: int | None = None
    """The most pages the cache can hold at once (a fixed KV pool, e.g. vLLM's ``num_gpu_blocks``),
    or ``None``. With a limit, the suite evicts before an insert that could overflow it, as a
    scheduler frees memory before it allocates, so the world stays within the pool (the
    production-scale world is then capped at it). A request longer than the pool is not sent (an
    engine refuses it); the scale test's history alone is 3,100 pages."""
    namespaces: bool = False
    """Whether ``match_prefix``, ``insert`` and ``evict_prefix`` take ``namespace=`` (see
    "Namespaces" above). ``True``: the suite sends requests under many adversarial namespaces and
    checks tenant isolation (oracle 10); ``False``: the keyword is never sent."""
    unsent_namespaces: tuple[str, ...] = ()
    """Kinds of namespace the engine's requests cannot carry, never sent (see "Namespaces" above):
    ``"empty"``, the empty string (vLLM's API refuses an empty ``cache_salt``; SGLang's API and ``Req``
    read an empty ``extra_key``/``cache_salt`` as none); ``"multimodal"``, a namespace with feature
    hashes (an engine that keys an image by the pad tokens it puts in the token ids, as SGLang does,
    has no namespace part for it); ``"decimal"``, an int beside its decimal string (``5`` and ``"5"``:
    an engine whose request fields are strings writes the int in decimal, so the two are one
    request); ``"float"`` and ``"bool"``, a namespace with a float or bool in it (``2.5``, ``1.0``,
    ``True``; with neither, the suite sends no two equal namespaces of different types). The suite
    draws its pairs and namespaces from what is left."""

    lifecycle: str = "off"
    """How the suite drives a request's lifecycle (see "The request lifecycle" above): ``"off"``
    (not driven), ``"tree"`` (the suite plays the engine with the tree calls) or ``"requests"``
    (the cache's own ``match_req``, ``lock_req``, ``cache_unfinished_req`` and ``cache_finished_req``)."""
    key_mode: str = "tokens"
    """What the tree is keyed by (see "Key modes" above): ``"tokens"``, or ``"bigram"`` (SGLang's
    ``is_eagle=True``: ``n`` raw tokens are ``n - 1`` keys, page-aligned in keys)."""

    second_pool: SlidingWindow | StatePool | None = None
    """A second pool beside the KV slots (see "A second pool" above): ``None`` (none), a
    :class:`SlidingWindow` or a :class:`StatePool`. The factory then gets ``second_allocator=``."""

    def __post_init__(self) -> None:
        policy = self.eviction_policy
        if not isinstance(policy, Policy) and (not isinstance(policy, str) or not policy):
            raise ValueError(f"Capabilities.eviction_policy must be a Policy or a non-empty str, got {policy!r}")
        for flag in ("supports_quarantine", "checks_locks", "supports_reset", "locks_only_after_match", "validates_input",
                     "namespaces"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"Capabilities.{flag} must be a bool, got {getattr(self, flag)!r}")
        if self.lifecycle not in LIFECYCLES:
            raise ValueError(f"Capabilities.lifecycle must be one of {', '.join(map(repr, LIFECYCLES))}, got {self.lifecycle!r}")
        if self.key_mode not in KEY_MODES:
            raise ValueError(f"Capabilities.key_mode must be one of {', '.join(map(repr, KEY_MODES))}, got {self.key_mode!r}")
        if self.key_mode == "bigram" and self.lifecycle == "requests":
            raise ValueError("Capabilities.key_mode='bigram' needs lifecycle 'off' or 'tree': the suite's Request holds one slot "
                             "per key, a bigram request one more (see \"Key modes\")")
        if self.second_pool is not None and not isinstance(self.second_pool, (SlidingWindow, StatePool)):
            raise ValueError(f"Capabilities.second_pool must be None, a SlidingWindow or a StatePool, got {self.second_pool!r}")
        unsent = self.unsent_namespaces
        if not isinstance(unsent, (tuple, list)) or any(kind not in NAMESPACE_KINDS for kind in unsent):
            raise ValueError(f"Capabilities.unsent_namespaces must be a tuple of {sorted(NAMESPACE_KINDS)}, got {unsent!r}")
        if unsent and not self.namespaces:
            raise ValueError("Capabilities.unsent_namespaces needs namespaces=True")
        object.__setattr__(self, "unsent_namespaces", tuple(unsent))
        sizes = self.page_sizes
        if not isinstance(sizes, (tuple, list)) or not sizes:
            raise TypeError(f"Capabilities.page_sizes must be a non-empty tuple of ints, got {sizes!r}")
        if any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in sizes):
            raise ValueError(f"Capabilities.page_sizes must hold positive ints, got {sizes!r}")
        object.__setattr__(self, "page_sizes", tuple(sizes))
        pages = self.max_cached_pages
        if pages is not None and (isinstance(pages, bool) or not isinstance(pages, int) or pages < 1):
            raise ValueError(f"Capabilities.max_cached_pages must be a positive int or None, got {pages!r}")

    @property
    def policy(self) -> Policy | None:
        """The declared :class:`Policy` whose order the eviction-order oracle judges, if any."""
        return self.eviction_policy if isinstance(self.eviction_policy, Policy) else None

    def page_sizes_tested(self) -> tuple[int, ...]:
        """The declared page sizes the suite runs: each one up to :data:`MAX_PAGE_SIZE_TESTED`."""
        return tuple(sorted(p for p in set(self.page_sizes) if p <= MAX_PAGE_SIZE_TESTED))

    def tenant_isolation(self) -> str:
        """The report card's "Tenant isolation" line: checked, or not exercised and why."""
        if not self.namespaces:
            return "not exercised: no namespaces declared (namespaces=False: the keyword is never sent)"
        sent = ("LoRA against salt, concatenations, falsy keys, ids sharing their low bits, long and unicode keys, "
                "values only their type tells apart")
        sent += "" if {"float", "bool"} <= set(self.unsent_namespaces) else ", equal values of different types"
        sent += "" if "multimodal" in self.unsent_namespaces else ", multimodal feature hashes"
        unsent = "; not sent: " + ", ".join(NAMESPACE_KINDS[k] for k in self.unsent_namespaces) if self.unsent_namespaces else ""
        return f"checked (oracle 10): tenants under adversarial namespaces ({sent}){unsent}"

    def not_exercised(self) -> list[str]:
        """What the suite leaves out for this target, and why: for headers and report cards."""
        gaps = []
        if isinstance(self.eviction_policy, str) and self.eviction_policy != "lru":
            gaps.append(f"eviction order (eviction_policy={self.eviction_policy!r} is a name, not a Policy key: "
                        "order not exercised; amount and lock safety still checked)")
        if not self.supports_quarantine:
            gaps.append("evict_prefix and the evict-equals-never-saw oracle (supports_quarantine=False)")
        if not self.checks_locks:
            gaps.append("refusal of unmatched unlocks and stale/foreign handles (checks_locks=False: only paired calls sent)")
        if not self.supports_reset:
            gaps.append("reset() (supports_reset=False: never sent)")
        if self.locks_only_after_match:
            gaps.append("locking a handle some steps after its match (locks_only_after_match=True)")
        if not self.validates_input:
            gaps.append("refusal of malformed arguments and page sizes (validates_input=False: never sent)")
        if not self.namespaces:
            gaps.append("tenant isolation (no namespaces declared: namespaces=False, the keyword is never sent)")
        if self.lifecycle == "off":
            gaps.append("the request lifecycle (lifecycle='off': chunked prefill, retract, abort, a skipped insert and a failed "
                        "admission are never sent)")
        if self.key_mode == "bigram":
            gaps.append("the scheduling bound and the construction tests' foreign handle and reset (key_mode='bigram': they "
                        "send raw sequences of their own; the state machines send keys)")
        for kind in self.unsent_namespaces:
            gaps.append(f"tenant isolation of {NAMESPACE_KINDS[kind]} (unsent_namespaces: never sent)")
        if self.second_pool is not None:
            gaps.append("the DFS serving runs (a second pool: they drive one pool; the state machines judge both pools)")
            if isinstance(self.second_pool, StatePool):
                gaps.append("a production-scale history 3,000 nodes deep (a state pool resumes only where a request ended: "
                            "the scale test's other stories run with states)")
        if self.max_cached_pages is not None:
            gaps.append(f"worlds beyond {self.max_cached_pages} cached pages (max_cached_pages: the suite evicts first)")
        above = sorted(set(self.page_sizes) - set(self.page_sizes_tested()))
        if above:
            gaps.append(f"page sizes {above} (above {MAX_PAGE_SIZE_TESTED})")
        # Imported here: the scale machine imports this module. Its crowd is the most locks any node gets.
        from radixcheck.properties.cache.scale_machine import CROWD, LOCK_COUNTER_BITS_CHECKED

        gaps.append(f"lock counters wider than {LOCK_COUNTER_BITS_CHECKED} bits (at most {CROWD[1]:,} requests hold one "
                    "prompt at once, in the production-scale test: a wider counter never wraps)")
        return gaps


DEFAULT_CAPABILITIES = Capabilities()
REQUEST_METHODS = ("match_req", "lock_req", "cache_unfinished_req", "cache_finished_req")


class Request:
    """A running request, as the suite (the engine) owns it and a ``lifecycle="requests"`` cache reads
    and updates it (see "The request lifecycle" above): SGLang's ``Req`` reduced to what its cache
    reads. ``slots[:filled]`` is the request's row (SGLang's ``req_to_token`` row): the KV slots of
    ``tokens[:filled]``; ``slots[:protected]`` are the tree's (under the request's lock, through
    ``handle``), the rest are the request's own. ``namespace`` is the tenant it runs under (vLLM's
    ``cache_salt``, SGLang's ``extra_key``; ``None``: the default namespace); ``priority`` the one its
    match and inserts carry (SGLang's ``req.priority``; 0 unless the declared policy takes one)."""

    def __init__(self, tokens: Sequence[int], namespace: Any = None, priority: int = 0) -> None:
        self.tokens: tuple[int, ...] = tuple(int(t) for t in tokens)
        self.namespace = namespace
        self.priority = int(priority)
        self.slots = np.zeros(0, dtype=np.int64)
        self.filled = 0
        self.protected = 0
        self.handle: Any = None
        self.window = np.zeros(0, dtype=np.int64)  # SlidingWindow: the window slot of each filled token, -1 where freed
        self.state = -1  # StatePool: the slot of the state after tokens[:filled] (-1: none)

    def compute(self, slots: Any, more_tokens: Sequence[int] = (), window: Any = None, state: int = -1) -> None:
        """The engine computed the next ``len(slots)`` tokens into ``slots`` (decode first appends the
        tokens it generated, ``more_tokens``); with a second pool, their window slots (``window``, one
        per slot) or the state after them (``state``)."""
        more = tuple(int(t) for t in more_tokens)
        fresh = np.asarray(slots, dtype=np.int64).reshape(-1)
        if self.filled + len(fresh) > len(self.tokens) + len(more):
            raise ValueError(f"compute: {len(fresh)} slots after {self.filled} filled, for {len(self.tokens) + len(more)} tokens")
        fresh_window = np.full(len(fresh), -1, dtype=np.int64) if window is None else np.asarray(window, dtype=np.int64).reshape(-1)
        if len(fresh_window) != len(fresh):
            raise ValueError(f"compute: {len(fresh_window)} window slots for {len(fresh)} slots")
        self.tokens += more
        self.slots = np.concatenate([self.slots[: self.filled], fresh])
        kept = np.concatenate([self.window[: self.filled], np.full(max(0, self.filled - len(self.window)), -1, dtype=np.int64)])
        self.window = np.concatenate([kept, fresh_window])
        self.filled += len(fresh)
        self.state = int(state)

    def __repr__(self) -> str:
        return f"Request({len(self.tokens)} tokens, filled={self.filled}, protected={self.protected})"


@runtime_checkable
class RadixCacheLike(Protocol):
    """The methods the suite calls. See the module docstring for their meaning."""

    page_size: int

    def match_prefix(self, tokens: Sequence[int]) -> tuple[np.ndarray, Any]: ...
    # With namespaces=True: match_prefix(tokens, namespace=None), insert(tokens, values, namespace=None)
    # and evict_prefix(tokens, namespace=None) (see "Namespaces" above).

    def insert(self, tokens: Sequence[int], values: np.ndarray) -> int: ...

    def inc_lock_ref(self, handle: Any) -> None: ...

    def dec_lock_ref(self, handle: Any) -> None: ...

    def evict(self, num_tokens: int) -> int: ...

    def evict_prefix(self, tokens: Sequence[int]) -> int: ...

    def total_size(self) -> int: ...

    def evictable_size(self) -> int: ...

    def protected_size(self) -> int: ...

    def reset(self) -> None: ...


CORE_METHODS = ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "total_size", "evictable_size", "protected_size")


def required_methods(capabilities: Capabilities) -> list[str]:
    """The methods the suite will call on a cache with these capabilities."""
    return (list(CORE_METHODS) + ["evict_prefix"] * capabilities.supports_quarantine + ["reset"] * capabilities.supports_reset
            + list(REQUEST_METHODS) * (capabilities.lifecycle == "requests")
            + list(SECOND_POOL_METHODS.get(type(capabilities.second_pool), ())))


class SlotAllocator:
    """The suite's KV slot pool. The cache under test receives it and calls ``free`` on eviction.

    It refuses (raises :class:`~radixcheck.oracles.violations.SlotViolation`) a double free or a free of an id it never handed out, and
    remembers every refusal in ``violations`` so a cache that swallows the exception is still
    caught.

    By default it hands slots out as a serving engine's pool does after hours of work
    (``churned=True``): freed slots come back first, in no particular order, and new ones are
    scattered over the pool, so no ``alloc`` looks like ``arange`` (a cache that assumes
    contiguous slots, or keys anything by a slot id it freed, shows itself). Which slots come out
    is fixed by ``seed``. ``churned=False`` gives ascending ids, freed ones last (benchmarks).
    """

    violation: type[Exception] = SlotViolation  # what a refused free raises

    def __init__(self, pool_size: int, seed: int = 0, churned: bool = True) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be a positive int, got {pool_size!r}")
        self.pool_size = pool_size
        self.churned = churned
        self._random = random.Random(seed)
        self._order = np.random.default_rng(seed)
        self._never_used = 0  # how many ids were ever handed out; unchurned, ids >= this are new
        self._stride = next(a for a in iter(lambda: self._random.randrange(1, max(2, pool_size)), None) if math.gcd(a, pool_size) == 1)
        self._offset = self._random.randrange(pool_size)
        self._recycled: list[int] = []
        self._taken_by_name = False  # take() was called: fresh ids may already be in use
        self.in_use: set[int] = set()
        self.freed_log: list[int] = []
        self.free_calls: list[int] = []  # len(freed_log) after each accepted free(): which call freed what
        self.violations: list[str] = []

    def reseed(self, seed: int) -> None:
        """Draw recycled slots, and the order of each allocation, from ``seed`` from now on (the
        never-used slots keep their order, so nothing handed out can come out twice)."""
        self._random = random.Random(seed)
        self._order = np.random.default_rng(seed)

    def available(self) -> int:
        return self.pool_size - len(self.in_use)

    def alloc(self, n: int) -> np.ndarray:
        """Hand out ``n`` slot ids (int64). Raises ``MemoryError`` if fewer are available."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"alloc needs a non-negative int, got {n!r}")
        if n > self.available():
            raise MemoryError(f"slot pool exhausted: asked {n}, {self.available()} free")
        ids = self._churned(int(n)) if self.churned else self._ascending(int(n))
        self.in_use.update(ids)
        return np.asarray(ids, dtype=np.int64)

    def take(self, ids: Any) -> np.ndarray:
        """Hand out exactly these slot ids (int64), each of which must be free: a caller that names
        its slots, as a repro file does. Raises ``ValueError`` (and changes nothing) otherwise."""
        wanted = [int(i) for i in np.asarray(ids, dtype=np.int64).reshape(-1)]
        busy = sorted(set(wanted) & self.in_use)
        if busy or len(set(wanted)) != len(wanted) or any(not 0 <= i < self.pool_size for i in wanted):
            raise ValueError(f"take() needs distinct free ids in [0, {self.pool_size}); in use: {busy[:8]}")
        self.in_use.update(wanted)
        self._taken_by_name = True
        if self._recycled:
            taken = set(wanted)
            self._recycled = [i for i in self._recycled if i not in taken]
        return np.asarray(wanted, dtype=np.int64)

    def _fresh(self, n: int, stride: int = 1, offset: int = 0) -> list[int]:
        """Up to ``n`` never-used ids, the ``k``-th being ``(stride * k + offset) % pool_size``
        (ids a caller took by name are skipped)."""
        ids: list[int] = []
        while len(ids) < n and self._never_used < self.pool_size:
            ks = np.arange(self._never_used, min(self.pool_size, self._never_used + n - len(ids)), dtype=np.int64)
            self._never_used += len(ks)
            batch = ((ks * stride + offset) % self.pool_size).tolist()
            ids += [i for i in batch if i not in self.in_use] if self._taken_by_name else batch
        return ids

    def _ascending(self, n: int) -> list[int]:
        ids = self._fresh(n)
        fresh = len(ids)
        ids += self._recycled[: n - fresh]
        del self._recycled[: n - fresh]
        return ids

    def _churned(self, n: int) -> list[int]:
        take = min(n, len(self._recycled))  # the free list's end first (freed slots are spliced in anywhere)
        ids = self._recycled[len(self._recycled) - take :]
        del self._recycled[len(self._recycled) - take :]
        ids += self._fresh(n - take, self._stride, self._offset)  # a permutation of the pool (the stride is coprime to it)
        ids = [ids[i] for i in self._order.permutation(len(ids)).tolist()]  # numpy's shuffle: 4x Python's at 100 ids
        if n > 1 and all(b == a + 1 for a, b in zip(ids, ids[1:], strict=False)):
            ids.reverse()  # never an arange by chance
        return ids

    def call_of(self, position: int) -> int:
        """Which accepted ``free`` call put ``freed_log[position]`` there (0-based)."""
        return bisect.bisect_right(self.free_calls, position)

    def frees_since(self, mark: int) -> list[list[int]]:
        """The slots each accepted ``free()`` call returned since ``freed_log`` was ``mark`` long, call by call."""
        if mark == len(self.freed_log):
            return []
        first = self.call_of(mark)
        starts = [mark] + self.free_calls[first:-1]
        return [self.freed_log[a:b] for a, b in zip(starts, self.free_calls[first:], strict=True)]

    def free(self, ids: Any) -> None:
        """Return slot ids to the pool. Accepts any 1-D integer array-like (NumPy, torch, list)."""
        arr = np.asarray(ids).reshape(-1)
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            self.violations.append(f"free() got non-integer ids of dtype {arr.dtype}")
            raise self.violation(self.violations[-1])
        ids_list = arr.tolist()
        ids_set = set(ids_list)
        bad = ids_set - self.in_use
        if bad or len(ids_set) != len(ids_list):
            what = sorted(bad)[:8] if bad else "duplicates within one call"
            self.violations.append(f"free() of ids not in use (double free or never allocated): {what}")
            raise self.violation(self.violations[-1])
        self.in_use.difference_update(ids_list)
        if self.churned:  # back into the free list at a random place
            at = self._random.randrange(len(self._recycled) + 1)
            self._recycled[at:at] = ids_list
        else:
            self._recycled.extend(ids_list)
        self.freed_log.extend(ids_list)
        self.free_calls.append(len(self.freed_log))


class SecondPoolAllocator(SlotAllocator):
    """The suite's second pool (a sliding window's KV slots, or state slots; see "A second pool"):
    a :class:`SlotAllocator` whose refused frees are second-pool violations (oracle 3s)."""

    violation = SecondSlotViolation


def second_pool_keywords(capabilities: Capabilities, pool_size: int = 1 << 20) -> dict[str, Any]:
    """The factory's keywords besides ``(allocator, page_size)``: ``second_allocator=`` a fresh pool
    when ``capabilities`` declares a second pool, else none (see "A second pool")."""
    return {} if capabilities.second_pool is None else {"second_allocator": SecondPoolAllocator(pool_size, seed=1)}
