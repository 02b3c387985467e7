// End-to-end tests of the timeline's pins, collective members and lead path (issue 37): a rank
// pinned from its header stays under the ruler while the others scroll and zoom, and the URL
// hash keeps it; a collective kernel selected on one rank lists its members on the others, and
// a click on one selects that rank's kernel (checked against the raw trace file of that rank);
// the lead finding's path is drawn (pixels of its colour appear and go with the toggle) on the
// step the CLI's analysis names. Screenshots go to target/e2e-screenshots/ (55…59-prefixed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { BIN, traces, startBrowser, stopBrowser, shot, openFiles } from './harness.mjs';

let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
});

/** A Kineto time (µs, maybe with decimals) in ns, exactly for whole µs (epoch µs times 1,000
 * pass 2^53). */
const nsOf = (us) => (Number.isInteger(Number(us)) ? BigInt(Number(us)) * 1000n : BigInt(Math.round(Number(us) * 1000)));

const GUTTER_W = 190;
const RULER_H = 22;

const headers = async (page) =>
  JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-headers'));

/** Waits until the rank headers satisfy `ok` (the canvas redraws on the next frame). */
async function headersUntil(page, ok, what) {
  for (let i = 0; i < 50; i += 1) {
    const h = await headers(page);
    if (ok(h)) return h;
    await page.waitForTimeout(100);
  }
  assert.fail(`headers never ${what}: ${JSON.stringify(await headers(page))}`);
}

/** How many canvas pixels are exactly `rgb` (the canvas' own pixels, device scale included). */
const pixelsOf = (page, rgb) =>
  page.evaluate((rgb) => {
    const c = document.querySelector('[data-testid=timeline] canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === rgb[0] && d[i + 1] === rgb[1] && d[i + 2] === rgb[2]) n += 1;
    return n;
  }, rgb);

/** The rgb of a CSS colour variable of the page (`#rrggbb`, or the app's fallback). */
async function cssRgb(page, name, fallback) {
  const v = (await page.evaluate((n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim(), name)) || fallback;
  const h = v.replace('#', '');
  return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16));
}

test('pins: a rank pinned from its header stays on top while the others scroll and zoom; the hash keeps it; a chip unpins it', async () => {
  const files = traces('param-dlrm-8rank');
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas[data-headers]');
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  let h = await headers(page);
  assert.equal(h.length, 8);
  const five = h.find((x) => x.rank === 5);
  assert.ok(five && !five.pinned);
  // Scroll until rank 5's header is in sight, then click its pin (the header's right end).
  for (let i = 0; i < 20 && !(five.shown); i += 1) {
    await page.mouse.move(box.x + 600, box.y + 300);
    await page.mouse.wheel(0, 200);
    await page.waitForTimeout(100);
    Object.assign(five, (await headers(page)).find((x) => x.rank === 5));
  }
  assert.ok(five.shown, 'rank 5 is in sight');
  await page.mouse.click(box.x + GUTTER_W - 20, box.y + five.y + 10);
  h = await headersUntil(page, (hs) => hs.some((x) => x.rank === 5 && x.pinned), 'pinned rank 5');
  assert.equal(h[0].rank, 5, 'the pinned rank is first');
  assert.equal(h[0].y, RULER_H, 'right under the ruler');
  assert.match(page.url(), /[#&]pins=5(&|$)/, 'the URL hash keeps the pin');
  await page.waitForSelector('[data-testid=pin-chip][data-rank="5"]');
  // The pin is drawn filled in the selection colour.
  assert.ok((await pixelsOf(page, await cssRgb(page, '--select', '#d81b60'))) > 50, 'the pin is drawn');
  await shot(page, '55-timeline-pinned');

  // Scroll the others to the bottom: rank 5 stays, rank 0 goes under it.
  await page.mouse.move(box.x + 600, box.y + 400);
  for (let i = 0; i < 15; i += 1) await page.mouse.wheel(0, 300);
  h = await headersUntil(page, (hs) => !hs.find((x) => x.rank === 0).shown, 'scrolled rank 0 away');
  assert.deepEqual(h.find((x) => x.rank === 5), { ...h.find((x) => x.rank === 5), y: RULER_H, pinned: true, shown: true });
  const zero = h.find((x) => x.rank === 0);
  const band = Math.max(...JSON.parse(await canvas.getAttribute('data-layout')).filter((l) => l.pinned).map((l) => l.y + l.h));
  assert.ok(zero.y < band, `rank 0 (at ${zero.y}) scrolled up under the pinned band (to ${band})`);
  // Zoom and pan: the pin stays.
  for (const k of ['w', 'w', 'w', 'd', 'd']) await page.keyboard.press(k);
  await page.waitForTimeout(500);
  h = await headers(page);
  assert.deepEqual(h.find((x) => x.rank === 5), { ...h.find((x) => x.rank === 5), y: RULER_H, pinned: true, shown: true });
  // A click on the pinned rank's lane selects its events (the band is live, not a picture).
  const layout = JSON.parse(await canvas.getAttribute('data-layout'));
  assert.ok(layout.filter((l) => l.rank === 5).every((l) => l.pinned), 'rank 5\'s lanes are pinned');
  await shot(page, '56-timeline-pinned-scrolled');

  // The chip unpins it: rank 5 goes back to its place.
  await page.click('[data-testid=pin-chip][data-rank="5"]');
  h = await headersUntil(page, (hs) => hs.every((x) => !x.pinned), 'unpinned');
  assert.deepEqual(h.map((x) => x.rank), [0, 1, 2, 3, 4, 5, 6, 7], 'rank order again');
  assert.doesNotMatch(page.url(), /pins=/);
  assert.deepEqual(pageErrors, []);
  await page.close();
});

test('members: a collective kernel lists its members on every rank; a click selects the member of another rank (its raw event)', async () => {
  const files = traces('param-dlrm-8rank');
  const inspect = JSON.parse(execFileSync(BIN, ['inspect', '--json', ...files], { maxBuffer: 64 << 20 }).toString());
  const fileOf = new Map(inspect.files.map((f) => [f.rank, f.file]));
  const { page } = await openFiles(context, origin, files, pageErrors);
  // The Collectives view opens the timeline at a collective's first execution, on its rank.
  await page.click('[data-testid=nav-collectives]');
  await page.click('[data-testid=collective-row]');
  await page.waitForSelector('[data-testid=timeline][data-focus-rank]');
  await page.waitForTimeout(600);
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  const rank = Number(await page.getAttribute('[data-testid=timeline]', 'data-focus-rank'));
  const head = (await headers(page)).find((x) => x.rank === rank);
  const lanes = JSON.parse(await canvas.getAttribute('data-layout')).filter((l) => l.rank === rank && l.gpu);
  const firstY = Math.min(...JSON.parse(await canvas.getAttribute('data-layout')).filter((l) => l.rank === rank).map((l) => l.y));
  // Click the middle of the window on each of the rank's GPU lanes until a member is selected.
  let found = false;
  for (const l of lanes) {
    const y = head.y + 20 + (l.y - firstY) + 7;
    for (const dx of [0, -6, 6, -14, 14]) {
      await page.mouse.move(box.x + GUTTER_W + (box.width - GUTTER_W) / 2 + dx, box.y + y);
      await page.waitForTimeout(60);
      await page.mouse.down();
      await page.mouse.up();
      if (await page.locator('[data-testid=members]').count()) { found = true; break; }
    }
    if (found) break;
  }
  assert.ok(found, `a collective kernel of rank ${rank} was selected`);
  const rows = await page.$$eval('[data-testid=member]', (rs) => rs.map((r) => ({
    rank: Number(r.dataset.rank), start: r.dataset.startNs, selected: r.dataset.selected === 'true',
    wait: r.querySelector('[data-testid=member-wait]').textContent, from: r.querySelector('[data-testid=member-start]').textContent,
  })));
  assert.ok(rows.length >= 2, 'members on several ranks');
  assert.equal(rows.filter((r) => r.selected).length, 1);
  assert.equal(rows.find((r) => r.selected).rank, rank, 'the selected member is the clicked rank\'s');
  assert.ok(rows.some((r) => r.from === '+0 ns' || /^\+0(\.0+)? /.test(r.from)), 'the first member starts at +0');
  const name = await page.textContent('[data-testid=args-name]');
  await shot(page, '57-timeline-members');

  // Jump to the member of another rank.
  const other = rows.find((r) => r.rank !== rank && !r.selected);
  await page.click(`[data-testid=member][data-rank="${other.rank}"] [data-testid=member-pick]`);
  await page.waitForSelector(`[data-testid=args-panel][data-rank="${other.rank}"]`);
  const panel = page.locator('[data-testid=args-panel]');
  assert.equal(await panel.getAttribute('data-start-ns'), other.start, 'the member\'s start');
  const otherName = await page.textContent('[data-testid=args-name]');
  // The raw trace of that rank has that event at that time (µs with three decimals).
  const raw = JSON.parse(fs.readFileSync(fileOf.get(other.rank), 'utf8')).traceEvents;
  const startNs = BigInt(other.start);
  const hit = raw.filter((e) => e.ph === 'X' && e.name === otherName && nsOf(e.ts) === startNs);
  assert.equal(hit.length, 1, `rank ${other.rank}'s trace has ${otherName} at ${startNs} ns`);
  assert.match(otherName, /nccl|all_?to_?all|all_?reduce|gather|scatter/i);
  assert.match(name, /nccl|all_?to_?all|all_?reduce|gather|scatter/i);
  // The timeline scrolled to that rank's member, and its row of the table is the selected one now.
  const sel = async () => JSON.parse(await canvas.getAttribute('data-selected'));
  await page.waitForTimeout(300);
  assert.deepEqual(await sel(), { ...(await sel()), rank: other.rank, shown: true }, 'the member is in sight');
  await page.waitForSelector(`[data-testid=member][data-rank="${other.rank}"][data-selected=true]`);
  await shot(page, '58-timeline-member-jump');
  // `]` steps to the next member (by rank, around).
  const ranks = rows.map((r) => r.rank);
  const next = ranks[(ranks.indexOf(other.rank) + 1) % ranks.length];
  await canvas.focus();
  await page.keyboard.press(']');
  await page.waitForSelector(`[data-testid=args-panel][data-rank="${next}"]`);
  await page.waitForTimeout(300);
  assert.deepEqual(await sel(), { ...(await sel()), rank: next, shown: true });
  await shot(page, '58b-timeline-member-next');
  assert.deepEqual(pageErrors, []);
  await page.close();
});

test('members from the host: the `nccl:` / `c10d::` op that issued a collective lists its members too', async () => {
  const files = traces('param-dlrm-8rank');
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-collectives]');
  // An all_reduce: its host op (`c10d::allreduce_` › `nccl:all_reduce`) runs just before it.
  const row = page.locator('[data-testid=collective-row][data-kind=all_reduce]').first();
  await row.click();
  await page.waitForSelector('[data-testid=timeline][data-focus-rank]');
  await page.waitForTimeout(600);
  const canvas = page.locator('[data-testid=timeline] canvas');
  const box = await canvas.boundingBox();
  const rank = Number(await page.getAttribute('[data-testid=timeline]', 'data-focus-rank'));
  const head = (await headers(page)).find((x) => x.rank === rank);
  const layout = JSON.parse(await canvas.getAttribute('data-layout')).filter((l) => l.rank === rank);
  const firstY = Math.min(...layout.map((l) => l.y));
  // Over the rank's CPU threads, left of the kernel (the window's middle), until a host
  // communication op is selected.
  let name = '';
  search: for (const l of layout.filter((x) => !x.gpu && x.h > 30)) {
    for (let d = 0; d * 14 < l.h - 3; d += 1) {
      const y = head.y + 20 + (l.y - firstY) + d * 14 + 7;
      if (y > box.height - 5) continue;
      for (let x = GUTTER_W + 8; x < GUTTER_W + (box.width - GUTTER_W) / 2; x += 24) {
        await page.mouse.move(box.x + x, box.y + y);
        await page.waitForTimeout(30);
        await page.mouse.down();
        await page.mouse.up();
        if (await page.locator('[data-testid=args-name]').count()) {
          name = await page.textContent('[data-testid=args-name]');
          if (/^(nccl:|c10d::)/.test(name) && (await page.locator('[data-testid=members]').count())) break search;
        }
      }
    }
  }
  assert.match(name, /^(nccl:|c10d::)/, 'a host communication op was selected');
  await page.waitForSelector('[data-testid=members]');
  const mine = page.locator(`[data-testid=member][data-rank="${rank}"]`);
  assert.equal(await mine.getAttribute('data-selected'), 'true', 'its rank\'s member is marked');
  await shot(page, '58c-timeline-members-from-host');
  // Its own rank's member is one click away: the kernel it launched.
  await mine.locator('[data-testid=member-pick]').click();
  await page.waitForFunction(() => /nccl|Kernel/i.test(document.querySelector('[data-testid=args-name]')?.textContent ?? '') &&
    !/^(nccl:|c10d::)/.test(document.querySelector('[data-testid=args-name]').textContent));
  assert.equal(await page.getAttribute('[data-testid=args-panel]', 'data-rank'), String(rank));
  assert.equal(await page.getAttribute('[data-testid=args-panel]', 'data-start-ns'), await mine.getAttribute('data-start-ns'));
  assert.deepEqual(pageErrors, []);
  await page.close();
});

test('lead path: the toggle draws the critical path of the step the CLI names; Findings opens it', async () => {
  const files = traces('param-dlrm-8rank');
  const a = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 256 << 20 }).toString());
  const lead = a.findings[0];
  const named = (lead?.steps ?? []).map((s) => a.critical_path.find((p) => p.step === s)).find(Boolean);
  const want = named ?? a.critical_path.reduce((m, p) => (m && m.length_ns >= p.length_ns ? m : p), null);
  assert.ok(want, 'the analysis has a critical path');
  const { page } = await openFiles(context, origin, files, pageErrors);
  await page.click('[data-testid=nav-timeline]');
  await page.waitForSelector('[data-testid=timeline] canvas[data-headers]');
  const pathRgb = await cssRgb(page, '--path', '#0097a7');
  assert.equal(await pixelsOf(page, pathRgb), 0, 'no path colour before the toggle');
  await page.click('[data-testid=path-toggle]');
  await page.waitForSelector('[data-testid=path-bar]');
  assert.equal(Number(await page.getAttribute('[data-testid=path-bar]', 'data-step')), want.step);
  assert.equal(Number(await page.getAttribute('[data-testid=path-bar]', 'data-hops')), want.hops.length);
  assert.match(page.url(), /[#&]path=1(&|$)/);
  await page.click('[data-testid=path-zoom]');
  await page.waitForTimeout(700);
  const drawn = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-path'));
  assert.equal(drawn.step, want.step);
  assert.ok(drawn.shown >= 1, `hops drawn in the window: ${JSON.stringify(drawn)}`);
  const ranks = new Set(want.hops.map((x) => x.rank));
  if (ranks.size > 1) assert.ok(drawn.edges >= 1, 'an arrow where the path moves to another rank');
  assert.ok((await pixelsOf(page, pathRgb)) > 100, 'the path is drawn in its colour');
  await shot(page, '59-timeline-lead-path');
  // Off again: no path colour left.
  await page.click('[data-testid=path-toggle]');
  await page.waitForSelector('[data-testid=path-bar]', { state: 'detached' });
  await page.waitForTimeout(300);
  assert.equal(await pixelsOf(page, pathRgb), 0);

  // From the Findings (on the Summary): the lead finding's button opens the timeline with the path drawn.
  await page.click('[data-testid=nav-summary]');
  await page.click('[data-testid=finding-show-path]');
  await page.waitForSelector('[data-testid=path-bar]');
  await page.waitForTimeout(700);
  const again = JSON.parse(await page.getAttribute('[data-testid=timeline] canvas', 'data-path'));
  assert.ok(again.shown >= 1, 'the path is in the window it opened');
  assert.ok((await pixelsOf(page, pathRgb)) > 100);
  await shot(page, '59b-findings-show-path');
  assert.deepEqual(pageErrors, []);
  await page.close();
});
