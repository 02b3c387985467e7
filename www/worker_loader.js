// Starts a worker: loads the worker's wasm-bindgen glue (no-modules build), then waits for its
// first message, the worker's wasm compiled once by the page (a WebAssembly.Module, shared by
// every worker, so each neither fetches nor compiles it again and code V8 optimises for one
// serves all), or, when the page could not compile it, the wasm's URL to load here.
// The page starts workers with `globalThis.rankscopeWorker()` (www/boot.js).
importScripts('./worker.js');
self.onmessage = (e) => {
  self.onmessage = null;
  wasm_bindgen({ module_or_path: e.data });
};
