// `runs` in the npm package (issue 36): on the zoo's scaling runs (one MLP at world sizes 1, 2
// and 4, strong and weak) it is exactly `rankscope runs --json`, and its Markdown, text and CSV
// are the CLI's; stated figures are the CLI's flags; a run that is no trace is left out.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, ROOT, rankscope } from './harness.mjs';

const SCALING = path.join(ROOT, 'tests/zoo/scaling');
const NAMES = ['strong_w1', 'strong_w2', 'strong_w4', 'weak_w1', 'weak_w2', 'weak_w4'];
const RUNS = NAMES.map((n) => path.join(SCALING, n));
assert.ok(RUNS.every((p) => fs.existsSync(p)), 'tests/zoo/scaling/*');

function cliRuns(...args) {
  return spawnSync(BIN, ['runs', ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
}

test('runs of six folders is the CLI’s --json, --md, text and --csv', async () => {
  const ref = cliRuns('--json', ...RUNS);
  assert.equal(ref.status, 0, ref.stderr);
  const report = await rankscope.runs(RUNS);
  assert.deepStrictEqual(report, JSON.parse(ref.stdout));
  assert.equal(report.schema, 'rankscope.runs/1');
  assert.deepEqual(report.runs.map((r) => r.run), RUNS);
  assert.deepEqual(report.runs.map((r) => r.ranks), [1, 2, 4, 1, 2, 4]);
  // The scenario.json of each run says its global batch.
  for (const [i, r] of report.runs.entries()) {
    const want = JSON.parse(fs.readFileSync(path.join(RUNS[i], 'scenario.json'), 'utf8')).samples_per_step;
    assert.deepEqual(r.samples_per_step, { value: want, from: 'trace' }, NAMES[i]);
  }
  assert.deepEqual(report.scaling.flatMap((g) => g.points.map((p) => p.mode)), ['base', 'strong', 'strong', 'base', 'weak', 'weak']);
  for (const [output, flag] of [['markdown', '--md'], ['text', null], ['csv', '--csv']]) {
    const text = await rankscope.runs(RUNS, { output });
    assert.equal(text, cliRuns(...(flag ? [flag] : []), ...RUNS).stdout, output);
  }
});

test('stated figures are the CLI’s flags; names may be given', async () => {
  const two = RUNS.slice(0, 2);
  const report = await rankscope.runs(two, { samplesPerStep: 256, peakTflops: 100 });
  assert.deepStrictEqual(report, JSON.parse(cliRuns('--json', '--samples-per-step', '256', '--peak-tflops', '100', ...two).stdout));
  const named = await rankscope.runs([{ name: 'one', inputs: two[0] }, { inputs: [two[1]] }]);
  assert.deepEqual(named.runs.map((r) => r.run), ['one', 'runs[1]']);
  await assert.rejects(rankscope.runs(two, { peakTflops: -1 }), /peakTflops/);
  await assert.rejects(rankscope.runs(two, { samplesPerStep: 1.5 }), /samplesPerStep/);
  await assert.rejects(rankscope.runs('not a list'), /jobs/);
});

test('a run that is no trace is left out and said', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-runs-'));
  fs.writeFileSync(path.join(dir, 'x.json'), 'not json');
  const notes = [];
  const report = await rankscope.runs([dir, RUNS[0]], { onNote: (n) => notes.push(n) });
  assert.deepEqual(report.runs.map((r) => r.run), [RUNS[0]]);
  assert.ok(notes.some((n) => n.startsWith(`${dir}: `) && n.includes('no input could be read')), `notes: ${notes}`);
  fs.rmSync(dir, { recursive: true });
});
