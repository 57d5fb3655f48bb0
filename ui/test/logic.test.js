// The dashboard's pure logic under node's own test runner (no browser): `node --test ui/test/`
// (ctest ui_logic). The pages' rendering is tested in a browser by tests/ui/dashboard_test.mjs.
import test from 'node:test';
import assert from 'node:assert/strict';
import { heldMilli, idleGpus, historyFromServer } from '../src/model.js';
import { percentile, duration, gpus, mib, esc } from '../src/format.js';
import { tenantColours, textOn, OKABE_ITO } from '../src/palette.js';
import { ordered } from '../src/pages/queue.js';
import { migSlices, memoryOf, conditionBadges } from '../src/pages/gpus.js';

test('heldMilli: pods x GPUs x share; a MIG instance counts its compute slices of 7', () => {
  assert.equal(heldMilli({ request: { gpus: 1, gpu_milli: 500 } }), 500);
  assert.equal(heldMilli({ request: { gpus: 2, pods: 3 } }), 6000);
  assert.equal(heldMilli({ request: { gpus: 1, mig_profile: '3g.40gb' } }), 429);
  assert.equal(heldMilli({ request: { gpus: 1, mig_profile: '7g.80gb' } }), 1000);
});

test('idleGpus: GPUs with nothing allocated, on ready nodes only', () => {
  const nodes = [
    { state: 'ready', gpus: [{ allocated_milli: 0 }, { allocated_milli: 300 }, {}] },
    { state: 'lost', gpus: [{ allocated_milli: 0 }] },
  ];
  assert.equal(idleGpus(nodes), 2);
});

test('percentile: nearest rank', () => {
  assert.equal(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 99), 99);
  assert.equal(percentile([3, 1, 2], 50), 2);
  assert.equal(percentile([7], 99), 7);
  assert.equal(percentile([], 99), null);
});

test('formats carry units', () => {
  assert.equal(duration(125000), '2 min 5 s');
  assert.equal(duration(7500000), '2 h 5 min');
  assert.equal(duration(-1), '–');
  assert.equal(gpus(2500), '2.5 GPU');
  assert.equal(mib(512), '512 MiB');
  assert.equal(mib(40960), '40 GiB');
  assert.equal(esc('<a href="x">&\''), '&lt;a href=&quot;x&quot;&gt;&amp;&#39;');
});

test('tenant colours: Okabe-Ito in the sorted order of names, whatever order they come in', () => {
  const a = tenantColours(['research', 'batch', 'prod']);
  const b = tenantColours(['prod', 'research', 'batch', 'prod']);
  for (const n of ['batch', 'prod', 'research']) assert.equal(a(n), b(n));
  assert.equal(a('batch'), OKABE_ITO[0]);
  assert.equal(a('research'), OKABE_ITO[2]);
  assert.notEqual(a('batch'), a('prod'));
  assert.equal(a('unknown'), '#999999');
  assert.equal(textOn('#000000'), '#fff');
  assert.equal(textOn('#F0E442'), '#000');
});

test('queue order: QoS class, then priority, then age', () => {
  const w = (id, qos, priority, created_ms) => ({ id, qos, priority, created_ms });
  const got = ordered([w(1, 'BestEffort', 0, 1), w(2, 'Burstable', 0, 5), w(3, 'Burstable', 5, 9),
    w(4, 'Guaranteed', -1, 9), w(5, 'Burstable', 0, 2)]).map((x) => x.id);
  assert.deepEqual(got, [4, 3, 5, 2, 1]);
});

test('MIG slot widths and memory: memory slices of 8 by the profile\'s memory', () => {
  assert.equal(migSlices('3g.40gb', 81559), 4);
  assert.equal(migSlices('1g.10gb', 81559), 1);
  assert.equal(migSlices('7g.80gb', 81559), 8);
  assert.equal(migSlices('1g.5gb', 40960), 1);
  assert.equal(migSlices('3g.20gb', 40960), 4);
  assert.equal(migSlices('3g.40gb', 0), 1); // memory not reported: one slot, not a crash
  assert.equal(memoryOf({ request: { mig_profile: '3g.40gb' } }, { memory_mib: 81559 }), 40960);
  assert.equal(memoryOf({ request: { gpu_mem_mib: 4096 } }, { memory_mib: 40960 }), 4096);
  assert.equal(memoryOf({ request: {} }, { memory_mib: 40960 }), 40960);
});

test('the server history becomes the Cluster page series: pending summed, idle null without nodes', () => {
  const h = historyFromServer({ t: [100, 105], held_milli: { a: [500, 0], b: [1000, 1000] }, pending: { a: [1, 0], b: [2, 3] }, idle_gpus: null });
  assert.deepEqual(h.t, [100, 105]);
  assert.deepEqual(h.byTenant, { a: [500, 0], b: [1000, 1000] });
  assert.deepEqual(h.queue, [3, 3]);
  assert.deepEqual(h.idle, [null, null]);
  assert.equal(h.server, true);
  assert.deepEqual(historyFromServer({ t: [1], held_milli: {}, pending: {}, idle_gpus: [4] }).idle, [4]);
});

test('node conditions: a badge for each one not ok, its detail on hover; ok, missing or unknown: none', () => {
  assert.deepEqual(conditionBadges({ conditions: [
    { type: 'nvml', ok: false, detail: 'GPU 1: GPU is lost' }, { type: 'disk', ok: true }, { type: 'mps', ok: false }] }), [
    { type: 'nvml', text: 'nvml: not ok', title: 'GPU 1: GPU is lost' },
    { type: 'mps', text: 'mps: not ok', title: 'the agent reports mps not ok' }]);
  assert.deepEqual(conditionBadges({ conditions: [{ type: 'nvml', ok: true, detail: 'fine' }] }), []);
  assert.deepEqual(conditionBadges({ conditions: [] }), []); // a lost node: nothing known
  assert.deepEqual(conditionBadges({}), []); // an older control plane sends no conditions
});
