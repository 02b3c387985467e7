//! One file for the whole job (`rankscope synth --merged`): the ranks' documents merged as a
//! Perfetto / Chrome merge tool writes a distributed job's timeline, the shape rankscope reads
//! as its ranks (docs/metrics.md, "One file, several ranks").
//!
//! Every event of rank r goes to process r (`pid` = rank): its host process and its GPU
//! devices become one process, whose GPU streams keep their stream as `tid` (the CPU threads'
//! ids are the OS's, far above any stream number). With `named`, each process is named
//! `rank r` (a `process_name` event after the rank's own, which the readers let win).
//! The top level is rank 0's (its `distributedInfo` says rank 0: a merge tool keeps one).
//! Times are put on the job's true clock (rank r's `ranks[].clock_offset_ns` taken off its
//! events): one file, one clock, as a merge of one host's ranks or an aligned export writes it
//! (the readers take a file's ranks to share its clock).

use serde::Serialize;
use serde_json::Value;

/// The truth of a merged file (the manifest's `merged`).
#[derive(Debug, Clone, Serialize)]
pub struct ManifestMerged {
    /// The one trace file.
    pub file: String,
    /// Ranks in it; rank r's events are process r's.
    pub ranks: u32,
    pub pid_is_rank: bool,
    /// Whether each process is named `rank r`.
    pub named: bool,
}

/// The documents `docs[r]` (rank r's, as [`crate::write_ranks`] writes them) merged into one
/// (see the module doc).
/// `offsets_ns[r]` is rank r's clock offset (its trace shows true time + offset), taken off its
/// events' times.
pub fn merge(docs: &[Vec<u8>], offsets_ns: &[i64], named: bool) -> Result<Vec<u8>, serde_json::Error> {
    let mut events: Vec<Value> = Vec::new();
    let mut top = serde_json::Map::new();
    for (r, doc) in docs.iter().enumerate() {
        let v: Value = serde_json::from_slice(doc)?;
        let Value::Object(mut o) = v else { continue };
        let evs = match o.remove("traceEvents") {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        };
        if r == 0 {
            top = o;
        }
        let off = offsets_ns.get(r).copied().unwrap_or(0);
        for mut e in evs {
            if let Some(m) = e.as_object_mut() {
                m.insert("pid".into(), Value::from(r as u64));
                // µs with three decimals: exact in an f64 at these magnitudes (< 2^53 ns).
                if let Some(ts) = m.get("ts").and_then(Value::as_f64).filter(|_| off != 0) {
                    let ns = (ts * 1000.0).round() as i64 - off;
                    m.insert("ts".into(), Value::from(ns as f64 / 1000.0));
                }
            }
            events.push(e);
        }
        if named {
            events.push(serde_json::json!({
                "ph": "M", "name": "process_name", "pid": r as u64, "tid": 0, "args": {"name": format!("rank {r}")}
            }));
        }
    }
    top.insert("traceEvents".into(), Value::Array(events));
    serde_json::to_vec(&Value::Object(top))
}
