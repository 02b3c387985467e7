// Writes the package.json of the npm package `rankscope` (called by `./x npm`):
//   node package.mjs VERSION OUT_DIR
// One build serves Node and browsers: the "node" condition picks node.js (the .wasm read with
// fs, path strings as inputs), every other runtime index.js (the .wasm fetched beside it).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [version, out] = process.argv.slice(2);
if (!/^\d+\.\d+\.\d+/.test(version ?? '') || !out) {
  console.error('usage: node package.mjs VERSION OUT_DIR');
  process.exit(2);
}
const pkg = {
  name: 'rankscope',
  version,
  description:
    'Diagnose distributed PyTorch training from per-rank Kineto traces, NCCL logs, nccl-tests output and Flight Recorder dumps: the rankscope core (Rust, WebAssembly) for Node and browsers.',
  license: 'MIT OR Apache-2.0',
  type: 'module',
  main: './node.js',
  browser: './index.js',
  types: './index.d.ts',
  exports: {
    '.': {
      types: './index.d.ts',
      node: './node.js',
      default: './index.js',
    },
    './rankscope_wasm_bg.wasm': './rankscope_wasm_bg.wasm',
    './package.json': './package.json',
  },
  files: [
    'index.js',
    'node.js',
    'core.js',
    'index.d.ts',
    'rankscope_wasm.js',
    'rankscope_wasm.d.ts',
    'rankscope_wasm_bg.wasm',
    'rankscope_wasm_bg.wasm.d.ts',
    'README.md',
  ],
  sideEffects: ['./node.js'],
  engines: { node: '>=20' },
  keywords: ['pytorch', 'distributed', 'profiler', 'kineto', 'nccl', 'trace', 'wasm'],
};
writeFileSync(join(out, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
