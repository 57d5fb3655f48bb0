// The tessera dashboard (docs/dashboard.md): a token typed once (kept in sessionStorage) or given
// as /ui/#token=..., pages under #/page, refreshed on every server-sent event and every 5 s.
// Keys: 1-8 switch pages, r refreshes; every control is a link or button reachable with Tab.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { takeTokenFromFragment, token, streamEvents, ApiError } from './api.js';
import { model, refresh, whoAmI, clearHistory, loadServerHistory } from './model.js';
import { tenantColours } from './palette.js';
import { esc, time } from './format.js';
import * as cluster from './pages/cluster.js';
import * as gpus from './pages/gpus.js';
import * as queue from './pages/queue.js';
import * as tenants from './pages/tenants.js';
import * as workload from './pages/workload.js';
import * as invoices from './pages/invoices.js';
import * as anomalies from './pages/anomalies.js';
import * as audit from './pages/audit.js';

const PAGES = [
  ['cluster', 'Cluster', cluster],
  ['gpus', 'GPU map', gpus],
  ['queue', 'Queue', queue],
  ['tenants', 'Tenants', tenants],
  ['invoices', 'Invoices', invoices],
  ['anomalies', 'Anomalies', anomalies],
  ['audit', 'Audit', audit],
];

const app = document.getElementById('app');
let stopEvents = null;
let liveState = 'connecting';
let timer = null;
let pending = null;

function route() {
  const [, page = 'cluster', arg] = (window.location.hash || '#/cluster').split('/');
  return { page, arg };
}

function login(message) {
  if (stopEvents) stopEvents();
  stopEvents = null;
  clearInterval(timer);
  app.innerHTML = `<main class="login"><h1>tessera</h1>
    <form id="login"><label for="token">API token</label>
    <input id="token" name="token" type="password" autocomplete="off" required autofocus>
    <button type="submit">Open the dashboard</button>
    ${message ? `<p class="error" role="alert">${esc(message)}</p>` : ''}
    <p class="note">Kept in this tab's session storage only. An admin token sees the whole cluster; a tenant token its
    own subtree.</p></form></main>`;
  app.querySelector('#login').addEventListener('submit', (e) => {
    e.preventDefault();
    token.set(app.querySelector('#token').value);
    clearHistory();
    start();
  });
}

function shell() {
  const { page } = route();
  const nav = PAGES.filter(([id]) => id !== 'audit' || model.me.admin)
    .map(([id, label], i) => `<a href="#/${id}" ${id === page ? 'aria-current="page"' : ''}><kbd>${i + 1}</kbd> ${label}</a>`).join('');
  app.innerHTML = `<header><span class="brand">tessera</span><nav aria-label="pages">${nav}</nav>
    <span class="live live-${liveState}" role="status" id="live">${esc(liveLabel())}</span>
    <span class="who">${model.me.admin ? 'admin' : model.me.cluster ? 'viewer (read only)' : 'tenant: ' + esc(model.tenants.map((t) => t.name).join(', '))}</span>
    <button id="signout" type="button">Sign out</button></header>
    <main id="page" tabindex="-1"></main>
    <footer>Updated ${esc(time(model.updated))}</footer>`;
  app.querySelector('#signout').addEventListener('click', () => {
    token.clear();
    clearHistory();
    login('');
  });
}

function liveLabel() {
  return { live: '● live', reconnecting: '○ reconnecting…', denied: '○ no event stream', connecting: '○ connecting…' }[liveState];
}

async function show() {
  const { page, arg } = route();
  if (!document.getElementById('page')) shell();
  const root = document.getElementById('page');
  const ctx = { colour: tenantColours(model.tenants.map((t) => t.name)) };
  const entry = page === 'workload' ? ['workload', 'Workload', workload] : PAGES.find(([id]) => id === page) || PAGES[0];
  try {
    await entry[2].render(root, ctx, arg);
    root.dataset.page = entry[0];
    root.dataset.rendered = String(model.updated);
  } catch (e) {
    root.innerHTML = `<p class="error">${esc(e.message)}</p>`;
  }
}

// Refreshes the model and redraws, at most one at a time (a burst of events makes one more).
async function update() {
  if (pending) {
    pending.again = true;
    return;
  }
  pending = { again: false };
  try {
    await refresh();
    shell();
    await show();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      token.clear(); // revoked or expired meanwhile
      login('That token was refused: ' + e.message);
    }
  } finally {
    const again = pending.again;
    pending = null;
    if (again) update();
  }
}

async function start() {
  audit.reset();
  if (!token.get()) return login('');
  try {
    await whoAmI();
    await loadServerHistory();
    await refresh();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      token.clear(); // a refused token is not kept
      return login('That token was refused: ' + e.message);
    }
    return login(String(e.message || e));
  }
  shell();
  await show();
  if (stopEvents) stopEvents();
  stopEvents = streamEvents(
    (ev) => {
      model.events.unshift(ev);
      model.events.length = Math.min(model.events.length, 50);
      update();
    },
    (s) => {
      liveState = s;
      const el = document.getElementById('live');
      if (el) {
        el.textContent = liveLabel();
        el.className = `live live-${s}`;
      }
    },
  );
  clearInterval(timer);
  timer = setInterval(update, 5000);
}

window.addEventListener('hashchange', () => {
  if (/token=/.test(window.location.hash)) {
    takeTokenFromFragment();
    clearHistory();
    start();
    return;
  }
  if (!token.get()) return;
  shell();
  show();
});
window.addEventListener('keydown', (e) => {
  if (e.target.closest && e.target.closest('input, textarea, select')) return;
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  const visible = PAGES.filter(([id]) => id !== 'audit' || model.me.admin);
  const n = Number(e.key);
  if (n >= 1 && n <= visible.length) {
    window.location.hash = `#/${visible[n - 1][0]}`;
    document.getElementById('page')?.focus();
  } else if (e.key === 'r') update();
});

takeTokenFromFragment();
start();
