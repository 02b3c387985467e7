// Columnar export from the npm package (docs/columnar.md, "From npm"): `job.exportTable(name,
// format)` gives the bytes `rankscope export --format FORMAT` writes for the same inputs, for
// every table and both formats, and refuses what a job digest cannot give.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, filesOf, rankscope, run, tmpdir, trace } from './harness.mjs';
import { MARK, plantNames } from '../planted.mjs';

/** `rankscope export INPUTS --format F --out DIR`: each file's bytes by table name. */
function cliExport(inputs, format, tag) {
  const out = tmpdir(`export-${tag}`);
  run('export', ...inputs, '--format', format, '--out', out);
  return Object.fromEntries(
    fs.readdirSync(out).map((f) => [f.replace(/\.(parquet|arrow)$/, ''), new Uint8Array(fs.readFileSync(path.join(out, f)))]),
  );
}

function sameBytes(got, want, what) {
  assert.ok(got instanceof Uint8Array, `${what}: a Uint8Array`);
  if (Buffer.compare(Buffer.from(got), Buffer.from(want)) !== 0) {
    let i = 0;
    while (i < got.length && got[i] === want[i]) i++;
    assert.fail(`${what}: ${got.length} bytes vs the CLI's ${want.length}, first difference at byte ${i}`);
  }
}

test('every table in both formats is the CLI export byte for byte (a zoo job, three ranks)', async () => {
  const dir = path.join(ROOT, 'tests/zoo/fsdp_straggler');
  assert.deepEqual([...rankscope.TABLE_NAMES], ['steps', 'collectives', 'collective_stats', 'groups', 'findings', 'operators', 'events']);
  const job = await rankscope.open([dir]);
  try {
    for (const format of ['parquet', 'arrow']) {
      const want = cliExport([dir], format, `zoo-${format}`);
      assert.deepEqual(Object.keys(want).sort(), [...rankscope.TABLE_NAMES].sort());
      for (const name of rankscope.TABLE_NAMES) {
        const got = job.exportTable(name, format);
        sameBytes(got, want[name], `${name}.${format}`);
        const magic = format === 'parquet' ? 'PAR1' : 'ARROW1';
        assert.equal(Buffer.from(got.subarray(0, magic.length)).toString(), magic);
        assert.equal(Buffer.from(got.subarray(got.length - magic.length)).toString(), magic);
      }
    }
    assert.throws(() => job.exportTable('nope', 'parquet'), /name: expected one of steps/);
    assert.throws(() => job.exportTable('steps', 'csv'), /format: expected parquet or arrow/);
  } finally {
    job.close();
  }
});

test('DLRM (8 ranks, a folder): the events and collectives pieces join as the CLI writes them', async () => {
  const dir = trace('param-dlrm-8rank');
  const job = await rankscope.open([dir]);
  try {
    const want = cliExport([dir], 'parquet', 'dlrm');
    for (const name of ['events', 'collectives', 'steps']) sameBytes(job.exportTable(name, 'parquet'), want[name], name);
  } finally {
    job.close();
  }
});

test('a job digest gives the analysis tables, and says why not the events', async () => {
  const dir = tmpdir('export-digest');
  const files = filesOf(trace('ddp-gloo-cpu-4rank'));
  const parts = files.map((f, i) => {
    const p = path.join(dir, `${i}.part`);
    run('part', f, '-o', p);
    return p;
  });
  const digest = path.join(dir, 'job.rsdigest');
  run('combine', '--json', '--digest', digest, ...parts);
  const want = cliExport([digest], 'arrow', 'digest');
  assert.deepEqual(Object.keys(want).sort(), ['collective_stats', 'findings', 'groups', 'operators', 'steps']);
  const job = await rankscope.open([digest]);
  try {
    for (const name of Object.keys(want)) sameBytes(job.exportTable(name, 'arrow'), want[name], `digest ${name}`);
    for (const name of ['events', 'collectives']) {
      assert.throws(() => job.exportTable(name, 'arrow'), /a job digest holds no events/);
    }
  } finally {
    job.close();
  }
});

/** DLRM's eight ranks with markers planted, an arg's key and value too (`tests/planted.mjs`), under
 * folder names that hold them. */
const planted = () =>
  plantNames(trace('param-dlrm-8rank'), path.join(tmpdir('export-redact'), 'ZQXalice', 'ZQXhost-node17-run'), { arg: true });

const has = (bytes, s) => Buffer.from(bytes).includes(Buffer.from(s));

test('redacted tables: { redactKey } is `rankscope export --redact-key` byte for byte; no planted name is left', async () => {
  const dir = planted();
  const out = tmpdir('export-redact-cli');
  run('export', dir, '--format', 'parquet', '--out', out, '--redact-key', 'shared secret');
  const want = Object.fromEntries(
    fs.readdirSync(out).filter((f) => f.endsWith('.parquet')).map((f) => [f.replace(/\.parquet$/, ''), new Uint8Array(fs.readFileSync(path.join(out, f)))]),
  );
  assert.deepEqual(Object.keys(want).sort(), [...rankscope.TABLE_NAMES].sort());
  const job = await rankscope.open([dir]);
  try {
    // The plain export holds the markers (so the checks below can fail).
    assert.ok(has(job.exportTable('events', 'parquet'), MARK), 'the plain events table holds the markers');
    for (const name of rankscope.TABLE_NAMES) {
      const got = job.exportTable(name, 'parquet', { redactKey: 'shared secret' });
      sameBytes(got, want[name], `redacted ${name}.parquet`);
      assert.ok(!has(got, MARK), `redacted ${name}: no marker left`);
    }
    // `redact: true` alone: a key drawn once for the job (the same tokens on every call), not
    // the phrase's.
    const a = job.exportTable('events', 'arrow', { redact: true });
    assert.ok(!has(a, MARK), 'redact: true leaves no marker');
    sameBytes(job.exportTable('events', 'arrow', { redact: true }), a, 'events under the job\'s drawn key, again');
    const tokens = (t) => new Set(Buffer.from(t).toString('latin1').match(/name-[0-9a-f]{12}/g) ?? []);
    const drawn = tokens(a);
    const keyed = tokens(job.exportTable('events', 'arrow', { redactKey: 'shared secret' }));
    assert.ok(drawn.size > 0 && keyed.size === drawn.size, `as many tokens under either key (${drawn.size}, ${keyed.size})`);
    assert.ok([...drawn].every((t) => !keyed.has(t)), 'a drawn key is not the phrase\'s');
    assert.throws(() => job.exportTable('steps', 'arrow', { redact: 'yes' }), /redact: expected a boolean/);
    assert.throws(() => job.exportTable('steps', 'arrow', { redactKey: '' }), /redactKey: expected a non-empty string/);
    // What was kept, hashed and removed: the CLI's redaction.json for the same key, and under
    // the job's drawn key the same counts, said as per_run.
    const statement = JSON.parse(fs.readFileSync(path.join(out, 'redaction.json'), 'utf8'));
    assert.equal(statement.key, 'given');
    assert.ok(statement.hashed.name > 0 && statement.kept_names > 0, JSON.stringify(statement));
    assert.deepEqual(job.redactionStatement({ redactKey: 'shared secret' }), statement);
    assert.deepEqual(job.redactionStatement({ redact: true }), { ...statement, key: 'per_run' });
    assert.throws(() => job.redactionStatement({ redact: false }), /nothing is redacted/);
  } finally {
    job.close();
  }
});
