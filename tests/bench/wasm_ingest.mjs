// Ingest speed of the core compiled to wasm, run by Node (the same wasm the app's workers run),
// through the JS API's one job path (`JobInput` fed in chunks, then `Job.add` normalizes and
// analyses it).
// Usage:
//   cargo build --release --target wasm32-unknown-unknown -p rankscope-wasm
//   wasm-bindgen --target nodejs --out-dir target/wasm-node target/wasm32-unknown-unknown/release/rankscope_wasm.wasm
//   node tests/bench/wasm_ingest.mjs target/wasm-node FILE [CHUNK_MIB]
import { createRequire } from 'node:module';
import { openSync, readSync, fstatSync, closeSync } from 'node:fs';
import { resolve } from 'node:path';

const [dir, file, chunkArg] = process.argv.slice(2);
if (!dir || !file) {
  console.error('usage: node tests/bench/wasm_ingest.mjs WASM_NODE_DIR FILE [CHUNK_MIB]');
  process.exit(2);
}
const require = createRequire(import.meta.url);
const wasm = require(resolve(dir, 'rankscope_wasm.js'));
const chunk = (Number(chunkArg) || 4) << 20;
const fd = openSync(file, 'r');
const size = fstatSync(fd).size;
const buf = Buffer.alloc(chunk);
const t0 = performance.now();
const ing = new wasm.JobInput(file);
let read = 0;
for (;;) {
  const n = readSync(fd, buf, 0, chunk, null);
  if (n === 0) break;
  ing.feed(buf.subarray(0, n));
  read += n;
}
closeSync(fd);
const t1 = performance.now();
const job = new wasm.Job(true);
job.add(ing, false);
const t2 = performance.now();
const mb = size / 1e6;
const mem = wasm.__wasm ? wasm.__wasm.memory.buffer.byteLength : NaN;
console.log(`file ${file}: ${mb.toFixed(1)} MB in ${chunk >> 20} MiB chunks`);
console.log(`parse: ${((t1 - t0) / 1000).toFixed(3)} s = ${(mb / ((t1 - t0) / 1000)).toFixed(0)} MB/s`);
console.log(`add (normalize + part + index): ${((t2 - t1) / 1000).toFixed(3)} s; total ${(mb / ((t2 - t0) / 1000)).toFixed(0)} MB/s`);
console.log(`wasm memory: ${Number.isNaN(mem) ? 'n/a' : (mem / 1e6).toFixed(0) + ' MB'}; node RSS ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB`);
job.free?.();
