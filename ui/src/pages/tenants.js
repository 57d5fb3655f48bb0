// Tenants: the tree the token sees, each with its guarantee, limit, what its subtree holds now
// (running workloads) and what it used (metered usage), as bars on one scale.
import { model, heldMilli } from '../model.js';
import { esc, gpus } from '../format.js';
import { textOn } from '../palette.js';

function subtree(name) {
  const out = new Set([name]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const t of model.tenants)
      if (t.parent && out.has(t.parent) && !out.has(t.name)) {
        out.add(t.name);
        grew = true;
      }
  }
  return out;
}

// Where the subtree stands against its quota: what it holds beyond its guarantee is borrowed and
// may be reclaimed for another tenant's guarantee (docs/multitenancy.md).
function position(alloc, g, lim) {
  if (lim != null && alloc >= lim) return 'at its limit';
  if (alloc > g) return `borrowing ${gpus(alloc - g)} (reclaimable)`;
  if (alloc === g && g > 0) return 'at its guarantee';
  return g > 0 ? `within its guarantee (${gpus(g - alloc)} unused)` : 'no guarantee, nothing held';
}

export function render(root, ctx) {
  const held = {};
  for (const w of model.running) held[w.tenant] = (held[w.tenant] || 0) + heldMilli(w);
  const usedS = {};
  for (const u of model.usage?.tenants || []) usedS[u.tenant] = u;
  const rows = [];
  const visible = new Set(model.tenants.map((t) => t.name));
  const roots = model.tenants.filter((t) => !t.parent || !visible.has(t.parent)).sort((a, b) => a.name.localeCompare(b.name));
  const nodes = model.nodes;
  const clusterMilli = nodes ? nodes.reduce((s, n) => s + n.gpus.length * 1000, 0) : 0;
  const walk = (t, depth) => {
    const q = t.quota || {};
    const g = q.guaranteed?.gpu_milli || 0;
    const lim = q.limit?.gpu_milli;
    let alloc = 0;
    for (const n of subtree(t.name)) alloc += held[n] || 0;
    const scale = Math.max(clusterMilli, lim || 0, g, alloc, 1000);
    const c = ctx.colour(t.name);
    const u = usedS[t.name];
    const usedPct = u && u.gpu_milli_s_allocated ? Math.round((u.gpu_milli_s_used / u.gpu_milli_s_allocated) * 100) : null;
    rows.push(`<tr><td style="padding-left:${0.5 + depth * 1.5}em"><span class="chip" style="background:${c};color:${textOn(c)}">${esc(t.name)}</span></td>
      <td>${esc(t.default_qos || '')}</td><td>${q.weight ?? 1}</td>
      <td class="bars"><div class="qbar" aria-label="${esc(`${t.name}: allocated ${gpus(alloc)}, guaranteed ${gpus(g)}, limit ${lim == null ? 'none' : gpus(lim)}`)}">
        <div class="q-alloc" style="width:${(alloc / scale) * 100}%;background:${c}"></div>
        <div class="q-guar" style="left:${(g / scale) * 100}%" title="guaranteed"></div>
        ${lim == null ? '' : `<div class="q-lim" style="left:${Math.min(100, (lim / scale) * 100)}%" title="limit"></div>`}</div></td>
      <td>${gpus(alloc)}</td><td>${gpus(g)}</td><td>${lim == null ? 'none' : gpus(lim)}</td>
      <td>${esc(position(alloc, g, lim))}</td>
      <td>${t.fair_share ? `${t.fair_share.rank} of ${t.fair_share.of} (dominant share ${(t.fair_share.dominant_share * 100).toFixed(1)} %)` : '–'}</td>
      <td>${u ? `${(u.gpu_milli_s_used / 3.6e6).toFixed(3)} GPU·h${usedPct == null ? '' : ` (${usedPct} % of held)`}` : '–'}</td></tr>`);
    model.tenants.filter((x) => x.parent === t.name).sort((a, b) => a.name.localeCompare(b.name)).forEach((x) => walk(x, depth + 1));
  };
  roots.forEach((t) => walk(t, 0));
  root.innerHTML = `<h1>Tenants</h1>
    <table class="tenants"><thead><tr><th>Tenant</th><th>Default QoS</th><th>Weight</th><th>Allocated now (bar), guarantee │, limit ┃</th>
    <th>Allocated</th><th>Guaranteed</th><th>Limit</th><th>Position</th>
    <th title="among its siblings, by the scheduler's weighted dominant share: 1 is served first">Fair-share order</th>
    <th>Used (metered, this and the last hour)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}
