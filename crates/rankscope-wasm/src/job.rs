//! The job API the npm package `rankscope` is built on (`rankscope_core::session` over
//! `rankscope_core::job`): one `JobInput` per input, fed in chunks; a `Job` that takes them,
//! then answers with the CLI's outputs and, when it kept the tables, the timeline's questions.
//!
//! ```js
//! const job = new Job(true);                 // keep each rank's tables (tiles, search, pick)
//! job.setThreshold("exposed_comm_ratio", 0.15); job.setOffset(3, 1200n); job.setRank("a.json", 0);
//! const input = new JobInput("rank0.json");
//! for await (const chunk of file.stream()) input.feed(chunk);
//! job.add(input, false);                     // → { file, kind, error, skipped }; never throws
//! job.finish();                              // throws only when nothing could be read
//! job.json();                                // byte for byte `rankscope analyze --json`
//! ```

use rankscope_core::job::{self, Reader};
use rankscope_core::session::{Finished, Session};
use rankscope_core::view::TileKey;
use wasm_bindgen::prelude::*;

use crate::to_js;

#[wasm_bindgen(typescript_custom_section)]
const TS_JOB_TYPES: &'static str = r#"
/** What an input was read as. */
export type InputKind = "trace" | "nccl_log" | "nccl_tests" | "flight_recorder" | "digest" | "metrics" | "nccl_ras" | "nccl_inspector" | "step_log";
/** What became of one input given to `Job.add`. */
export interface Added {
  file: string; kind: InputKind | null; error: string | null; skipped: boolean;
}
/** A file that could not be read (the message names the file and byte offset). */
export interface FailedInput { file: string; error: string; }
/** A table of `rankscope export` (docs/columnar.md). */
export type TableName = "steps" | "collectives" | "collective_stats" | "groups" | "findings" | "operators" | "events";
/** A columnar file format: Parquet, or the Arrow IPC file format (Feather v2). */
export type TableFormat = "parquet" | "arrow";
"#;

/// One input of a job, fed in chunks of any size: what it is is decided by its content.
#[wasm_bindgen]
#[derive(Debug)]
pub struct JobInput {
    reader: Option<Reader>,
}

#[wasm_bindgen]
impl JobInput {
    /// `name` names the input in every message (and gives the rank when it holds one).
    #[wasm_bindgen(constructor)]
    pub fn new(name: &str) -> JobInput {
        JobInput { reader: Some(Reader::new(name)) }
    }

    /// Feeds the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        if let Some(r) = self.reader.as_mut() {
            r.feed(chunk);
        }
    }

    /// What the input is, once its first 64 KiB (or its end) were seen; `undefined` before.
    #[wasm_bindgen(unchecked_return_type = "InputKind | undefined")]
    pub fn kind(&self) -> Result<JsValue, JsError> {
        match self.reader.as_ref().and_then(Reader::kind) {
            Some(k) => to_js(&k),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// True once the input is known not to be anything the job reads (stop feeding).
    pub fn failed(&self) -> bool {
        self.reader.as_ref().is_some_and(Reader::failed)
    }

    #[wasm_bindgen(unchecked_return_type = "Progress")]
    pub fn progress(&self) -> Result<JsValue, JsError> {
        to_js(&self.reader.as_ref().map(Reader::progress).unwrap_or_default())
    }
}

/// A job: inputs added one by one, then finished into the CLI's outputs.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Job {
    session: Option<Session>,
    done: Option<Finished>,
    /// The key of `exportTable`'s redaction without a key of the user's: drawn once, so the
    /// tables of one job agree with each other (`rankscope export --redact`'s run key).
    run_key: std::cell::Cell<Option<rankscope_core::redact::Key>>,
}

#[wasm_bindgen]
impl Job {
    /// `keepTables`: keep each rank's normalized tables for `tiles`, `search` and `pick` (else
    /// only its analysis part is kept, and memory is one rank's tables at a time).
    #[wasm_bindgen(constructor)]
    pub fn new(keep_tables: bool) -> Job {
        Job { session: Some(Session::new(keep_tables)), done: None, run_key: std::cell::Cell::new(None) }
    }

    fn session(&mut self) -> Result<&mut Session, JsError> {
        self.session
            .as_mut()
            .ok_or_else(|| JsError::new("the job is finished: inputs and options come before finish()"))
    }

    fn done(&self) -> Result<&Finished, JsError> {
        self.done.as_ref().ok_or_else(|| JsError::new("the job is not finished: call finish() first"))
    }

    /// The job's trace analysis, for a comparison (`which` names the job in the error).
    pub(crate) fn traces(&self, which: &str) -> Result<&rankscope_core::analyze::Analysis, JsError> {
        let out = &self.done().map_err(|_| JsError::new(&format!("{which}: the job is not finished")))?.out;
        if !out.has_traces() {
            return Err(JsError::new(&format!("{which}: no trace to compare (Flight Recorder dumps alone)")));
        }
        Ok(&out.analysis)
    }

    /// `--threshold NAME=VALUE`; throws on an unknown name or a value that is not finite.
    #[wasm_bindgen(js_name = setThreshold)]
    pub fn set_threshold(&mut self, name: &str, value: f64) -> Result<(), JsError> {
        self.session()?.options_mut().thresholds.set(name, value).map_err(|e| JsError::new(&e))
    }

    /// `--layout LAYOUT` (`tp=2,pp=4,dp=8`, or `mesh:pp=2,dp=4,tp=2`); throws when it does not
    /// parse.
    #[wasm_bindgen(js_name = setLayout)]
    pub fn set_layout(&mut self, layout: &str) -> Result<(), JsError> {
        let l = rankscope_core::analyze::layout::UserLayout::parse(layout)
            .map_err(|e| JsError::new(&format!("layout {layout}: {e}")))?;
        self.session()?.options_mut().layout = Some(l);
        Ok(())
    }

    /// `--offset RANK=NS`: aligned time = rank time − `ns`.
    #[wasm_bindgen(js_name = setOffset)]
    pub fn set_offset(&mut self, rank: u32, ns: i64) -> Result<(), JsError> {
        self.session()?.options_mut().offsets.push((rank, ns));
        Ok(())
    }

    /// `--rank FILE=N`: `file` is an input's whole name or a trailing path part of it.
    #[wasm_bindgen(js_name = setRank)]
    pub fn set_rank(&mut self, file: &str, rank: u32) -> Result<(), JsError> {
        self.session()?.set_rank(file, rank);
        Ok(())
    }

    /// `--rules`: classification rules (JSON text) tried before the defaults.
    #[wasm_bindgen(js_name = setRules)]
    pub fn set_rules(&mut self, json: &str) -> Result<(), JsError> {
        self.session()?.set_user_rules(json).map_err(|e| JsError::new(&e.to_string()))
    }

    /// Ends `input` and takes it into the job. `walked`: found by walking a folder (a file that
    /// is not ours is then skipped with a note instead of failed). Never throws for bad input.
    #[wasm_bindgen(unchecked_return_type = "Added")]
    pub fn add(&mut self, input: &mut JobInput, walked: bool) -> Result<JsValue, JsError> {
        let reader = input.reader.take().ok_or_else(|| JsError::new("this input was already added"))?;
        let added = self.session()?.add(reader, walked);
        to_js(&added)
    }

    /// Records an input that could not be read (an I/O error): it is listed in `failed()`.
    #[wasm_bindgen(unchecked_return_type = "Added")]
    pub fn fail(&mut self, file: &str, error: &str) -> Result<JsValue, JsError> {
        let added = self.session()?.fail(file, error);
        to_js(&added)
    }

    /// Decides ranks and combines. Throws when an explicit rank names no input, or when no
    /// input could be read as a trace or a Flight Recorder dump.
    pub fn finish(&mut self) -> Result<(), JsError> {
        let s = self.session.take().ok_or_else(|| JsError::new("the job is already finished"))?;
        self.done = Some(s.finish().map_err(|e| JsError::new(&e.to_string()))?);
        Ok(())
    }

    /// `rankscope analyze --json`.
    pub fn json(&self) -> Result<String, JsError> {
        Ok(self.done()?.out.json())
    }

    /// `rankscope analyze --md`.
    pub fn markdown(&self) -> Result<String, JsError> {
        Ok(self.done()?.out.markdown())
    }

    /// `rankscope analyze --csv` (the traces' rank × step table).
    pub fn csv(&self) -> Result<String, JsError> {
        Ok(self.done()?.out.csv())
    }

    /// What the NCCL text says (`rankscope nccl` / `rankscope nccl-tests` as JSON objects), or
    /// `null` without NCCL text.
    #[wasm_bindgen(
        unchecked_return_type = "{ logs: Record<string, unknown> | null; tests: Record<string, unknown> | null } | null"
    )]
    pub fn fabric(&self) -> Result<JsValue, JsError> {
        to_js(&self.done()?.out.fabric)
    }

    /// What the CLI prints on stderr: inputs skipped, logs only the fabric report reads, dumps
    /// left out.
    #[wasm_bindgen(unchecked_return_type = "string[]")]
    pub fn notes(&self) -> Result<JsValue, JsError> {
        to_js(&self.done()?.notes)
    }

    /// Inputs that could not be read.
    #[wasm_bindgen(unchecked_return_type = "FailedInput[]")]
    pub fn failed(&self) -> Result<JsValue, JsError> {
        to_js(&self.done()?.out.failed)
    }

    /// Exit status 0 of `rankscope analyze`: every input read, no job error.
    pub fn clean(&self) -> Result<bool, JsError> {
        Ok(self.done()?.out.clean())
    }

    /// Table `name` of `rankscope export --format FORMAT` as the file's bytes (the CLI's, byte
    /// for byte). `events` and `collectives` need the job's tables (`new Job(true)`) and are
    /// refused for a job digest; throws on an unknown name or format.
    #[wasm_bindgen(js_name = exportTable)]
    pub fn export_table(
        &self,
        #[wasm_bindgen(unchecked_param_type = "TableName")] name: &str,
        #[wasm_bindgen(unchecked_param_type = "TableFormat")] format: &str,
    ) -> Result<Vec<u8>, JsError> {
        let (table, format) = table_and_format(name, format)?;
        self.done()?.table(table, format).map_err(|e| JsError::new(&e.to_string()))
    }

    /// [`Job::export_table`] redacted as `rankscope export --redact-key KEY` redacts it (the
    /// CLI's bytes for the same key); without `key`, under a key drawn once for this job, as
    /// `--redact` alone (tokens agree across this job's tables only).
    #[wasm_bindgen(js_name = exportTableRedacted)]
    pub fn export_table_redacted(
        &self,
        #[wasm_bindgen(unchecked_param_type = "TableName")] name: &str,
        #[wasm_bindgen(unchecked_param_type = "TableFormat")] format: &str,
        key: Option<String>,
    ) -> Result<Vec<u8>, JsError> {
        use rankscope_core::redact::Key;
        let (table, format) = table_and_format(name, format)?;
        let key = match key {
            Some(k) => Key::from_phrase(&k),
            None => {
                let k = self.run_key.get().unwrap_or_else(Key::per_run);
                self.run_key.set(Some(k));
                k
            }
        };
        self.done()?.redacted_table(table, format, key).map_err(|e| JsError::new(&e.to_string()))
    }

    /// What redacting every table under the key (as [`Job::export_table_redacted`] takes it)
    /// keeps, hashes and removes: `rankscope export --redact-key KEY`'s `redaction.json`.
    /// As JSON text: its counts are plain numbers, as in the CLI's file.
    #[wasm_bindgen(js_name = redactionStatement)]
    pub fn redaction_statement(&self, key: Option<String>) -> Result<String, JsError> {
        use rankscope_core::redact::Key;
        let key = match key {
            Some(k) => Key::from_phrase(&k),
            None => {
                let k = self.run_key.get().unwrap_or_else(Key::per_run);
                self.run_key.set(Some(k));
                k
            }
        };
        let st = self.done()?.redaction_statement(key).map_err(|e| JsError::new(&e.to_string()))?;
        Ok(st.json())
    }

    /// The kept ranks' summaries, in load order, with the job's ranks (a job digest's ranks,
    /// from its parts: no lanes, as it holds no events).
    #[wasm_bindgen(unchecked_return_type = "RankSummary[]")]
    pub fn ranks(&self) -> Result<JsValue, JsError> {
        to_js(&self.done()?.summaries())
    }

    fn view(&self, rank: u32) -> Result<&rankscope_core::view::RankView, JsError> {
        self.done()?
            .view(rank)
            .ok_or_else(|| JsError::new(&format!("no rank {rank} with tables in this job")))
    }

    /// The level-of-detail tiles of `lane` of `rank` covering `[t0, t1)` (absolute ns) drawn
    /// `px` pixels wide.
    #[wasm_bindgen(unchecked_return_type = "Tile[]")]
    pub fn tiles(&self, rank: u32, lane: u32, t0: i64, t1: i64, px: u32) -> Result<JsValue, JsError> {
        let t = self.done()?.tiles(rank, lane, t0, t1, px).map_err(|e| JsError::new(&e.to_string()))?;
        to_js(&t)
    }

    /// One tile by its key (`2^level` ns per pixel, tile `index` of 256 pixels).
    #[wasm_bindgen(unchecked_return_type = "Tile")]
    pub fn tile(&self, rank: u32, lane: u32, level: u8, index: i64) -> Result<JsValue, JsError> {
        to_js(&self.view(rank)?.tile(TileKey { lane, level, index }))
    }

    /// Events of `rank` whose name contains `query` (case-insensitive): the count and the
    /// first `limit`.
    #[wasm_bindgen(unchecked_return_type = "Found")]
    pub fn search(&self, rank: u32, query: &str, limit: u32) -> Result<JsValue, JsError> {
        to_js(&self.view(rank)?.search(query, limit as usize))
    }

    /// The event drawn at `t` in row `depth` of `lane` of `rank`, within `slop` ns.
    #[wasm_bindgen(unchecked_return_type = "EventDetail | undefined")]
    pub fn pick(&self, rank: u32, lane: u32, depth: u32, t: i64, slop: i64) -> Result<JsValue, JsError> {
        match self.view(rank)?.pick(lane, depth, t, slop) {
            Some(d) => to_js(&d),
            None => Ok(JsValue::UNDEFINED),
        }
    }
}

/// A table's name and a format's, as `exportTable` takes them; an error names what is allowed.
fn table_and_format(
    name: &str,
    format: &str,
) -> Result<(rankscope_core::export::columnar::TableName, rankscope_core::export::columnar::Format), JsError>
{
    use rankscope_core::export::columnar::{Format, TableName};
    let table = TableName::ALL.iter().copied().find(|t| t.as_str() == name).ok_or_else(|| {
        let names: Vec<&str> = TableName::ALL.iter().map(|t| t.as_str()).collect();
        JsError::new(&format!("no table `{name}` (the tables: {})", names.join(", ")))
    })?;
    let format = match format {
        "parquet" => Format::Parquet,
        "arrow" => Format::Arrow,
        f => return Err(JsError::new(&format!("format: expected parquet or arrow, got {f}"))),
    };
    Ok((table, format))
}

/// The tables `exportTable` writes, in the CLI's order.
#[wasm_bindgen(js_name = tableNames, unchecked_return_type = "TableName[]")]
pub fn table_names() -> Result<JsValue, JsError> {
    let names: Vec<&str> =
        rankscope_core::export::columnar::TableName::ALL.iter().map(|t| t.as_str()).collect();
    to_js(&names)
}

/// Whether a file of this name found in a walked folder is an input (`.json`, `.json.gz`,
/// `.log`, `.txt`, `.out`, any case); Flight Recorder dumps of any name are found by content
/// (`detectKind`).
#[wasm_bindgen(js_name = isFolderCandidate)]
pub fn is_folder_candidate(name: &str) -> bool {
    job::is_folder_candidate(name)
}

/// What an input is from its first 64 KiB (`head`), as `JobInput` decides it.
#[wasm_bindgen(js_name = detectKind, unchecked_return_type = "InputKind")]
pub fn detect_kind(head: &[u8]) -> Result<JsValue, JsError> {
    to_js(&job::detect(head))
}

/// Bytes of a file's start that decide what it is.
#[wasm_bindgen(js_name = sniffBytes)]
pub fn sniff_bytes() -> u32 {
    job::SNIFF_BYTES as u32
}
