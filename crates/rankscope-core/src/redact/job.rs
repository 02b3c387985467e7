//! Redaction of a job: the strings it holds gathered ([`gather_job`]), the job rewritten in
//! place for the exports ([`redact_job`]), the job's output rewritten for the reports
//! ([`redact_output`]).

use serde_json::Value;

use super::{vocab, Kind, Redactor, Verdict};
use crate::analyze::Analysis;
use crate::job::JobOutput;
use crate::model::{RawArgs, StringTable};
use crate::normalize::Job;

/// Why a job could not be redacted (the CLI writes nothing then).
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    #[error("the redacted analysis does not read back: {0}")]
    ReadBack(String),
}

/// Meets every string a job held whole holds: its string table (every event, category, lane,
/// group name of every rank), every rank's file, host, trace and process names, and process
/// groups' descriptions.
pub fn gather_job(r: &mut Redactor, job: &Job) {
    for (_, s) in job.strings.iter() {
        r.consider(s);
    }
    for e in &job.ranks {
        let t = &e.trace;
        r.hide_file(&t.source);
        let m = &t.meta;
        if let Some(h) = &m.host_name {
            r.hide(h, Kind::Host);
        }
        if let Some(f) = &m.in_file {
            r.hide_file(&f.file);
        }
        for s in m.trace_name.iter().chain(m.process_names.iter().map(|p| &p.1)) {
            r.consider(s);
        }
        for (_, s) in &m.process_labels {
            r.consider(s);
        }
        for g in m.distributed.iter().flat_map(|d| &d.pg_config) {
            for s in std::iter::once(&g.name).chain(&g.desc) {
                if !s.is_empty() && s.parse::<i64>().is_err() {
                    r.consider(s);
                }
            }
        }
    }
}

/// Rewrites a job in place for the exports: every hashed string of its table becomes its
/// token (the ids stay: the table is rebuilt in id order), every rank's file its token, its
/// host and process names theirs, and its source args pass [`redact_args`]. The analysis was
/// made before: no figure changes.
pub fn redact_job(r: &mut Redactor, job: &mut Job) {
    let mut table = StringTable::new();
    for (id, s) in job.strings.iter() {
        let want = r.exact(s).unwrap_or(s).to_string();
        let mut got = table.intern(&want);
        let mut n = 1;
        // A token equal to a name kept elsewhere in the table: the ids must not move.
        while got != id && n < 64 {
            n += 1;
            got = table.intern(&format!("{want}~{n}"));
        }
    }
    if table.len() == job.strings.len() {
        job.strings = table;
    }
    for e in &mut job.ranks {
        let t = &mut e.trace;
        t.source = r.exact(&t.source).unwrap_or(&t.source).to_string();
        let m = &mut t.meta;
        if let Some(h) = &mut m.host_name {
            *h = r.exact(h).unwrap_or(h).to_string();
        }
        if let Some(f) = &mut m.in_file {
            f.file = r.exact(&f.file).unwrap_or(&f.file).to_string();
        }
        for s in m.trace_name.iter_mut().chain(m.process_names.iter_mut().map(|p| &mut p.1)) {
            *s = r.exact(s).unwrap_or(s).to_string();
        }
        if let Some(raw) = t.raw_args.take() {
            t.raw_args = Some(redact_raw_args(r, &raw));
        }
    }
}

/// Every row's source args redacted ([`redact_args`]); a row whose args do not parse as JSON
/// is written without them (`source_args: "not kept"`) and counted as removed.
fn redact_raw_args(r: &mut Redactor, raw: &RawArgs) -> RawArgs {
    let mut out = RawArgs::default();
    for i in 0..raw.rows() {
        match raw.get(i) {
            None => out.push_copy(None),
            Some(b) => match serde_json::from_slice::<Value>(b) {
                Ok(mut v) => {
                    redact_args(r, &mut v);
                    out.push_copy(Some(serde_json::to_string(&v).unwrap_or_default().as_bytes()));
                }
                Err(_) => {
                    r.removed("source args that were not JSON", 1);
                    out.push_copy(None);
                }
            },
        }
    }
    out
}

/// The keys of Kineto's args whose names are public; any other key is hashed (`arg-…`).
const PUBLIC_ARG_KEYS: &[&str] = &[
    "External id",
    "Ev Idx",
    "correlation",
    "Record function id",
    "Sequence number",
    "Fwd thread id",
    "Input Dims",
    "Input type",
    "Input Strides",
    "Concrete Inputs",
    "Python id",
    "Python parent id",
    "Python thread",
    "Trace name",
    "Trace iteration",
    "device",
    "context",
    "stream",
    "queued",
    "grid",
    "block",
    "registers per thread",
    "shared memory",
    "blocks per SM",
    "warps per SM",
    "est. achieved occupancy %",
    "bytes",
    "memory bandwidth (GB/s)",
    "cbid",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "In split size",
    "Out split size",
    "Group size",
    "dtype",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Rank",
    "Global rank start",
    "Global rank stride",
    "Seq",
    "Profiler Event Index",
    "Addr",
    "Device Id",
    "Device Type",
    "Bytes",
    "Total Allocated",
    "Total Reserved",
    "Op count",
    "kind",
    "sort_index",
    "name",
    "labels",
    "priority",
    "flops",
    "overload_name",
    "pg_id",
    "algorithm",
    "protocol",
    "channels",
    "nThreads",
];

/// Source args redacted: public keys kept, others hashed; numbers, booleans and null kept
/// (ids, sizes, shapes, launch figures); strings judged ([`vocab::judge_arg`]); Python call
/// stacks hashed frame by frame.
pub fn redact_args(r: &mut Redactor, v: &mut Value) {
    let Value::Object(o) = v else { return };
    let old = std::mem::take(o);
    for (k, mut x) in old {
        let key = if PUBLIC_ARG_KEYS.contains(&k.as_str()) {
            k.clone()
        } else {
            r.hide(&k, Kind::Arg);
            r.exact(&k).unwrap_or(&k).to_string()
        };
        arg_value(r, &k, &mut x);
        o.insert(key, x);
    }
}

fn arg_value(r: &mut Redactor, key: &str, v: &mut Value) {
    match v {
        Value::String(s) => {
            if let Verdict::Hash(kind) = vocab::judge_arg(key, s) {
                r.hide(s, kind);
            }
            if let Some(t) = r.exact(s) {
                *s = t.to_string();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| arg_value(r, key, x)),
        Value::Object(_) => redact_args(r, v),
        _ => {}
    }
}

/// Rewrites a job's output for the reports: the names of its analysis gathered (files and
/// hosts whatever they look like), the analysis redacted as a value and read back (an enum
/// value equal to a hashed name is taken back out of the hashed set, as rankscope's own
/// vocabulary, and the value redacted again), the failed files' names redacted, the fabric
/// report's hosts hidden. The Flight Recorder report is removed: its stacks and groups are
/// not redacted yet.
pub fn redact_output(r: &mut Redactor, out: &mut JobOutput) -> Result<(), RedactError> {
    let plain = serde_json::to_value(&out.analysis).map_err(|e| RedactError::ReadBack(e.to_string()))?;
    r.gather_value(&plain);
    if let Some(f) = &out.fabric {
        if let Ok(v) = serde_json::to_value(f) {
            r.gather_value(&v);
        }
    }
    for f in &out.failed {
        r.hide_file(&f.file);
    }
    let mut tries = 0;
    out.analysis = loop {
        let mut v = plain.clone();
        r.value(&mut v);
        // Read back from bytes, not from the value: every shell reads an analysis from bytes
        // (baselines, digests), and one deserializer for the whole `Analysis` tree is 1 MB
        // less of the page's wasm than two (BENCHMARKS.md, "What the page's wasm is made of").
        let bytes = serde_json::to_vec(&v).map_err(|e| RedactError::ReadBack(e.to_string()))?;
        match serde_json::from_slice::<Analysis>(&bytes) {
            Ok(a) => break a,
            Err(e) => {
                let msg = e.to_string();
                let word = msg.split('`').nth(1).unwrap_or_default().to_string();
                let original = r.original_of(&word).unwrap_or(&word).to_string();
                tries += 1;
                if tries > 64 || !r.unhide(&original) {
                    return Err(RedactError::ReadBack(msg));
                }
            }
        }
    };
    for f in &mut out.failed {
        f.file = r.text(&f.file);
        f.error = r.text(&f.error);
    }
    if let Some(fr) = out.flight_recorder.take() {
        r.removed("Flight Recorder report (its stacks are not redacted yet)", fr.dumps.len() as u64);
        out.flight_recorder = None;
    }
    Ok(())
}
