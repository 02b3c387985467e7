// End-to-end tests of the web app: the built dist/ served on 127.0.0.1, driven in headless
// Chromium (Debian's /usr/bin/chromium) with playwright-core. Run by ./x test after
// `trunk build --release` and `cargo build --release -p rankscope-cli`.
//
// The figures the app shows are compared with `rankscope inspect --json` on the same files.
// Every request the browser makes is recorded; none may leave the page's origin. A screenshot
// of each view goes to target/e2e-screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, SHARED, BIN, traces, startBrowser, stopBrowser, pointAtCell, heatLayout, shot, SHOTS, newPage, outsideOrigin } from './harness.mjs';

let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

async function openApp() {
  const page = await newPage(context, pageErrors);
  await page.goto(origin);
  await page.waitForSelector('[data-testid=open-demo]');
  return page;
}

async function ready(page, timeout = 120_000) {
  await page.waitForSelector('[data-testid=analysis-ready]', { timeout });
}

/** The rank table as the app shows it: {rank, events, steps, gpuOps, commKernels}. */
async function rankTable(page) {
  return page.$$eval('[data-testid=rank-table] [data-testid=rank-row]', (rows) =>
    rows.map((r) => ({
      rank: Number(r.dataset.rank),
      events: Number(r.dataset.events),
      steps: Number(r.dataset.steps),
      gpuOps: Number(r.dataset.gpuOps),
      commKernels: Number(r.dataset.commKernels),
    })));
}

/** The same figures from the CLI. */
function inspect(files) {
  const out = execFileSync(BIN, ['inspect', '--json', ...files], { maxBuffer: 64 << 20 }).toString();
  const report = JSON.parse(out);
  return report.files
    .map((f) => ({ rank: f.rank, events: f.events.total, steps: f.steps.length, gpuOps: f.events.gpu_ops }))
    .sort((a, b) => a.rank - b.rank);
}

async function loadFiles(page, files) {
  const t0 = Date.now();
  await page.setInputFiles('[data-testid=file-input]', files);
  await ready(page);
  return Date.now() - t0;
}

function compareWithCli(shown, files) {
  const cli = inspect(files);
  assert.deepEqual(shown.map(({ rank, events, steps, gpuOps }) => ({ rank, events, steps, gpuOps })), cli);
}

test('the demo opens: 8 synthetic ranks, every view renders', async () => {
  const page = await openApp();
  await shot(page, '01-landing');
  await page.click('[data-testid=open-demo]');
  await ready(page);
  const rows = await rankTable(page);
  assert.deepEqual(rows.map((r) => r.rank), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.ok(rows.every((r) => r.events > 10_000 && r.steps === 6 && r.commKernels > 0));
  assert.match(await page.textContent('.banner'), /[Ss]ynthetic/);
  assert.equal(await page.textContent('[data-testid=fact-world-size]'), '8');
  // The run's noise floor, measured over its steps (issue 35): what a change must exceed.
  assert.match(await page.textContent('[data-testid=fact-noise]'), /varying by .+ from step to step over 6 steps/);
  // What if (issue 35): the replay against the record, the ideal step, the fixes as toggles
  // whose projected step follows them.
  await page.waitForSelector('[data-testid=whatif]');
  assert.match(await page.textContent('[data-testid=whatif-accuracy]'), /within [\d.]+% of the recorded on average/);
  const projected = async () => Number(await page.getAttribute('[data-testid=whatif-projected]', 'data-projected-ns'));
  const withAll = await projected();
  await page.locator('[data-testid=whatif-toggle]').first().click();
  const withoutFirst = await projected();
  assert.ok(withoutFirst > withAll, `unchecking the first fix: ${withAll} -> ${withoutFirst}`);
  await page.locator('[data-testid=whatif-toggle]').first().click();
  assert.equal(await projected(), withAll);
  // The typical step per rank, recorded, replayed and with the lead finding's cause taken away
  // (the demo's rank 5 at its peers' speed): its own time falls to theirs, the step shortens.
  const tl = page.locator('[data-testid=whatif-timeline]');
  await tl.scrollIntoViewIfNeeded();
  assert.equal(await tl.locator('[data-testid=whatif-timeline-rank]').count(), 8);
  assert.equal(await tl.locator('[data-testid=whatif-timeline-bar]').count(), 8 * 3);
  assert.match(await tl.locator('p').first().textContent(),
    /^Step \d+, the typical one, per rank: as recorded \(.+\), as replayed \(.+\), and with the lead finding \(slow device\) fixed: rank 5's own time at its peers' median/);
  assert.ok(Number(await tl.getAttribute('data-fixed-ns')) < Number(await tl.getAttribute('data-replayed-ns')));
  const ownNs = async (rank, v) => Number(await tl.locator(`[data-testid=whatif-timeline-rank][data-rank="${rank}"] [data-version=${v}]`).getAttribute('data-own-ns'));
  assert.ok(await ownNs(5, 'fixed') < 0.95 * await ownNs(5, 'recorded'), 'rank 5 fixed');
  assert.ok(Math.abs(await ownNs(5, 'fixed') - await ownNs(4, 'recorded')) < 0.02 * await ownNs(4, 'recorded'), 'rank 5 at its peers');
  await tl.locator('[data-testid=whatif-timeline-rank][data-rank="5"] [data-version=fixed] rect').first().hover();
  assert.match(await page.textContent('[data-testid=whatif-timeline-hover]'), /^rank 5, fixed: (own time|waiting) [\d.]+ .?s \(from /);
  await tl.screenshot({ path: path.join(SHOTS, "02a-whatif-timeline.png") });
  await shot(page, '02-demo-summary');
  // The analysis views of the demo (also the README's pictures).
  await page.click('[data-testid=nav-steps]');
  await page.waitForSelector('[data-testid=heatmap] canvas');
  // The figures are also a visually hidden table (small jobs); the canvas draws them.
  assert.equal(await page.locator('[data-testid=heatmap] [data-testid=heat-cell]').count(), 8 * 6);
  const demoCell = await pointAtCell(page, 3, (await heatLayout(page)).steps[2]);
  await page.mouse.move(demoCell.x, demoCell.y);
  assert.match(await page.locator('[data-testid=heatmap-tip]').innerText(), /^rank 3 · step \d+\n/);
  await shot(page, '02b-demo-steps');
  await page.mouse.move(5, 5);
  await page.click('[data-testid=nav-collectives]');
  assert.ok(await page.locator('[data-testid=collective-row]').count() > 0);
  await shot(page, '02c-demo-collectives');
  // A collective's row opens the timeline at its first execution.
  await page.locator('[data-testid=collective-row]').first().click();
  await page.waitForSelector('[data-testid=timeline] canvas');
  const h = new URLSearchParams((await page.evaluate(() => location.hash)).slice(1));
  assert.equal(h.get('view'), 'timeline');
  assert.ok(h.get('rank') !== null && Number(h.get('t1')) > Number(h.get('t0')));
  await page.click('[data-testid=nav-alignment]');
  assert.equal(await page.locator('[data-testid=alignment-row]').count(), 8);
  await shot(page, '02d-demo-alignment');
  await page.click('[data-testid=nav-summary]');
  await page.click('[data-testid=nav-diagnostics]');
  await page.waitForSelector('[data-testid=diagnostics]');
  assert.equal(await page.locator('[data-testid=diag-file]').count(), 8);
  await shot(page, '03-demo-diagnostics');
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas');
  await page.waitForTimeout(800);
  await shot(page, '04-demo-timeline');
  assert.match(await page.evaluate(() => location.hash), /view=timeline/);
  await page.keyboard.press('?');
  await page.waitForSelector('[data-testid=help]');
  await shot(page, '05-help');
  await page.keyboard.press('Escape');
  await page.close();
});

test('timeline: zoom and pan with keys, wheel and drag; the URL hash keeps the window', async () => {
  const page = await openApp();
  await page.click('[data-testid=open-demo]');
  await ready(page);
  await page.click('[data-testid=nav-timeline]');
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  const windowOf = async () => {
    await page.waitForTimeout(450); // the hash is written once the view settles
    const h = new URLSearchParams((await page.evaluate(() => location.hash)).slice(1));
    return [Number(h.get('t0')), Number(h.get('t1'))];
  };
  await page.mouse.move(box.x + box.width * 0.6, box.y + 200);
  await page.keyboard.press('0');
  const [a0, a1] = await windowOf();
  for (let i = 0; i < 8; i++) await page.keyboard.press('w');
  const [b0, b1] = await windowOf();
  assert.ok(b1 - b0 < (a1 - a0) / 4, `W zooms in: ${a1 - a0} → ${b1 - b0}`);
  await page.keyboard.press('d');
  const [c0, c1] = await windowOf();
  assert.ok(c0 > b0 && Math.abs((c1 - c0) - (b1 - b0)) <= 2, 'D pans right, same width');
  await page.keyboard.down('Control');
  await page.mouse.wheel(0, -400);
  await page.keyboard.up('Control');
  const [d0, d1] = await windowOf();
  assert.ok(d1 - d0 < c1 - c0, 'Ctrl+wheel zooms in');
  await page.mouse.move(box.x + 600, box.y + 300);
  await page.mouse.down();
  await page.mouse.move(box.x + 400, box.y + 300, { steps: 5 });
  await page.mouse.up();
  const [e0] = await windowOf();
  assert.ok(e0 > d0, 'dragging left moves later in time');
  await shot(page, '06-timeline-zoomed');
  // A click on a rank's header folds its lanes: rank 1's header moves up to just below rank 0's.
  await page.mouse.click(box.x + 60, box.y + 22 + 10);
  await page.waitForTimeout(200);
  await shot(page, '06b-timeline-folded');
  await page.mouse.click(box.x + 60, box.y + 22 + 10);
  // Hover over the GPU stream row of rank 0 shows the event under the pointer.
  await page.keyboard.press('0');
  await page.waitForTimeout(300);
  // Rows are drawn on the canvas: aim at rank 0's first CPU lane, below the ruler and header.
  await page.mouse.move(box.x + box.width * 0.5, box.y + 50);
  await page.waitForTimeout(400);
  await shot(page, '07-timeline-hover');
  // The dark theme follows the OS.
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(400);
  await shot(page, '08-timeline-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  // A reload with the hash lands on the same view and window.
  const hash = await page.evaluate(() => location.hash);
  await page.goto('about:blank');
  await page.goto(origin + hash);
  await page.click('[data-testid=open-demo]');
  await ready(page);
  assert.equal(await page.evaluate(() => location.hash), hash);
  await page.close();
});

test('the 8-rank DLRM set: the rank table equals rankscope inspect', async () => {
  const files = traces('param-dlrm-8rank');
  const page = await openApp();
  const ms = await loadFiles(page, files);
  console.log(`DLRM 8 ranks: file selection to analysis-ready in ${ms} ms`);
  const shown = await rankTable(page);
  assert.equal(shown.length, 8);
  compareWithCli(shown, files);
  await shot(page, '09-dlrm-summary');
  await page.click('[data-testid=nav-timeline]');
  await page.waitForTimeout(1000);
  await shot(page, '10-dlrm-timeline');
  await page.close();
});

test('the 4-rank gloo set (gzip, CPU only): the rank table equals rankscope inspect', async () => {
  const files = traces('ddp-gloo-cpu-4rank');
  const page = await openApp();
  const ms = await loadFiles(page, files);
  console.log(`gloo 4 ranks: file selection to analysis-ready in ${ms} ms`);
  const shown = await rankTable(page);
  assert.equal(shown.length, 4);
  compareWithCli(shown, files);
  assert.ok(shown.every((r) => r.commKernels === 0), 'gloo runs on the CPU: no communication kernels');
  await shot(page, '11-gloo-summary');
  await page.click('[data-testid=nav-timeline]');
  await page.waitForTimeout(1000);
  await shot(page, '12-gloo-timeline');
  await page.close();
});

test('a broken file shows its error while the others load', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-broken-'));
  const broken = path.join(dir, 'rank9.pt.trace.json');
  fs.writeFileSync(broken, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 73, 72, 68, 82]));
  const good = traces('ddp-gloo-cpu-4rank').slice(0, 2);
  const page = await openApp();
  await loadFiles(page, [good[0], broken, good[1]]);
  const errors = page.locator('[data-testid=file-error]');
  assert.equal(await errors.count(), 1);
  assert.match(await errors.first().textContent(), /rank9\.pt\.trace\.json/);
  assert.equal((await rankTable(page)).length, 2);
  compareWithCli(await rankTable(page), good);
  await shot(page, '13-broken-file');
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a load can be cancelled while it reads; the other files still make the job', async () => {
  // A synthetic rank big enough to take a while to read (about 300 MB).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-big-'));
  execFileSync(BIN, ['synth', '--out', dir, '--ranks', '2', '--no-straggler', '--target-mb', '300']);
  const big = path.join(dir, 'rank1.pt.trace.json');
  const small = traces('ddp-gloo-cpu-4rank')[0];
  const page = await openApp();
  await page.setInputFiles('[data-testid=file-input]', [small, big]);
  const row = page.locator('[data-testid=file-row]', { hasText: 'rank1.pt.trace.json' });
  await row.locator('progress').waitFor();
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('[data-testid=file-row]')];
    const p = rows.find((r) => r.textContent.includes('rank1.pt.trace.json'))?.querySelector('progress');
    return p && Number(p.value) > 0;
  });
  await shot(page, '14-loading-progress');
  await row.locator('[data-testid=cancel]').click();
  await ready(page);
  assert.match(await row.textContent(), /cancelled/);
  assert.deepEqual((await rankTable(page)).map((r) => r.rank), [0]);
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('files dropped anywhere on the page load', async () => {
  const files = traces('ddp-gloo-cpu-4rank');
  const page = await openApp();
  const payload = files.map((f) => ({ name: path.basename(f), b64: fs.readFileSync(f).toString('base64') }));
  const dt = await page.evaluateHandle((list) => {
    const t = new DataTransfer();
    for (const { name, b64 } of list) {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      t.items.add(new File([bytes], name));
    }
    return t;
  }, payload);
  await page.dispatchEvent('body', 'drop', { dataTransfer: dt });
  await ready(page);
  compareWithCli(await rankTable(page), files);
  await page.close();
});

test('no request leaves the page\'s origin, and nothing failed on the page', () => {
  assert.ok(requests.length > 0);
  const outside = outsideOrigin(requests, origin);
  assert.deepEqual(outside, []);
  assert.deepEqual(pageErrors, []);
});
