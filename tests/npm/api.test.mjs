// The npm package's API: every kind of input gives the same report, the kept tables answer the
// timeline's questions, bad input is listed and never throws the job away, and the browser
// entry works from bytes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { test } from 'node:test';
import { PKG, cli, filesOf, manifest, rankscope, trace } from './harness.mjs';

const gloo = filesOf(trace('ddp-gloo-cpu-4rank'));

/** A ReadableStream giving `bytes` in pieces of `n`. */
function streamOf(bytes, n) {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + n));
      at += n;
    },
  });
}

test('docs/npm.md says how big the wasm is, raw and gzipped, as built', () => {
  const said = fs.readFileSync(path.join(PKG, '../../docs/npm.md'), 'utf8').match(/The wasm is ([0-9.]+) MB \(([0-9.]+) MB\s+gzipped\)/);
  assert.ok(said, 'docs/npm.md says the size of the wasm');
  const wasm = fs.readFileSync(path.join(PKG, 'rankscope_wasm_bg.wasm'));
  const raw = wasm.length / 1e6;
  const gz = zlib.gzipSync(wasm, { level: 9 }).length / 1e6;
  assert.ok(Math.abs(raw - Number(said[1])) <= 0.1 * raw, `docs say ${said[1]} MB; the wasm is ${raw.toFixed(2)} MB`);
  assert.ok(Math.abs(gz - Number(said[2])) <= 0.1 * gz, `docs say ${said[2]} MB gzipped; it is ${gz.toFixed(2)} MB`);
});

test('the package: name, version, ESM, exports and declarations', () => {
  assert.equal(manifest.name, 'rankscope');
  assert.equal(manifest.type, 'module');
  assert.match(manifest.version, /^\d+\.\d+\.\d+/);
  const cargo = fs.readFileSync(path.join(PKG, '../../Cargo.toml'), 'utf8');
  assert.ok(cargo.includes(`version = "${manifest.version}"`), 'the version is the workspace version');
  assert.equal(manifest.types, './index.d.ts');
  for (const f of manifest.files) assert.ok(fs.existsSync(path.join(PKG, f)), `${f} is listed but not built`);
  const dts = fs.readFileSync(path.join(PKG, 'index.d.ts'), 'utf8');
  for (const want of ['export function analyze(', 'export function open(', 'tiles(rank: number', "from './rankscope_wasm.js'"]) {
    assert.ok(dts.includes(want), `index.d.ts lacks ${want}`);
  }
  const bindgen = fs.readFileSync(path.join(PKG, 'rankscope_wasm.d.ts'), 'utf8');
  for (const t of ['RankSummary', 'Tile', 'Found', 'EventDetail', 'InputKind', 'LaneSummary', 'TileKey', 'Hit']) {
    assert.ok(new RegExp(`export (interface|type) ${t}\\b`).test(bindgen), `rankscope_wasm.d.ts lacks ${t}`);
  }
  assert.ok(fs.readFileSync(path.join(PKG, 'README.md'), 'utf8').includes("import { analyze, open } from 'rankscope'"));
});

test('Uint8Array, ArrayBuffer, Blob, File, ReadableStream, a Node stream and a path give the same report', async () => {
  const ref = JSON.parse(cli(...gloo).json);
  const bytes = gloo.map((f) => new Uint8Array(fs.readFileSync(f)));
  const kinds = {
    'Uint8Array': gloo.map((name, i) => ({ name, data: bytes[i] })),
    'ArrayBuffer': gloo.map((name, i) => ({ name, data: bytes[i].slice().buffer })),
    'Blob': gloo.map((name, i) => ({ name, data: new Blob([bytes[i]]) })),
    'File': gloo.map((name, i) => new File([bytes[i]], name)),
    'ReadableStream (1 KiB pieces)': gloo.map((name, i) => ({ name, data: streamOf(bytes[i], 1013) })),
    'ReadableStream (7-byte pieces)': gloo.map((name, i) => ({ name, data: streamOf(bytes[i], 7) })),
    'Node Readable': gloo.map((name) => ({ name, data: fs.createReadStream(name, { highWaterMark: 4096 }) })),
    'path': gloo,
  };
  for (const [kind, inputs] of Object.entries(kinds)) {
    assert.deepStrictEqual(await rankscope.analyze(inputs), ref, kind);
  }
  // Mixed in one job, in one order.
  const mixed = [gloo[0], { name: gloo[1], data: bytes[1] }, new File([bytes[2]], gloo[2]), { name: gloo[3], data: streamOf(bytes[3], 65536) }];
  assert.deepStrictEqual(await rankscope.analyze(mixed), ref, 'mixed');
  // Unnamed inputs are named by position, the same for every kind.
  const a = await rankscope.analyze(bytes);
  const b = await rankscope.analyze(bytes.map((x) => new Blob([x])));
  const c = await rankscope.analyze(bytes.map((x) => streamOf(x, 50000)));
  assert.deepStrictEqual(a, b);
  assert.deepStrictEqual(a, c);
  assert.deepEqual(a.ranks.map((r) => r.source), ['input0', 'input1', 'input2', 'input3']);
});

test('progress is reported per input, ending with done', async () => {
  const seen = [];
  await rankscope.analyze(gloo, { onProgress: (p) => seen.push(p) });
  const done = seen.filter((p) => p.done);
  assert.deepEqual(done.map((p) => p.file), gloo);
  for (const p of done) {
    assert.equal(p.bytes, fs.statSync(p.file).size);
    assert.equal(p.size, p.bytes);
    assert.equal(p.kind, 'trace');
    assert.ok(p.events > 0);
    assert.equal(p.files, 4);
  }
});

test('open keeps the tables: ranks, lanes, tiles, search, pick', async () => {
  const dir = trace('param-dlrm-8rank');
  const job = await rankscope.open([dir]);
  try {
    const ranks = job.ranks();
    assert.deepEqual(ranks.map((r) => r.rank).sort(), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(ranks.map((r) => r.file), filesOf(dir).map((f) => f), 'load order, named as given');
    const rep = job.report();
    assert.deepEqual(rep.ranks.map((r) => [r.rank, r.source]), [...ranks].sort((x, y) => x.rank - y.rank).map((r) => [r.rank, r.file]));
    const r3 = ranks.find((r) => r.rank === 3);
    const gpu = job.lanes(3).find((l) => l.gpu);
    assert.ok(gpu, 'rank 3 has a GPU lane');
    assert.equal(typeof r3.span_start_ns, 'bigint');
    const tiles = job.tiles(3, gpu.lane, r3.span_start_ns, r3.span_end_ns, 1200);
    assert.ok(tiles.length >= 1 && tiles.length <= 1200 / 128 + 2, `${tiles.length} tiles`);
    const boxes = tiles.reduce((n, t) => n + t.depth.length, 0);
    assert.ok(boxes > 0 && boxes <= tiles.length * 2 * 256 * Math.max(1, gpu.depth), `${boxes} boxes`);
    // A tile asked by key is the same tile.
    const k = tiles[0].key;
    assert.deepStrictEqual(job.tile(3, k.lane, k.level, k.index), tiles[0]);
    // The first single-event box can be picked.
    const t = tiles.find((x) => x.event.some((e) => e !== 0xffffffff));
    const i = t.event.findIndex((e) => e !== 0xffffffff);
    const d = job.pick(3, gpu.lane, t.depth[i], t.start_ns[i]);
    assert.ok(d && d.name.length > 0, 'pick finds the event drawn there');
    assert.equal(d.gpu, true);
    assert.equal(job.pick(3, gpu.lane, 0, 1n), undefined, 'nothing at time 1 ns');
    // Search, one rank and every rank.
    const one = job.search('nccl', { rank: 3, limit: 5 });
    assert.ok(one.total > 5n && one.hits.length === 5);
    const all = job.search('ncclKernel');
    assert.equal(all.length, 8);
    assert.ok(all.every((x) => x.total >= 8n), 'every DLRM rank ran 8 NCCL kernels');
    assert.match(job.markdown(), /^# rankscope analysis/);
    assert.match(job.csv(), /^step,rank,source,/);
    assert.equal(job.fabric(), null);
    assert.throws(() => job.lanes(9), /no rank 9/);
    assert.throws(() => job.tiles(9, 0, 0, 10, 10), /no rank 9/);
    assert.throws(() => job.tiles(-1, 0, 0, 10, 10), /not a rank number/);
  } finally {
    job.close();
  }
  assert.throws(() => job.report(), /closed/);
});

test('bad input is listed with its name and byte offset, never thrown, never a panic', async () => {
  const good = gloo.slice(0, 2);
  const head = fs.readFileSync(gloo[2]).subarray(0, 1000); // a gzip stream cut short
  const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
  const failing = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode('{"traceEvents": ['));
      c.error(new Error('connection reset'));
    },
  });
  const notes = [];
  const job = await rankscope.open([...good, { name: 'cut.json.gz', data: head }, { name: 'picture.png', data: png },
    { name: 'reset.json', data: failing }, '/nonexistent/rank7.json']);
  try {
    assert.equal(job.ranks().length >= 2, true);
    const failed = Object.fromEntries(job.failed.map((f) => [f.file, f.error]));
    assert.match(failed['picture.png'], /^picture\.png: not a trace file \(at byte \d+\)/);
    assert.match(failed['reset.json'], /^reset\.json: read error: connection reset/);
    assert.match(failed['/nonexistent/rank7.json'], /^\/nonexistent\/rank7\.json: cannot read: ENOENT/);
    assert.equal(job.clean, false);
    // The truncated trace is a rank with a data-loss diagnostic, as the CLI reads it.
    const cut = job.ranks().find((r) => r.file === 'cut.json.gz');
    const show = (x) => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? `${v}` : v));
    if (cut) assert.ok(cut.diagnostics.some((d) => d.severity !== 'info'), show(cut.diagnostics));
    else assert.ok(failed['cut.json.gz'], 'the cut file is a rank or a failure');
  } finally {
    job.close();
  }
  await rankscope.analyze([gloo[0], { name: 'picture.png', data: png }], { onNote: (m) => notes.push(m) });
  assert.ok(notes.some((m) => m.startsWith('picture.png: not a trace file')), `${notes}`);
});

test('what rejects: bad options, an explicit rank naming no input, nothing readable', async () => {
  await assert.rejects(rankscope.analyze(gloo, { thresholds: { no_such: 1 } }), /unknown threshold `no_such`/);
  await assert.rejects(rankscope.analyze(gloo, { thresholds: { step_jitter: Infinity } }), /finite/);
  await assert.rejects(rankscope.analyze(gloo, { offsets: { 1: 1.5 } }), /not a whole number of ns/);
  await assert.rejects(rankscope.analyze(gloo, { ranks: { 'rank0.json': -1 } }), /not a rank number/);
  await assert.rejects(rankscope.analyze(gloo, { ranks: { 'nothere.json': 1 } }), /no input is called `nothere.json`/);
  await assert.rejects(rankscope.analyze(gloo, { rules: '{"rules": 3}' }), /rule file is not valid/);
  await assert.rejects(rankscope.analyze([{ name: 'notes.txt', data: new TextEncoder().encode('hello') }]),
    /no input could be read as a trace or a Flight Recorder dump \(notes\.txt: not a trace file \(at byte/);
  await assert.rejects(rankscope.analyze([42]), TypeError);
  await assert.rejects(rankscope.analyze([{ name: 'x', data: 42 }]), /data must be/);
});

test('the browser entry (index.js) loads the wasm from given bytes and gives the same report', () => {
  // A fresh process, so that nothing the Node entry loaded is reused.
  const script = `
    import { readFileSync } from 'node:fs';
    const m = await import(${JSON.stringify(new URL(`file://${PKG}/${manifest.exports['.'].default}`).href)});
    await m.ready(readFileSync(${JSON.stringify(path.join(PKG, 'rankscope_wasm_bg.wasm'))}));
    const files = ${JSON.stringify(gloo)};
    const inputs = files.map((f) => new File([readFileSync(f)], f));
    process.stdout.write(JSON.stringify(await m.analyze(inputs)));
    await m.analyze(['x.json']).catch((e) => process.stderr.write(e.message));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  assert.deepStrictEqual(JSON.parse(r.stdout), JSON.parse(cli(...gloo).json));
  assert.match(r.stderr, /a path string can only be read in Node/);
});
