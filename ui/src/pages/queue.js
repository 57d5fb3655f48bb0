// Queue: the pending workloads with their wait reasons. Order: QoS class (Guaranteed first),
// then priority (higher first), then age, as the scheduler takes them within a tenant; across
// tenants the scheduler also weighs fair share, which the API does not expose.
import { model } from '../model.js';
import { esc, duration, time } from '../format.js';
import { textOn } from '../palette.js';

const QOS = { Guaranteed: 0, Burstable: 1, BestEffort: 2 };
export const REASONS = {
  queued: 'queued behind other work',
  capacity: 'no free capacity',
  limit: "over its tenant's limit",
  guarantee: 'over its guarantee (Guaranteed work)',
  affinity: 'no node meets its affinity',
  no_fitting_node: 'no registered node can hold it',
};

export function ordered(list) {
  return [...list].sort((a, b) => (QOS[a.qos] ?? 3) - (QOS[b.qos] ?? 3) || (b.priority || 0) - (a.priority || 0) ||
    a.created_ms - b.created_ms || a.id - b.id);
}

export function render(root, ctx) {
  const now = Date.now();
  const rows = ordered(model.pending).map((w, i) => {
    const c = ctx.colour(w.tenant);
    const r = w.request || {};
    const shape = r.mig_profile ? `MIG ${r.mig_profile}` : r.gpu_milli && r.gpu_milli < 1000 ? `${r.gpu_milli} milli-GPU` : `${r.gpus || 1} GPU`;
    return `<tr><td>${i + 1}</td><td><a href="#/workload/${w.id}">#${w.id}</a> ${esc(w.name || '')}</td>
      <td><span class="chip" style="background:${c};color:${textOn(c)}">${esc(w.tenant)}</span></td>
      <td>${esc(w.qos)}</td><td>${w.priority || 0}</td><td>${esc(shape)}${(r.pods || 1) > 1 ? ` × ${r.pods} pods` : ''}</td>
      <td class="reason"><b>${esc(w.wait_reason || '')}</b> <span class="muted">${esc(REASONS[w.wait_reason] || '')}</span></td>
      <td title="${esc(time(w.created_ms))}">${esc(duration(now - w.created_ms))}</td></tr>`;
  });
  root.innerHTML = `<h1>Queue <small>${model.pending.length} pending</small></h1>
    <table class="queue"><thead><tr><th>#</th><th>Workload</th><th>Tenant</th><th>QoS</th><th>Priority</th><th>Asks for</th>
    <th>Waiting for</th><th>Waiting</th></tr></thead>
    <tbody>${rows.join('') || '<tr><td colspan="8">Nothing is waiting.</td></tr>'}</tbody></table>
    <p class="note">Ordered by QoS class, priority and age; across tenants the scheduler also weighs fair share.</p>`;
}
