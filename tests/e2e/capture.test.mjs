// End-to-end test of the capture guide (issue 37, item 8): the landing page's "How to capture"
// opens with the settings and snippets README's section gives, and after a job is read the
// Summary lists what its traces lack, the same gaps `rankscope analyze --json` lists per rank
// (ranks[].capture_gaps, plus no_rank where the rank came from load order). Screenshots:
// target/e2e-screenshots/capture-*.png. No request leaves the page's origin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { BIN, traces, startBrowser, stopBrowser, shot, newPage, openFiles, outsideOrigin } from './harness.mjs';

let server, origin, context, profile;
const requests = [];
const pageErrors = [];

before(async () => {
  ({ server, origin, context, profile } = await startBrowser({ requests }));
});

after(async () => {
  await stopBrowser({ server, context, profile });
  assert.deepEqual(outsideOrigin(requests, origin), []);
  assert.deepEqual(pageErrors, []);
});

test('the landing page opens How to capture with its snippets', async () => {
  const page = await newPage(context, pageErrors);
  await page.goto(origin);
  await page.waitForSelector('[data-testid=capture-guide]');
  assert.equal(await page.isVisible('[data-testid=capture-guide-body]'), false, 'folded until asked');
  await page.click('[data-testid=capture-guide] summary');
  await page.waitForSelector('[data-testid=capture-guide-body]', { state: 'visible' });
  const text = await page.textContent('[data-testid=capture-guide-body]');
  for (const want of ['record_shapes=True', 'profile_memory=True', 'prof.step()', 'record_function("forward")',
    'NCCL_DEBUG=INFO', 'TORCH_NCCL_TRACE_BUFFER_SIZE', 'TORCH_NCCL_DUMP_ON_TIMEOUT', 'enable_profiling',
    '--use-pytorch-profiler', 'torch_profiler_dir']) {
    assert.ok(text.includes(want), `the guide names ${want}`);
  }
  await shot(page, 'capture-guide');
  await page.close();
});

test('the Summary lists what the DLRM traces lack, as the CLI does', async () => {
  const files = traces('param-dlrm-8rank');
  const { page } = await openFiles(context, origin, files, pageErrors);
  const report = JSON.parse(execFileSync(BIN, ['analyze', '--json', ...files], { maxBuffer: 1 << 30 }).toString());
  const want = new Set(report.ranks.flatMap((r) => [...r.capture_gaps, ...(r.rank_source === 'load_order' ? ['no_rank'] : [])]));
  assert.ok(want.size > 0);
  await page.waitForSelector('[data-testid=capture-gaps]');
  const shown = await page.$$eval('[data-testid=capture-gap]', (els) => els.map((e) => e.dataset.gap));
  assert.deepEqual(new Set(shown), want);
  assert.equal(shown.length, want.size, 'each gap once');
  const text = await page.textContent('[data-testid=capture-gaps]');
  assert.ok(text.includes('set profile_memory=True'), text);
  await page.$eval('[data-testid=capture-gaps]', (e) => e.scrollIntoView());
  await shot(page, 'capture-gaps-dlrm');
  await page.close();
});
