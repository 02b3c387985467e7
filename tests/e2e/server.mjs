// A static file server for the built app (dist/): loopback only, no dependencies.
//   node tests/e2e/server.mjs [DIR] [PORT]   serves DIR on 127.0.0.1:PORT, or the next free port
// The end-to-end tests import `serve` from here.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

// The same policy as index.html's meta tag, plus what only a header can say.
const CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:; " +
  "connect-src 'self'; img-src 'self' data:; style-src 'self'; font-src 'self'; object-src 'none'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function handler(root) {
  return (req, res) => {
    const url = new URL(req.url, 'http://localhost');
    let rel = decodeURIComponent(url.pathname);
    if (rel.endsWith('/')) rel += 'index.html';
    const file = path.join(root, path.normalize(rel).replace(/^(\.\.[/\\])+/, ''));
    if (!file.startsWith(root)) {
      res.writeHead(403).end();
      return;
    }
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      res.writeHead(200, {
        'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
        'content-length': st.size,
        'cache-control': 'no-cache',
        'content-security-policy': CSP,
        'x-content-type-options': 'nosniff',
        'cross-origin-opener-policy': 'same-origin',
      });
      fs.createReadStream(file).pipe(res);
    });
  };
}

/** Serves `dir` on 127.0.0.1, from `port` upwards (0: any free port). Resolves to {server, url}. */
export function serve(dir, port = 0, tries = 50) {
  const root = path.resolve(dir);
  return new Promise((resolve, reject) => {
    const attempt = (p, left) => {
      const server = http.createServer(handler(root));
      server.once('error', (e) => {
        if (e.code === 'EADDRINUSE' && left > 0) attempt(p + 1, left - 1);
        else reject(e);
      });
      server.listen(p, '127.0.0.1', () => {
        resolve({ server, url: `http://127.0.0.1:${server.address().port}/` });
      });
    };
    attempt(port, tries);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = process.argv[2] ?? 'dist';
  const port = Number(process.argv[3] ?? 8080);
  const { url } = await serve(dir, port);
  console.log(`rankscope is at ${url}  (Ctrl+C stops it; nothing leaves this machine)`);
}
