// GPU map: every node and GPU; each GPU's compute as a bar of the workloads' shares in tenant
// colours (named on the bar), its memory limits against its memory, and for a MIG GPU the slot
// diagram: which profile sits at which memory slice. A tenant token sees no node inventory (the
// API keeps it to admins): it gets where its own workloads run.
import { model, heldMilli, usageByGpu } from '../model.js';
import { esc, gpus, mib, time, pct } from '../format.js';
import { textOn } from '../palette.js';

// The workloads on (node, gpu), with what each holds of it.
function onGpu(node, index) {
  const out = [];
  for (const w of model.running)
    for (const p of w.pods || [])
      if (p.node === node && (p.gpus || []).includes(index)) out.push({ w, mig_start: p.mig_start });
  return out;
}

function perGpuMilli(w) {
  const r = w.request || {};
  return Math.round(heldMilli(w) / ((r.gpus || 1) * (r.pods || 1)));
}

// "3g.40gb" on an 80 GiB GPU -> 4 of its 8 memory slices.
export function migSlices(profile, gpuMemMib) {
  const gb = parseInt(String(profile).split('.')[1], 10);
  if (!gb || !gpuMemMib) return 1;
  return Math.max(1, Math.min(8, Math.round(gb / (gpuMemMib / 1024 / 8))));
}

// The node's conditions its agent reported not ok (GET /v1/nodes `conditions`, each heartbeat's
// current view), as badges: text "TYPE: not ok", the agent's detail on hover. An ok condition,
// and a lost node (whose conditions are unknown: the API sends none), shows nothing.
//   [{type: 'nvml', ok: false, detail: 'GPU 1: GPU is lost'}, {type: 'disk', ok: true}]
//     -> [{type: 'nvml', text: 'nvml: not ok', title: 'GPU 1: GPU is lost'}]
export function conditionBadges(node) {
  return (node.conditions || [])
    .filter((c) => c && c.ok === false)
    .map((c) => ({ type: c.type, text: `${c.type}: not ok`, title: c.detail || `the agent reports ${c.type} not ok` }));
}

const hourFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });

// The memory a workload may use on GPU g: its limit, a MIG instance's own memory ("3g.40gb":
// 40 GiB), else the whole GPU's.
export function memoryOf(w, g) {
  const r = w.request || {};
  if (r.gpu_mem_mib) return r.gpu_mem_mib;
  const gb = r.mig_profile ? parseInt(String(r.mig_profile).split('.')[1], 10) : 0;
  return gb ? gb * 1024 : g.memory_mib || 0;
}

function segment(w, widthPct, ctx, extra = '') {
  const c = ctx.colour(w.tenant);
  const label = `${w.tenant} #${w.id}${extra}`;
  return `<a class="seg" href="#/workload/${w.id}" style="width:${widthPct}%;background:${c};color:${textOn(c)}"
    title="${esc(label)}" aria-label="${esc(label)}">${esc(label)}</a>`;
}

function gpuCard(node, g, ctx) {
  const here = onGpu(node.name, g.index);
  let compute;
  if (g.mig_enabled) {
    const cells = [];
    for (const { w, mig_start } of here) {
      const n = migSlices(w.request.mig_profile, g.memory_mib);
      const what = `${w.request.mig_profile} at slice ${mig_start ?? 0}: ${w.tenant} #${w.id}`;
      cells.push(`<div class="mig-slot" title="${esc(what)}" aria-label="${esc(what)}" style="grid-column:${(mig_start ?? 0) + 1} / span ${n};background:${ctx.colour(w.tenant)};color:${textOn(ctx.colour(w.tenant))}">
        <a href="#/workload/${w.id}">${esc(w.request.mig_profile)}</a> ${esc(w.tenant)} #${w.id}</div>`);
    }
    compute = `<div class="mig" aria-label="MIG slots: 8 memory slices">${cells.join('')}
      ${Array.from({ length: 8 }, (_, i) => `<div class="mig-cell" style="grid-column:${i + 1}">${i}</div>`).join('')}</div>`;
  } else {
    const mine = here.reduce((s, x) => s + perGpuMilli(x.w), 0);
    const others = Math.max(0, (g.allocated_milli || 0) - mine);
    compute = `<div class="bar">${here.map(({ w }) => segment(w, perGpuMilli(w) / 10, ctx, ` ${gpus(perGpuMilli(w))}`)).join('')}
      ${others ? `<span class="seg other" style="width:${others / 10}%">not visible</span>` : ''}</div>`;
  }
  const u = ctx.usage.get(`${node.name}/${g.index}`);
  const use = u && u.allocated ? `<div class="muted small">used ${pct(u.used / u.allocated)} of what was allocated, peak
    ${mib(u.peak)} (hour from ${esc(hourFmt.format(new Date(Date.parse(u.hour))))})</div>` : '';
  const memLimit = here.reduce((s, x) => s + memoryOf(x.w, g), 0);
  const memPct = g.memory_mib ? Math.min(100, (memLimit / g.memory_mib) * 100) : 0;
  const free = 1000 - (g.allocated_milli || 0);
  return `<div class="gpu" tabindex="0" aria-label="${esc(`${node.name} GPU ${g.index}: ${gpus(g.allocated_milli || 0)} allocated`)}">
    <div class="gpu-head"><b>GPU ${g.index}</b> ${esc(g.model)}${g.mig_enabled ? ' <span class="badge">MIG</span>' : ''}
      <span class="muted">${gpus(g.allocated_milli || 0)} allocated, ${gpus(free)} free</span></div>
    ${compute}
    <div class="mem" title="memory limits of the workloads on it, of the GPU's memory">
      <div class="mem-fill" style="width:${memPct}%"></div>
      ${u && g.memory_mib ? `<div class="mem-peak" style="left:${Math.min(100, (u.peak / g.memory_mib) * 100)}%" title="peak memory used"></div>` : ''}
      <span>${g.memory_mib ? `memory limits ${mib(memLimit)} of ${mib(g.memory_mib)}` : `memory limits ${mib(memLimit)} (GPU memory not reported)`}</span></div>
    ${use}
  </div>`;
}

export function render(root, ctx) {
  ctx.usage = usageByGpu();
  if (!model.nodes) {
    // One bar per GPU that holds a workload of this token's tenants; the rest of each GPU is
    // free or another tenant's, which this token may not know.
    const where = new Map();
    for (const w of model.running)
      for (const p of w.pods || [])
        for (const g of p.gpus || []) {
          const key = `${p.node} GPU ${g}`;
          where.set(key, [...(where.get(key) || []), { w, mig_start: p.mig_start }]);
        }
    const rows = [...where].sort(([a], [b]) => a.localeCompare(b)).map(([key, here]) => {
      const segs = here.map(({ w }) => segment(w, perGpuMilli(w) / 10, ctx,
        w.request.mig_profile ? ` ${w.request.mig_profile}` : ` ${gpus(perGpuMilli(w))}`)).join('');
      return `<div class="gpu" tabindex="0"><div class="gpu-head"><b>${esc(key)}</b></div><div class="bar">${segs}</div></div>`;
    });
    root.innerHTML = `<h1>GPU map</h1><p class="note">The GPUs your running workloads use, and what each holds of
      its GPU (the hatched rest is free or another tenant's; node inventory is shown to admin tokens only).</p>
      <div class="gpus">${rows.join('') || '<p>None of your workloads runs now.</p>'}</div>`;
    return;
  }
  root.innerHTML = `<h1>GPU map</h1>
    <div class="nodes">${model.nodes
      .map((n) => `<section class="node node-${esc(n.state)}"><h2>${esc(n.name)} <span class="badge">${esc(n.state)}</span>${conditionBadges(n)
        .map((c) => ` <span class="badge badge-bad condition" data-condition="${esc(c.type)}" title="${esc(c.title)}"
          aria-label="${esc(`${c.text}: ${c.title}`)}" tabindex="0">${esc(c.text)}</span>`).join('')}
        <small>${n.gpus.length} GPU, ${n.workloads} workloads, heartbeat ${esc(time(n.last_heartbeat_ms))}</small></h2>
        <div class="gpus">${n.gpus.map((g) => gpuCard(n, g, ctx)).join('')}</div></section>`)
      .join('') || '<p>No node has registered.</p>'}</div>`;
}
