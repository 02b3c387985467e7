// End-to-end tests of the timeline's memory track (issue 38): the zoo's 2-rank FSDP2 run with
// profile_memory (host memory, device -1) and HTA's GPU trace (host and GPU 1, with the
// allocator's reserved) are dropped; the timeline has a memory row per rank and device, whose
// scale label's max equals the peak `rankscope analyze --json` reports for it (its memory[]
// figures, the most peak_allocated over the steps); hovering a row reads a value at that time,
// a click keeps it; the bar's Memory button hides the rows and shows them again; the rows are
// drawn (pixels of the track's colour). A Shift+drag over the rows gives the area's memory
// table, each figure equal to a count of the file's `[memory]` events in the range.
// Screenshots go to target/e2e-screenshots/ (60…65).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import zlib from 'node:zlib';
import path from 'node:path';
import { BIN, ROOT, traces, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';

let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

const GUTTER_W = 190;

/** Bytes in binary units as the track writes them (an independent copy of its rule). */
function binary(n) {
  const a = Math.abs(n);
  if (a < 1024) return `${n} B`;
  if (a < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (a < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(2)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** Per `rank/device`: the most peak_allocated and peak_reserved of the CLI's memory figures. */
function cliPeaks(files) {
  const a = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 256 << 20 }).toString());
  const out = new Map();
  for (const m of a.memory) {
    const k = `${m.rank}/${m.device}`;
    const o = out.get(k) ?? { allocated: -Infinity, reserved: null };
    o.allocated = Math.max(o.allocated, m.peak_allocated);
    if (m.peak_reserved != null) o.reserved = Math.max(o.reserved ?? -Infinity, m.peak_reserved);
    out.set(k, o);
  }
  return out;
}

const memory = async (page) => JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-memory'));

/** Waits until the track's state satisfies `ok` (the canvas redraws on the next frame). */
async function memoryUntil(page, ok, what) {
  for (let i = 0; i < 100; i += 1) {
    const m = await page.getAttribute('[data-testid=timeline] canvas', 'data-memory');
    if (m && ok(JSON.parse(m))) return JSON.parse(m);
    await page.waitForTimeout(100);
  }
  assert.fail(`the memory track never ${what}: ${await page.getAttribute('[data-testid=timeline] canvas', 'data-memory')}`);
}

/** Pixels of the canvas inside a CSS-px rectangle within `tol` per channel of `rgb` blended at
 * `alpha` on `under` (a tolerance for the antialiased edges of a line). */
const pixelsNear = (page, rect, rgb, under, alpha, tol = 3) =>
  page.evaluate(({ rect, rgb, under, alpha, tol }) => {
    const c = document.querySelector('[data-testid=timeline] canvas');
    const s = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(Math.round(rect.x * s), Math.round(rect.y * s), Math.round(rect.w * s), Math.round(rect.h * s)).data;
    const want = rgb.map((v, i) => v * alpha + under[i] * (1 - alpha));
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if ([0, 1, 2].every((k) => Math.abs(d[i + k] - want[k]) <= tol)) n += 1;
    return n;
  }, { rect, rgb, under, alpha, tol });

async function cssRgb(page, name) {
  const h = (await page.evaluate((n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim(), name)).replace('#', '');
  return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16));
}

/** Scrolls the timeline until the memory row `pick` picks is wholly in sight; returns the track's state. */
async function inSight(page, box, pick) {
  await page.mouse.move(box.x + 600, box.y + 300);
  for (let i = 0; i < 40; i += 1) {
    const m = await memory(page);
    const r = pick(m.rows);
    if (r && r.y >= 22 && r.y + r.h <= box.height) return m;
    await page.mouse.wheel(0, r && r.y < 22 ? -150 : 150);
    await page.waitForTimeout(120);
  }
  assert.fail(`the memory row never came in sight: ${JSON.stringify((await memory(page)).rows)}`);
}

/** Moves the pointer along a memory row until it reads a value; returns the reading. */
async function hoverRow(page, box, row) {
  for (const f of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8]) {
    await page.mouse.move(box.x + GUTTER_W + (box.width - GUTTER_W) * f, box.y + row.y + row.h / 2);
    await page.waitForTimeout(120);
    const m = await memory(page);
    if (m.hover) return m.hover;
  }
  return null;
}

test('memory track: a row per rank whose label is the CLI\'s peak; hover and click read a value; the button hides it', async () => {
  const dir = path.join(ROOT, 'tests/zoo/memory/fsdp2_2rank');
  const files = [0, 1].map((r) => path.join(dir, `rank${r}.pt.trace.json.gz`));
  const peaks = cliPeaks(files);
  assert.equal(peaks.size, 2, 'the CLI has host memory for both ranks');
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=memory-toggle][aria-pressed=true]');
  // Only the rows in sight ask for tiles: rank 0's at once, rank 1's once scrolled to.
  let m = await memoryUntil(page, (x) => x.rows.length === 2 && x.rows[0].tiles > 0, 'drew rank 0');
  assert.deepEqual(m.rows.map((r) => [r.rank, r.device]), [[0, -1], [1, -1]]);
  for (const r of m.rows) {
    const want = peaks.get(`${r.rank}/-1`);
    assert.equal(r.max_allocated, want.allocated, `rank ${r.rank}: the scale's max is the CLI's peak`);
    assert.equal(r.label, `max ${binary(want.allocated)}`, `rank ${r.rank}: its label`);
    assert.ok(r.samples > 1000, `rank ${r.rank}: ${r.samples} samples`);
  }
  // Each rank's row sits under that rank's lanes.
  const layout = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-layout'));
  for (const r of m.rows) {
    const lanes = layout.filter((l) => l.rank === r.rank);
    const others = layout.filter((l) => l.rank !== r.rank && l.y > Math.max(...lanes.map((l) => l.y)));
    assert.equal(r.y, Math.max(...lanes.map((l) => l.y + l.h)), `rank ${r.rank}: right under its last lane`);
    assert.ok(others.every((l) => l.y >= r.y + r.h), `rank ${r.rank}: above the next rank`);
  }
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  m = await inSight(page, box, (rows) => rows[1]);
  m = await memoryUntil(page, (x) => x.rows[1].tiles > 0, 'drew rank 1 once in sight');
  // The allocated area is drawn: pixels of its colour at its alpha over the row's background.
  const alloc = await cssRgb(page, '--mem-alloc');
  const under = await cssRgb(page, '--lane-alt');
  for (const r of m.rows) {
    const n = await pixelsNear(page, { x: GUTTER_W, y: r.y, w: box.width - GUTTER_W, h: r.h }, alloc, under, 0.55);
    assert.ok(n > 2000, `rank ${r.rank}: ${n} pixels of the allocated area`);
  }
  // Hover reads a value within the row's scale, at a time.
  const seen = m.rows.find((r) => r.y >= 22 && r.y + r.h <= box.height);
  const hover = await hoverRow(page, box, seen);
  assert.ok(hover, 'a value under the pointer');
  assert.equal(hover.rank, seen.rank);
  assert.ok(hover.min <= hover.max && hover.max <= seen.max_allocated && hover.min >= 0, JSON.stringify(hover));
  assert.match(hover.text, new RegExp(`^rank ${seen.rank} · host memory · at .+\nallocated [\\d.]+ (B|KiB|MiB)`));
  await shot(page, '60-timeline-memory-hover');
  // A click keeps the reading; leaving the canvas, it stays.
  await page.mouse.down();
  await page.mouse.up();
  m = await memoryUntil(page, (x) => x.kept, 'kept a reading');
  assert.deepEqual(m.kept, hover);
  await page.mouse.move(box.x + 5, box.y + box.height + 40);
  m = await memoryUntil(page, (x) => !x.hover && x.kept, 'forgot the hover');
  // Zoomed in, the rows ask for finer tiles and still read values.
  await canvas.focus();
  const before = m.rows.map((r) => r.tiles);
  for (const k of ['w', 'w', 'w', 'w']) await page.keyboard.press(k);
  m = await memoryUntil(page, (x) => x.rows.every((r, i) => r.tiles > before[i]), 'asked for finer tiles');
  assert.ok(await hoverRow(page, box, m.rows.find((r) => r.rank === seen.rank)), 'a value zoomed in');
  await shot(page, '61-timeline-memory-zoomed');
  // The button hides the rows, and shows them again.
  await page.click('[data-testid=memory-toggle]');
  m = await memoryUntil(page, (x) => !x.shown && x.rows.length === 0, 'hid its rows');
  await page.waitForSelector('[data-testid=memory-toggle][aria-pressed=false]');
  await page.click('[data-testid=memory-toggle]');
  await memoryUntil(page, (x) => x.shown && x.rows.length === 2, 'showed its rows again');
  assert.deepEqual(pageErrors, []);
  await page.close();
});

test('memory track of a GPU trace: host and GPU rows, reserved drawn as a line, its label the CLI\'s peak', async () => {
  const files = traces('hta/df_index_resolver');
  const peaks = cliPeaks(files);
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  let m = await memoryUntil(page, (x) => x.rows.length === 2, 'laid out host and GPU');
  assert.deepEqual(m.rows.map((r) => r.device), [-1, 1]);
  const box = await page.locator('[data-testid=timeline] canvas').boundingBox();
  m = await inSight(page, box, (rows) => rows[1]);
  m = await memoryUntil(page, (x) => x.rows[1].tiles > 0, 'drew the GPU row once in sight');
  await page.waitForTimeout(300);
  const gpu = m.rows[1];
  const want = peaks.get(`${gpu.rank}/1`);
  assert.equal(gpu.max_allocated, want.allocated, 'the GPU row\'s max is the CLI\'s peak allocated');
  assert.equal(gpu.max_reserved, want.reserved, 'and its reserved the CLI\'s peak reserved');
  const label = want.reserved > want.allocated ? `max ${binary(want.allocated)} · res. ${binary(want.reserved)}` : `max ${binary(want.allocated)}`;
  assert.equal(gpu.label, label);
  await shot(page, '62-timeline-memory-gpu');
  const res = await cssRgb(page, '--mem-reserved');
  const n = await pixelsNear(page, { x: GUTTER_W, y: gpu.y, w: box.width - GUTTER_W, h: gpu.h }, res, res, 1, 40);
  assert.ok(n > 200, `${n} pixels of the reserved line`);
  const hover = await hoverRow(page, box, gpu);
  assert.ok(hover && hover.reserved >= hover.max, JSON.stringify(hover));
  assert.match(hover.text, /\nreserved [\d.]+ (MiB|GiB)/);
  await shot(page, '63-timeline-memory-gpu-hover');
  assert.deepEqual(pageErrors, []);
  await page.close();
});

/** A Kineto `ts` (µs with up to three decimals) in ns, exactly: from the shortest decimal that
 * reads back as the parsed number, which is the file's own text for these times. */
function usToNs(ts) {
  const [i, f = ''] = String(ts).split('.');
  assert.ok(f.length <= 3 && !i.includes('e'), `a ts of ns precision: ${ts}`);
  return BigInt(i) * 1000n + BigInt((f + '000').slice(0, 3)) * (i.startsWith('-') ? -1n : 1n);
}

/** Per `rank/device`: the file's `[memory]` samples on the rank's own clock (baseTimeNanoseconds
 * + ts), in time order (file order among equal times): [ns, allocated, reserved, bytes]. */
function memorySamples(files) {
  const out = new Map();
  for (const f of files) {
    const doc = JSON.parse(zlib.gunzipSync(fs.readFileSync(f)).toString('utf8'));
    const rank = doc.distributedInfo.rank;
    const base = BigInt(doc.baseTimeNanoseconds ?? 0);
    for (const e of doc.traceEvents) {
      if (e.name !== '[memory]' || e.ph !== 'i') continue;
      const k = `${rank}/${e.args['Device Id']}`;
      if (!out.has(k)) out.set(k, []);
      out.get(k).push([base + usToNs(e.ts), e.args['Total Allocated'], e.args['Total Reserved'], e.args.Bytes]);
    }
  }
  for (const v of out.values()) v.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return out;
}

/** The memory over [from, to) counted from the samples alone: the value in force when the range
 * starts (the last sample before it; the value before the first sample when the series begins
 * inside) and every sample in it; nothing once the series has ended. */
function spanOf(samples, from, to) {
  if (samples.length === 0 || from > samples.at(-1)[0]) return null;
  const inside = samples.filter(([t]) => t >= from && t < to);
  const before = samples.filter(([t]) => t < from).at(-1);
  if (!before && inside.length === 0) return null;
  const alloc = inside.map((s) => s[1]);
  const res = inside.map((s) => s[2]);
  if (before) { alloc.push(before[1]); res.push(before[2]); }
  if (!before && inside[0] === samples[0]) alloc.push(samples[0][1] - samples[0][3]);
  return { max: Math.max(...alloc), min: Math.min(...alloc), reserved: Math.max(...res) };
}

test('area selection over the memory rows: per rank the peak and least allocated equal a count of the file\'s [memory] events in the range', async () => {
  const dir = path.join(ROOT, 'tests/zoo/memory/fsdp2_2rank');
  const files = [0, 1].map((r) => path.join(dir, `rank${r}.pt.trace.json.gz`));
  const samples = memorySamples(files);
  assert.deepEqual([...samples.keys()].sort(), ['0/-1', '1/-1'], 'host memory of both ranks in the files');
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  await memoryUntil(page, (x) => x.rows.length === 2, 'laid out');
  const box = await page.locator('[data-testid=timeline] canvas').boundingBox();
  const select = async (f0, f1) => {
    await page.keyboard.down('Shift');
    await page.mouse.move(box.x + GUTTER_W + (box.width - GUTTER_W) * f0, box.y + 80);
    await page.mouse.down();
    await page.mouse.move(box.x + GUTTER_W + (box.width - GUTTER_W) * f1, box.y + 200, { steps: 6 });
    await page.mouse.up();
    await page.keyboard.up('Shift');
    await page.waitForSelector('[data-testid=area-totals][data-done=true]', { timeout: 60_000 });
    const ranges = JSON.parse(await page.getAttribute('[data-testid=area-totals]', 'data-ranges'));
    const rows = await page.$$eval('[data-testid=area-memory-row]', (rs) => rs.map((r) => ({
      rank: Number(r.dataset.rank), device: Number(r.dataset.device), max: Number(r.dataset.max),
      min: Number(r.dataset.min), reserved: r.dataset.reserved === '' ? null : Number(r.dataset.reserved),
      cells: [...r.querySelectorAll('td')].map((td) => td.textContent),
    })));
    return { ranges, rows };
  };
  const check = ({ ranges, rows }, what) => {
    assert.equal(ranges.length, 2, `${what}: both ranks asked`);
    let shown = 0;
    for (const { rank, from_ns, to_ns } of ranges) {
      const want = spanOf(samples.get(`${rank}/-1`), BigInt(from_ns), BigInt(to_ns));
      const got = rows.filter((r) => r.rank === rank);
      if (!want) {
        assert.deepEqual(got, [], `${what}: rank ${rank} has no memory in force in the range`);
        continue;
      }
      assert.equal(got.length, 1, `${what}: rank ${rank}: one row (host memory)`);
      const [g] = got;
      assert.equal(g.device, -1);
      assert.deepEqual([g.max, g.min, g.reserved], [want.max, want.min, want.reserved], `${what}: rank ${rank}`);
      // The cells print those figures (reserved is 0 in this CPU trace: a dash).
      assert.deepEqual(g.cells, [`rank ${rank} · host memory`, binary(want.max), want.reserved > 0 ? binary(want.reserved) : '–', binary(want.min)]);
      shown += 1;
    }
    return shown;
  };
  // A range inside the steps: the figures of the samples in it and the one carried in.
  let area = await select(0.4, 0.55);
  assert.equal(check(area, 'mid range'), 2, 'both ranks have memory in the range');
  const mid = area.rows.find((r) => r.rank === 0);
  assert.ok(mid.min < mid.max, `the range holds allocations and frees: ${JSON.stringify(mid)}`);
  await page.locator('[data-testid=area-memory]').scrollIntoViewIfNeeded();
  await shot(page, '64-timeline-memory-area');
  // The whole job in view (key 0), all of it selected: each rank's peak is its row's scale max,
  // the CLI's peak over the steps.
  await page.click('[data-testid=area-close]');
  await page.waitForSelector('[data-testid=area-totals]', { state: 'detached' });
  await page.locator('[data-testid=timeline] canvas').focus();
  await page.keyboard.press('0');
  await page.waitForTimeout(300);
  area = await select(0.001, 0.999);
  check(area, 'whole view');
  const m = await memory(page);
  const peaks = cliPeaks(files);
  assert.equal(area.rows.length, 2);
  for (const r of area.rows) {
    const all = samples.get(`${r.rank}/-1`);
    const range = area.ranges.find((x) => x.rank === r.rank);
    assert.ok(BigInt(range.from_ns) <= all[0][0] && BigInt(range.to_ns) > all.at(-1)[0], `rank ${r.rank}: every sample in the range`);
    assert.equal(r.max, m.rows.find((x) => x.rank === r.rank).max_allocated, `rank ${r.rank}: the whole run's peak is the row's scale`);
    assert.equal(r.max, peaks.get(`${r.rank}/-1`).allocated, `rank ${r.rank}: and the CLI's peak`);
  }
  await page.locator('[data-testid=area-memory]').scrollIntoViewIfNeeded();
  await shot(page, '65-timeline-memory-area-all');
  assert.deepEqual(pageErrors, []);
  await page.close();
});
