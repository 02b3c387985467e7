// Starts the app. An external module rather than trunk's inline loader, so that the
// Content-Security-Policy in index.html can forbid inline scripts. Every URL is relative to this
// file: the app works under any path prefix.
//
// It fetches the wasm itself so that a misconfigured server gets a clear message instead of a
// blank page: a missing file or an HTML page in its place (a 404 page, an SPA fallback) stops
// with the reason; a wrong MIME type (not application/wasm) still starts, from the bytes (slower
// to compile), and says so. When this script itself cannot run (.js served with a non-JavaScript
// type, or the page opened from disk), the static note in index.html stays and explains.
import init from './rankscope-app.js';

const WASM = new URL('./rankscope-app_bg.wasm', import.meta.url);

function note(cls, text) {
  const boot = document.getElementById('boot');
  const el = boot ?? document.createElement('div');
  el.className = `boot ${cls}`;
  el.setAttribute('role', cls === 'failed' ? 'alert' : 'status');
  el.dataset.testid = cls === 'failed' ? 'boot-failed' : 'boot-warning';
  el.textContent = text;
  if (!boot) document.body.prepend(el);
}

async function start() {
  let res;
  try {
    res = await fetch(WASM);
  } catch (e) {
    throw new Error(`cannot fetch ${WASM.pathname}: ${e.message}`);
  }
  if (!res.ok) throw new Error(`${WASM.pathname} answered HTTP ${res.status}: deploy the whole dist/ folder`);
  const type = (res.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/wasm') {
    await init({ module_or_path: res });
    return;
  }
  const bytes = await res.arrayBuffer();
  const magic = new Uint8Array(bytes, 0, Math.min(4, bytes.byteLength));
  if (magic.length < 4 || magic[0] !== 0 || magic[1] !== 0x61 || magic[2] !== 0x73 || magic[3] !== 0x6d) {
    throw new Error(`${WASM.pathname} is not WebAssembly (the server sent ${type || 'no type'}, ` +
      `${bytes.byteLength} bytes: a 404 or fallback page?). Deploy the whole dist/ folder.`);
  }
  await init({ module_or_path: bytes });
  const warning = `This server sends .wasm files as "${type || 'no type'}", not application/wasm: ` +
    'rankscope started anyway (compiling more slowly). See docs/hosting.md to fix the server.';
  console.warn(`rankscope: ${warning}`);
  note('warning', warning);
}

// The workers' wasm, compiled once on the page (streaming, while it downloads) and handed to
// every worker as its first message (www/worker_loader.js): with a separate fetch and compile per
// worker, V8 compiled the same module again in each, and again optimised its hot functions in
// each, CPU a load on a few cores could not spare (BENCHMARKS.md). When it cannot compile here
// (a wrong MIME type only slows it; anything else), a worker is given the URL and loads it itself,
// reporting what goes wrong as before.
const WORKER_WASM = new URL('./worker_bg.wasm', import.meta.url);
let workerModule = null;
function compiledWorker() {
  workerModule ??= WebAssembly.compileStreaming(fetch(WORKER_WASM))
    .catch(() => fetch(WORKER_WASM).then((r) => r.arrayBuffer()).then((b) => WebAssembly.compile(b)))
    .catch((e) => {
      console.warn(`rankscope: the workers' wasm did not compile on the page (${e.message ?? e}); each worker loads it`);
      return WORKER_WASM.href;
    });
  return workerModule;
}
globalThis.rankscopeWorker = () => {
  const w = new Worker(new URL('./worker_loader.js', import.meta.url));
  compiledWorker().then((m) => w.postMessage(m));
  return w;
};
compiledWorker();

start().catch((e) => {
  console.error('rankscope could not start:', e);
  note('failed', `rankscope could not start: ${e.message ?? e}`);
});
