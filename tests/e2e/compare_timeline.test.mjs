// End-to-end tests of the Compare view's aligned step timelines (issue 36 item 3: "both timelines
// aligned on a chosen step, one above the other"; views/compare/timeline.rs on the core's
// compare::timeline). (a) tests/zoo/pairs: the job is slow_loader_r3's traces (rank 3's Dataset
// 6× slower), the baseline the digest of `base`: rank 3's row in the new run shows its longer
// data loading, the others wait for it; the step picker moves both runs to the same position;
// hovering a span names it (a collective's span, its process group); every axis label lies inside
// the drawing. (b) Two 1,024-rank digests: the rows fold to a bounded count that
// still stands for every rank, drawn in bounded time (`compare-timeline-1024: …`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, BIN, startBrowser, stopBrowser, shot, openFiles, outsideOrigin } from './harness.mjs';

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

const zoo = (set) => {
  const d = path.join(ROOT, 'tests/zoo', set);
  return fs.readdirSync(d).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(d, f));
};

/** `rankscope part` of every file, two at a time, then `combine --digest`: `{dir, digest}`. */
async function digestOf(name, files, dir = fs.mkdtempSync(path.join(os.tmpdir(), `rankscope-${name}-`))) {
  const parts = files.map((_, i) => path.join(dir, `${String(i).padStart(5, '0')}.part`));
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      await new Promise((resolve, reject) => {
        const p = spawn(BIN, ['part', files[i], '-o', parts[i]], { stdio: 'ignore' });
        p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`part ${files[i]}: exit ${code}`))));
      });
    }
  };
  await Promise.all([worker(), worker()]);
  const digest = path.join(dir, `${name}.rsdigest`);
  cli('combine', '--json', '--digest', digest, ...parts);
  for (const f of parts) fs.rmSync(f);
  return { dir, digest };
}

/** A `rankscope synth` job of `config`, as a digest. */
async function synthDigest(name, config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rankscope-${name}-`));
  const cfg = path.join(dir, 'config.json');
  fs.writeFileSync(cfg, JSON.stringify(config));
  const job = path.join(dir, 'job');
  cli('synth', '--out', job, '--config', cfg);
  const traces = fs.readdirSync(job).filter((f) => f.endsWith('.json') && f !== 'manifest.json').sort().map((f) => path.join(job, f));
  const out = await digestOf(name, traces, dir);
  for (const f of traces) fs.rmSync(f);
  return out;
}

async function setBaseline(page, file, timeout = 120_000) {
  await page.click('[data-testid=nav-compare]');
  await page.waitForSelector('[data-testid=baseline-input]');
  const t0 = Date.now();
  await page.setInputFiles('[data-testid=baseline-input]', file);
  await page.waitForSelector('[data-testid=cmp-tl-row]', { timeout });
  return Date.now() - t0;
}

/** Every drawn row: run, ranks, count, named, its spans' time by kind. */
const rows = (page) => page.$$eval('[data-testid=cmp-tl-row]', (gs) => gs.map((g) => {
  const kinds = {};
  for (const r of g.querySelectorAll('rect[data-kind]')) kinds[r.dataset.kind] = (kinds[r.dataset.kind] ?? 0) + Number(r.dataset.durNs);
  return { run: g.dataset.run, ranks: g.dataset.ranks, count: Number(g.dataset.count), named: g.dataset.named === 'true', start: Number(g.dataset.startNs), end: Number(g.dataset.endNs), kinds };
}));

const runs = (page) => page.$$eval('[data-testid=cmp-tl-run]', (gs) => gs.map((g) => ({
  run: g.dataset.run, step: Number(g.dataset.step), stepNs: Number(g.dataset.stepNs), rows: Number(g.dataset.rows), ranks: Number(g.dataset.ranks),
})));

test('a slow loader on rank 3: its row in the new run shows the longer data loading, the others wait', async () => {
  const { dir, digest } = await digestOf('pairs-base', zoo('pairs/base'));
  const { page } = await openFiles(context, origin, zoo('pairs/slow_loader_r3'), pageErrors);
  await setBaseline(page, digest);
  assert.deepEqual((await runs(page)).map((r) => [r.run, r.rows, r.ranks]), [['base', 4, 4], ['new', 4, 4]]);
  const got = await rows(page);
  assert.deepEqual(got.map((r) => `${r.run} ${r.ranks}`), ['base 0', 'base 1', 'base 2', 'base 3', 'new 0', 'new 1', 'new 2', 'new 3']);
  for (const r of got) {
    const sum = Object.values(r.kinds).reduce((a, b) => a + b, 0);
    assert.equal(sum, r.end - r.start, `${r.run} rank ${r.ranks}: the spans add up to the step`);
  }
  const row = (run, rank) => got.find((r) => r.run === run && r.ranks === String(rank));
  const loading = (run, rank) => row(run, rank).kinds.data_loading ?? 0;
  // The scenario: ~320 ms more per step in rank 3's DataLoader.
  assert.ok(loading('new', 3) - loading('base', 3) > 200e6, `rank 3 loads ${loading('base', 3) / 1e6} → ${loading('new', 3) / 1e6} ms`);
  for (const r of [0, 1, 2]) {
    assert.ok(loading('new', 3) > 3 * loading('new', r), `rank 3 loads longer than rank ${r}`);
    assert.ok((row('new', r).kinds.wait ?? 0) > 2 * (row('new', 3).kinds.wait ?? 0), `rank ${r} waits for rank 3`);
  }
  // The difference of the steps, beside; one scale for both runs.
  const [b, n] = await runs(page);
  const delta = page.locator('[data-testid=cmp-tl-delta]');
  assert.equal(Number(await delta.getAttribute('data-delta-ns')), n.stepNs - b.stepNs);
  assert.match(await delta.innerText(), new RegExp(`^new step #${n.step} .* against base step #${b.step} .*: \\+\\d+ ms \\(\\+\\d+%\\)$`));
  // Hovering rank 3's data loading names it.
  await page.locator('[data-testid=cmp-tl]').scrollIntoViewIfNeeded();
  await page.hover('[data-testid=cmp-tl-row][data-run=new][data-ranks="3"] rect[data-kind=data_loading]');
  assert.match(await page.locator('[data-testid=cmp-tl-hover]').innerText(), /^new, rank 3: data loading \d+ ms \(from /);
  await shot(page, '97-compare-timeline-loader');
  // A collective span names its collective.
  await page.hover('[data-testid=cmp-tl-row][data-run=new][data-ranks="0"] rect[data-kind=wait]');
  assert.match(await page.locator('[data-testid=cmp-tl-hover]').innerText(), /^new, rank 0: wait for a peer .* in \d+ [a-z_]+, /);
  // ... and the process group it ran on (gloo's one group of the 4 ranks, data-parallel).
  assert.match(await page.locator('[data-testid=cmp-tl-hover]').innerText(), / on the data-parallel group 0 \(4 ranks\)/);
  await shot(page, '97-compare-timeline-group');
  // Every axis label lies inside the drawing (the last one ends at the axis' end, not past it).
  const ticks = await page.$$eval('[data-testid=cmp-tl-tick]', (ts) => ts.map((t) => {
    const b = t.getBBox();
    return { left: b.x, right: b.x + b.width, width: t.ownerSVGElement.viewBox.baseVal.width, text: t.textContent };
  }));
  assert.equal(ticks.length, 6);
  for (const t of ticks) assert.ok(t.left >= 0 && t.right <= t.width + 0.5, `axis label ${t.text}: ${t.left}–${t.right} of ${t.width}`);
  // The picker: the first step of both runs.
  await page.selectOption('[data-testid=cmp-tl-step]', '0');
  await page.waitForFunction(() => document.querySelector('[data-testid=cmp-tl-run][data-run=new]')?.dataset.step !== undefined);
  const first = await runs(page);
  const options = await page.$$eval('[data-testid=cmp-tl-step] option', (os) => os.map((o) => o.textContent));
  assert.match(options[1], /^1 of \d+: base #(\d+) \/ new #(\d+)$/);
  const [, sb, sn] = options[1].match(/base #(\d+) \/ new #(\d+)/);
  assert.deepEqual(first.map((r) => r.step), [Number(sb), Number(sn)]);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outsideOrigin(requests, origin), [], 'no request leaves the origin');
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('two 1,024-rank digests: the rows fold to a bounded count standing for every rank', async () => {
  const cfg = { ranks: 1024, steps: 4, kernels_per_step: 24, bucket_count: 2, straggler_rank: 700 };
  const base = await synthDigest('cmptl1024-base', cfg);
  const next = await synthDigest('cmptl1024-new', { ...cfg, straggler_delay_ns: 18_000_000 });
  const want = JSON.parse(cli('diff', '--json', base.digest, next.digest).toString());
  const { page } = await openFiles(context, origin, [next.digest], pageErrors, 300_000);
  const ms = await setBaseline(page, base.digest, 300_000);
  const rs = await runs(page);
  assert.deepEqual(rs.map((r) => [r.run, r.ranks]), [['base', 1024], ['new', 1024]]);
  const got = await rows(page);
  for (const run of ['base', 'new']) {
    const mine = got.filter((r) => r.run === run);
    assert.ok(mine.length >= 2 && mine.length <= 24, `${run}: ${mine.length} rows`);
    assert.equal(mine.reduce((a, r) => a + r.count, 0), 1024, `${run}: the rows stand for every rank`);
  }
  // The ranks the verdict names keep a row of their own.
  const named = [...(want.verdict.cause?.ranks ?? []), ...want.verdict.waiting_ranks].slice(0, 1);
  for (const r of named) {
    assert.ok(got.some((x) => x.run === 'new' && x.ranks === String(r) && x.named), `rank ${r} alone: ${JSON.stringify(got.filter((x) => x.named).map((x) => x.ranks))}`);
  }
  const labels = await page.$$eval('[data-testid=cmp-tl-row] text title', (ts) => ts.map((t) => t.textContent));
  assert.ok(labels.some((l) => /^ranks .* \(\d+ alike; rank \d+ drawn\)$/.test(l)), labels.slice(0, 4).join(' | '));
  await page.locator('[data-testid=cmp-tl]').scrollIntoViewIfNeeded();
  await shot(page, '98-compare-timeline-1024');
  const t0 = Date.now();
  await page.selectOption('[data-testid=cmp-tl-step]', '1');
  await page.waitForFunction(() => document.querySelector('[data-testid=cmp-tl-step]').value === '1');
  await page.waitForSelector('[data-testid=cmp-tl-row]');
  const picked = Date.now() - t0;
  console.log(`compare-timeline-1024: baseline chosen to rows drawn ${ms} ms (${got.length} rows); another step ${picked} ms`);
  assert.ok(picked < 10_000, `picking a step took ${picked} ms`);
  assert.deepEqual(pageErrors, []);
  await page.close();
  fs.rmSync(base.dir, { recursive: true, force: true });
  fs.rmSync(next.dir, { recursive: true, force: true });
});
