// Formatting shared by the pages: the viewer's time zone, units on every number, HTML escaping.

const timeFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
  timeZoneName: 'short',
});

export const esc = (s) =>
  String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

// 1764590000000 -> "05/12/2026, 14:33:20 CET" (the viewer's zone and locale)
export const time = (ms) => (ms ? timeFmt.format(new Date(ms)) : '–');

export const zoneName = () => Intl.DateTimeFormat().resolvedOptions().timeZone;

// 125000 ms -> "2 min 5 s"; 7500000 -> "2 h 5 min"
export function duration(ms) {
  if (ms == null || ms < 0) return '–';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// milli-GPU -> "2.5 GPU"
export const gpus = (milli) => `${(milli / 1000).toLocaleString(undefined, { maximumFractionDigits: 2 })} GPU`;

// MiB -> "40 GiB" / "512 MiB"
export function mib(v) {
  if (v == null) return '–';
  if (v >= 1024) return `${(v / 1024).toLocaleString(undefined, { maximumFractionDigits: 1 })} GiB`;
  return `${v} MiB`;
}

export const pct = (x) => `${Math.round(x * 100)} %`;

// p-th percentile (nearest rank) of `xs`, null for none: p99 of [1..100] is 99, p50 of [3, 1, 2] is 2.
export function percentile(xs, p) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
