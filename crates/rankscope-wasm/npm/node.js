// rankscope for Node (>= 20): the .wasm is read from disk, and a path string is an input: a
// file is read with fs.createReadStream in CHUNK_BYTES pieces; a directory is walked as
// `rankscope analyze DIR` walks it (rankscope-host's `expand`), so the report names the same
// files in the same order and is the CLI's byte for byte:
// - every regular file below it whose name the core takes from a folder (`.json`, `.json.gz`,
//   `.log`, `.txt`, `.out`, any case) or that is a Flight Recorder dump by content;
// - sorted by path component (as Rust's `PathBuf` orders), each real directory visited once,
//   each real file taken once however many links lead to it, special files skipped with a note;
// - the name of a file is the directory as given joined with `/` and the entry (as Rust's
//   `Path::join`), never normalized.
// Found files that are not ours are skipped with a note; a file named explicitly that is not
// ours is failed (listed in `job.failed`).

import { createReadStream } from 'node:fs';
import { open as openFile, readFile, readdir, realpath, stat } from 'node:fs/promises';
import { CHUNK_BYTES, rules, setPlatform } from './core.js';

export { analyze, diff, runs, open, ready, Job, CHUNK_BYTES, TABLE_NAMES } from './core.js';

const join = (dir, name) => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);

/** Rust's `Path` order: component by component, each compared as bytes. */
function components(p) {
  return p.split('/').filter((c, i) => c !== '' && !(c === '.' && i > 0)).map((c) => Buffer.from(c));
}

function pathOrder(a, b) {
  const x = components(a);
  const y = components(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const c = Buffer.compare(x[i], y[i]);
    if (c !== 0) return c;
  }
  return x.length - y.length;
}

async function head(path) {
  const n = rules.sniffBytes();
  let f;
  try {
    f = await openFile(path, 'r');
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      const { bytesRead } = await f.read(buf, got, n - got, null);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got);
  } catch {
    return Buffer.alloc(0);
  } finally {
    await f?.close();
  }
}

async function walk(dir, out, dirs, seen, notes) {
  const real = await realpath(dir);
  if (dirs.has(real)) return;
  dirs.add(real);
  const entries = (await readdir(dir)).map((n) => join(dir, n)).sort(pathOrder);
  for (const path of entries) {
    let meta;
    try {
      meta = await stat(path); // follows links; a dangling one is skipped
    } catch {
      continue;
    }
    if (meta.isDirectory()) {
      await walk(path, out, dirs, seen, notes);
      continue;
    }
    const name = path.slice(path.lastIndexOf('/') + 1);
    const candidate = rules.isFolderCandidate(name);
    if (!meta.isFile()) {
      if (candidate) notes.push(`skipped ${path} (not a regular file)`);
      continue;
    }
    // Flight Recorder dumps carry any name (`fr_rank0`, `*.pkl`): asked by content.
    if (!candidate && rules.detectKind(await head(path)) !== 'flight_recorder') continue;
    const r = await realpath(path).catch(() => path);
    if (!seen.has(r)) {
      seen.add(r);
      out.push({ path, size: meta.size });
    }
  }
}

function fileSource(path, name, size, walked) {
  return {
    name,
    walked,
    size,
    chunks: () => createReadStream(path, { highWaterMark: CHUNK_BYTES })[Symbol.asyncIterator](),
  };
}

// `ctx` is one call of analyze/open: its path inputs share one walk (as the CLI's one `expand`).
async function paths(path, name, ctx) {
  ctx.dirs ??= new Set();
  ctx.seen ??= new Set();
  let meta;
  try {
    meta = await stat(path);
  } catch (e) {
    return [failing(name, `${name}: cannot read: ${e.message}`)];
  }
  if (meta.isDirectory()) {
    const found = [];
    await walk(path, found, ctx.dirs, ctx.seen, ctx.notes);
    found.sort((a, b) => pathOrder(a.path, b.path));
    return found.map((f) => fileSource(f.path, f.path, f.size, true));
  }
  const r = await realpath(path).catch(() => null);
  if (r) ctx.seen.add(r);
  return [fileSource(path, name, meta.size, false)];
}

/** A source whose reading fails at once: it is listed in `failed`, the job goes on. */
function failing(name, message) {
  return {
    name,
    walked: false,
    size: null,
    chunks: async function* () {
      throw Object.assign(new Error(message), { whole: true });
    },
  };
}

setPlatform({
  wasm: () => readFile(new URL('./rankscope_wasm_bg.wasm', import.meta.url)),
  paths,
});
