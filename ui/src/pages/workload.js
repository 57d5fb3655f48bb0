// Workload: one workload's request, mode, placement, limits, metered use and events (placed,
// preempted and why, finished), fetched on its own (it may have ended).
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
  // Its metered use: the ledger's hours of its tenant from an hour before it was submitted, this
  // workload's only. The hour before: an agent's clock may be behind the control plane's, and a
  // sample stamped before the submission (in the previous hour) is still this workload's use
  // (from = the submission itself lost it: the dashboard test failed in each hour's first minutes).
  let use = null;
  try {
    const from = Math.floor(w.created_ms / 1000) - 3600;
    const u = await get(`/v1/usage?tenant=${encodeURIComponent(w.tenant)}&from=${from}`);
    const mine = (u.hours || []).filter((h) => String(h.workload) === String(w.id));
    if (mine.length) {
      use = mine.reduce((a, h) => ({
        seconds: a.seconds + h.seconds, allocated: a.allocated + h.gpu_milli_s_allocated, used: a.used + h.gpu_milli_s_used,
        peak: Math.max(a.peak, h.peak_memory_mib), launches: a.launches + h.kernel_launches,
      }), { seconds: 0, allocated: 0, used: 0, peak: 0, launches: 0 });
    }
  } catch {
    use = null; // usage is an extra: the workload's page stands without it
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
    ['Metered use', use ? `${(use.used / 3.6e6).toFixed(3)} GPU·h used of ${(use.allocated / 3.6e6).toFixed(3)} GPU·h held` +
      ` (${use.allocated ? Math.round((use.used / use.allocated) * 100) : 0} %), peak memory ${mib(use.peak)}, ` +
      `${use.launches.toLocaleString()} kernel launches` : 'no usage sample yet'],
  ];
  root.innerHTML = `<h1>Workload #${w.id} ${esc(w.name || '')}</h1>
    <table class="kv"><tbody>${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join('')}</tbody></table>
    <h2>Events</h2><table><thead><tr><th>Time</th><th>Event</th><th>Detail</th></tr></thead><tbody>
    ${(w.events || []).map((e) => `<tr class="ev-${esc(e.kind)}"><td>${esc(time(e.time_ms))}</td><td>${esc(e.kind)}</td><td>${esc(e.detail || '')}</td></tr>`).join('') ||
      '<tr><td colspan="3">none yet</td></tr>'}</tbody></table>`;
}
