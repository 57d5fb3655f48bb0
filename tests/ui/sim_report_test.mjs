// The simulator's HTML reports in Debian's chromium (playwright-core), opened from disk as a user
// opens them: `tessera simulate` (two policies), `--scenario dedicated-vs-shared` and `--mig-model`. Each report
// must draw every chart it holds with the embedded uPlot (body[data-charts-rendered] = the number of
// chart elements, each with a canvas), name its units, and log no console error; without uPlot in
// the build (no npm) the static SVG charts must be there instead. The scenario's report also has its
// metering sections: the invoice table, the anomaly timeline and the demand forecast with its
// interval. Screenshots go to --screenshots
// (`make screenshots`: docs/ui/report-*.png).
// Usage: node sim_report_test.mjs --tessera build/tessera [--screenshots DIR]
// Exit 77 (skipped) with the reason when chromium or ui/node_modules is missing.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const tessera = path.resolve(args.tessera || path.join(root, 'build/tessera'));
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

let failures = 0;
function check(cond, what) {
  if (cond) console.log(`ok   ${what}`);
  else {
    failures++;
    console.log(`FAIL ${what}`);
  }
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-report-test-'));
fs.mkdirSync(shots, { recursive: true });
let browser;
try {
  const reports = [
    ['simulate', ['simulate', '--policies', 'bestfit,fgd', '--seeds', '42', '-q', '--html', 'simulate.html', '--json', 'simulate.json']],
    ['scenario', ['simulate', '--scenario', 'dedicated-vs-shared', '-q', '--html', 'scenario.html', '--json', 'scenario.json']],
    ['mig', ['simulate', '--mig-model', 'H100-80GB', '--gpus', '24', '--seeds', '42-44', '--policies', 'fgd,firstfit', '-q', '--html', 'mig.html']],
  ];
  for (const [, argv] of reports) execFileSync(tessera, argv, { cwd: work, stdio: ['ignore', 'ignore', 'inherit'] });
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  for (const [name] of reports) {
    const file = path.join(work, `${name}.html`);
    const html = fs.readFileSync(file, 'utf8');
    check(!/<script[^>]+src=|<link[^>]+href=["']?http/i.test(html), `${name}: self-contained (no script or stylesheet from elsewhere)`);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await ctx.newPage();
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(pathToFileURL(file).href);
    const uplot = html.includes('data-charts-rendered');
    if (uplot) {
      await page.waitForSelector('body[data-charts-rendered]', { timeout: 15000 }).catch(() => {});
      const drawn = Number(await page.getAttribute('body', 'data-charts-rendered'));
      const charts = await page.locator('[id^="chart-"]').count();
      const canvases = await page.locator('[id^="chart-"] canvas').count();
      check(charts > 0 && drawn === charts, `${name}: every chart drawn (${drawn} of ${charts})`);
      check(canvases >= charts, `${name}: each chart has its canvas (${canvases})`);
      // uPlot draws the ticks on the canvas: their unit is the chart's (fmt() in the renderer); a
      // dimensionless quantity (a relative share) says so in its axis label.
      const units = await page.evaluate(() =>
        JSON.parse(document.getElementById('tessera-report-data').textContent).charts
          .map((c) => [c.id, c.y_unit || (/relative|ratio/.test(c.y_label || '') ? 'relative' : ''), c.x_unit, c.kind]));
      const bare = units.filter(([, y, x, kind]) => !y || (kind === 'line' && !x));
      check(bare.length === 0, `${name}: every chart's axes carry a unit${bare.length ? ' (not: ' + bare.map((u) => u[0]).join(', ') + ')' : ''}`);
    } else if (name === 'mig') {
      check((await page.locator('table caption').count()) === 2, 'mig: built without uPlot, the charts are tables of their values');
    } else {
      check((await page.locator('svg').count()) > 0, `${name}: built without uPlot, the static SVG charts are there`);
    }
    if (name === 'scenario') {
      // The metering sections (issue 36): the invoice table per tenant, then the anomaly timeline
      // and the demand forecast with its interval, drawn like the report's other charts.
      for (const id of ['invoices', 'anomalies', 'forecast']) check(await page.locator(`h2#${id}`).count() === 1, `scenario: section ${id}`);
      const invoiceRows = await page.locator('h2#invoices ~ table').first().locator('tr').count();
      check(invoiceRows >= 3, `scenario: the invoice table has a row per tenant (${invoiceRows - 2} tenants)`);
      if (uplot) {
        for (const id of ['anomalies', 'forecast']) {
          check(await page.locator(`#chart-${id} canvas`).count() > 0, `scenario: the ${id} chart is drawn with uPlot`);
        }
        const legend = await page.locator('#chart-anomalies .u-legend').innerText();
        check(/flags/.test(legend), 'scenario: the anomaly timeline has its flags series');
        const forecastLegend = await page.locator('#chart-forecast .u-legend').innerText();
        check(/forecast/.test(forecastLegend) && /90 % interval/.test(forecastLegend), 'scenario: the forecast chart shows its interval');
      } else {
        check(await page.locator('polygon.interval').count() === 1, 'scenario: the static forecast has its interval band');
      }
    }
    const text = await page.innerText('body');
    check((await page.locator('table').count()) > 0, `${name}: parameters and results as tables`);
    if (name === 'scenario') check(/\d+ h \d+ min|\d+ min/.test(text), 'scenario: waits in h/min');
    check(errors.length === 0, `${name}: no console errors${errors.length ? ': ' + errors.join(' | ') : ''}`);
    await page.screenshot({ path: path.join(shots, `report-${name}.png`), fullPage: true });
    await ctx.close();
  }
} catch (e) {
  failures++;
  console.log(`FAIL ${e.stack || e}`);
} finally {
  if (browser) await browser.close();
  fs.rmSync(work, { recursive: true, force: true });
}
console.log(failures ? `${failures} check(s) failed` : `all checks passed; screenshots in ${shots}`);
process.exit(failures ? 1 : 0);
