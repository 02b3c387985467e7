// Where one load's time goes in the browser: the built dist/ in headless Chromium (as
// app_bench.mjs), FILES chosen once the engine's warm-up is done, with a Chrome trace of the
// whole browser recorded from the page's start to analysis-ready.
//   node tests/bench/trace_load.mjs OUT.json FILE...
// Env: TRACE_CPU=1 adds V8's sampling profiler (ProfileChunk events: the wasm functions by name);
//      TRACE_COLD=1 chooses the files at once, without waiting for the warm-up.
// Writes OUT.json (open it in Perfetto or chrome://tracing) and prints: the load's time as the
// page measured it (the file input's `change` to the mutation that adds analysis-ready), and for
// each busy thread its time in tasks, its CPU time in them (a thread in a task but off the CPU
// was waiting for a core) and a strip of 50 ms bins of the load (' ' idle … '@' busy).
import fs from 'node:fs';
import { startBrowser, stopBrowser, newPage } from '../e2e/harness.mjs';

const [out, ...files] = process.argv.slice(2);
if (!out || !files.length) {
  console.error('usage: node tests/bench/trace_load.mjs OUT.json FILE...');
  process.exit(2);
}
const b = await startBrowser({ requests: [] });
const errors = [];
const page = await newPage(b.context, errors);
const cdp = await b.context.newCDPSession(page);
const events = [];
cdp.on('Tracing.dataCollected', (m) => events.push(...m.value));
const done = new Promise((r) => cdp.on('Tracing.tracingComplete', r));
await cdp.send('Tracing.start', {
  traceConfig: {
    includedCategories: ['toplevel', 'devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8', 'v8.wasm',
      'disabled-by-default-v8.compile', 'blink.user_timing', 'loading', 'blink', 'mojom', 'base', '__metadata',
      ...(process.env.TRACE_CPU ? ['disabled-by-default-v8.cpu_profiler'] : [])],
  },
});
await page.goto(b.origin);
await page.waitForSelector('[data-testid=open-demo]');
if (!process.env.TRACE_COLD) {
  await page.waitForFunction(() => ['warm', 'cold', 'stopped'].includes(document.documentElement.dataset.engine),
    null, { timeout: 10_000 }).catch(() => {});
  await page.waitForTimeout(1000);
}
const engine = await page.evaluate(() => document.documentElement.dataset.engine ?? 'none');
await page.evaluate(() => {
  document.addEventListener('change', () => performance.mark('load-start'), { capture: true, once: true });
  new MutationObserver((_, o) => {
    if (document.querySelector('[data-testid=analysis-ready]')) { performance.mark('load-ready'); o.disconnect(); }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-testid'] });
});
await page.setInputFiles('[data-testid=file-input]', files);
await page.waitForSelector('[data-testid=analysis-ready]', { timeout: 600_000 });
const ms = await page.evaluate(() => performance.getEntriesByName('load-ready')[0].startTime
  - performance.getEntriesByName('load-start')[0].startTime);
await cdp.send('Tracing.end');
await done;
fs.writeFileSync(out, JSON.stringify({ traceEvents: events }));
await stopBrowser(b);

const threadName = new Map();
const processName = new Map();
for (const e of events) {
  if (e.ph !== 'M') continue;
  if (e.name === 'thread_name') threadName.set(`${e.pid}:${e.tid}`, e.args.name);
  if (e.name === 'process_name') processName.set(e.pid, e.args.name);
}
const mark = (n) => events.find((e) => e.name === n)?.ts;
const t0 = mark('load-start');
const t1 = mark('load-ready');
console.log(`${files.length} file(s), engine ${engine}: ready in ${ms.toFixed(0)} ms (in the page)${errors.length ? `; errors: ${errors.join('; ')}` : ''}`);
// A thread's tasks: the events of its outermost task name (threads differ: a worker's are
// `RunTask`, the main thread's `ThreadControllerImpl::RunTask` inside `RunTask`, ...), so
// nested events are not counted twice.
const TASKS = new Set(['RunTask', 'ThreadControllerImpl::RunTask', 'ThreadPool_RunTask']);
const byName = new Map();
for (const e of events) {
  if (e.ph !== 'X' || !TASKS.has(e.name) || e.ts < t0 || e.ts > t1) continue;
  const k = `${e.pid}:${e.tid}`;
  const m = byName.get(k) ?? new Map();
  const t = m.get(e.name) ?? { tasks: [], cpu: 0, wall: 0 };
  t.tasks.push([e.ts, e.dur ?? 0]);
  t.wall += e.dur ?? 0;
  t.cpu += e.tdur ?? 0;
  m.set(e.name, t);
  byName.set(k, m);
}
const threads = new Map([...byName].map(([k, m]) => [k, [...m.values()].sort((x, y) => y.wall - x.wall)[0]]));
const bins = Math.ceil((t1 - t0) / 50_000);
const shades = ' .:-=+*#%@';
const rows = [...threads.entries()].filter(([, t]) => t.wall >= 20_000).sort((x, y) => y[1].wall - x[1].wall);
for (const [k, t] of rows) {
  const strip = new Array(bins).fill(0);
  for (let [ts, d] of t.tasks) {
    while (d > 0) {
      const i = Math.floor((ts - t0) / 50_000);
      if (i >= bins) break;
      const take = Math.min(d, t0 + (i + 1) * 50_000 - ts);
      strip[i] += take; ts += take; d -= take;
    }
  }
  const name = `${(processName.get(Number(k.split(':')[0])) ?? '?').slice(0, 8)} ${(threadName.get(k) ?? k).slice(0, 26)}`;
  const line = strip.map((x) => shades[Math.min(9, Math.floor(x / 5000))]).join('');
  console.log(`${name.padEnd(36)} in tasks ${(t.wall / 1000).toFixed(0).padStart(5)} ms, on a core ${(t.cpu / 1000).toFixed(0).padStart(5)} ms |${line}|`);
}
