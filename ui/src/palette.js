// Tenant colours: the Okabe-Ito palette (Okabe & Ito 2008), told apart with the common forms of
// colour blindness; a tenant keeps its colour as long as the set of tenant names is the same (the
// sorted list's order), and every coloured mark also carries the tenant's name as text.
export const OKABE_ITO = ['#E69F00', '#56B4E9', '#009E73', '#F0E442', '#0072B2', '#D55E00', '#CC79A7', '#000000'];
// Beyond eight tenants the same hues come back darker (with a label on every mark anyway).
const EXTRA = ['#8a5f00', '#2c6d8f', '#005c43', '#8f8722', '#003f66', '#7f3800', '#7a4764'];

export function tenantColours(names) {
  const sorted = [...new Set(names)].sort();
  const all = OKABE_ITO.concat(EXTRA);
  const map = new Map();
  sorted.forEach((n, i) => map.set(n, all[i % all.length]));
  return (name) => map.get(name) || '#999999';
}

// Black or white text, whichever reads on `hex`.
export function textOn(hex) {
  const v = parseInt(hex.slice(1), 16);
  const l = 0.299 * ((v >> 16) & 255) + 0.587 * ((v >> 8) & 255) + 0.114 * (v & 255);
  return l > 140 ? '#000' : '#fff';
}
