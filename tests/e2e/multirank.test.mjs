// End-to-end: one file holding a whole job (`rankscope synth --merged`, as a Perfetto / Chrome
// merge writes it: pid = rank) dropped in the app is read as its ranks, as `rankscope analyze`
// reads it: the file row says how many it holds, the Summary lists each rank named as the CLI
// names it (`FILE (rank N)`) with the CLI's step time, the lead finding is the CLI's, the JSON
// export and the merged trace are the CLI's byte for byte, and the timeline has a rank group per
// rank, each asked of the one worker holding the file. A large one is read on every worker and
// cut after the pieces are merged. Screenshots in target/e2e-screenshots/ (70-73).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';

let server, origin, context, profile, dir;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests, acceptDownloads: true }));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-multirank-'));
});

after(async () => {
  await stopBrowser({ server, context, profile });
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** A synthetic job written as one merged file into its own folder: the file's path. */
function mergedJob(name, ...flags) {
  const out = path.join(dir, name);
  execFileSync(BIN, ['synth', '--merged', ...flags, '--out', out], { stdio: ['ignore', 'ignore', 'inherit'] });
  const file = fs.readdirSync(out).find((f) => f.startsWith('job.pt.trace.json'));
  return path.join(out, file);
}

/** `rankscope analyze` of `file` with its folder left out of the names, as the page names it. */
function analyze(file, ...flags) {
  const text = execFileSync(BIN, ['analyze', ...flags, file], { maxBuffer: 256 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  return text.replaceAll(path.dirname(file) + '/', '');
}

async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download', { timeout: 60_000 }), page.click(selector)]);
  return { name: d.suggestedFilename(), bytes: fs.readFileSync(await d.path()) };
}

/** What the page shows of the job read from `file`, checked against the CLI's report of it. */
async function checkAgainstCli(page, file, ranks) {
  const base = path.basename(file);
  const cli = JSON.parse(analyze(file, '--json'));
  assert.equal(cli.ranks.length, ranks, 'the CLI reads the file as its ranks');
  // The file row: one file, `ranks` ranks.
  assert.equal(await page.locator('[data-testid=file-row]').count(), 1);
  const held = page.locator('[data-testid=file-ranks]');
  assert.equal(await held.getAttribute('data-ranks'), String(ranks));
  assert.match(await held.innerText(), new RegExp(`^${ranks} ranks \\(0–${ranks - 1}\\)`));
  // The Summary: a row per rank, named as the CLI names it, with its step time.
  await page.click('[data-testid=nav-summary]');
  const rows = await page.$$eval('[data-testid=rank-row]', (els) => els.map((r) => ({
    rank: Number(r.dataset.rank), name: r.querySelector('td.name').textContent, p50: Number(r.dataset.stepP50Ns),
  })));
  assert.deepEqual(rows, cli.rank_totals.map((t) => ({
    rank: t.rank, name: `${base} (rank ${t.rank})`, p50: t.step_time.p50_ns,
  })));
  assert.deepEqual(cli.ranks.map((r) => [r.source, r.rank_source]), rows.map((r) => [r.name, 'in_file']));
  // The lead finding: the CLI's, on the CLI's rank.
  const lead = page.locator('[data-testid=findings] > [data-testid=finding]').first();
  assert.ok(cli.findings.length > 0, 'the job has a finding to lead with');
  assert.equal(await lead.getAttribute('data-id'), cli.findings[0].id);
  assert.equal(await lead.getAttribute('data-ranks'), cli.findings[0].ranks.join(','));
  const shownFindings = await page.$$eval('[data-testid=findings] > [data-testid=finding]', (els) => els.map((e) => e.dataset.id));
  assert.deepEqual(shownFindings, cli.findings.map((f) => f.id));
  // The exports: the JSON report and the merged trace are the CLI's, byte for byte (every
  // rank's piece asked of the worker holding the file, under its rank).
  const json = await download(page, '[data-testid=export-json]');
  assert.equal(json.bytes.toString(), analyze(file, '--json'));
  const merged = await download(page, '[data-testid=export-trace]');
  const want = path.join(dir, 'cli-merged.json');
  analyze(file, '--merged-trace', want);
  assert.ok(merged.bytes.equals(fs.readFileSync(want)), 'the merged trace is byte for byte the CLI\'s');
  // The timeline: a rank group per rank, all of them the file's, in the file's order.
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas[data-layout]');
  const lanes = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-layout'));
  const groups = [...new Map(lanes.map((l) => [l.rank, [l.file, l.index]])).entries()].sort((a, b) => a[0] - b[0]);
  assert.deepEqual(groups, cli.rank_totals.map((t) => [t.rank, [0, t.rank]]));
  return cli;
}

test('a merged 8-rank file, large enough to be read on every worker, is its 8 ranks: the CLI\'s figures, finding and exports', async () => {
  // 8 ranks of ~5 MB: ~42 MB of plain JSON, above the size at which a file read alone is cut
  // into ranges for the other workers (pool.rs SPLIT_MIN_BYTES). The merge writes each rank's
  // `M` metadata among its events; a middle piece holding metadata makes the pieces doubt (and
  // the file read again alone, as the bare file below is), so here it is moved first, as a
  // merge tool that writes the processes' names up front does: the pieces merge, then the cut.
  const file = mergedJob('large', '--ranks', '8', '--steps', '4', '--target-mb', '7', '--seed', '34');
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  doc.traceEvents = [...doc.traceEvents.filter((e) => e.ph === 'M'), ...doc.traceEvents.filter((e) => e.ph !== 'M')];
  fs.writeFileSync(file, JSON.stringify(doc));
  assert.ok(fs.statSync(file).size > 32 * 1024 * 1024, 'large enough to be read in pieces');
  const { page, ms } = await openFiles(context, origin, [file], pageErrors, 180_000);
  const workers = await page.evaluate(() => navigator.hardwareConcurrency);
  const status = await page.textContent('[data-testid=file-row] .status');
  console.log(`${path.basename(file)} (${(fs.statSync(file).size / 1e6).toFixed(1)} MB): ready in ${ms} ms, ${status}`);
  if (workers > 1) assert.match(status, /read on [2-9]\d* workers/, 'read in pieces, then cut into its ranks');
  await page.click('[data-testid=nav-summary]');
  await shot(page, '70-merged-file-summary');
  const cli = await checkAgainstCli(page, file, 8);
  console.log(`lead finding: ${cli.findings[0].id} on rank(s) ${cli.findings[0].ranks}`);
  await shot(page, '72-merged-file-timeline');
  // The rank table and the file row under it: eight ranks of one file.
  await page.click('[data-testid=nav-summary]');
  await page.locator('[data-testid=rank-row]').last().scrollIntoViewIfNeeded();
  await shot(page, '71-merged-file-ranks');
  await page.close();
});

test('a bare merged 4-rank file, gzipped (pids taken for ranks, said as assumed): the CLI\'s figures, finding and exports', async () => {
  const file = mergedJob('bare', 'bare', '--gzip', '--ranks', '4', '--steps', '3', '--seed', '35');
  const { page } = await openFiles(context, origin, [file], pageErrors);
  await checkAgainstCli(page, file, 4);
  // Each rank says how the file's ranks were told apart, and that it was assumed.
  await page.click('[data-testid=nav-diagnostics]');
  const said = await page.$$eval('[data-testid=diag-file]', (els) => els.map((e) => e.textContent));
  assert.equal(said.length, 4);
  for (const t of said) assert.match(t, /ranks_in_file_assumed/);
  await shot(page, '73-merged-bare-diagnostics');
  await page.close();
  assert.deepEqual(pageErrors, []);
});
