// The example host page's script (www/embed-example.html): the README's ten lines, plus a log.
const log = (s) => { document.getElementById('log').textContent += s + '\n'; };
const app = new URLSearchParams(location.search).get('app') || './';
const rs = rankscope.embed(document.getElementById('rankscope'), app);
rs.on('analysis', ({ report }) => log(`analysis: ${report.ranks.length} ranks, ${report.findings.length} findings`));
rs.on('selection', (s) => log(`selected: rank ${s.rank} ${s.name ?? ''} ${s.t0_ns}–${s.t1_ns} ns (own clock: ${s.start_ns} ns)`));
rs.on('comparison', ({ base, diff }) => log(`comparison: ${diff.verdict.line} (against ${base})`));
rs.on('error', (e) => log(`error: ${e.file ?? ''} ${e.message}`));
// open/show reject when the frame never answered; the 'error' event above has said why.
document.getElementById('files').onchange = async (ev) => rs.open(await Promise.all(
  [...ev.target.files].map(async (f) => ({ name: f.name, buffer: await f.arrayBuffer() })))).catch(() => {});
document.getElementById('timeline').onclick = () => rs.show({ view: 'timeline', rank: 0 }).catch(() => {});
rs.ready.then(() => log('rankscope is ready'), () => {});
