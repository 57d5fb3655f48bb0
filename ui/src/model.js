// What the pages show, fetched from the API in one refresh: the tenants the token may see, the
// nodes (admins and viewers), the pending and running workloads, usage totals; and the history the Cluster
// page draws (sampled here, kept in sessionStorage so a reload keeps it).
import { get, getAll, ApiError } from './api.js';

const HISTORY_KEY = 'tessera.history';
const HISTORY_MAX = 720; // points: an hour at one every 5 s

export const model = {
  // admin: reads the audit log; cluster: sees every tenant and the nodes (admin or viewer).
  me: { admin: false, cluster: false, tenants: [] },
  tenants: [],
  nodes: null, // null: not visible to this token
  pending: [],
  running: [],
  usage: null,
  events: [],
  history: loadHistory(),
  updated: 0,
};

function loadHistory() {
  try {
    const h = JSON.parse(sessionStorage.getItem(HISTORY_KEY) || 'null');
    if (h && Array.isArray(h.t)) return h;
  } catch {
    /* a damaged history starts afresh */
  }
  return { t: [], byTenant: {}, queue: [], idle: [] };
}

// The milli-GPU a workload holds while it runs: pods x GPUs x share (a MIG instance counts its
// compute slices out of 7: 3g.40gb -> 3/7 of a GPU).
export function heldMilli(w) {
  const r = w.request || {};
  const per = r.mig_profile ? Math.round((parseInt(r.mig_profile, 10) / 7) * 1000) : r.gpu_milli || 1000;
  return per * (r.gpus || 1) * (r.pods || 1);
}

async function workloadsIn(state) {
  if (model.me.cluster) return getAll(`/v1/workloads?state=${state}`, 'workloads');
  // A tenant token lists one tenant at a time: every tenant of its subtree.
  const lists = await Promise.all(
    model.tenants.map((t) => getAll(`/v1/workloads?tenant=${encodeURIComponent(t.name)}&state=${state}`, 'workloads')),
  );
  return lists.flat();
}

// What the token may read, asked of the API itself (403 is the answer "no"): the nodes (admins
// and viewers, the whole cluster), the audit log (admins).
async function mayRead(path) {
  try {
    await get(path);
    return true;
  } catch (e) {
    if (!(e instanceof ApiError) || e.status === 401) throw e;
    return false;
  }
}

export async function whoAmI() {
  model.me.cluster = await mayRead('/v1/nodes');
  model.me.admin = model.me.cluster && (await mayRead('/v1/audit?limit=1'));
}

export async function refresh() {
  const t = await get('/v1/tenants');
  model.tenants = t.tenants || [];
  const [pending, running] = await Promise.all([workloadsIn('pending'), workloadsIn('running')]);
  model.pending = pending;
  model.running = running;
  if (model.me.cluster) model.nodes = (await get('/v1/nodes')).nodes || [];
  try {
    // The ledger's hours that overlap the last hour (this one and the one before): the whole
    // history would grow with every hour and workload, and the pages show what is recent.
    model.usage = await get(`/v1/usage?from=${Math.floor(Date.now() / 1000) - 3600}`);
  } catch {
    model.usage = null;
  }
  model.updated = Date.now();
  sample();
}

// One point of the Cluster page's history: allocation per tenant, queue length, idle GPUs.
function sample() {
  const h = model.history;
  const now = Math.floor(Date.now() / 1000);
  if (h.t.length && now - h.t[h.t.length - 1] < 1) return; // one point a second at most
  const by = {};
  for (const w of model.running) by[w.tenant] = (by[w.tenant] || 0) + heldMilli(w);
  for (const name of Object.keys(by)) if (!h.byTenant[name]) h.byTenant[name] = h.t.map(() => 0);
  h.t.push(now);
  for (const name of Object.keys(h.byTenant)) h.byTenant[name].push(by[name] || 0);
  h.queue.push(model.pending.length);
  h.idle.push(model.nodes ? idleGpus(model.nodes) : null);
  if (h.t.length > HISTORY_MAX) {
    h.t.shift();
    h.queue.shift();
    h.idle.shift();
    for (const k of Object.keys(h.byTenant)) h.byTenant[k].shift();
  }
  try {
    sessionStorage.setItem(HISTORY_KEY, JSON.stringify(h));
  } catch {
    /* full: the history lives on in memory */
  }
}

// The last hour as the control plane sampled it (GET /v1/history: every 5 s, kept for a day), so
// that a page opened now draws what happened before it; this page's own samples continue it. A
// server without the route (or a refusal) keeps the history this tab sampled.
export async function loadServerHistory() {
  let r;
  try {
    r = await get(`/v1/history?from=${Math.floor(Date.now() / 1000) - 3600}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) throw e;
    return false;
  }
  model.history = historyFromServer(r);
  return true;
}

// GET /v1/history's answer as the Cluster page's series: held milli-GPU per tenant, pending
// workloads (all tenants together), idle GPUs (null where the token may not see nodes).
export function historyFromServer(r) {
  const t = r.t || [];
  const byTenant = {};
  for (const [name, series] of Object.entries(r.held_milli || {})) byTenant[name] = series.slice();
  const queue = t.map((_, i) => Object.values(r.pending || {}).reduce((s, series) => s + (series[i] || 0), 0));
  const idle = Array.isArray(r.idle_gpus) ? r.idle_gpus.slice() : t.map(() => null);
  return { t: t.slice(), byTenant, queue, idle, server: true };
}

export const idleGpus = (nodes) =>
  nodes.filter((n) => n.state === 'ready').reduce((s, n) => s + n.gpus.filter((g) => !g.allocated_milli).length, 0);

export function clearHistory() {
  sessionStorage.removeItem(HISTORY_KEY);
  model.history = loadHistory();
}

// What the usage ledger says of each GPU in its newest hour: "node/gpu" -> {used, allocated
// (milli-GPU-seconds), peak (MiB), hour}. Only the hours the token may read (its tenants').
export function usageByGpu() {
  const out = new Map();
  const hours = model.usage?.hours || [];
  let newest = 0;
  for (const h of hours) newest = Math.max(newest, h.hour_s || 0);
  for (const h of hours) {
    if ((h.hour_s || 0) !== newest) continue;
    const key = `${h.node}/${h.gpu}`;
    const u = out.get(key) || { used: 0, allocated: 0, peak: 0, hour: h.hour };
    u.used += h.gpu_milli_s_used || 0;
    u.allocated += h.gpu_milli_s_allocated || 0;
    u.peak = Math.max(u.peak, h.peak_memory_mib || 0);
    out.set(key, u);
  }
  return out;
}
