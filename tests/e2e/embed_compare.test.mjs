// End-to-end test of the diff in the embedding protocol (issue 36, docs/embedding.md): a host page
// on another origin opens a job in the frame (tests/zoo/opchange/mm_doubled: one matmul doubled
// on every rank), posts a baseline (its base run's saved `rankscope analyze --json`, then the
// job's own digest, then a trace that is no baseline) and hears a `comparison` event each time:
// its `json` is `rankscope diff --json BASE NEW` byte for byte, its `diff` the same object with
// every `*_ns` integer a decimal string; the verdict names aten::mm; a baseline of the job itself
// is no change beyond noise; a file that is not a baseline is an `error` event naming it.
// Screenshots go to target/e2e-screenshots/ (58-prefixed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, BIN, launch, stopBrowser, shot, newPage as openPage } from './harness.mjs';
import { serve, policy } from './server.mjs';

const DIST = path.join(ROOT, 'dist');
let context, profile, app, host;
const requests = [];
const pageErrors = [];

before(async () => {
  host = await serve(DIST, 0, { csp: false, coop: false });
  app = await serve(DIST, 0, { prefix: '/tools/rankscope/', csp: policy(`'self' ${host.origin}`) });
  ({ context, profile } = await launch({ requests }));
});

after(async () => {
  await stopBrowser({ context, profile });
  for (const s of [host, app]) s.server.close();
});

const cli = (...args) => execFileSync(BIN, args, { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'pipe'] });
const zoo = (set) => {
  const d = path.join(ROOT, 'tests/zoo', set);
  return fs.readdirSync(d).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(d, f));
};
const b64 = (file) => fs.readFileSync(file).toString('base64');
const eventsOf = (page, kind) => page.evaluate((k) => window.events.filter((e) => e.event === k), kind);

/** Posts a baseline's bytes with embed.js's `rs.compare` (the buffer transferred). */
const compareWith = (page, name, file) => page.evaluate(({ name, data }) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  return rs.compare({ name, buffer: bytes.buffer });
}, { name, data: b64(file) });

/** Every value under a key ending in `_ns`, with its path, in `v`. */
function nsValues(v, key = '', at = '', out = []) {
  if (Array.isArray(v)) v.forEach((x, i) => nsValues(x, key, `${at}[${i}]`, out));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) nsValues(x, k, `${at}.${k}`, out);
  else if (key.endsWith('_ns') && v !== null) out.push([at, v]);
  return out;
}

/** `v` with every decimal string under a `*_ns` key (or in an array under one) a number again. */
function numbers(v, ns = false) {
  if (Array.isArray(v)) return v.map((x) => numbers(x, ns));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, numbers(x, k.endsWith('_ns'))]));
  return ns && typeof v === 'string' ? Number(v) : v;
}

test('a host page posts a baseline: the comparison event is `rankscope diff --json`, 64-bit times as strings, the verdict names the operator', async () => {
  const news = zoo('opchange/mm_doubled');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-embed-compare-'));
  const saved = path.join(dir, 'base.analysis.json');
  fs.writeFileSync(saved, cli('analyze', '--json', ...zoo('opchange/base')));
  const want = cli('diff', '--json', saved, news.join(',')).toString();

  const page = await openPage(context, pageErrors, (p) => `${p.url()}: `);
  await page.goto(`${host.origin}/embed-example.html?app=${encodeURIComponent(app.url)}`);
  await page.evaluate(() => {
    window.events = [];
    window.addEventListener('message', (e) => { if (e.data && e.data.rankscope) window.events.push(e.data.rankscope); });
  });
  await page.waitForSelector('[data-testid=host-log]:has-text("rankscope is ready")');
  const frame = page.frameLocator('#rankscope');
  // The baseline first: it waits for the job.
  await compareWith(page, 'base.analysis.json', saved);
  await page.evaluate((list) => rs.open(list.map(({ name, data }) => ({
    name, buffer: Uint8Array.from(atob(data), (c) => c.charCodeAt(0)).buffer,
  })), 'mm doubled'), news.map((f) => ({ name: path.basename(f), data: b64(f) })));
  await page.waitForFunction(() => window.events.some((e) => e.event === 'comparison'), null, { timeout: 120_000 });
  const [c] = await eventsOf(page, 'comparison');
  assert.equal(c.base, 'base.analysis.json');
  assert.equal(c.json, want, 'the comparison event carries `rankscope diff --json` exactly');
  const parsed = JSON.parse(want);
  assert.equal(c.diff.schema, 'rankscope.diff/1');
  assert.equal(c.diff.verdict.line, parsed.verdict.line);
  assert.equal(c.diff.verdict.change, 'slower');
  assert.match(c.diff.verdict.line, /: aten::mm \+[0-9.]+ ms per step on every rank \(shapes changed: \[\[1024,1024\],\[1024,1024\]\] → \[\[2048,1024\],\[1024,1024\]\]\)/);
  assert.equal(c.diff.verdict.operators[0].name, 'aten::mm');
  // Every `*_ns` integer is a decimal string of the CLI's number; nothing else changed.
  const strings = nsValues(c.diff);
  assert.ok(strings.length > 50, `${strings.length} times`);
  for (const [at, v] of strings) assert.equal(typeof v, 'string', `${at} is ${typeof v}`);
  assert.equal(BigInt(c.diff.step_time.shift.delta_ns), BigInt(parsed.step_time.shift.delta_ns));
  assert.equal(BigInt(c.diff.verdict.operators[0].delta_ns), BigInt(parsed.verdict.operators[0].delta_ns));
  assert.equal(typeof c.diff.step_time.ratio, 'number');
  assert.deepEqual(numbers(c.diff), parsed, 'the same object once the strings are numbers again');
  // The host steers the frame to its Compare view: the verdict it shows is the event's.
  await page.evaluate(() => rs.show({ view: 'compare' }));
  const verdict = frame.locator('[data-testid=compare-verdict]');
  await verdict.waitFor();
  assert.equal(await verdict.innerText(), c.diff.verdict.line);
  await shot(page, '58-embedded-compare-operator');

  // A digest of the job itself as the baseline: a new comparison, no change beyond noise.
  const parts = news.map((f, i) => {
    const out = path.join(dir, `${i}.part`);
    cli('part', f, '-o', out);
    return out;
  });
  const digest = path.join(dir, 'mm_doubled.rsdigest');
  cli('combine', '--json', '--digest', digest, ...parts);
  await compareWith(page, 'mm_doubled.rsdigest', digest);
  await page.waitForFunction(() => window.events.filter((e) => e.event === 'comparison').length >= 2, null, { timeout: 60_000 });
  const same = (await eventsOf(page, 'comparison'))[1];
  assert.equal(same.base, 'mm_doubled.rsdigest');
  assert.equal(same.json, cli('diff', '--json', digest, news.join(',')).toString());
  assert.equal(same.diff.verdict.change, 'no_change');
  assert.match(same.diff.verdict.line, /^no change beyond noise/);
  assert.equal(same.diff.verdict.operators, undefined, 'no operator named');

  // A trace is not a baseline: an error event naming it, and no new comparison.
  await compareWith(page, 'rank0.pt.trace.json.gz', news[0]);
  await page.waitForFunction(() => window.events.some((e) => e.event === 'error'), null, { timeout: 60_000 });
  const [err] = await eventsOf(page, 'error');
  assert.equal(err.file, 'rank0.pt.trace.json.gz');
  assert.match(err.message, /^not a baseline \(a job digest made by `rankscope combine --digest`, or a saved `rankscope analyze --json`\)$/);
  // A baseline without bytes is a malformed message.
  await page.evaluate(() => document.querySelector('#rankscope').contentWindow.postMessage({ rankscope: { baseline: { name: 'x' } } }, rs.origin));
  await page.waitForFunction(() => window.events.filter((e) => e.event === 'error').length >= 2);
  assert.match((await eventsOf(page, 'error'))[1].message, /^baseline: x: `buffer` must be an ArrayBuffer/);
  assert.equal((await eventsOf(page, 'comparison')).length, 2);
  await page.waitForSelector('[data-testid=host-log]:has-text("comparison: no change beyond noise")');
  // The frame's Compare view says the same, naming the file.
  assert.match(await frame.locator('[data-testid=baseline-error]').innerText(), /^rank0\.pt\.trace\.json\.gz: not a baseline/);
  await shot(page, '58b-embedded-compare-log');
  assert.deepEqual(pageErrors, []);
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});
