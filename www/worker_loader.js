// Starts a worker: loads the worker's wasm-bindgen glue (no-modules build) and its wasm.
// The pool creates workers with `new Worker("./worker_loader.js")`.
importScripts('./worker.js');
wasm_bindgen({ module_or_path: './worker_bg.wasm' });
