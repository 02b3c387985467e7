//! rankscope's JavaScript API: a thin wasm-bindgen layer over `rankscope-core`.
//!
//! ```js
//! import init, { Ingest, JobBuilder, demoRank } from "./rankscope_wasm.js";
//! await init();
//! const ingest = new Ingest(file.name);
//! for await (const chunk of file.stream()) ingest.feed(chunk);   // any chunk size
//! const rank = ingest.finish();          // throws when the file is not a trace at all
//! rank.summary();                        // RankSummary: counts, steps, lanes, diagnostics
//! rank.tile(lane, level, index);         // Tile: level-of-detail boxes for the timeline
//! rank.search("nccl");                   // Found: events whose name contains the query
//!
//! // The analysis, as `rankscope analyze` makes it: one part per rank, then the job.
//! const decisions = decideRanks(ranks.map((r) => claimOf(r.summary())));
//! ranks.forEach((r, i) => r.applyDecision(decisions[i]));
//! const job = analyzeParts(ranks.map((r) => r.analysisPart()));
//! job.report(); job.json(); job.csv(); job.markdown();
//! ```
//!
//! Every value crosses as a plain JS object (serde-wasm-bindgen). **64-bit integers are
//! `bigint`** (`i64`/`u64`/`usize` fields: absolute nanosecond times exceed 2^53, where a JS number stops
//! being exact); `u32`, `u8` and `f64` fields are numbers. The shapes are declared in the
//! TypeScript output (`rankscope_wasm.d.ts`) and checked by the wasm-bindgen tests.
//!
//! The job API the npm package is built on (`JobInput`, `Job`: any mix of traces, NCCL text and
//! Flight Recorder dumps, by content, giving exactly `rankscope analyze`'s outputs) is in
//! [`job`](mod@job).
//!
//! No logic lives here: ingest, normalization, reports, tiles and the demo generator are the
//! core's; this crate only converts.

use rankscope_core::analyze::{self, report, Analysis, RankPart};
use rankscope_core::inspect::{self, FailedFile};
use rankscope_core::model::RankTrace;
use rankscope_core::normalize::{assemble, Rules};
use rankscope_core::parse::FileIngest;
use rankscope_core::view::{self, RankClaim, RankSummary, RankView, TileKey};
use rankscope_synth::{self as synth, SynthConfig};
use serde::Serialize;
use wasm_bindgen::prelude::*;

mod job;
pub use job::{detect_kind, is_folder_candidate, sniff_bytes, Job, JobInput};

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
}
export interface JobFacts {
  ranks: bigint; world_sizes: bigint[]; missing_ranks: number[]; duplicate_ranks: number[];
  backends: string[]; devices: [string, bigint][]; steps: number[]; steps_synthetic: boolean;
  span_start_ns: bigint; span_end_ns: bigint; events: bigint; input_bytes: bigint;
}
export interface RankClaim { file: string; claimed_rank: bigint | number | null; }
export interface RankDecision {
  rank: number; rank_source: "user" | "distributed_info" | "file_name" | "load_order"; diagnostics: Diagnostic[];
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
/** This rank's half of the analysis (`analyze::rank_part`): pass it back to `analyzeParts`. */
export type RankPart = Record<string, unknown>;
/** The `rankscope.analysis` report (docs/analysis-schema.md). */
export interface AnalysisReport {
  schema: "rankscope.analysis"; schema_version: number; ranks: Record<string, unknown>[];
  steps: Record<string, unknown>[]; rank_totals: Record<string, unknown>[];
  alignment: Record<string, unknown>[]; collectives: Record<string, unknown>[];
  findings: Record<string, unknown>[]; [field: string]: unknown;
}
/** The `rankscope.inspect` report (docs/inspect-schema.md). */
export interface InspectReport {
  schema: "rankscope.inspect"; schema_version: number; files: Record<string, unknown>[];
  failed: { file: string; error: string }[]; job: Record<string, unknown>;
}
"#;

/// Ingest of one file, fed in chunks of any size (gzip is recognised by content).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Ingest {
    name: String,
    inner: Option<FileIngest>,
}

#[wasm_bindgen]
impl Ingest {
    /// `name` is the file name: it is used in messages and to find the rank in it.
    #[wasm_bindgen(constructor)]
    pub fn new(name: &str) -> Ingest {
        Ingest { name: name.to_string(), inner: Some(FileIngest::new(name)) }
    }

    /// Feeds the next chunk of the file's bytes.
    pub fn feed(&mut self, chunk: &[u8]) {
        if let Some(f) = self.inner.as_mut() {
            f.feed(chunk);
        }
    }

    #[wasm_bindgen(unchecked_return_type = "Progress")]
    pub fn progress(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.as_ref().map(FileIngest::progress).unwrap_or_default())
    }

    /// True once the input was found not to be a trace (stop reading; `finish` will throw).
    pub fn failed(&self) -> bool {
        self.inner.as_ref().is_some_and(FileIngest::failed)
    }

    /// Ends the input and normalizes the rank. Throws when the file is not a trace at all (the
    /// message names the file and the byte offset); every lesser problem is a diagnostic.
    pub fn finish(&mut self) -> Result<Rank, JsError> {
        let trace = self.take()?;
        Ok(Rank { view: RankView::new(trace, &Rules::default()) })
    }
}

impl Ingest {
    fn take(&mut self) -> Result<RankTrace, JsError> {
        let f = self.inner.take().ok_or_else(|| JsError::new(&format!("{}: already finished", self.name)))?;
        f.finish().map_err(|e| JsError::new(&e.to_string()))
    }
}

/// One rank, normalized on its own (its rank decided from this file alone; see `decideRanks`).
#[wasm_bindgen]
#[derive(Debug)]
pub struct Rank {
    view: RankView,
}

#[wasm_bindgen]
impl Rank {
    #[wasm_bindgen(unchecked_return_type = "RankSummary")]
    pub fn summary(&self) -> Result<JsValue, JsError> {
        to_js(&self.view.summary())
    }

    /// This file's entry of the `rankscope.inspect` report.
    #[wasm_bindgen(unchecked_return_type = "Record<string, unknown>")]
    pub fn inspect(&self) -> Result<JsValue, JsError> {
        to_js(&self.view.inspect())
    }

    /// Level-of-detail boxes of `lane` for tile `index` at `level` (`2^level` ns per pixel).
    #[wasm_bindgen(unchecked_return_type = "Tile")]
    pub fn tile(&self, lane: u32, level: u8, index: i64) -> Result<JsValue, JsError> {
        to_js(&self.view.tile(TileKey { lane, level, index }))
    }

    /// Events whose name contains `query` (case-insensitive): the count and the first `limit`.
    #[wasm_bindgen(unchecked_return_type = "Found")]
    pub fn search(&self, query: &str, limit: u32) -> Result<JsValue, JsError> {
        to_js(&self.view.search(query, limit as usize))
    }

    /// Puts the job-level rank decision (from `decideRanks` over every file) into this rank.
    #[wasm_bindgen(js_name = applyDecision)]
    pub fn apply_decision(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "RankDecision")] decision: JsValue,
    ) -> Result<(), JsError> {
        let d: view::RankDecision = serde_wasm_bindgen::from_value(decision)?;
        self.view.apply_decision(&d);
        Ok(())
    }

    /// This rank's half of the analysis (after `applyDecision`).
    #[wasm_bindgen(js_name = analysisPart, unchecked_return_type = "RankPart")]
    pub fn analysis_part(&self) -> Result<JsValue, JsError> {
        let p = self.view.analysis_part().ok_or_else(|| JsError::new("no rank"))?;
        to_js(&p)
    }

    /// The event drawn at `t_ns` in row `depth` of `lane`, within `slop_ns`; `undefined` if none.
    #[wasm_bindgen(unchecked_return_type = "EventDetail | undefined")]
    pub fn pick(&self, lane: u32, depth: u32, t_ns: i64, slop_ns: i64) -> Result<JsValue, JsError> {
        match self.view.pick(lane, depth, t_ns, slop_ns) {
            Some(d) => to_js(&d),
            None => Ok(JsValue::UNDEFINED),
        }
    }
}

/// Several files assembled into one job on one thread (as the CLI does), for the full
/// `rankscope.inspect` report.
#[wasm_bindgen]
#[derive(Debug, Default)]
pub struct JobBuilder {
    traces: Vec<RankTrace>,
    failed: Vec<FailedFile>,
}

#[wasm_bindgen]
impl JobBuilder {
    #[wasm_bindgen(constructor)]
    pub fn new() -> JobBuilder {
        JobBuilder::default()
    }

    /// Finishes `ingest` and adds its trace; a file that is not a trace is recorded as failed
    /// (and listed in the report) rather than thrown.
    pub fn add(&mut self, ingest: &mut Ingest) {
        match ingest.inner.take().map(FileIngest::finish) {
            Some(Ok(t)) => self.traces.push(t),
            Some(Err(e)) => self.failed.push(FailedFile { file: ingest.name.clone(), error: e.to_string() }),
            None => {}
        }
    }

    /// Assembles the job and returns its `rankscope.inspect` report. The builder is emptied.
    #[wasm_bindgen(unchecked_return_type = "InspectReport")]
    pub fn inspect(&mut self) -> Result<JsValue, JsError> {
        let job = assemble(std::mem::take(&mut self.traces), &[], &Rules::default());
        to_js(&inspect::report(&job, std::mem::take(&mut self.failed)))
    }
}

/// The analysis of a job, combined from every rank's part (`rankscope analyze`).
#[wasm_bindgen]
#[derive(Debug)]
pub struct JobAnalysis {
    analysis: Analysis,
}

#[wasm_bindgen]
impl JobAnalysis {
    /// The `rankscope.analysis` report as a JS object.
    #[wasm_bindgen(unchecked_return_type = "AnalysisReport")]
    pub fn report(&self) -> Result<JsValue, JsError> {
        to_js(&self.analysis)
    }

    /// The report as `rankscope analyze --json` prints it.
    pub fn json(&self) -> Result<String, JsError> {
        serde_json::to_string_pretty(&self.analysis)
            .map(|s| s + "\n")
            .map_err(|e| JsError::new(&e.to_string()))
    }

    /// `rankscope analyze --csv`: the rank × step table.
    pub fn csv(&self) -> String {
        report::csv(&self.analysis)
    }

    /// `rankscope analyze --md`: the report a person reads.
    pub fn markdown(&self) -> String {
        rankscope_core::diagnose::markdown::markdown(&self.analysis)
    }
}

/// Combines the parts of every rank (`Rank.analysisPart()`, any order) into the job's analysis,
/// with the default options, as `rankscope analyze` does.
#[wasm_bindgen(js_name = analyzeParts)]
pub fn analyze_parts(
    #[wasm_bindgen(unchecked_param_type = "RankPart[]")] parts: JsValue,
) -> Result<JobAnalysis, JsError> {
    let parts: Vec<RankPart> = serde_wasm_bindgen::from_value(parts)?;
    Ok(JobAnalysis {
        analysis: rankscope_core::diagnose::combine(parts, Vec::new(), &analyze::Options::default()),
    })
}

/// Decides every file's rank from the claims of all files, in load order, as the CLI does.
#[wasm_bindgen(js_name = decideRanks, unchecked_return_type = "RankDecision[]")]
pub fn decide_ranks(
    #[wasm_bindgen(unchecked_param_type = "RankClaim[]")] claims: JsValue,
) -> Result<JsValue, JsError> {
    let claims: Vec<RankClaim> = serde_wasm_bindgen::from_value(claims)?;
    to_js(&rankscope_core::job::decide(&claims, &[]).0)
}

/// Job facts (ranks, world size, backends, devices, steps, span) from per-rank summaries.
#[wasm_bindgen(js_name = jobFacts, unchecked_return_type = "JobFacts")]
pub fn job_facts(
    #[wasm_bindgen(unchecked_param_type = "RankSummary[]")] summaries: JsValue,
) -> Result<JsValue, JsError> {
    let s: Vec<RankSummary> = serde_wasm_bindgen::from_value(summaries)?;
    to_js(&view::JobFacts::from_ranks(&s))
}

/// Ranks of the built-in demo job (synthetic: made by rankscope's own generator).
#[wasm_bindgen(js_name = demoRanks)]
pub fn demo_ranks() -> u32 {
    SynthConfig::default().ranks
}

/// The trace file of rank `rank` of the built-in synthetic demo job (Kineto JSON bytes).
#[wasm_bindgen(js_name = demoRank)]
pub fn demo_rank(rank: u32) -> Result<Vec<u8>, JsError> {
    let mut out = Vec::new();
    synth::write_rank(&SynthConfig::default(), rank, &mut out).map_err(|e| JsError::new(&e.to_string()))?;
    Ok(out)
}

/// The conventional file name of a demo rank (`rank3.pt.trace.json`).
#[wasm_bindgen(js_name = demoFileName)]
pub fn demo_file_name(rank: u32) -> String {
    synth::file_name(rank, false)
}
