// End-to-end tests of the timeline's depth (issue 37): a click on an event of a real trace
// opens the args panel, whose source args are the raw trace JSON's for that event; the panel's
// start is in words relative to its step; its flow link shows the other end; and the app's trace
// exports keep the source args: the merged trace is byte for byte the CLI's (which keeps them by
// default); Shift+drag selects a range whose totals by name equal a sum of the raw events.
// Screenshots go to target/e2e-screenshots/ (5x-prefixed).
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

/** A Kineto time or duration (µs, maybe with decimals) in ns, exactly for whole µs (epoch µs
 * times 1,000 pass 2^53). */
const nsOf = (us) => (Number.isInteger(Number(us)) ? BigInt(Number(us)) * 1000n : BigInt(Math.round(Number(us) * 1000)));

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
  const matches = raw.filter((e) => e.name === name && nsOf(e.ts) === startNs);
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

test('area selection: Shift+drag totals the range by name and class, as an independent sum of the raw events', async () => {
  const files = traces('param-dlrm-8rank');
  const raw = rawEvents(files);
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas[data-layout]');
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + box.width * 0.35, box.y + 120);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + 300, { steps: 6 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await page.waitForSelector('[data-testid=area-totals][data-done=true]', { timeout: 60_000 });
  const area = page.locator('[data-testid=area-totals]');
  const ranges = JSON.parse(await area.getAttribute('data-ranges'));
  assert.equal(ranges.length, 8, 'every shown rank was asked');
  // The rank of each file: the app's layout names the file index of each rank; the raw events
  // carry their file, and the CLI's inspect says which rank a file is.
  const inspect = JSON.parse(execFileSync(BIN, ['inspect', '--json', ...files], { maxBuffer: 64 << 20 }).toString());
  const rankOf = new Map(inspect.files.map((f) => [f.file, f.rank]));
  const byRank = new Map(ranges.map((r) => [r.rank, [BigInt(r.from_ns), BigInt(r.to_ns)]]));
  // Independent sums: each raw complete event overlapping its rank's range, clipped to it.
  const want = new Map();
  for (const e of raw) {
    if (e.ph !== 'X') continue;
    const r = byRank.get(rankOf.get(e.file));
    if (!r) continue;
    const s = nsOf(e.ts);
    const end = s + nsOf(e.dur ?? 0);
    if (!(s < r[1] && end > r[0])) continue;
    const ns = (end < r[1] ? end : r[1]) - (s > r[0] ? s : r[0]);
    const w = want.get(e.name) ?? { count: 0, ns: 0n };
    w.count += 1; w.ns += ns;
    want.set(e.name, w);
  }
  const rows = await page.$$eval('[data-testid=area-by-name] [data-testid=area-row]', (rs) =>
    rs.map((r) => ({ name: r.dataset.name, count: Number(r.dataset.count), ns: BigInt(r.dataset.totalNs) })));
  assert.ok(rows.length > 3, 'the range holds events of several names');
  // The longest names (the table is sorted by time) against the raw sums: the same count, the
  // same time to within 1 ns per event (µs with three decimals rounded to ns).
  let checked = 0;
  for (const r of rows.slice(0, 8)) {
    if (r.name.endsWith(' more')) continue;
    const w = want.get(r.name);
    assert.ok(w, `${r.name} is in the raw trace within the range`);
    assert.equal(r.count, w.count, `${r.name}: count`);
    const diff = r.ns > w.ns ? r.ns - w.ns : w.ns - r.ns;
    assert.ok(diff <= BigInt(r.count), `${r.name}: ${r.ns} ns against the raw ${w.ns} ns`);
    checked += 1;
  }
  assert.ok(checked >= 3);
  // The by-class table adds up to the same count as the by-name table.
  const classes = await page.$$eval('[data-testid=area-by-class] [data-testid=area-row]', (rs) => rs.map((r) => Number(r.dataset.count)));
  const names = await page.$$eval('[data-testid=area-by-name] [data-testid=area-row]', (rs) => rs.map((r) => Number(r.dataset.count)));
  assert.equal(classes.reduce((a, b) => a + b, 0), names.reduce((a, b) => a + b, 0));
  await shot(page, '53-timeline-area-totals');
  await page.click('[data-testid=area-close]');
  await page.waitForSelector('[data-testid=area-totals]', { state: 'detached' });
  assert.deepEqual(pageErrors, []);
  await page.close();
});
