// What the npm package tests share: the BUILT package in target/npm (loaded through its
// package.json's "node" export, as `import 'rankscope'` would in Node), the release CLI whose
// output is the reference, and the real data under ../shared. Anything missing fails the
// tests at load time: they never skip.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SHARED = process.env.RANKSCOPE_SHARED ?? path.join(ROOT, '../shared');
export const BIN = process.env.RANKSCOPE_BIN ?? path.join(ROOT, 'target/release/rankscope');
export const PKG = process.env.RANKSCOPE_NPM ?? path.join(ROOT, 'target/npm');

assert.ok(fs.existsSync(path.join(PKG, 'package.json')), `${PKG}/package.json is missing: build the package with ./x npm`);
assert.ok(fs.existsSync(BIN), `${BIN} is missing: cargo build --release -p rankscope-cli`);
assert.ok(fs.existsSync(path.join(SHARED, 'traces')), `${SHARED}/traces is missing: the tests read ../shared`);

export const manifest = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
/** The package as Node resolves `import 'rankscope'` (the "node" condition of its exports). */
export const rankscope = await import(pathToFileURL(path.join(PKG, manifest.exports['.'].node)).href);

export const trace = (...p) => path.join(SHARED, 'traces', ...p);

/** The files of a folder, sorted, as full paths. */
export const filesOf = (dir, keep = () => true) =>
  fs.readdirSync(dir).filter(keep).sort().map((f) => path.join(dir, f));

/**
 * `rankscope analyze --json ARGS...`: its stdout (the reference bytes), exit status and
 * stderr. Exit 0 or 1 (a file not read) both print the JSON.
 */
export function cli(...args) {
  const r = spawnSync(BIN, ['analyze', '--json', ...args], { encoding: 'utf8', maxBuffer: 1 << 30 });
  assert.ok(r.status === 0 || r.status === 1, `rankscope analyze ${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
  assert.ok(r.stdout.startsWith('{'), `rankscope analyze printed no JSON:\n${r.stderr}`);
  return { json: r.stdout, status: r.status, stderr: r.stderr };
}

/** Runs another rankscope subcommand (synth). */
export function run(...args) {
  const r = spawnSync(BIN, args, { encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, `rankscope ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** A fresh temporary directory, removed when the process exits. */
export function tmpdir(tag) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `rankscope-npm-${tag}-`));
  process.on('exit', () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

/**
 * The package's answer for `inputs` equals the CLI's for `cliArgs`: the JSON text byte for
 * byte (`open` → `job.json()`), and the parsed objects deeply (`analyze`). Returns the job's
 * notes, failures and the report.
 */
export async function sameAsCli(inputs, cliArgs, opts = {}) {
  const ref = cli(...cliArgs);
  const job = await rankscope.open(inputs, opts);
  try {
    const text = job.json();
    if (text !== ref.json) {
      // Say where they part before failing on the whole text.
      let i = 0;
      while (i < text.length && text[i] === ref.json[i]) i++;
      assert.fail(`the package's JSON differs from the CLI's at char ${i}:\n package: ${text.slice(Math.max(0, i - 200), i + 200)}\n cli:     ${ref.json.slice(Math.max(0, i - 200), i + 200)}`);
    }
    const report = await rankscope.analyze(inputs, opts);
    assert.deepStrictEqual(report, JSON.parse(ref.json));
    assert.equal(job.clean, ref.status === 0, `clean ${job.clean} but the CLI exited ${ref.status}`);
    return { report, notes: job.notes, failed: job.failed, clean: job.clean, cliStderr: ref.stderr };
  } finally {
    job.close();
  }
}
