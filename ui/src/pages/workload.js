// Workload: one workload's request, mode, placement, limits and events (placed, preempted and
// why, finished), fetched on its own (it may have ended).
import { get } from '../api.js';
import { esc, time, mib, duration } from '../format.js';
import { REASONS } from './queue.js';

export async function render(root, ctx, id) {
  let w;
  try {
    w = await get(`/v1/workloads/${encodeURIComponent(id)}`);
  } catch (e) {
    root.innerHTML = `<h1>Workload ${esc(id)}</h1><p class="error">${esc(e.message)}</p>`;
    return;
  }
  const r = w.request || {};
  const rows = [
    ['Tenant', w.tenant], ['State', w.state + (w.wait_reason ? ` (${w.wait_reason}: ${REASONS[w.wait_reason] || ''})` : '')],
    ['QoS', w.qos], ['Priority', w.priority], ['Mode', w.mode], ['Why this mode', w.mode_reason],
    ['GPUs per pod', r.gpus], ['Pods', r.pods || 1], ['Share', r.gpu_milli ? `${r.gpu_milli} milli-GPU` : 'whole GPU'],
    ['Memory limit', r.gpu_mem_mib ? mib(r.gpu_mem_mib) : '–'], ['MIG profile', r.mig_profile || '–'],
    ['Placement', (w.pods || []).map((p) => `${p.node} GPU ${p.gpus.join(', ')}${p.mig_start != null ? ` (MIG slice ${p.mig_start})` : ''}`).join('; ') || '–'],
    ['Submitted', time(w.created_ms)], ['Started', w.start_ms ? `${time(w.start_ms)} (waited ${duration(w.start_ms - w.created_ms)})` : '–'],
    ['Command', r.command ? r.command.join(' ') : '–'],
  ];
  root.innerHTML = `<h1>Workload #${w.id} ${esc(w.name || '')}</h1>
    <table class="kv"><tbody>${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</tbody></table>
    <h2>Events</h2><table><thead><tr><th>Time</th><th>Event</th><th>Detail</th></tr></thead><tbody>
    ${(w.events || []).map((e) => `<tr class="ev-${esc(e.kind)}"><td>${esc(time(e.time_ms))}</td><td>${esc(e.kind)}</td><td>${esc(e.detail || '')}</td></tr>`).join('') ||
      '<tr><td colspan="3">none yet</td></tr>'}</tbody></table>`;
}
