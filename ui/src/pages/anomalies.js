// Anomalies: what the control plane's detector flagged per tenant and closed hour
// (GET /v1/anomalies; tenant-scoped by the server exactly as the API: a tenant token gets its
// subtree's flags only). Hours in the viewer's time zone; values in their series' unit.
import { get } from '../api.js';
import { esc, time, zoneName } from '../format.js';

const UNITS = {
  usage_gpu_seconds: ['GPU-seconds used', 'GPU·s'],
  usage_used_fraction: ['used / allocated', ''],
  queue_wait_p99_s: ['queue wait p99', 's'],
  refusals: ['refused submits', ''],
  preemptions: ['preemptions', ''],
};

// 1260 -> "1,260", 0.35 -> "0.35"
const num = (v) => (typeof v === 'number' ? v.toLocaleString(undefined, { maximumFractionDigits: Math.abs(v) >= 100 ? 0 : 2 }) : '–');

export async function render(root) {
  const a = await get('/v1/anomalies');
  const list = (a.anomalies || []).slice().reverse(); // newest first
  const rows = list.map((x) => {
    const [what, unit] = UNITS[x.series] || [x.series, ''];
    const u = unit ? ` ${unit}` : '';
    return `<tr><td>${esc(time(x.hour_s * 1000))}</td>
      <td><a href="#/tenants/${encodeURIComponent(x.tenant)}">${esc(x.tenant)}</a></td>
      <td title="${esc(x.series)}">${esc(what)}</td>
      <td class="num">${esc(num(x.value) + u)}</td>
      <td class="num">${esc(num(x.expected) + u)} <small>(${esc(num(x.expected_low))}–${esc(num(x.expected_high))})</small></td>
      <td class="num">${esc(num(x.score))}</td><td>${esc(x.reason)}</td></tr>`;
  });
  root.innerHTML = `<h1>Anomalies <small>hours in ${esc(zoneName())}</small></h1>
    ${list.length === 0
      ? '<p class="note">No anomalies: the detector flags a tenant\'s hour once it has seen enough hours of its series (docs/api.md, Anomalies).</p>'
      : `<table class="anomalies"><thead><tr><th>Hour starting</th><th>Tenant</th><th>Series</th><th>Value</th>
        <th>Expected (range)</th><th>Score</th><th>Reason</th></tr></thead><tbody>${rows.join('')}</tbody></table>`}`;
}
