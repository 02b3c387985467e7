// End-to-end: the cluster metrics on the timeline (issue 38, docs/cluster-metrics.md, "In the
// app"): the traces of `rankscope synth --layout tp=8,pp=1,dp=2` (16 ranks on node00 and
// node01) dropped with the comm-bound Prometheus export written for them (SM active and SM clock
// per GPU, one InfiniBand port per host). The timeline has, under each rank's lanes, a row per
// metric of that rank's GPU (the GPU the CLI's join put it on), and the NIC rows once per host
// under the host's first rank; hovering reads the sample the file holds at that time (held, not
// interpolated; a NIC's rate is the counter's difference over its interval, computed here from
// the file); a click keeps the reading; the bar's Metrics button hides the rows. Screenshots in
// target/e2e-screenshots/ (70…72b). In the dark theme the rows take its own --metric colour.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, ROOT, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';

const FIX = path.join(ROOT, 'crates/rankscope-core/tests/fixtures/cluster_metrics/comm_bound/query_range.json');
const GUTTER_W = 190;
let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

const cli = (...args) => execFileSync(BIN, args, { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'pipe'] });

/** Unix seconds as the export writes them (`1720912093.25`) → ns, exactly, as a BigInt. */
function ns(seconds) {
  const [i, f = ''] = String(seconds).split('.');
  return BigInt(i) * 1_000_000_000n + BigInt((f + '000000000').slice(0, 9));
}

/** The export's samples of one metric on one host (and GPU, or NIC device/port): [[ns, value]]. */
function samples(file, name, host, { gpu, nic } = {}) {
  const r = JSON.parse(fs.readFileSync(file, 'utf8')).data.result.find((s) => {
    const m = s.metric;
    const h = m.Hostname ?? m.hostname ?? m.nodename ?? (m.instance ?? '').replace(/:\d+$/, '');
    return m.__name__ === name && h === host
      && (gpu === undefined || m.gpu === String(gpu))
      && (nic === undefined || `${m.device}/${m.port}` === nic || m.device === nic);
  });
  assert.ok(r, `the export has ${name} on ${host}`);
  return r.values.map(([t, v]) => [ns(t), Number(v)]);
}

/** A colour token of the page's stylesheet (`#rrggbb`) as [r, g, b]. */
async function cssRgb(page, name) {
  const h = (await page.evaluate((n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim(), name)).replace('#', '');
  assert.match(h, /^[0-9a-f]{6}$/i, `${name} is a colour: ${h}`);
  return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16));
}

/** WCAG contrast ratio of two sRGB colours. */
function contrast(a, b) {
  const lum = (c) => {
    const [r, g, bl] = c.map((v) => { const s = v / 255; return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

/** Pixels of the canvas inside a CSS-px rectangle within `tol` per channel of `rgb`. */
const pixelsNear = (page, rect, rgb, tol) =>
  page.evaluate(({ rect, rgb, tol }) => {
    const c = document.querySelector('[data-testid=timeline] canvas');
    const s = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(Math.round(rect.x * s), Math.round(rect.y * s), Math.round(rect.w * s), Math.round(rect.h * s)).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if ([0, 1, 2].every((k) => Math.abs(d[i + k] - rgb[k]) <= tol)) n += 1;
    return n;
  }, { rect, rgb, tol });

const metrics = async (page) => JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-metrics'));

async function metricsUntil(page, ok, what) {
  for (let i = 0; i < 100; i += 1) {
    const m = await page.getAttribute('[data-testid=timeline] canvas', 'data-metrics');
    if (m && ok(JSON.parse(m))) return JSON.parse(m);
    await page.waitForTimeout(100);
  }
  assert.fail(`the metric rows never ${what}: ${await page.getAttribute('[data-testid=timeline] canvas', 'data-metrics')}`);
}

/** Scrolls until the row `pick` finds is wholly in sight; returns the rows' state. */
async function inSight(page, box, pick) {
  await page.mouse.move(box.x + 600, box.y + 300);
  for (let i = 0; i < 60; i += 1) {
    const m = await metrics(page);
    const r = pick(m.rows);
    if (r && r.y >= 22 && r.y + r.h <= box.height) return m;
    await page.mouse.wheel(0, r && r.y < 22 ? -150 : 150);
    await page.waitForTimeout(120);
  }
  assert.fail(`the metric row never came in sight: ${JSON.stringify((await metrics(page)).rows)}`);
}

/** Moves along a row until it reads a sample; returns the reading. */
async function hoverRow(page, box, row) {
  for (const f of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8]) {
    await page.mouse.move(box.x + GUTTER_W + (box.width - GUTTER_W) * f, box.y + row.y + row.h / 2);
    await page.waitForTimeout(120);
    const m = await metrics(page);
    if (m.hover && m.hover.value != null && m.hover.row === row.row) return m.hover;
  }
  return null;
}

test('metric tracks: a row per GPU metric under its rank, the NIC once per host; hover reads the file\'s sample; the button hides them', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-metrictrack-'));
  cli('synth', '--layout', 'tp=8,pp=1,dp=2', '--out', dir);
  fs.rmSync(path.join(dir, 'manifest.json'), { force: true });
  fs.copyFileSync(FIX, path.join(dir, 'prom_export'));
  // Where the CLI's join puts each rank: its host and GPU.
  const want = JSON.parse(cli('analyze', '--json', dir).toString());
  const joined = new Map(want.beside.metrics.join.ranks.map((r) => [r.rank, r]));
  assert.equal(joined.size, 16, 'every rank joined (a CLI built from this tree: RANKSCOPE_BIN)');

  const files = fs.readdirSync(dir).sort().map((f) => path.join(dir, f));
  const { page } = await openFiles(context, origin, files, pageErrors, 300_000);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=metrics-toggle][aria-pressed=true]');
  let m = await metricsUntil(page, (x) => x.rows.length > 0, 'were laid out');
  // Per rank: SM active and SM clock of its GPU (the export's two GPU metrics); per host: the
  // port's tx and rx rates once, under the host's first rank (the line rate is not drawn).
  const gpuRows = m.rows.filter((r) => r.entity.startsWith('GPU'));
  const nicRows = m.rows.filter((r) => !r.entity.startsWith('GPU'));
  assert.equal(gpuRows.length, 32, JSON.stringify(m.rows.map((r) => [r.rank, r.entity, r.signal])));
  for (const [rank, j] of joined) {
    const mine = gpuRows.filter((r) => r.rank === rank);
    assert.deepEqual(mine.map((r) => r.signal).sort(), ['sm_active', 'sm_clock_mhz'], `rank ${rank}`);
    assert.ok(mine.every((r) => r.host === j.host && r.entity === `GPU ${j.gpu}`), `rank ${rank}: its GPU ${JSON.stringify(mine)}`);
  }
  assert.deepEqual(nicRows.map((r) => [r.host, r.entity, r.signal]).sort(), [
    ['node00', 'mlx5_0/1', 'nic_rx_bytes_per_s'], ['node00', 'mlx5_0/1', 'nic_tx_bytes_per_s'],
    ['node01', 'mlx5_0/1', 'nic_rx_bytes_per_s'], ['node01', 'mlx5_0/1', 'nic_tx_bytes_per_s'],
  ]);
  for (const r of nicRows) {
    const first = Math.min(...[...joined.values()].filter((j) => j.host === r.host).map((j) => j.rank));
    assert.equal(r.rank, first, `${r.host}'s NIC under its first rank`);
  }
  // The gutter states the sample interval and the alignment's residual.
  assert.ok(m.rows.every((r) => /samples · align ±[\d.]+ ms$/.test(r.gutter)), m.rows[0].gutter);
  // Each row sits under its rank's lanes, before the next rank's.
  const layout = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-layout'));
  for (const r of m.rows.filter((x) => x.rank === 0)) {
    const last = Math.max(...layout.filter((l) => l.rank === 0).map((l) => l.y + l.h));
    assert.ok(r.y >= last, `rank 0's ${r.signal} under its lanes`);
    assert.ok(layout.filter((l) => l.rank !== 0 && l.y > last).every((l) => l.y >= r.y + r.h), 'above the next rank');
  }

  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  // Rank 0's SM active: the value under the pointer is the export's sample held there.
  const isSm = (r) => r.rank === 0 && r.signal === 'sm_active';
  m = await inSight(page, box, (rows) => rows.find(isSm));
  const sm = m.rows.find(isSm);
  const hover = await hoverRow(page, box, sm);
  assert.ok(hover, 'a sample under the pointer');
  const file = samples(FIX, 'DCGM_FI_PROF_SM_ACTIVE', 'node00', { gpu: 0 });
  const t = BigInt(hover.t_ns);
  const k = file.findLastIndex(([ts]) => ts <= t);
  assert.ok(k >= 0 && k + 1 < file.length, `the time ${t} inside the export`);
  assert.equal(BigInt(hover.sample_ns), file[k][0], 'the sample held is the last one at or before the time');
  assert.ok(t < file[k + 1][0], 'and before the next');
  assert.equal(hover.value, file[k][1], 'its value, as the file writes it');
  assert.match(hover.text, /^rank 0 · node00 GPU 0 sm_active · at .+\n[\d.]+ % \(sample at .+\)/);
  await shot(page, '70-timeline-metrics-hover');
  // A click keeps it; leaving the canvas, it stays.
  await page.mouse.down();
  await page.mouse.up();
  m = await metricsUntil(page, (x) => x.kept, 'kept a reading');
  assert.equal(m.kept.value, hover.value);
  await page.mouse.move(box.x + 5, box.y + box.height + 40);
  m = await metricsUntil(page, (x) => !x.hover && x.kept, 'forgot the hover');

  // Rank 0's host port rx: a rate, (v1 − v0) / (t1 − t0) over the interval ending at its sample.
  const isRx = (r) => r.rank === 0 && r.signal === 'nic_rx_bytes_per_s';
  m = await inSight(page, box, (rows) => rows.find(isRx));
  const rxRow = m.rows.find(isRx);
  const rx = await hoverRow(page, box, rxRow);
  assert.ok(rx, 'a rate under the pointer');
  const raw = samples(FIX, 'node_infiniband_port_data_received_bytes_total', 'node00', { nic: rxRow.entity });
  const j = raw.findIndex(([ts]) => ts === BigInt(rx.sample_ns));
  assert.ok(j > 0, `the rate's sample ${rx.sample_ns} is a sample of the export`);
  assert.ok(BigInt(rx.t_ns) >= raw[j - 1][0] && BigInt(rx.t_ns) < raw[j][0], 'read inside the interval the rate describes');
  const rate = (raw[j][1] - raw[j - 1][1]) / (Number(raw[j][0] - raw[j - 1][0]) / 1e9);
  assert.ok(Math.abs(rx.value - rate) <= 1e-9 * Math.abs(rate), `${rx.value} vs ${rate}`);
  await shot(page, '71-timeline-metrics-nic');

  // The button hides the rows and shows them again.
  await page.click('[data-testid=metrics-toggle]');
  m = await metricsUntil(page, (x) => !x.shown && x.rows.length === 0 && !x.kept, 'hid its rows');
  await page.waitForSelector('[data-testid=metrics-toggle][aria-pressed=false]');
  await page.click('[data-testid=metrics-toggle]');
  await metricsUntil(page, (x) => x.shown && x.rows.length === 36, 'showed its rows again');
  await page.mouse.move(box.x + box.width / 2, box.y + 40);
  await shot(page, '72-timeline-metrics');

  // The dark theme has its own metric colour (lighter, to read on the dark background), and the
  // rows are drawn in it.
  const light = await cssRgb(page, '--metric');
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(300);
  const dark = await cssRgb(page, '--metric');
  assert.notDeepEqual(dark, light, 'the dark theme sets --metric');
  const bg = await cssRgb(page, '--bg');
  assert.ok(contrast(dark, bg) >= 4.5, `--metric on the dark background: contrast ${contrast(dark, bg).toFixed(1)}`);
  m = await inSight(page, box, (rows) => rows.find(isSm));
  const row = m.rows.find(isSm);
  const rect = { x: GUTTER_W, y: row.y, w: box.width - GUTTER_W, h: row.h };
  await page.mouse.move(box.x + 5, box.y + box.height + 40);
  let n = 0;
  for (let i = 0; i < 20 && n <= 100; i += 1) {
    await page.waitForTimeout(100);
    n = await pixelsNear(page, rect, dark, 12);
  }
  assert.ok(n > 100, `${n} pixels of the dark theme's metric colour in rank 0's SM active row`);
  assert.ok(await pixelsNear(page, rect, light, 12) < n / 10, 'the light colour is gone');
  await shot(page, '72b-timeline-metrics-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  assert.deepEqual(pageErrors, []);
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});
