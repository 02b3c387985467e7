// End-to-end: the evidence dropped beside the traces in the app (issue 38, docs/cluster-metrics.md
// and docs/nccl.md, "Beside the traces"): the traces of `rankscope synth --layout tp=8,pp=1,dp=2`
// with the cluster metrics written for them (under a name without a suffix), a 5,000-iteration
// step log and an NCCL RAS status, dropped together. The Files view names each by its kind, the
// Summary's "Beside the traces" section shows the join, and the findings are the CLI's for the
// same files (`rankscope analyze --json`), in the same order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIX = path.join(ROOT, 'crates/rankscope-core/tests/fixtures');
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

test('metrics, a step log and a RAS status dropped beside the traces are one analysis', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-beside-'));
  cli('synth', '--layout', 'tp=8,pp=1,dp=2', '--out', dir);
  fs.rmSync(path.join(dir, 'manifest.json'), { force: true });
  // The profiled steps as the traces alone give them: the log's slow phase is where they are.
  const alone = JSON.parse(cli('analyze', '--json', dir).toString());
  const steps = alone.steps.map((s) => ({ step: s.step, ms: Math.max(...s.per_rank.map((r) => r.wall_ns)) / 1e6 }));
  const fastest = Math.min(...steps.map((s) => s.ms));
  const [first, last] = [steps[0].step, steps[steps.length - 1].step];
  let log = '';
  for (let it = 1; it <= 5000; it++) {
    const slow = it >= Math.max(1, first - 20) && it <= last + 20;
    log += ` iteration ${String(it).padStart(8)}/    5000 | elapsed time per iteration (ms): ${(slow ? fastest : fastest / 2).toFixed(1)} |\n`;
  }
  fs.writeFileSync(path.join(dir, 'train.log'), log);
  fs.copyFileSync(path.join(FIX, 'cluster_metrics/comm_bound/query_range.json'), path.join(dir, 'prom_export'));
  fs.copyFileSync(path.join(FIX, 'nccl_ras/dead_rank.json'), path.join(dir, 'ras.json'));
  const want = JSON.parse(cli('analyze', '--json', dir).toString());
  assert.ok(want.beside, 'the CLI joins them (a CLI built from this tree: RANKSCOPE_BIN)');

  const files = fs.readdirSync(dir).sort().map((f) => path.join(dir, f));
  const { page } = await openFiles(context, origin, files, pageErrors, 300_000);
  // Files (listed under the Summary): each by its kind.
  await page.click('[data-testid=nav-summary]');
  const kindOf = async (name) => page.locator('[data-testid=file-row]', { hasText: name }).locator('[data-testid=file-kind]').innerText();
  assert.match(await kindOf('prom_export'), /^cluster metrics · see Summary/);
  assert.match(await kindOf('train.log'), /^step log · see Summary/);
  assert.match(await kindOf('ras.json'), /^NCCL RAS status · see Summary/);
  await page.locator('[data-testid=file-row]', { hasText: 'train.log' }).scrollIntoViewIfNeeded();
  await shot(page, 'beside-01-files');
  // Summary: the findings are the CLI's, the section shows the join.
  await page.click('[data-testid=nav-summary]');
  const findings = await page.$$eval('[data-testid=findings] > [data-testid=finding]', (els) => els.map((e) => e.dataset.id));
  assert.deepEqual(findings, want.findings.map((f) => f.id));
  for (const id of ['metrics.comm-bound', 'steplog.slow-phase-profiled', 'ras.job-incomplete']) assert.ok(findings.includes(id), id);
  // A time two sources measure is counted once: the What-if panel's fixes add up to less
  // than the step (the metrics' comm-bound time is the trace's exposed_comm's).
  assert.ok(want.whatif, 'the job is replayed');
  const comm = want.findings.filter((f) => f.id === 'metrics.comm-bound');
  assert.ok(comm.every((f) => f.impact_ns === 0 && f.symptoms.includes('exposed_comm')), JSON.stringify(comm));
  const projected = Number(await page.getAttribute('[data-testid=whatif-projected]', 'data-projected-ns'));
  assert.ok(projected > 0, `projected ${projected}`);
  assert.equal(await page.getAttribute('[data-testid=beside-metrics-findings]', 'data-count'), '2');
  assert.equal(await page.getAttribute('[data-testid=beside-steplog-profile]', 'data-representative'), 'slower_than_usual');
  assert.match(await page.locator('[data-testid=beside-ras]').innerText(), /dead/);
  await page.locator('[data-testid=beside]').scrollIntoViewIfNeeded();
  await shot(page, 'beside-02-summary');
  assert.deepEqual(pageErrors, []);
  fs.rmSync(dir, { recursive: true, force: true });
});
