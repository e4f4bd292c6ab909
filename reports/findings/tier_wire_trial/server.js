// A paged radix KV cache with a write-through host tier, one trie per namespace, LRU,
// served over radixcheck's wire protocol. BUGS=nullns|orphan|nolock|keephost plants a bug.
"use strict";
const readline = require("readline");
const BUGS = new Set((process.env.BUGS || "").split(",").filter(Boolean));
const rl = readline.createInterface({ input: process.stdin });
const lines = []; let waiter = null, closed = false;
rl.on("line", (l) => { if (waiter) { const w = waiter; waiter = null; w(l); } else lines.push(l); });
rl.on("close", () => { closed = true; if (waiter) waiter(null); });
const next = () => lines.length ? Promise.resolve(lines.shift()) : closed ? Promise.resolve(null) : new Promise((r) => { waiter = r; });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
let rid = 0; // the request being answered: its calls carry its id
async function call(name, args) {
  send({ id: rid, call: name, args });
  const a = JSON.parse(await next());
  if ("error" in a) throw Object.assign(new Error(a.text || "refused"), { code: a.error });
  return a.ok;
}
class Refused extends Error {}

let nextHandle = 1; const handles = new Map(); // handle id -> node, unique over the server
class Node {
  constructor(cache, parent, key) {
    Object.assign(this, { cache, parent, key, children: new Map(), device: null, host: null,
      writing: null, loading: null, lock: 0, pin: 0, used: 0, id: nextHandle++ });
    handles.set(this.id, this);
  }
}
class Cache {
  constructor(page, policy) { Object.assign(this, { page, policy, roots: new Map(), clock: 0, pending: new Map() }); this.rootNode = new Node(this, null, null); }
  root(ns) { const k = ns === undefined || (ns === null && !BUGS.has("nullns")) ? "default" : JSON.stringify(ns); // equal JSON values are equal namespaces
    if (!this.roots.has(k)) this.roots.set(k, new Node(this, null, null)); return this.roots.get(k); }
  path(n) { const p = []; while (n.parent) { p.push(n); n = n.parent; } return p.reverse(); }
  *nodes() { const st = [...this.roots.values()]; while (st.length) { const n = st.pop(); if (n.parent) yield n; st.push(...n.children.values()); } }
  match(tokens, ns) {
    const t = ++this.clock; let n = this.root(ns), dev = [], dn = this.rootNode, hn = null, hl = 0;
    if (n.parent === null) dn = n; // the namespace root is the empty match's handle
    for (let i = 0; i + this.page <= tokens.length; i += this.page) {
      const c = n.children.get(tokens.slice(i, i + this.page).join(","));
      if (!c) break;
      if (c.device && hn === null) { dev.push(...c.device); dn = c; }
      else if (c.host) { hn = c; hl += this.page; }
      else break;
      c.used = t; n = c;
    }
    return { device_values: dev, device_handle: dn.id, host_length: hl, host_handle: (hn || dn).id };
  }
  async insert(tokens, values, ns) {
    const t = ++this.clock; let n = this.root(ns), prefix = 0, onDev = true;
    for (let i = 0; i + this.page <= tokens.length; i += this.page) {
      const k = tokens.slice(i, i + this.page).join(",");
      let c = n.children.get(k);
      if (!c) { c = new Node(this, n, k); n.children.set(k, c); }
      if (!c.device) { c.device = values.slice(i, i + this.page); onDev = false; } else if (onDev) prefix = i + this.page;
      c.used = t; n = c;
    }
    for (const c of this.path(n)) { // write-through, top-down, stop at the first that fails
      if (c.host || c.writing) continue;
      if (!(c.parent.parent === null || c.parent.host || c.parent.writing)) break;
      let tr = await call("write", { device_slots: c.device });
      if (!tr) { await this.evictHost(this.page); tr = await call("write", { device_slots: c.device }); }
      if (!tr) break;
      c.writing = tr.number; this.pending.set(tr.number, c);
    }
    return prefix;
  }
  async loadBack(h) {
    const path = this.path(h), todo = path.filter((c) => !c.device);
    if (!BUGS.has("nolock")) path.forEach((c) => c.pin++); // a nested eviction leaves the path alone
    try {
      for (const c of todo) {
        let tr = await call("load", { host_slots: c.host });
        if (!tr) { await this.evict(this.page); tr = await call("load", { host_slots: c.host }); }
        if (!tr) break;
        c.device = tr.device_slots; c.loading = tr.number; this.pending.set(tr.number, c);
      }
    } finally { if (!BUGS.has("nolock")) path.forEach((c) => c.pin--); }
    const vals = []; let last = path.length ? path[0].parent : h;
    for (const c of path) { if (!c.device) break; vals.push(...c.device); last = c; }
    return { values: vals, handle: last.id };
  }
  done(tr) {
    const c = this.pending.get(tr.number); this.pending.delete(tr.number);
    if (tr.kind === "write") { c.writing = null; c.host = tr.host_slots; } else c.loading = null;
  }
  busy(n) { return n.writing !== null || n.loading !== null || [...n.children.values()].some((c) => this.busy(c)); }
  async evict(num) {
    let freed = 0;
    while (freed < num) {
      let best = null;
      for (const n of this.nodes()) {
        const leaf = n.device && ![...n.children.values()].some((c) => c.device);
        if (leaf && !n.lock && !n.pin && !this.busy(n) && (!best || n.used < best.used)) best = n;
      }
      if (!best) break;
      await call("free", { slots: best.device }); freed += best.device.length; best.device = null;
      if (!best.host) await this.drop(best); // never backed up: it leaves both tiers, its subtree too
    }
    return freed;
  }
  async drop(n) {
    for (const c of n.children.values()) await this.drop(c);
    if (n.host) await call("free_host", { slots: n.host });
    n.parent.children.delete(n.key); handles.delete(n.id);
  }
  async evictHost(num) {
    let freed = 0;
    while (freed < num) {
      let best = null;
      for (const n of this.nodes()) {
        const leaf = n.host && !n.device && (BUGS.has("orphan") || n.children.size === 0);
        if (leaf && !n.lock && !this.busy(n) && (!best || n.used < best.used)) best = n;
      }
      if (!best) break;
      await call("free_host", { slots: best.host }); freed += best.host.length; best.host = null;
      if (!best.device) { best.parent.children.delete(best.key); handles.delete(best.id); }
    }
    return freed;
  }
  async reset() {
    for (const n of this.nodes()) {
      if (n.device) await call("free", { slots: n.device });
      if (n.host) await call("free_host", { slots: n.host });
      if (!BUGS.has("keephost")) handles.delete(n.id);
    }
    if (BUGS.has("keephost")) { for (const n of this.nodes()) n.device = null; } // keeps the host index
    else for (const r of this.roots.values()) r.children.clear();
  }
  size(tier) { let s = 0; for (const n of this.nodes()) if (n[tier]) s += this.page; return s; }
}

const caches = new Map(); let nextCache = 1;
const node = (a) => { const n = handles.get(a.handle); if (!n || n.cache !== caches.get(a.cache)) throw new Refused("unknown handle " + a.handle); return n; };
const ops = {
  init: () => ({ protocol: 1, server: "nu3-tiered 0.1", tier_capabilities: { write_policies: ["write_through"],
    page_sizes: [1, 2], supports_quarantine: false, supports_reset: true, namespaces: true } }),
  new: (a) => { if (!Number.isInteger(a.page_size) || a.page_size < 1 || a.write_policy !== "write_through") throw new Refused("bad page size or policy");
    caches.set(nextCache, new Cache(a.page_size, a.write_policy)); return nextCache++; },
  drop: (a) => { caches.delete(a.cache); return null; },
  match_prefix: (a, c) => c.match(a.tokens, a.namespace),
  insert: (a, c) => c.insert(a.tokens, a.values, a.namespace),
  load_back: (a, c) => c.loadBack(node(a)),
  inc_lock_ref: (a, c) => { for (const n of c.path(node(a))) n.lock++; return null; },
  dec_lock_ref: (a, c) => { for (const n of c.path(node(a))) n.lock--; return null; },
  evict: (a, c) => c.evict(a.num_tokens),
  evict_host: (a, c) => c.evictHost(a.num_tokens),
  transfer_done: (a, c) => { c.done(a.transfer); return null; },
  device_size: (a, c) => c.size("device"),
  host_size: (a, c) => c.size("host"),
  reset: (a, c) => c.reset().then(() => null),
};
(async () => {
  for (let l; (l = await next()) !== null;) {
    const req = JSON.parse(l); rid = req.id;
    const f = ops[req.op], a = req.args || {};
    if (!f) { send({ id: rid, error: 12, text: "unknown op " + req.op }); continue; }
    try { send({ id: rid, ok: await f(a, caches.get(a.cache)) }); } catch (e) {
      send({ id: rid, error: e instanceof Refused ? 1000 : e.code === 1000 ? 1000 : 13, text: String(e.message) });
    }
  }
})();
