// End-to-end: the export menu's "Tables (Parquet)" and "Tables (Arrow)" (docs/columnar.md, "In
// the app"): one tar per click, built in the tab, the events written rank by rank by the
// workers holding them, the collectives measured again from the ranks' parts. Every member is byte for byte the file `rankscope export` writes for
// the same traces (so it parses as the CLI's does: magic bytes at both ends, and the row counts
// the CLI prints, checked against `analyze --json`); a job digest gives the analysis' tables
// and says why there is no events table. With "redact names" and a key (docs/redaction.md), no
// planted name is left in any member, `redaction.json` is the CLI's, and every token is one `rankscope export --redact-key`
// gives. Screenshots in target/e2e-screenshots/ (96, 96b).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, ROOT, SHARED, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';
import { MARK, plantNames } from '../planted.mjs';

let server, origin, context, profile, dir;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests, acceptDownloads: true }));
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-tables-'));
});

after(async () => {
  await stopBrowser({ server, context, profile });
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download', { timeout: 120_000 }), page.click(selector)]);
  return { name: d.suggestedFilename(), bytes: fs.readFileSync(await d.path()) };
}

/** The members of a ustar archive: name → bytes. */
function untar(b) {
  const out = {};
  for (let at = 0; at + 512 <= b.length; ) {
    const h = b.subarray(at, at + 512);
    if (h.every((x) => x === 0)) break;
    const name = h.subarray(0, 100).toString().replace(/\0.*$/s, '');
    const size = parseInt(h.subarray(124, 136).toString().replace(/\0.*$/s, ''), 8);
    assert.equal(h.subarray(257, 262).toString(), 'ustar');
    out[name] = b.subarray(at + 512, at + 512 + size);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

/** `rankscope export` of `files` (run in `cwd`, so the names are the page's) in `format`: {name: bytes}, and its printed rows. */
function cliExport(cwd, files, format, tag) {
  const out = path.join(dir, tag);
  const stdout = execFileSync(BIN, ['export', ...files, '--format', format, '--out', out], { cwd, maxBuffer: 1 << 28 }).toString();
  const rows = Object.fromEntries(stdout.trim().split('\n').map((l) => {
    const [p, n] = l.split('\t');
    return [path.basename(p), Number(n.replace(' rows', ''))];
  }));
  const bytes = Object.fromEntries(fs.readdirSync(out).map((f) => [f, fs.readFileSync(path.join(out, f))]));
  return { bytes, rows };
}

function analyzeJson(cwd, files) {
  return JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { cwd, maxBuffer: 1 << 28 }).toString());
}

test('a zoo job\'s tables, Parquet and Arrow, are the CLI\'s files, the events written by the workers', async () => {
  const zoo = path.join(ROOT, 'tests/zoo/fsdp_straggler');
  const names = fs.readdirSync(zoo).filter((f) => f.endsWith('.json.gz')).sort();
  const { page } = await openFiles(context, origin, names.map((f) => path.join(zoo, f)), pageErrors);
  const a = analyzeJson(zoo, names);
  const stepRows = a.steps.reduce((n, s) => n + s.per_rank.length, 0);
  for (const [format, magic] of [['parquet', ['PAR1', 'PAR1']], ['arrow', ['ARROW1\0\0', 'ARROW1']]]) {
    const got = await download(page, `[data-testid=export-${format}]`);
    assert.equal(got.name, `rankscope-tables-${format}.tar`);
    const members = untar(got.bytes);
    const want = cliExport(zoo, names, format, `zoo-${format}`);
    // Every table, `collectives` too (measured again from the parts the tab holds).
    assert.deepEqual(Object.keys(members).sort(), Object.keys(want.bytes).sort());
    assert.ok(want.rows[`collectives.${format}`] > 0, 'the job has matched collectives');
    for (const [name, bytes] of Object.entries(members)) {
      assert.ok(Buffer.from(bytes).equals(want.bytes[name]), `${name} is the CLI's byte for byte`);
      assert.equal(bytes.subarray(0, magic[0].length).toString('latin1'), magic[0], `${name} opens with its magic`);
      assert.equal(bytes.subarray(bytes.length - magic[1].length).toString('latin1'), magic[1], `${name} ends with its magic`);
    }
    assert.equal(want.rows[`steps.${format}`], stepRows, 'the steps rows are the analysis\' rank × step cells');
    assert.ok(want.rows[`events.${format}`] > 1000, 'every rank\'s events');
    assert.match(await page.textContent('[data-testid=export-status]'), new RegExp(`saved rankscope-tables-${format}\\.tar`));
  }
  await page.locator('[data-testid=exports]').scrollIntoViewIfNeeded();
  await shot(page, '96-tables-export');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('a job digest: the analysis\' tables, and the reason there is no events table', async () => {
  const src = path.join(SHARED, 'traces', 'param-dlrm-8rank');
  const files = fs.readdirSync(src).filter((f) => f.endsWith('.json')).sort();
  const parts = files.map((f, i) => {
    const p = path.join(dir, `${i}.part`);
    execFileSync(BIN, ['part', f, '-o', p], { cwd: src });
    return p;
  });
  const digest = path.join(dir, 'job.rsdigest');
  execFileSync(BIN, ['combine', '--json', '--digest', digest, ...parts], { stdio: ['ignore', 'ignore', 'inherit'] });
  const { page } = await openFiles(context, origin, [digest], pageErrors);
  const button = page.locator('[data-testid=export-parquet]');
  assert.ok(!(await button.isDisabled()), 'the analysis\' tables still export');
  assert.match(await button.getAttribute('title'), /No events table: job\.rsdigest is a job digest: it holds every rank's figures but no events/);
  const got = await download(page, '[data-testid=export-parquet]');
  const members = untar(got.bytes);
  const want = cliExport(dir, ['job.rsdigest'], 'parquet', 'digest');
  assert.deepEqual(Object.keys(members).sort(), ['collective_stats.parquet', 'findings.parquet', 'groups.parquet', 'operators.parquet', 'steps.parquet']);
  for (const [name, bytes] of Object.entries(members)) {
    assert.ok(Buffer.from(bytes).equals(want.bytes[name]), `${name} is the CLI's byte for byte`);
  }
  await page.close();
  assert.deepEqual(pageErrors, []);
});

/** DLRM's eight ranks with markers planted (`tests/planted.mjs`). */
const planted = () => plantNames(path.join(SHARED, 'traces', 'param-dlrm-8rank'), path.join(dir, 'planted'));

const TOKEN = /(?:name|frame|path|file|host|ip|arg)-[0-9a-f]{12}/g; // no word bounds: Arrow and Parquet write strings back to back
const tokensOf = (b) => new Set(Buffer.from(b).toString('latin1').match(TOKEN) ?? []);

test('redact names: a key typed, every member holds no planted name and only the CLI\'s tokens for that key', async () => {
  const src = planted();
  const names = fs.readdirSync(src).sort();
  const { page } = await openFiles(context, origin, names.map((f) => path.join(src, f)), pageErrors, 300_000);
  // The plain tar names them (so the check below can fail).
  const plain = untar((await download(page, '[data-testid=export-parquet]')).bytes);
  assert.ok(Object.values(plain).some((b) => Buffer.from(b).includes(MARK)), 'the plain tables hold the markers');
  await page.check('[data-testid=export-redact]');
  await page.fill('[data-testid=export-redact-key]', 'shared secret');
  const got = await download(page, '[data-testid=export-parquet]');
  const members = untar(got.bytes);
  const out = path.join(dir, 'redacted-cli');
  execFileSync(BIN, ['export', ...names, '--format', 'parquet', '--out', out, '--redact-key', 'shared secret'], { cwd: src, stdio: ['ignore', 'ignore', 'ignore'] });
  const want = Object.fromEntries(fs.readdirSync(out).filter((f) => f.endsWith('.parquet')).map((f) => [f, fs.readFileSync(path.join(out, f))]));
  // What was kept, hashed and removed: the tab's and every worker's redactions together are the
  // CLI's one redactor's statement for the same key.
  const statement = JSON.parse(Buffer.from(members['redaction.json'] ?? []).toString('utf8') || 'null');
  delete members['redaction.json'];
  assert.deepEqual(statement, JSON.parse(fs.readFileSync(path.join(out, 'redaction.json'), 'utf8')), 'the tar\'s redaction.json is the CLI\'s');
  assert.ok(Object.values(statement.hashed).reduce((a, b) => a + b, 0) > 0, 'it says what was hashed');
  assert.deepEqual(Object.keys(members).sort(), Object.keys(want).sort(), 'the same tables as the CLI\'s redacted export');
  let same = 0;
  for (const [name, bytes] of Object.entries(members)) {
    assert.ok(!Buffer.from(bytes).includes(MARK), `${name}: no planted name left`);
    const [mine, cli] = [tokensOf(bytes), tokensOf(want[name])];
    assert.ok([...mine].every((t) => cli.has(t)), `${name}: its tokens are the CLI's for the key (${[...mine].filter((t) => !cli.has(t))})`);
    if (Buffer.from(bytes).equals(want[name])) same += 1;
  }
  assert.ok(tokensOf(members['events.parquet']).size > 0, 'the events carry tokens');
  console.log(`redacted tar: ${same} of ${Object.keys(members).length} members byte for byte the CLI's`);
  await page.locator('[data-testid=exports]').scrollIntoViewIfNeeded();
  await shot(page, '96b-tables-export-redacted');
  // Without a key: a key drawn for the export, not the phrase's.
  await page.fill('[data-testid=export-redact-key]', '');
  const drawn = untar((await download(page, '[data-testid=export-arrow]')).bytes);
  assert.equal(JSON.parse(Buffer.from(drawn['redaction.json']).toString('utf8')).key, 'per_run', 'a drawn key is said to be one');
  assert.equal(plain['redaction.json'], undefined, 'a plain tar has no statement');
  assert.ok(Object.values(drawn).every((b) => !Buffer.from(b).includes(MARK)), 'no planted name under a drawn key');
  const keyed = tokensOf(members['events.parquet']);
  assert.ok([...tokensOf(drawn['events.arrow'])].every((t) => !keyed.has(t)), 'a drawn key gives other tokens');
  await page.close();
  assert.deepEqual(pageErrors, []);
});
