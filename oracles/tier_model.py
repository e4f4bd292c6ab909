"""Oracles 13-19 — the tier model: where every cached page is, and what each pool's slots hold.

A tiered cache, seen from outside, is a set of cached pages (a trie of pages, as in the
prefix-set model), each on device, on host, or both. This model learns *where* from the suite's
own pools and controller, never from the cache: an insert puts a page on device, a write's
completion puts a copy on host, a load's start puts it back on device, and a free takes it off a
tier. Each of those events is checked as it happens, and a page that has left both tiers is gone
(kept, flagged, so a later answer that still counts it is classified by why it went).

**Namespaces.** For a target that declares them, each namespace has its own trie of pages
(``roots``, by the namespace's own equality; the default namespace ``None`` is ``root``), on both
tiers, and its KV differs (a LoRA's, a salt's: :meth:`TierModel.content_of`). Tenant isolation
(oracle 10) across both tiers: a match under N counts only N's pages, device or host, and a
load-back under N (``serving``) reads only N's host copies. Two leaves of a leak that would read
as residency slips are filed here too: a request that reads another namespace's KV
(:meth:`TierModel.tenant_whose`), and an answer under N that stops at a page whose twin under
another namespace was quarantined. A page names its namespace (its ``repr``).

**Order.** The model stamps every page a match or an insert covers with its clock and keeps the
device leaves in that order (:mod:`radixcheck.oracles.tier_order`): while the world runs an
``evict`` call (``evicting``), each page it frees, and under write-back each leaf whose write-back
it starts, is judged against the least recently used candidate left. A declared
:class:`~radixcheck.properties.cache.policies.Policy` (``policy``) orders them by its key instead,
over the statistics the model counts per page (:meth:`TierModel.stats`): a page keeps them
through every move between the tiers. An order finding is kept (``order_violation``) and raised by
the world once ``evict`` returns, never from inside the cache's call.

**Known deviations.** A waiver ``4 LRU order  known: <name>`` (or ``4 eviction order``, or the
host tier's ``4h host eviction order``) names a known order bug
(:mod:`radixcheck.oracles.deviation`); the machine puts it in ``deviations``. The model then marks
where a cache's nodes end (a use ended there, or the trie forked there), tells each deviation of a
use that ends inside a node (a split), of a page that leaves the device (staying on host, or not)
and of a page that leaves its last tier, and marks an order finding of 4t or 4h ``explained_by``
the deviations by whose statistics the pick was right (the world waives it once a run; a pick
right by none is still the finding). Each deviation's device leaves are kept in its own order
(``deviated``), refiled with the contract's and after each hook it is told of, so explaining a pick
reads that order's oldest candidate, as oracle 4t reads its own: the production world's mass evict
costs 1.5 to 2 times the contract's alone, not a scan of every leaf a pick (which took over the
5 s limit there).

**A known order bug named by a policy.** A device order finding (4t) carries the pick's ``choice``
(:class:`~radixcheck.oracles.policy.Choice`: the statistics of the pages taken and of the candidates
left), as the cache machine's order finding does, so a waiver ``4 eviction order as <policy>`` judges
it the same way (the policy could have made that pick) in the tier machine and production world.

Every method costs what it reads or changes (the pages of one request, the slots of one call);
only :meth:`TierModel.held` reads every slot, for the conservation check of a small world.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from radixcheck.oracles.deviation import Deviation
from radixcheck.oracles.policy import Choice, LeafStats
from radixcheck.oracles.tier_amount import TierAmount
from radixcheck.oracles.tier_host_order import HostLeaves, check_host_order
from radixcheck.oracles.tier_order import DeviceLeaves, check_device_order, check_device_policy, is_device_leaf
from radixcheck.oracles.tier_windows import TWIN_WINDOW, window_value
from radixcheck.oracles.violations import (
    BackupChainViolation,
    EvictionOrderViolation,
    FailedBackupViolation,
    HostEvictionOrderViolation,
    HostGapViolation,
    HostOrphanViolation,
    HostSlotViolation,
    LRUOrderViolation,
    NeverSawViolation,
    PersistViolation,
    RefcountViolation,
    SlotViolation,
    TenantIsolationViolation,
    TierResidencyViolation,
    TierWindowViolation,
    TombstoneViolation,
    TransferInFlightViolation,
    WindowMatchViolation,
    shown,
    shown_namespace,
)

MASK = (1 << 62) - 1
_serials = itertools.count()
NOT_SERVING = object()  # TierModel.serving between load-backs


def kv_after(previous: int, token: int, position: int) -> int:
    """The KV the suite writes for ``token`` at ``position`` after a prefix whose last KV was
    ``previous``: it depends on the whole prefix, as a transformer's does."""
    return ((previous * 1_000_003) ^ (token + 1) ^ (position << 40)) & MASK


@dataclass(eq=False)
class Page:
    page: tuple[int, ...]
    parent: Page | None
    depth: int = 0
    content: tuple[int, ...] = ()  # the KV of each of its tokens
    children: dict[tuple[int, ...], Page] = field(default_factory=dict)
    device: tuple[int, ...] | None = None
    host: tuple[int, ...] | None = None  # a completed copy
    writing: tuple[int, ...] | None = None  # host slots of a pending write
    loading: bool = False
    transfers_below: int = 0  # pending writes and loads on the pages below it (a cache may keep their path)
    failed_backup: bool = False  # its last backup failed to allocate, and it has no host copy
    failed_ever: bool = False
    locks: int = 0
    gone: str = ""  # "" while cached; else how it went: "device", "host", "quarantine"
    failed_when_gone: bool = False  # a backup on its chain had failed when it left
    namespace: Hashable = None  # the namespace whose trie it is in
    last_use: int = 0  # the clock of the last match or insert that covered it
    created: int = 0  # the clock of the insert that cached it
    hits: int = 0  # inserts that covered it (and matches, if the policy counts them)
    priority: int = 0  # the highest priority of the inserts that covered it
    serial: int = field(default_factory=lambda: next(_serials))
    locked_by: str = ""  # the operation that last locked it (for a lock-left-behind message)
    released_in_flight: str = ""  # how an unlock of it came while a transfer moved it (a cache may skip those)
    ends_node: bool = False  # a use ended here, or the trie forked here: a cache node ends after it (kept for deviations only)

    @property
    def prefix(self) -> tuple[int, ...]:
        pages, node = [], self
        while node is not None:
            pages.append(node.page)
            node = node.parent
        return tuple(t for page in reversed(pages) for t in page)

    def __repr__(self) -> str:
        """Its tokens and, outside the default namespace, its tenant (two tenants' pages of the same
        tokens are two pages: a message names which), then where it is."""
        return self.named()

    def named(self, tenant_always: bool = False, tenant: bool = True) -> str:
        """As ``repr``; ``tenant_always``: the default namespace said too (beside another tenant's page);
        ``tenant=False``: no namespace (a message said it before a list of its pages)."""
        where = "+".join(t for t, v in (("device", self.device), ("host", self.host)) if v is not None) or "nowhere"
        tenant_said = " under namespace None" if tenant_always and self.namespace is None else _under(self.namespace)
        said = tenant_said if tenant else ""
        return f"Page({shown(self.prefix)}{said}, {where}{', gone by ' + self.gone if self.gone else ''})"


class TierModel:
    def __init__(self, page_size: int, write_policy: str, chain_checked: bool = True, policy: Any = None) -> None:
        self.page_size = page_size
        self.write_policy = write_policy
        self.chain_checked = chain_checked  # False: a write-back cache that writes the evicted leaf alone
        self.root = Page((), None, gone="")
        self.roots: dict[Hashable, Page] = {None: self.root}  # namespace -> its trie's root
        self.salts: dict[Hashable, int] = {None: 0}  # namespace -> what its KV starts from
        self.clock = 0
        self.used_by: dict[int, Any] = {}  # clock -> the call that set it (its str, for messages)
        self.saying = ""  # the world's operation running now, "w.end(0, 'retract') (operation 7)" (for messages)
        self.policy = policy  # a declared Policy (its key orders device eviction), or None: least recently used first
        self.leaves = DeviceLeaves(self._order)
        self.host_leaves = HostLeaves(self._order)  # the host-only leaves, for oracle 4h
        self.evicting_host: int | None = None  # the num_tokens of the evict_host call running now (oracle 4h)
        self.evicting: int | None = None  # the num_tokens of the evict call running now, judged for order
        self.order_violation: Exception | None = None  # oracle 4t's first finding in that call, raised when it returns
        self.amount: TierAmount | None = None  # the steps of the evict or evict_host call running now (their amount)
        self.serving: Any = NOT_SERVING  # the namespace of the load-back running now
        self.quarantining: tuple[list[Page], Any] | None = None  # the evict_prefix running now: its doomed pages, its namespace
        self.device_owner: dict[int, Page] = {}  # device slot -> the page it holds (cached, or in flight)
        self.host_owner: dict[int, Page] = {}  # host slot -> the page it holds (a copy, or a pending write)
        self.in_flight_device: set[int] = set()
        self.in_flight_host: set[int] = set()
        self.left_now: list[tuple[Page, str]] = []  # pages that lost a tier during the current call
        self.host_freed_now: set[int] = set()  # host slots freed during the current call
        self.deviated: list[tuple[Deviation, DeviceLeaves]] = []  # each known deviation, and the device leaves in its order
        self.windows: Any = None  # a declared window's TierWindows (oracle 20w): matches are then resumable
        self.parking: Any = None  # a target-only state pool's TierStates: a match's device part ends at a state on device
        self.flushing = False  # a reset runs: its frees take every page, judged by what it leaves (the world's reset)

    @property
    def deviations(self) -> list[Deviation]:
        """The known order bugs a waiver names (``known:``): their stamps are kept too."""
        return [deviation for deviation, _ in self.deviated]

    @deviations.setter
    def deviations(self, deviations: list[Deviation]) -> None:
        """Keep, beside each deviation, the device leaves in the order a cache with that bug keeps
        them, refiled as the contract's are, and after each hook the deviation is told of: its order
        is then read from its oldest leaf (as oracle 4t's), never by a scan of every leaf."""
        self.deviated = []
        for deviation in deviations:
            leaves = DeviceLeaves(lambda pg, d=deviation: self._deviated_order(pg, d))
            for _, _, page in self.leaves.by_use:  # set before the first call in every world: none, or a few
                leaves.refile(page)
            self.deviated.append((deviation, leaves))

    # ---- reading ---------------------------------------------------------------------------

    def root_of(self, namespace: Hashable) -> Page:
        """The root of ``namespace``'s trie (made on its first use)."""
        if namespace not in self.roots:
            self.roots[namespace] = Page((), None, namespace=namespace)
            self.salts[namespace] = len(self.salts) * 0x9E37_79B9
        return self.roots[namespace]

    def pages_of(self, tokens: Sequence[int], namespace: Hashable = None) -> list[Page]:
        """The cached pages along ``tokens`` under ``namespace``, then the first gone one if the path stops at one."""
        p, node, path = self.page_size, self.roots.get(namespace), []
        if node is None:
            return path
        for pos in range(0, len(tokens) // p * p, p):
            node = node.children.get(tuple(tokens[pos : pos + p]))
            if node is None:
                break
            path.append(node)
            if node.gone:
                break
        return path

    def expected_match(self, tokens: Sequence[int], namespace: Hashable = None, windowed: bool = False,
                       answer: tuple[int, int] | None = None) -> tuple[list[int], int, list[Page]]:
        """The device slots and the host tokens a match of ``tokens`` answers, and the path. On the
        full KV alone (what is on device, what an insert finds cached), unless ``windowed`` and a
        window is declared (``windows``): then a match is resumable, each part ending where the
        window is live (:meth:`~radixcheck.oracles.tier_windows.TierWindows.match_ends`; ``answer``,
        the cache's two ends, settles the window values a load-back may or may not have restored)."""
        path = [pg for pg in self.pages_of(tokens, namespace) if not pg.gone]
        device: list[int] = []
        i = 0
        while i < len(path) and path[i].device is not None:
            device.extend(path[i].device)
            i += 1
        host = 0
        while i < len(path) and path[i].device is None and path[i].host is not None:
            host += self.page_size
            i += 1
        ends = self._ends()
        if windowed and ends is not None:
            device_end, reach = ends.match_ends(path, len(device), len(device) + host, answer)
            device, host = device[:device_end], reach - device_end
        return device, host, self.pages_of(tokens, namespace)

    def _ends(self) -> Any:
        """What makes a match resumable short of the full KV (its ``match_ends``), or None: a declared
        window, else a state pool whose load-backs restore their target's state only."""
        return self.windows if self.windows is not None else self.parking

    def tenant_whose(self, tokens: Sequence[int], kv: Sequence[Any], namespace: Hashable = None) -> str | None:
        """Which other namespace's KV for ``tokens`` starts with ``kv`` where ``namespace``'s does not
        (a read of another tenant's copy: "namespace 'b'", "namespace None" for the default one), or
        ``None``: no leak. Each namespace's KV differs from its first token on (:meth:`content_of`),
        so this is exact, never a coincidence of a few values. The answer is a name, never the
        namespace itself: the default namespace is ``None``, which would read as "no leak" (a leak
        from it was filed under oracle 13)."""
        if not kv or self.content_of(tokens, namespace)[: len(kv)] == list(kv):
            return None
        for other in list(self.roots):
            if other != namespace and self.content_of(tokens, other)[: len(kv)] == list(kv):
                return f"namespace {other!r}"
        return None

    def window_tenant(self, tokens: Sequence[int], i: int, value: int, namespace: Hashable = None) -> str | None:
        """Which other namespace's window value of token ``i`` of ``tokens`` ``value`` is ("namespace
        'b'"), or None: a window value read from another tenant's page (oracle 10). The suite makes a
        token's window value from its KV (:func:`~radixcheck.oracles.tier_windows.window_value`), and
        each namespace's KV differs, so one lookup per namespace the model knows, never a scan."""
        for other in list(self.roots):
            if other != namespace and window_value(self.content_of(tokens[: i + 1], other)[i]) == value:
                return f"namespace {other!r}"
        return None

    def content_of(self, tokens: Sequence[int], namespace: Hashable = None) -> list[int]:
        """The KV the suite writes for ``tokens`` under ``namespace`` (each namespace's differs, as a LoRA's does)."""
        self.root_of(namespace)
        out, previous = [], self.salts[namespace]
        for position, token in enumerate(tokens):
            previous = kv_after(previous, int(token), position)
            out.append(previous)
        return out

    # ---- the answers ------------------------------------------------------------------------

    def check_match(self, tokens: Sequence[int], values: Sequence[int], host_length: int, namespace: Hashable = None) -> None:
        device, host, path = self.expected_match(tokens, namespace, windowed=True,
                                                 answer=(len(values), len(values) + host_length))
        self._check_isolated(f"match_prefix({shown(tokens)}{_under(namespace)})", values, namespace)
        if host_length > host:
            self._check_host_isolated(tokens, len(device) + host, host_length - host, namespace)
        what = f"match({shown(tokens)}{_under(namespace)})"
        if len(values) + host_length < len(device) + host:
            self._check_twin_quarantined(what, tokens, len(values) + host_length, namespace)
        if list(values) != device:
            self._check_window_end(what, "device", len(values), len(device), tokens, namespace,
                                   slots_agree=list(values) == device[: len(values)])
            raise TierResidencyViolation(f"{what} returned device slots {list(values)[:8]} ({len(values)}), but the pages on "
                                         f"device hold {device[:8]} ({len(device)})")
        if host_length == host:
            return
        self._check_window_end(what, "host", len(values) + host_length, len(device) + host, tokens, namespace)
        if host_length < host:
            raise TierResidencyViolation(f"{what} counted {host_length} tokens on host, but {host} are")
        beyond = path[(len(device) + host) // self.page_size] if len(path) * self.page_size > len(device) + host else None
        self._counted_wrongly(f"{what} counted {host_length} tokens on host, {host} are", beyond)

    def rematch(self, what: str, tokens: Sequence[int], values: Sequence[int], namespace: Hashable = None) -> list[int]:
        """The device slots a publish's re-match of ``tokens`` (the cache's own, inside a request
        method) answers, the request reading ``values``; a window's end judged as a match's device
        part is (oracles 20w, 21, 23). The caller judges the slots."""
        device = self.expected_match(tokens, namespace, windowed=True, answer=(len(values), None))[0]
        if list(values) != device:
            self._check_window_end(what, "device", len(values), len(device), tokens, namespace,
                                   slots_agree=list(values) == device[: len(values)])
        return device

    def check_load_back(self, tokens: Sequence[int], values: Sequence[int], namespace: Hashable = None,
                        before: int | None = None) -> None:
        """``before``: the path's tokens on device before the load-back (a window declared)."""
        device, _, path = self.expected_match(tokens, namespace)
        what = f"load_back of {shown(tokens)}{_under(namespace)}"
        self._check_isolated(what, values, namespace)
        if list(values) == device:
            return
        if self._failed_load_resumes(tokens, values, device, before, namespace):
            return
        if len(values) > len(device):
            beyond = path[len(device) // self.page_size] if len(path) * self.page_size > len(device) else None
            self._counted_wrongly(f"{what} returned {len(values)} slots, but only {len(device)} tokens of the path are on "
                                  "device", beyond)
        self._check_twin_quarantined(what, tokens, len(values), namespace)
        raise TierResidencyViolation(f"{what} returned slots {list(values)[:8]}, the path's device pages hold {device[:8]}")

    def _resume_end_after_failed_load(self, tokens: Sequence[int], device: list[int], before: int | None,
                                      namespace: Hashable, answered: int) -> int | None:
        """Where a request resumes on the device path ``device`` after a load-back that moved nothing
        (its load failed): the longest end whose window is live on device (maybes settled by the
        cache's ``answered`` end), which may be short of the full KV on device (SGLang's
        ``init_load_back`` keeps the device match's node). None if the load moved something, or no
        window is declared."""
        ends = self._ends()
        if ends is None or before is None or len(device) > before:
            return None
        path = [pg for pg in self.pages_of(tokens, namespace) if not pg.gone]
        return ends.match_ends(path, len(device), len(device), (answered, None))[0]

    def _failed_load_resumes(self, tokens: Sequence[int], values: Sequence[int], device: list[int],
                             before: int | None, namespace: Hashable) -> bool:
        """A load-back that moved nothing returned ``values`` short of the device path: exactly the
        device pages up to where the request resumes."""
        if len(values) >= len(device):
            return False
        end = self._resume_end_after_failed_load(tokens, device, before, namespace, len(values))
        return end == len(values) and list(values) == device[:end]

    def check_failed_load_end(self, tokens: Sequence[int], values: Sequence[int], namespace: Hashable = None,
                              before: int | None = None) -> None:
        """After a load-back that moved nothing and returned the whole device path (and revived the
        window at its end from host copies, as a load-back does): that path must end where its
        window is live on device, or the request resumes at a tombstone (oracle 21)."""
        device = self.expected_match(tokens, namespace)[0]
        if not device or list(values) != device:
            return
        end = self._resume_end_after_failed_load(tokens, device, before, namespace, len(device))
        if end is not None and end != len(device):
            last = min(self.windows.window, len(device))
            raise TombstoneViolation(f"load_back of {shown(tokens)}{_under(namespace)}: its load moved nothing, and it returned "
                                     f"the whole device path ({len(device)} tokens), but the last {last} tokens of it do not all "
                                     f"have their window live on device: a request resumes only after {end}")

    def _check_window_end(self, what: str, part: str, got: int, want: int, tokens: Sequence[int],
                          namespace: Hashable, slots_agree: bool = True) -> None:
        """Oracles 21 and 23 on the tiers: a match whose ``part`` ends after ``got`` tokens, not the
        ``want`` its window allows, where the full KV alone reaches ``got``: past ``want``, it ignored
        the window (23); short of it, at a tombstone, a tombstone hid the live window beyond (21);
        short of it where the model has the window live (and, ``slots_agree``, the cache's slots are
        the path's up to where it stopped), the cache lost or tombstoned a window value (20w: a new
        user's trial had that filed as residency, 13, naming neither the window nor a token)."""
        if self.windows is None or got == want or got % self.page_size:
            return
        device, host, _ = self.expected_match(tokens, namespace)
        path = [pg for pg in self.pages_of(tokens, namespace) if not pg.gone]
        full = len(device) if part == "device" else len(device) + host
        tier = "on device" if part == "device" else "on device or in a host copy"
        if want < got <= full:
            self._check_window_of_twin(what, part, got, tokens, namespace)
            raise WindowMatchViolation(f"{what}: its {part} part ends after {got} tokens, but a request resumes only where "
                                       f"the last {self.windows.window} tokens have their window live {tier}: after "
                                       f"{want} (the full KV alone reaches {full})")
        hosted = [i for i in range(max(got, want - self.windows.window), want) if not self.windows.live(path, i, False)]
        if got < want and part == "host" and hosted:  # that window is live only in host copies: the cache has none there
            raise TierWindowViolation(f"{what}: its host part stops after {got} tokens, short of {want}: the window of "
                                      f"token {hosted[0]} is live in the host copy of {path[hosted[0] // self.page_size]} "
                                       "(a write carries its page's live window values), so a load-back resumes there")
        revived = [i for i in range(max(got, want - self.windows.window), want)
                   if self.windows.why.get(path[i // self.page_size], "").startswith("revived")]
        if got < want and revived:  # the load-back that revived that window on device: did the cache revive it?
            page = path[revived[0] // self.page_size]
            raise TierWindowViolation(f"{what}: its {part} part stops after {got} tokens, short of {want}: the window of "
                                      f"token {revived[0]} in {page} is live on device ({self.windows.why[page]}), so a "
                                       "request resumes there")
        dead = [i for i in range(got, want) if not self.windows.live(path, i, part == "host")]
        if got < want and dead:
            raise TombstoneViolation(f"{what}: its {part} part stops after {got} tokens, at the tombstoned window of "
                                     f"token {dead[0]}, but the last {self.windows.window} tokens before {want} have "
                                     f"their window live {tier}: a request resumes there")
        if got < want and slots_agree:  # the model has no tombstone there: the cache stopped at one it made (or lost)
            i = max(got, want - self.windows.window)
            page = path[i // self.page_size]
            # one wording however many tokens (a window trial's B9 read "token 0 ... its" at one page size and
            # "tokens 2 to 3 ... their" at the other: two shapes, two findings)
            raise TierWindowViolation(f"{what}: its {part} part stops after {got} tokens, short of {want}: the window of "
                                      f"the {want - i} token(s) from token {i} is live on device (token {i}'s in {page}, "
                                      f"{self.windows.history(page, 'given by an insert')}), with the full KV; the match "
                                      "stopped before it, at a window value the cache tombstoned or lost")

    def _check_window_of_twin(self, what: str, part: str, got: int, tokens: Sequence[int], namespace: Hashable) -> None:
        """Oracle 10 through a window: a match under ``namespace`` whose device part ends after
        ``got`` tokens, further than its own window allows, where the window of another namespace's
        twin pages (the same tokens) is live on device over the last ``min(W, got)`` tokens: the
        answer read that tenant's window (a window table keyed by the tokens alone), a leak, not a
        match-length slip (a new user's B10 was filed under 23 at one page size, 10 at the other)."""
        if part != "device" or self.windows is None:
            return
        start = max(0, got - self.windows.window)
        for other in list(self.roots):
            twins = [pg for pg in self.pages_of(tokens, other) if not pg.gone] if other != namespace else []
            if len(twins) * self.page_size >= got and all(self.windows.live(twins, i, False) for i in range(start, got)):
                raise TenantIsolationViolation(f"{what}: {TWIN_WINDOW}: its device part ends after {got} tokens, where only "
                                               f"{_of_tenant(twins[(got - 1) // self.page_size])}, its twin, has the "
                                               f"window of the last {got - start} tokens live on device (a window kept "
                                               "by the tokens alone?)")

    def _check_twin_quarantined(self, what: str, tokens: Sequence[int], answered: int, namespace: Hashable) -> None:
        """Oracle 10 across a quarantine: an answer under ``namespace`` that stops short (``answered``
        tokens, device and host, fewer than it has) at a page whose twin, the same tokens under
        another namespace, was quarantined (``evict_prefix`` under that namespace): that tenant's
        quarantine reached this tenant's page (a tier keyed by the tokens alone), a tenant leak,
        not a residency slip (a new user's trial had it filed under oracle 13). Any other short
        answer is left to the residency oracles."""
        p = self.page_size
        at = answered // p
        mine = [pg for pg in self.pages_of(tokens, namespace) if not pg.gone]
        if at >= len(mine):
            return
        for other in self.roots:
            twins = self.pages_of(tokens, other) if other != namespace else []
            if at < len(twins) and twins[at].gone == "quarantine":
                raise TenantIsolationViolation(f"{what} stops after {answered} tokens, before {mine[at]}: its twin "
                                               f"{_of_tenant(twins[at])} was quarantined by evict_prefix under that "
                                               "namespace, and this tenant's answer stopped there with it (pages keyed "
                                               "by their tokens alone?)")

    def _check_isolated(self, what: str, device_slots: Sequence[int], namespace: Hashable) -> None:
        """Oracle 10 on device: no slot an answer under ``namespace`` returns holds another namespace's page."""
        for slot in device_slots:
            page = self.device_owner.get(int(slot))
            if page is not None and page.namespace != namespace:
                raise TenantIsolationViolation(f"{what} returned device slot {int(slot)}, which holds {_of_tenant(page)}")

    def _check_host_isolated(self, tokens: Sequence[int], start: int, extra: int, namespace: Hashable) -> None:
        """Oracle 10 on host: a match under ``namespace`` that counts ``extra`` host tokens more than
        the namespace has after ``start`` counted another namespace's host copies, if one has them there
        and it has none of its own (with its own there, its answer ran past its window: 23's)."""
        p = self.page_size
        mine = [pg for pg in self.pages_of(tokens, namespace) if not pg.gone][start // p : (start + extra) // p]
        if len(mine) == extra // p and all(pg.host is not None or pg.writing is not None for pg in mine):
            return  # its own copies are there, past where its window lets it resume: a window's slip, not a leak
        for other, root in self.roots.items():
            if other == namespace or root is None:
                continue
            path = [pg for pg in self.pages_of(tokens, other) if not pg.gone]
            there = path[start // p : (start + extra) // p]
            if there and all(pg.host is not None or pg.writing is not None for pg in there):
                raise TenantIsolationViolation(f"match_prefix({shown(tokens)}{_under(namespace)}) counted {extra} tokens on "
                                               f"host past the {start} its namespace has: those are the host copies of "
                                               f"{_pages_of_tenant(there)}")

    def _counted_wrongly(self, what: str, beyond: Page | None) -> None:
        if beyond is not None and beyond.gone == "quarantine":
            raise NeverSawViolation(f"{what}: {beyond} was quarantined (evict_prefix), a cache that never saw it has nothing there")
        if beyond is not None and (beyond.failed_when_gone or self._failed_on_chain(beyond)):
            raise FailedBackupViolation(f"{what}: {beyond} left the device when its backup had failed to allocate; it is "
                                        "on no tier")
        if beyond is not None and (beyond.gone or beyond.host is None):
            raise HostGapViolation(f"{what}: it went past {beyond}, which is not on host (a gap)")
        raise TierResidencyViolation(what)

    # ---- the suite's events -----------------------------------------------------------------

    def stats(self, page: Page) -> LeafStats:
        """What a policy's key reads of ``page`` (``start`` and ``history`` are not kept: a policy
        that reads them is refused at load, ``TierCapabilities``)."""
        p = self.page_size
        return LeafStats(page.last_use, page.created, page.hits, page.priority, page.depth * p, (page.depth - 1) * p,
                         page.depth * p)

    def _order(self, page: Page) -> Any:
        return page.last_use if self.policy is None else self.policy.key(self.stats(page))

    def on_insert(self, tokens: Sequence[int], values: Sequence[int], namespace: Hashable = None, what: Any = "",
                  priority: int = 0) -> int:
        """Before ``insert(tokens, values)`` is sent (its backups start inside it): the pages it
        caches take ``values`` unless on device already, and are used now. Returns the ``prefix_len``
        it must return."""
        p = self.page_size
        aligned = len(tokens) // p * p
        device, _, _ = self.expected_match(tokens[:aligned], namespace)
        content = self.content_of(tokens[:aligned], namespace)
        self._tick(what)
        node = self.root_of(namespace)
        path: list[Page] = []  # the pages it covers
        for pos in range(0, aligned, p):
            page = tuple(tokens[pos : pos + p])
            child = node.children.get(page)
            if child is None or child.gone:
                if self.deviations and (not path or not path[-1].created == self.clock):
                    self._node_ends(path)  # the first new page hangs here: a fork, or the end of a leaf
                child = Page(page, node, node.depth + 1, tuple(content[pos : pos + p]), namespace=namespace,
                             created=self.clock)
                node.children[page] = child
            child.hits += 1
            child.priority = max(child.priority, priority) if child.hits > 1 else priority
            if child.device is None:
                child.device = tuple(int(v) for v in values[pos : pos + p])
                for s in child.device:
                    self.device_owner[s] = child
            child.last_use = self.clock
            self._refile(child)
            self._refile(node)
            node = child
            path.append(child)
        if self.deviations:
            self._window_start_ends_node(path, len(device) // p)
            self._node_ends(path)
        return len(device)

    def _window_start_ends_node(self, path: list[Page], on_device: int) -> None:
        """Under a declared window, an insert whose first ``on_device`` pages were on device, and whose
        window (its last window of tokens, rounded up to pages) starts past them, ends a node where its
        window starts. SGLang splits there whatever holds that token: the new leaf, or the host-only
        node the insert un-evicts (``SWAComponent._clip_to_window``, from ``commit_insert_component_data``
        and from ``recover_after_unevict``, both by ``_populate_range``); the adapter's window start
        (``swa_evicted_seqlen``) is 0, no split, once the device prefix reaches the window. Both halves
        are used by this insert; a later use that diverges in the upper half splits only that half, so a
        deviation must not stamp the window's node with it."""
        if self.windows is None:
            return
        start = len(path) - -(-self.windows.window // self.page_size)  # the window's first page
        if start > on_device:
            path[start - 1].ends_node = True

    def _refile(self, page: Page) -> None:
        """``page`` moved, changed tier or was used: file it again among the device and the host-only leaves."""
        self.leaves.refile(page)
        self.host_leaves.refile(page)
        for _, leaves in self.deviated:
            leaves.refile(page)

    def _tick(self, what: Any) -> None:
        self.clock += 1
        self.used_by[self.clock] = what or f"time {self.clock}"

    def use(self, tokens: Sequence[int], namespace: Hashable = None, what: Any = "",
            answer: tuple[int, int | None] | None = None) -> None:
        """A ``match_prefix`` answered (and checked): the pages it covered, device and host part, are
        used now. ``answer``, the match's two ends (as :meth:`check_match` took them): a kept window
        host copy is a maybe each match anew, never settled, so without the answer a match that
        counted one would cover fewer pages here than the cache used (a false alarm of oracle 4t).
        A publish's re-match reports its device end only (``None`` for the other)."""
        device, host, _ = self.expected_match(tokens, namespace, windowed=True, answer=answer)
        self._tick(what)
        covered = [pg for pg in self.pages_of(tokens, namespace) if not pg.gone][: (len(device) + host) // self.page_size]
        for page in covered:
            page.last_use = self.clock
            if self.policy is not None and self.policy.hits_on_match:
                page.hits += 1
            self._refile(page)
        if self.deviations:
            self._node_ends(self._walked(tokens, namespace))

    def _walked(self, tokens: Sequence[int], namespace: Hashable = None) -> list[Page]:
        """The pages a match walks: every page of ``tokens`` cached on a tier. A cache splits the node
        where that walk ends, which may lie past the answer's end: a dead window ends the answer, but
        SGLang's walk (``UnifiedTreeCore._match_prefix_helper``) reads the full KV only. Without a
        window the two ends are one."""
        device, host, _ = self.expected_match(tokens, namespace)
        return [pg for pg in self.pages_of(tokens, namespace) if not pg.gone][: (len(device) + host) // self.page_size]

    def _node_ends(self, path: list[Page]) -> None:
        """A cache node ends after ``path[-1]``; if the use ended inside one (a page below it on a
        single chain), a cache splits it there: each known deviation is told, with the last page of
        the split node's lower half (as :meth:`PrefixSetModel._node_ends` does)."""
        if not path or path[-1].ends_node:
            return
        entry = path[-1]
        entry.ends_node = True
        inside = any(not c.gone for c in entry.children.values())
        on_device = None  # the deepest page of the lower half still on device: a node is on one tier whole,
        while True:       # so the pages below it, on host only, are another node's
            below = [c for c in entry.children.values() if not c.gone]
            if len(below) != 1:
                break
            entry = below[0]
            if entry.device is not None:
                on_device = entry
            if entry.ends_node:
                break
        if inside:
            for deviation in self.deviations:
                deviation.split(path[-1], on_device or entry, self.clock)
            for page in _split_node(path[-1], on_device or entry):  # what a split may have restamped
                self._refile_deviated(page)

    def _refile_deviated(self, page: Page) -> None:
        """A deviation's hook may have changed ``page``'s statistics: file it again in each deviation's order."""
        for _, leaves in self.deviated:
            leaves.refile(page)

    def _deviated_order(self, page: Page, deviation: Deviation) -> Any:
        """``page``'s place in the eviction order as a cache with the known bug ``deviation`` keeps it."""
        stats = deviation.stats(self.stats(page), page)
        return stats.last_use if self.policy is None else self.policy.key(stats)

    def _deviations_explaining(self, picked: list[Page]) -> frozenset[str]:
        """The known deviations by whose statistics picking ``picked`` (and leaving the other candidates) is right."""
        names = set()
        for deviation, leaves in self.deviated:
            oldest = leaves.oldest_candidate(picked, self.busy)  # the first candidate left in that order
            if oldest is None or not self._deviated_order(oldest, deviation) < max(
                    self._deviated_order(pg, deviation) for pg in picked):
                names.add(deviation.name)
        return frozenset(names)

    def busy(self, page: Page) -> bool:
        """Not a candidate: a transfer is in flight on it, or on a page below it. A cache may keep a
        transfer's path on device (SGLang's load-back and write-through lock it), which matters once
        the page being moved was cut off by ``evict_prefix`` and its parent looks like a leaf."""
        return page.loading or page.writing is not None or page.transfers_below > 0

    @staticmethod
    def _mark_path(page: Page, delta: int) -> None:
        """Count a transfer starting (+1) or landing (-1) on ``page`` in each of its ancestors."""
        node = page.parent
        while node is not None:
            node.transfers_below += delta
            node = node.parent

    def _judge_pick(self, picked: list[Page], how: str) -> None:
        """Oracle 4t: an ``evict`` call took ``picked``; nothing older may stay."""
        if self.evicting is None or not picked:
            return
        oldest = self.leaves.oldest_candidate(picked, self.busy)
        try:
            if self.policy is None:
                check_device_order(picked, oldest, self.evicting, how, lambda t: self.used_by.get(t, f"time {t}"))
            else:
                check_device_policy(picked, oldest, self.evicting, how, self._order, self._describe, str(self.policy))
        except (LRUOrderViolation, EvictionOrderViolation) as violation:
            # Kept, not raised here: this hook runs inside the cache's evict (a free, a host allocation),
            # and an exception there would leave the cache half way through its call (or be swallowed by
            # a cache that catches its allocator's errors). The world raises it once evict returns.
            # A pick a waived known deviation explains is kept only until one no deviation explains.
            violation.explained_by = self._deviations_explaining(picked) if self.deviations else frozenset()
            kept = self.order_violation
            if kept is None or (kept.explained_by and not violation.explained_by):
                violation.choice = self._choice(picked)  # what a waiver's 'as <policy>' judges, as on a plain cache
                self.order_violation = violation

    def _choice(self, picked: list[Page]) -> Choice:
        """The statistics of the pages one pick took and of every other candidate left beside them (read
        only on a wrong pick: it walks the device leaves), as the cache machine keeps them on an order finding."""
        taken = {id(p) for p in picked}
        left = [page for _, _, page in self.leaves.by_use if id(page) not in taken and not page.locks and not self.busy(page)]
        return Choice(tuple(map(self.stats, picked)), tuple(map(self.stats, left)))

    def _judge_host_pick(self, slots: list[int]) -> None:
        """Oracle 4h: an ``evict_host`` call frees the host copies in ``slots``; its host-only picks
        must follow the order (kept, raised by the world once the call returns)."""
        kept = self.order_violation
        if self.evicting_host is None or (kept is not None and not getattr(kept, "explained_by", ())):
            return
        picked: list[Page] = []
        for s in slots:
            page = self.host_owner.get(s)
            if page is not None and page.host is not None and page.device is None and not page.gone and page not in picked:
                picked.append(page)
        try:
            check_host_order(picked, self.host_leaves, self.evicting_host, self._describe_host, self._host_rule())
        except HostEvictionOrderViolation as violation:
            # as in _judge_pick: a pick a waived known deviation explains is kept only until one none explains
            violation.explained_by = self._host_deviations_explaining(picked) if self.deviations else frozenset()
            if kept is None or not violation.explained_by:
                self.order_violation = violation

    def _host_rule(self) -> str:
        return "least recently used" if self.policy is None else f"by {self.policy}'s key"

    def _host_deviations_explaining(self, picked: list[Page]) -> frozenset[str]:
        """The known deviations by whose statistics the host picks ``picked`` are right: oracle 4h's
        replay, over the same host-only leaves ordered as the deviating cache keeps them."""
        names = set()
        for deviation in self.deviations:
            leaves = HostLeaves(lambda pg, d=deviation: self._deviated_order(pg, d))
            for _, _, page in self.host_leaves.by_order:
                leaves.refile(page)
            try:
                check_host_order(picked, leaves, self.evicting_host or 0, self._describe_host, self._host_rule())
            except HostEvictionOrderViolation:
                continue
            names.add(deviation.name)
        return frozenset(names)

    def _describe_host(self, page: Page) -> str:
        if self.policy is None:
            return f"last used by {self.used_by.get(page.last_use, page.last_use)}"
        return f"{self._describe(page)}, key {self._order(page)!r}"

    def _describe(self, page: Page) -> str:
        return (f"last used by {self.used_by.get(page.last_use, page.last_use)}, cached at time {page.created}, "
                f"{page.hits} hits, priority {page.priority}")

    def check_prefix_len(self, tokens: Sequence[int], prefix_len: int, expected: int) -> None:
        if prefix_len != expected:
            raise TierResidencyViolation(f"insert({shown(tokens)}) returned prefix_len {prefix_len}, but {expected} "
                                         "tokens of it were on device")

    def _pages_of_slots(self, slots: Sequence[int], owner: dict[int, Page], what: str) -> list[Page]:
        p = self.page_size
        if len(slots) == 0 or len(slots) % p:
            raise TierResidencyViolation(f"{what} of {len(slots)} slots: not whole pages")
        pages = []
        for at in range(0, len(slots), p):
            page = owner.get(int(slots[at]))
            if page is None:
                raise TierResidencyViolation(f"{what} of slots {as_ints(slots)[:8]}: slot {int(slots[at])} holds no cached page")
            pages.append(page)
            if at and page.parent is not pages[-2]:
                raise TierResidencyViolation(f"{what}: its pages {pages[-2]} and {page} are not one path, in order")
        return pages

    def on_write(self, device_slots: Sequence[int], host_slots: Sequence[int] | None) -> None:
        pages = self._pages_of_slots(device_slots, self.device_owner, "a write")
        p = self.page_size
        for i, page in enumerate(pages):
            if page.device != tuple(int(s) for s in device_slots[i * p : (i + 1) * p]):
                raise TierResidencyViolation(f"a write copies {as_ints(device_slots)[:8]}, not {page}'s device slots in order "
                                             f"{list(page.device or ())}: the host copy would not be its KV")
            if page.host is not None or page.writing is not None:
                raise TierResidencyViolation(f"a second backup of {page}, already on host or being written")
        if self.write_policy == "write_back":  # a write-back an eviction starts picks its leaf
            self._judge_pick([pg for pg in pages if is_device_leaf(pg)], "wrote back")
            if host_slots is not None and self.evicting is not None and self.amount is not None:
                self.amount.write_back(_leaving_together(pages), p)
        top = pages[0].parent
        if self.chain_checked and top.parent is not None and top.host is None and top.writing is None:
            raise BackupChainViolation(f"{pages[0]} was backed up while its parent {top} is neither on host nor being "
                                       "written: a gap in the backup chain")
        if host_slots is None:
            for page in pages:
                page.failed_backup = page.failed_ever = True
            return
        for i, page in enumerate(pages):
            page.writing = tuple(int(s) for s in host_slots[i * p : (i + 1) * p])
            self._mark_path(page, +1)
            for s in page.writing:
                self.host_owner[s] = page
        self.in_flight_device.update(int(s) for s in device_slots)
        self.in_flight_host.update(int(s) for s in host_slots)

    def on_load(self, host_slots: Sequence[int], host_in_use: set[int]) -> None:
        """A load asked for: checked before its device slots are allocated."""
        freed = [int(s) for s in host_slots if int(s) not in host_in_use or int(s) in self.host_freed_now]
        if freed:
            raise TransferInFlightViolation(f"a load reads host slots {freed[:8]} that were freed during this call (a "
                                            "nested eviction freed what the load-back uses)")
        pages = self._pages_of_slots(host_slots, self.host_owner, "a load")
        foreign = [pg for pg in pages if self.serving is not NOT_SERVING and pg.namespace != self.serving]
        if foreign:
            raise TenantIsolationViolation(f"a load-back{_under(self.serving)} reads host slots {as_ints(host_slots)[:8]}, the "
                                           f"host copy of {_of_tenant(foreign[0])}")
        p = self.page_size
        for i, page in enumerate(pages):
            if page.host != tuple(int(s) for s in host_slots[i * p : (i + 1) * p]):
                raise TierResidencyViolation(f"a load reads {as_ints(host_slots)[:8]}, not {page}'s completed host copy")
            if page.device is not None:
                raise TierResidencyViolation(f"a load of {page}, which is on device already")
        top = pages[0].parent
        if top.parent is not None and top.device is None:
            raise HostGapViolation(f"a load of {pages[0]} while its parent {top} is not on device: load-back went past "
                                   "the first page it did not load")

    def on_load_started(self, host_slots: Sequence[int], device_slots: Sequence[int]) -> None:
        p = self.page_size
        for at in range(0, len(host_slots), p):
            page = self.host_owner[int(host_slots[at])]
            page.device = tuple(int(s) for s in device_slots[at : at + p])
            page.loading = True
            self._mark_path(page, +1)
            for s in page.device:
                self.device_owner[s] = page
            self._refile(page)
            self._refile(page.parent)
        self.in_flight_device.update(int(s) for s in device_slots)
        self.in_flight_host.update(int(s) for s in host_slots)

    def on_ack(self, kind: str, device_slots: Sequence[int], host_slots: Sequence[int], device_kv: dict[int, int],
               host_kv: dict[int, int]) -> None:
        """A completion, after the controller copied the KV."""
        self.in_flight_device.difference_update(int(s) for s in device_slots)
        self.in_flight_host.difference_update(int(s) for s in host_slots)
        p = self.page_size
        owner = self.host_owner if kind == "write" else self.device_owner
        slots = host_slots if kind == "write" else device_slots
        kv = host_kv if kind == "write" else device_kv
        for at in range(0, len(slots), p):
            page = owner[int(slots[at])]
            got = [kv.get(int(s)) for s in slots[at : at + p]]
            if got != list(page.content):
                raise TierResidencyViolation(f"after the {kind} of {page}, its {'host' if kind == 'write' else 'device'} "
                                             f"slots hold KV {got}, not its own {list(page.content)}")
            if kind == "write":
                if self.windows is not None:  # the host copy carries the page's live window values (oracle 20w)
                    self.windows.on_write_done([page])
                page.host, page.writing, page.failed_backup = page.writing, None, False
                self.host_leaves.refile(page)
            else:
                page.loading = False
            self._mark_path(page, -1)

    def on_device_free(self, slots: Sequence[int]) -> None:
        if self.flushing:
            return
        busy = [int(s) for s in slots if int(s) in self.in_flight_device]
        if busy:
            raise TransferInFlightViolation(f"device slots {busy[:8]} freed while a transfer still reads or fills them")
        pages = []
        for s in slots:
            page = self.device_owner.get(int(s))
            if page is None:
                raise SlotViolation(f"the cache freed device slot {int(s)}, which no cached page holds (a caller's?)")
            if page.locks and not page.gone:
                raise RefcountViolation(f"{page} left the device while a request holds a lock on it")
            self._judge_quarantine_scope(page, "device")
            if page not in pages:
                pages.append(page)
        self._judge_pick([pg for pg in pages if not pg.gone], "freed")
        if self.evicting is not None and self.amount is not None:  # a page whose write-back it counted: counted once
            fresh = [int(s) for s in slots if self.device_owner[int(s)].serial not in self.amount.written]
            self.amount.step(len(fresh), f"freed {pages[0]}{' and more' if len(pages) > 1 else ''}")
        for s in slots:
            page = self.device_owner.pop(int(s))
            if page.device is not None:
                self.left_now.append((page, "device"))
                page.device = None
                page.released_in_flight = ""  # freed: no lock was left behind on it
                self._refile(page)
                self._refile(page.parent)
                stays = page.host is not None or page.writing is not None  # still cached, on host
                for deviation in self.deviations:
                    deviation.left_device(page) if stays else deviation.unlinked(page)
                self._refile_deviated(page.parent)  # a deviation hands a page's stamp to its parent

    def on_host_free(self, slots: Sequence[int]) -> None:
        if self.flushing:
            return
        busy = [int(s) for s in slots if int(s) in self.in_flight_host]
        if busy:
            raise TransferInFlightViolation(f"host slots {busy[:8]} freed while a write to them is pending or a load reads "
                                            "them")
        self.host_freed_now.update(int(s) for s in slots)
        for s in slots:
            page = self.host_owner.get(int(s))
            if page is not None:
                self._judge_quarantine_scope(page, "host")
        self._judge_host_pick([int(s) for s in slots])
        if self.evicting_host is not None and self.amount is not None:
            page = self.host_owner.get(int(slots[0])) if len(slots) else None
            self.amount.step(len(slots), f"freed {page}{' and more' if len(slots) > self.page_size else ''}")
        for s in slots:
            page = self.host_owner.pop(int(s), None)
            if page is None:
                raise HostSlotViolation(f"the cache freed host slot {int(s)}, which holds no page")
            if page.host is not None:
                self.left_now.append((page, "host"))
                page.host = None
                self._refile(page)
                self._refile(page.parent)
                if page.device is None:  # it left its last tier
                    for deviation in self.deviations:
                        deviation.unlinked(page)
                    self._refile_deviated(page.parent)
                elif self.windows is not None:  # a host duplicate released: its window host copy may stay
                    self.windows.on_host_released(page)

    def _judge_quarantine_scope(self, page: Page, tier: str) -> None:
        """Inside ``evict_prefix`` a free is of a page at or below the cut: the call makes no room (no
        backup, no load), so it evicts nothing else; another namespace's page is oracle 10's, one of
        its own namespace off the branch the never-saw oracle's (the rest of the tree is unchanged)."""
        if self.quarantining is None or page.gone:
            return
        doomed, namespace = self.quarantining
        if any(page is d for d in doomed):
            return
        said = f"evict_prefix{_under(namespace)} freed the {tier} copy of {_of_tenant(page)}, which is not at or below its cut"
        if page.namespace != namespace:
            raise TenantIsolationViolation(f"{said}: it belongs to another namespace")
        raise NeverSawViolation(f"{said}: the rest of the tree must stay as it was")

    def settle(self) -> None:
        """At the end of each cache call: a page that left the device left no page below it there
        (the device pages stay prefix-closed); pages that left their last tier are gone, and must
        have taken everything below them along."""
        if self.flushing:
            return
        left, self.left_now = self.left_now, []
        self.host_freed_now = set()
        for page, tier in left:
            if page.gone or page.device is not None or page.host is not None or page.writing is not None:
                continue
            page.gone = tier
            page.failed_when_gone = self._failed_on_chain(page)
            self._refile(page)
            if tier == "device" and self.write_policy == "write_through" and not self._chain_failed(page):
                raise PersistViolation(f"write-through: {page} left the device without a host copy, and no backup on its "
                                       "chain had failed")
        for page, tier in left:
            below = [c for c in page.children.values() if c.device is not None and not c.gone]
            if tier == "device" and not page.gone and page.device is None and below:
                raise TierResidencyViolation(f"{page} left the device while {below[0]} below it stays on device: the "
                                             "device pages are no longer prefix-closed (no device part reaches it)")
        for page, tier in left:
            if page.gone != tier:
                continue
            below = [c for c in page.children.values() if not c.gone]
            if below and tier == "host":
                raise HostOrphanViolation(f"host eviction freed {page} while {below[0]} below it stays cached: its subtree "
                                          "is orphaned")
            if below:
                raise HostGapViolation(f"{page} left the device with no host copy while {below[0]} below it stays cached "
                                       "(a gap in the path)")

    def _failed_on_chain(self, page: Page) -> bool:
        """Its backup, or one its backup waited for, failed, and it has no host copy."""
        node = page
        while node is not None and node.parent is not None:
            if node.failed_backup:
                return True
            node = node.parent
        return False

    def _chain_failed(self, page: Page) -> bool:
        node = page
        while node is not None and node.parent is not None:
            if node.failed_ever:
                return True
            node = node.parent
        return False

    def quarantine(self, tokens: Sequence[int], namespace: Hashable = None) -> tuple[list[Page], list[Page]]:
        """``evict_prefix(tokens)``: every cached page at or below the cut is gone. Returns those,
        and the pages below the cut that left the device when a backup had failed (a cache that
        kept them would count them as removed)."""
        p = self.page_size
        cut = (len(tokens) - 1) // p * p
        head = tuple(tokens[cut:])
        path = [pg for pg in self.pages_of(tokens[:cut], namespace) if not pg.gone]
        if len(path) * p < cut:
            return [], []
        node = path[-1] if path else self.root_of(namespace)
        doomed, ghosts, stack = [], [], [c for c in node.children.values() if c.page[: len(head)] == head]
        while stack:
            page = stack.pop()
            if page.gone:
                ghosts += [page] if page.failed_when_gone else []
            else:
                page.gone = "quarantine"
                doomed.append(page)
                self._refile(page)
            stack.extend(page.children.values())
        self._refile(node)
        return doomed, ghosts

    def lock(self, tokens: Sequence[int], delta: int, namespace: Hashable = None) -> None:
        for page in self.pages_of(tokens, namespace):
            if not page.gone:
                page.locks += delta
                if delta > 0:
                    page.locked_by = self.saying
                elif self.saying and (page.loading or page.writing is not None):
                    # an unlock while a transfer moves the page: a cache that skips those keeps the lock, and
                    # the page then stays on device against the order (a new user's B3): kept to name that lock
                    moving = "its load" if page.loading else "its write to host"
                    taken = f" (taken by {page.locked_by})" if page.locked_by else ""
                    page.released_in_flight = f"its unlock by {self.saying} came while {moving} was in flight{taken}"

    # ---- conservation ----------------------------------------------------------------------

    def held(self) -> tuple[set[int], set[int]]:
        """The device and host slots the cache must hold now: those of cached pages, and those a
        pending transfer uses."""
        device = {s for s, pg in self.device_owner.items() if not pg.gone or s in self.in_flight_device}
        host = {s for s, pg in self.host_owner.items() if not pg.gone or s in self.in_flight_host}
        return device, host

    def sizes(self) -> tuple[int, int]:
        device = {pg for pg in self.device_owner.values() if not pg.gone}
        host = {pg for pg in self.host_owner.values() if not pg.gone and pg.host is not None}
        return len(device) * self.page_size, len(host) * self.page_size


def check_conservation(model: TierModel, device_in_use: set[int], caller_slots: set[int], host_in_use: set[int],
                       device_size: int, host_size: int) -> None:
    """Oracle 3 on each tier separately, and the sizes each tier reports."""
    device, host = model.held()
    expected = device | caller_slots
    if device_in_use != expected:
        raise SlotViolation(f"device slots leaked {sorted(device_in_use - expected)[:8]} / freed while held "
                            f"{sorted(expected - device_in_use)[:8]}")
    if host_in_use != host:
        raise HostSlotViolation(f"host slots leaked {sorted(host_in_use - host)[:8]} / freed while held "
                                f"{sorted(host - host_in_use)[:8]}")
    want_device, want_host = model.sizes()
    if device_size < want_device:
        raise SlotViolation(f"device slots leaked: device_size() is {device_size}, but its pages still hold {want_device} "
                            "allocated device slots (a page left the cache without freeing them)")
    if host_size < want_host:
        raise HostSlotViolation(f"host slots leaked: host_size() is {host_size}, but its pages still hold {want_host} "
                                "allocated host slots (a page left the cache without freeing them)")
    if (device_size, host_size) != (want_device, want_host):
        raise TierResidencyViolation(f"device_size() {device_size}, host_size() {host_size}: the pages on device hold "
                                     f"{want_device} tokens, on host {want_host}")


def _leaving_together(path: list[Page]) -> list[Page]:
    """The pages of a write-back's ``path`` that leave the device with it: the device leaf at its
    end and, above it, each page whose only pages on device below are those (a node of several
    pages written back whole, as SGLang's is); an ancestor written first (top-down) is not one."""
    leaving: list[Page] = []
    for page in reversed(path):
        below = [c for c in page.children.values() if c.device is not None and not c.gone]
        if not all(c in leaving for c in below):
            break
        leaving.append(page)
    return leaving


def _of_tenant(page: Page) -> str:
    """``page`` as an isolation message names another tenant's: its namespace said even when it is the default
    one, inside the parentheses as every page names its tenant (``Page([0] under namespace None, host)``)."""
    return page.named(tenant_always=True)


def _pages_of_tenant(pages: list[Page]) -> str:
    """The pages (of one other namespace) an isolation message counted, each named, so the count agrees
    with the tokens it says (a new user's B1 read "counted 2 tokens" beside one page); their namespace
    said once, before them (a long tenant key is not repeated); the list reads as one shape however
    long (``failures.shape_of``), so a bug met at two page sizes is one finding."""
    named = [pg.named(tenant=False) for pg in pages]
    if len(named) > 3:
        named = [named[0], named[1], "…", named[-1]]
    listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    return f"{len(pages)} page{'s' if len(pages) > 1 else ''} under namespace {shown_namespace(pages[0].namespace)}: {listed}"


def _under(namespace: Any) -> str:
    return "" if namespace is None or namespace is NOT_SERVING else f" under namespace {shown_namespace(namespace)}"


def _split_node(upper: Page, lower: Page) -> list[Page]:
    """The pages of the node a use ended inside: ``lower`` up to ``upper`` (where it is split), then
    up to the node above. A deviation's split may restamp these, no others (:class:`Deviation`)."""
    pages, page = [], lower
    while page is not None and page is not upper:
        pages.append(page)
        page = page.parent
    while page is not None and page.parent is not None:
        pages.append(page)
        page = page.parent
        if page.ends_node:
            break
    return pages


def as_ints(values: np.ndarray | Sequence[int]) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]
