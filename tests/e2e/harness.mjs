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
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ...(process.env.RANKSCOPE_CHROME_ARGS ? process.env.RANKSCOPE_CHROME_ARGS.split(' ') : [])],
  });
  context.on('request', (r) => requests.push(r.url()));
  return { context, profile };
}

/** The requests that left `origin` (data: URLs and the page's own blob: URLs stay). */
export const outsideOrigin = (requests, origin) =>
  requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith(`blob:${origin}`));

/** A screenshot of `page` into target/e2e-screenshots/`name`.png. */
export const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`) });

/**
 * A new page whose errors (uncaught, console errors, its workers' console errors) are pushed
 * onto `errors`, each prefixed by `prefix(page)` when given.
 */
export async function newPage(context, errors, prefix = () => '') {
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`${prefix(page)}${e.message}`));
  page.on('console', (m) => m.type() === 'error' && errors.push(`${prefix(page)}${m.text()}`));
  page.on('worker', (w) => w.on('console', (m) => m.type() === 'error' && errors.push(`worker: ${m.text()}`)));
  return page;
}

/**
 * The app at `origin` on a new page, `files` chosen in its file input, until the analysis is
 * ready: `{page, ms}` (file selection to analysis-ready).
 */
export async function openFiles(context, origin, files, errors, timeout = 120_000) {
  const page = await newPage(context, errors);
  await page.goto(origin);
  await page.waitForSelector('[data-testid=open-demo]');
  const t0 = Date.now();
  await page.setInputFiles('[data-testid=file-input]', files);
  await page.waitForSelector('[data-testid=analysis-ready]', { timeout });
  return { page, ms: Date.now() - t0 };
}

export async function stopBrowser({ server, context, profile }) {
  await context?.close();
  server?.close();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
}

/** The Ranks × steps heatmap's layout (`data-layout` of its canvas: top, row_h, label_w, cell_w, ranks, steps). */
export async function heatLayout(page) {
  return JSON.parse(await page.getAttribute('[data-testid=heatmap] canvas', 'data-layout'));
}

/**
 * Scrolls the heatmap's box so that `rank`'s row is in sight and returns the page coordinates
 * of the centre of its cell at `step` (null when the job has no such cell).
 */
export async function pointAtCell(page, rank, step) {
  const at = await page.evaluate(([rank, step]) => {
    const box = document.querySelector('[data-testid=heatmap]');
    const c = box.querySelector('canvas');
    const l = JSON.parse(c.dataset.layout);
    const row = l.ranks.indexOf(rank), col = l.steps.indexOf(step);
    if (row < 0 || col < 0) return null;
    box.scrollTop = Math.max(0, row * l.row_h - 2 * l.row_h);
    return { row, col, ...l };
  }, [rank, step]);
  if (!at) return null;
  // The scroll repaints on its event; read the offset it settled on.
  await page.waitForTimeout(50);
  return page.evaluate(({ row, col, top, row_h, label_w, cell_w }) => {
    const box = document.querySelector('[data-testid=heatmap]');
    const r = box.querySelector('canvas').getBoundingClientRect();
    return { x: r.left + label_w + (col + 0.5) * cell_w, y: r.top + top + row * row_h - box.scrollTop + row_h / 2 };
  }, at);
}
