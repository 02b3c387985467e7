// A static file server for the built app (dist/): loopback only, no dependencies.
//   node tests/e2e/server.mjs [DIR] [PORT]   serves DIR on 127.0.0.1:PORT, or the next free port
//   RANKSCOPE_PREFIX=/tools/rankscope/       serves it under that path instead of /
//   RANKSCOPE_FRAME_ANCESTORS="https://dash.example.com"   pages that may embed it ('self' by default)
// The end-to-end tests import `serve` from here (and serve their host pages with it, on other
// ports, without the app's policy).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.tar': 'application/x-tar',
};

/**
 * The same policy as index.html's meta tag, plus what only a header can say: which pages may
 * show the app in a frame (`frame-ancestors`; 'self' unless told otherwise).
 */
export function policy(frameAncestors = "'self'") {
  return "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:; " +
    "connect-src 'self'; img-src 'self' data:; style-src 'self'; font-src 'self'; object-src 'none'; " +
    `base-uri 'none'; form-action 'none'; frame-ancestors ${frameAncestors}`;
}

function handler(root, { prefix = '/', types = {}, csp = policy(), coop = 'same-origin-allow-popups' } = {}) {
  const mime = { ...TYPES, ...types };
  return (req, res) => {
    // A path the URL parser or the decoder refuses (`//?x` reads as a host; `%E0` is no UTF-8)
    // is the client's error, not the server's end.
    let url, rel;
    try {
      url = new URL(req.url, 'http://localhost');
      rel = decodeURIComponent(url.pathname);
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('bad request');
      return;
    }
    if (rel + '/' === prefix) {
      // As static servers do for a directory: relative URLs need the slash.
      res.writeHead(301, { location: prefix + url.search }).end();
      return;
    }
    if (!rel.startsWith(prefix)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    rel = '/' + rel.slice(prefix.length);
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
      const headers = {
        'content-type': mime[path.extname(file)] ?? 'application/octet-stream',
        'content-length': st.size,
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
      };
      if (csp) headers['content-security-policy'] = csp;
      // Not `same-origin`: that would cut the tab "Open in Perfetto" opens off from this one.
      if (coop) headers['cross-origin-opener-policy'] = coop;
      res.writeHead(200, headers);
      fs.createReadStream(file).pipe(res);
    });
  };
}

/**
 * Serves `dir` on 127.0.0.1, from `port` upwards (0: any free port). Options: `prefix` (the
 * path it is served under, ending in '/'), `types` (extension → content type overrides),
 * `csp` (the Content-Security-Policy header; false for none), `coop` (the
 * Cross-Origin-Opener-Policy header; false for none). Resolves to {server, url}, `url`
 * including the prefix.
 */
export function serve(dir, port = 0, opts = {}) {
  const root = path.resolve(dir);
  const prefix = opts.prefix ?? '/';
  return new Promise((resolve, reject) => {
    const attempt = (p, left) => {
      const server = http.createServer(handler(root, opts));
      server.once('error', (e) => {
        if (e.code === 'EADDRINUSE' && left > 0) attempt(p + 1, left - 1);
        else reject(e);
      });
      server.listen(p, '127.0.0.1', () => {
        const origin = `http://127.0.0.1:${server.address().port}`;
        resolve({ server, origin, url: `${origin}${prefix}` });
      });
    };
    attempt(port, opts.tries ?? 50);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = process.argv[2] ?? 'dist';
  const port = Number(process.argv[3] ?? 8080);
  const prefix = process.env.RANKSCOPE_PREFIX ?? '/';
  const csp = policy(process.env.RANKSCOPE_FRAME_ANCESTORS ?? "'self'");
  const { url } = await serve(dir, port, { prefix, csp });
  console.log(`rankscope is at ${url}  (Ctrl+C stops it; nothing leaves this machine)`);
}
