// End-to-end tests of the timeline's depth (issue 37): a click on an event of a real trace
// opens the args panel, whose source args are the raw trace JSON's for that event; the panel's
// start is in words relative to its step; its flow link shows the other end; and the app's trace
// exports keep the source args: the merged trace is byte for byte the CLI's (which keeps them by
// default). Screenshots go to target/e2e-screenshots/ (5x-prefixed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, traces, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';

let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests, acceptDownloads: true }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

/** Clicks `selector` and returns the downloaded file's bytes. */
async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download', { timeout: 120_000 }), page.click(selector)]);
  return fs.readFileSync(await d.path());
}

/** Every complete / instant event of the raw trace files, with the file it is in. */
function rawEvents(files) {
  const out = [];
  for (const f of files) {
    for (const e of JSON.parse(fs.readFileSync(f, 'utf8')).traceEvents ?? []) {
      if (e.ph === 'X' || e.ph === 'i') out.push({ ...e, file: f });
    }
  }
  return out;
}

/** An arg's value as the panel prints it: a string as is, anything else as its JSON. */
const shown = (v) => (typeof v === 'string' ? v : JSON.stringify(v));

test('args panel: a clicked kernel\'s source args are the raw trace\'s; times relative to its step; its launch one click away', async () => {
  const files = traces('param-dlrm-8rank');
  const raw = rawEvents(files);
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas[data-layout]');
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  const layout = JSON.parse(await canvas.getAttribute('data-layout'));
  const gpu = layout.find((l) => l.rank === 0 && l.gpu);
  assert.ok(gpu, 'rank 0 has a GPU stream');
  // Click along rank 0's stream until a kernel with a flow (a launch) is selected.
  let picked = false;
  for (let x = 200; x < box.width - 10 && !picked; x += 7) {
    await page.mouse.move(box.x + x, box.y + gpu.y + 7);
    await page.waitForTimeout(40);
    await page.mouse.down();
    await page.mouse.up();
    picked = (await page.locator('[data-testid=args-panel] [data-testid=args-flow]').count()) > 0;
  }
  assert.ok(picked, 'a kernel of rank 0 was selected');
  const panel = page.locator('[data-testid=args-panel]');
  await page.waitForSelector('[data-testid=args-panel] [data-testid=args-table]', { timeout: 60_000 });
  assert.equal(await panel.getAttribute('data-rank'), '0');
  const name = await page.textContent('[data-testid=args-name]');
  const startNs = BigInt(await panel.getAttribute('data-start-ns'));
  // The raw event: same name, its `ts` (µs, three decimals) the panel's start.
  const matches = raw.filter((e) => e.name === name && BigInt(Math.round(Number(e.ts) * 1000)) === startNs);
  assert.equal(matches.length, 1, `one raw event named ${name} starts at ${startNs} ns`);
  const want = matches[0].args ?? {};
  const rows = await page.$$eval('[data-testid=args-panel] [data-testid=arg]', (rs) =>
    rs.map((r) => [r.dataset.key, r.querySelector('td').dataset.value]));
  assert.ok(Object.keys(want).length > 3, 'the kernel has source args (grid, block, correlation, …)');
  assert.deepEqual(rows.map(([k]) => k), Object.keys(want), 'every source arg, in the source order');
  for (const [k, v] of rows) assert.equal(v, shown(want[k]), `arg ${k}`);
  // Its start in words: "step N + <duration>" into its step, and on the aligned clock.
  assert.match(await page.textContent('[data-testid=args-relative]'), /^step \d+ [+−] [\d.]+ (ns|µs|ms|s)$/);
  assert.match(await page.textContent('[data-testid=args-aligned]'), /from the job's first event/);
  await shot(page, '50-timeline-args-panel');

  // The flow link: the launch shown; clicking where it now is opens the launch's panel.
  const before = await canvas.getAttribute('data-window').catch(() => null);
  await page.click('[data-testid=args-flow]');
  await page.waitForTimeout(400);
  const after = await canvas.getAttribute('data-window').catch(() => null);
  if (before !== null) assert.notEqual(after, before, 'the view moved to the launch');
  await shot(page, '51-timeline-flow-shown');
  // The step link moves the view to the step.
  if (await page.locator('[data-testid=args-step]').count()) await page.click('[data-testid=args-step]');
  await page.waitForTimeout(300);
  // Escape closes the panel.
  await page.keyboard.press('Escape');
  await page.waitForSelector('[data-testid=args-panel]', { state: 'detached' });
  assert.deepEqual(pageErrors, []);
  await page.close();
});

test('exports keep the source args: the app\'s merged trace is the CLI\'s, byte for byte', async () => {
  const files = traces('param-dlrm-8rank');
  const dir = path.dirname(files[0]) + '/';
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-summary]');
  assert.equal(await page.locator('[data-testid=export-args-note]').count(), 0, 'no note that args are dropped');
  const merged = await download(page, '[data-testid=export-trace]');
  await page.waitForSelector('[data-testid=export-status]:has-text("saved")');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-deep-'));
  const want = path.join(tmp, 'cli.json');
  execFileSync(BIN, ['analyze', '--merged-trace', want, ...files], { maxBuffer: 256 << 20 });
  assert.ok(merged.equals(fs.readFileSync(want)), 'the merged trace is byte for byte the CLI\'s (with args)');
  // And the args are there: a kernel's `grid` as the source wrote it.
  const doc = JSON.parse(merged.toString());
  const withGrid = doc.traceEvents.filter((e) => e.args && e.args.grid !== undefined);
  assert.ok(withGrid.length > 0, 'kernels keep their grid');
  const perfetto = await download(page, '[data-testid=export-perfetto]');
  const tar = path.join(tmp, 'cli.tar');
  execFileSync(BIN, ['analyze', '--perfetto', tar, ...files], { maxBuffer: 256 << 20 });
  assert.ok(perfetto.equals(fs.readFileSync(tar)), 'the Perfetto archive is byte for byte the CLI\'s (with args)');
  fs.rmSync(tmp, { recursive: true, force: true });
  await shot(page, '52-exports-with-args');
  assert.deepEqual(pageErrors, [], `no page errors (${dir})`);
  await page.close();
});
