// The dashboard in a real browser (ctest label `ui`; docs/dashboard.md): a real `tessera serve`
// with the demo's tenants, two registered nodes (2 x H100-80GB in MIG mode, 4 x A100-40GB) and a
// mix of running and waiting work, driven through Debian's chromium by playwright-core. It checks
// that each page shows the data (every node and GPU, the tenants, a pending workload's reason, a
// workload's events, a node condition an agent reports not ok, an anomaly the detector flagged in
// 200 hours of usage the agent reported before a restart of serve), that a preemption appears
// live without a reload, that a tenant's token
// sees no other tenant anywhere, and that no page logs an error; it writes a screenshot of each
// page at 1280x800.
//
//   node tests/ui/dashboard_test.mjs --tessera build/tessera --ui-dir build/ui [--screenshots docs/ui]
//
// Exit 77 (ctest: skipped) with the reason when chromium or the npm packages are not installed
// (scripts/setup installs both).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const tessera = path.resolve(args.tessera || path.join(root, 'build/tessera'));
const uiDir = path.resolve(args['ui-dir'] || path.join(path.dirname(tessera), 'ui'));
const shots = path.resolve(args.screenshots || path.join(path.dirname(tessera), 'ui-screenshots'));
const chromiumPath = process.env.TESSERA_CHROMIUM || '/usr/bin/chromium';

function skip(why) {
  console.log(`SKIPPED: ${why} (scripts/setup installs it)`);
  process.exit(77);
}
if (!fs.existsSync(chromiumPath)) skip(`no chromium at ${chromiumPath}`);
let chromium;
try {
  chromium = createRequire(path.join(root, 'ui/package.json'))('playwright-core').chromium;
} catch {
  skip('playwright-core is not installed in ui/node_modules (npm ci in ui/)');
}
if (!fs.existsSync(path.join(uiDir, 'index.html'))) {
  console.error(`FAIL: no built dashboard in ${uiDir} (build the tessera_ui target)`);
  process.exit(1);
}

let failures = 0;
function check(cond, what) {
  if (cond) console.log(`ok   ${what}`);
  else {
    failures++;
    console.log(`FAIL ${what}`);
  }
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-ui-test-'));
const admin = 'ui-test-admin-token-0123456789';
fs.writeFileSync(path.join(work, 'serve.yaml'), 'cycle_interval_ms: 100\nnode_timeout: 600\nscheduler:\n  min_runtime_s: 0\n');
// A price plan for the two models, so that the Invoices page has invoices.
fs.writeFileSync(path.join(work, 'plan.yaml'), `currency: USD
capacity: {A100-40GB: 4, H100-80GB: 2}
prices:
  A100-40GB: {gpu_hour: 1.80, memory_gib_hour: 0.001}
  H100-80GB: {gpu_hour: 3.00, mig: {1g.10gb: 0.45, 3g.40gb: 1.40}}
`);
// A serve on the test's store; `serve` and `base` are the running one's.
let serve;
let base;
let serveLog = '';
async function startServe() {
  serveLog = '';
  const proc = spawn(tessera, ['serve', '--config', path.join(work, 'serve.yaml'), '--db', `sqlite:${work}/t.db`,
    '--listen', '127.0.0.1:0', '--ui-dir', uiDir, '--price-plan', path.join(work, 'plan.yaml')], { env: { ...process.env, TESSERA_BOOTSTRAP_TOKEN: admin } });
  serve = proc;
  base = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('tessera serve did not say where it listens:\n' + serveLog)), 20000);
    const onData = (d) => {
      serveLog += d;
      const m = /listening on (http:\/\/[0-9.:]+)/.exec(serveLog);
      if (m) {
        clearTimeout(t);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`tessera serve exited ${code}:\n${serveLog}`)));
  });
}
async function stopServe() {
  const exited = new Promise((resolve) => serve.once('exit', resolve));
  serve.kill('SIGTERM');
  await exited;
}
await startServe();

async function api(method, p, body, tok = admin) {
  const res = await fetch(base + p, {
    method, headers: { Authorization: `Bearer ${tok}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

let browser;
try {
  // The demo's tenants (data/examples/demo-tenants.json) and two nodes.
  const demo = JSON.parse(fs.readFileSync(path.join(root, 'data/examples/demo-tenants.json'), 'utf8'));
  for (const t of demo.tenants) await api('POST', '/v1/tenants', { name: t.name, quota: t.quota || {} });
  const agent = (await api('POST', '/v1/tokens', { role: 'node-agent' })).token;
  const research = (await api('POST', '/v1/tokens', { role: 'tenant-user', tenant: 'research' })).token;
  const viewer = (await api('POST', '/v1/tokens', { role: 'viewer' })).token;
  const inventory = (name, model, memory_mib, n, mig) => ({
    cpu_milli: 64000, memory_mib: 524288,
    gpus: Array.from({ length: n }, (_, i) => ({ index: i, uuid: `GPU-${name}-${i}`, model, memory_mib, mig_enabled: mig })),
    ...(mig ? { mig_reconfigure: true } : {}),  // its agent applies MIG layouts (issue 32)
  });
  // An anomaly for the Anomalies page, made as the API makes one (src/daemon/anomaly_service.h, "A
  // restart"): the agent reports 200 closed hours of prod's use of an A100 (0.1 GPU, half used:
  // 180 GPU-seconds an hour), the last of them the whole GPU (1,800 GPU-seconds); serve restarted
  // on the same store warms its detectors from the stored usage and flags that hour at start. The
  // samples name the GPU by a UUID no card of the map has, so that the map's utilisation (the
  // newest hour per node and GPU index) stays the test's own samples'.
  await api('POST', '/v1/nodes/n-a100/register', inventory('n-a100', 'A100-40GB', 40960, 4, false), agent);
  const nowHour = Math.floor(Date.now() / 3600000) * 3600;
  const spike = nowHour - 3600;
  const history = Array.from({ length: 200 }, (_, h) => {
    const start = nowHour - (200 - h) * 3600;
    const milli = start === spike ? 1000 : 100;
    return { tenant: 'prod', workload: 'history', gpu: 'GPU-n-a100-history', model: 'A100-40GB', partition: 'share', seq: h, start,
      end: start + 3600, gpu_milli_s_allocated: milli * 3600, gpu_milli_s_used: milli * 1800, memory_mib_s: 0, peak_memory_mib: 0,
      kernel_launches: 0 };
  });
  const stored = (await api('POST', '/v1/nodes/n-a100/usage', { samples: history }, agent)).stored;
  check(stored === 200, `the agent's 200 hours of prod's usage are stored (${stored})`);
  await stopServe();
  await startServe();
  const flags = (await api('GET', '/v1/anomalies')).anomalies;
  check(flags.length === 1 && flags[0].tenant === 'prod' && flags[0].series === 'usage_gpu_seconds' && flags[0].hour_s === spike,
    `the restarted serve flags prod's spike (${JSON.stringify(flags)})`);
  const flag = flags[0] || {};

  await api('POST', '/v1/nodes/n-h100/register', inventory('n-h100', 'H100-80GB', 81559, 2, true), agent);
  await api('POST', '/v1/nodes/n-a100/register', inventory('n-a100', 'A100-40GB', 40960, 4, false), agent);
  const submit = async (w) => (await api('POST', '/v1/workloads', w)).id;
  const ids = {};
  ids.inference = await submit({ tenant: 'prod', name: 'inference', gpus: 1, qos: 'Guaranteed', mig_profile: '3g.40gb', model: 'H100-80GB' });
  ids.small = await submit({ tenant: 'research', name: 'notebook', gpus: 1, qos: 'Burstable', mig_profile: '1g.10gb', model: 'H100-80GB' });
  ids.trainA = await submit({ tenant: 'research', name: 'train-a', gpus: 1, qos: 'Burstable', gpu_milli: 500, gpu_mem_mib: 4096, model: 'A100-40GB' });
  ids.trainB = await submit({ tenant: 'research', name: 'train-b', gpus: 1, qos: 'Burstable', gpu_milli: 300, gpu_mem_mib: 8192, model: 'A100-40GB' });
  ids.batch = [];
  for (let i = 1; i <= 4; ++i) ids.batch.push(await submit({ tenant: 'batch', name: `batch-${i}`, gpus: 1, qos: 'BestEffort', model: 'A100-40GB' }));
  ids.huge = await submit({ tenant: 'research', name: 'too-big', gpus: 8, qos: 'Burstable', model: 'A100-40GB' });
  // Wait for the scheduler: everything placed that can be.
  const deadline = Date.now() + 20000;
  let running = [];
  while (Date.now() < deadline) {
    running = (await api('GET', '/v1/workloads?state=running')).workloads;
    if (running.length >= 7) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(running.length >= 7, `the scheduler placed the demo's work (${running.length} running)`);
  const pending = (await api('GET', '/v1/workloads?state=pending')).workloads;
  const huge = pending.find((w) => w.id === ids.huge);
  check(huge && huge.wait_reason === 'no_fitting_node', `workload ${ids.huge} waits with no_fitting_node`);
  // Usage samples, so that the Tenants page has metered use.
  const now = Math.floor(Date.now() / 1000);
  const samples = running.map((w) => ({
    tenant: w.tenant, workload: String(w.id), gpu: String(w.placement.gpus[0]), model: w.placement.node === 'n-h100' ? 'H100-80GB' : 'A100-40GB',
    partition: 'share', seq: 0, start: now - 600, end: now - 300, gpu_milli_s_allocated: 300 * (w.request.gpu_milli || 1000),
    gpu_milli_s_used: 150 * (w.request.gpu_milli || 1000), memory_mib_s: 300 * 1024, peak_memory_mib: 1024, kernel_launches: 10,
  }));
  for (const node of ['n-h100', 'n-a100'])
    await api('POST', `/v1/nodes/${node}/usage`, { samples: samples.filter((s, i) => running[i].placement.node === node) }, agent);

  browser = await chromium.launch({ executablePath: chromiumPath, headless: true });
  fs.mkdirSync(shots, { recursive: true });
  const errors = [];
  const open = async (tok) => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, timezoneId: 'Europe/Berlin' });
    const page = await ctx.newPage();
    // The role probes of a token that is not an admin's (GET /v1/nodes, /v1/audit: 403) are the
    // refusals the page expects; the test's own fetch of another tenant's workload (404) below is
    // not the page's either.
    page.on('console', (m) => {
      const url = m.location().url || '';
      if (m.type() !== 'error' || (tok !== admin && /\/v1\/audit\?limit=1$|\/v1\/nodes$|\/v1\/workloads\/1$/.test(url))) return;
      errors.push(`${m.text()} (${url})`);
    });
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/ui/#token=${encodeURIComponent(tok)}`);
    await page.waitForSelector('#page[data-page=cluster]', { timeout: 10000 });
    return page;
  };
  const visit = async (page, hash, name) => {
    await page.evaluate((h) => { window.location.hash = h; }, hash);
    await page.waitForSelector(`#page[data-page=${name}]`, { timeout: 10000 });
    return page.innerText('#page');
  };

  // Sign-in: a wrong token is refused with the server's message; the right one typed once opens
  // the Cluster page and stays for a reload (sessionStorage).
  {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const login = await ctx.newPage();
    await login.goto(`${base}/ui/`);
    await login.fill('#token', 'not-a-token-of-this-server');
    await login.press('#token', 'Enter');
    await login.waitForSelector('.login .error', { timeout: 10000 });
    check((await login.innerText('.login .error')).includes('refused'), 'sign-in: a wrong token is refused, saying so');
    check(!(await login.evaluate(() => sessionStorage.getItem('tessera.token'))), 'sign-in: a refused token is not kept');
    await login.screenshot({ path: path.join(shots, 'sign-in.png') });
    await login.fill('#token', admin);
    await login.press('#token', 'Enter');
    await login.waitForSelector('#page[data-page=cluster]', { timeout: 10000 });
    await login.reload();
    await login.waitForSelector('#page[data-page=cluster]', { timeout: 10000 })
      .then(() => check(true, 'sign-in: the typed token opens the dashboard and survives a reload'),
        () => check(false, 'sign-in: the typed token opens the dashboard and survives a reload'));
    await ctx.close();
  }

  const page = await open(admin);
  check(!(await page.evaluate(() => window.location.hash.includes('token'))), 'the token is taken out of the address bar');
  check(await page.evaluate(() => Boolean(sessionStorage.getItem('tessera.token'))), 'the token is kept in sessionStorage');
  await page.waitForSelector('#live.live-live', { timeout: 10000 });
  // Two samples at least for the chart: the page samples every 5 s and on each event.
  await page.waitForFunction(() => JSON.parse(sessionStorage.getItem('tessera.history') || '{"t":[]}').t.length >= 2, null, { timeout: 15000 });
  await page.evaluate(() => { window.location.hash = '#/cluster'; });
  let text = await visit(page, '#/gpus', 'gpus');
  text = await visit(page, '#/cluster', 'cluster');
  const legend = await page.innerText('#chart-alloc');
  for (const t of ['prod', 'research', 'batch']) check(legend.includes(t), `Cluster: the allocation chart names tenant ${t}`);
  check(/Pending workloads/.test(text) && /Idle GPUs/.test(text) && /BestEffort/.test(text), 'Cluster: the figures of now, waits by QoS');

  check(text.includes('Europe/Berlin'), "Cluster: times in the viewer's time zone (the browser's: Europe/Berlin)");
  // Keyboard: "3" opens the Queue; Tab from the page reaches the navigation links.
  await page.keyboard.press('3');
  await page.waitForSelector('#page[data-page=queue]', { timeout: 5000 }).then(() => check(true, 'keyboard: 3 opens the Queue'),
    () => check(false, 'keyboard: 3 opens the Queue'));
  await page.evaluate(() => document.activeElement && document.activeElement.blur());
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement.closest('nav') !== null), 'keyboard: Tab reaches the page links first');

  text = await visit(page, '#/gpus', 'gpus');
  check((await page.locator('.gpu').count()) === 6, 'GPU map: every GPU of the inventory (6)');
  check(text.includes('n-h100') && text.includes('n-a100'), 'GPU map: both nodes');
  check(text.includes('3g.40gb') && text.includes('1g.10gb'), 'GPU map: the MIG slots with their profiles');
  check(text.includes(`research #${ids.trainA}`), 'GPU map: a fractional share named by tenant');
  check(text.includes('used 50 % of what was allocated'), 'GPU map: utilisation from the usage samples (half of what was held)');
  // Node conditions: none reported yet, no badge; then n-h100's agent reports NVML not ok and
  // n-a100's ok (heartbeats, as tessera agent sends them): n-h100 gets a badge, live, with the
  // agent's detail on hover; n-a100 none.
  check((await page.locator('.condition').count()) === 0, 'GPU map: no condition badge before an agent reports one');
  await api('POST', '/v1/nodes/n-h100/heartbeat', { conditions: [{ type: 'nvml', ok: false, detail: 'GPU 1: GPU is lost' }] }, agent);
  await api('POST', '/v1/nodes/n-a100/heartbeat', { conditions: [{ type: 'nvml', ok: true }] }, agent);
  await page.waitForSelector('.condition', { timeout: 15000 })
    .then(() => check(true, 'GPU map: a node condition not ok shows live'), () => check(false, 'GPU map: a node condition not ok shows live'));
  {
    const badge = page.locator('section.node', { hasText: 'n-h100' }).locator('.condition');
    check((await badge.count()) === 1 && (await badge.innerText()).trim() === 'nvml: not ok', "GPU map: n-h100's badge says nvml: not ok");
    check((await badge.getAttribute('title')) === 'GPU 1: GPU is lost', "GPU map: the badge's hover is the agent's detail");
    check((await page.locator('section.node', { hasText: 'n-a100' }).locator('.condition').count()) === 0, 'GPU map: n-a100 (nvml ok) has no badge');
  }
  await page.screenshot({ path: path.join(shots, 'gpu-map.png'), fullPage: true });

  text = await visit(page, '#/queue', 'queue');
  check(text.includes('no_fitting_node') && text.includes('too-big'), 'Queue: the pending workload and its wait reason');
  await page.screenshot({ path: path.join(shots, 'queue.png') });

  text = await visit(page, '#/tenants', 'tenants');
  check(['prod', 'research', 'batch'].every((t) => text.includes(t)) && text.includes('GPU·h'), 'Tenants: every tenant, with metered use');
  check(/borrowing 3 GPU \(reclaimable\)/.test(text) && /within its guarantee/.test(text), 'Tenants: batch borrows beyond its (zero) guarantee, prod is within its own');
  await page.screenshot({ path: path.join(shots, 'tenants.png') });

  text = await visit(page, `#/workload/${ids.trainA}`, 'workload');
  check(text.includes('placed') && text.includes('n-a100'), 'Workload: placement and the placed event');
  check(/0\.021 GPU·h used of 0\.042 GPU·h held \(50 %\), peak memory 1 GiB/.test(text), 'Workload: its metered use');

  text = await visit(page, '#/invoices', 'invoices');
  check(['prod', 'research', 'batch'].every((t) => text.includes(t)) && text.includes('USD'), 'Invoices: every account, in the plan\'s currency');
  await page.screenshot({ path: path.join(shots, 'invoices.png') });

  // Anomalies: prod's flagged hour, one row: the hour in the viewer's time zone (not UTC), the
  // tenant, the series in words (its name on hover), the value and the expected value with its
  // range in the series' unit (rounded as the page rounds: whole numbers from 100 up, else two
  // decimals), the score and the detector's reason.
  text = await visit(page, '#/anomalies', 'anomalies');
  {
    const rows = page.locator('table.anomalies tbody tr');
    check((await rows.count()) === 1, `Anomalies: one flagged row (${await rows.count()})`);
    const cells = await rows.first().locator('td').allInnerTexts();
    const [hour, tenant, series, value, expected, score, reason] = cells.map((c) => c.trim());
    const shown = await page.evaluate((ms) => {
      const opts = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' };
      return [new Intl.DateTimeFormat(undefined, opts).format(ms), new Intl.DateTimeFormat(undefined, { ...opts, timeZone: 'UTC' }).format(ms)];
    }, flag.hour_s * 1000);
    check(hour === shown[0] && hour !== shown[1], `Anomalies: the hour in the viewer's zone, not UTC (${hour}; UTC ${shown[1]})`);
    check(tenant === 'prod', `Anomalies: the tenant (${tenant})`);
    const title = await rows.first().locator('td').nth(2).getAttribute('title');
    check(series === 'GPU-seconds used' && title === 'usage_gpu_seconds', `Anomalies: the series in words, its name on hover (${series}, ${title})`);
    const number = (t) => Number(String(t).replace(/,/g, ''));
    const near = (shownText, want) => Math.abs(number(shownText) - want) <= (Math.abs(want) >= 100 ? 0.5 : 0.005);
    const v = /^([\d.,]+) GPU·s$/.exec(value);
    check(v && near(v[1], flag.value) && flag.value === 1800, `Anomalies: the value with its unit (${value}; API ${flag.value})`);
    const e = /^([\d.,]+) GPU·s \(([\d.,]+)–([\d.,]+)\)$/.exec(expected);
    check(e && near(e[1], flag.expected) && near(e[2], flag.expected_low) && near(e[3], flag.expected_high) && flag.expected_high < flag.value,
      `Anomalies: the expected value and range (${expected}; API ${flag.expected} ${flag.expected_low}..${flag.expected_high})`);
    check(near(score, flag.score), `Anomalies: the score (${score}; API ${flag.score})`);
    check(reason === flag.reason && /^GPU-seconds used 1800 in the hour from .*, expected about 180/.test(reason), `Anomalies: the reason (${reason})`);
  }
  await page.screenshot({ path: path.join(shots, 'anomalies.png') });

  text = await visit(page, '#/audit', 'audit');
  check(text.includes('workload.create') && text.includes('tenant.create'), 'Audit: the records');
  await page.screenshot({ path: path.join(shots, 'audit.png') });

  // Live: prod asks for a whole A100 within its guarantee; a BestEffort batch job is preempted.
  await visit(page, '#/gpus', 'gpus');
  await page.evaluate(() => { window.__noReload = true; });
  const urgent = await submit({ tenant: 'prod', name: 'urgent', gpus: 1, qos: 'Guaranteed', model: 'A100-40GB' });
  await page.waitForFunction((id) => document.getElementById('page').innerText.includes(`prod #${id}`), urgent, { timeout: 15000 })
    .then(() => check(true, 'a preemption shows on the GPU map live'), () => check(false, 'a preemption shows on the GPU map live'));
  check(await page.evaluate(() => window.__noReload === true), '... without a reload');
  text = await visit(page, '#/queue', 'queue');
  check(/batch-\d/.test(text), 'Queue: the preempted batch job waits again');
  // One more sample after the change, so that the chart's steps show it (one every 5 s).
  const points = await page.evaluate(() => JSON.parse(sessionStorage.getItem('tessera.history')).t.length);
  await page.waitForFunction((n) => JSON.parse(sessionStorage.getItem('tessera.history')).t.length > n, points, { timeout: 10000 });
  text = await visit(page, '#/cluster', 'cluster');
  check(/preempted/.test(text) && text.includes(`#${urgent}`), 'Cluster: the preemption and the placement in the latest events');
  await page.screenshot({ path: path.join(shots, 'cluster.png') });
  const victim = (await api('GET', '/v1/workloads?tenant=batch')).workloads
    .find((w) => w.state === 'pending' && w.name !== 'batch-4') || { id: ids.batch[0] };
  text = await visit(page, `#/workload/${victim.id}`, 'workload');
  check(text.includes('preempted') && text.includes('reclaim'), `Workload: the preempted job ${victim.id} says why`);
  await page.screenshot({ path: path.join(shots, 'workload.png') });

  // A viewer token (make demo's URL): the whole cluster read only, every node, no Audit page.
  const viewerPage = await open(viewer);
  text = await visit(viewerPage, '#/gpus', 'gpus');
  check(text.includes('n-h100') && text.includes('n-a100'), 'viewer token, GPU map: every node');
  check((await viewerPage.locator('.condition').count()) === 1, "viewer token, GPU map: n-h100's condition badge");
  text = await visit(viewerPage, '#/tenants', 'tenants');
  check(['prod', 'research', 'batch'].every((t) => text.includes(t)), 'viewer token, Tenants: every tenant');
  check((await viewerPage.innerText('header .who')).includes('viewer'), 'viewer token: the header says read only');
  check((await viewerPage.locator('nav a[href="#/audit"]').count()) === 0, 'viewer token: no Audit page');
  const cancel = (await fetch(`${base}/v1/workloads/${ids.trainA}`, { method: 'DELETE', headers: { Authorization: `Bearer ${viewer}` } })).status;
  check(cancel === 403, `viewer token: cancelling a workload is 403 (got ${cancel})`);

  // A tenant's token: its own subtree only, on every page.
  const tenantPage = await open(research);
  for (const [hash, name] of [['#/cluster', 'cluster'], ['#/gpus', 'gpus'], ['#/queue', 'queue'], ['#/tenants', 'tenants'], ['#/invoices', 'invoices']]) {
    const all = await visit(tenantPage, hash, name);
    const body = await tenantPage.innerText('body');
    check(all.includes('research') && !/\bprod\b|\bbatch\b/.test(body), `tenant token, ${name}: research only, no prod or batch`);
    if (name === 'gpus') await tenantPage.screenshot({ path: path.join(shots, 'tenant-view.png') });
  }
  {
    const all = await visit(tenantPage, '#/anomalies', 'anomalies');
    const body = await tenantPage.innerText('body');
    check(!/\bprod\b|\bbatch\b/.test(body) && all.includes('No anomalies'), "tenant token, anomalies: none of prod's flags, no prod or batch");
  }
  check((await tenantPage.locator('nav a[href="#/audit"]').count()) === 0, 'tenant token: no Audit page');
  const other = await tenantPage.evaluate(async () => (await fetch(`/v1/workloads/1`, { headers: { Authorization: `Bearer ${sessionStorage.getItem('tessera.token')}` } })).status);
  check(other === 404, "tenant token: another tenant's workload is 404 (the API's rule)");
  check(errors.length === 0, `no console errors${errors.length ? ': ' + errors.join(' | ') : ''}`);
} catch (e) {
  failures++;
  console.log(`FAIL ${e.stack || e}`);
} finally {
  if (browser) await browser.close();
  serve.kill('SIGTERM');
  fs.rmSync(work, { recursive: true, force: true });
}
console.log(failures ? `${failures} check(s) failed` : `all checks passed; screenshots in ${shots}`);
process.exit(failures ? 1 : 0);
