// Audit (admins): the newest records of the hash-chained log of every state-changing call.
import { get } from '../api.js';
import { esc, time } from '../format.js';
import { model } from '../model.js';

export async function render(root) {
  if (!model.me.admin) {
    root.innerHTML = '<h1>Audit</h1><p class="note">The audit log is shown to admin tokens only.</p>';
    return;
  }
  // Page forward to the end, keeping the last 200 records.
  let after = 0;
  let records = [];
  for (let i = 0; i < 50; ++i) {
    const page = (await get(`/v1/audit?after=${after}&limit=1000`)).records || [];
    records = records.concat(page).slice(-200);
    if (page.length < 1000) break;
    after = page[page.length - 1].seq;
  }
  root.innerHTML = `<h1>Audit <small>the last ${records.length} records</small></h1>
    <table><thead><tr><th>Seq</th><th>Time</th><th>Actor</th><th>Action</th><th>Target</th><th>Result</th></tr></thead><tbody>
    ${records.reverse().map((a) => `<tr><td>${a.seq}</td><td>${esc(time(a.time_ms))}</td><td>${esc(a.actor)}</td><td>${esc(a.action)}</td>
      <td>${esc(a.target)}</td><td>${esc(a.result)}</td></tr>`).join('')}</tbody></table>`;
}
