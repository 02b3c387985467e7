// End-to-end tests of the analysis views: what the app shows equals `rankscope analyze --json`
// on the same files (findings, per-rank headline figures, alignment, collectives); a heatmap
// cell opens the timeline at its rank; the exports (JSON, CSV, Markdown, merged Chrome trace,
// PNG) are built in the browser and equal the CLI's. Screenshots of every view go to
// target/e2e-screenshots/ (2x-prefixed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, SHARED, BIN, traces, startBrowser, stopBrowser, pointAtCell, heatLayout, shot, openFiles, outsideOrigin } from './harness.mjs';

let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests, acceptDownloads: true }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

const openWith = (files) => openFiles(context, origin, files, pageErrors);

function analyze(files, ...flags) {
  return execFileSync(BIN, ['analyze', ...flags, ...files], { maxBuffer: 256 << 20 }).toString();
}

/** The CLI's report with file paths reduced to the names the browser sees. */
function cliReport(files) {
  const a = JSON.parse(analyze(files, '--json'));
  for (const r of a.ranks) r.source = path.basename(r.source);
  for (const d of a.diagnostics) d.file = path.basename(d.file);
  return a;
}

async function shownFigures(page) {
  await page.click('[data-testid=nav-summary]');
  const findings = await page.$$eval('[data-testid=findings] > [data-testid=finding]', (els) => els.map((e) => e.dataset.id));
  const ranks = await page.$$eval('[data-testid=rank-row]', (rows) => rows.map((r) => ({
    rank: Number(r.dataset.rank),
    exposed: Number(r.dataset.exposedCommRatio),
    overlap: Number(r.dataset.overlapCoverage),
    idle: Number(r.dataset.idleNs),
    p50: Number(r.dataset.stepP50Ns),
  })));
  await page.click('[data-testid=nav-alignment]');
  const alignment = await page.$$eval('[data-testid=alignment-table] [data-testid=alignment-row]', (rows) => rows.map((r) => ({
    rank: Number(r.dataset.rank), method: r.dataset.method, offset: Number(r.dataset.offsetNs),
    residual: Number(r.dataset.residualNs), anchors: Number(r.dataset.anchors),
  })));
  await page.click('[data-testid=nav-collectives]');
  const collectives = await page.$$eval('[data-testid=collectives-table] [data-testid=collective-row]', (rows) => rows.map((r) => ({
    kind: r.dataset.kind, pg: r.dataset.pg, count: Number(r.dataset.count), instances: Number(r.dataset.instances),
  })));
  return { findings, ranks, alignment, collectives };
}

function expectedFigures(a) {
  const byKind = (x, y) => (x.kind + x.pg).localeCompare(y.kind + y.pg);
  return {
    findings: a.findings.map((f) => f.id),
    ranks: a.rank_totals.map((t) => ({
      rank: t.rank, exposed: t.exposed_comm_ratio, overlap: t.overlap_coverage, idle: t.idle_ns,
      p50: t.step_time ? t.step_time.p50_ns : 0,
    })),
    alignment: a.alignment.map((x) => ({ rank: x.rank, method: x.method, offset: x.offset_ns, residual: x.residual_ns, anchors: x.anchors })),
    collectives: a.collectives.map((c) => ({ kind: c.kind, pg: c.pg, count: c.count, instances: c.instances })).sort(byKind),
  };
}

async function checkAgainstCli(set, n, prefix) {
  const files = traces(set);
  const { page, ms } = await openWith(files);
  console.log(`${set}: file selection to analysis-ready in ${ms} ms`);
  const shown = await shownFigures(page);
  shown.collectives.sort((x, y) => (x.kind + x.pg).localeCompare(y.kind + y.pg));
  const want = expectedFigures(cliReport(files));
  assert.equal(shown.ranks.length, n);
  assert.deepEqual(shown, want);
  // Screenshots of every analysis view, at 1280×800.
  await page.click('[data-testid=nav-summary]');
  await shot(page, `${prefix}-summary`);
  await page.click('[data-testid=nav-steps]');
  await page.waitForSelector('[data-testid=heatmap]');
  await shot(page, `${prefix}-steps`);
  await page.click('[data-testid=nav-collectives]');
  await shot(page, `${prefix}-collectives`);
  await page.click('[data-testid=nav-alignment]');
  await shot(page, `${prefix}-alignment`);
  return { page, files };
}

test('DLRM 8 ranks: findings, rank figures, alignment and collectives equal rankscope analyze', async () => {
  const { page } = await checkAgainstCli('param-dlrm-8rank', 8, '20-dlrm');
  await page.close();
});

test('gloo 4 ranks: findings, rank figures, alignment and collectives equal rankscope analyze', async () => {
  const { page } = await checkAgainstCli('ddp-gloo-cpu-4rank', 4, '30-gloo');
  await page.close();
});

test('a real host stall (zoo): the Summary leads with the cause and where it is; Ranks × steps shows who waited', async () => {
  const dir = path.join(ROOT, 'tests/zoo/host_stall');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(dir, f));
  const cli = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const { page } = await openWith(files);
  await page.click('[data-testid=nav-summary]');
  // The first thing on the page is the cause, on the injected rank, with where its time went.
  const lead = page.locator('[data-testid=finding]').first();
  assert.equal(await lead.getAttribute('data-id'), 'host_stall');
  assert.equal(await lead.getAttribute('data-ranks'), '2');
  assert.equal(await lead.getAttribute('data-impact-ns'), String(cli.findings[0].impact_ns));
  const where = await lead.locator('[data-testid=finding-where]').innerText();
  assert.match(where, /straggler_sleep/);
  assert.match(where, /no operator running/);
  const summaryTop = await page.locator('[data-testid=summary]').evaluate((el) => el.firstElementChild.className);
  assert.match(summaryTop, /findings-section/, 'the findings come before the job facts');
  await shot(page, '35-zoo-host-stall-summary');
  // Ranks × steps opens on waiting: the late rank waits least, every other rank waits for it.
  await page.click('[data-testid=nav-steps]');
  assert.equal(await page.getAttribute('[data-testid=heatmap]', 'data-metric'), 'exposed_wait');
  const cells = await page.$$eval('[data-testid=heat-cell]', (els) => els.map((e) => ({ rank: +e.dataset.rank, step: +e.dataset.step, v: +e.dataset.value })));
  for (const st of cli.steps) {
    for (const r of st.per_rank) {
      const c = cells.find((x) => x.rank === r.rank && x.step === st.step);
      assert.equal(c.v, r.exposed_wait_ns, `rank ${r.rank} step ${st.step}`);
    }
    const w = Object.fromEntries(st.per_rank.map((r) => [r.rank, r.exposed_wait_ns]));
    for (const r of [0, 1, 3]) assert.ok(w[r] > w[2], `step ${st.step}: rank ${r} waits more than rank 2`);
  }
  assert.ok(await page.locator('[data-testid=rank-bar] .seg-wait').count() === 4);
  await shot(page, '36-zoo-host-stall-steps');
  await page.click('[data-testid=nav-collectives]');
  const transfer = await page.locator('[data-testid=collective-row] [data-testid=transfer]').first().innerText();
  assert.notEqual(transfer, '–');
  await page.close();
});

test('a real hang (zoo): the finding names the rank that skipped the collective, with where every rank got to', async () => {
  const dir = path.join(ROOT, 'tests/zoo/hang_skipped_allreduce');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(dir, f));
  const cli = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const { page } = await openWith(files);
  await page.click('[data-testid=nav-summary]');
  const lead = page.locator('[data-testid=finding]').first();
  assert.equal(await lead.getAttribute('data-id'), 'collective_mismatch');
  assert.equal(await lead.getAttribute('data-ranks'), '1');
  const rows = await lead.locator('[data-testid=last-collective-row]').evaluateAll((els) => els.map((e) => ({
    rank: +e.dataset.rank, named: e.dataset.named === 'true', n: +e.children[1].textContent, completed: e.children[2].textContent,
    entered: e.children[3].textContent,
  })));
  const rec = (x) => (x ? `${x.kind} #${x.position}${x.step != null ? ` (step ${x.step})` : ''}` : '–');
  const d = cli.sequence.diagnoses.find((x) => x.kind === 'hang' || x.kind === 'mismatch');
  const g = cli.sequence.groups.find((x) => x.pg === d.pg);
  assert.equal(rows.length, g.ranks.length);
  for (const r of g.ranks) {
    const row = rows.find((x) => x.rank === r.rank);
    assert.equal(row.n, r.records, `rank ${r.rank}: collectives`);
    assert.equal(row.named, d.ranks.includes(r.rank));
    assert.equal(row.completed, rec(r.last_completed));
    assert.equal(row.entered, rec(r.last_entered));
  }
  // Rank 1 skipped the loss all_reduce of step 3: it is already in step 4's first collective
  // while the others wait in step 3's.
  const entered = Object.fromEntries(rows.map((r) => [r.rank, r.entered]));
  for (const r of [0, 2, 3]) assert.notEqual(entered[r], entered[1], `rank ${r} against rank 1`);
  await shot(page, '37-zoo-hang-summary');
  // The finding opens the timeline on the divergence, marked on every rank of the group.
  await page.click('[data-testid=finding-open-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas');
  assert.equal(await page.locator('[data-testid=divergence-bar] .divergence-text').innerText(), d.sentence);
  let marks = await shownMarks(page, g.ranks.length);
  assert.ok(marks.every((m) => m.in_x), JSON.stringify(marks));
  // Ranks below the fold: scrolled into view, where their marks are drawn too.
  const seen = new Set(marks.filter((m) => m.visible).map((m) => m.rank));
  assert.ok(seen.has(Math.min(...g.ranks.map((r) => r.rank))), 'opened at the lowest rank');
  for (let i = 0; i < 10 && seen.size < g.ranks.length; i++) {
    await page.mouse.move(700, 500);
    await page.mouse.wheel(0, 300);
    await page.waitForTimeout(300);
    marks = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-marks'));
    for (const m of marks.filter((x) => x.visible)) seen.add(m.rank);
  }
  assert.equal(seen.size, g.ranks.length, `marks seen on ranks ${[...seen]}`);
  // The diagnosed group's divergence (the metrics group: ranks 0, 2 and 3 issued its loss
  // all_reduce and waited 8 s in it; rank 1 never issued it and went on to the next step's
  // gradient all_reduce, in the default group).
  const div = g.divergences[0];
  const sides = Object.fromEntries(div.sides.flatMap((s, k) => s.ranks.map((r) => [r, k])));
  const missing = (div.missing || []).map((x) => x.rank);
  for (const r of g.ranks) {
    const m = marks.find((x) => x.rank === r.rank);
    assert.ok(m && m.in_x, `rank ${r.rank}: ${JSON.stringify(marks)}`);
    assert.equal(m.named, d.ranks.includes(r.rank));
    const kind = sides[r.rank] === 0 ? 'issued' : missing.includes(r.rank) ? 'not_issued' : 'differs';
    assert.equal(m.kind, kind, `rank ${r.rank}`);
    if (kind === 'not_issued') continue; // a line where it stopped, as for an early exit
    // An 8 s wait in a window that shows every rank's: a band, not a hairline, and its label.
    assert.ok(m.x1 - m.x0 > 200, `rank ${r.rank}: ${m.x0}..${m.x1}`);
    assert.ok(m.shown.length > 20 && m.label.startsWith(m.shown.replace(/…$/, '').replace(/^⚠ /, '')), m.shown);
    assert.match(m.label, new RegExp(`^all_reduce #${div.position} of group \`${g.pg}\` \\(step 3\\) — waited 8\\.0\\d s$`));
  }
  const gone = div.missing.find((x) => x.rank === 1);
  assert.ok(gone, JSON.stringify(div));
  assert.equal(marks.find((m) => m.rank === 1).label,
    `never issued all_reduce #${div.position} of group \`${g.pg}\`; last: all_reduce #${gone.last.position} of group \`${g.pg}\` (step ${gone.last.step})`);
  await page.click('[data-testid=divergence-show]');
  await page.waitForTimeout(800);
  await shot(page, '41-zoo-hang-timeline');
  await page.close();
});

/** The timeline's divergence marks (the canvas' data-marks), once `n` are drawn. */
async function shownMarks(page, n) {
  await page.waitForFunction((k) => {
    const c = document.querySelector('[data-testid=timeline] canvas');
    return c && JSON.parse(c.dataset.marks || '[]').length === k;
  }, n, { timeout: 30_000 });
  await page.waitForTimeout(500);
  return JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-marks'));
}

test('a real early exit (zoo): the timeline marks where the rank that never issued the collective stopped', async () => {
  const dir = path.join(ROOT, 'tests/zoo/early_exit');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(dir, f));
  const cli = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const div = cli.sequence.groups[0].divergences[0];
  assert.equal(div.class, 'not_issued');
  const { page } = await openWith(files);
  await page.click('[data-testid=nav-timeline]');
  await page.click('[data-testid=divergence-show]');
  const marks = await shownMarks(page, 4);
  for (const m of marks) assert.ok(m.in_x, JSON.stringify(m));
  const gone = div.missing[0];
  const m = marks.find((x) => x.rank === gone.rank);
  assert.equal(m.kind, 'not_issued');
  assert.equal(m.label, `never issued all_reduce #${div.position}; last: all_reduce #${gone.last.position} (step ${gone.last.step})`);
  // It stopped before the others began to wait: its line is left of their bands.
  for (const w of marks.filter((x) => x.rank !== gone.rank)) assert.ok(m.x0 <= w.x0, `${m.x0} vs ${w.x0}`);
  await shot(page, '42-zoo-early-exit-timeline');
  await page.close();
});

test('a real pipeline with a slow stage (zoo): the bubble finding first, the Pipeline view shows each stage against the formula', async () => {
  const dir = path.join(ROOT, 'tests/zoo/pipeline_slow_stage');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json.gz')).sort().map((f) => path.join(dir, f));
  const cli = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const { page } = await openWith(files);
  await page.click('[data-testid=nav-summary]');
  const lead = page.locator('[data-testid=finding]').first();
  assert.equal(await lead.getAttribute('data-id'), 'pipeline_bubble');
  assert.equal(await lead.getAttribute('data-ranks'), '2');
  assert.equal(await page.locator('[data-testid=finding][data-id=straggler]').count(), 0);
  await page.click('[data-testid=nav-pipeline]');
  await page.waitForSelector('[data-testid=stage-bars]');
  const bars = await page.$$eval('[data-testid=stage-bar]', (els) => els.map((e) => ({ stage: +e.dataset.stage, share: +e.dataset.bubbleShare })));
  assert.equal(bars.length, cli.pipeline.per_stage.length);
  for (const s of cli.pipeline.per_stage) {
    const b = bars.find((x) => x.stage === s.stage);
    assert.ok(Math.abs(b.share - s.bubble_share) < 1e-4, `stage ${s.stage}: ${b.share} vs ${s.bubble_share}`);
  }
  assert.match(await page.locator('[data-testid=stage-row].named').innerText(), /slowest/);
  assert.equal(await page.locator('[data-testid=stage-row].named').getAttribute('data-stage'), String(cli.pipeline.slowest_stage));
  assert.ok(await page.locator('[data-testid=p2p-link]').count() >= 6, 'both directions of the three links');
  // One step drawn stages × time: a row per stage, its bubbles hatched, forward and backward
  // told apart (the run is annotated), the step's bubble share the CLI's; the picker switches.
  const diagram = async () => {
    const step = +(await page.getAttribute('[data-testid=pipeline-diagram]', 'data-step'));
    const rows = await page.$$eval('[data-testid=pipe-row]', (els) => els.map((e) => ({
      stage: +e.dataset.stage, share: +e.dataset.bubbleShare, bubbles: e.querySelectorAll('[data-testid=pipe-bubble]').length,
      fwd: e.querySelectorAll('[data-kind=forward]').length, bwd: e.querySelectorAll('[data-kind=backward]').length,
      wait: e.querySelectorAll('[data-kind=recv_wait]').length,
    })));
    return { step, rows };
  };
  const steps = [...new Set(cli.pipeline.steps.map((s) => s.step))].sort((a, b) => a - b);
  const first = await diagram();
  assert.ok(steps.includes(first.step), `${first.step} of ${steps}`);
  const checkStep = ({ step, rows }) => {
    assert.deepEqual(rows.map((r) => r.stage), cli.pipeline.stages.map((_, i) => i));
    for (const r of rows) {
      const want = cli.pipeline.steps.find((s) => s.step === step && s.stage === r.stage);
      assert.ok(Math.abs(r.share - want.bubble_share) < 1e-4, `step ${step} stage ${r.stage}`);
      assert.ok(r.bubbles > 0 && r.wait > 0, `step ${step} stage ${r.stage}: ${JSON.stringify(r)}`);
      assert.ok(r.fwd >= want.micro_batches && r.bwd >= want.micro_batches, `step ${step} stage ${r.stage}: ${JSON.stringify(r)}`);
    }
  };
  checkStep(first);
  await shot(page, '38-zoo-pipeline-view');
  const other = steps.find((s) => s !== first.step);
  await page.selectOption('[data-testid=pipeline-step]', String(other));
  await page.waitForSelector(`[data-testid=pipeline-diagram][data-step="${other}"]`);
  checkStep(await diagram());
  await page.close();
});

test('Flight Recorder dumps dropped with the traces of a real hang: the report is in the Summary, the exports are the CLI\'s', async () => {
  const dir = path.join(ROOT, 'tests/zoo/hang_skipped_allreduce');
  const names = fs.readdirSync(dir).sort();
  const files = names.filter((f) => f.endsWith('.json.gz') || f.endsWith('.pkl')).map((f) => path.join(dir, f));
  const { page } = await openWith(files);
  await page.click('[data-testid=nav-summary]');
  assert.equal(await page.locator('[data-testid=rank-row]').count(), 4, 'the dumps are not ranks');
  const diag = await page.$$eval('[data-testid=fr-diagnosis]', (els) => els.map((e) => ({ kind: e.dataset.kind, ranks: e.dataset.ranks, text: e.textContent })));
  assert.ok(diag.some((d) => d.kind === 'hang' && /rank 1 never issued it/.test(d.text)), JSON.stringify(diag));
  const strip = (t) => t.replaceAll(dir + '/', '');
  const cli = (flag) => strip(execFileSync(BIN, ['analyze', flag, ...files], { maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const json = await download(page, '[data-testid=export-json]');
  assert.equal(json.bytes.toString(), cli('--json'));
  assert.ok(JSON.parse(json.bytes.toString()).flight_recorder.dumps.length === 4);
  const md = await download(page, '[data-testid=export-md]');
  assert.equal(md.bytes.toString(), cli('--md'));
  await shot(page, '39-zoo-hang-with-dumps');
  await page.close();
  // The dumps alone: the report is the page.
  const alone = await openWith(files.filter((f) => f.endsWith('.pkl')));
  await alone.page.waitForSelector('[data-testid=flight-recorder]');
  assert.ok(await alone.page.locator('[data-testid=fr-diagnosis][data-kind=hang]').count() >= 1);
  assert.equal(await alone.page.locator('[data-testid=fr-group]').count(), 2);
  await shot(alone.page, '40-zoo-dumps-alone');
  await alone.page.close();
});

test('a heatmap cell opens the timeline at that rank and step', async () => {
  const { page } = await openWith(traces('ddp-gloo-cpu-4rank'));
  await page.click('[data-testid=nav-steps]');
  await page.click('[data-testid=metric-idle]');
  assert.equal(await page.getAttribute('[data-testid=heatmap]', 'data-metric'), 'idle');
  // The canvas: the tooltip names the cell under the pointer, a click opens it.
  const step = String((await heatLayout(page)).steps[1]);
  const at = await pointAtCell(page, 2, Number(step));
  await page.mouse.move(at.x, at.y);
  const want = await page.getAttribute(`[data-testid=heat-cell][data-rank="2"][data-step="${step}"]`, 'data-value');
  const tip = await page.locator('[data-testid=heatmap-tip]').innerText();
  assert.match(tip, new RegExp(`^rank 2 · step ${step}\nIdle: `));
  assert.ok(want !== null);
  await shot(page, '31a-gloo-heatmap-hover');
  await page.mouse.click(at.x, at.y);
  await page.waitForSelector('[data-testid=timeline] canvas');
  assert.equal(await page.getAttribute('[data-testid=timeline]', 'data-focus-rank'), '2');
  const h = new URLSearchParams((await page.evaluate(() => location.hash)).slice(1));
  assert.equal(h.get('view'), 'timeline');
  assert.equal(h.get('rank'), '2');
  assert.equal(h.get('step'), step);
  await page.waitForTimeout(800);
  await shot(page, '31-gloo-timeline-from-heatmap');
  await page.close();
});

/** A CLI command's JSON output, whatever its exit code (findings make `nccl` exit 1). */
function cliOut(...args) {
  const r = spawnSync(BIN, args, { maxBuffer: 64 << 20 });
  return JSON.parse(r.stdout.toString());
}

/** Clicks `selector` and returns the downloaded file's bytes and suggested name. */
async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download', { timeout: 60_000 }), page.click(selector)]);
  const file = await d.path();
  return { name: d.suggestedFilename(), bytes: fs.readFileSync(file) };
}

test('exports: JSON, CSV and Markdown are the CLI\'s; the merged trace is the CLI\'s and parses back', async () => {
  const files = traces('param-dlrm-8rank');
  const dir = path.dirname(files[0]) + '/';
  const { page } = await openWith(files);
  await page.click('[data-testid=nav-summary]');
  // The CLI names files by the paths it was given; the browser knows only their names.
  const cli = (...flags) => analyze(files, ...flags).replaceAll(dir, '');
  const json = await download(page, '[data-testid=export-json]');
  assert.equal(json.name, 'rankscope-analysis.json');
  assert.equal(json.bytes.toString(), cli('--json'));
  const csv = await download(page, '[data-testid=export-csv]');
  assert.equal(csv.bytes.toString(), cli('--csv'));
  const md = await download(page, '[data-testid=export-md]');
  assert.equal(md.bytes.toString(), cli('--md'));

  const merged = await download(page, '[data-testid=export-trace]');
  assert.equal(merged.name, 'rankscope-merged-trace.json');
  await page.waitForSelector('[data-testid=export-status]:has-text("saved")');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-merged-'));
  const want = path.join(tmp, 'cli.json');
  analyze(files, '--merged-trace', want);
  assert.ok(merged.bytes.equals(fs.readFileSync(want)), 'the merged trace is byte for byte the CLI\'s');
  const doc = JSON.parse(merged.bytes.toString());
  const procs = doc.traceEvents.filter((e) => e.ph === 'M' && e.name === 'process_name');
  assert.deepEqual(procs.map((e) => e.pid).sort(), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal(new Set(procs.map((e) => e.pid)).size, 8, 'one process per rank');
  // Per rank, as many slices and instants as the rank's event table has rows.
  const rows = JSON.parse(execFileSync(BIN, ['inspect', '--json', ...files], { maxBuffer: 64 << 20 }).toString());
  const counts = {};
  for (const e of doc.traceEvents) if (e.ph === 'X' || e.ph === 'i') counts[e.pid] = (counts[e.pid] ?? 0) + 1;
  const shownRows = await page.$$eval('[data-testid=rank-row]', (rs) => rs.map((r) => [Number(r.dataset.rank), Number(r.dataset.rows)]));
  for (const [rank, n] of shownRows) assert.equal(counts[rank], n, `rank ${rank}: events in the merged trace`);
  assert.equal(rows.files.length, 8);
  assert.deepEqual(doc.otherData.rankscope.alignment.map((x) => x.rank), [0, 1, 2, 3, 4, 5, 6, 7]);
  fs.rmSync(tmp, { recursive: true, force: true });
  await shot(page, '21-dlrm-summary-exported');

  // Search by name highlights matches; their count is every rank's events with that name.
  await page.click('[data-testid=nav-timeline]');
  await page.fill('[data-testid=timeline-search]', 'nccl');
  await page.waitForSelector('[data-testid=search-count]');
  await page.waitForFunction((n) => Number(document.querySelector('[data-testid=search-count]').dataset.count) === n,
    doc.traceEvents.filter((e) => (e.ph === 'X' || e.ph === 'i') && e.name.toLowerCase().includes('nccl')).length);
  await page.waitForTimeout(500);
  await shot(page, '22-dlrm-timeline-search');
  await page.fill('[data-testid=timeline-search]', '');

  // Clicking a kernel selects it and shows its launch → kernel flow.
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  const layout = JSON.parse(await canvas.getAttribute('data-layout'));
  const gpu = layout.find((l) => l.rank === 0 && l.gpu);
  assert.ok(gpu, 'rank 0 has a GPU stream');
  let linked = false;
  for (let x = 200; x < box.width - 10 && !linked; x += 7) {
    await page.mouse.move(box.x + x, box.y + gpu.y + 7);
    await page.waitForTimeout(40);
    await page.mouse.down();
    await page.mouse.up();
    linked = (await page.locator('[data-testid=args-flow]').count()) > 0;
  }
  assert.ok(linked, 'a kernel of rank 0 was selected with its flow');
  await page.mouse.move(box.x + 100, box.y + box.height - 20);
  await page.waitForTimeout(300);
  await shot(page, '23-dlrm-timeline-selected');
  const png = await download(page, '[data-testid=export-png]');
  assert.equal(png.name, 'rankscope-timeline.png');
  assert.ok(png.bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'a PNG');
  assert.ok(png.bytes.length > 10_000);
  await page.close();
});

test('one large file is read on every worker: the analysis and the merged trace are the CLI\'s; a doubt reads it alone', async () => {
  // About 40 MB of text: above the size at which the page cuts a file read alone into pieces
  // for its other workers (pool.rs SPLIT_MIN_BYTES; gzip counted at 8x its size).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-split-'));
  execFileSync(BIN, ['synth', '--ranks', '1', '--target-mb', '40', '--seed', '12', '--out', dir]);
  const plain = path.join(dir, 'rank0.pt.trace.json');
  const gz = `${plain}.gz`;
  execFileSync('sh', ['-c', `gzip -1 -c '${plain}' > '${gz}'`]);
  // The same trace with one `B`/`E` pair in the middle: a pair may straddle a cut, so the
  // pieces doubt and the file is read again alone.
  const doc = JSON.parse(fs.readFileSync(plain, 'utf8'));
  const mid = doc.traceEvents[doc.traceEvents.length >> 1];
  doc.traceEvents.splice(doc.traceEvents.length >> 1, 0,
    { ph: 'B', name: 'user span', pid: mid.pid, tid: mid.tid, ts: mid.ts },
    { ph: 'E', name: 'user span', pid: mid.pid, tid: mid.tid, ts: mid.ts + 1 });
  const paired = path.join(dir, 'paired.pt.trace.json');
  fs.writeFileSync(paired, JSON.stringify(doc, null, 1));
  assert.ok(fs.statSync(paired).size > 32 * 1024 * 1024, 'large enough to be cut: the doubt is met, not avoided');
  // The same trace with one event whose argument is a 9 MB string in the middle: longer than
  // the cuts are apart plus the window a seam is looked for in, so some cut has no seam once
  // ranges are already handed on, and the file is read again alone.
  doc.traceEvents.splice(doc.traceEvents.length >> 1, 2,
    { ph: 'X', name: 'long args', pid: mid.pid, tid: mid.tid, ts: mid.ts, dur: 1, args: { note: 'x'.repeat(9_000_000) } });
  const long = path.join(dir, 'long.pt.trace.json');
  fs.writeFileSync(long, JSON.stringify(doc, null, 1));
  for (const [file, split] of [[plain, true], [gz, true], [paired, false], [long, false]]) {
    const { page, ms } = await openWith([file]);
    const workers = await page.evaluate(() => navigator.hardwareConcurrency);
    const status = await page.textContent('[data-testid=file-row] .status');
    console.log(`${path.basename(file)} (${(fs.statSync(file).size / 1e6).toFixed(1)} MB): ready in ${ms} ms, ${status}`);
    if (split && workers > 1) assert.match(status, /read on [2-9]\d* workers/);
    else assert.doesNotMatch(status, /workers/);
    const json = await download(page, '[data-testid=export-json]');
    assert.equal(json.bytes.toString(), analyze([file], '--json').replaceAll(dir + '/', ''), `${file}: the analysis`);
    const merged = await download(page, '[data-testid=export-trace]');
    const want = path.join(dir, 'cli-merged.json');
    analyze([file], '--merged-trace', want);
    assert.ok(merged.bytes.equals(fs.readFileSync(want)), `${file}: the merged trace is byte for byte the CLI's`);
    if (split) await shot(page, '23-one-file-every-worker');
    await page.close();
  }
  // `?workers=1` (a dashboard leaving cores to its own page): the same file on one worker, the
  // same analysis.
  {
    const { page } = await openFiles(context, new URL('?workers=1', origin).href, [plain], pageErrors);
    assert.doesNotMatch(await page.textContent('[data-testid=file-row] .status'), /workers/);
    assert.equal(page.workers().length, 1, 'one worker alive: the warm-up stopped, no helper started');
    const json = await download(page, '[data-testid=export-json]');
    assert.equal(json.bytes.toString(), analyze([plain], '--json').replaceAll(dir + '/', ''), '?workers=1: the analysis');
    await page.close();
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the raw / aligned clock toggle is kept in the URL hash', async () => {
  const { page } = await openWith(traces('ddp-gloo-cpu-4rank'));
  await page.click('[data-testid=nav-timeline]');
  assert.equal(await page.getAttribute('[data-testid=timeline]', 'data-clock'), 'aligned');
  await page.click('[data-testid=clock-raw]');
  assert.equal(await page.getAttribute('[data-testid=timeline]', 'data-clock'), 'raw');
  assert.match(await page.evaluate(() => location.hash), /clock=raw/);
  await page.click('[data-testid=clock-aligned]');
  assert.doesNotMatch(await page.evaluate(() => location.hash), /clock=raw/);
  await page.close();
});

test('Fabric: NCCL logs and nccl-tests output dropped with the traces; the analysis places the collectives against them', async () => {
  const traceFiles = traces('ddp-gloo-cpu-4rank');
  const tests = path.join(SHARED, 'nccl-tests', 'xxrjun_h100_1node-8gpu_multi-collective.txt');
  const log = path.join(SHARED, 'nccl-logs', 'ssbandjl_2node-4rank-v100-RoCE_nccl2.26.6-PATCHED-mixed-format.log');
  const files = [...traceFiles, tests, log];
  const { page } = await openWith(files);
  // Recognised by content: the two text files are not ranks.
  await page.click('[data-testid=nav-summary]');
  assert.equal(await page.locator('[data-testid=rank-row]').count(), 4);
  // The analysis is `rankscope analyze` on the same files (the log is not its input there either).
  const strip = (t) => t.replaceAll(path.dirname(traceFiles[0]) + '/', '').replaceAll(path.dirname(tests) + '/', '')
    .replaceAll(path.dirname(log) + '/', '');
  const json = await download(page, '[data-testid=export-json]');
  const cliJson = strip(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  assert.equal(json.bytes.toString(), cliJson);
  assert.ok(JSON.parse(cliJson).fabric.length > 0, 'the join has rows');
  await page.click('[data-testid=nav-fabric]');
  await page.waitForSelector('[data-testid=fabric]');
  const nccl = cliOut('nccl', '--json', log);
  const perf = cliOut('nccl-tests', '--json', tests, log);
  assert.equal(await page.locator('[data-testid=fabric-rank]').count(), nccl.ranks.length);
  const ids = await page.$$eval('[data-testid=fabric-finding]', (els) => els.map((e) => e.dataset.id));
  assert.deepEqual(ids, [...nccl.findings.map((f) => f.id), ...perf.findings.map((f) => f.id)]);
  const charts = await page.$$eval('[data-testid=fabric-chart]', (els) => els.map((e) => ({
    collective: e.dataset.collective, points: Number(e.dataset.points), alpha: e.dataset.alphaUs ? Number(e.dataset.alphaUs) : null,
  })));
  assert.deepEqual(charts, perf.tests.map((t) => ({
    collective: t.collective ?? 'unknown collective', points: t.rows.filter((r) => r.size_bytes > 0).length,
    alpha: t.analysis?.fit ? t.analysis.fit.alpha_us : null,
  })));
  assert.equal(await page.locator('[data-testid=fabric-join] tbody tr').count(), JSON.parse(cliJson).fabric.length);
  await shot(page, '40-fabric');
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await shot(page, '41-fabric-charts');
  await page.close();
});

test('Fabric alone: an NCCL log without traces', async () => {
  const log = path.join(SHARED, 'nccl-logs', 'aws-hpc-tutorials_2node-a10g_NET-Socket_nccl2.11.4.log');
  const { page } = await openWith([log]);
  await page.waitForSelector('[data-testid=fabric]');
  const nccl = cliOut('nccl', '--json', log);
  // This log holds an all_reduce_perf table too: it is read as nccl-tests output as well.
  const perf = cliOut('nccl-tests', '--json', log);
  assert.ok(perf.tests.length > 0);
  const ids = await page.$$eval('[data-testid=fabric-finding]', (els) => els.map((e) => e.dataset.id));
  assert.deepEqual(ids, [...nccl.findings.map((f) => f.id), ...perf.findings.map((f) => f.id)]);
  assert.ok(ids.includes('log.net-socket-multinode') || ids.some((i) => i.includes('socket')), `NET/Socket is named: ${ids}`);
  await shot(page, '42-fabric-log-only');
  await page.close();
});

test('Fabric: the peer transport matrix of a 16-rank EFA job', async () => {
  const log = path.join(SHARED, 'nccl-logs', 'aws-efa-eks_2node-16rank-p4d_EFA-OFI_nccl2.9.9.log');
  const { page } = await openWith([log]);
  await page.waitForSelector('[data-testid=peer-matrix]');
  const nccl = cliOut('nccl', '--json', log);
  const n = Math.max(...nccl.peers.map((p) => Math.max(p.from_rank, p.to_rank))) + 1;
  assert.equal(await page.locator('[data-testid=peer-matrix] tbody tr').count(), n);
  const cells = await page.$$eval('[data-testid=peer-matrix] tbody tr', (rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.title)));
  for (const p of nccl.peers) {
    for (const t of p.transports) assert.ok(cells[p.from_rank][p.to_rank].split(', ').includes(t), `${p.from_rank} → ${p.to_rank}: ${t}`);
  }
  await shot(page, '43-fabric-peer-matrix');
  await page.close();
});

test('no request leaves the page\'s origin, and nothing failed on the page', () => {
  assert.ok(requests.length > 0);
  const outside = outsideOrigin(requests, origin);
  assert.deepEqual(outside, []);
  assert.deepEqual(pageErrors, []);
});
