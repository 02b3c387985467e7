// Builds dist/rankscope.html: the whole app in one file that works from disk (file://), with no
// server: `./x single` (after `trunk build --release`), or `node www/single.mjs [DIST]`.
//
// What file:// forbids and what is done instead:
// - module scripts from files, and fetch(): the app's JavaScript is inline (one module script),
//   its wasm and the worker's are inline data (gzip, then base64, in non-executed <script> data
//   blocks), decompressed with DecompressionStream (no fetch);
// - workers from files: the worker's glue is turned into a Blob URL, and each worker is handed
//   the worker wasm compiled once (a WebAssembly.Module) as its first message
//   (`globalThis.rankscopeWorker`, which the app's `host::new_worker` uses).
//
// The Content-Security-Policy stays as strict as a file allows: nothing may be fetched or
// connected to at all (`default-src 'none'`, `connect-src 'none'`), the one inline script and the
// one inline style are allowed by their SHA-256 only, wasm may be compiled
// ('wasm-unsafe-eval'), and workers may start from blob: URLs (the only way a page on disk can
// start one). README.md says the same to users.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const dist = path.resolve(process.argv[2] ?? 'dist');
const read = (f) => fs.readFileSync(path.join(dist, f));
const pack = (buf) => zlib.gzipSync(buf, { level: 9 }).toString('base64');
const sha = (text) => `'sha256-${crypto.createHash('sha256').update(text, 'utf8').digest('base64')}'`;

for (const f of ['rankscope-app.js', 'rankscope-app_bg.wasm', 'worker.js', 'worker_bg.wasm', 'style.css']) {
  if (!fs.existsSync(path.join(dist, f))) throw new Error(`${dist}/${f} is missing: run trunk build --release first`);
}
if (fs.existsSync(path.join(dist, 'snippets'))) {
  throw new Error('the wasm-bindgen output has snippets/: inline them here before building the single file');
}

// The app's glue (wasm-bindgen --target web) as the body of the inline module: its exports
// become local names the boot code calls.
let glue = read('rankscope-app.js').toString();
const exports = /^export\s*\{([^}]*)\};?\s*$/m;
const m = glue.match(exports);
if (!m || !/__wbg_init as default/.test(m[1])) throw new Error('unexpected wasm-bindgen glue: no `export { …, __wbg_init as default }`');
glue = glue.replace(exports, '');
if (/^\s*import\s/m.test(glue)) throw new Error('the glue imports other modules: they would need inlining');

// The worker: its no-modules glue, then a loader that waits for the compiled module.
const workerJs = read('worker.js').toString() +
  '\n;self.onmessage = (e) => { self.onmessage = null; wasm_bindgen({ module_or_path: e.data }); };\n';

const boot = `
// rankscope.html's boot: the wasm and the worker come from the data blocks below, not from files.
const data = (id) => {
  const el = document.getElementById(id);
  const text = el.textContent.trim();
  el.remove();
  const raw = Uint8Array.fromBase64 ? Uint8Array.fromBase64(text) : Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  return new Response(new Blob([raw]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();
};
const fail = (e) => {
  console.error('rankscope could not start:', e);
  const el = document.getElementById('boot') ?? document.body.appendChild(document.createElement('div'));
  el.className = 'boot failed';
  el.textContent = 'rankscope could not start: ' + (e && e.message ? e.message : e);
};
(async () => {
  const [app, worker, workerJs] = await Promise.all([data('rs-app-wasm'), data('rs-worker-wasm'), data('rs-worker-js')]);
  const workerModule = await WebAssembly.compile(worker);
  const workerUrl = URL.createObjectURL(new Blob([workerJs], { type: 'text/javascript' }));
  globalThis.rankscopeWorker = () => {
    const w = new Worker(workerUrl);
    w.postMessage(workerModule);
    return w;
  };
  await __wbg_init({ module_or_path: app });
})().catch(fail);
`;
const script = `${glue}\n${boot}`;
const style = read('style.css').toString();
for (const [name, text] of [['script', script], ['style', style]]) {
  if (/<\/(script|style)|<!--/i.test(text)) throw new Error(`the inline ${name} contains a closing tag or <!--`);
}

const csp = [
  "default-src 'none'",
  `script-src ${sha(script)} 'wasm-unsafe-eval'`,
  'worker-src blob:',
  `style-src ${sha(style)}`,
  'img-src data:',
  "connect-src 'none'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

const html = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <!-- rankscope in one file: it fetches and connects to nothing (see the policy). -->
  <meta http-equiv="Content-Security-Policy" content="${csp}">
  <meta name="color-scheme" content="light dark">
  <meta name="referrer" content="no-referrer">
  <meta name="generator" content="rankscope single-file build (www/single.mjs)">
  <title>rankscope</title>
  <link rel="icon" href="data:,">
  <style>${style}</style>
</head>
<body>
  <noscript>rankscope needs JavaScript and WebAssembly: everything runs in this tab.</noscript>
  <div id="boot" class="boot" data-testid="boot"><p>Starting rankscope…</p></div>
  <script type="application/octet-stream" id="rs-app-wasm">${pack(read('rankscope-app_bg.wasm'))}</script>
  <script type="application/octet-stream" id="rs-worker-wasm">${pack(read('worker_bg.wasm'))}</script>
  <script type="application/octet-stream" id="rs-worker-js">${pack(Buffer.from(workerJs))}</script>
  <script type="module">${script}</script>
</body>
</html>
`;
const out = path.join(dist, 'rankscope.html');
fs.writeFileSync(out, html);
console.log(`${out}: ${(html.length / 1e6).toFixed(1)} MB (app, worker, wasm and CSS inlined; works from file://)`);
