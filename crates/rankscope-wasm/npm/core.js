// rankscope's JavaScript API over the wasm build of the core (rankscope_wasm.js, made by
// wasm-bindgen). Everything that decides anything (what an input is, ranks, the analysis, the
// outputs) is the core's `session` / `job` API; this file only moves bytes: it reads each
// input in chunks, feeds them to a `JobInput`, and hands the inputs to a `Job`.
//
// The platform (how the .wasm is loaded, what a path string means) is set by the entry point:
// index.js for browsers, node.js for Node.

import init, { Diff as WasmDiff, Job as WasmJob, Runs as WasmRuns, JobInput, isFolderCandidate, detectKind, sniffBytes } from './rankscope_wasm.js';

/** Bytes fed to the core per call when the input is already in memory or read from a path. */
export const CHUNK_BYTES = 4 << 20;

let platform = {
  /** The argument for wasm-bindgen's init: undefined means "the .wasm beside this module". */
  wasm: async () => undefined,
  /** Expands path strings into sources; browsers have none. */
  paths: null,
};

/** Used by the entry points (index.js, node.js). */
export function setPlatform(p) {
  platform = { ...platform, ...p };
}

let loading = null;

/**
 * Loads and instantiates the wasm once. Called by `analyze` and `open`; call it yourself to
 * load early or to give the module's bytes / URL / `WebAssembly.Module` (a CSP, a CDN).
 */
export function ready(wasm) {
  if (!loading) {
    loading = (async () => {
      const source = wasm !== undefined ? wasm : await platform.wasm();
      await init(source === undefined ? undefined : { module_or_path: source });
    })();
    loading.catch(() => {
      loading = null;
    });
  }
  return loading;
}

/** The helpers the Node entry's folder walk uses (the core's rules for folder inputs). */
export const rules = {
  isFolderCandidate: (name) => isFolderCandidate(name),
  detectKind: (head) => detectKind(head),
  sniffBytes: () => sniffBytes(),
};

const isBlob = (x) => typeof Blob !== 'undefined' && x instanceof Blob;
const isStream = (x) => typeof ReadableStream !== 'undefined' && x instanceof ReadableStream;
const isBytes = (x) => x instanceof Uint8Array || x instanceof ArrayBuffer || ArrayBuffer.isView(x);
const isAsyncIterable = (x) => x != null && typeof x[Symbol.asyncIterator] === 'function';

function asBytes(x) {
  if (x instanceof Uint8Array) return x;
  if (x instanceof ArrayBuffer) return new Uint8Array(x);
  return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
}

/** In-memory bytes, fed in CHUNK_BYTES pieces (views, never copies on this side). */
async function* sliced(bytes) {
  for (let at = 0; at < bytes.length; at += CHUNK_BYTES) {
    yield bytes.subarray(at, Math.min(bytes.length, at + CHUNK_BYTES));
  }
}

/** A web ReadableStream read chunk by chunk (cancelled if the consumer stops early). */
async function* streamed(stream) {
  const reader = stream.getReader();
  const text = new TextEncoder();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        return;
      }
      yield typeof value === 'string' ? text.encode(value) : asBytes(value);
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

/** Any async iterable of byte chunks (a Node Readable, an fs stream). */
async function* iterated(it) {
  const text = new TextEncoder();
  for await (const value of it) yield typeof value === 'string' ? text.encode(value) : asBytes(value);
}

/**
 * One input as the reading loop sees it: `{ name, walked, size, chunks() }`.
 * Throws a TypeError for a value that is not an input (before anything is read).
 */
function sourceOf(data, name, walked = false) {
  if (isBytes(data)) {
    const b = asBytes(data);
    return [{ name, walked, size: b.length, chunks: () => sliced(b) }];
  }
  if (isBlob(data)) return [{ name, walked, size: data.size, chunks: () => streamed(data.stream()) }];
  if (isStream(data)) return [{ name, walked, size: null, chunks: () => streamed(data) }];
  if (isAsyncIterable(data)) return [{ name, walked, size: null, chunks: () => iterated(data) }];
  return null;
}

async function sources(inputs, ctx) {
  const list = Array.isArray(inputs)
    ? inputs
    : inputs != null && typeof inputs !== 'string' && !isBytes(inputs) && !isBlob(inputs) && !isStream(inputs)
        && typeof inputs[Symbol.iterator] === 'function'
      ? Array.from(inputs) // a FileList
      : [inputs];
  const out = [];
  for (const [i, x] of list.entries()) {
    const unnamed = `input${i}`;
    if (typeof x === 'string') {
      if (!platform.paths) throw new TypeError(`input ${i}: a path string can only be read in Node (give a File, Blob, ReadableStream or Uint8Array)`);
      out.push(...(await platform.paths(x, x, ctx)));
      continue;
    }
    if (x != null && typeof x === 'object' && 'data' in x && !isBlob(x) && !isBytes(x) && !isStream(x)) {
      const name = x.name != null ? String(x.name) : (x.data && typeof x.data.name === 'string' ? x.data.name : unnamed);
      if (typeof x.data === 'string') {
        if (!platform.paths) throw new TypeError(`input ${name}: a path string can only be read in Node`);
        out.push(...(await platform.paths(x.data, name, ctx)));
        continue;
      }
      const s = sourceOf(x.data, name);
      if (!s) throw new TypeError(`input ${name}: data must be a Blob, ReadableStream, Uint8Array, ArrayBuffer or async iterable of bytes`);
      out.push(...s);
      continue;
    }
    const name = x != null && typeof x.name === 'string' && x.name !== '' ? x.name : unnamed;
    const s = sourceOf(x, name);
    if (!s) throw new TypeError(`input ${i}: expected a File, Blob, ReadableStream, Uint8Array, {name, data}${platform.paths ? ' or a path' : ''}, got ${describe(x)}`);
    out.push(...s);
  }
  return out;
}

function describe(x) {
  if (x === null) return 'null';
  if (typeof x !== 'object') return typeof x;
  return x.constructor && x.constructor.name ? x.constructor.name : 'object';
}

function u32(what, v) {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n === 'bigint' ? n < 0n || n > 0xffffffffn : !Number.isInteger(n) || n < 0 || n > 0xffffffff) {
    throw new TypeError(`${what}: \`${v}\` is not a rank number`);
  }
  return Number(n);
}

function ns(what, v) {
  try {
    return BigInt(typeof v === 'string' ? v.trim() : v);
  } catch {
    throw new TypeError(`${what}: \`${v}\` is not a whole number of ns`);
  }
}

function pairs(x) {
  if (x == null) return [];
  if (x instanceof Map) return [...x.entries()];
  if (Array.isArray(x)) return x;
  if (typeof x === 'object') return Object.entries(x);
  throw new TypeError(`expected an object, a Map or an array of pairs, got ${describe(x)}`);
}

function configure(w, opts) {
  for (const [name, value] of pairs(opts.thresholds)) {
    if (typeof value !== 'number') throw new TypeError(`thresholds.${name}: expected a number, got ${describe(value)}`);
    w.setThreshold(String(name), value);
  }
  for (const [rank, off] of pairs(opts.offsets)) {
    w.setOffset(u32(`offsets: rank ${rank}`, rank), ns(`offsets.${rank}`, off));
  }
  for (const [file, rank] of pairs(opts.ranks)) w.setRank(String(file), u32(`ranks.${file}`, rank));
  if (opts.rules != null) w.setRules(typeof opts.rules === 'string' ? opts.rules : JSON.stringify(opts.rules));
  if (opts.layout != null) {
    if (typeof opts.layout !== 'string') throw new TypeError(`layout: expected a string, got ${describe(opts.layout)}`);
    w.setLayout(opts.layout);
  }
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/** Reads every source in turn into `w`. Single-threaded: one input at a time. */
async function read(w, list, onProgress) {
  const every = 100; // ms between progress calls within one input
  for (const [index, src] of list.entries()) {
    const input = new JobInput(src.name);
    let bytes = 0;
    let last = now();
    const tell = (events, kind, done) =>
      onProgress({ file: src.name, index, files: list.length, bytes, size: src.size, events: Number(events), kind: kind ?? null, done });
    try {
      for await (const chunk of src.chunks()) {
        input.feed(chunk);
        bytes += chunk.length;
        if (input.failed()) break;
        if (onProgress && now() - last >= every) {
          last = now();
          tell(input.progress().events, input.kind(), false);
        }
      }
    } catch (e) {
      input.free();
      // A message that is already whole (a path that cannot be opened) is kept as it is.
      w.fail(src.name, e && e.whole ? e.message : `${src.name}: read error: ${e && e.message ? e.message : e}`);
      if (onProgress) tell(0, null, true);
      continue;
    }
    const { events } = input.progress();
    const added = w.add(input, src.walked);
    input.free();
    if (onProgress) tell(events, added.kind, true);
  }
}

async function run(inputs, opts, keepTables) {
  if (opts == null || typeof opts !== 'object') opts = {};
  await ready(opts.wasm);
  const w = new WasmJob(keepTables);
  try {
    configure(w, opts);
    const ctx = { notes: [] };
    const list = await sources(inputs, ctx);
    await read(w, list, opts.onProgress);
    w.finish();
    return { w, notes: [...ctx.notes, ...w.notes()] };
  } catch (e) {
    w.free();
    throw e;
  }
}

/**
 * Analyses a job: resolves to exactly the object `rankscope analyze --json` prints for the
 * same inputs (`JSON.parse` of its output). Inputs that are not ours are skipped (walked) or
 * failed (named), reported through `onNote`, never thrown; it throws only on bad options, an
 * explicit rank naming no input, or when no input is a trace or Flight Recorder dump.
 */
export async function analyze(inputs, opts = {}) {
  const { w, notes } = await run(inputs, opts, false);
  try {
    if (typeof opts.onNote === 'function') {
      for (const n of notes) opts.onNote(n);
      for (const f of w.failed()) opts.onNote(f.error);
    }
    return JSON.parse(w.json());
  } finally {
    w.free();
  }
}

/** The outputs of `diff`, as `rankscope diff` writes them (`--json` is parsed). */
const DIFF_OUTPUTS = {
  json: (d) => JSON.parse(d.json()),
  markdown: (d) => d.markdown(),
  text: (d) => d.text(),
  csv: (d) => d.csv(),
};

/**
 * Compares two jobs, each given as `analyze` takes its inputs: resolves to exactly the object
 * `rankscope diff --json BASE NEW` prints (schema `rankscope.diff/1`), or with `output` its
 * Markdown, text or CSV. `floor` is `--floor` (default 0.03); `failOn` the `--fail-on` gates,
 * whose failures are given to `onFail` (`{gate, measured}`); the other options (layout,
 * thresholds, rules, ...) apply to both jobs. Rejects as `analyze` does, when a job has no
 * trace, and on a gate that does not parse.
 */
export async function diff(base, next, opts = {}) {
  if (opts == null || typeof opts !== 'object') opts = {};
  const output = opts.output ?? 'json';
  if (!Object.hasOwn(DIFF_OUTPUTS, output)) throw new TypeError(`output: expected json, markdown, text or csv, got ${output}`);
  const floor = opts.floor ?? 0.03;
  if (typeof floor !== 'number') throw new TypeError(`floor: expected a number, got ${describe(floor)}`);
  const gates = opts.failOn == null ? [] : Array.isArray(opts.failOn) ? opts.failOn.map(String) : [String(opts.failOn)];
  const jobs = [];
  let d = null;
  try {
    for (const inputs of [base, next]) {
      const { w, notes } = await run(inputs, opts, false);
      jobs.push(w);
      if (typeof opts.onNote === 'function') {
        for (const n of notes) opts.onNote(n);
        for (const f of w.failed()) opts.onNote(f.error);
      }
    }
    d = new WasmDiff(jobs[0], jobs[1], floor);
    if (gates.length > 0) {
      const failed = d.failed(gates);
      if (typeof opts.onFail === 'function') for (const f of failed) opts.onFail(f);
    }
    return DIFF_OUTPUTS[output](d);
  } finally {
    d?.free();
    for (const w of jobs) w.free();
  }
}

/** The outputs of `runs`, as `rankscope runs` writes them (`--json` is parsed). */
const RUNS_OUTPUTS = {
  json: (r) => JSON.parse(r.json()),
  markdown: (r) => r.markdown(),
  text: (r) => r.text(),
  csv: (r) => r.csv(),
};

/** A whole count ≥ 1 or a number > 0 from an option, or undefined. */
function stated(name, v, whole) {
  if (v == null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || (whole && !Number.isInteger(v))) {
    throw new TypeError(`${name}: expected ${whole ? 'a whole number ≥ 1' : 'a number > 0'}, got ${describe(v)}`);
  }
  return whole ? BigInt(v) : v;
}

/**
 * Many runs, one line each: resolves to exactly the object `rankscope runs --json RUN...` prints
 * (schema `rankscope.runs/1`), or with `output` its Markdown, text or CSV. `jobs` is a list of
 * runs, each as `analyze` takes its inputs (a path string names its run, as in the CLI; other
 * inputs are called `runs[i]`), or `{ name, inputs }`. `samplesPerStep`, `tokensPerStep` and
 * `peakTflops` are the CLI's `--samples-per-step`, `--tokens-per-step` and `--peak-tflops`; the
 * other options (layout, rules, ...) apply to every run. A run that cannot be read is left out
 * and said through `onNote` (`NAME: why`), as the CLI says it on stderr.
 */
export async function runs(jobs, opts = {}) {
  if (opts == null || typeof opts !== 'object') opts = {};
  if (!Array.isArray(jobs)) throw new TypeError(`jobs: expected an array of runs, got ${describe(jobs)}`);
  const output = opts.output ?? 'json';
  if (!Object.hasOwn(RUNS_OUTPUTS, output)) throw new TypeError(`output: expected json, markdown, text or csv, got ${output}`);
  const samples = stated('samplesPerStep', opts.samplesPerStep, true);
  const tokens = stated('tokensPerStep', opts.tokensPerStep, true);
  const peak = stated('peakTflops', opts.peakTflops, false);
  const note = typeof opts.onNote === 'function' ? opts.onNote : () => {};
  await ready(opts.wasm);
  const table = new WasmRuns();
  try {
    for (const [i, job] of jobs.entries()) {
      const named = job != null && typeof job === 'object' && Object.hasOwn(job, 'inputs') && !Array.isArray(job);
      const inputs = named ? job.inputs : job;
      const name = named && job.name != null ? String(job.name) : typeof inputs === 'string' ? inputs : `runs[${i}]`;
      let w;
      try {
        const done = await run(inputs, opts, false);
        w = done.w;
        for (const n of done.notes) note(n);
        for (const f of w.failed()) note(f.error);
      } catch (e) {
        note(`${name}: ${e && e.message ? e.message : e}`);
        continue;
      }
      try {
        table.add(name, w); // throws "NAME: no trace ..." for dumps alone
      } catch (e) {
        note(e && e.message ? e.message : String(e));
      } finally {
        w.free();
      }
    }
    table.finish(samples, tokens, peak);
    return RUNS_OUTPUTS[output](table);
  } finally {
    table.free();
  }
}

/** The tables `Job.exportTable` writes (`rankscope export`'s, docs/columnar.md). */
export const TABLE_NAMES = Object.freeze(['steps', 'collectives', 'collective_stats', 'groups', 'findings', 'operators', 'events']);

/** Reads a job and keeps each rank's tables for the timeline's questions (see `Job`). */
export async function open(inputs, opts = {}) {
  const { w, notes } = await run(inputs, opts, true);
  return new Job(w, notes);
}

/** A job read by `open`: the CLI's outputs, and each rank's tables. Call `close()` when done. */
export class Job {
  #w;
  #ranks = null;

  constructor(w, notes) {
    this.#w = w;
    /** What the CLI prints on stderr: inputs skipped, logs only the fabric report reads. */
    this.notes = notes;
    /** Inputs that could not be read: `{ file, error }` (the error names the file and byte offset). */
    this.failed = w.failed();
    /** `rankscope analyze` would exit 0: every input read, no job error. */
    this.clean = w.clean();
  }

  #live() {
    if (!this.#w) throw new Error('this job was closed');
    return this.#w;
  }

  /** The `rankscope analyze --json` object. */
  report() {
    return JSON.parse(this.#live().json());
  }

  /** The `rankscope analyze --json` text, byte for byte (64-bit integers exact). */
  json() {
    return this.#live().json();
  }

  /** `rankscope analyze --md`. */
  markdown() {
    return this.#live().markdown();
  }

  /** `rankscope analyze --csv`. */
  csv() {
    return this.#live().csv();
  }

  /**
   * Table `name` of `rankscope export --format FORMAT` (`'parquet'` or `'arrow'`) as the file's
   * bytes, the CLI's byte for byte (docs/columnar.md). `events` and `collectives` need the
   * traces (a job digest holds no events: it throws). `{ redact: true }` replaces the user's
   * names by tokens as `--redact` does (a key drawn once for this job); `{ redactKey }` as
   * `--redact-key KEY` does: the CLI's bytes for the same key (docs/redaction.md).
   */
  exportTable(name, format = 'parquet', opts = {}) {
    if (!TABLE_NAMES.includes(name)) throw new TypeError(`name: expected one of ${TABLE_NAMES.join(', ')}, got ${name}`);
    if (format !== 'parquet' && format !== 'arrow') throw new TypeError(`format: expected parquet or arrow, got ${format}`);
    if (opts === null || typeof opts !== 'object') throw new TypeError('options: expected an object { redact, redactKey }');
    const { redact = false, redactKey } = opts;
    if (typeof redact !== 'boolean') throw new TypeError(`redact: expected a boolean, got ${typeof redact}`);
    if (redactKey !== undefined && (typeof redactKey !== 'string' || redactKey === '')) {
      throw new TypeError('redactKey: expected a non-empty string');
    }
    if (!redact && redactKey === undefined) return this.#live().exportTable(name, format);
    return this.#live().exportTableRedacted(name, format, redactKey);
  }

  /**
   * What `exportTable` with these options keeps, hashes and removes over every table: the
   * statement `rankscope export --redact-key KEY` writes to `redaction.json` (docs/redaction.md).
   * `{ redact: true }`: the job's drawn key, the one `exportTable({ redact: true })` uses.
   */
  redactionStatement(opts = {}) {
    if (opts === null || typeof opts !== 'object') throw new TypeError('options: expected an object { redact, redactKey }');
    const { redact = true, redactKey } = opts;
    if (typeof redact !== 'boolean') throw new TypeError(`redact: expected a boolean, got ${typeof redact}`);
    if (redactKey !== undefined && (typeof redactKey !== 'string' || redactKey === '')) {
      throw new TypeError('redactKey: expected a non-empty string');
    }
    if (!redact && redactKey === undefined) throw new TypeError('redactionStatement: nothing is redacted without { redact } or { redactKey }');
    return JSON.parse(this.#live().redactionStatement(redactKey));
  }

  /** The NCCL text's reports (`{logs, tests}`), or null. */
  fabric() {
    return this.#live().fabric();
  }

  /**
   * Every trace's summary, in load order, with the job's ranks (64-bit fields are bigint). A
   * job digest's ranks have no lanes: it holds no events.
   */
  ranks() {
    if (!this.#ranks) this.#ranks = this.#live().ranks();
    return this.#ranks;
  }

  /** The lanes (CPU threads, GPU streams) of `rank`. */
  lanes(rank) {
    const r = this.ranks().find((s) => s.rank === u32('rank', rank));
    if (!r) throw new Error(`no rank ${rank} with tables in this job`);
    return r.lanes;
  }

  /** Level-of-detail boxes of `lane` of `rank` over `[t0, t1)` (absolute ns) drawn `px` wide. */
  tiles(rank, lane, t0, t1, px) {
    return this.#live().tiles(u32('rank', rank), u32('lane', lane), ns('t0', t0), ns('t1', t1), u32('px', px));
  }

  /** One tile by key: `2^level` ns per pixel, tile `index` of 256 pixels from time 0. */
  tile(rank, lane, level, index) {
    const l = u32('level', level);
    return this.#live().tile(u32('rank', rank), u32('lane', lane), Math.min(l, 255), ns('index', index));
  }

  /**
   * Events whose name contains `query` (case-insensitive). With `{rank}`: that rank's
   * `{total, hits}`; else one `{rank, file, total, hits}` per rank. `limit` hits per rank.
   */
  search(query, { rank, limit = 1000 } = {}) {
    const w = this.#live();
    const lim = u32('limit', limit);
    if (rank !== undefined) return w.search(u32('rank', rank), String(query), lim);
    return this.ranks()
      .filter((s) => s.lanes.length > 0)
      .map((s) => ({ rank: s.rank, file: s.file, ...w.search(s.rank, String(query), lim) }));
  }

  /** Details of the event drawn at `t` (ns) in row `depth` of `lane` of `rank`, or undefined. */
  pick(rank, lane, depth, t, slop = 0n) {
    return this.#live().pick(u32('rank', rank), u32('lane', lane), u32('depth', depth), ns('t', t), ns('slop', slop));
  }

  /** Frees the tables (wasm memory). */
  close() {
    if (this.#w) {
      this.#w.free();
      this.#w = null;
    }
  }
}
