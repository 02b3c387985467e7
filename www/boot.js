// Starts the app. An external module rather than trunk's inline loader, so that the
// Content-Security-Policy in index.html can forbid inline scripts.
import init from './rankscope-app.js';

init({ module_or_path: './rankscope-app_bg.wasm' }).catch((e) => {
  document.body.textContent = `rankscope could not start: ${e}`;
});
