// The drift test (issue 10, item 5, the Node part): the same inputs through the CLI and
// through the built npm package in Node give byte-identical analysis JSON.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, SHARED, filesOf, rankscope, run, sameAsCli, tmpdir, trace } from './harness.mjs';

test('DLRM, 8 ranks on V100s (a folder path)', async () => {
  const dir = trace('param-dlrm-8rank');
  const { report, notes, failed } = await sameAsCli([dir], [dir]);
  assert.equal(report.schema, 'rankscope.analysis');
  assert.deepEqual(report.ranks.map((r) => r.rank), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.ok(report.collectives.length > 0, 'the job has collectives');
  assert.deepEqual(failed, []);
  assert.deepEqual(notes, []);
});

test('DDP on gloo, 4 CPU ranks (a folder path with a trailing slash)', async () => {
  const dir = trace('ddp-gloo-cpu-4rank') + '/';
  const { report } = await sameAsCli([dir], [dir]);
  assert.equal(report.ranks.length, 4);
  assert.ok(report.ranks.every((r) => r.source.startsWith(dir) && !r.source.includes('//')), 'named as Rust joins paths');
});

test('a synth job with nccl-tests output and an NCCL_DEBUG log mixed in', async () => {
  const dir = path.join(tmpdir('synth'), 'job');
  run('synth', '--out', dir, '--ranks', '4', '--steps', '3');
  assert.ok(fs.existsSync(path.join(dir, 'manifest.json')), 'synth writes a manifest (a JSON that is not a trace)');
  const tests = path.join(SHARED, 'nccl-tests', 'xxrjun_h100_1node-8gpu_multi-collective.txt');
  // A log without a perf table (one with a table is read as nccl-tests output too).
  const log = path.join(SHARED, 'nccl-logs', 'awsome-dt_fsdp-llama3-4node-p5_training-log-with-NCCL-lines_elided.log');
  fs.copyFileSync(tests, path.join(dir, 'nccl-tests.txt'));
  fs.copyFileSync(log, path.join(dir, 'nccl.log'));
  const { report, notes, clean, cliStderr } = await sameAsCli([dir], [dir]);
  assert.equal(report.ranks.length, 4);
  assert.ok(report.fabric, 'the nccl-tests results joined the analysis');
  assert.ok(notes.some((n) => n.startsWith(`skipped ${dir}/manifest.json`)), `notes: ${notes}`);
  const logNote = notes.find((n) => n.startsWith(`${dir}/nccl.log is an NCCL_DEBUG log`));
  assert.ok(logNote && cliStderr.includes(logNote), `the CLI's note, word for word: ${notes}\ncli: ${cliStderr}`);
  assert.ok(clean, 'walked non-traces are notes, not failures');
});

test('a folder with non-trace JSON in it: skipped when walked, failed when named, the report unchanged', async () => {
  const dir = tmpdir('mixed');
  const gloo = filesOf(trace('ddp-gloo-cpu-4rank')).slice(0, 2);
  for (const f of gloo) fs.copyFileSync(f, path.join(dir, path.basename(f)));
  fs.writeFileSync(path.join(dir, 'config.json'), '{"lr": 0.1, "batch": 32}\n');
  fs.writeFileSync(path.join(dir, 'hparams.json'), '[{"lr": 0.1}]\n');
  fs.writeFileSync(path.join(dir, 'README.md'), 'not an input\n');
  const walked = await sameAsCli([dir], [dir]);
  assert.equal(walked.report.ranks.length, 2);
  assert.deepEqual(walked.failed, []);
  assert.ok(walked.clean);
  const skipped = walked.notes.filter((n) => n.startsWith('skipped '));
  assert.equal(skipped.length, 2, `notes: ${walked.notes}`);
  assert.ok(skipped.every((n) => /\.json: not a trace file \(at byte \d+\)/.test(n)), `${skipped}`);

  // Named one by one, the same files: the non-traces fail (exit 1 for the CLI), the job stands.
  const named = filesOf(dir, (f) => f.endsWith('.json') || f.endsWith('.gz'));
  const explicit = await sameAsCli(named, named);
  assert.equal(explicit.clean, false);
  assert.deepEqual(explicit.failed.map((f) => path.basename(f.file)), ['config.json', 'hparams.json']);
  assert.ok(explicit.failed.every((f) => f.error.startsWith(`${f.file}: not a trace file (at byte`)), JSON.stringify(explicit.failed));
  assert.deepEqual(explicit.report, walked.report);
});

test('a hang with Flight Recorder dumps (zoo hang_skipped_allreduce)', async () => {
  const dir = path.join(ROOT, 'tests/zoo/hang_skipped_allreduce');
  const { report, notes } = await sameAsCli([dir], [dir]);
  assert.equal(report.schema, 'rankscope.analysis');
  assert.ok(report.flight_recorder, 'the dumps joined the analysis');
  assert.ok(notes.some((n) => n.includes('scenario.json')), `scenario.json is skipped with a note: ${notes}`);
  // A second dump of a rank (fr_rankN.pkl beside fr_rankN.json) is left out, with a note.
  assert.ok(notes.some((n) => n.includes('skipped')), `${notes}`);

  // The dumps alone: the `rankscope.fr` report.
  const dumps = filesOf(dir, (f) => /^fr_rank\d\.pkl$/.test(f));
  assert.equal(dumps.length, 4);
  const alone = await sameAsCli(dumps, dumps);
  assert.equal(alone.report.schema, 'rankscope.fr');
});

test('options are the CLI flags: thresholds, offsets, explicit ranks, rules', async () => {
  const files = filesOf(trace('ddp-gloo-cpu-4rank'));
  const rules = path.join(tmpdir('rules'), 'rules.json');
  // The CPU matrix products counted as optimizer work: the figures move, so the rules are used.
  const userRules = { version: 1, rules: [{ name_prefix: ['aten::mm'], lane: 'cpu', class: 'optimizer' }] };
  fs.writeFileSync(rules, JSON.stringify(userRules));
  const base = path.basename(files[0]);
  const args = [...files, '--threshold', 'exposed_comm_ratio=0.5', '--threshold', 'step_jitter=0.01',
    '--offset', '2=1500', '--offset', '3=-250000', '--rank', `${base}=3`, '--rank', `${path.basename(files[3])}=0`, '--rules', rules];
  const opts = {
    thresholds: { exposed_comm_ratio: 0.5, step_jitter: 0.01 },
    offsets: new Map([[2, 1500], [3, -250000n]]),
    ranks: [[base, 3], [path.basename(files[3]), 0]],
    rules: userRules,
  };
  const { report } = await sameAsCli(files, args, opts);
  const byFile = Object.fromEntries(report.ranks.map((r) => [path.basename(r.source), r.rank]));
  assert.equal(byFile[base], 3);
  assert.equal(report.alignment.find((a) => a.rank === 2).offset_ns, 1500);
  const plain = await sameAsCli(files, files);
  assert.notDeepEqual(plain.report.rank_totals, report.rank_totals, 'the options changed the figures');
  assert.notDeepEqual(plain.report.findings, report.findings, 'the thresholds changed the findings');
});

test('a job digest (rankscope part, then combine --digest) is the whole job, opened as the CLI opens it', async () => {
  const dir = tmpdir('digest');
  const files = filesOf(trace('ddp-gloo-cpu-4rank'));
  const parts = files.map((f, i) => {
    const p = path.join(dir, `${i}.part`);
    run('part', f, '-o', p);
    return p;
  });
  const digest = path.join(dir, 'job.rsdigest');
  const combined = run('combine', '--json', '--digest', digest, ...parts);
  const { report, notes, clean } = await sameAsCli([digest], [digest]);
  assert.equal(JSON.stringify(report), JSON.stringify(JSON.parse(combined)), 'what combine printed');
  assert.deepEqual(report.ranks.map((r) => r.source), files, 'the traces the parts were made from');
  assert.deepEqual(notes, []);
  assert.ok(clean);
  // Its ranks come from its parts: the job's ranks, no tables (a digest holds no events).
  const job = await rankscope.open([{ name: 'job.rsdigest', data: new Uint8Array(fs.readFileSync(digest)) }]);
  try {
    assert.deepEqual(job.ranks().map((r) => [r.rank, r.file, r.lanes.length]), files.map((f, i) => [i, f, 0]));
    assert.deepEqual(job.search('allreduce'), [], 'nothing to search');
  } finally {
    job.close();
  }
  // Options do not change it; the note says so, as the CLI's stderr does.
  const withOffset = await sameAsCli([digest], [digest, '--offset', '1=5'], { offsets: { 1: 5 } });
  assert.deepStrictEqual(withOffset.report, report);
  const note = withOffset.notes.find((n) => n.startsWith('the job digest holds the analysis'));
  assert.ok(note && withOffset.cliStderr.includes(note), `notes: ${withOffset.notes}\ncli: ${withOffset.cliStderr}`);
  // With another input it is refused, with the CLI's reason.
  await assert.rejects(rankscope.analyze([digest, files[0]]), /job\.rsdigest: a job digest is a whole job/);
});
