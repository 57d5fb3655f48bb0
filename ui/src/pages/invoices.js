// Invoices: this month's bill per account (GET /v1/invoices), when the control plane has a price
// plan; money is integer micro-units of the plan's currency.
import { get } from '../api.js';
import { esc } from '../format.js';

const money = (micro, cur) => `${(micro / 1e6).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })} ${cur}`;

export async function render(root) {
  let inv;
  try {
    inv = await get('/v1/invoices');
  } catch (e) {
    root.innerHTML = `<h1>Invoices</h1><p class="note">${esc(e.code === 'no_price_plan' ? 'No price plan is configured on this control plane (tessera serve --price-plan).' : e.message)}</p>`;
    return;
  }
  const cur = inv.currency || '';
  root.innerHTML = `<h1>Invoices <small>${esc(inv.period)}${inv.complete ? '' : ', so far'}</small></h1>
    <table><thead><tr><th>Account</th><th>Total</th><th>Lines</th></tr></thead><tbody>
    ${(inv.invoices || []).map((i) => `<tr><td>${esc(i.tenant)}</td><td>${esc(money(i.total_micro, cur))}</td>
      <td>${(i.lines || []).map((l) => `${esc(l.description)}: ${esc(l.quantity)} ${esc(l.unit)} = ${esc(money(l.amount_micro, cur))}`).join('<br>')}</td></tr>`).join('')}
    </tbody><tfoot><tr><th>Metered total</th><th>${esc(money(inv.metered_total_micro || 0, cur))}</th><th></th></tr></tfoot></table>`;
}
