// End-to-end tests of the job digest (`rankscope combine --digest`, docs/digest.md) in the app:
// a digest opens like a trace set and its Summary, alignment and collectives are the CLI's JSON
// for the same digest; the timeline says it holds no events; ranks' traces dropped on it get
// their timeline on the job's offsets without changing a figure. Then a 1,024-rank digest:
// time from file selection to the analysis, the renderer's memory, and the Ranks × steps
// frame times while scrolling and hovering (printed as `digest-1024: …`, BENCHMARKS.md).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { BIN, startBrowser, stopBrowser, shot, newPage, openFiles, pointAtCell, heatLayout, outsideOrigin } from './harness.mjs';

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

/** Runs `rankscope part` for every file, `jobs` at a time. */
async function partAll(files, dir, jobs = 2) {
  const out = files.map((_, i) => path.join(dir, `${String(i).padStart(5, '0')}.part`));
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      await new Promise((resolve, reject) => {
        const p = spawn(BIN, ['part', files[i], '-o', out[i]], { stdio: 'ignore' });
        p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`part ${files[i]}: exit ${code}`))));
      });
    }
  };
  await Promise.all(Array.from({ length: jobs }, worker));
  return out;
}

/** A synthetic job, its parts and its digest: `{dir, traces, digest, json}`. */
async function makeDigest(name, synthArgs) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rankscope-${name}-`));
  const job = path.join(dir, 'job');
  cli('synth', '--out', job, ...synthArgs);
  const traces = fs.readdirSync(job).filter((f) => f.endsWith('.json') && f !== 'manifest.json').sort().map((f) => path.join(job, f));
  const parts = await partAll(traces, dir);
  const digest = path.join(dir, `${name}.rsdigest`);
  // combine takes the parts on its command line: a response file would be nicer, 1,024 paths fit.
  const json = cli('combine', '--json', '--digest', digest, ...parts).toString();
  return { dir, traces, digest, json };
}

const open = (files) => openFiles(context, origin, files, pageErrors, 300_000);

async function summaryFigures(page) {
  await page.click('[data-testid=nav-summary]');
  const ranks = await page.$$eval('[data-testid=rank-row]', (rows) => rows.map((r) => ({
    rank: Number(r.dataset.rank), exposed: Number(r.dataset.exposedCommRatio), overlap: Number(r.dataset.overlapCoverage),
    idle: Number(r.dataset.idleNs), p50: Number(r.dataset.stepP50Ns),
  })));
  const findings = await page.$$eval('[data-testid=findings] > [data-testid=finding]', (els) => els.map((e) => e.dataset.id));
  const events = await page.locator('[data-testid=fact-events]').innerText();
  return { ranks, findings, events: Number(events.replace(/\D/g, '')) };
}

function expected(a) {
  return {
    ranks: a.rank_totals.map((t) => ({
      rank: t.rank, exposed: t.exposed_comm_ratio, overlap: t.overlap_coverage, idle: t.idle_ns,
      p50: t.step_time ? t.step_time.p50_ns : 0,
    })),
    findings: a.findings.map((f) => f.id),
    events: a.ranks.reduce((s, r) => s + r.events, 0),
  };
}

/** The Summary's rank table as shown: rank, GPU ops and comm kernels cells (text and tooltip). */
const rankCounts = (page) => page.$$eval('[data-testid=rank-row]', (rows) => rows.map((r) => ({
  rank: Number(r.dataset.rank),
  gpuOps: r.querySelector('[data-testid=gpu-ops]').textContent,
  comm: r.querySelector('[data-testid=comm-kernels]').textContent,
  title: r.querySelector('[data-testid=gpu-ops]').title,
})));

/**
 * A digest alone on the Summary: no 0 for what it does not hold, and the trace exports off
 * with the reason (they did nothing before).
 */
async function digestGaps(page, ranks) {
  await page.click('[data-testid=nav-summary]');
  const rows = await rankCounts(page);
  assert.equal(rows.length, ranks);
  for (const r of rows) {
    assert.equal(r.gpuOps, '–', `rank ${r.rank}: GPU ops not in a digest`);
    assert.equal(r.comm, '–', `rank ${r.rank}: comm kernels not in a digest`);
    assert.match(r.title, /^Not in a job digest: it keeps each rank's figures, not the events/);
  }
  assert.match(await page.locator('[data-testid=digest-counts-note]').innerText(), /^GPU ops and comm kernels are counted from a rank's events: – where the job digest alone gives the rank/);
  const devices = await page.locator('[data-testid=fact-devices]').innerText();
  assert.doesNotMatch(devices, /up to \d+ per file/);
  assert.match(devices, /^[^()]+ \(how many per file is not in a job digest\)$/);
  for (const id of ['export-trace', 'export-perfetto', 'open-perfetto']) {
    const b = page.locator(`[data-testid=${id}]`);
    assert.ok(await b.isDisabled(), `${id} is off`);
    assert.match(await b.getAttribute('title'), /is a job digest: it holds every rank's figures but no events, so there are none to export/);
  }
}

/** Drops files on the page as a user's drag and drop does. */
async function drop(page, files) {
  const payload = files.map((f) => ({ name: path.basename(f), b64: fs.readFileSync(f).toString('base64') }));
  await page.evaluate((items) => {
    const dt = new DataTransfer();
    for (const { name, b64 } of items) {
      const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      dt.items.add(new File([bin], name, { type: 'application/json' }));
    }
    window.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, payload);
}

/**
 * Frame intervals (ms) while the heatmap's box scrolls and the pointer moves across its cells
 * (the canvas repaints the rows in sight on each scroll and on each new hovered cell).
 */
async function heatmapFrames(page) {
  await page.evaluate(() => {
    window.__frames = [];
    let last = performance.now();
    const tick = (t) => { window.__frames.push(t - last); last = t; if (window.__frames.length < 100000) window.__raf = requestAnimationFrame(tick); };
    window.__raf = requestAnimationFrame(tick);
  });
  const box = await page.locator('[data-testid=heatmap]').boundingBox();
  for (let i = 0; i < 60; i++) {
    await page.mouse.move(box.x + 120 + (i * 37) % Math.max(1, box.width - 130), 200 + (i * 13) % 500);
    await page.mouse.wheel(0, i < 30 ? 400 : -400);
  }
  const frames = await page.evaluate(() => { cancelAnimationFrame(window.__raf); return window.__frames.slice(1); });
  return frames;
}

test('a job digest opens like its traces: the Summary, alignment and collectives are the CLI\'s; added traces get their timeline on the job\'s offsets', async () => {
  const { traces, digest, json } = await makeDigest('digest8', ['--ranks', '8', '--steps', '3']);
  const fromDigest = cli('analyze', '--json', digest).toString();
  assert.equal(fromDigest, json, 'rankscope analyze of the digest is what combine printed');
  const a = JSON.parse(json);
  const { page, ms } = await open([digest]);
  console.log(`digest8: file selection to analysis-ready in ${ms} ms`);
  // The worker that decoded the digest holds nothing once the page has it: it is stopped (its
  // memory kept the decode's peak), and traces dropped later start a new one (below).
  for (let t = Date.now(); page.workers().length > 0 && Date.now() - t < 10_000;) await page.waitForTimeout(50);
  assert.equal(page.workers().length, 0, 'no worker left running after the digest is open');
  assert.deepEqual(await summaryFigures(page), expected(a));
  assert.match(await page.locator('[data-testid=fact-digest]').innerText(), /digest8\.rsdigest/);
  // What a digest does not hold is said, not shown as 0: the counts made from events, the
  // devices per file; and the exports made of events are off, with the reason.
  await digestGaps(page, 8);
  await shot(page, '80-digest-summary');
  await page.locator('[data-testid=rank-table]').scrollIntoViewIfNeeded();
  await page.hover('[data-testid=export-trace]');
  await shot(page, '80b-digest-rank-table');
  await page.click('[data-testid=nav-alignment]');
  const alignment = await page.$$eval('[data-testid=alignment-row]', (rows) => rows.map((r) => ({ rank: Number(r.dataset.rank), offset: Number(r.dataset.offsetNs) })));
  assert.deepEqual(alignment, a.alignment.map((x) => ({ rank: x.rank, offset: x.offset_ns })));
  await page.click('[data-testid=nav-collectives]');
  assert.equal(await page.locator('[data-testid=collective-row]').count(), a.collectives.length);
  await page.click('[data-testid=nav-steps]');
  assert.equal(await page.locator('[data-testid=heat-cell]').count(), a.steps.reduce((s, x) => s + x.per_rank.length, 0));
  await shot(page, '81-digest-steps');
  // The same frame measurement on 8 ranks: the control for the 1,024-rank figure below.
  const f8 = await heatmapFrames(page);
  console.log(`digest8: heatmap frames n=${f8.length} p50 ${quantile(f8, 0.5).toFixed(1)} p95 ${quantile(f8, 0.95).toFixed(1)} ms max ${Math.max(...f8).toFixed(1)} ms`);
  // The timeline: no events in a digest, said plainly.
  await page.click('[data-testid=nav-timeline]');
  assert.match(await page.locator('[data-testid=digest-no-events]').innerText(), /holds every rank's figures but no events/);
  await shot(page, '82-digest-timeline-empty');
  // Two ranks' traces dropped on it: their timelines, on the digest's offsets.
  await drop(page, [traces[2], traces[5]]);
  await page.waitForFunction(() => {
    const c = document.querySelector('[data-testid=timeline] canvas');
    return c && c.dataset.layout && JSON.parse(c.dataset.layout).length > 0 && document.querySelector('[data-testid=analysis-ready]');
  }, null, { timeout: 120_000 });
  const layout = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-layout'));
  const drawn = [...new Set(layout.map((l) => l.rank))].sort();
  assert.deepEqual(drawn, [2, 5]);
  for (const l of layout) {
    const want = a.alignment.find((x) => x.rank === l.rank).offset_ns;
    assert.equal(l.offset_ns, -want, `rank ${l.rank} drawn on the job's offset`);
  }
  assert.match(await page.locator('[data-testid=digest-no-events]').innerText(), /2 of 8 ranks have their trace loaded/);
  await shot(page, '83-digest-timeline-two-ranks');
  // The figures did not move.
  assert.deepEqual(await summaryFigures(page), expected(a));
  // The two ranks with their trace are counted; the exports are on, and say they hold those two.
  const rows = await rankCounts(page);
  for (const r of rows) {
    if (r.rank === 2 || r.rank === 5) assert.ok(/^[\d,]+$/.test(r.gpuOps) && Number(r.gpuOps.replace(/,/g, '')) > 0, `rank ${r.rank}: ${r.gpuOps}`);
    else assert.equal(r.gpuOps, '–');
  }
  assert.equal(await page.locator('[data-testid=digest-counts-note]').count(), 1, 'six ranks are still the digest\'s alone');
  const trace = page.locator('[data-testid=export-trace]');
  assert.equal(await trace.isDisabled(), false);
  assert.match(await trace.getAttribute('title'), /only the 2 of 8 ranks whose trace is loaded/);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outsideOrigin(requests, origin), [], 'no request leaves the origin');
  await page.close();
});

/** The renderer processes' resident memory (kB) under the browser using `profileDir`. */
function rendererRssKb(profileDir) {
  const ps = execFileSync('ps', ['-eo', 'pid=,ppid=,rss=,args=']).toString().trim().split('\n').map((l) => {
    const m = l.trim().match(/^(\d+)\s+(\d+)\s+(\d+)\s+(.*)$/);
    return m && { pid: +m[1], ppid: +m[2], rss: +m[3], args: m[4] };
  }).filter(Boolean);
  const root = ps.find((p) => p.args.includes(`--user-data-dir=${profileDir}`) && !p.args.includes('--type='));
  if (!root) return null;
  const tree = new Set([root.pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of ps) if (tree.has(p.ppid) && !tree.has(p.pid)) { tree.add(p.pid); grew = true; }
  }
  return ps.filter((p) => tree.has(p.pid) && p.args.includes('--type=renderer')).reduce((s, p) => s + p.rss, 0);
}

const quantile = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0; };

test('a digest whose stored analysis is damaged is an error on its row, naming the file and the byte as the CLI does', async () => {
  // The worker hands the page the analysis as stored, unparsed: the page finds the damage.
  const { dir, digest } = await makeDigest('digestbad', ['--ranks', '2', '--steps', '2']);
  const bytes = fs.readFileSync(digest);
  const inflated = zlib.gunzipSync(bytes.subarray(10));
  // No texts: the analysis is the last line. Its first byte, `{`, made `!`.
  assert.equal(inflated[inflated.length - 1], 0x0a);
  const start = inflated.lastIndexOf(0x0a, inflated.length - 2) + 1;
  assert.equal(inflated[start], 0x7b);
  const damaged = Buffer.from(inflated);
  damaged[start] = 0x21;
  const bad = path.join(dir, 'bad.rsdigest');
  fs.writeFileSync(bad, Buffer.concat([bytes.subarray(0, 10), zlib.gzipSync(damaged)]));
  const want = new RegExp(`bad\\.rsdigest: damaged rankscope job digest \\(at inflated byte ${start}\\)`);
  let stderr = '';
  try {
    cli('analyze', '--json', bad);
  } catch (e) {
    stderr = e.stderr.toString();
  }
  assert.match(stderr, want);
  const page = await newPage(context, pageErrors);
  await page.goto(origin);
  await page.waitForSelector('[data-testid=open-demo]');
  await page.setInputFiles('[data-testid=file-input]', [bad]);
  const error = page.locator('[data-testid=file-error]');
  await error.waitFor();
  assert.match(await error.textContent(), want);
  await shot(page, '83-digest-damaged');
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a 1,024-rank digest: time to the Summary, the renderer\'s memory, the heatmap\'s frame times', async () => {
  const cfg = path.join(os.tmpdir(), `rankscope-1024-${process.pid}.json`);
  // Small ranks (the app reads the digest, not the traces): 4 steps of 24 kernels, 2 buckets.
  fs.writeFileSync(cfg, JSON.stringify({ ranks: 1024, steps: 4, kernels_per_step: 24, bucket_count: 2, straggler_rank: 700 }));
  const t0 = Date.now();
  const { dir, digest, json } = await makeDigest('digest1024', ['--config', cfg]);
  const made = Date.now() - t0;
  const a = JSON.parse(json);
  assert.equal(a.ranks.length, 1024);
  const bytes = fs.statSync(digest).size;
  const rss0 = rendererRssKb(profile);
  const { page, ms } = await open([digest]);
  const shown = await summaryFigures(page);
  assert.deepEqual(shown, expected(a), 'the Summary of 1,024 ranks equals the CLI JSON');
  await shot(page, '84-digest1024-summary');
  const rss = rendererRssKb(profile);
  const heap = await page.evaluate(() => performance.memory ? performance.memory.usedJSHeapSize : 0);
  // Ranks × steps: frame intervals while the heatmap scrolls and the pointer moves across its
  // cells. No hidden table at this size: the tooltip gives each cell's figure.
  await page.click('[data-testid=nav-steps]');
  await page.waitForSelector('[data-testid=heatmap] canvas');
  assert.equal(await page.locator('[data-testid=heat-cell]').count(), 0);
  const layout = await heatLayout(page);
  assert.equal(layout.ranks.length, 1024);
  await shot(page, '85-digest1024-steps');
  const at = await pointAtCell(page, 700, layout.steps[1]);
  await page.mouse.move(at.x, at.y);
  const want = a.steps[1].per_rank.find((r) => r.rank === 700);
  assert.match(await page.locator('[data-testid=heatmap-tip]').innerText(), new RegExp(`^rank 700 · step ${layout.steps[1]}\nWaiting for others: `));
  assert.ok(want.exposed_wait_ns >= 0);
  await shot(page, '85b-digest1024-steps-hover-700');
  await page.evaluate(() => { document.querySelector('[data-testid=heatmap]').scrollTop = 0; });
  const frames = await heatmapFrames(page);
  const framesP95 = quantile(frames, 0.95);
  await shot(page, '86-digest1024-steps-scrolled');
  console.log(`digest-1024: ${a.ranks.length} ranks, ${a.steps.length} steps; digest ${bytes} bytes, ${(bytes / a.ranks.length).toFixed(0)} B per rank; made in ${made} ms (synth + 1,024 parts + combine)`);
  console.log(`digest-1024: file selection to analysis-ready ${ms} ms; renderer RSS ${rss0} kB before, ${rss} kB after; JS heap ${heap} B`);
  console.log(`digest-1024: heatmap frames n=${frames.length} p50 ${quantile(frames, 0.5).toFixed(1)} p95 ${framesP95.toFixed(1)} ms max ${Math.max(...frames).toFixed(1)} ms`);
  assert.ok(ms < 60_000, `the 1,024-rank digest took ${ms} ms to open`);
  assert.deepEqual(pageErrors, []);
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(cfg, { force: true });
});
