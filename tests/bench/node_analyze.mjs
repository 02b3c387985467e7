// The wasm yardstick of `./x bench`: the npm package's `analyze()` in Node (one thread, one wasm
// instance: what one of the app's workers runs), on the inputs given.
//   node tests/bench/node_analyze.mjs NPM_DIR INPUT...
// Prints one JSON line: instantiation and analyze seconds (wall, inside this process), the
// events the report counts, and the wasm memory at the end.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [npm, ...inputs] = process.argv.slice(2);
const { analyze, ready } = await import(pathToFileURL(path.resolve(npm, 'node.js')).href);
const t0 = performance.now();
await ready();
const t1 = performance.now();
const r = await analyze(inputs);
const t2 = performance.now();
if (!r.schema) process.exit(1);
console.log(JSON.stringify({
  ready_s: (t1 - t0) / 1000,
  analyze_s: (t2 - t1) / 1000,
  ranks: r.ranks.length,
  events: r.ranks.reduce((s, x) => s + x.events, 0),
  rss_mb: process.memoryUsage().rss / 1e6,
}));
