// TypeScript declarations of the `rankscope` package's API (index.js, node.js). The shapes of
// what the tables answer (RankSummary, Tile, Found, EventDetail, ...) are wasm-bindgen's, in
// rankscope_wasm.d.ts; 64-bit integers in them are `bigint`.

import type {
  EventDetail,
  Found,
  InputKind,
  LaneSummary,
  RankSummary,
  Tile,
} from './rankscope_wasm.js';

export type {
  EventDetail,
  Found,
  Hit,
  InputKind,
  LaneSummary,
  RankSummary,
  Tile,
  TileKey,
} from './rankscope_wasm.js';

/** Bytes of one input, read in chunks (never as one buffer or string by the package). */
export type InputData =
  | Blob
  | ReadableStream<Uint8Array>
  | Uint8Array
  | ArrayBuffer
  | ArrayBufferView
  | AsyncIterable<Uint8Array>
  /** Node only: a path to a file or a directory (walked as `rankscope analyze DIR` walks it). */
  | string;

/**
 * One input: a trace (Kineto JSON, gzipped or not), an NCCL_DEBUG log, nccl-tests output or a
 * Flight Recorder dump, decided by content. A `File` is named by `file.name`; bare bytes and
 * streams without a name are called `input<i>` (i: their position).
 */
export type Input = InputData | File | { name?: string; data: InputData };

export interface ProgressEvent {
  /** The input's name. */
  file: string;
  /** Its position among the inputs (after folders are expanded), and how many there are. */
  index: number;
  files: number;
  /** Bytes read so far, and the input's size when known (Blob, file, bytes). */
  bytes: number;
  size: number | null;
  /** Trace events parsed so far. */
  events: number;
  /** What the input is, once its first 64 KiB were seen. */
  kind: InputKind | null;
  /** The input is read to its end. */
  done: boolean;
}

export interface Options {
  /** Called at most every 100 ms per input, and once when each input is done. */
  onProgress?: (p: ProgressEvent) => void;
  /** `analyze` only: each note and failed input, as the CLI prints them on stderr. */
  onNote?: (message: string) => void;
  /** `--threshold NAME=VALUE` (docs/analysis-schema.md lists the names). */
  thresholds?: Record<string, number> | Map<string, number> | [string, number][];
  /** `--offset RANK=NS`: a known clock offset (aligned time = rank time − ns). */
  offsets?:
    | Record<number, bigint | number | string>
    | Map<number, bigint | number | string>
    | [number, bigint | number | string][];
  /** `--rank FILE=N`: an input's whole name, or a trailing path part of it, to its rank. */
  ranks?: Record<string, number> | Map<string, number> | [string, number][];
  /** `--rules`: classification rules (JSON text or object) tried before the defaults. */
  rules?: string | object;
  /** `--layout`: the parallel layout when the traces do not say it: `tp=2,pp=4,dp=8`
   * (Megatron-LM's rank order) or a DeviceMesh `mesh:pp=2,dp=4,tp=2` (last dimension fastest). */
  layout?: string;
  /** The .wasm to load instead of the one beside the module (bytes, URL, Module). */
  wasm?: BufferSource | URL | string | WebAssembly.Module;
}

/** The `rankscope.analysis` report (docs/analysis-schema.md), or `rankscope.fr` for dumps alone. */
export interface Report {
  schema: 'rankscope.analysis' | 'rankscope.fr';
  schema_version: number;
  [field: string]: unknown;
}

/** A file that could not be read; the error names the file and the byte offset. */
export interface FailedInput {
  file: string;
  error: string;
}

/**
 * Analyses a job: exactly the object `rankscope analyze --json` prints for the same inputs.
 * Inputs that are not ours never fail the job (see `Job.failed`, `Job.notes`, `onNote`).
 * Rejects on bad options, an explicit rank naming no input, or when no input is a trace or a
 * Flight Recorder dump.
 */
export function analyze(inputs: Input | Input[] | FileList, options?: Options): Promise<Report>;

/** The `rankscope.diff/1` document (docs/diff-schema.md): what `rankscope diff --json` prints. */
export interface DiffReport {
  schema: 'rankscope.diff/1';
  verdict: {
    change: 'slower' | 'faster' | 'no_change' | 'cannot_tell';
    /** The first line of every output: what changed and why, or `no change beyond noise: ...`. */
    line: string;
    [field: string]: unknown;
  };
  step_time: { beyond_noise: boolean; [field: string]: unknown };
  config: Record<string, unknown>[];
  figures: Record<string, unknown>[];
  regions: Record<string, unknown>[];
  collectives: Record<string, unknown>[];
  findings: Record<string, unknown>[];
  [field: string]: unknown;
}

/** A `failOn` gate that failed, with the change it measured (a share of the base's median
 * step, ns, or a count). */
export interface FailedGate {
  gate: string;
  measured: number;
}

export interface DiffOptions extends Options {
  /** `--floor`: the smallest change that counts, as a share of the base's median step (0.03). */
  floor?: number;
  /** `--fail-on` gates (`step_time>+5%`, `new_findings>0`, ...); each that fails goes to `onFail`. */
  failOn?: string | string[];
  onFail?: (failed: FailedGate) => void;
  /** What to resolve to: the `--json` object (default), or the `--md`, text or `--csv` output. */
  output?: 'json' | 'markdown' | 'text' | 'csv';
}

type Inputs = Input | Input[] | FileList;

/**
 * Compares two jobs (each given as `analyze` takes its inputs): exactly the object
 * `rankscope diff --json BASE NEW` prints for the same inputs. The options other than the
 * diff's apply to both jobs.
 */
export function diff(base: Inputs, next: Inputs, options?: DiffOptions & { output?: 'json' }): Promise<DiffReport>;
export function diff(base: Inputs, next: Inputs, options: DiffOptions & { output: 'markdown' | 'text' | 'csv' }): Promise<string>;

/** The `rankscope.runs/1` document (docs/diff-schema.md, "Many runs"): what `rankscope runs --json` prints. */
export interface RunsReport {
  schema: 'rankscope.runs/1';
  /** One record per run, in the order given. */
  runs: Record<string, unknown>[];
  /** Runs of one model at several world sizes: `{ model, params, points }` (absent when none). */
  scaling?: { model: string; params: bigint | number; points: Record<string, unknown>[] }[];
  [field: string]: unknown;
}

export interface RunsOptions extends Options {
  /** `--samples-per-step`: the global batch of every run, when the traces cannot say. */
  samplesPerStep?: number;
  /** `--tokens-per-step`. */
  tokensPerStep?: number;
  /** `--peak-tflops`: one device's peak dense TFLOP/s, for MFU. */
  peakTflops?: number;
  /** What to resolve to: the `--json` object (default), or the `--md`, text or `--csv` output. */
  output?: 'json' | 'markdown' | 'text' | 'csv';
}

/** A run of `runs`: its inputs (a path string names the run), or a name and the inputs. */
type RunInputs = Inputs | { name?: string; inputs: Inputs };

/**
 * Many runs, one line each: exactly the object `rankscope runs --json RUN...` prints for the
 * same runs. A run that cannot be read is left out and said through `onNote`.
 */
export function runs(jobs: RunInputs[], options?: RunsOptions & { output?: 'json' }): Promise<RunsReport>;
export function runs(jobs: RunInputs[], options: RunsOptions & { output: 'markdown' | 'text' | 'csv' }): Promise<string>;

/** Reads a job and keeps each rank's tables for the timeline's questions. */
export function open(inputs: Input | Input[] | FileList, options?: Options): Promise<Job>;

/** Loads the wasm now (optionally from elsewhere); `analyze` and `open` call it. */
export function ready(wasm?: BufferSource | URL | string | WebAssembly.Module): Promise<void>;

/** Bytes fed to the core per call for inputs in memory or read from paths (4 MiB). */
export const CHUNK_BYTES: number;

/** A table of `rankscope export` (docs/columnar.md). */
export type TableName = 'steps' | 'collectives' | 'collective_stats' | 'groups' | 'findings' | 'operators' | 'events';
/** Parquet, or the Arrow IPC file format (Feather v2). */
export type TableFormat = 'parquet' | 'arrow';
/**
 * How `Job.exportTable` redacts (docs/redaction.md): `redact` replaces the user's names, paths,
 * hosts and groups by tokens under a key drawn once for the job (`rankscope export --redact`);
 * `redactKey` (implies `redact`) under a key of yours: the CLI's bytes for the same key
 * (`--redact-key`). Every number stays.
 */
export interface ExportTableOptions { redact?: boolean; redactKey?: string; }
/**
 * What a redaction kept, hashed and removed (`rankscope export --redact`'s `redaction.json`):
 * `key` is `per_run` (a key drawn for the job) or `given` (`redactKey`); `hashed` counts the
 * distinct strings hashed by kind (`name`, `frame`, `path`, `file`, `host`, `ip`, `arg`).
 */
export interface RedactionStatement {
  key: 'per_run' | 'given';
  kept_names: number;
  hashed: Record<string, number>;
  removed: Record<string, number>;
  always_kept: string[];
}
/** The tables `Job.exportTable` writes, in the CLI's order. */
export const TABLE_NAMES: readonly TableName[];

export class Job {
  private constructor();
  /** What the CLI prints on stderr: inputs skipped, NCCL logs only the fabric report reads. */
  readonly notes: string[];
  /** Inputs that could not be read. */
  readonly failed: FailedInput[];
  /** `rankscope analyze` would exit 0: every input read and no job error. */
  readonly clean: boolean;
  /** The `rankscope analyze --json` object. */
  report(): Report;
  /** The `rankscope analyze --json` text, byte for byte (64-bit integers exact). */
  json(): string;
  /** `rankscope analyze --md`. */
  markdown(): string;
  /** `rankscope analyze --csv`. */
  csv(): string;
  /**
   * Table `name` of `rankscope export --format FORMAT` as the file's bytes, the CLI's byte for
   * byte (docs/columnar.md). `events` and `collectives` need the traces: a job digest throws.
   */
  exportTable(name: TableName, format?: TableFormat, opts?: ExportTableOptions): Uint8Array;
  /** What `exportTable` with these options keeps, hashes and removes over every table (`redaction.json`). */
  redactionStatement(opts?: ExportTableOptions): RedactionStatement;
  /** What the NCCL text says (`rankscope nccl --json`, `rankscope nccl-tests --json`), or null. */
  fabric(): { logs: Record<string, unknown> | null; tests: Record<string, unknown> | null } | null;
  /**
   * Every trace's summary, in load order, with the job's ranks. A job digest's ranks come from
   * its parts: no lanes (a digest holds no events, so no tiles, search or pick).
   */
  ranks(): RankSummary[];
  /** The lanes (CPU threads, GPU streams) of a rank. */
  lanes(rank: number): LaneSummary[];
  /** Level-of-detail boxes of a lane over `[t0, t1)` (absolute ns) drawn `px` pixels wide. */
  tiles(rank: number, lane: number, t0: bigint | number, t1: bigint | number, px: number): Tile[];
  /** One tile: `2^level` ns per pixel, tile `index` of 256 pixels counted from time 0. */
  tile(rank: number, lane: number, level: number, index: bigint | number): Tile;
  /** One rank's events whose name contains `query` (case-insensitive). */
  search(query: string, options: { rank: number; limit?: number }): Found;
  /** Every rank's that has tables. */
  search(query: string, options?: { limit?: number }): (Found & { rank: number; file: string })[];
  /** The event drawn at `t` in row `depth` of a lane, within `slop` ns. */
  pick(rank: number, lane: number, depth: number, t: bigint | number, slop?: bigint | number): EventDetail | undefined;
  /** Frees the tables. */
  close(): void;
}
