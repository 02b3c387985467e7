// End-to-end tests of the Compare view (issue 36 item 3): the job on screen (the new run)
// against a baseline (the base run) chosen or dropped in the view, compared by the core's
// `compare::compare` as `rankscope diff BASE NEW` compares them. (a) tests/zoo/host_stall's
// traces against tests/zoo/baseline's job digest: the verdict shown is the CLI's first line,
// what explains it names host_stall on rank 2, and the downloads are the CLI's `--json` and
// `--md` bytes. (b) A job against its own saved `rankscope analyze --json`: no change beyond
// noise. (c) Two 1,024-rank digests, one the job and one the baseline: the view renders with
// its tables bounded, timed (a sanity bound, not a benchmark: `compare-1024: …`).
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
  ({ server, origin, context, profile } = await startBrowser({ requests, acceptDownloads: true }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

const cli = (...args) => execFileSync(BIN, args, { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'pipe'] });

const zoo = (set) => {
  const d = path.join(ROOT, 'tests/zoo', set);
  return fs.readdirSync(d).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(d, f));
};

/** Runs `rankscope part` for every file, `jobs` at a time (as digest.test.mjs does). */
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

/** The job digest of `traces` (`rankscope part` each, then `rankscope combine --digest`). */
async function digestOf(name, traces) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rankscope-${name}-`));
  const parts = await partAll(traces, dir);
  const digest = path.join(dir, `${name}.rsdigest`);
  cli('combine', '--json', '--digest', digest, ...parts);
  return { dir, digest };
}

/** A synthetic job of `config`'s traces, made into a digest: `{dir, digest}`. */
async function synthDigest(name, config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `rankscope-${name}-`));
  const cfg = path.join(dir, 'config.json');
  fs.writeFileSync(cfg, JSON.stringify(config));
  cli('synth', '--out', path.join(dir, 'job'), '--config', cfg);
  const job = path.join(dir, 'job');
  const traces = fs.readdirSync(job).filter((f) => f.endsWith('.json') && f !== 'manifest.json').sort().map((f) => path.join(job, f));
  const parts = await partAll(traces, dir);
  const digest = path.join(dir, `${name}.rsdigest`);
  cli('combine', '--json', '--digest', digest, ...parts);
  for (const f of [...traces, ...parts]) fs.rmSync(f);
  return { dir, digest };
}

/** Opens the Compare view and chooses `file` as the baseline; resolves once the verdict shows. */
async function setBaseline(page, file, timeout = 120_000) {
  await page.click('[data-testid=nav-compare]');
  await page.waitForSelector('[data-testid=baseline-input]');
  const t0 = Date.now();
  await page.setInputFiles('[data-testid=baseline-input]', file);
  await page.waitForSelector('[data-testid=compare-verdict]', { timeout });
  return Date.now() - t0;
}

/** Drops `file` on the Compare view's drop target, as a user's drag and drop does. */
async function dropBaseline(page, file) {
  const payload = { name: path.basename(file), b64: fs.readFileSync(file).toString('base64') };
  await page.evaluate(({ name, b64 }) => {
    const dt = new DataTransfer();
    const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    dt.items.add(new File([bin], name));
    document.querySelector('[data-testid=baseline-drop]').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, payload);
}

const download = async (page, testid) => {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(`[data-testid=${testid}]`)]);
  return { name: d.suggestedFilename(), text: fs.readFileSync(await d.path()).toString() };
};

test('host_stall against the baseline digest: the CLI\'s verdict, host_stall on rank 2 explains it, the downloads are the CLI\'s', async () => {
  const news = zoo('host_stall');
  const { dir, digest } = await digestOf('zoo-baseline', zoo('baseline'));
  const newSide = news.join(',');
  const text = cli('diff', digest, newSide).toString();
  const json = cli('diff', '--json', digest, newSide).toString();
  const md = cli('diff', '--md', digest, newSide).toString();
  const want = JSON.parse(json);
  assert.equal(want.verdict.change, 'slower');

  const { page } = await openFiles(context, origin, news, pageErrors);
  // Before a baseline: the control and what it takes, nothing compared.
  await page.click('[data-testid=nav-compare]');
  assert.match(await page.locator('[data-testid=baseline-drop]').innerText(), /Compare with a baseline…[\s\S]*job digest/);
  assert.equal(await page.locator('[data-testid=compare-verdict]').count(), 0);
  await shot(page, '90-compare-no-baseline');
  // A trace is not a baseline: said, naming the file.
  await dropBaseline(page, news[0]);
  await page.waitForSelector('[data-testid=baseline-error]');
  assert.match(await page.locator('[data-testid=baseline-error]').innerText(), /^rank0\.pt\.trace\.json\.gz: not a baseline/);
  // The drop went to the baseline, not to a new job.
  assert.match(await page.locator('[data-testid=analysis-ready]').innerText(), /^4 ranks ready$/);

  await setBaseline(page, digest);
  assert.equal(await page.locator('[data-testid=baseline-name]').innerText(), 'zoo-baseline.rsdigest');
  const verdict = page.locator('[data-testid=compare-verdict]');
  assert.equal(await verdict.innerText(), text.split('\n')[0], 'the verdict is the CLI\'s first line');
  assert.equal(await verdict.getAttribute('data-change'), 'slower');
  // The step time of both runs, with their spread, and the change beyond noise.
  const bars = await page.$$eval('[data-testid=compare-bar]', (gs) => gs.map((g) => ({
    run: g.dataset.run, median: Number(g.dataset.medianNs), spread: g.dataset.spreadNs, steps: Number(g.dataset.steps),
  })));
  assert.deepEqual(bars, [
    { run: 'base', median: want.step_time.shift.base_ns, spread: String(want.step_time.noise_base.spread_ns), steps: want.step_time.shift.n_base },
    { run: 'new', median: want.step_time.shift.new_ns, spread: String(want.step_time.noise_new.spread_ns), steps: want.step_time.shift.n_new },
  ]);
  const change = page.locator('[data-testid=compare-change]');
  assert.equal(await change.getAttribute('data-beyond-noise'), 'true');
  assert.match(await change.innerText(), /^Change \+\d+ ms \(\+\d+%\), \d+% interval .*: beyond noise\.$/);
  assert.ok(text.split('\n').includes(await change.innerText()), 'the change line is the report\'s');
  // What explains it: host_stall on rank 2, first.
  const causes = await page.$$eval('[data-testid=attribution-row]', (rows) => rows.map((r) => ({ id: r.dataset.id, ranks: r.dataset.ranks, ns: Number(r.dataset.explainedNs) })));
  assert.deepEqual(causes, want.attribution.causes.map((c) => ({ id: c.id, ranks: c.ranks.join(','), ns: c.explained_ns })));
  assert.equal(causes[0].id, 'host_stall');
  assert.equal(causes[0].ranks, '2');
  assert.ok(causes[0].ns > 0);
  // The delta table: every figure and region, the largest change first, beyond-noise rows marked.
  const table = page.locator('[data-testid=compare-deltas]');
  assert.equal(Number(await table.getAttribute('data-rows')), want.figures.length + want.regions.length);
  const deltas = await page.$$eval('[data-testid=delta-row]', (rows) => rows.map((r) => ({ ns: Number(r.dataset.deltaNs), beyond: r.dataset.beyondNoise === 'true', cls: r.className })));
  assert.ok(deltas.length > 0 && deltas.length <= 100, `${deltas.length} rows shown`);
  for (let i = 1; i < deltas.length; i++) assert.ok(Math.abs(deltas[i - 1].ns) >= Math.abs(deltas[i].ns), 'sorted by |change|');
  for (const d of deltas) assert.equal(d.cls.includes('beyond'), d.beyond);
  const all = [...want.figures, ...want.regions].map((r) => Math.abs(r.delta_ns)).sort((a, b) => b - a);
  assert.equal(Math.abs(deltas[0].ns), all[0]);
  await shot(page, '91-compare-host-stall');
  await page.locator('[data-testid=compare-deltas]').scrollIntoViewIfNeeded();
  await shot(page, '92-compare-host-stall-deltas');
  // Sorted by signed change: the largest slowdown first; only beyond noise.
  await page.click('[data-testid=sort-change]');
  await page.check('[data-testid=compare-beyond-only]');
  const slow = await page.$$eval('[data-testid=delta-row]', (rows) => rows.map((r) => ({ ns: Number(r.dataset.deltaNs), beyond: r.dataset.beyondNoise })));
  assert.equal(slow.length, [...want.figures, ...want.regions].filter((r) => r.beyond_noise).length);
  for (let i = 1; i < slow.length; i++) assert.ok(slow[i - 1].ns >= slow[i].ns);
  assert.ok(slow.every((r) => r.beyond === 'true'));
  // Findings that appeared, disappeared or changed their saving.
  const found = await page.$$eval('[data-testid=finding-change]', (rows) => rows.map((r) => ({ id: r.dataset.id, change: r.dataset.change })));
  const wantFound = want.findings.filter((f) => f.change !== 'both' || f.impact_base_ns !== f.impact_new_ns).map((f) => ({ id: f.id, change: f.change }));
  assert.deepEqual(found, wantFound);
  assert.ok(found.some((f) => f.id === 'host_stall' && f.change === 'appeared'));
  await page.locator('[data-testid=compare-findings]').scrollIntoViewIfNeeded();
  await shot(page, '93-compare-host-stall-findings');
  // The downloads are the CLI's bytes.
  const j = await download(page, 'compare-json');
  assert.equal(j.name, 'rankscope-diff.json');
  assert.equal(j.text, json, 'the JSON download is `rankscope diff --json`');
  const m = await download(page, 'compare-md');
  assert.equal(m.name, 'rankscope-diff.md');
  assert.equal(m.text, md, 'the Markdown download is `rankscope diff --md`');
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outsideOrigin(requests, origin), [], 'no request leaves the origin');
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a job against its own saved analysis: no change beyond noise', async () => {
  const files = zoo('host_stall');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-self-'));
  const saved = path.join(dir, 'host_stall.analysis.json');
  fs.writeFileSync(saved, cli('analyze', '--json', ...files));
  const text = cli('diff', saved, files.join(',')).toString();
  const { page } = await openFiles(context, origin, files, pageErrors);
  await setBaseline(page, saved);
  const verdict = await page.locator('[data-testid=compare-verdict]').innerText();
  assert.match(verdict, /^no change beyond noise/);
  assert.equal(verdict, text.split('\n')[0]);
  assert.equal(await page.locator('[data-testid=compare-verdict]').getAttribute('data-change'), 'no_change');
  assert.equal(await page.locator('[data-testid=compare-change]').getAttribute('data-beyond-noise'), 'false');
  assert.equal(await page.locator('[data-testid=compare-change]').getAttribute('data-delta-ns'), '0');
  assert.equal(await page.locator('[data-testid=attribution-row]').count(), 0);
  await page.check('[data-testid=compare-beyond-only]');
  assert.equal(await page.locator('[data-testid=delta-row]').count(), 0, 'nothing beyond noise');
  await shot(page, '94-compare-self');
  // The baseline goes, and the Compare view asks for one again.
  await page.click('[data-testid=baseline-clear]');
  assert.equal(await page.locator('[data-testid=compare-verdict]').count(), 0);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outsideOrigin(requests, origin), [], 'no request leaves the origin');
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('two 1,024-rank digests: the Compare view renders, its tables bounded, without freezing', async () => {
  // Small ranks, as digest.test.mjs makes its 1,024-rank digest; the new run's straggler is
  // three times as slow.
  const cfg = { ranks: 1024, steps: 4, kernels_per_step: 24, bucket_count: 2, straggler_rank: 700 };
  const t0 = Date.now();
  const base = await synthDigest('cmp1024-base', cfg);
  const next = await synthDigest('cmp1024-new', { ...cfg, straggler_delay_ns: 18_000_000 });
  const made = Date.now() - t0;
  const text = cli('diff', base.digest, next.digest).toString();
  const want = JSON.parse(cli('diff', '--json', base.digest, next.digest).toString());
  const { page, ms: opened } = await openFiles(context, origin, [next.digest], pageErrors, 300_000);
  await page.click('[data-testid=nav-compare]');
  // Frames while the baseline is read and compared: the page must keep drawing.
  await page.evaluate(() => {
    window.__frames = [];
    let last = performance.now();
    const tick = (t) => { window.__frames.push(t - last); last = t; window.__raf = requestAnimationFrame(tick); };
    window.__raf = requestAnimationFrame(tick);
  });
  const ms = await setBaseline(page, base.digest, 300_000);
  const frames = await page.evaluate(() => { cancelAnimationFrame(window.__raf); return window.__frames.slice(1); });
  const longest = Math.max(...frames);
  const verdict = await page.locator('[data-testid=compare-verdict]').innerText();
  assert.equal(verdict, text.split('\n')[0], 'the verdict is the CLI\'s first line');
  assert.equal(await page.locator('[data-testid=compare-verdict]').getAttribute('data-change'), want.verdict.change);
  const rows = want.figures.length + want.regions.length;
  assert.equal(Number(await page.getAttribute('[data-testid=compare-deltas]', 'data-rows')), rows);
  assert.ok(rows > 1000, `${rows} figure and region rows`);
  assert.equal(await page.locator('[data-testid=delta-row]').count(), 100, 'the delta table shows 100 rows');
  assert.match(await page.locator('[data-testid=compare-deltas-more]').innerText(), new RegExp(`^and ${(rows - 100).toLocaleString('en-US')} more rows`));
  assert.ok(await page.locator('[data-testid=finding-change]').count() <= 60);
  assert.ok(await page.locator('[data-testid=step-dot], circle.step-dot').count() <= 800);
  await shot(page, '95-compare-1024');
  // Sorting the whole table again stays quick.
  const s0 = Date.now();
  await page.click('[data-testid=sort-change]');
  await page.waitForSelector('[data-testid=compare-deltas][data-sort=change]');
  const sorted = Date.now() - s0;
  await page.locator('[data-testid=compare-deltas-more]').scrollIntoViewIfNeeded();
  await shot(page, '96-compare-1024-deltas');
  console.log(`compare-1024: two digests made in ${made} ms; job opened in ${opened} ms; baseline chosen to verdict ${ms} ms (longest frame meanwhile ${longest.toFixed(0)} ms); sort of ${rows} rows ${sorted} ms`);
  assert.ok(ms < 60_000, `the baseline took ${ms} ms to compare`);
  assert.ok(sorted < 10_000, `sorting took ${sorted} ms`);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(outsideOrigin(requests, origin), [], 'no request leaves the origin');
  await page.close();
  fs.rmSync(base.dir, { recursive: true, force: true });
  fs.rmSync(next.dir, { recursive: true, force: true });
});
