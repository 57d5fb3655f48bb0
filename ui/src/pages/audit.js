// Audit (admins): the newest records of the hash-chained log of every state-changing call.
import { get } from '../api.js';
import { esc, time } from '../format.js';
import { model } from '../model.js';

// The records seen so far (the newest 200) and where to go on from: each refresh asks only for
// the records after the last one.
const seen = { after: 0, records: [] };

export async function render(root) {
  if (!model.me.admin) {
    root.innerHTML = '<h1>Audit</h1><p class="note">The audit log is shown to admin tokens only.</p>';
    return;
  }
  for (let i = 0; i < 50; ++i) {
    const page = (await get(`/v1/audit?after=${seen.after}&limit=1000`)).records || [];
    seen.records = seen.records.concat(page).slice(-200);
    if (page.length) seen.after = page[page.length - 1].seq;
    if (page.length < 1000) break;
  }
  const records = [...seen.records].reverse();
  root.innerHTML = `<h1>Audit <small>the last ${records.length} records</small></h1>
    <table><thead><tr><th>Seq</th><th>Time</th><th>Actor</th><th>Action</th><th>Target</th><th>Result</th></tr></thead><tbody>
    ${records.map((a) => `<tr><td>${a.seq}</td><td>${esc(time(a.time_ms))}</td><td>${esc(a.actor)}</td><td>${esc(a.action)}</td>
      <td>${esc(a.target)}</td><td>${esc(a.result)}</td></tr>`).join('')}</tbody></table>`;
}

// A new token may see another log (sign-out, another admin token): start again.
export function reset() {
  seen.after = 0;
  seen.records = [];
}
