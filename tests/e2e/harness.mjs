// What every end-to-end test file shares: where things are, the real trace sets, and a headless
// Chromium (Debian's /usr/bin/chromium driven by playwright-core) on the built dist/ served on
// 127.0.0.1, recording every request the pages make.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { serve } from './server.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SHARED = process.env.RANKSCOPE_SHARED ?? path.join(ROOT, '../shared');
export const BIN = process.env.RANKSCOPE_BIN ?? path.join(ROOT, 'target/release/rankscope');
export const SHOTS = path.join(ROOT, 'target/e2e-screenshots');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** The trace files of a set under shared/traces, sorted. */
export const traces = (dir) => {
  const d = path.join(SHARED, 'traces', dir);
  return fs.readdirSync(d).filter((f) => f.endsWith('.json') || f.endsWith('.json.gz')).sort().map((f) => path.join(d, f));
};

/**
 * Serves dist/ and starts Chromium with a fresh profile at 1280×800. Every request URL is
 * pushed onto `requests`. Returns what `stopBrowser` needs.
 */
export async function startBrowser({ requests, acceptDownloads = false }) {
  const { server, url: origin } = await serve(path.join(ROOT, 'dist'), 0);
  return { server, origin, ...(await launch({ requests, acceptDownloads })) };
}

/** Chromium alone (the caller serves what it needs): {context, profile}. */
export async function launch({ requests, acceptDownloads = false }) {
  fs.mkdirSync(SHOTS, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-e2e-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    acceptDownloads,
    viewport: { width: 1280, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  context.on('request', (r) => requests.push(r.url()));
  return { context, profile };
}

export async function stopBrowser({ server, context, profile }) {
  await context?.close();
  server?.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
}
