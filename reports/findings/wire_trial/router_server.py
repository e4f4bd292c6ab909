#!/usr/bin/env python3
"""A router's prefix cache, served over radixcheck's wire protocol (JSON lines on stdin/stdout).

Shaped as a KV-aware router holds it: one radix tree per worker (each ``new`` is a worker), each
tree split by tenant (the request's namespace: LoRA id, cache salt), one LRU clock per worker
across its tenants, the worker's KV slot ids as values. Standard library only, on purpose: it
stands for a server in another language and shares no code with radixcheck.

``--bug NAME`` plants one bug (see BUGS below); without it the server is meant to be correct.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import sys

BUGS = {
    "handles-per-cache": "handle ids counted per worker, so a handle of worker 1 names a node of worker 2",
    "error-reply-no-id": "a refusal's reply carries no id (the error path forgets the request)",
    "tenant-by-text": "tenants keyed by the text of their value: 5 and \"5\" are one tenant",
    "quarantine-all-tenants": "evict_prefix cuts the branch in every tenant of the worker",
    "match-no-refresh": "a match does not refresh recency (only inserts do)",
    "split-loses-lock": "a split's new parent starts unlocked",
    "crash-on-locked-split": "splitting a locked node raises (reply: error 13 crash)",
    "ids-recycled": "node ids of evicted nodes are reused for new nodes",
    "freed-one-reply-late": "the slots an evict frees are reported on the next reply",
    "spin-when-empty": "evict loops until it freed enough, even when nothing is evictable",
    "dies-on-deep-reset": "reset frees the tree recursively; a deep tree overflows the stack and the process dies",
    "sizes-scan-tree": "evictable_size walks the whole tree (O(n) per call)",
}
BUG = ""
if "--bug" in sys.argv:
    BUG = sys.argv[sys.argv.index("--bug") + 1]
    if BUG not in BUGS:
        sys.exit(f"unknown bug {BUG!r}; one of {', '.join(BUGS)}")

CAPABILITIES = {
    "eviction_policy": "lru", "page_sizes": [1, 4], "checks_locks": True, "validates_input": True,
    "supports_quarantine": True, "supports_reset": True, "namespaces": True, "lifecycle": "tree",
}


class Refused(Exception):
    """Bad input or a forbidden lock: error 1000, nothing changed."""


class Malformed(Exception):
    """A request the server cannot understand: error 12."""


SEQ = itertools.count()  # heap tie-breaker


class Node:
    __slots__ = ("id", "key", "value", "children", "parent", "lock", "stamp", "alive", "linked")

    def __init__(self, nid: int, key: list, value: list, parent: Node | None, stamp: int) -> None:
        self.id, self.key, self.value, self.parent, self.stamp = nid, key, value, parent, stamp
        self.children: dict = {}
        self.lock = 0
        self.alive = True   # its slots not yet freed
        self.linked = True  # reachable from the root (False once quarantined)


class Server:
    def __init__(self) -> None:
        self.next_id = 1                 # node (handle) ids, unique over every worker
        self.recycled: list[int] = []    # only used by the ids-recycled bug
        self.handles: dict[int, tuple[Worker, Node]] = {}
        self.workers: dict[int, Worker] = {}
        self.next_worker = 1
        self.late_frees: list[list[int]] = []  # freed-one-reply-late bug

    def new_id(self, worker: Worker) -> int:
        if BUG == "handles-per-cache":
            worker.local_ids += 1
            return worker.local_ids
        if BUG == "ids-recycled" and self.recycled:
            return self.recycled.pop()
        nid, self.next_id = self.next_id, self.next_id + 1
        return nid


class Worker:
    """One worker's tree: the root's children are keyed by (tenant, first page)."""

    def __init__(self, server: Server, page_size: int) -> None:
        self.server, self.page = server, page_size
        self.local_ids = 0
        self.clock = 0
        self.root = self.make_node([], [], None)
        self.total = self.protected = 0
        self.heap: list = []   # (stamp, seq, node): candidate leaves, checked when popped
        self.freed: list[list[int]] = []  # this call's free() lists

    # --- nodes ------------------------------------------------------------------------
    def make_node(self, key: list, value: list, parent: Node | None) -> Node:
        node = Node(self.server.new_id(self), key, value, parent, self.clock)
        self.server.handles[node.id] = (self, node)
        return node

    def child_key(self, parent: Node, tokens: list, tenant: str):
        page = tuple(tokens[:self.page])
        return (tenant, page) if parent is self.root else page

    def touch(self, node: Node) -> None:
        node.stamp = self.clock
        if not node.children and node.lock == 0 and node is not self.root:
            heapq.heappush(self.heap, (node.stamp, next(SEQ), node))

    def free(self, node: Node) -> None:
        node.alive = False
        self.server.handles.pop(node.id, None)
        if BUG == "ids-recycled":
            self.server.recycled.append(node.id)
        if node.value:
            self.freed.append(list(node.value))

    def split(self, node: Node, at: int) -> Node:
        """Cut node's edge after `at` tokens; the new parent holds the head, node keeps the tail."""
        if BUG == "crash-on-locked-split" and node.lock > 0:
            raise RuntimeError(f"split of locked node {node.id}")
        parent = node.parent
        tenant = next(k for k, v in parent.children.items() if v is node)
        head = self.make_node(node.key[:at], node.value[:at], parent)
        head.stamp, head.lock = node.stamp, (0 if BUG == "split-loses-lock" else node.lock)
        parent.children[tenant] = head
        node.key, node.value, node.parent = node.key[at:], node.value[at:], head
        head.children[self.child_key(head, node.key, "")] = node
        if BUG == "split-loses-lock" and node.lock > 0:
            self.protected -= at
        return head

    def walk(self, tokens: list, tenant: str, split_end: bool) -> tuple[Node, int, list[Node]]:
        """Follow tokens page by page; split where they stop inside an edge (if split_end).
        Returns the last node reached, the tokens matched, and the nodes on the path."""
        node, done, path = self.root, 0, []
        n = len(tokens) // self.page * self.page
        while done < n:
            child = node.children.get(self.child_key(node, tokens[done:], tenant))
            if child is None:
                break
            same = 0
            while same < len(child.key) and done + same < n and \
                    child.key[same:same + self.page] == tokens[done + same:done + same + self.page]:
                same += self.page
            if same < len(child.key):
                if not split_end:
                    break
                child = self.split(child, same)
            node, done = child, done + same
            path.append(node)
            if same < len(node.key):
                break
        return node, done, path

    # --- the contract's calls -------------------------------------------------------
    def match_prefix(self, tokens: list, tenant: str) -> dict:
        self.clock += 1
        node, done, path = self.walk(tokens, tenant, split_end=True)
        if BUG != "match-no-refresh":
            for n in path:
                self.touch(n)
        values = [v for n in path for v in n.value]
        return {"values": values, "handle": node.id}

    def insert(self, tokens: list, values: list, tenant: str) -> int:
        self.clock += 1
        n = len(tokens) // self.page * self.page
        node, done, path = self.walk(tokens[:n], tenant, split_end=True)
        for p in path:
            self.touch(p)
        if done < n:
            leaf = self.make_node(list(tokens[done:n]), list(values[done:n]), node)
            node.children[self.child_key(node, leaf.key, tenant)] = leaf
            self.total += n - done
            self.touch(leaf)
        return done

    def path_to_root(self, node: Node) -> list[Node]:
        path = []
        while node is not self.root and node is not None:
            path.append(node)
            node = node.parent
        return path

    def lock(self, node: Node) -> None:
        if not node.linked:
            raise Refused(f"handle {node.id} was quarantined")
        for n in self.path_to_root(node):
            if n.lock == 0:
                self.protected += len(n.key)
            n.lock += 1

    def unlock(self, node: Node) -> None:
        path = self.path_to_root(node)
        if any(n.lock == 0 for n in path):
            raise Refused(f"unmatched unlock of handle {node.id}: a lock count on its path is 0")
        for n in path:
            n.lock -= 1
            if n.lock == 0 and n.linked:
                self.protected -= len(n.key)
                self.touch_if_leaf(n)
            elif n.lock == 0 and n.alive:   # quarantined: freed with its last lock
                self.free(n)

    def touch_if_leaf(self, n: Node) -> None:
        if not n.children and n.lock == 0 and n is not self.root:
            heapq.heappush(self.heap, (n.stamp, next(SEQ), n))

    def evict(self, want: int) -> int:
        got = 0
        while got < want:
            if not self.heap:
                if BUG == "spin-when-empty":
                    continue
                break
            stamp, _, node = heapq.heappop(self.heap)
            if not node.alive or not node.linked or node.children or node.lock or stamp != node.stamp:
                continue
            parent = node.parent
            del parent.children[next(k for k, v in parent.children.items() if v is node)]
            self.free(node)
            got += len(node.key)
            self.total -= len(node.key)
            self.touch_if_leaf(parent)
        return got

    def evict_prefix(self, tokens: list, tenant: str) -> int:
        cut = (len(tokens) - 1) // self.page * self.page
        tenants = self.tenants() if BUG == "quarantine-all-tenants" else [tenant]
        removed = 0
        for t in tenants:
            node, done, _ = self.walk(tokens[:cut], t, split_end=True)
            if done < cut:
                continue
            rest = tokens[cut:]
            for key, child in list(node.children.items()):
                if child.key[:len(rest)] == rest:
                    if node is self.root and key[0] != t:
                        continue
                    del node.children[key]
                    removed += self.unlink(child)
            self.touch_if_leaf(node)  # it may have lost its last child
        return removed

    def tenants(self) -> list[str]:
        return sorted({k[0] for k in self.root.children})

    def unlink(self, top: Node) -> int:
        count, stack = 0, [top]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            n.linked = False
            count += len(n.key)
            if n.lock:
                self.protected -= len(n.key)
            else:
                self.free(n)
        self.total -= count
        return count

    def reset(self) -> None:
        if BUG == "dies-on-deep-reset":
            try:
                self.free_recursively(self.root)
            except RecursionError:
                sys.stderr.write("thread 'main' has overflowed its stack\nfatal runtime error: stack overflow\n")
                sys.stderr.flush()
                os._exit(134)
        for _node_id, (worker, node) in list(self.server.handles.items()):
            if worker is self and node is not self.root:
                self.free(node)
        self.root.children = {}
        self.total = self.protected = 0
        self.heap = []

    def free_recursively(self, node: Node) -> None:
        for child in node.children.values():
            self.free_recursively(child)

    def evictable_size(self) -> int:
        if BUG == "sizes-scan-tree":
            count, stack = 0, [self.root]
            while stack:
                n = stack.pop()
                stack.extend(n.children.values())
                if n.lock == 0:
                    count += len(n.key)
            return count
        return self.total - self.protected


# --- input checks (validates_input: true) ------------------------------------------------
def tokens_of(args: dict, name: str = "tokens") -> list:
    toks = args.get(name)
    if not isinstance(toks, list) or not all(type(t) is int and 0 <= t < 2**31 for t in toks):
        raise Refused(f"{name} must be a list of non-negative integer token ids, got {str(toks)[:80]}")
    return toks


def tenant_of(args: dict) -> str:
    ns = args.get("namespace")

    def ok(v) -> bool:
        return v is None or type(v) in (int, float, str) or (isinstance(v, list) and all(map(ok, v)))
    if not ok(ns):
        raise Refused(f"unhashable namespace {str(ns)[:80]}")
    if BUG == "tenant-by-text":
        return str(ns)
    return json.dumps(ns, separators=(",", ":"), ensure_ascii=False)


def count_of(args: dict, name: str) -> int:
    n = args.get(name)
    if type(n) is not int or n < 0:
        raise Refused(f"{name} must be a non-negative integer, got {n!r}")
    return n


def handle_of(server: Server, worker: Worker, args: dict) -> Node:
    h = args.get("handle")
    owner = server.handles.get(h) if type(h) is int else None
    if owner is None:
        raise Refused(f"unknown or stale handle {h!r}")
    if owner[0] is not worker:
        raise Refused(f"handle {h} belongs to another worker")
    return owner[1]


def dispatch(server: Server, op: str, args: dict):
    if op == "init":
        return {"protocol": 1, "capabilities": CAPABILITIES, "server": f"router_server 1.0{' bug=' + BUG if BUG else ''}"}
    if op == "new":
        page = args.get("page_size")
        if type(page) is not int or page < 1:
            raise Refused(f"page_size must be a positive integer, got {page!r}")
        wid, server.next_worker = server.next_worker, server.next_worker + 1
        server.workers[wid] = Worker(server, page)
        return wid
    worker = server.workers.get(args.get("cache"))
    if worker is None:
        raise Malformed(f"no worker {args.get('cache')!r}")
    if op == "drop":
        worker.reset()
        worker.freed = []  # the suite no longer counts this worker's slots
        del server.workers[args["cache"]]
        server.handles.pop(worker.root.id, None)
        return None
    if op == "match_prefix":
        tokens, tenant = tokens_of(args), tenant_of(args)
        return worker.match_prefix(tokens, tenant)
    if op == "insert":
        tokens, tenant = tokens_of(args), tenant_of(args)
        values = args.get("values")
        if not isinstance(values, list) or not all(type(v) is int and v >= 0 for v in values):
            raise Refused(f"values must be a list of non-negative integer slot ids, got {str(values)[:80]}")
        if len(values) != len(tokens):
            raise Refused(f"values has {len(values)} slots for {len(tokens)} tokens")
        return worker.insert(tokens, values, tenant)
    if op in ("inc_lock_ref", "dec_lock_ref"):
        node = handle_of(server, worker, args)
        if node is worker.root:
            return None
        (worker.lock if op == "inc_lock_ref" else worker.unlock)(node)
        return None
    if op == "evict":
        return worker.evict(count_of(args, "num_tokens"))
    if op == "evict_prefix":
        tokens, tenant = tokens_of(args), tenant_of(args)
        if not tokens:
            raise Refused("evict_prefix needs a non-empty prefix")
        return worker.evict_prefix(tokens, tenant)
    if op == "total_size":
        return worker.total
    if op == "evictable_size":
        return worker.evictable_size()
    if op == "protected_size":
        return worker.protected
    if op == "reset":
        worker.reset()
        return None
    raise Malformed(f"unknown op {op!r}")


def main() -> None:
    server = Server()
    sys.setrecursionlimit(1000)
    for line in sys.stdin:
        request = json.loads(line)
        rid, op, args = request["id"], request["op"], request.get("args", {})
        worker = server.workers.get(args.get("cache")) if isinstance(args, dict) else None
        if worker is not None:
            worker.freed = []
        try:
            reply = {"id": rid, "ok": dispatch(server, op, args)}
        except Refused as exc:
            reply = {"id": None if BUG == "error-reply-no-id" else rid, "error": 1000, "text": str(exc)}
        except Malformed as exc:
            reply = {"id": rid, "error": 12, "text": f"malformed request: {exc}"}
        except Exception as exc:  # the cache's state is unknown
            reply = {"id": rid, "error": 13, "text": f"{type(exc).__name__}: {exc}"}
        freed = worker.freed if worker is not None else []
        if BUG == "freed-one-reply-late" and op == "evict":
            freed, server.late_frees = server.late_frees, freed
        elif BUG == "freed-one-reply-late":
            freed, server.late_frees = server.late_frees + freed, []
        if freed:
            reply["freed"] = freed
        sys.stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
