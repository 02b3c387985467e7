// How long the app takes to open: `node tests/bench/open_bench.mjs [N]` serves dist/, and in N
// fresh headless Chromium profiles (default 3) times the page's load to its start screen (the
// demo button) and then the built-in demo to analysis ready. One JSON line per run.
import { startBrowser, stopBrowser } from '../e2e/harness.mjs';

const runs = Number(process.argv[2] ?? 3);
for (let i = 0; i < runs; i++) {
  const requests = [];
  const b = await startBrowser({ requests });
  const page = await b.context.newPage();
  const t0 = performance.now();
  await page.goto(b.origin);
  await page.waitForSelector('[data-testid=open-demo]');
  const open = performance.now() - t0;
  const t1 = performance.now();
  await page.click('[data-testid=open-demo]');
  await page.waitForSelector('[data-testid=analysis-ready]', { timeout: 60_000 });
  const demo = performance.now() - t1;
  console.log(JSON.stringify({ open_ms: Math.round(open), demo_ready_ms: Math.round(demo) }));
  await stopBrowser(b);
}
