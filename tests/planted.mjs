// DLRM's eight ranks (../shared/traces/param-dlrm-8rank) with names planted where redaction must
// find them, as the CLI's export_redact test plants them: shared by the npm and the app tests.
import fs from 'node:fs';
import path from 'node:path';

/** What every planted name holds: no output of a redaction may contain it. */
export const MARK = 'ZQX';

/**
 * Writes into `out` the `.json` traces of `src` with markers planted in an annotation, a module,
 * a kernel, a process, a Python frame (with an arg when `arg`), a thread, the host and the file
 * names; returns `out`.
 */
export function plantNames(src, out, { arg = false } = {}) {
  fs.mkdirSync(out, { recursive: true });
  for (const f of fs.readdirSync(src).filter((x) => x.endsWith('.json')).sort()) {
    const text = fs.readFileSync(path.join(src, f), 'utf8')
      .replaceAll('## sparse_data_dist ##', `## ${MARK}annot sparse_dist ##`)
      .replaceAll('## KJTListSplitsAwaitable wait() ##', `nn.Module: ${MARK}SecretEmbedding_0`)
      .replaceAll('split_embedding_codegen', `${MARK}kern_codegen`)
      .replaceAll('"python3"', `"${MARK}proc"`);
    const v = JSON.parse(text);
    v.hostname = `${MARK}host-node17`;
    const step = v.traceEvents.find((e) => e.cat === 'user_annotation' && /^ProfilerStep/.test(e.name));
    const args = { 'Python id': 9, ...(arg ? { [`${MARK}argkey`]: `${MARK}argvalue` } : {}) };
    v.traceEvents.push(
      { ph: 'X', cat: 'python_function', name: `/home/${MARK}alice/proj/${MARK}model.py(42): forward`, pid: step.pid, tid: step.tid, ts: step.ts + 1, dur: 2, args },
      { ph: 'M', name: 'thread_name', pid: step.pid, tid: step.tid, args: { name: `${MARK}thread-loader` } },
    );
    fs.writeFileSync(path.join(out, f.replace('worker', `${MARK}box-worker`)), JSON.stringify(v));
  }
  return out;
}
