// rankscope for browsers (and any runtime that can fetch the .wasm beside this module).
// The .wasm is loaded from `new URL('./rankscope_wasm_bg.wasm', import.meta.url)` on first use;
// pass other bytes or a URL to `ready()` to load it from elsewhere.
export { analyze, diff, runs, open, ready, Job, CHUNK_BYTES, TABLE_NAMES } from './core.js';
