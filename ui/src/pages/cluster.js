// Cluster: GPU allocation over time stacked by tenant (every tenant named in the legend), queue
// length and idle GPUs over time, and the figures of now.
import uPlot from 'uplot';
import { model, idleGpus, heldMilli } from '../model.js';
import { esc, gpus, zoneName, duration, pct, time, percentile } from '../format.js';

let charts = [];
// Allocations change at events, not gradually: steps, held until the next sample.
const stepped = uPlot.paths.stepped({ align: 1 });
const clock = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

function tiles(extra) {
  const n = model.nodes;
  const total = n ? n.reduce((s, x) => s + x.gpus.length, 0) : null;
  const alloc = n ? n.reduce((s, x) => s + x.gpus.reduce((a, g) => a + (g.allocated_milli || 0), 0), 0) : null;
  const mine = model.running.reduce((s, w) => s + heldMilli(w), 0);
  const items = [
    ['Running workloads', model.running.length],
    ['Pending workloads', model.pending.length],
    n ? ['Nodes ready', `${n.filter((x) => x.state === 'ready').length} of ${n.length}`] : null,
    n ? ['GPUs allocated', `${gpus(alloc)} of ${total} GPU`] : ['GPUs held by your workloads', gpus(mine)],
    n ? ['Idle GPUs', idleGpus(n)] : null,
  ].filter(Boolean);
  return `<div class="tiles">${items
    .map(([k, v]) => `<div class="tile"><div class="tile-v">${esc(v)}</div><div class="tile-k">${esc(k)}</div></div>`)
    .join('')}${extra}</div>`;
}

// Waits by QoS class: of the running workloads, submit to start; of the pending ones, so far.
function waits() {
  const now = Date.now();
  const rows = ['Guaranteed', 'Burstable', 'BestEffort'].map((q) => {
    const started = model.running.filter((w) => w.qos === q && w.start_ms).map((w) => w.start_ms - w.created_ms);
    const waiting = model.pending.filter((w) => w.qos === q).map((w) => now - w.created_ms);
    return `<tr><td>${q}</td><td>${waiting.length}</td><td>${esc(duration(percentile(waiting, 99)))}</td>
      <td>${started.length}</td><td>${esc(duration(percentile(started, 99)))}</td></tr>`;
  });
  return `<table class="compact"><thead><tr><th>QoS</th><th>Pending</th><th>Waiting so far, p99</th><th>Running</th>
    <th>Waited before start, p99</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

// Free compute on GPUs that are partly allocated: usable only by fractional requests that fit.
function stranded() {
  if (!model.nodes) return '';
  let partFree = 0;
  let total = 0;
  for (const n of model.nodes.filter((x) => x.state === 'ready'))
    for (const g of n.gpus) {
      total += 1000;
      if (g.allocated_milli > 0 && g.allocated_milli < 1000) partFree += 1000 - g.allocated_milli;
    }
  return total ? `<div class="tile"><div class="tile-v">${esc(pct(partFree / total))}</div>
    <div class="tile-k">free in partly used GPUs (${esc(gpus(partFree))})</div></div>` : '';
}

function recentEvents() {
  const rows = model.events.slice(0, 8).map((e) => `<tr><td>${esc(time(e.time_ms))}</td><td>${esc(e.tenant)}</td>
    <td><a href="#/workload/${e.workload}">#${e.workload}</a></td><td>${esc(e.kind)}</td><td>${esc(e.detail || '')}</td></tr>`);
  return `<table class="compact"><thead><tr><th>Time</th><th>Tenant</th><th>Workload</th><th>Event</th><th>Detail</th></tr></thead>
    <tbody>${rows.join('') || '<tr><td colspan="5">none since this page was opened</td></tr>'}</tbody></table>`;
}

export function render(root, ctx) {
  for (const c of charts) c.destroy();
  charts = [];
  root.innerHTML = `<h1>Cluster</h1>${tiles(stranded())}
    <div class="two"><section><h2>Waits by QoS class</h2>${waits()}</section>
    <section><h2>Latest events <small>(live)</small></h2>${recentEvents()}</section></div>
    <section><h2>GPU allocation by tenant <small>(GPUs, stacked; times in ${esc(zoneName())})</small></h2>
      <div id="chart-alloc" class="chart" role="img" aria-label="GPU allocation over time stacked by tenant"></div></section>
    <section><h2>Queue and idle GPUs</h2>
      <div id="chart-queue" class="chart" role="img" aria-label="pending workloads and idle GPUs over time"></div></section>
    <p class="note">${model.history.server
      ? 'The last hour as the control plane sampled it (every 5 s), then this page (every 5 s and on every event).'
      : 'Sampled by this page since it was opened (every 5 s and on every event).'}</p>`;
  const h = model.history;
  if (h.t.length < 1) return;
  const width = Math.min(root.clientWidth || 1000, 1180);
  const names = Object.keys(h.byTenant).sort();
  // Stacked: each series is the sum of itself and those below it, drawn from the top down so
  // that each band shows; the legend gives each tenant's own value.
  const own = names.map((n) => h.byTenant[n].map((v) => v / 1000));
  const cum = [];
  own.forEach((s, i) => cum.push(s.map((v, j) => v + (i ? cum[i - 1][j] : 0))));
  const order = names.map((_, i) => i).reverse();
  const data = [h.t, ...order.map((i) => cum[i])];
  const series = [
    {},
    ...order.map((i) => ({
      label: names[i],
      stroke: ctx.colour(names[i]),
      fill: ctx.colour(names[i]),
      width: 1,
      points: { show: false },
      paths: stepped,
      value: (u, v, si, idx) => (idx == null ? '–' : `${own[i][idx].toFixed(2)} GPU`),
    })),
  ];
  const xAxis = { space: 90, values: (u, ticks) => ticks.map((t) => clock.format(new Date(t * 1000))) };
  const axes = [xAxis, { label: 'GPUs', size: 50 }];
  // Both charts start at 0, and their legends show the newest point until the cursor moves.
  const fromZero = { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, Math.ceil(max * 1.1))] } };
  const latest = (u) => u.setLegend({ idx: u.data[0].length - 1 });
  charts.push(new uPlot({ width, height: 260, series, axes, scales: fromZero, hooks: { ready: [latest] } }, data,
    root.querySelector('#chart-alloc')));
  const qdata = [h.t, h.queue, h.idle.map((v) => (v == null ? null : v))];
  charts.push(new uPlot({
    width, height: 200,
    series: [{}, { label: 'pending workloads', stroke: '#D55E00', width: 2, paths: stepped, value: (u, v) => (v == null ? '–' : `${v}`) },
      { label: 'idle GPUs', stroke: '#0072B2', width: 2, dash: [6, 4], paths: stepped, value: (u, v) => (v == null ? '–' : `${v} GPU`) }],
    axes: [xAxis, { label: 'count', size: 50 }],
    scales: fromZero,
    hooks: { ready: [latest] },
  }, qdata, root.querySelector('#chart-queue')));
}
