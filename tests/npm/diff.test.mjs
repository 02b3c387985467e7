// `diff` in the npm package (issue 36): on the zoo's pair (a host stall injected on rank 2 of the
// baseline job) it is exactly `rankscope diff --json`, its verdict names the stalled rank, a run
// against itself changes nothing beyond noise, and the gates fail as the CLI's do.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { BIN, ROOT, filesOf, rankscope } from './harness.mjs';

const BASE = path.join(ROOT, 'tests/zoo/baseline');
const NEW = path.join(ROOT, 'tests/zoo/host_stall');
assert.ok(fs.existsSync(BASE) && fs.existsSync(NEW), 'tests/zoo/baseline and tests/zoo/host_stall');

function cliDiff(...args) {
  return spawnSync(BIN, ['diff', ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
}

test('diff of two folders is the CLI’s --json, --md, text and --csv', async () => {
  const ref = cliDiff('--json', BASE, NEW);
  assert.equal(ref.status, 0, ref.stderr);
  const notes = [];
  const report = await rankscope.diff([BASE], [NEW], { onNote: (n) => notes.push(n) });
  assert.deepStrictEqual(report, JSON.parse(ref.stdout));
  assert.equal(report.schema, 'rankscope.diff/1');
  // The scenario.json beside the traces is skipped with the CLI's note.
  assert.ok(notes.some((n) => n.startsWith(`skipped ${BASE}/scenario.json`)), `notes: ${notes}`);
  for (const [output, flag] of [['markdown', '--md'], ['text', null], ['csv', '--csv']]) {
    const text = await rankscope.diff(BASE, NEW, { output });
    const cli = cliDiff(...(flag ? [flag] : []), BASE, NEW);
    assert.equal(text.trim(), cli.stdout.trim(), output);
  }
});

test('the verdict names the stalled rank; bytes in memory give the same document', async () => {
  const named = (dir) => filesOf(dir, (f) => f.endsWith('.json.gz')).map((p) => ({ name: p, data: fs.readFileSync(p) }));
  const report = await rankscope.diff(named(BASE), named(NEW));
  assert.equal(report.verdict.change, 'slower');
  assert.ok(report.step_time.beyond_noise);
  assert.match(report.verdict.line, /^step time \+\d+% .*rank 2's forward > straggler_sleep/);
  assert.deepEqual(report.verdict.cause.ranks, [2]);
  assert.deepEqual(report.verdict.cause.region, ['forward', 'straggler_sleep']);
  // The walk's scenario.json is the only input these lack, and it is skipped: the same answer.
  assert.deepStrictEqual(report, await rankscope.diff(BASE, NEW));
});

test('a run against itself: no change beyond noise, no gate fails', async () => {
  const failed = [];
  const report = await rankscope.diff(BASE, BASE, { failOn: ['step_time>+5%', 'new_findings>0'], onFail: (f) => failed.push(f) });
  assert.equal(report.verdict.change, 'no_change');
  assert.match(report.verdict.line, /^no change beyond noise/);
  assert.equal(report.step_time.beyond_noise, false);
  assert.deepEqual(failed, []);
});

test('gates fail as the CLI’s --fail-on does', async () => {
  const failed = [];
  const report = await rankscope.diff(BASE, NEW, {
    failOn: ['step_time>+5%', 'step_time>+50%', 'new_high_findings>0'],
    onFail: (f) => failed.push(f),
  });
  assert.deepEqual(failed.map((f) => f.gate), ['step_time>+5%', 'new_high_findings>0']);
  assert.ok(Math.abs(failed[0].measured - report.step_time.ratio) < 1e-12);
  const cli = cliDiff('--fail-on', 'step_time>+5%', '--fail-on', 'step_time>+50%', BASE, NEW);
  assert.equal(cli.status, 3);
  assert.match(cli.stderr, /gate failed: step_time>\+5%/);
  await assert.rejects(rankscope.diff(BASE, NEW, { failOn: 'speed>1' }), /unknown metric/);
  await assert.rejects(rankscope.diff(BASE, NEW, { output: 'html' }), TypeError);
});
