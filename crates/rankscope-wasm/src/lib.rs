//! rankscope's JavaScript API: a thin wasm-bindgen layer over `rankscope-core`'s job path, the
//! one every shell takes (`session::Session` over `job`): one `JobInput` per input, fed in
//! chunks of any size and read by content; a `Job` that takes them and answers with exactly the
//! CLI's outputs, and, when it kept the tables, the timeline's questions.
//!
//! ```js
//! import init, { Job, JobInput } from "./rankscope_wasm.js";
//! await init();
//! const job = new Job(true);                       // keep each rank's tables
//! const input = new JobInput(file.name);
//! for await (const chunk of file.stream()) input.feed(chunk);
//! job.add(input, false);                           // { file, kind, error, skipped }
//! job.finish();
//! job.json(); job.markdown(); job.csv();           // `rankscope analyze --json / --md / --csv`
//! job.ranks(); job.tiles(rank, lane, t0, t1, px);  // RankSummary[], Tile[]
//! ```
//!
//! Every value crosses as a plain JS object (serde-wasm-bindgen). **64-bit integers are
//! `bigint`** (`i64`/`u64`/`usize` fields: absolute nanosecond times exceed 2^53, where a JS number stops
//! being exact); `u32`, `u8` and `f64` fields are numbers. The shapes are declared in the
//! TypeScript output (`rankscope_wasm.d.ts`) and checked by the wasm-bindgen tests. The npm
//! package `rankscope` (`npm/`, docs/npm.md) wraps it.
//!
//! No logic lives here: what an input is, ranks, the analysis, the outputs and the tiles are the
//! core's; this crate only converts.

use serde::Serialize;
use wasm_bindgen::prelude::*;

mod diff;
mod job;
mod runs;
pub use diff::Diff;
pub use job::{detect_kind, is_folder_candidate, sniff_bytes, Job, JobInput};
pub use runs::Runs;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = Math)]
    fn random() -> f64;
}

/// Runs when the module is instantiated: the string tables' hash keys from `Math.random` (the
/// core has no source of randomness; an input author cannot know these bits).
#[wasm_bindgen(start)]
fn seed_table_keys() {
    let bits = |x: f64| (x * 9_007_199_254_740_992.0) as u64; // 53 random bits
    rankscope_core::model::strings::seed_table_keys(bits(random()) ^ bits(random()).rotate_left(29));
}

/// Serializes to a plain JS value: maps as objects, 64-bit integers as `bigint`.
pub(crate) fn to_js<T: Serialize + ?Sized>(v: &T) -> Result<JsValue, JsError> {
    let s = serde_wasm_bindgen::Serializer::json_compatible().serialize_large_number_types_as_bigints(true);
    v.serialize(&s).map_err(|e| JsError::new(&e.to_string()))
}

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &'static str = r#"
/** How far ingest of one file has come. */
export interface Progress { input_bytes: bigint; text_bytes: bigint; events: bigint; }

/** A problem of a file that did not stop its reading (the inspect report's diagnostics). */
export interface Diagnostic {
  kind: string; severity: "info" | "repaired" | "data_loss" | "error"; count: bigint;
  first_offset: bigint | null; message: string;
}
export interface LaneSummary { lane: number; gpu: boolean; label: string; events: number; depth: number; }
export interface StepSpan { step: number; start_ns: bigint; end_ns: bigint; }
export interface DeviceSummary { id: bigint; name: string; }
/** One rank, as the app's views see it (figures of the `rankscope.inspect` report). */
export interface RankSummary {
  file: string; rank: number; rank_source: "user" | "distributed_info" | "file_name" | "load_order";
  claimed_rank: bigint | null; world_size: bigint | null; backend: string | null;
  nccl_version: string | null; host_name: string | null; devices: DeviceSummary[]; gzip: boolean;
  input_bytes: bigint; text_bytes: bigint; span_start_ns: bigint; span_end_ns: bigint;
  events: bigint; rows: bigint; gpu_ops: bigint; comm_kernels: bigint; steps: StepSpan[];
  steps_synthetic: boolean; lanes: LaneSummary[]; diagnostics: Diagnostic[]; hidden_events: bigint;
  /** The allocator's `[memory]` samples per device (absent without `profile_memory`). */
  memory?: MemoryTrack[];
}
/** One device's memory samples in a few figures (device -1: the host). */
export interface MemoryTrack {
  device: number; samples: bigint; first_ns: bigint; last_ns: bigint; max_allocated: bigint;
  max_reserved: bigint | null; relative: boolean;
}
export interface TileKey { lane: number; level: number; index: bigint; }
/** Level-of-detail boxes of one lane over one tile of time (columns; times absolute ns). */
export interface Tile {
  key: TileKey; depth: number[]; start_ns: bigint[]; end_ns: bigint[]; class: number[];
  count: number[]; label: number[]; event: number[]; labels: string[];
}
export interface EventDetail {
  event: number; name: string; cat: string; class: string; class_id: number; instant: boolean;
  start_ns: bigint; dur_ns: bigint; step: number | null; gpu: boolean; launch: string | null;
  link: { name: string; place: Hit } | null; args: [string, string][];
}
export interface Hit { lane: number; depth: number; start_ns: bigint; end_ns: bigint; }
export interface Found { total: bigint; hits: Hit[]; }
"#;
