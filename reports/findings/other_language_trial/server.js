#!/usr/bin/env node
// pagecache: a home-grown paged radix KV cache (one trie node per page, a root per tenant),
// served over radixcheck's wire protocol (JSON lines on stdin/stdout).
// BUGS="nskey,dirty" plants the two bugs of the trial.
'use strict';
const readline = require('readline');
const LFU = process.env.POLICY === 'lfu';   // SGLang's LFU: fewest insert hits, then least recently used
const BUGS = new Set((process.env.BUGS || '').split(',').filter(Boolean));

let nextId = 1;                        // handle ids: unique across every cache of this server
const caches = new Map();

// A namespace arrives in canonical JSON; equal namespaces are one JSON text.
const nsKey = (ns) => BUGS.has('nskey') ? String(ns) : BUGS.has('nsstr') ? String(ns === undefined ? null : ns) : JSON.stringify(ns === undefined ? null : ns);

class Node {
  constructor(parent, key, values) {
    this.id = nextId++; this.parent = parent; this.key = key; this.values = values;
    this.children = new Map(); this.lock = 0; this.lastUse = 0; this.hits = 0; this.detached = false;
  }
}

class Heap {                            // min-heap on [lastUse, seq, node]
  constructor() { this.a = []; this.seq = 0; }
  push(n) { const a = this.a; a.push([LFU ? [n.hits, n.lastUse] : [0, n.lastUse], this.seq++, n]); let i = a.length - 1;
    while (i > 0) { const p = (i - 1) >> 1; if (this.lt(a[i], a[p])) { [a[i], a[p]] = [a[p], a[i]]; i = p; } else break; } }
  lt(x, y) { const [p, q] = [x[0], y[0]]; if (p[0] !== q[0]) return p[0] < q[0]; if (p[1] !== q[1]) return p[1] < q[1]; return x[1] < y[1]; }
  pop() { const a = this.a; const top = a[0]; const last = a.pop();
    if (a.length) { a[0] = last; let i = 0; for (;;) { const l = 2 * i + 1, r = l + 1; let m = i;
      if (l < a.length && this.lt(a[l], a[m])) m = l; if (r < a.length && this.lt(a[r], a[m])) m = r;
      if (m === i) break; [a[i], a[m]] = [a[m], a[i]]; i = m; } }
    return top[2]; }
  get size() { return this.a.length; }
}

class Cache {
  constructor(pageSize) {
    this.ps = pageSize; this.roots = new Map(); this.root = new Node(null, null, []);
    this.clock = 0; this.handles = new Map([[this.root.id, this.root]]);
    this.dirty = true; this.sizes = null; this.freed = null; this.quarantined = new Set();
  }
  nsRoot(ns, make) {
    const k = nsKey(ns); let r = this.roots.get(k);
    if (!r && make) { r = new Node(null, null, []); r.isNsRoot = true; this.roots.set(k, r); }
    return r;
  }
  pageKey(tokens, i) { return tokens.slice(i, i + this.ps).join(','); }
  free(values) { if (values.length) this.freed.push(values.slice()); }
  match(tokens, ns) {
    const t = ++this.clock; const r = this.nsRoot(ns, false); const values = []; let node = null;
    if (r) { let cur = r;
      for (let i = 0; i + this.ps <= tokens.length; i += this.ps) {
        const c = cur.children.get(this.pageKey(tokens, i)); if (!c) break;
        c.lastUse = t; values.push(...c.values); cur = c; node = c; } }
    if (!node) return { values: [], handle: this.root.id };
    this.handles.set(node.id, node);
    return { values, handle: node.id };
  }
  insert(tokens, values, ns) {
    const t = ++this.clock; let cur = this.nsRoot(ns, true); let prefix = 0, fresh = false;
    for (let i = 0; i + this.ps <= tokens.length; i += this.ps) {
      const k = this.pageKey(tokens, i); let c = cur.children.get(k);
      if (c && !fresh) prefix += this.ps;
      else { c = new Node(cur, k, values.slice(i, i + this.ps)); cur.children.set(k, c); fresh = true; }
      c.lastUse = t; if (fresh || !BUGS.has('lfuhits')) c.hits++; cur = c;  // lfuhits: a re-insert forgets its hit
    }
    this.dirty = true; return prefix;
  }
  path(h) { const n = this.handles.get(h); if (!n) throw new Error(`unknown handle ${h}`); return n; }
  incLock(h) { for (let n = this.path(h); n && !n.isNsRoot && n !== this.root; n = n.parent) n.lock++; this.dirty = true; }
  decLock(h) {
    for (let n = this.path(h); n && !n.isNsRoot && n !== this.root; n = n.parent) {
      n.lock--; if (n.detached && n.lock === 0) { this.free(n.values); this.handles.delete(n.id); this.quarantined.delete(n); }
    }
    if (!BUGS.has('dirty')) this.dirty = true;   // the planted bug forgets this: the sizes go stale
  }
  leaves() { const out = [];
    const walk = (n) => { for (const c of n.children.values()) { if (c.children.size === 0) { if (c.lock === 0) out.push(c); } else walk(c); } };
    for (const r of this.roots.values()) walk(r); return out; }
  evict(num) {
    const heap = new Heap(); for (const l of this.leaves()) heap.push(l); let done = 0;
    while (done < num && heap.size) {
      const n = heap.pop(); n.parent.children.delete(n.key); this.handles.delete(n.id);
      this.free(n.values); done += n.values.length;
      const p = n.parent; if (!p.isNsRoot && p.children.size === 0 && p.lock === 0) heap.push(p);
    }
    this.dirty = true; return done;
  }
  evictPrefix(tokens, ns) {
    const cut = Math.floor((tokens.length - 1) / this.ps) * this.ps; let cur = this.nsRoot(ns, false);
    if (!cur) return 0;
    for (let i = 0; i < cut; i += this.ps) { cur = cur.children.get(this.pageKey(tokens, i)); if (!cur) return 0; }
    const rest = tokens.slice(cut); let removed = 0;
    for (const [k, c] of [...cur.children]) {
      const page = k.split(',').map(Number);
      if (!rest.every((x, j) => page[j] === x)) continue;
      cur.children.delete(k);
      const unlink = (n) => { removed += n.values.length;
        if (n.lock === 0) { this.free(n.values); this.handles.delete(n.id); } else { n.detached = true; this.quarantined.add(n); }
        for (const d of n.children.values()) unlink(d); };
      unlink(c);
    }
    this.dirty = true; return removed;
  }
  computeSizes() {
    if (!this.dirty && this.sizes) return this.sizes; let total = 0, prot = 0;
    const walk = (n) => { for (const c of n.children.values()) { total += c.values.length; if (c.lock > 0) prot += c.values.length; walk(c); } };
    for (const r of this.roots.values()) walk(r);
    this.dirty = false; return (this.sizes = { total, prot, evictable: total - prot });
  }
  reset() {
    const walk = (n) => { for (const c of n.children.values()) { this.free(c.values); walk(c); } };
    for (const r of this.roots.values()) walk(r);
    for (const n of this.quarantined) this.free(n.values); this.quarantined = new Set();
    this.roots = new Map(); this.handles = new Map([[this.root.id, this.root]]); this.dirty = true;
  }
}

const CAPS = { eviction_policy: LFU ? { named: 'lfu' } : 'lru', supports_quarantine: true, page_sizes: [1, 4], checks_locks: false,
  supports_reset: true, validates_input: false, namespaces: true, lifecycle: 'tree' };

function handle(op, a) {
  if (op === 'init') return { protocol: 1, capabilities: CAPS, server: 'pagecache-node 0.1' };
  if (op === 'new') { if (!CAPS.page_sizes.includes(a.page_size)) throw Object.assign(new Error(`page size ${a.page_size}`), { code: 1000 });
    const id = nextId++; caches.set(id, new Cache(a.page_size)); return id; }
  if (op === 'drop') { caches.delete(a.cache); return null; }
  const c = caches.get(a.cache); if (!c) throw Object.assign(new Error(`no cache ${a.cache}`), { code: 12 });
  switch (op) {
    case 'match_prefix': return c.match(a.tokens, a.namespace);
    case 'insert': return c.insert(a.tokens, a.values, a.namespace);
    case 'inc_lock_ref': c.incLock(a.handle); return null;
    case 'dec_lock_ref': c.decLock(a.handle); return null;
    case 'evict': return c.evict(a.num_tokens);
    case 'evict_prefix': return c.evictPrefix(a.tokens, a.namespace);
    case 'total_size': return c.computeSizes().total;
    case 'evictable_size': return c.computeSizes().evictable;
    case 'protected_size': return c.computeSizes().prot;
    case 'reset': c.reset(); return null;
    default: throw Object.assign(new Error(`unknown op ${op}`), { code: 12 });
  }
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const req = JSON.parse(line); const c = req.args && caches.get(req.args.cache);
  if (c) c.freed = [];
  let reply;
  try { reply = { id: req.id, ok: handle(req.op, req.args || {}) }; }
  catch (e) { reply = { id: req.id, error: e.code || 13, text: String(e.message) }; }
  if (c && c.freed.length) reply.freed = c.freed;
  process.stdout.write(JSON.stringify(reply) + '\n');
});
