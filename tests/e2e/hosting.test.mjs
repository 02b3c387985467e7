// End-to-end tests of the ways rankscope is opened (issue 11): dist/ under a sub-path, and with
// a server that gets the MIME types wrong; dist/rankscope.html from file:// with no server; the
// app embedded by a host page on another origin (the embedding protocol, docs/embedding.md),
// and ignored by an untrusted one; "Open in Perfetto" posting the Perfetto archive to a Perfetto
// UI (a stand-in on another loopback port) that the CLI's archive equals byte for byte.
// Screenshots go to target/e2e-screenshots/ (5x-prefixed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, BIN, SHOTS, traces, launch, stopBrowser, shot, newPage as openPage } from './harness.mjs';
import { serve, policy } from './server.mjs';

const DIST = path.join(ROOT, 'dist');
const PREFIX = '/tools/rankscope/';
let context, profile;
const servers = [];
const requests = [];
const pageErrors = [];
// The app (its policy lets the two host pages frame it), two host pages, a stand-in Perfetto UI.
let app, host, stranger, perfetto;

before(async () => {
  host = await serve(DIST, 0, { csp: false, coop: false });
  stranger = await serve(DIST, 0, { csp: false, coop: false });
  perfetto = await serve(path.join(ROOT, 'tests/e2e/pages'), 0, { csp: false, coop: false });
  app = await serve(DIST, 0, { prefix: PREFIX, csp: policy(`'self' ${host.origin} ${stranger.origin}`) });
  servers.push(host, stranger, perfetto, app);
  ({ context, profile } = await launch({ requests, acceptDownloads: true }));
});

after(async () => {
  await stopBrowser({ context, profile });
  for (const s of servers) s.server.close();
});

const newPage = () => openPage(context, pageErrors, (page) => `${page.url()}: `);
const ready = (where) => where.locator('[data-testid=analysis-ready]').waitFor({ timeout: 120_000 });

/** `rankscope analyze --json` with the paths reduced to the names a browser sees. */
function cliJson(files) {
  const dir = path.dirname(files[0]) + '/';
  return execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 256 << 20 }).toString().replaceAll(dir, '');
}

test('dist/ under a sub-path: every URL is relative, the demo runs, nothing is asked of the origin\'s root', async () => {
  const page = await newPage();
  const mine = [];
  page.on('request', (r) => mine.push(r.url()));
  // Without the trailing slash the server redirects, as static servers do for a folder.
  await page.goto(app.url.slice(0, -1));
  assert.equal(page.url(), app.url);
  await page.click('[data-testid=open-demo]');
  await ready(page);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas');
  await page.waitForTimeout(600);
  await shot(page, '50-subpath-demo-timeline');
  const outside = mine.filter((u) => !u.startsWith(app.url) && u !== app.url.slice(0, -1) && !u.startsWith('data:') && !u.startsWith(`blob:${app.origin}`));
  assert.deepEqual(outside, []);
  assert.ok(mine.some((u) => u.endsWith(`${PREFIX}worker_loader.js`)), 'the workers start from the sub-path too');
  await page.close();
});

test('the bundled server answers a path it cannot parse with 400 and keeps serving', async () => {
  const get = (p) => new Promise((resolve, reject) => {
    const u = new URL(app.url);
    http.get({ host: u.hostname, port: u.port, path: p }, (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
  });
  assert.equal(await get('//?workers=1'), 400, 'read as a host by the URL parser');
  assert.equal(await get(`${PREFIX}%E0`), 400, 'no UTF-8');
  assert.equal(await get(`${PREFIX}?workers=1`), 200, 'still serving');
});

test('a server with wrong MIME types: .wasm still starts (with a note); .js gives a clear message, not a blank page', async () => {
  const wasm = await serve(DIST, 0, { types: { '.wasm': 'application/octet-stream' } });
  const js = await serve(DIST, 0, { types: { '.js': 'text/plain' } });
  servers.push(wasm, js);
  const page = await context.newPage();
  await page.goto(wasm.url);
  await page.waitForSelector('[data-testid=open-demo]');
  assert.match(await page.textContent('[data-testid=boot-warning]'), /application\/octet-stream.*not application\/wasm/);
  await page.click('[data-testid=open-demo]');
  await ready(page);
  await shot(page, '51-wrong-wasm-type');
  await page.goto(js.url);
  await page.waitForSelector('[data-testid=boot-late]', { state: 'visible', timeout: 15_000 });
  assert.match(await page.textContent('[data-testid=boot-late]'), /text\/javascript/);
  await shot(page, '52-wrong-js-type');
  await page.close();
});

test('rankscope.html from file:// analyses the DLRM traces with no server; its analysis is the CLI\'s', async () => {
  const single = path.join(DIST, 'rankscope.html');
  // README says how big the file is: it stays what the build makes (it said 1.6 MB at 3.6).
  const said = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').match(/`dist\/rankscope\.html` \(about ([0-9.]+) MB/);
  assert.ok(said, 'README says the size of dist/rankscope.html');
  const mb = fs.statSync(single).size / 1e6;
  assert.ok(Math.abs(mb - Number(said[1])) <= 0.1 * mb, `README says about ${said[1]} MB; the file is ${mb.toFixed(2)} MB`);
  const html = fs.readFileSync(single, 'utf8');
  const csp = html.match(/http-equiv="Content-Security-Policy" content="([^"]+)"/)[1];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /connect-src 'none'/);
  assert.doesNotMatch(csp, /'unsafe-inline'|'unsafe-eval'|https?:/);
  // A copy somewhere else on disk: the file needs nothing beside it.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-single-'));
  fs.copyFileSync(single, path.join(dir, 'rankscope.html'));
  const page = await newPage();
  const mine = [];
  page.on('request', (r) => mine.push(r.url()));
  await page.goto(pathToFileURL(path.join(dir, 'rankscope.html')).href);
  await page.waitForSelector('[data-testid=open-demo]');
  const files = traces('param-dlrm-8rank');
  await page.setInputFiles('[data-testid=file-input]', files);
  await ready(page);
  assert.equal(await page.locator('[data-testid=rank-row]').count(), 8);
  const [d] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=export-json]')]);
  assert.equal(fs.readFileSync(await d.path()).toString(), cliJson(files));
  await shot(page, '53-file-url-dlrm-summary');
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas');
  await page.waitForTimeout(800);
  await shot(page, '54-file-url-dlrm-timeline');
  assert.deepEqual(mine.filter((u) => !u.startsWith('file:') && !u.startsWith('blob:') && !u.startsWith('data:')), []);
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * The [start, end] of every event named `name` in a Chrome trace's text, as exact ns decimal
 * strings: the µs of `ts` and `dur` are read from the text (JSON.parse would round them to a
 * double) and shifted three digits.
 */
function exactSpans(text, name) {
  const quoted = text.replace(/"(ts|dur)":\s*(-?[0-9]+(?:\.[0-9]+)?)/g, '"$1": "$2"');
  const ns = (us) => {
    const [int, frac = ''] = us.split('.');
    return BigInt(int + (frac + '000').slice(0, 3));
  };
  return JSON.parse(quoted).traceEvents
    .filter((e) => e.name === name && e.ts !== undefined)
    .map((e) => [ns(e.ts), ns(e.ts) + ns(e.dur ?? '0')].map(String));
}

/** Collects the frame's protocol events on the host page. */
async function listen(page) {
  await page.evaluate(() => {
    window.events = [];
    window.addEventListener('message', (e) => { if (e.data && e.data.rankscope) window.events.push(e.data.rankscope); });
  });
}
const eventsOf = (page, kind) => page.evaluate((k) => window.events.filter((e) => e.event === k), kind);

test('embedded by a host page on another origin: files in, the analysis event is the CLI\'s JSON, the host steers, clicks come back', async () => {
  const page = await newPage();
  const appRequests = [];
  page.on('request', (r) => r.frame() !== page.mainFrame() && appRequests.push(r.url()));
  await page.goto(`${host.origin}/embed-example.html?app=${encodeURIComponent(app.url)}`);
  await listen(page);
  await page.waitForSelector('[data-testid=host-log]:has-text("rankscope is ready")');
  const frame = page.frameLocator('#rankscope');
  await frame.locator('[data-testid=embed-waiting]').waitFor();
  assert.equal(await frame.locator('.topbar').count(), 0, 'chrome-less');
  // The example's own file input: buffers read on the host page, transferred into the frame.
  const files = traces('param-dlrm-8rank');
  await page.setInputFiles('[data-testid=host-files]', files);
  await ready(frame);
  await page.waitForFunction(() => window.events.some((e) => e.event === 'analysis'));
  const [analysis] = await eventsOf(page, 'analysis');
  const want = cliJson(files);
  assert.equal(analysis.json, want, 'the analysis event carries `rankscope analyze --json` exactly');
  assert.deepEqual(analysis.report, JSON.parse(want));
  const progress = await eventsOf(page, 'progress');
  assert.ok(progress.length >= 2 && progress.at(-1).done === 8 && progress.at(-1).total === 8);
  assert.ok(progress.at(-1).files.every((f) => f.status === 'ready'));
  await page.waitForSelector('[data-testid=host-log]:has-text("analysis: 8 ranks")');
  await shot(page, '55-embedded-summary');

  // Steering: the example's button (rank 0's timeline), then a step of rank 3.
  await page.click('[data-testid=host-timeline]');
  await frame.locator('[data-testid=timeline] canvas').waitFor();
  assert.equal(await frame.locator('[data-testid=timeline]').getAttribute('data-focus-rank'), '0');
  const step = JSON.parse(want).steps[0].step;
  await page.evaluate((s) => rs.show({ view: 'timeline', rank: 3, step: s }), step);
  await frame.locator('[data-testid=timeline][data-focus-rank="3"]').waitFor();
  await page.evaluate(() => rs.show({ view: 'alignment' }));
  await frame.locator('[data-testid=alignment-table]').waitFor();
  await page.evaluate(() => rs.show({ view: 'timeline', rank: 0, t0_ns: 0, t1_ns: '2000000' }));
  await frame.locator('[data-testid=timeline] canvas').waitFor();
  // Rank 0's step, for something to click on.
  await page.evaluate((s) => rs.show({ view: 'timeline', rank: 0, step: s }), step);
  await frame.locator('[data-testid=timeline][data-focus-rank="0"]').waitFor();
  await frame.locator('[data-testid=timeline] canvas').scrollIntoViewIfNeeded();
  await page.waitForTimeout(800);

  // A click on an event of the timeline is a selection event on the host page.
  const canvas = frame.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  const layout = JSON.parse(await canvas.getAttribute('data-layout'));
  const lanes = layout.filter((l) => l.rank === 0);
  const before = (await eventsOf(page, 'selection')).length;
  let picked = null;
  for (const lane of lanes) {
    for (let x = 120; x < box.width - 10 && !picked; x += 9) {
      await page.mouse.move(box.x + x, box.y + lane.y + 7);
      await page.waitForTimeout(30);
      await page.mouse.down();
      await page.mouse.up();
      const sel = await eventsOf(page, 'selection');
      if (sel.length > before && sel.at(-1).name) picked = sel.at(-1);
    }
    if (picked) break;
  }
  assert.ok(picked, 'a click on an event was reported');
  assert.equal(picked.rank, 0);
  assert.ok(picked.t1_ns >= picked.t0_ns && typeof picked.name === 'string');
  assert.equal(typeof picked.t0_ns, 'number', 'the timeline\'s times are numbers (ns from the job\'s start)');
  // The event's own times are decimal strings, digit for digit what its trace says (epoch ns
  // are past 2^53: as JS numbers they would be rounded).
  assert.equal(typeof picked.start_ns, 'string');
  assert.equal(typeof picked.end_ns, 'string');
  assert.ok(BigInt(picked.start_ns) > 2n ** 53n, 'a time a JS number cannot hold exactly');
  const file = files.find((f) => path.basename(f) === picked.file);
  assert.ok(file, `the selection names its file (${picked.file})`);
  const spans = exactSpans(fs.readFileSync(file, 'utf8'), picked.name);
  assert.ok(spans.some(([a, b]) => a === picked.start_ns && b === picked.end_ns),
    `${picked.start_ns}–${picked.end_ns} is an event \`${picked.name}\` of ${picked.file} (${spans.slice(0, 3).join('; ')}…)`);
  await shot(page, '56-embedded-timeline-selected');

  // Streams: a second job, two files as buffers and two as ReadableStreams (transferred).
  const gloo = traces('ddp-gloo-cpu-4rank');
  const payload = gloo.map((f) => ({ name: path.basename(f), b64: fs.readFileSync(f).toString('base64') }));
  await page.evaluate(() => { window.events = []; });
  await page.evaluate((list) => {
    const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    return rs.open(list.map(({ name, b64 }, i) => (i % 2
      ? { name, stream: new Blob([bytes(b64)]).stream(), size: bytes(b64).length }
      : { name, buffer: bytes(b64).buffer })), 'gloo job');
  }, payload);
  await page.waitForFunction(() => window.events.some((e) => e.event === 'analysis'), null, { timeout: 120_000 });
  const [second] = await eventsOf(page, 'analysis');
  assert.equal(second.json, cliJson(gloo));
  assert.equal(await frame.locator('[data-testid=embed-title]').textContent(), 'gloo job');
  // A malformed message from the trusted host is answered with an error event.
  await page.evaluate(() => document.querySelector('#rankscope').contentWindow.postMessage({ rankscope: { show: { view: 'nope' } } }, rs.origin));
  await page.waitForFunction(() => window.events.some((e) => e.event === 'error'));
  assert.match((await eventsOf(page, 'error'))[0].message, /unknown view `nope`/);
  // A `show` that is not an object was ignored in silence before: now it is an error too, and
  // the example page shows it in its log.
  await page.evaluate(() => document.querySelector('#rankscope').contentWindow.postMessage({ rankscope: { show: 5 } }, rs.origin));
  await page.waitForFunction(() => window.events.filter((e) => e.event === 'error').length >= 2);
  assert.match((await eventsOf(page, 'error'))[1].message, /^show: expected an object \{view\?, rank\?, step\?, t0_ns\?, t1_ns\?\}, got 5$/);
  await page.evaluate(() => rs.show({ view: 'timeline', rank: 'three' }));
  await page.waitForFunction(() => window.events.filter((e) => e.event === 'error').length >= 3);
  assert.match((await eventsOf(page, 'error'))[2].message, /`rank` must be an integer .*"three"/);
  await page.waitForSelector('[data-testid=host-log]:has-text("error:  show: expected an object")');
  assert.equal(await frame.locator('[data-testid=embed-title]').textContent(), 'gloo job', 'the job is unchanged');
  // Everything the frame loaded came from the app's origin.
  assert.deepEqual(appRequests.filter((u) => !u.startsWith(app.url) && !u.startsWith('data:') && !u.startsWith('blob:')), []);
  await page.close();
});

test('a host page on an untrusted origin is ignored, and the frame counts it', async () => {
  const page = await newPage();
  // The frame is told to trust `host` only; this page is `stranger`.
  const appUrl = `${app.url}?origin=${encodeURIComponent(host.origin)}`;
  await page.goto(`${stranger.origin}/embed-example.html?app=${encodeURIComponent(appUrl)}`);
  await listen(page);
  const frame = page.frameLocator('#rankscope');
  await frame.locator('[data-testid=embed-waiting]').waitFor();
  await frame.locator('[data-testid=untrusted-count]').waitFor();
  await page.evaluate(() => document.querySelector('#rankscope').contentWindow.postMessage(
    { rankscope: { files: [{ name: 'x.json', buffer: new ArrayBuffer(8) }] } }, '*'));
  await page.waitForTimeout(1500);
  assert.ok(Number(await frame.locator('[data-testid=untrusted-count]').getAttribute('data-count')) >= 2);
  assert.match(await frame.locator('[data-testid=untrusted-count]').textContent(), new RegExp(stranger.origin.replace(/[.:/]/g, '\\$&')));
  assert.equal(await frame.locator('[data-testid=embed-waiting]').count(), 1, 'no job was started');
  assert.doesNotMatch(await page.textContent('[data-testid=host-log]'), /ready/, 'never answered PONG');
  assert.deepEqual(await page.evaluate(() => window.events), [], 'never told anything');
  await shot(page, '57-untrusted-host');
  await page.close();
});

test('a host page the app\'s server does not let frame it: after 10 s embed.js stops pinging and says why in an error event', async () => {
  // The app's frame-ancestors lists `host` and `stranger`, not this one.
  const blocked = await serve(DIST, 0, { csp: false, coop: false });
  servers.push(blocked);
  // Not `newPage`: the browser's own "Refused to frame" console error is the point here.
  const page = await context.newPage();
  const uncaught = [];
  page.on('pageerror', (e) => uncaught.push(e.message));
  // Timed on the page's own clock, from the call to `embed` to the error in the log: a loaded
  // machine can take tens of seconds to load the page, which is not the handshake's time.
  await page.addInitScript(() => {
    let value;
    Object.defineProperty(globalThis, 'rankscope', {
      configurable: true,
      get: () => value,
      set: (v) => {
        const embed = v.embed;
        v.embed = (...args) => { globalThis.embedCalledAt = performance.now(); return embed(...args); };
        value = v;
      },
    });
  });
  await page.goto(`${blocked.origin}/embed-example.html?app=${encodeURIComponent(app.url)}`);
  const log = page.locator('[data-testid=host-log]');
  await page.waitForFunction(() => {
    if (!document.querySelector('[data-testid=host-log]')?.textContent.includes('error:')) return false;
    globalThis.errorSeenAt ??= performance.now();
    return true;
  }, null, { timeout: 30_000, polling: 50 });
  const waited = await page.evaluate(() => globalThis.errorSeenAt - globalThis.embedCalledAt);
  assert.ok(waited >= 9_000 && waited < 16_000, `the error came after the documented 10 s (${waited} ms)`);
  const text = await log.textContent();
  assert.match(text, /did not answer within 10 s/);
  assert.match(text, /frame-ancestors does not list this page's origin/);
  assert.ok(text.includes(blocked.origin) && text.includes(app.origin), 'names both origins');
  assert.doesNotMatch(text, /rankscope is ready/);
  await shot(page, '57b-embed-handshake-timeout');
  assert.deepEqual(uncaught, [], 'the rejections are handled');
  await page.close();
});

test('a frame that never answers: with timeoutMs, error event, pinging stops, pending open and show reject', async () => {
  const page = await newPage();
  // The host page and the silent page are on one origin (the test pages' server).
  await page.goto(`${perfetto.origin}/silent-host.html?embed=${encodeURIComponent(`${host.origin}/embed.js`)}`);
  await page.waitForFunction(() => window.rankscope && window.rankscope.embed);
  const silent = `${perfetto.origin}/silent.html`;
  const out = await page.evaluate((silent) => new Promise((resolve) => {
    const rs = rankscope.embed(document.getElementById('f'), silent, { timeoutMs: 1500 });
    const got = { errors: [], rejected: [] };
    rs.on('error', (e) => got.errors.push(e));
    const t0 = performance.now();
    rs.open([{ name: 'a.json', buffer: new ArrayBuffer(8) }]).catch((e) => got.rejected.push(`open: ${e.message}`));
    rs.show({ view: 'summary' }).catch((e) => got.rejected.push(`show: ${e.message}`));
    rs.ready.catch(() => { got.ms = performance.now() - t0; setTimeout(() => resolve(got), 50); });
  }), silent);
  assert.ok(out.ms >= 1400 && out.ms < 5000, `after the 1.5 s asked for (${out.ms} ms)`);
  assert.equal(out.errors.length, 1);
  assert.equal(out.errors[0].file, null);
  assert.match(out.errors[0].message, /^the rankscope frame at http:\/\/127\.0\.0\.1:\d+\/silent\.html did not answer within 1\.5 s\. Likely causes: .*frame-ancestors.*appUrl is not rankscope.*\?origin=/);
  assert.deepEqual(out.rejected.map((r) => r.split(':')[0]).sort(), ['open', 'show']);
  assert.ok(out.rejected.every((r) => r.includes('did not answer')));
  // The silent page got PINGs, and no more once the time was up.
  const frame = page.frames().find((f) => f.url().startsWith(silent));
  const pings = await frame.evaluate(() => window.pings);
  assert.ok(pings >= 5, `pinged while waiting (${pings})`);
  await page.waitForTimeout(600);
  assert.equal(await frame.evaluate(() => window.pings), pings, 'no PING after the time-out');
  await page.close();
});

test('Perfetto: the archive is the CLI\'s; "Open in Perfetto" says where it goes, then posts it with Perfetto\'s protocol', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rankscope-perfetto-'));
  execFileSync(BIN, ['synth', '--out', dir, '--ranks', '4', '--steps', '3', '--straggler', '2']);
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.pt.trace.json')).sort().map((f) => path.join(dir, f));
  const tar = path.join(dir, 'cli.tar');
  const analysis = JSON.parse(execFileSync(BIN, ['analyze', '--json', '--perfetto', tar, ...files], { maxBuffer: 64 << 20 }));
  const cli = fs.readFileSync(tar);
  const ui = `${perfetto.origin}/fake-perfetto.html`;
  const page = await newPage();
  const mine = [];
  page.on('request', (r) => mine.push(r.url()));
  await page.goto(`${app.url}?perfetto=${encodeURIComponent(ui)}`);
  await page.setInputFiles('[data-testid=file-input]', files);
  await ready(page);
  assert.ok(analysis.alignment.some((a) => a.offset_ns !== 0), 'the synthetic clocks are skewed');

  const [d] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=export-perfetto]')]);
  assert.equal(d.suggestedFilename(), 'rankscope-perfetto.tar');
  assert.ok(fs.readFileSync(await d.path()).equals(cli), 'the app\'s archive is byte for byte the CLI\'s');

  // Nothing is sent before the second, explicit click, after the page says where it goes.
  await page.click('[data-testid=open-perfetto]');
  const confirm = page.locator('[data-testid=perfetto-confirm]');
  assert.match(await confirm.textContent(), new RegExp(`sends the Perfetto archive.*${perfetto.origin.replace(/[.:/]/g, '\\$&')}`));
  await shot(page, '58-open-in-perfetto-confirm');
  const [tab] = await Promise.all([context.waitForEvent('page'), page.click('[data-testid=perfetto-send]')]);
  await tab.waitForFunction(() => window.received, null, { timeout: 60_000 });
  const got = await tab.evaluate(() => window.received);
  await page.waitForSelector(`[data-testid=export-status]:has-text("sent to ${perfetto.origin}")`);
  assert.equal(got.from, app.origin);
  assert.equal(got.sha256, crypto.createHash('sha256').update(cli).digest('hex'), 'Perfetto got the CLI\'s archive');
  assert.equal(got.fileName, 'rankscope-perfetto.tar');
  assert.deepEqual(got.names, ['rank0.json', 'rank1.json', 'rank2.json', 'rank3.json', 'perfetto_manifest.json']);
  assert.ok(got.magic.every((m) => m === 'ustar'));
  const m = JSON.parse(got.manifest).perfetto_manifest;
  assert.equal(m.version, 1);
  const ref = analysis.alignment[0];
  for (const [k, f] of m.files.entries()) {
    const al = analysis.alignment[k];
    assert.equal(f.machine.name, `rank ${al.rank}`);
    if (k === 0) assert.equal(f.clocks, undefined);
    else assert.deepEqual(f.clocks, { sync_to: { file: 'rank0.json' }, offset_ns: ref.offset_ns - al.offset_ns });
  }
  await tab.screenshot({ path: path.join(SHOTS, '59-perfetto-stand-in.png') });
  await tab.close();
  // The app's own page asked nothing of any other origin (opening a tab and postMessage are not requests).
  assert.deepEqual(mine.filter((u) => !u.startsWith(app.url) && !u.startsWith('data:') && !u.startsWith(`blob:${app.origin}`)), []);
  await page.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('nothing failed on any page', () => {
  assert.ok(requests.length > 0);
  // The wrong-MIME pages' console errors are the point of that test; they are not recorded.
  assert.deepEqual(pageErrors, []);
});
