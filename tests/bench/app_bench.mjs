// The app's side of `./x bench`: the built dist/ in headless Chromium (tests/e2e/harness.mjs:
// Debian's /usr/bin/chromium driven by playwright-core, served on 127.0.0.1), as a person uses it.
//   node tests/bench/app_bench.mjs SPEC.json
// SPEC: {"cases": [{"label", "files": [paths], "timeline_s": seconds or 0, "heatmap": bool, "shot": name,
//   "workers": N (optional: the page opened with `?workers=N`)}]}.
// Each case gets a fresh browser. Prints one JSON line per case:
//   ms         the files handed to the page's file input (setInputFiles, as tests/e2e do) to
//              `[data-testid=analysis-ready]` (every file read and the job analysed), timed in
//              the page: from the input's `change` event to the mutation that added the marker
//              (polled_ms: the same seen from here, with waitForSelector's polling lag in it);
//   engine     the page's engine warm-up when the files were chosen (warm.rs; they are chosen a
//              second after it ends, as a person takes longer to choose them), engine_ready_ms
//              when it ended (from the page's start), engine_worker_ms the warm-up worker's time;
//   cores      navigator.hardwareConcurrency (the pool starts up to that many workers, one per
//              load in flight: crates/rankscope-app/src/pool.rs);
//   workers    the workers the page started; worker_cpu_s: the CPU seconds of each worker thread
//              of the renderer during the load (/proc/PID/task/*/stat, threads named
//              DedicatedWorker), so "per worker" counts the workers that did the work;
//   main_cpu_s the renderer's main thread's CPU seconds during the load; cpu_by_process: the CPU
//              seconds of every process of the browser during the load, by type (the browser
//              process reads the files for the page: a Blob's bytes come from it);
//   rss_*_kb   the renderer processes' resident memory (the page and its workers: dedicated
//              workers are threads of the renderer), before the files, the peak sampled every
//              100 ms during the load, and once ready;
//   heat_*     with heatmap: the Ranks × steps view opened (heat_open_ms), its ranks and steps,
//              and the requestAnimationFrame intervals while its heatmap is scrolled and hovered;
//   frames     with timeline_s: the Timeline view opened on the loaded job, zoomed and panned with
//              W/A/S/D, Ctrl+wheel, plain wheel and drags for timeline_s seconds while the page
//              records every requestAnimationFrame interval (ms); frame_moves: the move of
//              explore() each frame ended in (its index, -1 before the first); long_tasks: the
//              page's main-thread tasks over 50 ms (PerformanceObserver 'longtask'), with the move.
import fs from 'node:fs';
import path from 'node:path';
import { startBrowser, stopBrowser, newPage, SHOTS } from '../e2e/harness.mjs';

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

/** The processes under the browser started with `profile`: [{pid, ppid, args}]. */
function tree(profile) {
  const procs = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const args = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ');
      procs.push({ pid: Number(d), ppid, args });
    } catch { /* gone */ }
  }
  const root = procs.find((p) => p.args.includes(`--user-data-dir=${profile}`) && !p.args.includes('--type='));
  if (!root) return [];
  const ids = new Set([root.pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) if (ids.has(p.ppid) && !ids.has(p.pid)) { ids.add(p.pid); grew = true; }
  }
  return procs.filter((p) => ids.has(p.pid));
}

const renderers = (profile) => tree(profile).filter((p) => p.args.includes('--type=renderer')).map((p) => p.pid);

function rssKb(pids) {
  let kb = 0;
  for (const pid of pids) {
    try {
      const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m);
      if (m) kb += Number(m[1]);
    } catch { /* gone */ }
  }
  return kb;
}

const TICK = 100; // clock ticks per second (Linux's USER_HZ)

/** CPU seconds of each process of the browser (`{pid: {type, cpu_s}}`; its threads and reaped children's). */
function procCpu(profile) {
  const out = {};
  for (const p of tree(profile)) {
    try {
      const s = fs.readFileSync(`/proc/${p.pid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      const type = (p.args.match(/--type=([a-z-]+)/) ?? [null, 'browser'])[1];
      out[p.pid] = { type, cpu_s: (Number(f[11]) + Number(f[12])) / TICK };
    } catch { /* gone */ }
  }
  return out;
}

/** CPU seconds used since `before` per process type (browser, renderer, gpu-process, utility, ...). */
function cpuByType(before, after) {
  const out = {};
  for (const [pid, a] of Object.entries(after)) {
    const d = a.cpu_s - (before[pid]?.cpu_s ?? 0);
    out[a.type] = Math.round(((out[a.type] ?? 0) + d) * 100) / 100;
  }
  return out;
}

/** Each thread of `pids`: {key: {name, cpu_s}} (utime + stime). */
function threads(pids) {
  const out = {};
  for (const pid of pids) {
    let tasks = [];
    try { tasks = fs.readdirSync(`/proc/${pid}/task`); } catch { continue; }
    for (const t of tasks) {
      try {
        const s = fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
        const name = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
        const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
        out[`${pid}/${t}`] = { name, main: t === String(pid), cpu_s: (Number(f[11]) + Number(f[12])) / TICK };
      } catch { /* gone */ }
    }
  }
  return out;
}

/**
 * The Ranks × steps view opened on the loaded job (time from the click to its canvas), then its
 * heatmap scrolled and hovered like tests/e2e/digest.test.mjs does (the wheel over the box down
 * and back up, the pointer moving across cells: each scroll and each new hovered cell repaints the
 * rows in sight) while the page records every requestAnimationFrame interval.
 */
async function heatmap(page, shot) {
  const t0 = Date.now();
  await page.click('[data-testid=nav-steps]');
  await page.waitForSelector('[data-testid=heatmap] canvas');
  const open_ms = Date.now() - t0;
  const layout = JSON.parse(await page.getAttribute('[data-testid=heatmap] canvas', 'data-layout'));
  await page.evaluate(() => {
    window.__heat = [];
    let last = performance.now();
    const tick = (t) => { window.__heat.push(t - last); last = t; window.__heatRaf = requestAnimationFrame(tick); };
    window.__heatRaf = requestAnimationFrame(tick);
  });
  const box = await page.locator('[data-testid=heatmap]').boundingBox();
  for (let i = 0; i < 120; i++) {
    await page.mouse.move(box.x + 120 + (i * 37) % Math.max(1, box.width - 130), box.y + 20 + (i * 13) % Math.max(1, box.height - 30));
    await page.mouse.wheel(0, i < 60 ? 400 : -400);
  }
  const frames = await page.evaluate(() => { cancelAnimationFrame(window.__heatRaf); return window.__heat.slice(1); });
  if (shot) await page.screenshot({ path: path.join(SHOTS, `${shot}-steps.png`) });
  return { heat_open_ms: open_ms, heat_ranks: layout.ranks.length, heat_steps: layout.steps.length, heat_frames: frames };
}

/** Rough moves of a person exploring the timeline: zoom in and out, pan, drag, scroll. */
async function explore(page, box, seconds) {
  const cx = box.x + box.width * 0.55, cy = box.y + Math.min(box.height * 0.4, 300);
  await page.mouse.move(cx, cy);
  const end = Date.now() + seconds * 1000;
  const moves = [
    async () => { for (let i = 0; i < 4; i++) await page.keyboard.press('w'); },
    async () => { await page.keyboard.down('d'); await page.waitForTimeout(300); await page.keyboard.up('d'); },
    async () => {
      await page.keyboard.down('Control');
      for (let i = 0; i < 5; i++) { await page.mouse.wheel(0, -120); await page.waitForTimeout(30); }
      await page.keyboard.up('Control');
    },
    async () => {
      await page.mouse.down();
      await page.mouse.move(cx - 250, cy + 20, { steps: 15 });
      await page.mouse.up();
      await page.mouse.move(cx, cy);
    },
    async () => { for (let i = 0; i < 6; i++) { await page.mouse.wheel(0, 150); await page.waitForTimeout(30); } },
    async () => { await page.keyboard.down('a'); await page.waitForTimeout(300); await page.keyboard.up('a'); },
    async () => { for (let i = 0; i < 3; i++) await page.keyboard.press('s'); },
    async () => { for (let i = 0; i < 6; i++) { await page.mouse.wheel(0, -150); await page.waitForTimeout(30); } },
    async () => {
      await page.mouse.down();
      await page.mouse.move(cx + 250, cy - 20, { steps: 15 });
      await page.mouse.up();
      await page.mouse.move(cx, cy);
    },
    async () => { await page.keyboard.press('0'); }, // the whole job, then in again
  ];
  let n = 0;
  while (Date.now() < end) {
    const m = n++ % moves.length;
    await page.evaluate((k) => { window.__benchMove = k; }, m);
    await moves[m]();
  }
  return n;
}

async function runCase(c) {
  if (!c.files.length) throw new Error(`case ${c.label}: no files`);
  const requests = [];
  const errors = [];
  const b = await startBrowser({ requests });
  try {
    const page = await newPage(b.context, errors);
    let workers = 0;
    page.on('worker', () => { workers += 1; });
    // `workers`: the page's `?workers=N` (at most N workers read files at once).
    await page.goto(c.workers ? new URL(`?workers=${c.workers}`, b.origin).href : b.origin);
    await page.waitForSelector('[data-testid=open-demo]');
    // A person takes seconds to choose files; the page warms its engine meanwhile (warm.rs).
    // The files are chosen a second after the warm-up ended, or after 10 s.
    const engine = await page.waitForFunction(() => ['warm', 'cold', 'stopped'].includes(document.documentElement.dataset.engine), null, { timeout: 10_000 })
      .then(() => page.evaluate(() => ({ engine: document.documentElement.dataset.engine, engine_ready_ms: performance.now(), engine_worker_ms: Number(document.documentElement.dataset.engineMs) })))
      .catch(() => ({ engine: 'not warm after 10 s' }));
    await page.waitForTimeout(1000);
    const cores = await page.evaluate(() => navigator.hardwareConcurrency);
    const pids = renderers(b.profile);
    const rss0 = rssKb(pids);
    const before = threads(pids);
    const procs0 = procCpu(b.profile);
    let peak = rss0;
    const sampler = setInterval(() => { peak = Math.max(peak, rssKb(renderers(b.profile))); }, 100);
    // The moments, taken in the page: the file input's `change` (the files chosen) and the
    // mutation that put `[data-testid=analysis-ready]` in the document. waitForSelector alone
    // polls, up to every 500 ms once a wait is long, and that lag once added 0.3 s to a 1 s load.
    await page.evaluate(() => {
      const at = (window.__benchAt = {});
      document.addEventListener('change', () => { at.change ??= performance.now(); }, true);
      const seen = () => document.querySelector('[data-testid=analysis-ready]');
      new MutationObserver((_, o) => { if (seen()) { at.ready = performance.now(); o.disconnect(); } })
        .observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-testid'] });
    });
    const t0 = Date.now();
    await page.setInputFiles('[data-testid=file-input]', c.files);
    const timeout = c.timeout_ms ?? 600_000;
    try {
      await page.waitForSelector('[data-testid=analysis-ready]', { timeout });
    } catch (e) {
      // Not ready in time: what the page shows then is the result (status, files' lines).
      clearInterval(sampler);
      if (c.shot) await page.screenshot({ path: path.join(SHOTS, `${c.shot}-not-ready.png`) });
      const status = await page.locator('.status').first().innerText().catch(() => '?');
      const body = (await page.locator('body').innerText().catch(() => '')).slice(0, 2000);
      return {
        label: c.label, files: c.files.length, bytes: c.files.reduce((s, f) => s + fs.statSync(f).size, 0),
        not_ready_after_ms: timeout, cores: await page.evaluate(() => navigator.hardwareConcurrency), workers,
        rss_before_kb: rss0, rss_peak_kb: peak, status, body, errors,
      };
    }
    const polledMs = Date.now() - t0;
    clearInterval(sampler);
    const at = await page.evaluate(() => window.__benchAt);
    const ms = at.change != null && at.ready != null ? at.ready - at.change : polledMs;
    const now = renderers(b.profile);
    const rss = rssKb(now);
    peak = Math.max(peak, rss);
    const after = threads(now);
    const procCpuS = cpuByType(procs0, procCpu(b.profile));
    const used = (k) => after[k].cpu_s - (before[k]?.cpu_s ?? 0);
    const workerCpu = Object.keys(after).filter((k) => after[k].name.startsWith('DedicatedWorker'))
      .map(used).filter((s) => s > 0.05).sort((x, y) => y - x);
    const byName = {};
    for (const k of Object.keys(after)) {
      const n = after[k].main ? 'main' : after[k].name;
      byName[n] = (byName[n] ?? 0) + used(k);
    }
    const rendererThreads = Object.fromEntries(Object.entries(byName).filter(([, v]) => v >= 0.05)
      .sort((x, y) => y[1] - x[1]).slice(0, 6).map(([n, v]) => [n, Math.round(v * 100) / 100]));
    const mainCpu = Object.keys(after).filter((k) => after[k].main).map(used).reduce((s, x) => s + x, 0);
    const status = await page.locator('[data-testid=analysis-ready]').innerText();
    // The Summary's "Events" fact: the events the job holds, as the page counted them.
    const m = (await page.locator('body').innerText()).match(/\bEvents\s*\n\s*([\d,]+)/);
    const events = m ? Number(m[1].replace(/,/g, '')) : null;
    const out = {
      label: c.label, files: c.files.length, bytes: c.files.reduce((s, f) => s + fs.statSync(f).size, 0),
      ms, polled_ms: polledMs, ...engine, events, cores, workers, worker_cpu_s: workerCpu, main_cpu_s: mainCpu, cpu_by_process: procCpuS, renderer_threads: rendererThreads,
      rss_before_kb: rss0, rss_peak_kb: peak, rss_ready_kb: rss, status,
    };
    if (c.shot) await page.screenshot({ path: path.join(SHOTS, `${c.shot}-summary.png`) });
    if (c.heatmap) Object.assign(out, await heatmap(page, c.shot));
    if (c.timeline_s) {
      await page.click('[data-testid=nav-timeline]');
      await page.waitForSelector('[data-testid=timeline] canvas');
      const box = await page.locator('[data-testid=timeline] canvas').boundingBox();
      await page.waitForTimeout(1000); // the first tiles
      await page.evaluate(() => {
        const f = (window.__benchFrames = []);
        const during = (window.__benchFrameMoves = []);
        const long = (window.__benchLongTasks = []);
        window.__benchMove = -1;
        new PerformanceObserver((l) => {
          for (const e of l.getEntries()) long.push({ ms: Math.round(e.duration), move: window.__benchMove });
        }).observe({ type: 'longtask' });
        let last = performance.now();
        const tick = (t) => {
          f.push(t - last); during.push(window.__benchMove); last = t;
          if (!window.__benchStop) requestAnimationFrame(tick);
        };
        requestAnimationFrame((t) => { last = t; requestAnimationFrame(tick); });
      });
      out.moves = await explore(page, box, c.timeline_s);
      Object.assign(out, await page.evaluate(() => {
        window.__benchStop = true;
        return { frames: window.__benchFrames, frame_moves: window.__benchFrameMoves, long_tasks: window.__benchLongTasks };
      }));
      out.rss_timeline_kb = rssKb(renderers(b.profile));
      if (c.shot) await page.screenshot({ path: path.join(SHOTS, `${c.shot}-timeline.png`) });
    }
    out.errors = errors;
    await page.close();
    return out;
  } finally {
    await stopBrowser(b);
  }
}

fs.mkdirSync(SHOTS, { recursive: true });
for (const c of spec.cases) {
  const r = await runCase(c);
  console.log(JSON.stringify(r));
}
