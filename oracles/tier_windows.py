"""Oracle 20w — a sliding window's values through a host tier (the tier contract's "A sliding
window on the tiers").

Naive on purpose: the suite makes each token's window value from its KV, so a value is known
without asking the cache; what the oracle keeps is which tokens have it *live*, one flag per
token, per page of the tier model (by identity), on each tier:

* ``device[page]``: the flags of its device copy. An insert that puts the page on device sets
  them from the caller's window (a live value sent, or ``-1``); a load-back sets them from the
  host copy on the pages of the last ``W`` tokens of the path it loads, and revives from the host
  copy the tombstoned values of those pages that were on device already. Further back, a token
  tombstoned on device whose page's completed host copy has it live becomes *maybe* (``None``):
  the cache may restore it or not (SGLang restores a whole host segment, the contract's relaxed
  rule). A maybe is settled by what the cache shows: ``windows()`` reporting it (``-1`` or the
  token's own value) or a match ending where only its being live allows.
* ``host[page]``: the flags of its host copy, the device flags at the write's completion. A token
  tombstoned there while live on device is a maybe: the cache may back its window up later, alone
  (SGLang does), settled as a device maybe is.
* ``kept``: pages whose KV host copy was freed while their device copy lives. Their window host
  copy *may be kept* (SGLang frees only the full host duplicate): each of its live flags becomes a
  maybe that a match may count or not, each match anew (the suite sees no frees of window host
  copies, so a kept one may go any time), and that a load-back may restore, with its own values.

Each event costs the pages it touches (no scan of the tree); a page the model drops and caches
again is a new page, so nothing is ever cleared. When a request's forward reads its prefix, the
values ``windows(handle)`` reports must be, token by token, the suite's value where the device
flag is live, ``-1`` where it is not, and either where it is a maybe: never another value (a
value from nowhere or another token's).

It also says where a match must stop (:meth:`TierWindows.match_ends`): matches are *resumable*,
as on the plain machine's window pool (:meth:`~radixcheck.oracles.second_pool.WindowModel.resumable`),
on each tier: the device part ends at the longest page-aligned ``L`` whose last ``min(W, L)``
tokens are live on device, the host part at the longest whose last ``min(W, L)`` tokens are live
on device or in their page's completed host copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from radixcheck.oracles.violations import TenantIsolationViolation, TierWindowViolation, shown

NONE = -1
SINCE = "since operation {at}: "
"""How a finding says the event that made a window live when operations ran between it and the
read (:meth:`TierWindows.history`): the event's words follow, up to a ``;``."""
WINDOW_MODULUS = 999_999_937  # keeps the values short enough to read in a message


TWIN_WINDOW = "it read another tenant's window on device"
"""What a window leak between tenants says, whichever read met it (a ``windows()`` value, a match
that ends on a twin's live window): one finding (``failures.signature_of`` groups oracle 10's
messages that say it by this alone; a new user's B10 read one way at page size 1, the other at 2)."""


def window_value(kv: int) -> int:
    """The window value the suite sends for a token whose KV is ``kv``."""
    return int(kv) % WINDOW_MODULUS


def sent_window(content: Sequence[int], window: int) -> list[int]:
    """What an insert of tokens with KV ``content`` carries as ``window=``: a live value for the
    last ``window`` tokens (the request's own window), ``-1`` for those that slid out of it."""
    start = max(0, len(content) - window)
    return [window_value(kv) if i >= start else NONE for i, kv in enumerate(content)]


def resumable(end: int, window: int, page_size: int, live: Callable[[int], bool]) -> int:
    """The longest page-aligned ``L <= end`` whose last ``min(window, L)`` tokens are ``live``.

    Read from the end: if token ``i`` in the window of the longest ``L`` is dead, no ``L`` above
    ``i`` can do (each has ``i`` in its window), so try the page boundary at or below ``i``. Each
    token is read at most once."""
    end = end // page_size * page_size
    while end > 0:
        dead = next((i for i in range(end - 1, max(0, end - window) - 1, -1) if not live(i)), None)
        if dead is None:
            return end
        end = dead // page_size * page_size
    return 0


class TierWindows:
    """Which tokens of each cached page have a live window value, on device and on host."""

    def __init__(self, window: int, page_size: int) -> None:
        self.window = window
        self.page_size = page_size
        self.device: dict[Any, tuple[bool, ...]] = {}  # a tier model's Page -> its device copy's live flags
        self.host: dict[Any, tuple[bool, ...]] = {}  # ... -> its host copy's live flags
        self.why: dict[Any, str] = {}  # ... -> the event that set its device flags (for a message)
        self.at: dict[Any, int] = {}  # ... -> the operation of that event (clock's), for :meth:`history`
        self.clock: Callable[[], int] | None = None  # the world's operation count (None: no history said)
        self.kept: set[Any] = set()  # pages whose window host copy may outlive their KV host copy (:meth:`on_host_released`)

    def on_insert(self, pages: Sequence[Any], first: int, sent: Sequence[int], what: str) -> None:
        """An insert put ``pages`` on device (its page ``first`` onwards), with ``window=sent``."""
        p = self.page_size
        for k, page in enumerate(pages, start=first):
            self.device[page] = tuple(v != NONE for v in sent[k * p : (k + 1) * p])
            self._set_why(page, f"given by {what}")
            self._may_back_up(page)

    def on_write_done(self, pages: Sequence[Any]) -> None:
        """A write of ``pages`` completed: each host copy carries the page's live values."""
        for page in pages:
            own = self.device.get(page, (False,) * self.page_size)
            kept = self.host.get(page) if page in self.kept else None
            if kept is not None:  # a kept window host copy may stay where the device has none to write (SGLang's does)
                own = tuple(None if d is False and k is None else d for d, k in zip(own, kept, strict=True))
            self.host[page] = own

    def on_host_released(self, page: Any) -> None:
        """The cache freed ``page``'s KV host copy while its device copy lives: its window host copy
        may stay (the tier contract's "may be kept"), so each token live there is now a maybe."""
        host = self.host.get(page)
        if host is None:
            return
        self.host[page] = tuple(None if h is not False else False for h in host)
        self.kept.add(page)

    def _has_host(self, page: Any) -> bool:
        """Whether ``page`` has a window host copy to count: its KV host copy's, or a kept one."""
        return page.host is not None or page in self.kept

    def on_load_back(self, path: Sequence[Any], first: int, what: str) -> None:
        """A load-back returned the path ``path`` (its pages on device) and loaded its pages from
        ``first`` on: the pages holding its last ``min(W, L)`` tokens get their host copy's values
        back (a page on device already keeps its live ones; ``page.host`` says whether it has a
        host copy); further back, a token its host copy has live and the device not is a maybe."""
        p = self.page_size
        length = len(path) * p
        start = (length - min(self.window, length)) // p  # the first page of the window at the path's end
        for k, page in enumerate(path):
            host = self.host.get(page) if self._has_host(page) else None
            if k >= first:  # loaded: it had no device copy, its flags come from host
                own: tuple[bool | None, ...] = (False,) * p
            elif host is None:  # on device, no completed host copy: nothing to restore from
                continue
            else:
                own = self.device.get(page, (False,) * p)
            host = host or (False,) * p
            if k >= start:  # in the window: restored (a maybe in either copy stays one)
                flags = tuple(True if True in (d, h) else None if None in (d, h) else False for d, h in zip(own, host, strict=True))
                say = "restored" if k >= first else "revived"
                copy = "host copy" if page.host is not None else "window host copy, kept when its KV host copy was freed"
                self._set_why(page, f"{say} from its {copy} by {what}, within the last {self.window} tokens")
            else:  # further back: the cache may restore the host copy's values or leave them tombstoned
                flags = tuple(d if d is not False or h is False else None for d, h in zip(own, host, strict=True))
                if k >= first:
                    self._set_why(page, f"loaded back by {what}, further back than the window at the path's end, where "
                                        "its host copy's value and -1 are both its own")
            self.device[page] = flags
            self._may_back_up(page)

    def _set_why(self, page: Any, why: str) -> None:
        self.why[page] = why
        if self.clock is not None:
            self.at[page] = self.clock()

    def history(self, page: Any, default: str = "") -> str:
        """Why ``page``'s window is live, for a finding read now. Read right after the event that
        made it live (no operation between), the event is said as it is: it is the likely cause (a
        load-back that did not restore a page is not one that did not revive one; two bugs, two
        findings). Read later, the event is history, said after :data:`SINCE` and left out of the
        finding's shape (``failures.shape_of``): a value lost by a later call (a tenant's insert
        onto its twin, a new user's trial's B10) is one finding whether a load-back restored it, one
        revived it or an insert gave it (it gave one per event)."""
        why = self.why.get(page, default)
        at, now = self.at.get(page), self.clock() if self.clock is not None else None
        if not why or at is None or now is None or now - at <= 1:
            return why
        return f"{SINCE.format(at=at)}{why.replace(f' of operation {at}', '')}; {now - at - 1} operation(s) ran before this read"

    def _may_back_up(self, page: Any) -> None:
        """The cache may back a page's live window up into its existing host copy later, with no KV
        write the suite sees (SGLang's incremental SWA backup after an insert onto a host-backed
        node, ``SWAComponent._collect_unbacked_swa_nodes_in_window``): a token tombstoned in the host
        copy and live on device becomes a maybe there, settled as the others are."""
        host = self.host.get(page)
        if host is None or page.host is None:
            return
        own = self.device.get(page, (False,) * self.page_size)
        self.host[page] = tuple(None if h is False and d is True else h for h, d in zip(host, own, strict=True))

    def live(self, path: Sequence[Any], i: int, host_too: bool) -> bool:
        """Whether token ``i`` of ``path`` has its window live on device (or, ``host_too``, in its
        page's completed host copy); a maybe is not (yet) live."""
        p = self.page_size
        page = path[i // p]
        if page.device is not None and self.device.get(page, (False,) * p)[i % p] is True:
            return True
        return host_too and page.host is not None and self.host.get(page, (False,) * p)[i % p] is True

    def _maybe(self, path: Sequence[Any], i: int, host_too: bool) -> dict[Any, tuple[bool | None, ...]] | None:
        """Where token ``i`` of ``path`` is a maybe (its host copy's value restored or not): the
        device flags, or (``host_too``) the host copy's (written from a device maybe), else None."""
        p = self.page_size
        page = path[i // p]
        if page.device is not None and self.device.get(page, (False,) * p)[i % p] is None:
            return self.device
        if host_too and self._has_host(page) and self.host.get(page, (False,) * p)[i % p] is None:
            return self.host
        return None

    def _settle(self, path: Sequence[Any], end: int, got: int | None, host_too: bool) -> int:
        """Where a part ending within ``end`` tokens must stop; ``got``, the cache's answer, is
        taken when some choice of the maybes allows it: those in its window live, every other
        one tombstoned (the choice that stops every longer end soonest). Those in its window are
        then live (the cache showed they are)."""
        p, w = self.page_size, self.window
        strict = resumable(end, w, p, lambda i: self.live(path, i, host_too))
        if got is None or got == strict or got % p or got > end:
            return strict
        needed = {i: flags for i in range(max(0, got - w), got)
                  if not self.live(path, i, host_too) and (flags := self._maybe(path, i, host_too)) is not None}
        if not needed or resumable(end, w, p, lambda i: self.live(path, i, host_too) or i in needed) != got:
            return strict
        for i, flags in needed.items():
            page = path[i // p]
            if flags is self.host and page.host is None:  # a kept window host copy: may go before the next match
                continue
            settled = list(flags[page])
            settled[i % p] = True
            flags[page] = tuple(settled)
        return got

    def match_ends(self, path: Sequence[Any], device: int, reach: int,
                   answer: tuple[int, int] | None = None) -> tuple[int, int]:
        """Where a match along ``path`` (cached pages, in order) stops when its full KV is on device
        for ``device`` tokens and on device or host for ``reach``: the device part's end (its window
        live on device) and the host part's (its window live on device or in a completed host copy).
        ``answer``, the cache's two ends, settles the maybes it relies on (:meth:`_settle`)."""
        got_device, got_reach = answer if answer is not None else (None, None)
        return self._settle(path, device, got_device, False), self._settle(path, reach, got_reach, True)

    def check(self, what: str, tokens: Sequence[int], pages: Sequence[Any], reported: Any,
              tenant_of: Callable[[int, int], str | None] | None = None) -> None:
        """``reported`` (the cache's ``windows(handle)``) for the path ``pages`` of ``tokens``.
        ``tenant_of(i, value)`` names the other namespace whose window value of token ``i`` that is
        (the tier model's :meth:`~radixcheck.oracles.tier_model.TierModel.window_tenant`): such a
        value is a leak between tenants (oracle 10), as a read of another tenant's KV is."""
        try:
            got = [int(v) for v in reported]
        except (TypeError, ValueError) as exc:
            raise TierWindowViolation(f"windows() of {what} returned {reported!r}, not a sequence of ints") from exc
        p = self.page_size
        flags = [(kv, live) for page in pages for kv, live in zip(page.content, self.device.get(page, (False,) * p), strict=True)]
        want = [window_value(kv) if live is True else NONE for kv, live in flags]
        if len(got) == len(want):  # a maybe shows either: settled by what the cache reports
            want = [g if live is None and g in (NONE, window_value(kv)) else w for g, w, (kv, live) in zip(got, want, flags, strict=True)]
        if got == want:
            for k, page in enumerate(pages):
                if None in self.device.get(page, ()):
                    self.device[page] = tuple(v != NONE for v in got[k * p : (k + 1) * p])
            return
        if len(got) != len(want):
            raise TierWindowViolation(f"windows() of {what} returned {len(got)} values for a path of {len(want)} tokens "
                                       f"({shown(tokens)})")
        i = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
        page = pages[i // p]
        why = self.history(page)
        own = window_value(flags[i][0])
        other = tenant_of(i, got[i]) if tenant_of is not None and got[i] not in (NONE, own) else None
        if other is not None:
            mine = {True: f"{own}", False: "(-1: tombstoned there)", None: f"({own} or -1)"}[flags[i][1]]
            raise TenantIsolationViolation(f"windows() of {what}: {TWIN_WINDOW}: token {i} (in {page}) reports window value "
                                           f"{got[i]}: {other}'s window value of that token, not its own {mine}")
        if want[i] == NONE and flags[i][1] is not None:
            say = f"a live window value {got[i]}, but it is tombstoned there"
        elif got[i] == NONE:
            say = f"-1 (tombstoned), but its window value {want[i]} is live there"
        else:  # a value that is no one's here: one wording whether -1 would have passed or not (the model's
            # knowledge, not the cache's bug: a trial's B1 was two findings, one per wording; the why says which)
            say = f"window value {got[i]}, neither its own {own} nor -1"
        raise TierWindowViolation(f"windows() of {what}: token {i} (in {page}) reports {say}" + (f" ({why})" if why else ""))
